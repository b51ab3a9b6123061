//! Reporters fed by the run's event stream: [`Terminal`] (progress and a summary table) and
//! [`Files`] (JSON, JUnit and a single-file HTML report under `reports/<run-id>/`, rewritten
//! atomically after every finished scenario, with `reports/latest` pointing at the newest run).
//! Results are kept in a stable order (suite, scenario, attempt) whatever order they finish in.
//! Both also report API field coverage ([`coverage_of`]): the own spec fields of every CRD of
//! the controller under test that the scenarios set.

pub mod diff;
pub mod explore;
pub mod plot;
pub mod summary;
pub mod timeline;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};
use serde::Serialize;

use crate::results::Verdict;
use crate::results::{Diagnostics, Outcome, ScenarioResult};
use crate::run::{Event, Plan, Reporter};
use crate::scenario::coverage::{ApiFields, Coverage};
use crate::scenario::record::Sends;

type Key = (String, String, usize);

fn key(r: &ScenarioResult) -> Key {
    (r.suite.clone(), r.scenario.clone(), r.attempt)
}

/// Progress lines while running and a summary table at the end, on stderr.
#[derive(Debug, Default)]
pub struct Terminal {
    results: BTreeMap<Key, ScenarioResult>,
    api_fields: Option<Vec<ApiFields>>,
    /// Upstream suites' tables by area, by cluster.
    areas: Vec<(String, String)>,
}

/// The field coverage of `fields` by what `results` sent (every attempt counts).
pub fn coverage_of<'a>(
    fields: &[ApiFields],
    results: impl Iterator<Item = &'a ScenarioResult>,
) -> Coverage {
    let mut sent = Sends::default();
    for r in results {
        sent.merge(&r.sent);
    }
    Coverage::compute(fields, &sent)
}

/// The writes recorded in a run's `report.json`, for `harness coverage`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Recorded {
    /// The run's plan: its controller (`openkruise@v1.9.0`).
    #[serde(default)]
    plan: Option<RecordedPlan>,
    /// Scenario names and what they sent.
    results: Vec<RecordedResult>,
}

#[derive(Debug, Clone, serde::Deserialize)]
struct RecordedPlan {
    controller: crate::controller::ControllerRef,
}

#[derive(Debug, Clone, serde::Deserialize)]
struct RecordedResult {
    scenario: String,
    #[serde(default)]
    sent: Sends,
}

/// A `report.json` that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No such file.
    #[error(
        "read {}: there is no report there; run the scenarios first (`harness run` with the \
         same selection) or name a run's report.json with --from",
        path.display()
    )]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// Unreadable or not a report.
    #[error("read {}: not a harness report.json", path.display())]
    Invalid {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Recorded {
    /// Reads `report.json` at `path`.
    pub fn load(path: &Path) -> Result<Self, ReadError> {
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::Missing { path: path.into() },
            _ => ReadError::Invalid {
                path: path.into(),
                source: Box::new(e),
            },
        })?;
        serde_json::from_slice(&bytes).map_err(|e| ReadError::Invalid {
            path: path.into(),
            source: Box::new(e),
        })
    }

    /// The controller the run tested.
    pub fn controller(&self) -> Option<&crate::controller::ControllerRef> {
        self.plan.as_ref().map(|p| &p.controller)
    }

    /// The scenarios that have a result.
    pub fn scenarios(&self) -> BTreeSet<&str> {
        self.results.iter().map(|r| r.scenario.as_str()).collect()
    }

    /// What the scenarios `keep` selects sent.
    pub fn sends(&self, keep: impl Fn(&str) -> bool) -> Sends {
        let mut out = Sends::default();
        for r in self.results.iter().filter(|r| keep(&r.scenario)) {
            out.merge(&r.sent);
        }
        out
    }
}

/// The field coverage of the scenarios a filter selects, read from a recorded run.
pub struct RunCoverage {
    /// Own spec fields set against the controller's CRDs.
    pub coverage: Coverage,
    /// Selected scenarios (upgrade ones aside) with no result in the report: they count for
    /// nothing.
    pub missing: Vec<String>,
}

/// Computes the coverage of the scenarios `filter` selects from the `report.json` at `path`,
/// against the CRDs of `controller` (or of the controller the run tested, or the default).
pub async fn run_coverage(
    filter: &crate::run::plan::Filter,
    path: &Path,
    controller: Option<crate::controller::ControllerRef>,
) -> anyhow::Result<RunCoverage> {
    let all = crate::suites::all();
    filter.check_suites(&all)?;
    let selected: Vec<&str> = all
        .iter()
        .filter(|s| filter.selects(s))
        .map(|s| s.name.as_ref())
        .collect();
    anyhow::ensure!(
        !selected.is_empty(),
        "select scenarios: the filters match none (see `harness run --list`)"
    );
    let recorded = Recorded::load(path)?;
    let controller = controller
        .or_else(|| recorded.controller().cloned())
        .unwrap_or_else(crate::controller::ControllerRef::default_ref)
        .controller();
    let groups = controller.api_groups();
    let fields: Vec<ApiFields> = controller
        .crds()
        .await?
        .iter()
        .filter(|c| groups.contains(&c["spec"]["group"].as_str().unwrap_or_default()))
        .flat_map(ApiFields::of_crd)
        .collect();
    let coverage = Coverage::compute(&fields, &recorded.sends(|s| selected.contains(&s)));
    let ran = recorded.scenarios();
    let missing = selected
        .iter()
        .filter(|s| !ran.contains(**s))
        .filter(|s| all.iter().any(|x| x.name == **s && !x.requires.upgrade))
        .map(|s| s.to_string())
        .collect();
    Ok(RunCoverage { coverage, missing })
}

/// The uncovered own fields of every kind, one kind per paragraph.
pub fn uncovered_list(c: &Coverage) -> String {
    let mut out = String::new();
    for k in c.kinds.iter().filter(|k| !k.uncovered.is_empty()) {
        out.push_str(&format!(
            "{}/{} {} — {} of {} uncovered:\n",
            k.group,
            k.kind,
            k.version,
            k.uncovered.len(),
            k.total()
        ));
        for f in &k.uncovered {
            out.push_str(&format!("  {f}\n"));
        }
    }
    out
}

