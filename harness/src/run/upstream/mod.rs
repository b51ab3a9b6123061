//! A controller's own end-to-end suite run on a cell (`harness run --upstream-e2e`):
//! OpenKruise's Ginkgo suite, built from a release module ([`crate::controller::openkruise::e2e`]),
//! run against the cell's cluster with what upstream's CI prepares (its e2e configuration
//! seeded before the manager starts, `kubectl` on `PATH`), its JSON report read back as one
//! result per spec ([`super::ginkgo`]), each judged by the ledger like a scenario. Start with
//! [`plan`] and [`run`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::ginkgo::{self, SpecState};
use super::{Outcome, Plan, PlannedCluster, ScenarioResult, scenario_profile};
use crate::controller::ControllerRef;
use crate::toolchain::KubeVersion;

mod choice;
mod needs;
mod results;

pub use self::choice::{
    Choice, KIND_CLUSTER, KIND_WORKERS, ci_gates, e2e_suite, kind_layout, kind_workers,
};
pub use self::needs::{
    Capabilities, Checked, Unservable, VERIFY_SERVICE_ACCOUNT_FLAG, await_suite_needs,
    module_cache, planned, skipped, skipping, spec_body, unmet, unservable,
    waits_for_service_accounts,
};
use self::results::result;
pub use self::results::{AREAS_FILE, INTERRUPTED, area_table, areas, results, suite_error};

/// The suite name of upstream specs in reports; a spec's result is named
/// `upstream/<its full text>`.
pub const SUITE: &str = "upstream";

/// What `--upstream-e2e` runs.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamSuite {
    /// Whose suite: the controller under test's release, or another's
    /// (`--upstream-e2e-from`).
    pub from: ControllerRef,
    /// Ginkgo focus regexes (a spec runs if its text matches any).
    pub focus: Vec<String>,
    /// Ginkgo skip regexes.
    pub skip: Vec<String>,
    /// Parallel Ginkgo processes (`--upstream-procs`); above 1 the suite runs under the
    /// `ginkgo` command, as upstream's CI runs it (`ginkgo -p`).
    pub procs: usize,
}

impl UpstreamSuite {
    /// The suite binary's arguments: the JSON report at `report` (an absolute path: the
    /// binary runs in the suite's work directory), the focus and skip, a timeout, and no colour.
    pub fn args(&self, report: &Path) -> Vec<String> {
        let mut a = vec![
            format!("--ginkgo.json-report={}", report.display()),
            "--ginkgo.timeout=3h".into(),
            "--ginkgo.no-color".into(),
            "--ginkgo.v".into(),
        ];
        a.extend(self.focus.iter().map(|f| format!("--ginkgo.focus={f}")));
        a.extend(self.skip.iter().map(|s| format!("--ginkgo.skip={s}")));
        a
    }

    /// The `ginkgo` command's arguments for running the suite binary `binary` in
    /// [`procs`](Self::procs) parallel processes, its report written to `work` (absolute)
    /// under [`REPORT`]: the same focus, skip and timeout as [`args`](Self::args), as the
    /// command spells them. The command joins a report path to the suite's directory unless
    /// an output directory is given (`<suite dir>/<path>`, even for an absolute path), and with
    /// one it writes `<output dir>/<report name>`: so the directory goes in `--output-dir` and
    /// the bare name in `--json-report`, and the report lands at [`report_path`]`(work)`.
    pub fn cli_args(&self, work: &Path, binary: &Path) -> Vec<String> {
        let mut a: Vec<String> = self
            .args(Path::new(REPORT))
            .into_iter()
            .map(|x| x.replacen("--ginkgo.", "--", 1))
            .collect();
        a.insert(0, format!("--procs={}", self.procs));
        a.insert(1, format!("--output-dir={}", work.display()));
        a.push(binary.display().to_string());
        a
    }
}

/// The name of the suite's JSON report in its work directory.
pub const REPORT: &str = "ginkgo-report.json";

