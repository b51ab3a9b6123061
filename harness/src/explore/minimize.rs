//! Shrinking a finding's trial while it still reproduces. Start with [`minimize`]: delta
//! debugging (ddmin) over the steps after the create, then over the fields of each step that
//! sets fields; every candidate is checked by running it, at most a given number of times,
//! a few side by side: the first of them in ddmin's order that reproduces is taken, so the
//! result is the one running them one at a time gives, sooner.

use std::future::Future;

use super::trial::{Fields, Step, Trial};

/// What minimizing did.
#[derive(Debug, Clone, PartialEq)]
pub struct Minimized {
    /// The smallest trial found that still reproduces.
    pub trial: Trial,
    /// Candidates run.
    pub runs: usize,
}

/// Shrinks `trial` (which reproduces) with `reproduces`, running at most `max_runs`
/// candidates, `side_by_side` at once (at least one), a round of them only while `may_start`
/// says so (asked before each round: the time left can depend on how long the rounds before
/// took): first whole steps (the create stays), then the fields of each create or update.
pub async fn minimize<F, Fut>(
    trial: Trial,
    max_runs: usize,
    may_start: &dyn Fn() -> bool,
    side_by_side: usize,
    mut reproduces: F,
) -> Minimized
where
    F: FnMut(Trial) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut runs = 0;
    let mut best = trial;
    // Steps after the first.
    let rest: Vec<Step> = best.steps[1..].to_vec();
    let head = best.steps[0].clone();
    let budget = Budget {
        max_runs,
        may_start,
        side_by_side: side_by_side.max(1),
    };
    let kept = ddmin(rest, &mut runs, budget, |steps| {
        let mut t = best.clone();
        t.steps = std::iter::once(head.clone()).chain(steps).collect();
        reproduces(t)
    })
    .await;
    best.steps = std::iter::once(head).chain(kept).collect();
    // The fields of each step that sets some.
    for i in 0..best.steps.len() {
        let (Step::Create { set } | Step::Update { set }) = &best.steps[i] else {
            continue;
        };
        let fields: Vec<(String, serde_json::Value)> = set.clone().into_iter().collect();
        let is_update = matches!(best.steps[i], Step::Update { .. });
        let base = best.clone();
        let kept = ddmin(fields, &mut runs, budget, |fields| {
            let mut t = base.clone();
            let set: Fields = fields.into_iter().collect();
            t.steps[i] = if is_update {
                Step::Update { set }
            } else {
                Step::Create { set }
            };
            reproduces(t)
        })
        .await;
        let set: Fields = kept.into_iter().collect();
        best.steps[i] = if is_update {
            Step::Update { set }
        } else {
            Step::Create { set }
        };
    }
    Minimized { trial: best, runs }
}

/// How many candidates a shrinking may run, how many at once, and whether one more round may
/// start.
#[derive(Clone, Copy)]
struct Budget<'a> {
    max_runs: usize,
    may_start: &'a dyn Fn() -> bool,
    side_by_side: usize,
}

impl Budget<'_> {
    fn left(&self, runs: usize) -> bool {
        runs < self.max_runs && (self.may_start)()
    }
}

/// The position of the first of `candidates` (in order) for which `test` holds, running them
/// [`Budget::side_by_side`] at a time while the budget lasts; `runs` counts each one run.
/// Those run beside the first that holds are run for nothing: the price of the time saved.
async fn first<T, F, Fut>(
    candidates: &[Vec<T>],
    runs: &mut usize,
    budget: Budget<'_>,
    test: &mut F,
) -> Option<usize>
where
    T: Clone,
    F: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut at = 0;
    while at < candidates.len() && budget.left(*runs) {
        let n = budget
            .side_by_side
            .min(budget.max_runs - *runs)
            .min(candidates.len() - at);
        *runs += n;
        let held =
            futures::future::join_all(candidates[at..at + n].iter().map(|c| test(c.clone()))).await;
        if let Some(i) = held.iter().position(|h| *h) {
            return Some(at + i);
        }
        at += n;
    }
    None
}

