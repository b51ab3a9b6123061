//! Shrinking and confirming a finding: [`shrink`] (start there) minimizes the trial of a
//! [`Pending`] finding as a [`Plan`] says ([`plan`] fits it in the time left) and runs the
//! smallest trial found again, on [`Cells`]; [`fires`] runs a candidate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::exec::{self, Cell};
use super::minimize;
use super::options::CORES_PER_CELL;
use super::oracle::events::{cause, last_words, unquoted};
use super::oracle::{self, Finding, Oracle};
use super::subject::Subject;
use super::trial::Trial;

/// The most candidates of one shrinking run side by side (with an admission finding, where
/// nothing else runs, that many; with a behaviour finding, half the pool's width at most).
pub(super) const SIDE_BY_SIDE: usize = 4;

/// What an admission trial's run is taken to last when its finding's shrinking is planned
/// (admission trials run eight at a time, not timed one by one): a namespace made, dry runs,
/// the namespace deleted.
pub(super) const ADMISSION_RUN: Duration = Duration::from_secs(5);

/// A new finding waiting to be shrunk and confirmed.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub(super) subject: Subject,
    pub(super) finding: Finding,
    /// The trial that fired it.
    pub(super) trial: Trial,
    /// How long that trial took: what a candidate or a confirming run may take.
    pub(super) seconds: Duration,
    /// Seconds into the exploration when it was first seen.
    pub(super) first_seen: f64,
    /// The controller's log window of the trial that fired it.
    pub(super) manager_log: String,
}

/// How a finding's shrinking and confirming fit in the time left for them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Plan {
    /// The time shrinking and confirming were given: a round of candidates starts only if it
    /// and the confirming runs still fit in what is left of it ([`candidates_fit`]), the
    /// confirming runs only if they do ([`confirm_fits`]).
    pub(super) left: Duration,
    /// Candidates at once.
    pub(super) side_by_side: usize,
    /// Whether the confirming runs run at once (else one after another).
    pub(super) confirm_at_once: bool,
    /// Whether the confirming runs run whatever shrinking took (a replay has no share).
    pub(super) always_confirm: bool,
}

/// How a finding whose trial took `trial` is shrunk and confirmed (`confirm` runs) with `left`
/// of the time for both: the confirming runs come last and, all at once, share a cell's
/// [`CORES_PER_CELL`] cores (three runs on two cores take about one and a half trials: taken
/// as one, the last confirming runs ended after the share); candidates (`side_by_side` at
/// once) start while a round of them and the confirming runs still fit ([`candidates_fit`]).
/// A trial that acts on the whole controller or cluster ([`Trial::global`]) runs alone: its
/// candidates and confirming runs one after another. None when not even the confirming runs
/// fit: the finding is then written as it fired.
pub(super) fn plan(
    left: Duration,
    trial: Duration,
    confirm: usize,
    side_by_side: usize,
    global: bool,
) -> Option<Plan> {
    let side_by_side = match global {
        true => 1,
        false => side_by_side.max(1),
    };
    let confirming = confirming(trial, confirm, global);
    if left.is_zero() || left < confirming {
        return None;
    }
    Some(Plan {
        left,
        side_by_side,
        confirm_at_once: !global,
        always_confirm: false,
    })
}

/// How long `confirm` confirming runs of a trial that takes `trial` are taken to last: at once
/// on a cell's [`CORES_PER_CELL`] cores, or one after another for a trial that runs alone.
fn confirming(trial: Duration, confirm: usize, global: bool) -> Duration {
    match global {
        true => trial * u32::try_from(confirm.max(1)).unwrap_or(u32::MAX),
        false => trial.mul_f64((confirm as f64 / CORES_PER_CELL as f64).max(1.0)),
    }
}

/// Whether the confirming runs still fit in `plan`'s time once shrinking took `spent`, a run
/// taken to last `run`: the trial that fired the finding, or the longest candidate when one
/// took longer (a smaller trial can wait longer, and a loaded cell is slower than the
/// estimate). When they do not, the finding is written shrunk but not confirmed, for
/// `--replay` to confirm, and the share is not overrun.
pub(super) fn confirm_fits(plan: &Plan, spent: Duration, run: Duration, confirm: usize) -> bool {
    plan.always_confirm
        || spent.saturating_add(confirming(run, confirm, !plan.confirm_at_once)) <= plan.left
}