/// Where the suite's JSON report is, in both ways of running it (the binary alone with
/// [`UpstreamSuite::args`]`(report_path(work))`, or the `ginkgo` command with
/// [`UpstreamSuite::cli_args`]`(work, ..)`).
pub fn report_path(work: &Path) -> PathBuf {
    work.join(REPORT)
}

/// Where the `ginkgo` command, run in `cwd` with these `cli_args` on a suite in `suite_dir`,
/// writes its JSON reports, by its own rule (Ginkgo v2's `AbsPathForGeneratedAsset` and the
/// merge in `FinalizeProfilesAndReportsForSuites`): the reporting process writes a per-suite
/// copy, then the command merges the copies into the report the user asked for and removes
/// them. With `--output-dir`, the copy is `<dir>/<suite>_<name>` and the report `<dir>/<name>`
/// (the directory made absolute against `cwd`); without, the copy is the given path joined
/// *under* `suite_dir` as Go's `filepath.Join` does (an absolute path too) and the report the
/// given path. Returns `(copy, report)`.
pub fn ginkgo_writes(
    cli_args: &[String],
    cwd: &Path,
    suite_dir: &Path,
) -> Option<(PathBuf, PathBuf)> {
    let value = |flag: &str| {
        cli_args
            .iter()
            .find_map(|a| a.strip_prefix(&format!("--{flag}=")))
    };
    let report = value("json-report")?;
    Some(match value("output-dir") {
        Some(dir) => {
            let dir = cwd.join(dir);
            (dir.join(format!("suite_{report}")), dir.join(report))
        }
        None => (
            PathBuf::from(format!(
                "{}/{}",
                suite_dir.display(),
                report.trim_start_matches('/')
            )),
            cwd.join(report),
        ),
    })
}

/// The plan of an upstream run: one cluster of the scenario layout with the suite's e2e
/// configuration seeded (`objects`), the controller installed with its default gates.
pub fn plan(
    kubernetes: KubeVersion,
    controller: &ControllerRef,
    suite: UpstreamSuite,
    objects: Vec<serde_json::Value>,
) -> Plan {
    let mut profile = scenario_profile(kubernetes);
    profile.name = SUITE.into();
    profile.objects = objects;
    Plan {
        kubernetes,
        controller: controller.clone(),
        upgrade_to: None,
        clusters: vec![PlannedCluster {
            profile,
            controller_gates: Default::default(),
            dropped_gates: vec![],
            scenarios: vec![],
        }],
        skipped: vec![],
        upstream: Some(suite),
    }
}

/// How long a stopped suite has to end by itself (Ginkgo interrupts its running specs, runs
/// their cleanup and writes its report) before its processes are killed; below
/// [`crate::stop::GRACE`], so its results are still reported.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// How a suite run ended.
#[derive(Debug)]
pub struct SuiteRun {
    /// The JSON report's text; `None` when the suite wrote none, or one without a suite (the
    /// `ginkgo` command writes `[]` when the process that reports died).
    pub report: Option<String>,
    /// How the process the harness started ended (`exit status: 1`, `signal: 9 (SIGKILL)`).
    pub status: String,
    /// A stop came while it ran.
    pub stopped: bool,
    /// It did not end within [`STOP_GRACE`] of the stop and was killed.
    pub killed: bool,
    /// Its output.
    pub log: PathBuf,
}

