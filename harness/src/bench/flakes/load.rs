//! `--load`: a bounded CPU burner ([`Burner`]) that keeps the machine's CPUs busy while the
//! runs go on, the way a loaded CI runner or a second job would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

/// A fixed number of threads that spin until the burner is dropped. Dropping it (when the
/// runs end, and on a panic or a stop, which drop the command) stops and joins every thread;
/// threads cannot outlive the process either, so nothing is left running.
#[derive(Debug)]
pub struct Burner {
    stop: Arc<AtomicBool>,
    spins: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Burner {
    /// Starts `threads` busy threads.
    pub fn start(threads: usize) -> std::io::Result<Self> {
        let mut burner = Self {
            stop: Arc::new(AtomicBool::new(false)),
            spins: Arc::new(AtomicU64::new(0)),
            threads: Vec::with_capacity(threads),
        };
        for i in 0..threads {
            let (stop, spins) = (burner.stop.clone(), burner.spins.clone());
            // On an error, dropping `burner` stops the threads already started.
            let thread = std::thread::Builder::new()
                .name(format!("burner-{i}"))
                .spawn(move || burn(&stop, &spins))?;
            burner.threads.push(thread);
        }
        Ok(burner)
    }

    /// How many threads burn.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Rounds of work done so far, all threads together.
    pub fn spins(&self) -> u64 {
        self.spins.load(Ordering::Relaxed)
    }
}

/// Busy work until `stop`: a little arithmetic the optimizer cannot drop, then a look at the
/// flag.
fn burn(stop: &AtomicBool, spins: &AtomicU64) {
    let mut x: u64 = 1;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        spins.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burner_spins_until_dropped_and_then_stops_every_thread() {
        let burner = Burner::start(2).unwrap();
        assert_eq!(burner.threads(), 2);
        let spins = burner.spins.clone();
        let started = std::time::Instant::now();
        while spins.load(Ordering::Relaxed) < 10 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the burner does no work"
            );
            std::thread::yield_now();
        }
        drop(burner);
        // Every thread was joined: the count no longer moves.
        let after = spins.load(Ordering::Relaxed);
        std::thread::yield_now();
        assert_eq!(spins.load(Ordering::Relaxed), after);
        assert_eq!(
            Arc::strong_count(&spins),
            1,
            "a thread still holds the counter"
        );
    }
}