/// Whether one more round of candidates may start once shrinking took `spent`, a run taken to
/// last `run` (as for [`confirm_fits`]: the longest seen so far): the round, then the
/// confirming runs, still fit in `plan`'s time. Weighed before each round, so a round that ran
/// long shortens what may follow it, and the last round cannot push the confirming runs out.
pub(super) fn candidates_fit(plan: &Plan, spent: Duration, run: Duration, confirm: usize) -> bool {
    spent
        .saturating_add(run)
        .saturating_add(confirming(run, confirm, !plan.confirm_at_once))
        <= plan.left
}

/// The cells a finding's trial runs on again: the cell, and for an O5 finding the baseline's
/// with its release's name.
#[derive(Clone, Copy)]
pub(super) struct Cells<'c> {
    pub(super) cell: &'c Cell<'c>,
    pub(super) baseline: Option<(&'c Cell<'c>, &'c str)>,
}

/// What shrinking and confirming a finding gave.
#[derive(Debug)]
pub(super) struct Shrunk {
    pub(super) pending: Pending,
    /// The smallest trial found that still fires it (the one that fired it, unshrunk).
    pub(super) trial: Trial,
    /// Candidates run.
    pub(super) candidates: usize,
    /// Confirming runs that count (none: not confirmed), and of them those that fired it.
    pub(super) confirm_runs: usize,
    pub(super) reproduced: usize,
    /// Confirming runs cut at the end of the share before they fired it ([`counted`]).
    pub(super) cut: usize,
    /// What the last confirming run that fired it saw, with the controller's log window.
    pub(super) hit: Option<(Finding, String)>,
    /// Seconds of shrinking and of confirming.
    pub(super) shrinking: f64,
    pub(super) confirming: f64,
}

impl Shrunk {
    /// `p` as it fired: neither shrunk nor confirmed.
    pub(super) fn not(p: Pending) -> Self {
        Shrunk {
            trial: p.trial.clone(),
            pending: p,
            candidates: 0,
            confirm_runs: 0,
            reproduced: 0,
            cut: 0,
            hit: None,
            shrinking: 0.0,
            confirming: 0.0,
        }
    }
}

/// What a run of a finding's trial gave: what fired like the finding, with the controller's
/// log window, and whether the run was cut at the end of its share ([`exec::Outcome::cut`]).
#[derive(Debug, Default)]
pub(super) struct Fired {
    pub(super) hit: Option<(Finding, String)>,
    pub(super) cut: bool,
}

/// Of a finding's confirming runs, those that count, those of them that fired it, and the runs
/// cut before they fired it. A cut run that did not fire it says nothing (a wait ended at the
/// share's end, not where it would have): when there is one and every run that counts fired
/// it, it is not confirmed (none count); when a run that counts did not fire it, it is
/// unstable whatever the cut ones would have said.
pub(super) fn counted(runs: &[Fired]) -> (usize, usize, usize) {
    let cut = runs.iter().filter(|r| r.cut && r.hit.is_none()).count();
    let counts = runs.len() - cut;
    let reproduced = runs.iter().filter(|r| r.hit.is_some()).count();
    match cut > 0 && reproduced == counts {
        true => (0, 0, cut),
        false => (counts, reproduced, cut),
    }
}

