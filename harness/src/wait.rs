//! Bounded waits over watched objects. [`until`] watches one object and re-evaluates a
//! [`Check`] on every change (and on a one-second tick, for conditions that also look at other
//! objects); on timeout it reports the last mismatch seen, never just "timed out".

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

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

    /// Both must hold; the first non-met verdict is returned.
    pub fn and(self, other: Check) -> Check {
        match self {
            Check::Met => other,
            not_met => not_met,
        }
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

/// Total time this process has spent inside [`until`] (a metric for `harness bench run`: the
/// share of scenario time spent waiting on the controller).
static WAITED_MICROS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// See [`WAITED_MICROS`].
pub fn waited() -> Duration {
    Duration::from_micros(WAITED_MICROS.load(std::sync::atomic::Ordering::Relaxed))
}

struct Timed(std::time::Instant);

impl Drop for Timed {
    fn drop(&mut self) {
        WAITED_MICROS.fetch_add(
            self.0.elapsed().as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
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
    let _timed = Timed(std::time::Instant::now());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher(api.clone(), config).boxed();
    let mut current: Option<K> = None;
    let mut last = String::from("nothing observed yet");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => current = Some(o),
                Some(Ok(watcher::Event::Delete(_))) => current = None,
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                Some(Err(source)) => return Err(WaitError::Watch { what: what.into(), source }),
                None => {}
            },
            _ = tick.tick() => {}
            _ = tokio::time::sleep_until(deadline) => {
                return Err(WaitError::Timeout { what: what.into(), timeout, last });
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
