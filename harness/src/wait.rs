//! The one way the harness waits. A condition is a [`Check`] (met, pending with the mismatch,
//! or failed for good), combined with [`Check::and`], [`Check::or`] and [`Check::not`].
//! [`until`] re-evaluates a condition on every change of a watched object (and on a one-second
//! tick, for conditions that also look at other objects); [`until_all`] does the same for every
//! object of a watched list (a namespace's pods), coalescing bursts of changes; [`poll`] re-evaluates one on a fixed
//! interval, for what has no watch (a TCP port, a health endpoint, a process). Every wait is
//! bounded by a timeout given at the call site, runs in a `wait` tracing span, and on timeout
//! reports the last mismatch seen, never just "timed out". States that follow one another in
//! time (marked, then recovered) are a [`Sequence`] recorded as the evaluations see them, not
//! a conjunction that must hold at one instant.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tracing::Instrument;

/// The verdict of one evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The condition holds.
    Met,
    /// Not yet: what was seen instead (expected vs actual).
    Pending(String),
    /// It can no longer hold (a refusal, a Warning event, an API error): stop now.
    Failed(String),
}

impl Check {
    /// `Met` if `ok`, else `Pending(mismatch())`.
    pub fn when(ok: bool, mismatch: impl FnOnce() -> String) -> Self {
        if ok {
            Check::Met
        } else {
            Check::Pending(mismatch())
        }
    }

    /// `Met` on `Ok`, `Pending` with the error otherwise.
    pub fn from_result(r: Result<(), String>) -> Self {
        match r {
            Ok(()) => Check::Met,
            Err(e) => Check::Pending(e),
        }
    }

    /// Both must hold; the first non-met verdict is returned.
    pub fn and(self, other: Check) -> Check {
        match self {
            Check::Met => other,
            not_met => not_met,
        }
    }

    /// Either may hold: met if one is; failed only if both failed; otherwise pending with
    /// what each side saw.
    pub fn or(self, other: Check) -> Check {
        match (self, other) {
            (Check::Met, _) | (_, Check::Met) => Check::Met,
            (Check::Failed(a), Check::Failed(b)) => Check::Failed(format!("{a}; and {b}")),
            (Check::Pending(a), Check::Pending(b)) => Check::Pending(format!("{a}; and {b}")),
            (Check::Pending(p), Check::Failed(_)) | (Check::Failed(_), Check::Pending(p)) => {
                Check::Pending(p)
            }
        }
    }

    /// The condition must not hold: `mismatch` says what holding looks like. A failure stays a
    /// failure.
    pub fn not(self, mismatch: impl FnOnce() -> String) -> Check {
        match self {
            Check::Met => Check::Pending(mismatch()),
            Check::Pending(_) => Check::Met,
            failed @ Check::Failed(_) => failed,
        }
    }
}

/// States that follow one another, each recorded the first time an evaluation sees it after
/// the one before it, with the time since the sequence began: for what a loaded machine
/// passes through in turn (a subset marked unschedulable, later recovered), which one
/// condition over a single instant can miss. Keep it in the state of a [`until`] check and
/// [`observe`](Self::observe) each evaluation; [`check`](Self::check) is met once every state
/// was seen in order.
#[derive(Debug, Clone)]
pub struct Sequence {
    started: tokio::time::Instant,
    /// Each state and when it was first seen (after the ones before it).
    states: Vec<(String, Option<Duration>)>,
}

impl Sequence {
    /// The states to see, in order; the clock starts now.
    pub fn new<S: Into<String>>(states: impl IntoIterator<Item = S>) -> Self {
        Self {
            started: tokio::time::Instant::now(),
            states: states.into_iter().map(|s| (s.into(), None)).collect(),
        }
    }