/// The coverage table for a terminal: one line per kind, then the total.
pub fn coverage_table(c: &Coverage) -> String {
    let mut out = format!(
        "{:<44} {:<9} {:>9} {:>8}  {}\n",
        "API FIELD COVERAGE (own spec fields)",
        "VERSION",
        "FIELDS",
        "PERCENT",
        "TEMPLATE FIELDS SET"
    );
    let (mut covered, mut total) = (0, 0);
    for k in &c.kinds {
        covered += k.covered.len();
        total += k.total();
        let inner: usize = k.template_fields.values().map(|f| f.len()).sum();
        out.push_str(&format!(
            "{:<44} {:<9} {:>9} {:>7.0}%  {inner}\n",
            format!("{}/{}", k.group, k.kind),
            k.version,
            format!("{}/{}", k.covered.len(), k.total()),
            k.percent()
        ));
    }
    let pct = if total == 0 {
        0.0
    } else {
        100.0 * covered as f64 / total as f64
    };
    out.push_str(&format!(
        "{:<44} {:<9} {:>9} {:>7.0}%\n",
        "all kinds",
        "",
        format!("{covered}/{total}"),
        pct
    ));
    out
}

impl Reporter for Terminal {
    fn event(&mut self, e: &Event) {
        match e {
            Event::RunStarted { run_id, plan } => {
                eprintln!(
                    "run {run_id}: Kubernetes {}, {}, {} cluster(s), {} skipped",
                    plan.kubernetes,
                    plan.controller,
                    plan.clusters.len(),
                    plan.skipped.len()
                );
            }
            Event::ClusterStarting { profile } => eprintln!("cluster {profile}: starting"),
            Event::ClusterReady { profile, seconds } => {
                eprintln!("cluster {profile}: ready with the controller in {seconds:.1}s")
            }
            Event::ScenarioStarted { .. } => {}
            Event::ScenarioRetrying {
                scenario,
                next_try,
                reason,
                ..
            } => eprintln!("  {:<16} {scenario} (try {next_try}): {reason}", "retry"),
            Event::ApiFields(fields) => self.api_fields = Some(fields.clone()),
            Event::ClusterLogs { profile, dir } => {
                eprintln!("cluster {profile}: logs kept in {}", dir.display())
            }
            Event::UpstreamAreas { profile, table } => {
                self.areas.push((profile.clone(), table.clone()))
            }
            Event::ScenarioFinished(r) => {
                eprintln!(
                    "  {:<16} {} ({:.1}s)",
                    r.outcome.label(),
                    r.scenario,
                    r.seconds
                );
                if let (Some(f), Outcome::Judged(Verdict::Fail)) = (&r.failure, &r.outcome) {
                    for l in f.lines().take(6) {
                        eprintln!("      {l}");
                    }
                }
                self.results.insert(key(r), r.clone());
            }
            Event::RunFinished { seconds } => {
                eprintln!("\n{:<16} {:<64} {:>8}", "RESULT", "SCENARIO", "SECONDS");
                for r in self.results.values() {
                    let note = match &r.outcome {
                        Outcome::Judged(Verdict::ExpectedFail { bug })
                        | Outcome::Judged(Verdict::UnexpectedPass { bug }) => format!(" [{bug}]"),
                        Outcome::Skipped { reason } => format!(" [{reason}]"),
                        Outcome::Flaky { .. } => {
                            format!(" [passed on try {} of {}]", r.tries(), r.tries())
                        }
                        Outcome::Judged(Verdict::Pass | Verdict::Fail)
                        | Outcome::InfraError { .. } => String::new(),
                    };
                    eprintln!(
                        "{:<16} {:<64} {:>8.1}{note}",
                        r.outcome.label(),
                        r.scenario,
                        r.seconds
                    );
                }
                for (profile, table) in &self.areas {
                    eprintln!(
                        "\nUPSTREAM SPECS BY AREA (cluster {profile})\n{}",
                        table.trim_end()
                    );
                }
                let rates = failure_rates(self.results.values());
                if !rates.is_empty() {
                    eprintln!("\n{}", rates.trim_end());
                }
                if let Some(fields) = &self.api_fields {
                    let c = coverage_of(fields, self.results.values());
                    eprintln!("\n{}", coverage_table(&c).trim_end());
                }
                let counts = counts(self.results.values());
                eprintln!("\n{} in {seconds:.0}s", summary_line(&counts));
            }
        }
    }
}

fn counts<'a>(rs: impl Iterator<Item = &'a ScenarioResult>) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::new();
    for r in rs {
        *c.entry(r.outcome.label()).or_insert(0) += 1;
    }
    c
}

fn summary_line(c: &BTreeMap<&'static str, usize>) -> String {
    let get = |k| c.get(k).copied().unwrap_or(0);
    format!(
        "{} passed, {} failed, {} flaky, {} expected-fail, {} unexpected-pass, {} skipped, {} \
         infra-error",
        get("pass"),
        get("FAIL"),
        get("FLAKY"),
        get("expected-fail"),
        get("UNEXPECTED-PASS"),
        get("skipped"),
        get("INFRA-ERROR")
    )
}

/// How often each scenario failed, when some ran more than once (`--repeat`): one line per
/// scenario that ran, failures counted per try (a flaky result counts its failed tries);
/// empty when every scenario ran once.
pub fn failure_rates<'a>(results: impl Iterator<Item = &'a ScenarioResult>) -> String {
    let mut by: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut repeated = false;
    for r in results {
        if matches!(
            r.outcome,
            Outcome::Skipped { .. } | Outcome::InfraError { .. }
        ) {
            continue;
        }
        repeated |= r.attempt > 1;
        let e = by.entry(r.scenario.as_str()).or_default();
        e.0 += r.tries();
        e.1 += r.failed_tries.len() + usize::from(r.outcome.fails_run(false));
        e.2 += usize::from(matches!(r.outcome, Outcome::Flaky { .. }));
    }
    if !repeated {
        return String::new();
    }
    let mut out = format!(
        "{:<64} {:>5} {:>7} {:>6} {:>8}\n",
        "FAILURE RATE (per try)", "TRIES", "FAILED", "FLAKY", "RATE"
    );
    for (scenario, (tries, failed, flaky)) in by {
        out.push_str(&format!(
            "{scenario:<64} {tries:>5} {failed:>7} {flaky:>6} {:>7.0}%\n",
            100.0 * failed as f64 / tries.max(1) as f64
        ));
    }
    out
}

