//! Where an exploration's time went ([`Pace`], kept in `explore.json`): the seconds of
//! bring-up, admission, behaviour, shrinking and confirming, and per subject its behaviour
//! trials, how many of them were distinct (a trial with the same steps as an earlier one of
//! its subject is a repeat: waste to count), and the seconds of each phase of a trial
//! ([`PHASES`]). `harness bench explore` compares these between binaries or settings.
//!
//! It also sets the pace: [`Pacer`] decides how many behaviour trials run at once (the
//! pool's width) from what the cell sustains — the apiserver's latency, the harness's own
//! CPU and the trials' settle times — with the pure [`next_width`] at its heart, and
//! [`Widths`] keeps the widths it used. [`Pace::lines`] says where the time went, shrinking's
//! share of the budget included.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::options::Share;
use super::trial::Trial;

/// The phases of a behaviour trial, in order: its namespace made (with the objects its fields
/// name), its steps sent (perturbations included), the subject settled, the twin settled
/// (when the two are compared), and the end judged (undo, events, oracles).
pub const PHASES: [&str; 5] = ["namespace", "steps", "settle", "twin", "judge"];

/// Where an exploration's time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    /// Seconds to bring the cell (and a baseline cell) up and read what it serves.
    pub bring_up: f64,
    /// Seconds of admission trials, their findings' shrinking and confirming included.
    pub admission: f64,
    /// Seconds from the first behaviour trial to the last one's end, their findings'
    /// shrinking and confirming included.
    pub behaviour: f64,
    /// Seconds spent shrinking findings (the candidate trials), of either mode.
    pub shrinking: f64,
    /// Seconds spent confirming shrunk findings, of either mode.
    pub confirming: f64,
    /// Behaviour trials by subject.
    pub subjects: BTreeMap<String, SubjectPace>,
    /// Seconds of the budget (bring-up aside): what the shares below are of.
    #[serde(default)]
    pub budget: f64,
    /// The share of the budget that shrinking and confirming together may take.
    #[serde(default)]
    pub shrink_share: f64,
    /// How behaviour trials were shared among the subjects (none: a run from before it was
    /// a choice, shared by subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<Share>,
    /// How many behaviour trials ran at once, on each cell.
    #[serde(default)]
    pub widths: Widths,
    /// The cells behaviour trials ran on, each its own control plane (0: a run from before
    /// they were counted, on one).
    #[serde(default)]
    pub cells: usize,
    /// Behaviour trials run on each cell, in the cells' order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_cells: Vec<usize>,
    /// What each finding's shrinking and confirming cost, by its directory's name.
    #[serde(default)]
    pub findings: BTreeMap<String, FindingPace>,
    /// Times a trial fired a finding alike one an earlier cell of the run reported
    /// ([`super::Options::known`]): counted here, neither shrunk nor written.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub earlier: usize,
    /// Behaviour trials whose settle ended before the bound, every difference left of a kind
    /// a trial of their kind had already reported not converging
    /// ([`super::exec::Settling::EndKnown`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ended_early: usize,
    /// Behaviour trials carried from another subject of their kind, whose trial had fired a
    /// new finding ([`super::trial::carried`]), counted in `subjects` too.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub carried: usize,
    /// The trials seen, as their subject and steps: what makes a trial a repeat.
    #[serde(skip)]
    seen: BTreeSet<String>,
}

/// The behaviour trials of one subject.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubjectPace {
    /// Behaviour trials run (shrinking and confirming aside).
    pub trials: usize,
    /// Of them, those whose steps no earlier trial of the subject had.
    pub distinct: usize,
    /// Their seconds, summed (trials run side by side each count their own).
    pub seconds: f64,
    /// Their seconds by phase ([`PHASES`]), summed.
    pub phases: BTreeMap<String, f64>,
}

impl Pace {
    /// Counts behaviour trial `trial`, which ran on the `cell`th cell (from 0) and took
    /// `seconds`, `phases` of them by phase.
    pub fn behaviour_trial(
        &mut self,
        cell: usize,
        trial: &Trial,
        seconds: f64,
        phases: &[(&str, Duration)],
    ) {
        if self.on_cells.len() <= cell {
            self.on_cells.resize(cell + 1, 0);
        }
        self.on_cells[cell] += 1;
        let key = serde_json::to_string(&(&trial.subject, &trial.steps)).unwrap_or_default();
        let new = self.seen.insert(key);
        let s = self.subjects.entry(trial.subject.clone()).or_default();
        s.trials += 1;
        s.distinct += usize::from(new);
        s.seconds += seconds;
        for (p, d) in phases {
            *s.phases.entry((*p).to_string()).or_default() += d.as_secs_f64();
        }
    }