    /// Records one evaluation: `now[i]` says whether state `i` holds at this instant. The first
    /// state not seen yet is recorded if it holds, and so is each following one that also
    /// holds now; a state never counts before the ones ahead of it.
    pub fn observe(&mut self, now: &[bool]) {
        let at = self.started.elapsed();
        for (state, holds) in self
            .states
            .iter_mut()
            .zip(now)
            .skip_while(|(s, _)| s.1.is_some())
        {
            if !holds {
                break;
            }
            state.1 = Some(at);
        }
    }

    /// Whether state `i` was seen (in order).
    pub fn seen(&self, i: usize) -> bool {
        self.states.get(i).is_some_and(|s| s.1.is_some())
    }

    /// Met once every state was seen in order; otherwise pending with what was seen when and
    /// what is awaited.
    pub fn check(&self) -> Check {
        Check::when(self.states.iter().all(|s| s.1.is_some()), || {
            self.to_string()
        })
    }
}

impl std::fmt::Display for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (state, at)) in self.states.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", then " };
            match at {
                Some(at) => write!(f, "{sep}{state} (seen at {:.1} s)", at.as_secs_f64())?,
                None => write!(f, "{sep}{state} (not seen yet)")?,
            }
        }
        Ok(())
    }
}

/// A timed-out or failed wait.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The bound passed.
    #[error("timed out after {timeout:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The bound.
        timeout: Duration,
        /// The last mismatch.
        last: String,
    },
    /// The condition failed for good.
    #[error("{what}: {reason}")]
    Failed {
        /// What was waited for.
        what: String,
        /// Why.
        reason: String,
    },
    /// The watch itself failed.
    #[error("watch for {what}")]
    Watch {
        /// What was waited for.
        what: String,
        /// Cause.
        #[source]
        source: watcher::Error,
    },
}

/// Total time this process has spent inside [`until`] within [`measured`] futures (scenario
/// bodies): a metric for `harness bench run`, the share of scenario time spent waiting on the
/// controller. Waits of one scenario that overlap (several objects awaited at once) count once:
/// the time at least one of them was running. Waits of cluster bring-up and controller installs
/// are not counted.
static WAITED_MICROS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The waits running in one [`measured`] future: how many, and since when at least one.
#[derive(Debug, Default)]
struct Waiting {
    depth: u32,
    since: Option<std::time::Instant>,
}

tokio::task_local! {
    static MEASURED: std::cell::RefCell<Waiting>;
}

/// Runs `f` with its [`until`] waits counted in [`waited`].
pub async fn measured<F: std::future::Future>(f: F) -> F::Output {
    MEASURED
        .scope(std::cell::RefCell::new(Waiting::default()), f)
        .await
}

/// See [`WAITED_MICROS`].
pub fn waited() -> Duration {
    Duration::from_micros(WAITED_MICROS.load(std::sync::atomic::Ordering::Relaxed))
}

/// One running wait.
struct Timed;