/// The machine-readable report (`report.json`).
#[derive(Debug, Clone, Serialize)]
pub struct JsonReport {
    /// Run id.
    pub run_id: String,
    /// The plan.
    pub plan: Option<Plan>,
    /// Whether the run has finished.
    pub finished: bool,
    /// Seconds, once finished.
    pub seconds: Option<f64>,
    /// Counts by result.
    pub counts: BTreeMap<&'static str, usize>,
    /// Every result, ordered by suite, scenario, attempt.
    pub results: Vec<ScenarioResult>,
    /// Log files of clusters kept after a failure, by profile, relative to the run directory.
    pub cluster_logs: BTreeMap<String, Vec<String>>,
    /// Seconds each cluster took to come up with its controller, by profile (the costs a
    /// sharded matrix is split by).
    pub clusters: BTreeMap<String, f64>,
    /// API field coverage, once the controller's CRDs are known.
    pub coverage: Option<Coverage>,
    /// Where the time went: each cluster's bring-up and each scenario, by cluster.
    pub timeline: Vec<timeline::Bar>,
}

/// Writes `report.json`, `junit.xml` and `report.html` into a run directory.
#[derive(Debug)]
pub struct Files {
    dir: PathBuf,
    run_id: String,
    plan: Option<Plan>,
    results: BTreeMap<Key, ScenarioResult>,
    seconds: Option<f64>,
    cluster_logs: BTreeMap<String, Vec<String>>,
    clusters: BTreeMap<String, f64>,
    api_fields: Option<Vec<ApiFields>>,
    /// When the run started, as this reporter heard it.
    clock: Option<std::time::Instant>,
    /// When each cluster started coming up (seconds into the run).
    cluster_started: BTreeMap<String, f64>,
    timeline: Vec<timeline::Bar>,
}

/// The reporters of a run: the terminal, and the files of `run_id` under `root` (see
/// [`Files::new`]); with the run's directory.
pub fn standard(root: &Path, run_id: &str) -> anyhow::Result<(PathBuf, Vec<Box<dyn Reporter>>)> {
    let files = Files::new(root, run_id)
        .with_context(|| format!("create the report directory in {}", root.display()))?;
    let dir = files.dir().to_path_buf();
    Ok((dir, vec![Box::new(Terminal::default()), Box::new(files)]))
}

