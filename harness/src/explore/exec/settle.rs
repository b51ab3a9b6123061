//! A behaviour trial's final settle ([`Cell::settle`]): until nothing differs from the
//! declared state, up to the settle bound, or as [`Settling::EndKnown`] allows, until what
//! differs is only what trials of the subject's kind already reported ([`Stall`]); and what
//! the cell keeps of those reports ([`Cell::unsettled_of`]).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::{Cell, KNOWN_QUIET, Place, Settling, Side};
use crate::explore::oracle::{self, Finding, Oracle};
use crate::explore::subject::Subject;
use crate::wait::{Check, poll};

/// What a behaviour trial's final settle left: what still differs from the declared state
/// (nothing once settled), and after how long it ended when it ended on what its kind had
/// already reported ([`Settling::EndKnown`]).
#[derive(Debug, Default)]
pub(super) struct Settled {
    pub(super) differences: Vec<String>,
    pub(super) early: Option<Duration>,
}

/// Whether a [`Settling::EndKnown`] settle may end: every difference it sees is of a kind
/// ([`oracle::convergence_key`]) in `known`, and they have been the same since `since`
/// for [`KNOWN_QUIET`]. A difference of a new kind, or none, starts the quiet again.
#[derive(Debug)]
struct Stall {
    /// The kinds of difference its subject's kind already reported not converging.
    known: BTreeSet<String>,
    /// The differences seen last.
    last: Vec<String>,
    /// Since when they have been the same.
    since: Instant,
}

impl Stall {
    fn new(known: BTreeSet<String>, at: Instant) -> Self {
        Stall {
            known,
            last: vec![],
            since: at,
        }
    }

    /// Whether the settle may end, seeing `now` at `at`.
    fn ends(&mut self, now: &[String], at: Instant) -> bool {
        let known = !now.is_empty()
            && now
                .iter()
                .all(|d| self.known.contains(&oracle::convergence_key(d)));
        if !known || now != self.last.as_slice() {
            self.last = now.to_vec();
            self.since = at;
            return false;
        }
        at.duration_since(self.since) >= KNOWN_QUIET
    }
}

impl Cell<'_> {
    /// Waits (up to the settle bound) until nothing differs from the declared state, or, as
    /// the trial's settling allows, until what differs is only what trials of the subject's
    /// kind already reported ([`Stall`]); what still differs then (none once settled), and
    /// after how long it ended when it ended so.
    pub(super) async fn settle(&self, s: &Subject, at: &Place<'_>, ours: &Side) -> Settled {
        let (this, ns) = (self, at.ns);
        let (w, wapi, wname) = (&ours.workload, &ours.wapi, ours.wname.as_str());
        let changed = &ours.claims_changed();
        // A policy that writes into pods settles once its content is in them, too.
        let policy = (s.target.is_some()).then_some((at.api, at.name));
        let all = move || async move {
            // The policy, read each time (a trial's steps change it): what it declares for
            // the pods it writes into.
            let declared = match policy {
                Some((api, name)) => Some(match api.get(name).await {
                    Ok(o) => Ok(serde_json::to_value(o).unwrap_or_default()),
                    Err(e) => Err(format!("get {name}: {e}")),
                }),
                None => None,
            };
            let read = declared.as_ref().and_then(|p| p.as_ref().ok());
            let mut d = this
                .differences(w, wapi, ns, wname, changed.as_ref(), read)
                .await;
            match &declared {
                Some(Ok(p)) => d.extend(this.injection_differences(p, ns).await),
                Some(Err(e)) => d.push(e.clone()),
                None => {}
            }
            d
        };
        let known = self.unsettled_of(s, at.settling);
        let stall = &RefCell::new(Stall::new(known, Instant::now()));
        let started = Instant::now();
        let r = poll(
            &format!("{} {wname} to settle", w.kind),
            at.settling.bound(self.settle),
            Duration::from_millis(500),
            move || async move {
                let d = all().await;
                if d.is_empty() {
                    Check::Met
                } else if stall.borrow_mut().ends(&d, Instant::now()) {
                    // What differs is kept by the stall ([`Stall::last`]).
                    Check::Failed("only differences of kinds already reported".into())
                } else {
                    Check::Pending(d.join("; "))
                }
            },
        )
        .await;
        match r {
            Ok(_) => Settled::default(),
            Err(crate::wait::WaitError::Failed { .. }) => Settled {
                differences: stall.borrow().last.clone(),
                early: Some(started.elapsed()),
            },
            Err(_) => Settled {
                differences: all().await,
                early: None,
            },
        }
    }

    /// The kinds of difference trials of the kind of `s` reported not converging within the
    /// full bound on this cell, that a settle as `settling` says may end on (none but for
    /// [`Settling::EndKnown`]).
    pub(super) fn unsettled_of(&self, s: &Subject, settling: Settling) -> BTreeSet<String> {
        if settling != Settling::EndKnown {
            return BTreeSet::new();
        }
        let known = self.unsettled.lock().unwrap_or_else(|e| e.into_inner());
        known.get(s.family).cloned().unwrap_or_default()
    }

    /// Records the convergence findings of a trial of `s` that settled up to the full bound.
    pub(super) fn unsettled_by(&self, s: &Subject, findings: &[Finding]) {
        let mut known = self.unsettled.lock().unwrap_or_else(|e| e.into_inner());
        let keys = known.entry(s.family.to_string()).or_default();
        for f in findings.iter().filter(|f| f.oracle == Oracle::Convergence) {
            keys.insert(f.key.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> BTreeSet<String> {
        BTreeSet::from([oracle::convergence_key(
            "live pods: want 2 (spec.replicas), got 0",
        )])
    }

    #[test]
    fn a_settle_ends_early_only_on_known_kinds_of_difference_unchanged_for_the_quiet_window() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let seen = vec!["live pods: want 2 (spec.replicas), got 0".to_string()];
        let mut stall = Stall::new(known(), t0);
        // The first sight starts the quiet; it ends once the same has been seen for the window.
        assert!(!stall.ends(&seen, at(1)));
        assert!(!stall.ends(&seen, at(5)));
        assert!(stall.ends(&seen, at(6)));
        // A change starts the quiet again.
        let other = vec!["live pods: want 2 (spec.replicas), got 1".to_string()];
        let mut stall = Stall::new(known(), t0);
        assert!(!stall.ends(&seen, at(1)));
        assert!(!stall.ends(&other, at(4)));
        assert!(!stall.ends(&other, at(8)));
        assert!(stall.ends(&other, at(9)));
        // A difference of a kind not reported yet, beside a known one, never ends it.
        let new = vec![
            seen[0].clone(),
            "status.observedGeneration: want 3, got none".to_string(),
        ];
        let mut stall = Stall::new(known(), t0);
        assert!((0..60).all(|s| !stall.ends(&new, at(s))));
        // Nor does anything without known kinds (a settle up to the bound).
        let mut stall = Stall::new(BTreeSet::new(), t0);
        assert!((0..60).all(|s| !stall.ends(&seen, at(s))));
        // Nor nothing at all (settled: the caller's to see).
        let mut stall = Stall::new(known(), t0);
        assert!((0..60).all(|s| !stall.ends(&[], at(s))));
    }

    #[test]
    fn a_settle_step_knows_an_unobserved_change_by_the_key_its_finding_had() {
        let d = format!("{}: want 3, got none", oracle::UNOBSERVED);
        assert_eq!(
            oracle::convergence_key(&d),
            oracle::convergence_key(oracle::UNOBSERVED)
        );
    }
}