/// Runs the suite `binary` against the cluster of `kubeconfig`, with `kubectl_dir` first on
/// `PATH` and `env` set (the `docker` environment of kind's node containers, which a spec
/// stops and starts), its output in `<work>/upstream-e2e.log`. When `stop` resolves, the suite
/// is interrupted as Ginkgo expects (SIGINT to every process of it) and given `grace` to end,
/// then killed. The suite failing is no error (its specs say so), nor is a missing report
/// (see [`SuiteRun::report`]); a suite that cannot be started is.
#[expect(
    clippy::too_many_arguments,
    reason = "each is one thing the suite run needs"
)]
pub async fn run(
    binary: &Path,
    ginkgo: Option<&Path>,
    suite: &UpstreamSuite,
    kubeconfig: &Path,
    kubectl_dir: &Path,
    env: &[(String, String)],
    work: &Path,
    stop: impl std::future::Future<Output = ()>,
    grace: std::time::Duration,
) -> anyhow::Result<SuiteRun> {
    use anyhow::Context;
    let report = report_path(work);
    let _ = std::fs::remove_file(&report);
    let log = work.join("upstream-e2e.log");
    let log_file =
        std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
    let path = format!(
        "{}:{}",
        kubectl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let mut command = match ginkgo {
        Some(ginkgo) => {
            // The command runs a suite binary in its directory; a link in the work directory
            // keeps what the suite writes out of the build cache.
            let link = work.join(binary.file_name().unwrap_or_default());
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(binary, &link)
                .with_context(|| format!("link {} to {}", link.display(), binary.display()))?;
            let mut c = tokio::process::Command::new(ginkgo);
            c.args(suite.cli_args(work, &link));
            c
        }
        None => {
            let mut c = tokio::process::Command::new(binary);
            c.args(suite.args(&report));
            c
        }
    };
    let mut child = command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        // A process that dies of a panic prints every goroutine: the spec it ran among them.
        .env("GOTRACEBACK", "all")
        .current_dir(work)
        .stdin(std::process::Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("run {}", binary.display()))?;
    // The `ginkgo` command's suite processes share its group: all of them end with the run,
    // however it ends (a Ctrl-C drops this future), not only the one the harness started.
    let child_id = child.id();
    let group = child_id.map(crate::stop::GroupKill);
    let (mut stopped, mut killed) = (false, false);
    let status = tokio::select! {
        status = child.wait() => status,
        () = stop => {
            stopped = true;
            // Ginkgo ends a suite it interrupts as it ends one that ran out: the running
            // specs are interrupted, their cleanup runs, the rest are skipped and the report
            // is written (what a stopped run keeps).
            if let Some(pid) = child.id() {
                let group = nix::unistd::Pid::from_raw(pid as i32);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT);
            }
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    killed = true;
                    drop(group);
                    child.wait().await
                }
            }
        }
    }
    .with_context(|| format!("run {}", binary.display()))?;
    // None of the suite's processes outlives the run, however it ended.
    if let Some(pid) = child_id {
        let left = crate::stop::end_group(pid, std::time::Duration::from_secs(10)).await;
        if !left.is_empty() {
            tracing::warn!(?left, "processes of the upstream suite outlived their kill");
        }
    }
    tracing::info!(
        ?status,
        seconds = started.elapsed().as_secs_f64(),
        "upstream suite ended"
    );
    let report = std::fs::read_to_string(&report)
        .ok()
        .filter(|text| ginkgo::has_suite(text));
    Ok(SuiteRun {
        report,
        status: status.to_string(),
        stopped,
        killed,
        log,
    })
}