impl Timed {
    fn start() -> Self {
        let _ = MEASURED.try_with(|w| {
            let mut w = w.borrow_mut();
            if w.depth == 0 {
                w.since = Some(std::time::Instant::now());
            }
            w.depth += 1;
        });
        Timed
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        let _ = MEASURED.try_with(|w| {
            let mut w = w.borrow_mut();
            w.depth = w.depth.saturating_sub(1);
            if w.depth == 0
                && let Some(since) = w.since.take()
            {
                WAITED_MICROS.fetch_add(
                    since.elapsed().as_micros() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
        });
    }
}

/// Waits until `check` is met, evaluating it now and then every `every`: for conditions with
/// nothing to watch (a port accepting connections, a health endpoint, a process staying up).
pub async fn poll<F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> Result<(), WaitError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Check>,
{
    let span = tracing::debug_span!("wait", what, ?timeout);
    async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = String::from("nothing observed yet");
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(WaitError::Timeout { what: what.into(), timeout, last });
                }
            }
            match check().await {
                Check::Met => return Ok(()),
                Check::Pending(m) => last = m,
                Check::Failed(reason) => {
                    return Err(WaitError::Failed {
                        what: what.into(),
                        reason,
                    });
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// Waits until `check` is met for object `name` of `api` (None while it does not exist).
pub async fn until<K, F>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    mut check: F,
) -> Result<Option<K>, WaitError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(Option<K>) -> BoxFuture<'static, Check>,
{
    let span = tracing::debug_span!("wait", what, object = name, ?timeout);
    watch_until(api, name, what, timeout, &mut check)
        .instrument(span)
        .await
}

async fn watch_until<K, F>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: &mut F,
) -> Result<Option<K>, WaitError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(Option<K>) -> BoxFuture<'static, Check>,
{
    let _timed = Timed::start();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher(api.clone(), config).boxed();
    let mut current: Option<K> = None;
    // Nothing is judged before the initial list has arrived: until then "absent" means
    // "not seen yet", not "gone".
    let mut synced = false;
    let mut last = String::from("nothing observed yet");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => current = Some(o),
                Some(Ok(watcher::Event::Delete(_))) => current = None,
                Some(Ok(watcher::Event::Init)) => {}
                Some(Ok(watcher::Event::InitDone)) => synced = true,
                Some(Err(source)) => return Err(WaitError::Watch { what: what.into(), source }),
                None => {}
            },
            _ = tick.tick() => {}
            _ = tokio::time::sleep_until(deadline) => {
                return Err(WaitError::Timeout { what: what.into(), timeout, last });
            }
        }
        if !synced {
            continue;
        }
        match check(current.clone()).await {
            Check::Met => return Ok(current),
            Check::Pending(m) => last = m,
            Check::Failed(reason) => {
                return Err(WaitError::Failed {
                    what: what.into(),
                    reason,
                });
            }
        }
    }
}