/// Shrinks `p`'s trial on `cells` as `plan` says (at most `runs` candidates), then runs the
/// smallest trial found `confirm` times.
pub(super) async fn shrink(
    cells: Cells<'_>,
    p: Pending,
    plan: Plan,
    runs: usize,
    confirm: usize,
) -> Shrunk {
    let started = Instant::now();
    // Every run's waits end at the end of the time given, unless the confirming runs run
    // whatever it took (a replay).
    let settling = match plan.always_confirm {
        true => exec::Settling::Bound,
        false => exec::Settling::Until(started + plan.left),
    };
    let (s, target) = (&p.subject, &p.finding);
    // The longest candidate, in milliseconds.
    let longest = AtomicU64::new(0);
    let run = |longest: &AtomicU64| {
        p.seconds
            .max(Duration::from_millis(longest.load(Ordering::Relaxed)))
    };
    let may_start = || candidates_fit(&plan, started.elapsed(), run(&longest), confirm);
    let minimized = minimize::minimize(p.trial.clone(), runs, &may_start, plan.side_by_side, |t| {
        let longest = &longest;
        async move {
            let t0 = Instant::now();
            // A candidate cut before it fired does not fire: the larger trial stays.
            let hit = fires(cells, s, &t, target, settling).await.hit.is_some();
            let ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
            longest.fetch_max(ms, Ordering::Relaxed);
            hit
        }
    })
    .await;
    let spent = started.elapsed();
    let shrinking = spent.as_secs_f64();
    if !confirm_fits(&plan, spent, run(&longest), confirm) {
        return Shrunk {
            pending: p,
            trial: minimized.trial,
            candidates: minimized.runs,
            confirm_runs: 0,
            reproduced: 0,
            cut: 0,
            hit: None,
            shrinking,
            confirming: 0.0,
        };
    }
    let confirming = Instant::now();
    let run = || fires(cells, s, &minimized.trial, target, settling);
    let hits = match plan.confirm_at_once {
        true => futures::future::join_all((0..confirm).map(|_| run())).await,
        false => {
            let mut hits = vec![];
            for _ in 0..confirm {
                hits.push(run().await);
            }
            hits
        }
    };
    let (confirm_runs, reproduced, cut) = counted(&hits);
    let hit = hits.into_iter().filter_map(|h| h.hit).next_back();
    Shrunk {
        pending: p,
        trial: minimized.trial,
        candidates: minimized.runs,
        confirm_runs,
        reproduced,
        cut,
        hit,
        shrinking,
        confirming: confirming.elapsed().as_secs_f64(),
    }
}
/// Whether `trial`, its waits as `settling` says, fires a finding like `target` (same oracle
/// and key) on `cells`; with it and the controller's log window. An O5 finding runs the trial
/// on the baseline cell too.
pub(super) async fn fires(
    cells: Cells<'_>,
    s: &Subject,
    trial: &Trial,
    target: &Finding,
    settling: exec::Settling,
) -> Fired {
    // A candidate whose create cannot be made (a field kept, its list item dropped) does
    // not fire: it is not run.
    if !exec::placeable(s, trial) {
        return Fired::default();
    }
    let cells = Cells {
        baseline: cells.baseline.filter(|_| target.oracle == Oracle::Release),
        ..cells
    };
    let out = match run_compared(cells, s, trial, settling).await {
        Ok(out) => out,
        Err(e) => {
            tracing::warn!("trial run: {e:#}");
            return Fired::default();
        }
    };
    Fired {
        hit: out
            .findings
            .into_iter()
            .find(|f| same(f, target))
            .map(|f| (f, out.manager_log)),
        cut: out.cut,
    }
}

/// Runs `trial` on the cell of `cells`, settling as `settling` says, and with a baseline on it
/// too, adding the O5 finding of an end that differs (both then settle up to the full bound,
/// or both until the same instant: ends compared are ends reached the same way; a cut run
/// reached none).
pub(super) async fn run_compared(
    cells: Cells<'_>,
    s: &Subject,
    trial: &Trial,
    settling: exec::Settling,
) -> anyhow::Result<exec::Outcome> {
    let Some((base, name)) = cells.baseline else {
        return unpanicked(cells.cell.run_as(s, trial, settling)).await;
    };
    let both = settling.full();
    let (ours, theirs) = futures::join!(
        unpanicked(cells.cell.run_as(s, trial, both)),
        unpanicked(base.run_as(s, trial, both))
    );
    let mut ours = ours?;
    if let Ok(theirs) = theirs
        && !ours.cut
        && !theirs.cut
    {
        ours.findings.extend(oracle::release(
            s,
            &trial.fields(),
            &ours.end,
            &theirs.end,
            name,
        ));
    }
    Ok(ours)
}

/// `run`, with a panic inside it turned into its error: a bug of the harness met by one trial
/// is that trial's (it did not run, and says why), and the exploration goes on.
pub(super) async fn unpanicked<T>(
    run: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(run)
        .catch_unwind()
        .await
        .unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(anyhow::anyhow!(
                "the harness panicked while running it (a bug of the harness, not a finding): \
                 {what}"
            ))
        })
}

