//! Shrinking a finding's trial while it still reproduces. Start with [`minimize`]: delta
//! debugging (ddmin) over the steps after the create, then over the fields of each step that
//! sets fields; every candidate is checked by running it, at most a given number of times.

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
/// candidates and none after `deadline`: first whole steps (the create stays), then the
/// fields of each create or update.
pub async fn minimize<F, Fut>(
    trial: Trial,
    max_runs: usize,
    deadline: std::time::Instant,
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
    let budget = Budget { max_runs, deadline };
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

/// How many candidates a shrinking may run, and until when.
#[derive(Debug, Clone, Copy)]
struct Budget {
    max_runs: usize,
    deadline: std::time::Instant,
}

impl Budget {
    fn left(&self, runs: usize) -> bool {
        runs < self.max_runs && std::time::Instant::now() < self.deadline
    }
}

/// The classic ddmin: a 1-minimal subset of `items` for which `test` holds (it is taken to
/// hold for all of them), within the run budget.
async fn ddmin<T, F, Fut>(items: Vec<T>, runs: &mut usize, budget: Budget, mut test: F) -> Vec<T>
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
        let mut reduced = false;
        // A part alone.
        for p in &parts {
            if !budget.left(*runs) {
                break;
            }
            *runs += 1;
            if test(p.clone()).await {
                items = p.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        // Everything but a part.
        if !reduced && parts.len() > 2 {
            for i in 0..parts.len() {
                if !budget.left(*runs) {
                    break;
                }
                let complement: Vec<T> = parts
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, p)| p.clone())
                    .collect();
                *runs += 1;
                if test(complement.clone()).await {
                    items = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= items.len() {
                break;
            }
            n = (n * 2).min(items.len());
        }
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
        let later = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let m = minimize(trial, 100, later, fails).await;
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
        let later = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let m = minimize(trial, 3, later, |t: Trial| async move { t.steps.len() > 4 }).await;
        assert_eq!(m.runs, 3);
        let past = std::time::Instant::now();
        let m = minimize(m.trial, 100, past, |_| async { true }).await;
        assert_eq!(m.runs, 0, "nothing runs past the deadline");
    }
}
