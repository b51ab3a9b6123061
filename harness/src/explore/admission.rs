//! The admission phase: [`Explorer::admission`] (start there) runs a subject's singles at
//! create and at update, then covering rows of the values admitted alone, as dry runs on the
//! cell (and a baseline's), and judges each trial's findings at once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use serde_json::Value;

use super::book::Book;
use super::exec::{self, Cell};
use super::oracle::{self, Answer, Finding};
use super::refusals::{Admitted, learned, owed_to_seed, seed_refusal, stops_after};
use super::shrinking::{ADMISSION_RUN, Cells, SIDE_BY_SIDE, Shrunk, plan, shrink};
use super::singles::{ROW_VALUES, innermost, outermost, singles};
use super::subject::{self, Subject};
use super::trial::{self, Mode, Rng, Step, Trial};
use super::{Options, openapi};

/// An exploration under way: its options, its cell (and a baseline's, named), and its
/// [`Book`].
pub(super) struct Explorer<'a> {
    pub(super) options: &'a Options,
    pub(super) cell: Cell<'a>,
    pub(super) baseline: Option<Cell<'a>>,
    /// The baseline's release, named.
    pub(super) base_name: Option<String>,
    pub(super) book: Book<'a>,
}

/// A subject's singles as [`Explorer::run_singles`] ran them: the trials started, their
/// outcomes, and the next trial number.
pub(super) struct Ran {
    trials: Vec<Trial>,
    results: Vec<exec::Outcome>,
    next: u64,
}

/// The most words a refusal named that a subject's admission tries ([`Explorer::try_named`]).
const NAMED_MOST: usize = 24;

/// A subject's admission trials, numbered in the order they are made.
struct Numbering<'s> {
    subject: &'s Subject,
    seed: u64,
    /// The next trial's number.
    index: u64,
}

impl<'s> Numbering<'s> {
    fn new(subject: &'s Subject, seed: u64, index: u64) -> Self {
        Self {
            subject,
            seed,
            index,
        }
    }

    /// The next trial, of `steps`.
    fn next(&mut self, steps: Vec<Step>) -> Trial {
        self.index += 1;
        Trial {
            subject: self.subject.name.to_string(),
            mode: Mode::Admission,
            seed: self.seed,
            index: self.index - 1,
            steps,
        }
    }
}

/// By when the admission trials of a subject started `now` must have started: what is left
/// of the phase's `share` of the `budget` (counted from `start`), in proportion to the
/// subject's `weight` among the `weight_left` of the subjects left, itself included (a weight
/// is what the subject's schema offers: [`weight`]). A subject that ends early leaves its rest
/// to those after it; one that overruns (its findings shrunk inline) takes from all of them in
/// proportion, not from the next one alone.
pub(super) fn admission_deadline(
    start: Instant,
    now: Instant,
    budget: Duration,
    share: f64,
    weight: usize,
    weight_left: usize,
) -> Instant {
    let end = start + budget.mul_f64(share.clamp(0.0, 1.0));
    let part = weight.max(1) as f64 / weight_left.max(weight).max(1) as f64;
    match end.checked_duration_since(now) {
        Some(rest) => now + rest.mul_f64(part),
        None => end,
    }
}

/// A subject's weight in the admission phase: its single-field trials (one per field and
/// value its schema offers), at least one.
pub(super) fn weight(s: &Subject, crd: &Value, doc: &openapi::Doc, seed: u64) -> usize {
    singles(s, crd, doc, seed).len().max(1)
}

/// `trials` in the order they start: those that try a field of the subject's own, then those
/// that try its pod template's or its target's, each part in an order drawn with `seed` and
/// the subject's name.
///
/// The pod template is one core type, the same in every workload kind and in every policy's
/// target, and it is tried on each of them; the fields only this kind has are tried here
/// alone. So when the deadline leaves trials out, it leaves out draws of the template, not
/// fields no other subject offers. A trial's field is its last step's (an update is made on a
/// quiet object first, whose fields are not what it tries). The subjects of one kind (a
/// policy over each of its targets, a kind at each of its versions) have the same own fields:
/// each draws its own order of them, so that where deadlines cut each subject short the kind
/// as a whole still tries more of its fields than the first few of one order.
pub(super) fn own_first(trials: Vec<Trial>, template: &str, seed: u64) -> Vec<Trial> {
    let shared = |t: &Trial| tries(t, |k| shared_field(k, template));
    let name = trials
        .first()
        .map(|t| t.subject.clone())
        .unwrap_or_default();
    let (mut own, mut rest): (Vec<_>, Vec<_>) = trials.into_iter().partition(|t| !shared(t));
    let mut rng = Rng::new(seed, trial::stream_of(&name) ^ (u64::MAX - 2));
    rng.shuffle(&mut own);
    rng.shuffle(&mut rest);
    own.extend(rest);
    own
}