/// The results of a suite that wrote no report, from what its output showed of the specs
/// it was to run (`planned`, the dry run's): a spec seen to end stands as it ended (judged by
/// `judge`, as [`results`] judges); a spec seen to start and never to end was running when
/// the suite died or was stopped: interrupted if `run` was stopped, else an infrastructure
/// error with the crash's log. One more result, `upstream/suite`, says how the suite ended
/// and what its output shows of it: a crash is never a silent loss.
pub fn salvaged(
    run: &SuiteRun,
    planned: &[ginkgo::Spec],
    profile: &str,
    judge: impl Fn(&str, Option<&str>) -> Outcome,
) -> Vec<ScenarioResult> {
    let log = std::fs::read_to_string(&run.log).unwrap_or_default();
    let crash = ginkgo::crash_excerpt(&log, 60);
    let seen = ginkgo::streamed(&log, planned);
    let mut out = vec![];
    for s in &seen {
        let spec = &planned[s.index];
        let name = format!("{SUITE}/{}", spec.name);
        let lost = "failed (the suite's output says so; its report, with the failure, was lost)";
        let (outcome, failure) = match s.ended {
            Some(SpecState::Passed) => (judge(&name, None), None),
            Some(SpecState::Failed) => (judge(&name, Some(lost)), Some(lost.to_string())),
            Some(SpecState::Interrupted) => (
                Outcome::Skipped {
                    reason: INTERRUPTED.into(),
                },
                None,
            ),
            Some(SpecState::Skipped) => continue,
            None if run.stopped => (
                Outcome::Skipped {
                    reason: INTERRUPTED.into(),
                },
                None,
            ),
            None => (
                Outcome::InfraError {
                    reason: format!(
                        "the suite ({}) ended while the spec ran and wrote no report",
                        run.status
                    ),
                },
                Some(crash.clone()),
            ),
        };
        out.push(result(
            spec.name.clone(),
            profile,
            outcome,
            failure,
            s.seconds,
        ));
    }
    let how = match (run.stopped, run.killed) {
        (true, true) => format!(
            "the suite did not end within {} s of the stop and was killed",
            STOP_GRACE.as_secs()
        ),
        (true, false) => format!("the stopped suite ({}) wrote no report", run.status),
        _ => format!("the suite ({}) wrote no report", run.status),
    };
    let ended = seen.iter().filter(|s| s.ended.is_some()).count();
    let reason = format!(
        "{how}: of {} specs it was to run, its output shows {ended} ended and {} running; \
         the rest never reported ({})",
        planned.len(),
        seen.len() - ended,
        run.log.display()
    );
    let mut suite = suite_error(&reason, profile);
    suite.failure = (!crash.is_empty()).then_some(crash);
    out.push(suite);
    out
}

/// Where a run keeps the suite's output: `<logs>/upstream-e2e`, inside the run's report
/// directory (nothing outside it is left behind).
pub fn work_dir(logs: Option<&Path>) -> anyhow::Result<PathBuf> {
    let logs = logs.ok_or_else(|| {
        anyhow::anyhow!("the upstream e2e suite needs the run's report directory for its output")
    })?;
    // Absolute: the suite runs in it and is given paths inside it.
    let dir = std::path::absolute(logs.join("upstream-e2e"))?;
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ginkgo_command_writes_its_report_where_the_harness_reads_it_from_any_directory() {
        let suite = UpstreamSuite {
            from: "openkruise@v1.9.0".parse().unwrap(),
            focus: vec![],
            skip: vec![],
            procs: 2,
        };
        // The work directory as a run makes it (absolute, whatever the report directory was
        // given as), and the command run in it or anywhere else.
        let logs = tempfile::tempdir().unwrap();
        let relative = pathdiff(logs.path());
        let work = work_dir(Some(&relative)).unwrap();
        assert!(work.is_absolute(), "{}", work.display());
        for cwd in [work.clone(), PathBuf::from("/"), logs.path().to_path_buf()] {
            let args = suite.cli_args(&work, &work.join("kruise-e2e.test"));
            let (copy, report) = ginkgo_writes(&args, &cwd, &work).unwrap();
            assert_eq!(report, report_path(&work), "run in {}", cwd.display());
            assert_eq!(copy.parent(), Some(work.as_path()), "{}", copy.display());
        }
        // What used to be handed over, an absolute report path alone: the copy went to the
        // report's path again under the suite's directory, a nested tree in the work
        // directory, and a command whose reporting process died had nothing to merge there.
        let old = vec![format!("--json-report={}", report_path(&work).display())];
        let (copy, _) = ginkgo_writes(&old, &work, &work).unwrap();
        assert!(
            copy.starts_with(work.join(work.strip_prefix("/").unwrap())),
            "{}",
            copy.display()
        );
        // The binary alone writes where it is told.
        let args = suite.args(&report_path(&work));
        assert!(args.contains(&format!(
            "--ginkgo.json-report={}",
            report_path(&work).display()
        )));
    }

    /// `dir` relative to the current directory (`../../tmp/x`), as a user may give it.
    fn pathdiff(dir: &Path) -> PathBuf {
        let cwd = std::env::current_dir().unwrap();
        let up = cwd.components().count() - 1;
        let mut p = PathBuf::new();
        for _ in 0..up {
            p.push("..");
        }
        p.join(dir.strip_prefix("/").unwrap())
    }
}