pub(super) fn same(a: &Finding, b: &Finding) -> bool {
    a.oracle == b.oracle && a.subject == b.subject && a.key == b.key
}

/// Whether two findings are one: the same oracle, subject and key, the verb of an admission
/// finding's key aside (the same field and form of value refused or admitted alike at create
/// and at update is one finding); or two answers of the same kind (both admit, or both
/// refuse, what the twin does not) whose refusing side refuses for one cause ([`cause`]: the
/// same field, in the same words), whatever field the trial set. A twin that refuses every
/// change of its template as immutable is one finding, not one per field of the template.
/// A write refused without naming a field is judged on the refusal's words alone: one
/// finding for a kind (a policy over any target, a template of any kind) when the same
/// webhook refuses it in the same last words ([`unnamed_cause`]).
pub(super) fn alike(a: &Finding, b: &Finding) -> bool {
    let verbless = |k: &str| k.replace(" on update of ", " on create of ");
    let kind = |s: &str| s.split('.').next().map(String::from);
    if a.oracle == b.oracle
        && a.key == b.key
        && kind(&a.subject) == kind(&b.subject)
        && unnamed_cause(a).is_some_and(|c| unnamed_cause(b) == Some(c))
    {
        return true;
    }
    if a.oracle != b.oracle || a.subject != b.subject {
        return false;
    }
    if verbless(&a.key) == verbless(&b.key) {
        return true;
    }
    let verdict = |k: &str| k.split_whitespace().next().map(String::from);
    let refusal = |f: &Finding| {
        [&f.observed, &f.expected]
            .into_iter()
            .find_map(|side| side.split_once(": refused (").map(|(_, m)| cause(m)))
            .flatten()
    };
    a.oracle == super::oracle::Oracle::Native
        && verdict(&a.key) == verdict(&b.key)
        && refusal(a).is_some_and(|c| refusal(b) == Some(c))
}