/// `trials` with those that try a field of the subject's claim templates (at `claims`, where
/// it declares some) first, the order kept otherwise: a subject made with claim templates is
/// there to explore what they do, its other own fields being its kind's other subjects' too
/// (see [`Subject::claims`]).
pub(super) fn claims_first(trials: Vec<Trial>, claims: Option<&str>) -> Vec<Trial> {
    let Some(claims) = claims else {
        return trials;
    };
    let (mut first, rest): (Vec<_>, Vec<_>) = trials
        .into_iter()
        .partition(|t| tries(t, |k| trial::meets(claims, k)));
    first.extend(rest);
    first
}

/// Whether admission trial `t` tries a field `which` picks: a field its last step sets (an
/// update is made on a quiet object first, whose fields are not what it tries).
fn tries(t: &Trial, which: impl Fn(&str) -> bool) -> bool {
    match t.steps.last() {
        Some(Step::Create { set } | Step::Update { set }) => set.keys().any(|k| which(k)),
        _ => false,
    }
}

/// Whether field `k` is not the subject's own: its target's, or inside its pod template (at
/// `template`; empty for none).
pub(super) fn shared_field(k: &str, template: &str) -> bool {
    k.starts_with(subject::TARGET)
        || (!template.is_empty()
            && k.strip_prefix(template)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '['])))
}