/// Waits until `check` is met for the objects of `api` that `config` selects (a namespace's
/// pods), re-evaluated after changes (at most every 200 ms, so bursts coalesce) and on a
/// one-second tick; the check is given the objects as they are, by name.
pub async fn until_all<K, F>(
    api: &Api<K>,
    config: watcher::Config,
    what: &str,
    timeout: Duration,
    mut check: F,
) -> Result<Vec<K>, WaitError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(Vec<K>) -> BoxFuture<'static, Check>,
{
    let span = tracing::debug_span!("wait", what, ?timeout);
    async move {
        let _timed = Timed::start();
        let mut stream = watcher(api.clone(), config).boxed();
        let mut objects: std::collections::BTreeMap<String, K> = Default::default();
        let mut synced = false;
        let mut last = String::from("nothing observed yet");
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut idle = 0u32;
        let mut changed = true;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            tokio::select! {
                ev = stream.next() => {
                    match ev {
                        Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                            objects.insert(o.meta().name.clone().unwrap_or_default(), o);
                        }
                        Some(Ok(watcher::Event::Delete(o))) => {
                            objects.remove(o.meta().name.as_deref().unwrap_or_default());
                        }
                        Some(Ok(watcher::Event::Init)) => objects.clear(),
                        Some(Ok(watcher::Event::InitDone)) => synced = true,
                        Some(Err(source)) => return Err(WaitError::Watch { what: what.into(), source }),
                        None => {}
                    }
                    changed = true;
                    continue;
                }
                _ = tick.tick() => idle += 1,
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(WaitError::Timeout { what: what.into(), timeout, last });
                }
            }
            if !synced || !(changed || idle >= 5) {
                continue;
            }
            (changed, idle) = (false, 0);
            match check(objects.values().cloned().collect()).await {
                Check::Met => return Ok(objects.into_values().collect()),
                Check::Pending(m) => last = m,
                Check::Failed(reason) => return Err(WaitError::Failed { what: what.into(), reason }),
            }
        }
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {

    #[tokio::test]
    async fn overlapping_waits_of_a_scenario_count_once() {
        let before = waited();
        let t = std::time::Instant::now();
        measured(async {
            let a = Timed::start();
            let b = Timed::start();
            std::thread::sleep(Duration::from_millis(20));
            drop(a);
            std::thread::sleep(Duration::from_millis(20));
            drop(b);
        })
        .await;
        let whole = t.elapsed();
        let counted = waited() - before;
        // Summed, the two waits would exceed the time the block took.
        assert!(counted <= whole, "{counted:?} counted in {whole:?}");
        assert!(counted >= Duration::from_millis(40), "{counted:?}");
    }

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_sequence_counts_each_state_only_after_the_ones_before_it() {
        let mut s = Sequence::new(["marked", "recovered"]);
        // Recovered before anything was marked does not count.
        s.observe(&[false, true]);
        assert!(!s.seen(0) && !s.seen(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        s.observe(&[true, false]);
        assert!(s.seen(0) && !s.seen(1));
        assert_eq!(
            s.check(),
            Check::Pending("marked (seen at 2.0 s), then recovered (not seen yet)".into())
        );
        // Marked no longer holds: what was seen stays seen.
        tokio::time::advance(Duration::from_secs(15)).await;
        s.observe(&[false, true]);
        assert_eq!(s.check(), Check::Met);
        assert_eq!(
            s.to_string(),
            "marked (seen at 2.0 s), then recovered (seen at 17.0 s)"
        );
        // States that hold together are seen at one instant, in order.
        let mut both = Sequence::new(["a", "b", "c"]);
        both.observe(&[true, true, false]);
        assert!(both.seen(1) && !both.seen(2));
        both.observe(&[false, false, true]);
        assert_eq!(both.check(), Check::Met);
    }

    #[test]
    fn or_is_met_by_either_and_fails_only_when_both_fail() {
        let p = |s: &str| Check::Pending(s.into());
        let f = |s: &str| Check::Failed(s.into());
        assert_eq!(p("a").or(Check::Met), Check::Met);
        assert_eq!(f("a").or(Check::Met), Check::Met);
        assert_eq!(p("a").or(f("b")), p("a"));
        assert_eq!(f("a").or(p("b")), p("b"));
        assert_eq!(p("a").or(p("b")), p("a; and b"));
        assert_eq!(f("a").or(f("b")), f("a; and b"));
    }

    #[test]
    fn not_inverts_met_and_pending_and_keeps_failures() {
        assert_eq!(
            Check::Met.not(|| "still there".into()),
            Check::Pending("still there".into())
        );
        assert_eq!(Check::Pending("gone".into()).not(|| "x".into()), Check::Met);
        assert_eq!(
            Check::Failed("api".into()).not(|| "x".into()),
            Check::Failed("api".into())
        );
        assert_eq!(
            Check::from_result(Err("e".into())),
            Check::Pending("e".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn poll_reports_the_last_mismatch_or_the_failure() {
        let mut n = 0;
        let e = poll(
            "a port",
            Duration::from_secs(1),
            Duration::from_millis(100),
            || {
                n += 1;
                std::future::ready(Check::Pending(format!("refused {n}")))
            },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("waiting for a port; last seen: refused"), "{e}");
        assert!(n >= 10, "evaluated every 100ms: {n}");
        let e = poll(
            "a port",
            Duration::from_secs(1),
            Duration::from_millis(100),
            || std::future::ready(Check::Failed("etcd exited".into())),
        )
        .await
        .unwrap_err()
        .to_string();
        assert_eq!(e, "a port: etcd exited");
        let mut left = 3;
        poll(
            "a port",
            Duration::from_secs(1),
            Duration::from_millis(100),
            || {
                left -= 1;
                std::future::ready(Check::when(left == 0, || "not yet".into()))
            },
        )
        .await
        .unwrap();
    }

    #[test]
    fn and_keeps_the_first_unmet_verdict() {
        assert_eq!(Check::Met.and(Check::Met), Check::Met);
        assert_eq!(
            Check::Pending("a".into()).and(Check::Failed("b".into())),
            Check::Pending("a".into())
        );
        assert_eq!(
            Check::Met.and(Check::Failed("b".into())),
            Check::Failed("b".into())
        );
        assert_eq!(
            Check::when(false, || "x".into()),
            Check::Pending("x".into())
        );
    }
}