/// The cause of a write refused without naming a field ([`super::oracle::Oracle::Realizable`]):
/// the webhook that refused it and the refusal's last words, quoted names taken out (`vx.kb.io`
/// and `ControllerRevision.apps not found` of `… admission webhook "vx.kb.io" denied the request:
/// r: Invalid value: "null": ControllerRevision.apps "x-1" not found`); none for another finding.
fn unnamed_cause(f: &Finding) -> Option<(String, String)> {
    if f.oracle != super::oracle::Oracle::Realizable || !f.key.ends_with("without naming a field") {
        return None;
    }
    let (_, m) = f.observed.split_once(" refused: ")?;
    let webhook = m
        .split_once("admission webhook \"")
        .and_then(|(_, w)| w.split_once('"'))
        .map_or_else(String::new, |(w, _)| w.to_string());
    Some((webhook, unquoted(&last_words(m)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_a_trial_is_its_error_and_nothing_more() {
        let ok = futures::executor::block_on(unpanicked(async { Ok(7) }));
        assert_eq!(ok.unwrap(), 7);
        let failed: anyhow::Result<()> =
            futures::executor::block_on(unpanicked(async { anyhow::bail!("refused") }));
        assert_eq!(failed.unwrap_err().to_string(), "refused");
        let index = 3;
        let panicked: anyhow::Result<()> = futures::executor::block_on(unpanicked(async move {
            let containers: Vec<u8> = vec![];
            panic!(
                "index out of bounds: the len is {} but the index is {index}",
                containers.len()
            )
        }));
        let e = panicked.unwrap_err().to_string();
        assert!(
            e.contains("the harness panicked") && e.contains("the index is 3"),
            "{e}"
        );
        let boxed: anyhow::Result<()> =
            futures::executor::block_on(unpanicked(async { std::panic::panic_any(5u8) }));
        assert!(boxed.unwrap_err().to_string().contains("without a message"));
    }

    #[test]
    fn findings_whose_refusing_side_gives_one_cause_are_one() {
        use crate::explore::oracle::Oracle;
        let immutable = |field: &str, value: &str| Finding {
            oracle: Oracle::Native,
            subject: "BroadcastJob".into(),
            key: format!("admits on update of {field} as a string what Job does not"),
            observed: format!("BroadcastJob update setting {field}=\"{value}\": admitted"),
            expected: format!(
                "as batch/v1 Job: refused (Job.batch \"t{value}\" is invalid: spec.template: \
                 Invalid value: core.PodTemplateSpec{{Spec:{{{value}}}}}: field is immutable)"
            ),
        };
        let a = immutable("spec.template.spec.hostname", "x");
        let b = immutable("spec.template.spec.subdomain", "y");
        assert!(alike(&a, &b), "one cause: the template is immutable");
        let handler = |hook: &str| Finding {
            oracle: Oracle::Native,
            subject: "CloneSet".into(),
            key: format!(
                "refuses on create of spec.template.spec.containers[0].lifecycle.{hook}.sleep.seconds as a positive number what Deployment does not"
            ),
            observed: format!(
                "CloneSet create setting x=1: refused (admission webhook \"v.kb.io\" denied the \
                 request: spec.template.spec.containers[0].lifecycle.{hook}: Required value: \
                 must specify a handler type)"
            ),
            expected: "as apps/v1 Deployment: admitted".into(),
        };
        let (pre, post) = (handler("preStop"), handler("postStart"));
        assert!(!alike(&pre, &post), "two fields refused: two causes");
        let mut admits = pre.clone();
        admits.key = admits.key.replacen("refuses", "admits", 1);
        assert!(!alike(&pre, &admits), "the other verdict");
        let mut unnamed = a.clone();
        unnamed.expected = "as batch/v1 Job: refused (no)".into();
        let mut unnamed2 = b.clone();
        unnamed2.expected = unnamed.expected.clone();
        assert!(
            !alike(&unnamed, &unnamed2),
            "a refusal naming no field is no cause"
        );
        assert_eq!(
            cause("x is invalid: [spec.a[0].b: Invalid value: -1: must be >= 0, spec.c: bad]"),
            Some(("spec.a[0].b".into(), "bad".into()))
        );
    }

    #[test]
    fn a_refusal_naming_no_field_is_one_finding_for_its_kind_in_the_same_words() {
        use crate::explore::oracle::Oracle;
        let refused = |subject: &str, verb: &str, name: &str, last: &str| Finding {
            oracle: Oracle::Realizable,
            subject: subject.into(),
            key: format!("{verb} refused without naming a field"),
            observed: format!(
                "{verb} setting spec.r.name=\"\" refused: admission webhook \"vx.kb.io\" denied \
                 the request: r: Invalid value: \"null\": Revision.apps \"{name}\" not found{last}"
            ),
            expected: "a refusal that names the field it refuses".into(),
        };
        let over_a = refused("Policy.A", "update", "x-1", "");
        assert!(alike(&over_a, &refused("Policy.B", "update", "x-2", "")));
        assert!(alike(&over_a, &refused("Policy.A.t", "update", "", "")));
        for (other, why) in [
            (refused("Other.A", "update", "x-1", ""), "another kind"),
            (
                refused("Policy@v2.A", "update", "x-1", ""),
                "another version",
            ),
            (refused("Policy.B", "create", "x-1", ""), "another verb"),
            (
                refused("Policy.B", "update", "x-1", ": gone"),
                "other words",
            ),
        ] {
            assert!(!alike(&over_a, &other), "{why}");
        }
        let mut other_webhook = refused("Policy.B", "update", "x-1", "");
        other_webhook.observed = other_webhook.observed.replace("vx.kb.io", "vy.kb.io");
        assert!(!alike(&over_a, &other_webhook), "another webhook");
    }

    #[test]
    fn shrinking_is_planned_only_where_its_confirming_runs_fit() {
        let s = Duration::from_secs;
        let plain = |left| {
            Some(Plan {
                left,
                side_by_side: 2,
                confirm_at_once: true,
                always_confirm: false,
            })
        };
        // Three confirming runs at once on a cell's two cores take a trial and a half.
        assert_eq!(plan(s(100), s(20), 3, 2, false), plain(s(100)));
        assert_eq!(plan(s(30), s(20), 3, 2, false), plain(s(30)));
        assert_eq!(plan(s(29), s(20), 3, 2, false), None, "written as it fired");
        assert_eq!(plan(Duration::ZERO, s(1), 3, 2, false), None);
        // A trial that runs alone: its runs one after another.
        assert_eq!(
            plan(s(100), s(20), 3, 4, true),
            Some(Plan {
                left: s(100),
                side_by_side: 1,
                confirm_at_once: false,
                always_confirm: false,
            })
        );
        assert_eq!(plan(s(50), s(20), 3, 4, true), None);
    }

    #[test]
    fn a_round_of_candidates_starts_only_if_it_and_the_confirming_runs_fit_with_the_longest_run_seen()
     {
        let s = Duration::from_secs;
        let p = plan(s(100), s(20), 3, 2, false).unwrap();
        // A round of 20 s, then a trial and a half of confirming: rounds start until 50 s.
        assert!(candidates_fit(&p, s(0), s(20), 3));
        assert!(candidates_fit(&p, s(50), s(20), 3));
        assert!(!candidates_fit(&p, s(51), s(20), 3));
        // A round took 40 s: the next starts only if 40 s and 60 s of confirming fit.
        assert!(!candidates_fit(&p, s(1), s(40), 3));
        assert!(candidates_fit(&p, s(0), s(40), 3));
        // Confirmed, not shrunk: no round fits beside the confirming runs.
        let tight = plan(s(30), s(20), 3, 2, false).unwrap();
        assert!(!candidates_fit(&tight, s(0), s(20), 3));
        assert!(confirm_fits(&tight, s(0), s(20), 3));
        // A trial that runs alone: a round, then three runs one after another.
        let alone = plan(s(100), s(20), 3, 4, true).unwrap();
        assert!(candidates_fit(&alone, s(20), s(20), 3));
        assert!(!candidates_fit(&alone, s(21), s(20), 3));
    }

    #[test]
    fn confirming_runs_start_only_if_they_still_fit_with_the_longest_run_seen() {
        let s = Duration::from_secs;
        let p = plan(s(100), s(20), 3, 2, false).unwrap();
        // As planned: 50 s of candidates, then a trial and a half of confirming.
        assert!(confirm_fits(&p, s(50), s(20), 3));
        assert!(confirm_fits(&p, s(70), s(20), 3));
        assert!(!confirm_fits(&p, s(71), s(20), 3));
        // A candidate took longer than the trial that fired it: its length is the estimate.
        assert!(!confirm_fits(&p, s(50), s(40), 3));
        assert!(confirm_fits(&p, s(10), s(40), 3));
        // A trial that runs alone confirms one run after another.
        let alone = plan(s(100), s(20), 3, 4, true).unwrap();
        assert!(confirm_fits(&alone, s(40), s(20), 3));
        assert!(!confirm_fits(&alone, s(41), s(20), 3));
        // A replay confirms whatever shrinking took.
        let replay = Plan {
            always_confirm: true,
            ..p
        };
        assert!(confirm_fits(&replay, s(1000), s(40), 3));
    }

    #[test]
    fn a_confirming_run_cut_before_it_fired_says_nothing() {
        let finding = Finding {
            oracle: Oracle::Health,
            subject: "S".into(),
            key: "k".into(),
            observed: String::new(),
            expected: String::new(),
        };
        let fired = |cut| Fired {
            hit: Some((finding.clone(), String::new())),
            cut,
        };
        let not = |cut| Fired { hit: None, cut };
        // None cut: every run counts.
        assert_eq!(
            counted(&[fired(false), fired(false), fired(false)]),
            (3, 3, 0)
        );
        assert_eq!(
            counted(&[fired(false), not(false), fired(false)]),
            (3, 2, 0)
        );
        // A cut run that fired counts: it saw what it looked for before the end.
        assert_eq!(
            counted(&[fired(true), fired(false), fired(true)]),
            (3, 3, 0)
        );
        // A cut run that did not fire, the others firing: not confirmed (none count), not
        // taken for stable on fewer runs.
        assert_eq!(counted(&[fired(false), not(true), fired(false)]), (0, 0, 1));
        assert_eq!(counted(&[not(true), not(true), not(true)]), (0, 0, 3));
        // A run that counts and did not fire: unstable, whatever the cut one would have said.
        assert_eq!(counted(&[not(false), not(true), fired(false)]), (2, 1, 1));
    }
}