    /// Behaviour trials run, every subject's.
    pub fn trials(&self) -> usize {
        self.subjects.values().map(|s| s.trials).sum()
    }

    /// Distinct behaviour trials, every subject's.
    pub fn distinct(&self) -> usize {
        self.subjects.values().map(|s| s.distinct).sum()
    }

    /// Distinct behaviour trials per minute of the behaviour phase (0 without one).
    pub fn distinct_per_minute(&self) -> f64 {
        match self.behaviour > 0.0 {
            true => self.distinct() as f64 * 60.0 / self.behaviour,
            false => 0.0,
        }
    }

    /// Seconds of phase `phase` summed over every subject's trials.
    pub fn phase(&self, phase: &str) -> f64 {
        self.subjects
            .values()
            .filter_map(|s| s.phases.get(phase))
            .sum()
    }
}

/// What shrinking and confirming one finding cost, and what became of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingPace {
    /// Seconds of its shrinking (its candidates run).
    pub shrinking: f64,
    /// Seconds of its confirming runs.
    pub confirming: f64,
    /// Candidates run.
    pub candidates: usize,
    /// Whether it was shrunk (else its trial is the one that fired it).
    pub shrunk: bool,
    /// Whether it was confirmed (else `harness explore --replay` on its directory shrinks and
    /// confirms it).
    pub confirmed: bool,
    /// Times other trials fired it again in the run (it is shrunk once).
    pub repeats: usize,
    /// Its confirming runs cut at the end of the share before they fired it (they say
    /// nothing: with one, it is confirmed only if a run that was not cut did not fire it).
    #[serde(default)]
    pub cut: usize,
}

impl Pace {
    /// Seconds of shrinking and confirming the share still allows (0 when it is used up).
    pub fn shrink_left(&self) -> f64 {
        (self.budget * self.shrink_share - self.shrinking - self.confirming).max(0.0)
    }

    /// What a person reads at the end of a run: the behaviour trials and their widths, and
    /// the seconds of shrinking and confirming with their shares of the budget.
    pub fn lines(&self) -> Vec<String> {
        let share = |s: f64| match self.budget > 0.0 {
            true => format!("{:.0} %", s * 100.0 / self.budget),
            false => "-".into(),
        };
        let (by_cell, on) = match self.cells {
            0 | 1 => (String::new(), String::new()),
            n => (
                format!(
                    " ({} on the cells)",
                    self.on_cells
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!(" on each of {n} cells"),
            ),
        };
        let mut out = vec![format!(
            "behaviour: {} trials{by_cell} ({} distinct, {:.1} distinct a minute) in {:.0} s, \
             {} ended on what their kind had already reported, {} carried from another subject \
             of their kind, shared by {}; at once{on}: {}",
            self.trials(),
            self.distinct(),
            self.distinct_per_minute(),
            self.behaviour,
            self.ended_early,
            self.carried,
            self.share.unwrap_or(Share::Subjects).name(),
            self.widths,
        )];
        let left: Vec<&FindingPace> = self.findings.values().filter(|f| !f.confirmed).collect();
        let repeats: usize = self.findings.values().map(|f| f.repeats).sum();
        out.push(format!(
            "shrinking: {:.0} s ({} of the budget), confirming: {:.0} s ({}); at most {:.0} % \
             together; {} finding(s) left unshrunk or unconfirmed (--replay does it), {} \
             repeat(s) counted, not shrunk again",
            self.shrinking,
            share(self.shrinking),
            self.confirming,
            share(self.confirming),
            self.shrink_share * 100.0,
            left.len(),
            repeats,
        ));
        out
    }
}

/// How many behaviour trials ran at once: the width each trial started at, and each change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Widths {
    /// The narrowest width a trial started at.
    pub min: usize,
    /// The median of the widths trials started at.
    pub median: usize,
    /// The widest.
    pub max: usize,
    /// Trials started, by the width they started at.
    pub started: BTreeMap<usize, usize>,
    /// Each decision that changed the width, in order.
    pub changes: Vec<Change>,
}