impl Explorer<'_> {
    pub(super) fn cells(&self) -> Cells<'_> {
        Cells {
            cell: &self.cell,
            baseline: self.baseline.as_ref().zip(self.base_name.as_deref()),
        }
    }

    /// Judges an admission trial's findings: each new one shrunk and confirmed now while the
    /// share lasts (nothing else runs meanwhile: its candidates run side by side), else
    /// written as it fired.
    pub(super) async fn judge_now(
        &mut self,
        s: &Subject,
        trial: &Trial,
        findings: Vec<Finding>,
    ) -> anyhow::Result<()> {
        let (runs, confirm) = (self.options.shrink_runs.max(1) * 4, self.options.confirm);
        for p in self.book.sort(s, trial, ADMISSION_RUN, findings, "") {
            let planned = plan(
                self.book.shrink_left(),
                p.seconds,
                confirm,
                SIDE_BY_SIDE,
                false,
            );
            let done = match planned {
                Some(plan) => shrink(self.cells(), p, plan, runs, confirm).await,
                None => Shrunk::not(p),
            };
            self.book.write(done)?;
        }
        Ok(())
    }

    /// Admission trials of one subject: singles at create and update, then covering rows,
    /// each started only before `deadline` (see [`admission_deadline`]); the subject's own
    /// fields before its template's ([`own_first`]), each in a seeded order, so that what a
    /// deadline leaves out is not always the same end of the schema.
    pub(super) async fn admission(
        &mut self,
        s: &Subject,
        crd: &Value,
        doc: &openapi::Doc,
        deadline: Instant,
    ) -> anyhow::Result<Admitted> {
        let ran = self.run_singles(s, crd, doc, deadline).await?;
        self.judge_singles(s, crd, doc, deadline, ran).await
    }

    /// The singles of `s` run on the cell before `deadline` (the seed object's whatever the
    /// time; only it when the deadline has passed, so its singles are not drawn): the first
    /// half of [`Explorer::admission`], which changes nothing of the run's, so that subjects
    /// reached after the phase's share run theirs side by side.
    pub(super) async fn run_singles(
        &self,
        s: &Subject,
        crd: &Value,
        doc: &openapi::Doc,
        deadline: Instant,
    ) -> anyhow::Result<Ran> {
        let singles = match Instant::now() < deadline {
            true => singles(s, crd, doc, self.options.seed),
            false => vec![],
        };
        let mut trials: Vec<Trial> = vec![];
        let mut numbers = Numbering::new(s, self.options.seed, 0);
        let mut next = |steps| numbers.next(steps);
        for set in singles {
            trials.push(next(vec![Step::Create { set: set.clone() }]));
            // A target's template is the target's to admit once it changes; a field through
            // a minimal item is tried at create (at update, the list's own values add and
            // remove its item: the update of each of the item's fields would be the same
            // trial of the list again, under another name).
            if set.len() > 1 || set.keys().any(|k| k.starts_with(subject::TARGET)) {
                continue;
            }
            trials.push(next(vec![
                Step::Create { set: s.quiet() },
                Step::Update { set },
            ]));
        }
        let mut trials = claims_first(
            own_first(trials, &s.template, self.options.seed),
            s.claims().as_deref(),
        );
        // The seed object alone first: an API that refuses it refuses every trial for that
        // reason, whatever the fields (see `owed_to_seed`).
        trials.insert(
            0,
            next(vec![Step::Create {
                set: Default::default(),
            }]),
        );
        let ran = self
            .admit_all(&self.cell, s, &trials, Some(deadline), true)
            .await?;
        let (trials, results) = self.kept(s, trials, ran, true)?;
        Ok(Ran {
            trials,
            results,
            next: numbers.index,
        })
    }

    /// The second half of [`Explorer::admission`]: judges the singles `ran`, then runs and
    /// judges covering rows of the values admitted alone, before `deadline`.
    pub(super) async fn judge_singles(
        &mut self,
        s: &Subject,
        crd: &Value,
        doc: &openapi::Doc,
        deadline: Instant,
        ran: Ran,
    ) -> anyhow::Result<Admitted> {
        self.book
            .summary
            .reach
            .offer(&s.name, &super::singles::offered(s, crd, doc));
        let Ran {
            mut trials,
            mut results,
            next,
        } = ran;
        let mut numbers = Numbering::new(s, self.options.seed, next);
        let mut next = |steps| numbers.next(steps);
        // A baseline release that does not serve the subject (a kind or version newer than
        // it) has nothing to compare: no O5 for the subject.
        let compared = match (&self.baseline, &self.base_name) {
            (Some(base), Some(name)) if !base.serves(s).await => {
                (self.book.say)(format!(
                    "{}: not served by the baseline {name}; no O5 for it",
                    s.name
                ));
                false
            }
            _ => true,
        };
        if compared {
            self.compare(s, &trials, &mut results).await;
        }
        let (named, named_results) = self
            .try_named(s, &trials, &results, compared, &mut next)
            .await?;
        let named_admitted = admitted_alone(&named, &named_results);
        trials.extend(named);
        results.extend(named_results);
        for t in &trials {
            self.book.summary.reach.tried(t);
        }
        let admitted = admitted_alone(&trials, &results);
        let seed = seed_refusal(&results);
        let mut owed = 0;
        for (t, out) in trials.iter().zip(results) {
            if owed_to_seed(t, &out, seed.as_deref()) {
                owed += 1;
                continue;
            }
            if self.options.modes.contains(&Mode::Admission) {
                self.judge_now(s, t, out.findings).await?;
            }
        }
        let mut by_field: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (k, v) in &admitted {
            if !v.is_null() {
                by_field.entry(k.clone()).or_default().push(v.clone());
            }
        }
        // A list whose item's fields were each admitted through a minimal item has as many
        // values as the item has fields: pairs with them would outnumber all other rows. A
        // field takes part with [`ROW_VALUES`] of its values at most, drawn with the seed.
        let mut draw = Rng::new(self.options.seed, u64::MAX - 1);
        let fields: Vec<(String, Vec<Value>)> = by_field
            .into_iter()
            .map(|(k, mut v)| {
                if v.len() > ROW_VALUES {
                    draw.shuffle(&mut v);
                    v.truncate(ROW_VALUES);
                }
                (k, v)
            })
            .collect();
        let rows = trial::covering_rows(&fields, &mut Rng::new(self.options.seed, u64::MAX));
        let row_trials: Vec<Trial> = rows
            .into_iter()
            .map(|set| {
                next(vec![Step::Create {
                    set: innermost(set),
                }])
            })
            .collect();
        let ran = self
            .admit_all(&self.cell, s, &row_trials, Some(deadline), false)
            .await?;
        let (row_trials, mut results) = self.kept(s, row_trials, ran, false)?;
        if compared {
            self.compare(s, &row_trials, &mut results).await;
        }
        self.book.summary.reach.rows(&s.name, row_trials.len());
        for t in &row_trials {
            self.book.summary.reach.tried(t);
        }
        for (t, out) in row_trials.iter().zip(results) {
            if owed_to_seed(t, &out, seed.as_deref()) {
                owed += 1;
                continue;
            }
            if self.options.modes.contains(&Mode::Admission) {
                self.judge_now(s, t, out.findings).await?;
            }
        }
        if let Some(words) = &seed {
            (self.book.say)(format!(
                "{}: its seed object is refused ({words}); {owed} more trial(s) refused in the \
                 same words are judged as its",
                s.name
            ));
            self.book.summary.reach.seed_refused(&s.name, words, owed);
        }
        self.book.count(
            format!("admission {}", s.name),
            trials.len() + row_trials.len(),
        );
        Ok(Admitted {
            values: admitted,
            named: named_admitted,
        })
    }

    /// The admission trials of the words the API named when it refused a string a single of
    /// `trials` gave (their outcomes `results`), numbered by `next`, run (on the baseline too
    /// when `compared`) whether or not the subject's share of the phase is spent: a share
    /// often ends within the singles, and these few (at most [`NAMED_MOST`]) are what makes
    /// the rest of such a field reachable for the behaviour trials. The valid values of a
    /// field whose schema lists none, tried alone, their trials judged as the others. Those
    /// that ran, with outcomes.
    pub(super) async fn try_named(
        &self,
        s: &Subject,
        trials: &[Trial],
        results: &[exec::Outcome],
        compared: bool,
        next: &mut impl FnMut(Vec<Step>) -> Trial,
    ) -> anyhow::Result<(Vec<Trial>, Vec<exec::Outcome>)> {
        let named: Vec<Trial> = learned(trials, results)
            .into_iter()
            .take(NAMED_MOST)
            .map(|set| next(vec![Step::Create { set }]))
            .collect();
        let ran = self.admit_all(&self.cell, s, &named, None, false).await?;
        let (named, mut outcomes) = self.kept(s, named, ran, false)?;
        if compared {
            self.compare(s, &named, &mut outcomes).await;
        }
        Ok((named, outcomes))
    }

    /// With a baseline: runs `trials` there too, and adds to each outcome the O5 finding of
    /// an end that differs. Trials the baseline cannot run are said and not compared (as a
    /// behaviour trial's are): the exploration goes on.
    pub(super) async fn compare(
        &self,
        s: &Subject,
        trials: &[Trial],
        outcomes: &mut [exec::Outcome],
    ) {
        let (Some(base), Some(name)) = (&self.baseline, &self.options.baseline) else {
            return;
        };
        let theirs = match self.admit_all(base, s, trials, None, false).await {
            Ok(theirs) => theirs,
            Err(e) => {
                (self.book.say)(format!(
                    "{}: the baseline {name} could not run its admission trials ({e:#}); no O5 \
                     for them",
                    s.name
                ));
                return;
            }
        };
        // A trial the baseline could not run is not compared.
        for ((t, ours), theirs) in trials.iter().zip(outcomes.iter_mut()).zip(theirs) {
            let Ok(theirs) = theirs else { continue };
            ours.findings.extend(oracle::release(
                s,
                &t.fields(),
                &ours.end,
                &theirs.end,
                &name.to_string(),
            ));
        }
    }

    /// Runs admission trials 8 at a time in one namespace of `cell`, in order; with a
    /// `deadline`, only those started before it, and the first whatever the time when it is
    /// the seed object (`seed_first`: so that every subject is reached, see
    /// [`Explorer::admission`]): the outcomes
    /// of the trials that ran, the first ones of `trials`.
    pub(super) async fn admit_all(
        &self,
        cell: &Cell<'_>,
        s: &Subject,
        trials: &[Trial],
        deadline: Option<Instant>,
        seed_first: bool,
    ) -> anyhow::Result<Vec<anyhow::Result<exec::Outcome>>> {
        // Past the deadline nothing runs but a seed object that comes first: no namespace
        // made and dropped for nothing (a subject reached once the share is spent tries its
        // seed object alone, not a covering row).
        let late = deadline.is_some_and(|d| Instant::now() >= d);
        if trials.is_empty() || (late && !seed_first) {
            return Ok(vec![]);
        }
        let ns = cell.namespace(s).await?;
        // With the seed object first: once it is refused, the trials not yet started are
        // not (see `stops_after`).
        let refused = std::cell::Cell::new(false);
        let refused = &refused;
        let results: Vec<Option<anyhow::Result<exec::Outcome>>> = futures::stream::iter(trials)
            .enumerate()
            .map(|(i, t)| {
                let ns = ns.clone();
                async move {
                    // Started in order, so the trials past the deadline are the last ones.
                    let first_seed = i == 0 && seed_first;
                    if !first_seed
                        && (refused.get() || deadline.is_some_and(|d| Instant::now() >= d))
                    {
                        return None;
                    }
                    let out = admit_one(cell, s, t, &ns).await;
                    if i == 0 && seed_first && stops_after(&out) {
                        refused.set(true);
                    }
                    Some(out)
                }
            })
            .buffered(8)
            .collect()
            .await;
        cell.drop_namespace(&ns, s).await;
        let mut results: Vec<_> = results.into_iter().map_while(|r| r).collect();
        // A trial that met the controller's webhook down (an exit, another trial's finding,
        // stopped the manager) tried nothing: it runs again once the manager is, in a
        // namespace of its own; meeting it down again, it did not run.
        let down: Vec<usize> = (0..results.len())
            .filter(|&i| exec::met_webhook_down(&results[i]).is_some())
            .collect();
        if down.is_empty() {
            return Ok(results);
        }
        cell.installation
            .revive()
            .await
            .context("start the exited manager again")?;
        let ns = cell.namespace(s).await?;
        for i in down {
            let out = admit_one(cell, s, &trials[i], &ns).await;
            results[i] = match exec::met_webhook_down(&out) {
                Some(w) => Err(anyhow::anyhow!(
                    "it met the controller's webhook {w} down twice (the apiserver could not \
                     reach it)"
                )),
                None => out,
            };
        }
        cell.drop_namespace(&ns, s).await;
        Ok(results)
    }

    /// [`ran_alone`], what it leaves out said.
    pub(super) fn kept(
        &self,
        s: &Subject,
        trials: Vec<Trial>,
        ran: Vec<anyhow::Result<exec::Outcome>>,
        seed_first: bool,
    ) -> anyhow::Result<(Vec<Trial>, Vec<exec::Outcome>)> {
        let (trials, outcomes, failed) = ran_alone(trials, ran, seed_first)?;
        if let Some((n, first)) = failed {
            (self.book.say)(format!(
                "{}: {n} admission trial(s) did not run and are left out, the exploration goes \
                 on (the first: {first})",
                s.name
            ));
        }
        Ok((trials, outcomes))
    }
}