impl Files {
    /// Reports for `run_id` under `root/<run_id>/`, and `root/latest` pointing at it.
    pub fn new(root: &Path, run_id: &str) -> std::io::Result<Self> {
        let dir = root.join(run_id);
        std::fs::create_dir_all(&dir)?;
        let latest = root.join("latest");
        let tmp = root.join(format!(".latest-{run_id}"));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(run_id, &tmp)?;
        std::fs::rename(&tmp, &latest)?;
        Ok(Self {
            dir,
            run_id: run_id.into(),
            plan: None,
            results: BTreeMap::new(),
            seconds: None,
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            api_fields: None,
            clock: None,
            cluster_started: BTreeMap::new(),
            timeline: vec![],
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The JSON report as it stands.
    pub fn json(&self) -> JsonReport {
        JsonReport {
            run_id: self.run_id.clone(),
            plan: self.plan.clone(),
            finished: self.seconds.is_some(),
            seconds: self.seconds,
            counts: counts(self.results.values()),
            results: self.results.values().cloned().collect(),
            cluster_logs: self.cluster_logs.clone(),
            clusters: self.clusters.clone(),
            coverage: self
                .api_fields
                .as_ref()
                .map(|f| coverage_of(f, self.results.values())),
            timeline: self.timeline.clone(),
        }
    }

    /// Seconds since the run started (0 before).
    fn now(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.elapsed().as_secs_f64())
    }

    /// Records the log files under `dir` (relative to the run directory when inside it).
    fn add_cluster_logs(&mut self, profile: &str, dir: &Path) {
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| {
                        let p = e.path();
                        p.strip_prefix(&self.dir)
                            .unwrap_or(&p)
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        self.cluster_logs
            .entry(profile.to_string())
            .or_default()
            .extend(files);
    }

    fn write_all(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(&self.json()).expect("report serializes");
        atomic_write(&self.dir.join("report.json"), &json)?;
        atomic_write(
            &self.dir.join("junit.xml"),
            junit(&self.run_id, self.results.values()).as_bytes(),
        )?;
        atomic_write(&self.dir.join("report.html"), html(&self.json()).as_bytes())
    }
}

impl Reporter for Files {
    fn event(&mut self, e: &Event) {
        match e {
            Event::RunStarted { plan, .. } => {
                self.plan = Some(plan.clone());
                self.clock = Some(std::time::Instant::now());
            }
            Event::ScenarioFinished(r) => {
                if r.seconds > 0.0 {
                    self.timeline.push(timeline::Bar {
                        lane: r.profile.clone(),
                        label: r.scenario.clone(),
                        start: (self.now() - r.seconds).max(0.0),
                        seconds: r.seconds,
                        class: class_of(&r.outcome).into(),
                    });
                }
                self.results.insert(key(r), r.clone());
            }
            Event::RunFinished { seconds } => self.seconds = Some(*seconds),
            Event::ClusterLogs { profile, dir } => self.add_cluster_logs(profile, dir),
            Event::ApiFields(fields) => self.api_fields = Some(fields.clone()),
            Event::ClusterReady { profile, seconds } => {
                self.clusters.insert(profile.clone(), *seconds);
                let start = self
                    .cluster_started
                    .get(profile)
                    .copied()
                    .unwrap_or_else(|| (self.now() - seconds).max(0.0));
                self.timeline.push(timeline::Bar {
                    lane: profile.clone(),
                    label: "bring-up".into(),
                    start,
                    seconds: *seconds,
                    class: timeline::BRING_UP.into(),
                });
            }
            Event::ClusterStarting { profile } => {
                let now = self.now();
                self.cluster_started.insert(profile.clone(), now);
                return;
            }
            Event::ScenarioStarted { .. }
            | Event::ScenarioRetrying { .. }
            | Event::UpstreamAreas { .. } => return,
        }
        if let Err(err) = self.write_all() {
            eprintln!("warning: write reports in {}: {err}", self.dir.display());
        }
    }
}

/// A scenario's named steps as an ordered list: each with when it started and how long it ran
/// (or that it never ended), the failed ones marked.
fn steps_html(steps: &[crate::scenario::StepRecord]) -> String {
    let items: String = steps
        .iter()
        .map(|s| {
            let (class, ran) = match (s.failed, s.seconds) {
                (true, Some(t)) => ("failed", format!("failed after {t:.1} s")),
                (false, Some(t)) => ("ok", format!("{t:.1} s")),
                (_, None) => ("failed", "never ended".to_string()),
            };
            format!(
                "<li class=\"{class}\">{} <span class=\"when\">at {:.1} s, {ran}</span></li>",
                esc(&s.name),
                s.start
            )
        })
        .collect();
    format!("<h4>Steps</h4><ol class=\"steps\">{items}</ol>")
}

/// The command that runs scenario `x` alone again on the cell of `plan` (none for a spec of the
/// controller's own suite, which its suite's focus selects).
pub fn rerun_command(plan: &Plan, x: &ScenarioResult) -> Option<String> {
    if x.suite == crate::run::upstream::SUITE {
        return None;
    }
    let quote = |s: &str| shlex::try_quote(s).map(|q| q.into_owned()).ok();
    let c = &plan.controller;
    let controller = match &c.checkout {
        Some(dir) => format!("{}@{}", c.kind.name(), dir.display()),
        None => c.to_string(),
    };
    Some(format!(
        "harness run --k8s {} --controller {} --focus {}",
        plan.kubernetes,
        quote(&controller)?,
        quote(&x.scenario)?
    ))
}

fn rerun_html(plan: &Plan, x: &ScenarioResult) -> String {
    rerun_command(plan, x)
        .map(|c| {
            format!(
                "<h4>Run it again</h4><pre class=\"again\">{}</pre>",
                esc(&c)
            )
        })
        .unwrap_or_default()
}

/// The "Cluster logs" list of a failure: links to its cluster's exported log files.
fn log_links(files: Option<&Vec<String>>) -> String {
    let Some(files) = files.filter(|f| !f.is_empty()) else {
        return String::new();
    };
    let items: String = files
        .iter()
        .map(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            format!("<li><a href=\"{}\">{}</a></li>", esc(f), esc(name))
        })
        .collect();
    format!("<h4>Cluster logs</h4><ul class=\"cluster-logs\">{items}</ul>")
}

/// Writes `body` to `path` through a temporary file renamed into place, so a reader (or a
/// crash) never sees half a file.
pub fn atomic_write(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// JUnit XML: one test suite per scenario suite; skips as skipped, expected failures as passes
/// with the bug in their output, regressions and unexpected passes as failures.
pub fn junit<'a>(run_id: &str, results: impl Iterator<Item = &'a ScenarioResult>) -> String {
    let mut report = Report::new(format!("harness {run_id}"));
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    for r in results {
        suites
            .entry(r.suite.clone())
            .or_insert_with(|| TestSuite::new(r.suite.clone()))
            .add_test_case(test_case(r));
    }
    for (_, s) in suites {
        report.add_test_suite(s);
    }
    report.to_string().unwrap_or_default()
}

/// One result as a JUnit test case: skips as skipped, expected failures as passes with the bug
/// in their output, regressions and unexpected passes as failures, flaky results as passes
/// with their failed tries as flaky runs.
pub fn test_case(r: &ScenarioResult) -> TestCase {
    let name = if r.attempt > 1 {
        format!("{}#{}", r.scenario, r.attempt)
    } else {
        r.scenario.clone()
    };
    let mut status = match &r.outcome {
        Outcome::Judged(Verdict::Pass) => TestCaseStatus::success(),
        Outcome::Judged(Verdict::ExpectedFail { .. }) => TestCaseStatus::success(),
        // Its failed tries become <flakyFailure> elements below.
        Outcome::Flaky { .. } => TestCaseStatus::success(),
        Outcome::Judged(Verdict::Fail) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message("regression");
            s.set_description(r.failure.clone().unwrap_or_default());
            s
        }
        Outcome::Judged(Verdict::UnexpectedPass { bug }) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("unexpected pass: known bug {bug} did not show"));
            s
        }
        Outcome::InfraError { reason } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message("infrastructure error");
            s.set_description(reason.clone());
            s
        }
        Outcome::Skipped { reason } => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason.clone());
            s
        }
    };
    // Failed tries before the last: flaky runs of a pass, reruns of a failure.
    status.add_reruns(r.failed_tries.iter().map(|t| {
        let mut rerun = TestRerun::new(NonSuccessKind::Failure);
        rerun.set_time(std::time::Duration::from_secs_f64(t.seconds));
        match (&t.verdict, &t.failure) {
            (Verdict::UnexpectedPass { bug }, _) => {
                rerun.set_message(format!("unexpected pass: known bug {bug} did not show"));
            }
            (_, failure) => {
                rerun.set_message("regression");
                rerun.set_system_out(failure.clone().unwrap_or_default());
            }
        }
        rerun
    }));
    let mut case = TestCase::new(name, status);
    case.set_classname(r.suite.clone());
    case.set_time(std::time::Duration::from_secs_f64(r.seconds));
    if let Outcome::Judged(Verdict::ExpectedFail { bug }) = &r.outcome {
        case.set_system_out(format!(
            "expected failure (known bug {bug}):\n{}",
            r.failure.clone().unwrap_or_default()
        ));
    }
    case
}

/// `s` as HTML text or a double-quoted attribute value: `&`, `<`, `>` and `"` escaped. The one
/// escape of every HTML page the harness writes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The class of a result on the page: `pass`, `xfail`, `flaky`, `skip` or `fail` (a failure,
/// an unexpected pass, an infrastructure error).
pub fn class_of(o: &Outcome) -> &'static str {
    match o {
        Outcome::Judged(Verdict::Pass) => "pass",
        Outcome::Judged(Verdict::ExpectedFail { .. }) => "xfail",
        Outcome::Flaky { .. } => "flaky",
        Outcome::Skipped { .. } => "skip",
        Outcome::Judged(Verdict::Fail | Verdict::UnexpectedPass { .. })
        | Outcome::InfraError { .. } => "fail",
    }
}

/// The classes of results in the order the page shows them: what needs a look first.
const CLASSES: [(&str, &str); 5] = [
    ("fail", "failed"),
    ("flaky", "flaky"),
    ("xfail", "expected-fail"),
    ("pass", "passed"),
    ("skip", "skipped"),
];