impl Widths {
    /// Counts a trial started at `width`.
    pub fn start(&mut self, width: usize) {
        *self.started.entry(width).or_default() += 1;
        let mut all = self
            .started
            .iter()
            .flat_map(|(w, n)| std::iter::repeat_n(*w, *n));
        let n: usize = self.started.values().sum();
        self.median = all.nth((n - 1) / 2).unwrap_or_default();
        self.min = self.started.keys().next().copied().unwrap_or_default();
        self.max = self.started.keys().next_back().copied().unwrap_or_default();
    }
}

impl std::fmt::Display for Widths {
    /// `2-8 (median 6), 5 changes`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-{} (median {}), {} change(s)",
            self.min,
            self.max,
            self.median,
            self.changes.len()
        )
    }
}

/// A change of width, and what it was decided from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Seconds into the behaviour trials.
    pub at: f64,
    /// The width before.
    pub from: usize,
    /// The width after.
    pub to: usize,
    /// Why ([`next_width`]'s words).
    pub why: String,
    /// What it was decided from.
    pub load: Load,
}

/// The most behaviour trials at once the pool widens to, unless `--parallel` starts it wider.
/// A trial mostly waits on the controller (a 2-core cell's apiserver answered in a
/// millisecond or two with 16 at once), so the cap is the cell's, not the machine's: the
/// pacer narrows when the cell strains.
pub const MAX_WIDTH: usize = 16;

/// How often the width is decided again (when a trial ends, once this has passed).
pub const DECIDE_EVERY: Duration = Duration::from_secs(10);

/// The harness's CPU share of the machine above which the pool narrows, and below which it
/// may widen.
const CPU_HIGH: f64 = 0.75;
const CPU_LOW: f64 = 0.5;

/// What the pool's width is decided from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// The apiserver's latency now, seconds (the median of a few cheap reads).
    pub latency: f64,
    /// The lowest latency seen in the run: the cell unloaded, or nearly.
    pub calm_latency: f64,
    /// The harness's share of the machine's CPU since the last decision (0 to 1).
    pub cpu: f64,
    /// How much slower than calm the trials that settled since the last decision settled:
    /// the median of each one's settle time over its subject's calmest before it, both with
    /// [`SETTLE_FLOOR`] added (none with fewer than two such trials). 1 is as calm as ever.
    pub settle: Option<f64>,
    /// Whether the pool was full: widening helps only then.
    pub full: bool,
}

/// Seconds added to a settle time and to its subject's calmest before they are compared, so
/// that a trial that settles in a second where its subject once settled in a tenth is not
/// "ten times slower": a subject's trials differ in what they ask, and only seconds that
/// add up say the cell strains.
pub const SETTLE_FLOOR: f64 = 5.0;

/// The next width of the pool, between 1 and `cap`, from `width` and `load`, with why.
///
/// Narrower (by a quarter, at least one) when the apiserver answers three times slower than
/// calm (and 100 ms slower at least) or slower than a second, when the harness takes more than
/// [`CPU_HIGH`] of the machine, or when trials settle one and a half times slower than their
/// subjects' calmest ([`Load::settle`]); twice as wide (up to `cap`) while the pool is full,
/// the apiserver within one and a half times its calm latency (plus 50 ms), the harness's CPU
/// below [`CPU_LOW`] and the settle times within a fifth of calm: a decision comes when a
/// trial ends, and trials that wait out a settle bound end a minute apart, so a pool that
/// widened one at a time spent most of a short behaviour phase narrow. Otherwise the same:
/// between the two bounds the width holds, so that it does not swing. Settle times are
/// compared subject by subject: the trials that settled since the last decision are a
/// different mix of subjects each time, and a StatefulSet's minute says nothing of the load
/// against a Job's second.
pub fn next_width(width: usize, cap: usize, load: &Load) -> (usize, &'static str) {
    let cap = cap.max(1);
    let width = width.clamp(1, cap);
    let calm = load.calm_latency;
    let grown = |f: f64| load.settle.is_some_and(|s| s > f);
    let why = if load.latency > 1.0 || (load.latency > calm * 3.0 && load.latency > calm + 0.1) {
        Some("the apiserver answers slower")
    } else if load.cpu > CPU_HIGH {
        Some("the harness is busy")
    } else if grown(1.5) {
        Some("trials settle slower")
    } else {
        None
    };
    if let Some(why) = why {
        return ((width - (width / 4).max(1)).max(1), why);
    }
    let calm_now = load.latency <= calm * 1.5 + 0.05 && load.cpu < CPU_LOW && !grown(1.2);
    match (calm_now, load.full, width < cap) {
        (true, true, true) => ((width * 2).min(cap), "the cell keeps up"),
        (true, true, false) => (width, "at the cap"),
        (true, false, _) => (width, "the pool is not full"),
        (false, _, _) => (width, "between the bounds"),
    }
}