/// The classic ddmin: a 1-minimal subset of `items` for which `test` holds (it is taken to
/// hold for all of them), within the run budget.
async fn ddmin<T, F, Fut>(
    items: Vec<T>,
    runs: &mut usize,
    budget: Budget<'_>,
    mut test: F,
) -> Vec<T>
where
    T: Clone,
    F: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut items = items;
    if items.is_empty() {
        return items;
    }
    // Nothing at all may already reproduce.
    if budget.left(*runs) {
        *runs += 1;
        if test(vec![]).await {
            return vec![];
        }
    }
    let mut n = 2usize;
    while items.len() >= 2 && budget.left(*runs) {
        let chunk = items.len().div_ceil(n);
        let parts: Vec<Vec<T>> = items.chunks(chunk).map(<[T]>::to_vec).collect();
        // A part alone.
        if let Some(i) = first(&parts, runs, budget, &mut test).await {
            items = parts[i].clone();
            n = 2;
            continue;
        }
        // Everything but a part.
        if parts.len() > 2 {
            let complements: Vec<Vec<T>> = (0..parts.len())
                .map(|i| {
                    parts
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, p)| p.clone())
                        .collect()
                })
                .collect();
            if let Some(i) = first(&complements, runs, budget, &mut test).await {
                items = complements[i].clone();
                n = (n - 1).max(2);
                continue;
            }
        }
        if n >= items.len() {
            break;
        }
        n = (n * 2).min(items.len());
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::trial::{Mode, Op};
    use serde_json::json;

    #[tokio::test]
    async fn a_trial_shrinks_to_the_steps_and_fields_that_make_it_fail() {
        let set: Fields = (0..8)
            .map(|i| (format!("spec.f{i}"), json!(i)))
            .collect::<Fields>();
        let trial = Trial {
            subject: "CloneSet".into(),
            mode: Mode::Behaviour,
            seed: 1,
            index: 0,
            steps: vec![
                Step::Create { set },
                Step::Operate { op: Op::ScaleUp },
                Step::Operate { op: Op::Rollout },
                Step::Operate { op: Op::ScaleDown },
            ],
        };
        // Fails when f3 and f6 are both set and a rollout comes.
        let fails = |t: Trial| async move {
            let fields = t.fields();
            let has = |k: &str| fields.iter().any(|(p, _)| *p == k);
            has("spec.f3") && has("spec.f6") && t.steps.contains(&Step::Operate { op: Op::Rollout })
        };
        let m = minimize(trial, 100, &|| true, 1, fails).await;
        assert_eq!(
            m.trial.steps,
            vec![
                Step::Create {
                    set: Fields::from([
                        ("spec.f3".to_string(), json!(3)),
                        ("spec.f6".to_string(), json!(6))
                    ])
                },
                Step::Operate { op: Op::Rollout },
            ]
        );
        assert!(m.runs <= 100);
        assert!(
            fails(m.trial.clone()).await,
            "the minimized trial still fails"
        );
    }

    #[tokio::test]
    async fn candidates_side_by_side_shrink_to_what_one_at_a_time_gives_within_the_budget() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let set: Fields = (0..12)
            .map(|i| (format!("spec.f{i:02}"), json!(i)))
            .collect::<Fields>();
        let trial = Trial {
            subject: "CloneSet".into(),
            mode: Mode::Behaviour,
            seed: 1,
            index: 0,
            steps: std::iter::once(Step::Create { set })
                .chain((0..6).map(|_| Step::Operate { op: Op::ScaleUp }))
                .chain([Step::Operate { op: Op::Rollout }])
                .collect(),
        };
        let shrink = |side_by_side: usize, max_runs: usize| {
            let trial = trial.clone();
            async move {
                let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
                let (now, most) = (&now, &most);
                let m = minimize(
                    trial,
                    max_runs,
                    &|| true,
                    side_by_side,
                    |t: Trial| async move {
                        let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(at_once, Ordering::SeqCst);
                        // Every candidate of a round starts before any ends.
                        tokio::task::yield_now().await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        let fields = t.fields();
                        let has = |k: &str| fields.iter().any(|(p, _)| *p == k);
                        has("spec.f02")
                            && has("spec.f09")
                            && t.steps.contains(&Step::Operate { op: Op::Rollout })
                    },
                )
                .await;
                (m, most.load(Ordering::SeqCst))
            }
        };
        let (alone, most) = shrink(1, 200).await;
        assert_eq!(most, 1);
        assert_eq!(alone.trial.steps.len(), 2);
        assert_eq!(alone.trial.fields().len(), 2);
        let (beside, most) = shrink(3, 200).await;
        assert_eq!(most, 3, "three candidates at once, no more");
        assert_eq!(
            beside.trial, alone.trial,
            "the same trial, one at a time or not"
        );
        assert!(beside.runs >= alone.runs);
        // The run budget counts every candidate run beside another.
        let (cut, _) = shrink(4, 7).await;
        assert_eq!(cut.runs, 7);
    }

    #[tokio::test]
    async fn the_run_budget_bounds_the_search() {
        let steps = (0..16)
            .map(|_| Step::Operate { op: Op::ScaleUp })
            .collect::<Vec<_>>();
        let trial = Trial {
            subject: "CloneSet".into(),
            mode: Mode::Behaviour,
            seed: 1,
            index: 0,
            steps: std::iter::once(Step::Create { set: Fields::new() })
                .chain(steps)
                .collect(),
        };
        let m = minimize(trial, 3, &|| true, 1, |t: Trial| async move {
            t.steps.len() > 4
        })
        .await;
        assert_eq!(m.runs, 3);
        let m = minimize(m.trial.clone(), 100, &|| false, 1, |_| async { true }).await;
        assert_eq!(m.runs, 0, "no round starts when none may");
        // Whether a round may start is asked before each: here, while fewer than two ran.
        let ran = std::cell::Cell::new(0);
        let m = minimize(m.trial, 100, &|| ran.get() < 2, 1, |_| {
            ran.set(ran.get() + 1);
            async { false }
        })
        .await;
        assert_eq!(m.runs, 2, "asked before each round");
    }
}