/// The summary strip: one bar of the results by class, then the cell and the duration.
fn strip(r: &JsonReport) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for x in &r.results {
        *by.entry(class_of(&x.outcome)).or_default() += 1;
    }
    let parts: String = CLASSES
        .iter()
        .filter_map(|(c, name)| {
            let n = *by.get(c)?;
            Some(format!(
                "<span class=\"seg {c}\" style=\"flex:{n}\" title=\"{n} {name}\">{n} {name}</span>",
            ))
        })
        .collect();
    let cell = r
        .plan
        .as_ref()
        .map(|p| {
            format!(
                "Kubernetes {} · {} · {} cluster(s)",
                p.kubernetes,
                p.controller,
                p.clusters.len()
            )
        })
        .unwrap_or_default();
    let took = match (r.finished, r.seconds) {
        (true, Some(s)) => format!("{s:.0} s"),
        _ => "in progress".into(),
    };
    format!(
        "<div class=\"strip\"><div class=\"bar\">{parts}</div><p>{} results · {took} · {}</p></div>\n",
        r.results.len(),
        esc(&cell)
    )
}

/// What needs a look first: the failed and flaky results, each linked to its details.
fn attention(r: &JsonReport) -> String {
    let items: String = r
        .results
        .iter()
        .enumerate()
        .filter(|(_, x)| matches!(class_of(&x.outcome), "fail" | "flaky"))
        .map(|(i, x)| {
            let first = x
                .failure
                .as_deref()
                .or_else(|| x.failed_tries.first().and_then(|t| t.failure.as_deref()))
                .and_then(|f| f.lines().next())
                .unwrap_or_default();
            format!(
                "<li class=\"{}\"><a href=\"#d{i}\">{}</a> <span class=\"res\">{}</span> {}</li>",
                class_of(&x.outcome),
                esc(&x.scenario),
                x.outcome.label(),
                esc(&first.chars().take(200).collect::<String>())
            )
        })
        .collect();
    if items.is_empty() {
        return String::new();
    }
    format!("<h2>Needs a look</h2><ul id=\"attention\">{items}</ul>\n")
}

/// The filters over the results table: by result, suite and text. Hidden until the script
/// that runs them shows them: the page reads the same without it.
fn filters(r: &JsonReport) -> String {
    let suites: BTreeSet<&str> = r.results.iter().map(|x| x.suite.as_str()).collect();
    let options: String = suites
        .iter()
        .map(|s| format!("<option>{}</option>", esc(s)))
        .collect();
    let boxes: String = CLASSES
        .iter()
        .map(|(c, name)| {
            format!("<label><input type=\"checkbox\" value=\"{c}\" checked> {name}</label> ")
        })
        .collect();
    format!(
        "<div id=\"filters\" hidden>{boxes}<select><option value=\"\">every suite</option>{options}</select> <input type=\"search\" placeholder=\"search scenarios\"> <span id=\"shown\"></span></div>\n"
    )
}

/// Shows the filters and applies them to the rows of `#results` (each row carries its
/// `data-result` and `data-suite`); at the end of the page, once the table is there.
const FILTER_SCRIPT: &str = "<script>(function(){var f=document.getElementById('filters');if(!f)return;f.hidden=false;\
var rows=[].slice.call(document.querySelectorAll('#results tbody tr'));\
function apply(){var on={};[].forEach.call(f.querySelectorAll('input[type=checkbox]'),function(c){on[c.value]=c.checked;});\
var suite=f.querySelector('select').value,q=f.querySelector('input[type=search]').value.toLowerCase(),n=0;\
rows.forEach(function(r){var ok=on[r.dataset.result]&&(!suite||r.dataset.suite===suite)&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);r.hidden=!ok;if(ok)n++;});\
document.getElementById('shown').textContent=n+' of '+rows.length+' shown';}\
f.addEventListener('input',apply);f.addEventListener('change',apply);apply();})();</script>\n";