/// Sets the pool's width as the run goes: it hears trials settle, and when a decision is due
/// ([`DECIDE_EVERY`]) takes the apiserver's latency, reads the harness's CPU and decides with
/// [`next_width`].
#[derive(Debug)]
pub struct Pacer {
    width: usize,
    cap: usize,
    calm_latency: f64,
    /// Each subject's calmest settle time so far.
    calm_settles: BTreeMap<String, f64>,
    /// The trials' settle times over their subjects' calmest since the last decision.
    settles: Vec<f64>,
    cpu: CpuMeter,
    decided: Instant,
}

impl Pacer {
    /// A pacer at `width`, at most `cap`, with the apiserver answering in `calm_latency`
    /// seconds when nothing runs.
    pub fn new(width: usize, cap: usize, calm_latency: f64) -> Self {
        Self {
            width: width.clamp(1, cap.max(1)),
            cap: cap.max(1),
            calm_latency,
            calm_settles: BTreeMap::new(),
            settles: vec![],
            cpu: CpuMeter::new(),
            decided: Instant::now(),
        }
    }

    /// The width now.
    pub fn width(&self) -> usize {
        self.width
    }

    /// A trial of `subject` settled in `seconds`: compared with the subject's calmest before
    /// it (the first of a subject is only its reference).
    pub fn settled(&mut self, subject: &str, seconds: f64) {
        match self.calm_settles.get_mut(subject) {
            Some(calm) => {
                self.settles
                    .push((seconds + SETTLE_FLOOR) / (*calm + SETTLE_FLOOR));
                *calm = calm.min(seconds);
            }
            None => {
                self.calm_settles.insert(subject.to_string(), seconds);
            }
        }
    }

    /// Whether a decision is due.
    pub fn due(&self) -> bool {
        self.decided.elapsed() >= DECIDE_EVERY
    }

    /// The harness's CPU share of the machine since the last reading.
    pub fn cpu(&mut self) -> f64 {
        self.cpu.share()
    }

    /// Decides the width again, `at` seconds into the behaviour trials, with the apiserver's
    /// `latency` and the harness's `cpu` share now, the pool `full` or not: the change, if
    /// the width changed.
    pub fn decide(&mut self, latency: f64, cpu: f64, full: bool, at: f64) -> Option<Change> {
        let settle = match self.settles.len() {
            0 | 1 => None,
            _ => Some(median(&mut self.settles)),
        };
        self.settles.clear();
        self.decided = Instant::now();
        let load = Load {
            latency,
            calm_latency: self.calm_latency,
            cpu,
            settle,
            full,
        };
        self.calm_latency = self.calm_latency.min(latency);
        let (to, why) = next_width(self.width, self.cap, &load);
        let from = std::mem::replace(&mut self.width, to);
        (to != from).then(|| Change {
            at,
            from,
            to,
            why: why.into(),
            load,
        })
    }
}

/// The median of `values` (reordered; 0 when empty).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n => values[(n - 1) / 2],
    }
}

/// Clock ticks a second in `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// The harness's CPU share of the machine between two readings of `/proc/self/stat`.
#[derive(Debug)]
struct CpuMeter {
    at: Instant,
    ticks: Option<u64>,
    cores: usize,
}

impl CpuMeter {
    fn new() -> Self {
        Self {
            at: Instant::now(),
            ticks: own_ticks(),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }

    /// The share since the last reading (0 when `/proc` cannot be read).
    fn share(&mut self) -> f64 {
        let (at, ticks) = (Instant::now(), own_ticks());
        let share = match (self.ticks, ticks) {
            (Some(before), Some(now)) => cpu_share(now - before, at - self.at, self.cores),
            _ => 0.0,
        };
        (self.at, self.ticks) = (at, ticks);
        share
    }
}

fn own_ticks() -> Option<u64> {
    crate::process::Stat::of(std::process::id()).map(|s| s.ticks)
}

/// The share of `cores` cores that `ticks` clock ticks of CPU are over `wall`.
pub fn cpu_share(ticks: u64, wall: Duration, cores: usize) -> f64 {
    let wall = wall.as_secs_f64() * cores.max(1) as f64;
    match wall > 0.0 {
        true => ticks as f64 / TICKS / wall,
        false => 0.0,
    }
}

/// The phases of one trial as it runs: [`Phases::next`] closes the phase under way and names
/// the one starting.
#[derive(Debug)]
pub struct Phases {
    at: std::time::Instant,
    current: &'static str,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    /// Phase `first` starts now.
    pub fn start(first: &'static str) -> Self {
        Self {
            at: std::time::Instant::now(),
            current: first,
            done: vec![],
        }
    }

