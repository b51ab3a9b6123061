//! Progress output for long work (builds, cluster bring-up): [`Progress`] draws spinners on a
//! terminal and prints plain, rate-limited lines elsewhere (CI logs).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Terminal,
    Plain,
    Silent,
}

/// Where progress goes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Progress {
    mode: Mode,
}

impl Progress {
    /// Spinners when stderr is a terminal, plain lines otherwise.
    pub fn stderr() -> Self {
        let mode = if std::io::stderr().is_terminal() {
            Mode::Terminal
        } else {
            Mode::Plain
        };
        Self { mode }
    }

    /// Plain lines on stderr (good for test logs).
    pub fn plain() -> Self {
        Self { mode: Mode::Plain }
    }

    /// Nothing at all.
    pub fn silent() -> Self {
        Self { mode: Mode::Silent }
    }

    /// Prints one line.
    pub fn line(&self, msg: &str) {
        if self.mode != Mode::Silent {
            eprintln!("{msg}");
        }
    }

    /// Starts a task shown until finished.
    pub fn task(&self, title: &str) -> Task {
        let bar = match self.mode {
            Mode::Terminal => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix} [{elapsed}] {wide_msg}")
                        .expect("valid template"),
                );
                bar.set_prefix(title.to_string());
                bar.enable_steady_tick(Duration::from_millis(120));
                Some(Arc::new(bar))
            }
            Mode::Plain => {
                eprintln!("{title} ...");
                None
            }
            Mode::Silent => None,
        };
        Task {
            bar,
            title: title.to_string(),
            mode: self.mode,
            timed: None,
        }
    }

    /// Starts a task expected to take `estimate`: on a terminal a bar that fills over the
    /// estimate with the time left; in plain mode its notes say how far it is.
    pub fn timed(&self, title: &str, estimate: Duration) -> Task {
        let bar = match self.mode {
            Mode::Terminal => {
                let bar = ProgressBar::new(estimate.as_secs().max(1));
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix} [{elapsed}] {bar:24} ~{eta} left (estimate) {wide_msg}",
                    )
                    .expect("valid template"),
                );
                bar.set_prefix(title.to_string());
                bar.enable_steady_tick(Duration::from_millis(500));
                Some(Arc::new(bar))
            }
            Mode::Plain => {
                eprintln!("{title} (estimate ~{}) ...", minutes(estimate));
                None
            }
            Mode::Silent => None,
        };
        Task {
            bar,
            title: title.to_string(),
            mode: self.mode,
            timed: Some((Instant::now(), estimate)),
        }
    }
}

/// One running task of a [`Progress`].
#[derive(Debug)]
pub struct Task {
    bar: Option<Arc<ProgressBar>>,
    title: String,
    mode: Mode,
    /// For a task with an expected duration: when it started, and that duration.
    timed: Option<(Instant, Duration)>,
}

/// A duration as a person reads it: `45 s`, `12 min`.
pub fn minutes(d: Duration) -> String {
    match d.as_secs() {
        s if s < 90 => format!("{s} s"),
        s => format!("{} min", (s + 30) / 60),
    }
}

/// How far a task expected to take `estimate` is after `elapsed`: `3 min of ~12 min, ~9 min
/// left`, or, past its estimate, `14 min, over its ~12 min estimate`.
pub fn eta(elapsed: Duration, estimate: Duration) -> String {
    let min = minutes;
    match estimate.checked_sub(elapsed) {
        Some(left) if !left.is_zero() => format!(
            "{} of ~{}, ~{} left",
            min(elapsed),
            min(estimate),
            min(left)
        ),
        _ => format!("{}, over its ~{} estimate", min(elapsed), min(estimate)),
    }
}

impl Task {
    /// Replaces the transient status (spinner only); a timed task's bar moves on.
    pub fn set(&self, msg: &str) {
        if let Some(bar) = &self.bar {
            if let Some((start, estimate)) = self.timed {
                // Held just short of full past the estimate: only finishing fills it.
                let at = start
                    .elapsed()
                    .as_secs()
                    .min(estimate.as_secs().saturating_sub(1));
                bar.set_position(at);
            }
            bar.set_message(msg.to_string());
        }
    }

    /// A status worth a line in a log (printed in plain mode, with how far a timed task is).
    pub fn note(&self, msg: &str) {
        match self.mode {
            Mode::Plain => match self.timed {
                Some((start, estimate)) => {
                    eprintln!("{}: {msg} ({})", self.title, eta(start.elapsed(), estimate))
                }
                None => eprintln!("{}: {msg}", self.title),
            },
            Mode::Terminal => self.set(msg),
            Mode::Silent => {}
        }
    }

    /// Ends the task with a final line.
    pub fn finish(self, msg: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.mode != Mode::Silent {
            eprintln!("{msg}");
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_counts_down_then_says_it_is_over() {
        let m = |s| Duration::from_secs(s);
        assert_eq!(eta(m(180), m(720)), "3 min of ~12 min, ~9 min left");
        assert_eq!(eta(m(30), m(60)), "30 s of ~60 s, ~30 s left");
        assert_eq!(eta(m(840), m(720)), "14 min, over its ~12 min estimate");
        assert_eq!(eta(m(720), m(720)), "12 min, over its ~12 min estimate");
    }
}