/// The values the single creates among `trials` set that the API admitted (their outcomes in
/// `results`), the outermost of each.
fn admitted_alone(trials: &[Trial], results: &[exec::Outcome]) -> Vec<(String, Value)> {
    let mut out = vec![];
    for (t, o) in trials.iter().zip(results) {
        let single = matches!(t.steps.as_slice(), [Step::Create { .. }]);
        if single && o.answers.last() == Some(&Answer::Admitted) {
            out.extend(outermost(t.fields()));
        }
    }
    out
}

/// The trials kept, their outcomes, and how many were left out with the first one's error.
type Kept = (Vec<Trial>, Vec<exec::Outcome>, Option<(usize, String)>);

/// `trials` and the outcomes of those that ran (`ran`: the first ones of `trials`, in order),
/// less those that failed to run (an API error, a harness panic): a trial that did not run
/// says nothing of the controller, and the others are judged. With how many failed and the
/// first one's error. An error when every one failed, or, when `seed_first`, the first (the
/// seed object alone, which the others are read against).
fn ran_alone(
    trials: Vec<Trial>,
    ran: Vec<anyhow::Result<exec::Outcome>>,
    seed_first: bool,
) -> anyhow::Result<Kept> {
    let (mut kept, mut outcomes, mut failed) = (vec![], vec![], None::<(usize, String)>);
    let mut last = None;
    for (i, (t, r)) in trials.into_iter().zip(ran).enumerate() {
        match r {
            Ok(out) => {
                kept.push(t);
                outcomes.push(out);
            }
            Err(e) if i == 0 && seed_first => {
                return Err(e.context("its seed object's admission trial did not run"));
            }
            Err(e) => {
                let f = failed.get_or_insert_with(|| (0, format!("trial {}: {e:#}", t.index)));
                f.0 += 1;
                last = Some(e);
            }
        }
    }
    match last {
        Some(e) if kept.is_empty() => Err(e.context("no admission trial of it ran")),
        _ => Ok((kept, outcomes, failed)),
    }
}