    /// The phase under way ends now and `next` starts.
    pub fn next(&mut self, next: &'static str) {
        let now = std::time::Instant::now();
        self.done.push((self.current, now - self.at));
        self.at = now;
        self.current = next;
    }

    /// Every phase, the one under way ending now.
    pub fn end(mut self) -> Vec<(&'static str, Duration)> {
        self.next("");
        self.done
    }
}

/// Whether `n` is zero (a count left out of the JSON when nothing was counted).
fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::trial::{Mode, Step};

    fn trial(subject: &str, index: u64, replicas: i64) -> Trial {
        let set = [("spec.replicas".to_string(), serde_json::json!(replicas))].into();
        Trial {
            subject: subject.into(),
            mode: Mode::Behaviour,
            seed: 1,
            index,
            steps: vec![Step::Create { set }],
        }
    }

    #[test]
    fn a_trial_with_the_steps_of_an_earlier_one_of_its_subject_is_a_repeat() {
        let mut p = Pace {
            behaviour: 120.0,
            ..Pace::default()
        };
        let phases = [("settle", Duration::from_secs(3))];
        p.behaviour_trial(0, &trial("CloneSet", 0, 1), 5.0, &phases);
        // Another number, the same steps: a repeat.
        p.behaviour_trial(0, &trial("CloneSet", 1, 1), 5.0, &phases);
        p.behaviour_trial(0, &trial("CloneSet", 2, 2), 4.0, &phases);
        // The same steps on another subject: distinct.
        p.behaviour_trial(0, &trial("StatefulSet", 0, 1), 6.0, &phases);
        assert_eq!(p.trials(), 4);
        assert_eq!(p.distinct(), 3);
        assert_eq!(p.subjects["CloneSet"].distinct, 2);
        assert_eq!(p.subjects["CloneSet"].seconds, 14.0);
        assert_eq!(p.phase("settle"), 12.0);
        assert_eq!(p.distinct_per_minute(), 1.5);
        // What makes a repeat is not written; a read pace counts on from what it says.
        let read: Pace = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(read.distinct(), 3);
        assert_eq!(p.on_cells, [4]);
        assert!(!p.lines()[0].contains("cells"), "{}", p.lines()[0]);
        // On two cells, each counts its own, and the run says so.
        p.cells = 2;
        p.behaviour_trial(1, &trial("CloneSet", 3, 3), 4.0, &phases);
        assert_eq!((p.on_cells.as_slice(), p.trials()), (&[4, 1][..], 5));
        assert!(
            p.lines()[0].starts_with("behaviour: 5 trials (4, 1 on the cells)")
                && p.lines()[0].contains("at once on each of 2 cells"),
            "{}",
            p.lines()[0]
        );
    }

    fn load(latency: f64, cpu: f64, settle: Option<f64>) -> Load {
        Load {
            latency,
            calm_latency: 0.01,
            cpu,
            settle,
            full: true,
        }
    }

    #[test]
    fn the_pool_widens_while_the_cell_keeps_up_and_narrows_when_it_strains() {
        let calm = load(0.012, 0.2, Some(1.1));
        assert_eq!(next_width(2, 8, &calm).0, 4);
        assert_eq!(next_width(6, 8, &calm).0, 8);
        assert_eq!(next_width(8, 8, &calm), (8, "at the cap"));
        let idle = Load {
            full: false,
            ..calm
        };
        assert_eq!(next_width(2, 8, &idle), (2, "the pool is not full"));
        // Each strain narrows, by a quarter (at least one), never below one.
        let slow = load(0.2, 0.2, Some(1.1));
        assert_eq!(next_width(8, 8, &slow), (6, "the apiserver answers slower"));
        assert_eq!(next_width(3, 8, &slow).0, 2);
        assert_eq!(next_width(1, 8, &slow).0, 1);
        assert_eq!(next_width(4, 8, &load(1.5, 0.2, None)).0, 3);
        assert_eq!(
            next_width(4, 8, &load(0.012, 0.9, None)),
            (3, "the harness is busy")
        );
        assert_eq!(
            next_width(4, 8, &load(0.012, 0.2, Some(1.6))),
            (3, "trials settle slower")
        );
        // Between the bounds it holds: a little slower is no reason to move either way.
        for between in [
            load(0.08, 0.2, Some(1.1)),
            load(0.012, 0.6, Some(1.1)),
            load(0.012, 0.2, Some(1.3)),
        ] {
            assert_eq!(next_width(4, 8, &between), (4, "between the bounds"));
        }
        // Without settle times yet, latency and CPU decide.
        assert_eq!(next_width(2, 8, &load(0.012, 0.2, None)).0, 4);
        // A width past the cap comes back to it.
        assert_eq!(next_width(12, 8, &calm).0, 8);
    }