/// The single-file HTML report.
pub fn html(r: &JsonReport) -> String {
    let mut rows = String::new();
    let mut details = String::new();
    for (i, x) in r.results.iter().enumerate() {
        let class = class_of(&x.outcome);
        let note = match &x.outcome {
            Outcome::Judged(Verdict::ExpectedFail { bug })
            | Outcome::Judged(Verdict::UnexpectedPass { bug }) => bug.clone(),
            Outcome::Skipped { reason } | Outcome::InfraError { reason } => reason.clone(),
            Outcome::Flaky { .. } => format!("passed on try {} of {}", x.tries(), x.tries()),
            Outcome::Judged(Verdict::Pass | Verdict::Fail) => String::new(),
        };
        // The failed tries first, then the last try's failure.
        let mut failures: Vec<(String, &str, Diagnostics)> = x
            .failed_tries
            .iter()
            .enumerate()
            .map(|(n, t)| {
                (
                    format!(
                        "try {} of {}: {}",
                        n + 1,
                        x.tries(),
                        Outcome::Judged(t.verdict.clone()).label()
                    ),
                    t.failure.as_deref().unwrap_or("(no failure text)"),
                    t.diagnostics.clone().unwrap_or_default(),
                )
            })
            .collect();
        if let Some(f) = &x.failure {
            failures.push((
                x.outcome.label().to_string(),
                f,
                x.diagnostics.clone().unwrap_or_default(),
            ));
        }
        let link = if failures.is_empty() {
            String::new()
        } else {
            format!("<a href=\"#d{i}\">details</a>")
        };
        rows.push_str(&format!(
            "<tr class=\"{class}\" data-result=\"{class}\" data-suite=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"res\">{}</td><td>{:.1}</td><td>{}</td><td>{link}</td></tr>\n",
            esc(&x.suite),
            esc(&x.suite),
            esc(&x.scenario),
            esc(&x.profile),
            x.outcome.label(),
            x.seconds,
            esc(&note)
        ));
        for (n, (title, f, d)) in failures.iter().enumerate() {
            let id = if n == 0 {
                format!(" id=\"d{i}\"")
            } else {
                String::new()
            };
            // The named steps of the last try, the failed one marked, and how to run it again.
            let last = n + 1 == failures.len();
            let steps = if last && !x.steps.is_empty() {
                steps_html(&x.steps)
            } else {
                String::new()
            };
            let again = match (last, r.plan.as_ref()) {
                (true, Some(p)) => rerun_html(p, x),
                _ => String::new(),
            };
            let plots: String = d.plots.iter().map(plot::svg).collect();
            details.push_str(&format!(
                "<section{id} class=\"diag\"><h3>{} — {}</h3><h4>Failure</h4><pre class=\"failure\">{}</pre>{plots}{steps}{again}<h4>Events</h4><pre>{}</pre><h4>Objects</h4><details><summary>YAML</summary><pre>{}</pre></details><h4>Controller log (scenario window)</h4><details><summary>{} lines</summary><pre>{}</pre></details>{}</section>\n",
                esc(&x.scenario),
                esc(title),
                esc(f),
                esc(&d.events.join("\n")),
                esc(&d.objects),
                d.manager_log.lines().count(),
                esc(&d.manager_log),
                log_links(r.cluster_logs.get(&x.profile))
            ));
        }
    }
    let counts = summary_line(&r.counts);
    let timeline = match r.timeline.is_empty() {
        true => String::new(),
        false => format!(
            "<h2>Timeline</h2><p>Each cluster's bring-up and each scenario on its cluster, by \
             result; hover a bar for its name and times.</p>{}",
            timeline::svg(&r.timeline)
        ),
    };
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>harness {id}</title><style>
body{{font-family:sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}
#results td:nth-child(2){{min-width:24em;word-break:break-word}}#results td:nth-child(3){{max-width:14em;word-break:break-all;font-size:90%}}
tr.pass .res{{background:#cfc}}tr.xfail .res{{background:#ffd}}tr.flaky .res{{background:#fd9}}tr.skip .res{{background:#eee}}tr.fail .res{{background:#fcc}}
pre{{background:#f6f6f6;padding:8px;overflow:auto;max-height:40em}}pre.failure{{background:#fee}}ol.steps li.failed{{color:#a00;font-weight:bold}}ol.steps .when{{color:#666;font-weight:normal}}
.strip .bar{{display:flex;height:1.6em;border-radius:4px;overflow:hidden;max-width:900px}}.seg{{white-space:nowrap;overflow:hidden;padding:0 6px;font-size:85%;line-height:1.6em}}
.seg.pass,.tl-pass{{background:#9d9;fill:#7c7}}.seg.fail,.tl-fail{{background:#e88;fill:#d55}}.seg.flaky,.tl-flaky{{background:#fc7;fill:#fa3}}.seg.xfail,.tl-xfail{{background:#ee9;fill:#cc5}}.seg.skip,.tl-skip{{background:#ddd;fill:#bbb}}.tl-up{{fill:#99b}}
#attention li{{margin:2px 0}}#attention .res{{font-weight:bold}}#filters{{margin:1em 0}}#filters label{{margin-right:.6em}}
svg text{{font-size:11px;fill:#333}}svg line.tick{{stroke:#eee}}
.plot path{{fill:none;stroke-width:2}}.plot path.counter{{stroke:#36c}}.plot path.bound{{stroke:#c33;stroke-dasharray:5 3}}.plot rect.over{{fill:#fdd}}.plot line.axis{{stroke:#999}}.plot figcaption{{font-size:85%;color:#555}}
.cbar{{display:inline-block;width:120px;height:.8em;background:#eee;vertical-align:middle}}.cbar span{{display:block;height:100%;background:#79c}}
</style></head><body>
<h1>harness run {id}</h1>{strip}<p id=\"summary\">{counts}</p>
{attention}{timeline}<h2>Results</h2>{filters}
<table id=\"results\"><thead><tr><th>suite</th><th>scenario</th><th>profile</th><th>result</th><th>seconds</th><th>note</th><th></th></tr></thead><tbody>
{rows}</tbody></table>
{coverage}<h2>Failures</h2>
{details}{FILTER_SCRIPT}</body></html>\n",
        id = esc(&r.run_id),
        strip = strip(r),
        attention = attention(r),
        filters = filters(r),
        coverage = r.coverage.as_ref().map(coverage_html).unwrap_or_default(),
    )
}

/// The coverage section of the HTML report: a table per kind with its uncovered fields and
/// the template fields set.
fn coverage_html(c: &Coverage) -> String {
    let list = |items: &mut dyn Iterator<Item = &String>| -> String {
        items
            .map(|f| format!("<li><code>{}</code></li>", esc(f)))
            .collect()
    };
    let mut rows = String::new();
    for k in &c.kinds {
        let templates: String = k
            .template_fields
            .iter()
            .map(|(t, fields)| {
                format!(
                    "<details><summary>{} fields set in <code>{}</code></summary><ul>{}</ul></details>",
                    fields.len(),
                    esc(t),
                    list(&mut fields.iter())
                )
            })
            .collect();
        rows.push_str(&format!(
            "<tr class=\"cov\" data-kind=\"{kind}\"><td>{group}/{kind}</td><td>{version}</td><td>{covered}/{total}</td><td><span class=\"cbar\"><span style=\"width:{pct:.0}%\"></span></span> {pct:.0}%</td><td><details><summary>{n} uncovered</summary><ul class=\"uncovered\">{uncovered}</ul></details></td><td>{templates}</td></tr>\n",
            group = esc(&k.group),
            kind = esc(&k.kind),
            version = esc(&k.version),
            covered = k.covered.len(),
            total = k.total(),
            pct = k.percent(),
            n = k.uncovered.len(),
            uncovered = list(&mut k.uncovered.iter()),
        ));
    }
    format!(
        "<h2>API field coverage</h2><p>Own spec fields of each API of the controller under test set by the scenarios (template internals listed apart).</p>\n<table id=\"coverage\"><thead><tr><th>kind</th><th>version</th><th>fields</th><th>covered</th><th>uncovered fields</th><th>template fields set</th></tr></thead><tbody>\n{rows}</tbody></table>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Diagnostics;

    #[tokio::test]
    async fn run_coverage_names_an_empty_selection_and_a_missing_report() {
        let none = crate::run::plan::Filter {
            focus: vec!["no-scenario-has-this-name".into()],
            ..Default::default()
        };
        let e = run_coverage(&none, Path::new("/nonexistent/report.json"), None)
            .await
            .err()
            .expect("an empty selection is an error");
        assert!(e.to_string().contains("match none"), "{e}");
        let all = crate::run::plan::Filter::default();
        let e = run_coverage(&all, Path::new("/nonexistent/report.json"), None)
            .await
            .err()
            .expect("a missing report is an error");
        assert!(e.to_string().contains("/nonexistent/report.json"), "{e}");
    }

    fn result(name: &str, outcome: Outcome, failure: Option<&str>) -> ScenarioResult {
        ScenarioResult {
            scenario: name.into(),
            suite: "s".into(),
            attempt: 1,
            profile: "default".into(),
            outcome,
            failure: failure.map(String::from),
            seconds: 1.5,
            diagnostics: failure.map(|_| Diagnostics {
                events: vec!["Warning FailedCreate <boom>".into()],
                objects: "kind: Pod".into(),
                manager_log: "E1121 line".into(),
                plots: vec![],
            }),
            sent: Default::default(),
            failed_tries: vec![],
            steps: vec![],
        }
    }

    #[test]
    fn junit_parses_back_with_the_right_counts() {
        let rs = [
            result("a", Outcome::Judged(Verdict::Pass), None),
            result("b", Outcome::Judged(Verdict::Fail), Some("boom")),
            result(
                "c",
                Outcome::Judged(Verdict::ExpectedFail { bug: "k".into() }),
                Some("sig"),
            ),
            result(
                "d",
                Outcome::Judged(Verdict::UnexpectedPass { bug: "k".into() }),
                None,
            ),
            result(
                "e",
                Outcome::Skipped {
                    reason: "needs 1.27".into(),
                },
                None,
            ),
        ];
        let xml = junit("r1", rs.iter());
        let parsed = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(parsed.tests, 5);
        assert_eq!(parsed.failures, 2);
        let suite = &parsed.test_suites[0];
        let skipped = suite
            .test_cases
            .iter()
            .filter(|c| matches!(c.status, TestCaseStatus::Skipped { .. }))
            .count();
        assert_eq!(skipped, 1);
        let c = suite
            .test_cases
            .iter()
            .find(|c| c.name.as_str() == "c")
            .unwrap();
        assert!(
            c.system_out
                .as_ref()
                .unwrap()
                .as_str()
                .contains("known bug k")
        );
    }

    fn flaky(name: &str) -> ScenarioResult {
        let mut r = result(
            name,
            Outcome::Flaky {
                verdict: Verdict::Pass,
            },
            None,
        );
        r.failed_tries = vec![crate::results::FailedTry {
            verdict: Verdict::Fail,
            failure: Some("timed out <first>".into()),
            seconds: 3.0,
            diagnostics: None,
        }];
        r
    }

    #[test]
    fn a_flaky_result_is_a_junit_pass_with_its_failed_tries_as_flaky_runs() {
        let mut failed = result("b", Outcome::Judged(Verdict::Fail), Some("again"));
        failed.failed_tries = flaky("x").failed_tries;
        let rs = [flaky("a"), failed];
        let xml = junit("r1", rs.iter());
        let parsed = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!((parsed.tests, parsed.failures), (2, 1));
        let cases = &parsed.test_suites[0].test_cases;
        match &cases[0].status {
            TestCaseStatus::Success { flaky_runs } => {
                assert_eq!(flaky_runs.len(), 1);
                let out = flaky_runs[0].system_out.as_ref().unwrap();
                assert!(out.as_str().contains("timed out <first>"));
            }
            other => panic!("a flaky result passes: {other:?}"),
        }
        match &cases[1].status {
            TestCaseStatus::NonSuccess { reruns, .. } => assert_eq!(reruns.runs.len(), 1),
            other => panic!("a failure stays one: {other:?}"),
        }
    }

    #[test]
    fn a_flaky_result_is_counted_shown_and_its_failed_tries_detailed() {
        let rs = vec![flaky("a")];
        let c = counts(rs.iter());
        assert_eq!(c.get("FLAKY"), Some(&1));
        assert!(summary_line(&c).contains("1 flaky"));
        let h = html(&JsonReport {
            run_id: "r".into(),
            plan: None,
            finished: true,
            seconds: Some(1.0),
            counts: c,
            results: rs,
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            coverage: None,
            timeline: vec![],
        });
        assert!(
            h.contains("<tr class=\"flaky\" data-result=\"flaky\""),
            "{h}"
        );
        assert!(h.contains("passed on try 2 of 2"));
        assert!(h.contains("try 1 of 2: FAIL"));
        assert!(h.contains("timed out &lt;first&gt;"));
        assert!(h.contains("href=\"#d0\""));
    }

    #[test]
    fn failure_rates_appear_only_when_a_scenario_ran_more_than_once() {
        let once = [result("a", Outcome::Judged(Verdict::Pass), None)];
        assert_eq!(failure_rates(once.iter()), "");
        let mut second = flaky("a");
        second.attempt = 2;
        let mut third = result("a", Outcome::Judged(Verdict::Fail), Some("x"));
        third.attempt = 3;
        let rs = [
            result("a", Outcome::Judged(Verdict::Pass), None),
            second,
            third,
        ];
        let table = failure_rates(rs.iter());
        let line = table.lines().nth(1).unwrap();
        // Four tries: a pass, a failed try then a pass, a failure.
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["a", "4", "2", "1", "50%"]
        );
    }

    #[test]
    fn html_escapes_and_links_failures_to_diagnostics() {
        let mut failed = result("b", Outcome::Judged(Verdict::Fail), Some("x <y>"));
        failed.steps = vec![
            crate::scenario::StepRecord {
                name: "make <it>".into(),
                start: 0.5,
                seconds: Some(2.0),
                failed: false,
            },
            crate::scenario::StepRecord {
                name: "lower the partition".into(),
                start: 2.5,
                seconds: Some(12.4),
                failed: true,
            },
        ];
        let rs = vec![failed];
        let h = html(&JsonReport {
            run_id: "r".into(),
            plan: None,
            finished: true,
            seconds: Some(1.0),
            counts: counts(rs.iter()),
            results: rs,
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            coverage: None,
            timeline: vec![],
        });
        assert!(h.contains("x &lt;y&gt;"));
        assert!(h.contains("href=\"#d0\""));
        assert!(h.contains("Warning FailedCreate &lt;boom&gt;"));
        // The failed scenario's steps, the failed one marked.
        assert!(
            h.contains(
                "<li class=\"ok\">make &lt;it&gt; <span class=\"when\">at 0.5 s, 2.0 s</span></li>"
            ),
            "{h}"
        );
        assert!(h.contains("<li class=\"failed\">lower the partition <span class=\"when\">at 2.5 s, failed after 12.4 s</span></li>"));
    }

    #[test]
    fn coverage_is_computed_from_the_api_fields_and_what_every_result_sent() {
        use crate::scenario::record::{Sent, Verb};
        let crd = serde_json::json!({"spec": {"group": "apps.kruise.io",
            "names": {"kind": "CloneSet"}, "versions": [{"name": "v1alpha1", "served": true,
            "storage": true, "schema": {"openAPIV3Schema": {"properties": {"spec": {
                "type": "object", "properties": {"replicas": {"type": "integer"},
                "paused": {"type": "boolean"}, "minReadySeconds": {"type": "integer"},
                "template": {"x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
        let sent = |paths: serde_json::Value| {
            let body = serde_json::json!({"spec": paths});
            Sends::of(&[Sent::of_object(
                "apps.kruise.io/v1alpha1",
                "CloneSet",
                Verb::Create,
                &body,
            )])
        };
        let mut a = result("a", Outcome::Judged(Verdict::Pass), None);
        a.sent = sent(serde_json::json!({"replicas": 1, "template": {"spec": {"x": 1}}}));
        let mut b = result("b", Outcome::Judged(Verdict::Pass), None);
        b.sent = sent(serde_json::json!({"paused": true}));
        let root = tempfile::tempdir().unwrap();
        let mut files = Files::new(root.path(), "r").unwrap();
        files.event(&Event::ApiFields(ApiFields::of_crd(&crd)));
        files.event(&Event::ScenarioFinished(a));
        files.event(&Event::ScenarioFinished(b));
        let c = files.json().coverage.unwrap();
        let k = c.kind("CloneSet").unwrap();
        assert_eq!(k.covered.len(), 3);
        assert_eq!(
            k.uncovered.iter().collect::<Vec<_>>(),
            ["spec.minReadySeconds"]
        );
        assert_eq!(k.writes, 2);
        let page = std::fs::read_to_string(files.dir().join("report.html")).unwrap();
        assert!(page.contains("<table id=\"coverage\">"), "{page}");
        assert!(
            page.contains("<td>3/4</td><td><span class=\"cbar\"><span style=\"width:75%\"></span></span> 75%</td>"),
            "{page}"
        );
        assert!(page.contains("<li><code>spec.minReadySeconds</code></li>"));
        assert!(
            page.contains("<li><code>spec.x</code></li>"),
            "template internals listed"
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(files.dir().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(json["coverage"]["kinds"][0]["kind"], "CloneSet");
        assert_eq!(
            json["results"][0]["sent"]["apps.kruise.io/v1alpha1/CloneSet"]["writes"],
            1
        );
        let table = coverage_table(&c);
        assert!(table.contains("apps.kruise.io/CloneSet"), "{table}");
        assert!(table.contains("3/4"), "{table}");
    }

    #[test]
    fn the_page_leads_with_a_summary_strip_what_needs_a_look_and_a_timeline() {
        let root = tempfile::tempdir().unwrap();
        let mut files = Files::new(root.path(), "r").unwrap();
        let plan = crate::run::plan::plan(
            &[],
            &Default::default(),
            crate::toolchain::KubeVersion::default_version(),
            &crate::controller::ControllerRef::default_ref(),
        );
        files.event(&Event::RunStarted {
            run_id: "r".into(),
            plan,
        });
        files.event(&Event::ClusterStarting {
            profile: "default".into(),
        });
        files.event(&Event::ClusterReady {
            profile: "default".into(),
            seconds: 0.0,
        });
        let mut other = result("c", Outcome::Judged(Verdict::Pass), None);
        other.suite = "t".into();
        for r in [
            result("a", Outcome::Judged(Verdict::Pass), None),
            result(
                "b",
                Outcome::Judged(Verdict::Fail),
                Some("boom\nsecond line"),
            ),
            other,
        ] {
            files.event(&Event::ScenarioFinished(r));
        }
        files.event(&Event::RunFinished { seconds: 3.0 });
        let page = std::fs::read_to_string(files.dir().join("report.html")).unwrap();
        // The strip: a segment per class present, what needs a look first.
        assert!(
            page.contains("title=\"1 failed\">1 failed</span>"),
            "{page}"
        );
        assert!(
            page.contains("title=\"2 passed\">2 passed</span>"),
            "{page}"
        );
        assert!(
            !page.contains("1 flaky"),
            "no segment for a class with no result"
        );
        let look = &page[page.find("id=\"attention\"").unwrap()..];
        assert!(
            look.starts_with("id=\"attention\"><li class=\"fail\"><a href=\"#d1\">b</a> <span class=\"res\">FAIL</span> boom</li></ul>"),
            "{look}"
        );
        assert!(page.find("id=\"attention\"") < page.find("id=\"results\""));
        // Filters: a suite option per suite, rows tagged for them.
        assert!(
            page.contains("<option>s</option><option>t</option>"),
            "{page}"
        );
        assert!(page.contains("<tr class=\"fail\" data-result=\"fail\" data-suite=\"s\">"));
        assert!(page.contains("<div id=\"filters\" hidden>"));
        // The timeline: the bring-up and the three scenarios on the cluster's lane.
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(files.dir().join("report.json")).unwrap())
                .unwrap();
        let bars = json["timeline"].as_array().unwrap();
        assert_eq!(bars.len(), 4, "{bars:?}");
        assert_eq!(bars[0]["label"], "bring-up");
        assert_eq!(bars[2]["class"], "fail");
        assert!(bars.iter().all(|b| b["lane"] == "default"));
        assert_eq!(page.matches("<rect ").count(), 4);
        assert!(page.contains("<title>b — default — 1.5 s from"), "{page}");
        // The failure says how to run it alone again.
        let again = format!(
            "<h4>Run it again</h4><pre class=\"again\">harness run --k8s {} --controller {} --focus b</pre>",
            crate::toolchain::KubeVersion::default_version(),
            crate::controller::ControllerRef::default_ref()
        );
        assert!(page.contains(&again), "{page}");
    }

    #[test]
    fn exported_cluster_logs_are_linked_from_the_failures_of_their_profile() {
        let root = tempfile::tempdir().unwrap();
        let mut files = Files::new(root.path(), "r").unwrap();
        let logs = files.dir().join("cluster-logs").join("r-0");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("kube-apiserver.log"), "started").unwrap();
        let failed = result("b", Outcome::Judged(Verdict::Fail), Some("boom"));
        files.event(&Event::ScenarioFinished(failed.clone()));
        files.event(&Event::ClusterLogs {
            profile: failed.profile.clone(),
            dir: logs,
        });
        let dir = files.dir().to_path_buf();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        assert_eq!(
            json["cluster_logs"][&failed.profile][0],
            "cluster-logs/r-0/kube-apiserver.log"
        );
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(
            html.contains("<a href=\"cluster-logs/r-0/kube-apiserver.log\">kube-apiserver.log</a>"),
            "{html}"
        );
    }
}