/// Admission trial `t` of `s` on `cell` in namespace `ns`, as `t<index>`, a panic its outcome.
async fn admit_one(
    cell: &Cell<'_>,
    s: &Subject,
    t: &Trial,
    ns: &str,
) -> anyhow::Result<exec::Outcome> {
    let name = format!("t{}", t.index);
    super::shrinking::unpanicked(cell.admit(s, t, ns, &name)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::refusals::tests::trial;

    /// A field set of `k` alone.
    fn set(k: &str) -> trial::Fields {
        trial::Fields::from([(k.to_string(), serde_json::json!(1))])
    }

    #[test]
    fn an_admission_trial_that_did_not_run_is_left_out_and_the_others_judged() {
        let trial = |index: u64| Trial {
            subject: "S".into(),
            mode: Mode::Admission,
            seed: 1,
            index,
            steps: vec![],
        };
        let ok = |n: usize| -> anyhow::Result<exec::Outcome> {
            Ok(exec::Outcome {
                log: vec![format!("ran {n}")],
                ..Default::default()
            })
        };
        let failed =
            || -> anyhow::Result<exec::Outcome> { Err(anyhow::anyhow!("connection reset")) };
        // The third of four did not run; the last was not started (past the deadline).
        let (kept, outcomes, left) = ran_alone(
            (0..4).map(trial).collect(),
            vec![ok(0), ok(1), failed()],
            true,
        )
        .unwrap();
        assert_eq!(kept.iter().map(|t| t.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(outcomes[1].log, ["ran 1"]);
        assert_eq!(left, Some((1, "trial 2: connection reset".to_string())));
        // The seed object's trial, which the others are read against: the subject's error.
        let e = ran_alone((0..2).map(trial).collect(), vec![failed(), ok(1)], true).unwrap_err();
        assert!(format!("{e:#}").contains("seed object"), "{e:#}");
        // Covering rows have no seed trial first; none that ran is an error.
        assert!(ran_alone((0..2).map(trial).collect(), vec![failed(), ok(1)], false).is_ok());
        assert!(ran_alone((0..2).map(trial).collect(), vec![failed(), failed()], false).is_err());
        assert!(ran_alone(vec![], vec![], false).unwrap().0.is_empty());
    }

    #[test]
    fn a_subjects_own_fields_start_before_its_templates_and_its_targets() {
        let t = "spec.template";
        let create = |k: &str| Step::Create { set: set(k) };
        // An update's first step makes a quiet object through the template: it is the
        // update's field that counts.
        let quiet = Step::Create {
            set: set("spec.template.spec.nodeSelector"),
        };
        let trials = vec![
            trial(0, vec![create("spec.template.spec.hostname")]),
            trial(1, vec![create("spec.minReadySeconds")]),
            trial(2, vec![create("target:spec.template.spec.hostname")]),
            trial(
                3,
                vec![
                    quiet.clone(),
                    Step::Update {
                        set: set("spec.paused"),
                    },
                ],
            ),
            trial(4, vec![create("spec.template")]),
            trial(
                5,
                vec![
                    quiet,
                    Step::Update {
                        set: set("spec.templateRatio"),
                    },
                ],
            ),
            trial(6, vec![create("spec.template.metadata.labels")]),
        ];
        for seed in 1..20 {
            let order: Vec<u64> = own_first(trials.clone(), t, seed)
                .iter()
                .map(|t| t.index)
                .collect();
            let mut own = order[..3].to_vec();
            own.sort_unstable();
            assert_eq!(own, [1, 3, 5], "seed {seed}: {order:?}");
            let mut rest = order[3..].to_vec();
            rest.sort_unstable();
            assert_eq!(rest, [0, 2, 4, 6], "seed {seed}: {order:?}");
        }
        // Each part's order is drawn with the seed, and replays from it.
        let orders: std::collections::BTreeSet<Vec<u64>> = (1..20)
            .map(|seed| {
                own_first(trials.clone(), t, seed)
                    .iter()
                    .map(|t| t.index)
                    .collect()
            })
            .collect();
        assert!(orders.len() > 1, "{orders:?}");
        let again = |seed| -> Vec<u64> {
            own_first(trials.clone(), t, seed)
                .iter()
                .map(|t| t.index)
                .collect()
        };
        assert_eq!(again(7), again(7));
        // Subjects of one kind with the same fields draw their own orders of them.
        let named = |name: &str| -> Vec<u64> {
            let trials: Vec<Trial> = trials
                .iter()
                .cloned()
                .map(|t| Trial {
                    subject: name.into(),
                    ..t
                })
                .collect();
            own_first(trials, t, 7).iter().map(|t| t.index).collect()
        };
        let firsts: std::collections::BTreeSet<u64> = ["P.A", "P.B", "P.C", "P.D", "P.E", "P.F"]
            .iter()
            .map(|n| named(n)[0])
            .collect();
        assert!(
            firsts.len() > 1,
            "every subject starts with the same field: {firsts:?}"
        );
        assert_eq!(named("P.A"), named("P.A"));
        // A subject without a template: every field its own.
        assert_eq!(own_first(trials.clone(), "", 3).len(), trials.len());
    }

    #[test]
    fn a_subject_with_claim_templates_tries_theirs_first() {
        let vct = "spec.volumeClaimTemplates";
        let trials = vec![
            trial(
                0,
                vec![Step::Create {
                    set: set("spec.paused"),
                }],
            ),
            trial(
                1,
                vec![Step::Create {
                    set: set(&format!("{vct}[0].spec.x")),
                }],
            ),
            trial(
                2,
                vec![Step::Create {
                    set: set("spec.minReadySeconds"),
                }],
            ),
            // An update counts by its field, not the quiet object's.
            trial(
                3,
                vec![
                    Step::Create { set: set(vct) },
                    Step::Update {
                        set: set("spec.paused"),
                    },
                ],
            ),
            trial(
                4,
                vec![
                    Step::Create {
                        set: set("spec.paused"),
                    },
                    Step::Update { set: set(vct) },
                ],
            ),
            // Another field whose name starts alike is not the claims'.
            trial(
                5,
                vec![Step::Create {
                    set: set(&format!("{vct}X")),
                }],
            ),
        ];
        let order = |claims| -> Vec<u64> {
            claims_first(trials.clone(), claims)
                .iter()
                .map(|t| t.index)
                .collect()
        };
        assert_eq!(order(Some(vct)), [1, 4, 0, 2, 3, 5]);
        assert_eq!(order(None), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn the_admission_share_left_is_split_over_the_subjects_left_by_their_weight() {
        let start = Instant::now();
        let budget = Duration::from_secs(100);
        let at = |late: u64, w, left, share| {
            admission_deadline(
                start,
                start + Duration::from_secs(late),
                budget,
                share,
                w,
                left,
            ) - start
        };
        assert_eq!(
            at(0, 1, 4, 0.5),
            Duration::from_millis(12_500),
            "even weights"
        );
        assert_eq!(
            at(0, 3, 4, 0.5),
            Duration::from_millis(37_500),
            "three of four parts"
        );
        assert_eq!(
            at(5, 1, 3, 0.5),
            Duration::from_secs(20),
            "an early end is shared"
        );
        assert_eq!(
            at(35, 1, 3, 0.5),
            Duration::from_secs(40),
            "an overrun is taken from every subject left, not from the next alone"
        );
        assert_eq!(
            at(40, 2, 2, 0.5),
            Duration::from_secs(50),
            "the last ends the phase"
        );
        assert_eq!(
            at(60, 1, 3, 0.5),
            Duration::from_secs(50),
            "never past the share"
        );
        assert_eq!(at(0, 5, 5, 1.0), budget, "alone, the whole budget");
        assert_eq!(
            at(0, 0, 0, 2.0),
            budget,
            "no weight, a share over one: the budget"
        );
    }
}