    #[test]
    fn the_pacer_compares_each_settle_time_with_its_own_subjects_calmest() {
        let mut p = Pacer::new(2, 8, 0.01);
        assert_eq!(p.width(), 2);
        // A subject's first trial is its reference, nothing to compare yet.
        p.settled("Job", 0.1);
        p.settled("StatefulSet", 60.0);
        assert_eq!(
            p.decide(0.012, 0.1, true, 10.0).map(|c| c.load.settle),
            Some(None)
        );
        // A minute for a StatefulSet and a second for a Job are each as calm as their subject
        // ever was: a mix of slow and fast subjects is no strain.
        p.settled("StatefulSet", 61.0);
        p.settled("Job", 1.0);
        p.settled("Job", 0.2);
        let c = p.decide(0.012, 0.1, true, 20.0).expect("wider");
        assert_eq!((c.from, c.to), (4, 8));
        let settle = c.load.settle.expect("three compared");
        assert!((1.0..1.2).contains(&settle), "{settle}");
        // The same subjects, each much slower than its calmest: narrower.
        p.settled("StatefulSet", 120.0);
        p.settled("Job", 10.0);
        p.settled("Job", 12.0);
        let c = p.decide(0.012, 0.1, true, 30.0).expect("narrower");
        assert_eq!((c.to, c.why.as_str()), (6, "trials settle slower"));
        // The calmest stays the reference: a slow spell does not raise it.
        p.settled("Job", 0.1);
        p.settled("Job", 0.1);
        let c = p.decide(0.012, 0.1, true, 40.0).expect("wider again");
        assert_eq!(c.load.settle, Some(1.0));
        // Nothing changes: no change recorded.
        assert_eq!(p.decide(0.012, 0.1, false, 60.0), None);
        assert_eq!(p.width(), 8);
    }

    #[test]
    fn widths_say_the_least_the_median_and_the_most_trials_started_at() {
        let mut w = Widths::default();
        for width in [2, 2, 3, 4, 4, 4, 8] {
            w.start(width);
        }
        assert_eq!((w.min, w.median, w.max), (2, 4, 8));
        assert_eq!(w.started[&4], 3);
        assert_eq!(w.to_string(), "2-8 (median 4), 0 change(s)");
    }

    #[test]
    fn cpu_is_a_share_of_the_machine() {
        assert_eq!(cpu_share(100, Duration::from_secs(2), 2), 0.25);
        assert_eq!(cpu_share(100, Duration::ZERO, 2), 0.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn shrinking_and_confirming_are_said_with_their_share_of_the_budget() {
        let mut p = Pace {
            budget: 200.0,
            shrink_share: 0.25,
            shrinking: 30.0,
            confirming: 10.0,
            ..Pace::default()
        };
        assert_eq!(p.shrink_left(), 10.0);
        p.confirming = 40.0;
        assert_eq!(p.shrink_left(), 0.0, "never below nothing");
        p.findings.insert(
            "01-o2-cloneset".into(),
            FindingPace {
                repeats: 2,
                ..FindingPace::default()
            },
        );
        let lines = p.lines().join("\n");
        assert!(
            lines.contains("shrinking: 30 s (15 % of the budget)"),
            "{lines}"
        );
        assert!(lines.contains("confirming: 40 s (20 %)"), "{lines}");
        assert!(lines.contains("at most 25 % together"), "{lines}");
        assert!(lines.contains("1 finding(s) left unshrunk"), "{lines}");
        assert!(lines.contains("2 repeat(s)"), "{lines}");
    }

    #[test]
    fn phases_follow_each_other_and_the_last_ends_with_the_trial() {
        let mut ph = Phases::start("namespace");
        ph.next("steps");
        ph.next("settle");
        let done = ph.end();
        let names: Vec<&str> = done.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["namespace", "steps", "settle"]);
    }
}
