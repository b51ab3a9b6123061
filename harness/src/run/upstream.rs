//! A controller's own end-to-end suite run on a cell (`harness run --upstream-e2e`):
//! OpenKruise's Ginkgo suite, built from a release module ([`crate::controller::openkruise::e2e`]),
//! run against the cell's cluster with what upstream's CI prepares (its e2e configuration
//! seeded before the manager starts, `kubectl` on `PATH`), its JSON report read back as one
//! result per spec ([`super::ginkgo`]), each judged by the ledger like a scenario. Start with
//! [`plan`] and [`run`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::ginkgo::{self, SpecState};
use super::{Outcome, Plan, PlannedCluster, ScenarioResult, scenario_profile};
use crate::controller::{CiGates, ControllerRef, E2eSuite};
use crate::scenario::record::Sends;
use crate::toolchain::KubeVersion;

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

/// Which upstream suite a run, matrix or qualification runs on its cells
/// (`--upstream-e2e`, `--upstream-e2e-from`): each cell's own release's, or one release's
/// everywhere.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    /// One release's suite for every cell; `None` runs each cell's own.
    pub from: Option<ControllerRef>,
    /// Ginkgo focus regexes.
    pub focus: Vec<String>,
    /// Ginkgo skip regexes.
    pub skip: Vec<String>,
    /// Real nodes as the cell's only workers (`--upstream-real-nodes`); 0 for kwok nodes.
    pub real_nodes: usize,
    /// Parallel Ginkgo processes (`--upstream-procs`; 0 counts as 1).
    pub procs: usize,
}

/// The name of upstream CI's kind cluster, whose workers (`ci-testing-worker`,
/// `ci-testing-worker2`, ...) some specs name.
pub const KIND_CLUSTER: &str = "ci-testing";

/// How many workers upstream's CI clusters have (`test/kind-conf*.yaml`: a control plane and
/// three workers); a cell of fake nodes has as many.
pub const KIND_WORKERS: usize = 3;

/// Gives `profile` the workers of upstream's kind cluster, named as kind names them (specs
/// count them, and some name the first): `real_nodes` real ones, untainted, and no fake node;
/// or, with none, [`KIND_WORKERS`] fake ones without the scenario layout's zones.
pub fn kind_layout(
    profile: &mut crate::cluster::Profile,
    real_nodes: usize,
) -> Result<(), crate::cluster::ProfileError> {
    if real_nodes > 0 {
        return profile.only_real_nodes(&kind_workers(real_nodes));
    }
    profile.nodes = kind_workers(KIND_WORKERS)
        .into_iter()
        .map(|name| crate::cluster::NodeSpec {
            name,
            labels: Default::default(),
        })
        .collect();
    Ok(())
}

/// The names kind gives the `count` workers of cluster [`KIND_CLUSTER`].
pub fn kind_workers(count: usize) -> Vec<String> {
    (1..=count)
        .map(|i| match i {
            1 => format!("{KIND_CLUSTER}-worker"),
            i => format!("{KIND_CLUSTER}-worker{i}"),
        })
        .collect()
}

impl Choice {
    /// The suite a cell with `controller` runs.
    pub fn suite(&self, controller: &ControllerRef) -> UpstreamSuite {
        UpstreamSuite {
            from: self.from.clone().unwrap_or_else(|| controller.clone()),
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            procs: self.procs.max(1),
        }
    }

    /// The plan of the cell (`kubernetes`, `controller`), prepared as upstream's CI prepares
    /// its cluster: the suite's e2e configuration, its CSI StorageClasses and the cluster's
    /// feature gates read from its release module, the manager's gates from the manager's
    /// (see [`ci_gates`]).
    pub async fn plan(
        &self,
        kubernetes: KubeVersion,
        controller: &ControllerRef,
        toolchain: &crate::toolchain::Toolchain,
    ) -> anyhow::Result<Plan> {
        let suite = self.suite(controller);
        let objects = e2e_suite(&suite.from)?.seed_objects().await?;
        let gates = ci_gates(kubernetes, controller, &suite.from, toolchain).await?;
        let mut p = plan(kubernetes, controller, suite, objects);
        p.clusters[0].profile.feature_gates = gates.cluster;
        p.clusters[0].controller_gates = gates.controller;
        kind_layout(&mut p.clusters[0].profile, self.real_nodes)?;
        Ok(p)
    }
}

/// The gates upstream's CI runs `suite` and `controller` with ([`E2eSuite::ci_gates`]): the
/// controller's as its release's manifest sets them (the harness still sets the gates that
/// follow the cell's nodes), and of the cluster's the ones this Kubernetes version has off by
/// default (InPlacePodVerticalScaling on 1.27 to 1.32), read from its apiserver's `--help`: a
/// gate the version lacks or has on already is left as it is.
pub async fn ci_gates(
    kubernetes: KubeVersion,
    controller: &ControllerRef,
    suite: &ControllerRef,
    toolchain: &crate::toolchain::Toolchain,
) -> anyhow::Result<CiGates> {
    let mut gates = e2e_suite(suite)?.ci_gates(controller).await?;
    if !gates.cluster.is_empty() {
        let apiserver = toolchain
            .kubernetes(kubernetes)
            .await?
            .path("kube-apiserver");
        let help = crate::toolchain::help_text(&apiserver)
            .await
            .map_err(|e| anyhow::anyhow!("run {} --help: {e}", apiserver.display()))?;
        gates.cluster = crate::toolchain::off_by_default(&help, &gates.cluster);
    }
    Ok(gates)
}

/// The own suite of `reference`, or an error saying it ships none the harness can run.
pub fn e2e_suite(reference: &ControllerRef) -> anyhow::Result<Box<dyn E2eSuite>> {
    reference.controller().e2e_suite().ok_or_else(|| {
        anyhow::anyhow!(
            "{reference} ships no end-to-end suite the harness can run; drop --upstream-e2e"
        )
    })
}

/// What a cell can serve that upstream specs may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// OpenKruise's node daemon runs (the cell has real nodes).
    pub node_daemon: bool,
    /// The nodes are kind's containers, which a spec can stop with `docker` on the host as
    /// upstream's CI does (the kind provider).
    pub node_containers: bool,
}

/// How a spec's body runs `docker` on the host (to stop a kind node's container).
const HOST_DOCKER: &str = "exec.Command(\"docker\"";

/// The text of the spec node written at `line` (1-based) of `source`: from that line to the
/// brace that closes the first block opened there (the spec's function body).
pub fn spec_body(source: &str, line: u64) -> Option<&str> {
    let start: usize = source
        .split_inclusive('\n')
        .take(line.checked_sub(1)? as usize)
        .map(str::len)
        .sum();
    let rest = source.get(start..)?;
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return Some(&rest[..=i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Why a spec whose body is `body` cannot run on a cell with `caps`, if it cannot: it uses an
/// API only the node daemon serves (one of `daemon_kinds`) and the cell has no daemon, or it
/// runs `docker` on the host to stop a node and the cell's nodes are not kind's containers.
pub fn unmet(body: &str, caps: Capabilities, daemon_kinds: &[&str]) -> Option<String> {
    if !caps.node_daemon
        && let Some(kind) = daemon_kinds.iter().find(|k| body.contains(*k))
    {
        return Some(format!(
            "needs the node daemon (it uses {kind}); the cell has no real node"
        ));
    }
    if !caps.node_containers && body.contains(HOST_DOCKER) {
        return Some(
            "needs kind's node containers (it runs `docker` on the host to stop a node); the \
             cell's nodes are not containers"
                .into(),
        );
    }
    None
}

/// A spec the cell cannot serve: its full text and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unservable {
    /// The spec's name ([`ginkgo::Spec::name`]).
    pub name: String,
    /// Its full text (what Ginkgo's regexes match).
    pub text: String,
    /// Why.
    pub reason: String,
}

/// The flag by which a Kubernetes-style e2e framework (OpenKruise's among them) says that each
/// spec, once it has made its namespace, waits for that namespace's default ServiceAccount
/// (a reflector on ServiceAccounts) before it starts.
pub const VERIFY_SERVICE_ACCOUNT_FLAG: &str = "e2e-verify-service-account";

/// Whether the suite whose `--help` is `help` waits for a new namespace's default
/// ServiceAccount in each spec: it has [`VERIFY_SERVICE_ACCOUNT_FLAG`] (on by default in the
/// frameworks that have it; Go's `--help` does not print a boolean's default).
pub fn waits_for_service_accounts(help: &str) -> bool {
    help.lines().any(|l| {
        l.trim_start()
            .trim_start_matches('-')
            .split_whitespace()
            .next()
            == Some(VERIFY_SERVICE_ACCOUNT_FLAG)
    })
}

/// Waits, bounded by `timeout`, until what the suite's specs need when they start is served:
/// when the suite waits for each namespace's default ServiceAccount (read from its `--help`,
/// see [`waits_for_service_accounts`]), a namespace made now gets one (the controller manager's
/// service-account controller runs), as the suite's first spec will ask; the namespace is then
/// deleted. A cell whose controller manager lags makes the suite's first specs wait on it.
pub async fn await_suite_needs(
    binary: &Path,
    client: &kube::Client,
    timeout: std::time::Duration,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let help = crate::toolchain::help_text(binary)
        .await
        .unwrap_or_default();
    if !waits_for_service_accounts(&help) {
        return Ok(());
    }
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns = namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"generateName": "harness-suite-ready-"}
            }))?,
        )
        .await?;
    let name = ns.metadata.name.unwrap_or_default();
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), &name);
    let waited = crate::wait::poll(
        &format!("the default ServiceAccount of a new namespace ({name}), which every spec of the suite waits for"),
        timeout,
        std::time::Duration::from_millis(200),
        || async {
            match accounts.get_opt("default").await {
                Ok(Some(_)) => crate::wait::Check::Met,
                Ok(None) => crate::wait::Check::Pending("no ServiceAccount default yet".into()),
                Err(e) => crate::wait::Check::Failed(format!("get ServiceAccount default: {e}")),
            }
        },
    )
    .await;
    let _ = namespaces.delete(&name, &Default::default()).await;
    Ok(waited?)
}

/// The specs `suite` would run (a dry run of `binary` in `work`: nothing runs), with their
/// locations.
pub async fn planned(
    binary: &Path,
    suite: &UpstreamSuite,
    work: &Path,
) -> anyhow::Result<Vec<ginkgo::Spec>> {
    use anyhow::Context;
    let report = work.join("ginkgo-dry-run.json");
    let mut args = suite.args(&report);
    args.push("--ginkgo.dry-run".into());
    let out = tokio::process::Command::new(binary)
        .args(&args)
        .current_dir(work)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .with_context(|| format!("dry-run {}", binary.display()))?;
    let text = std::fs::read_to_string(&report).with_context(|| {
        format!(
            "the upstream suite's dry run ({}) wrote no report: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    // A dry run passes the specs it would run; those focus and skip leave out are skipped.
    Ok(ginkgo::parse(&text)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .filter(|s| s.state == SpecState::Passed)
        .collect())
}

/// What [`unservable`] found: the specs a cell cannot serve, and the source files it could
/// not read (their specs run unchecked).
#[derive(Debug, Default)]
pub struct Checked {
    /// The specs the cell cannot serve.
    pub unservable: Vec<Unservable>,
    /// The files, as the suite names them, whose specs could not be checked.
    pub unread: std::collections::BTreeSet<String>,
}

impl Checked {
    /// A warning for the specs that could not be checked, if any: they run whatever the cell
    /// lacks, so a skip the user expects may silently not happen.
    pub fn warning(&self, modcache: &Path) -> Option<String> {
        let first = self.unread.first()?;
        Some(format!(
            "the source of {} file(s) of the suite's specs could not be read (first: {first}; \
             looked there and under {}): their specs run without the check for what the cell \
             lacks. A suite built with -trimpath from the module cache names them as \
             <module>@<version>/<file>; set GOMODCACHE if the cache is elsewhere",
            self.unread.len(),
            modcache.display()
        ))
    }
}

/// The Go module cache the suite's sources are read from: `GOMODCACHE`, else `~/go/pkg/mod`.
pub fn module_cache() -> PathBuf {
    std::env::var("GOMODCACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join("go/pkg/mod")
        })
}

/// The specs of `planned` that a cell with `caps` cannot serve, decided from each spec's own
/// source in the module it was built from (under `modcache`), and the files that could not be
/// read.
pub fn unservable(
    planned: &[ginkgo::Spec],
    caps: Capabilities,
    daemon_kinds: &[&str],
    modcache: &Path,
) -> Checked {
    let mut sources: std::collections::BTreeMap<String, Option<String>> = Default::default();
    let mut checked = Checked::default();
    for spec in planned {
        let Some((file, line)) = &spec.location else {
            continue;
        };
        let source = sources.entry(file.clone()).or_insert_with(|| {
            // Built with -trimpath: module paths are relative to the module cache.
            let p = Path::new(file);
            std::fs::read_to_string(p)
                .or_else(|_| std::fs::read_to_string(modcache.join(p)))
                .ok()
        });
        let Some(source) = source.as_deref() else {
            checked.unread.insert(file.clone());
            continue;
        };
        let Some(body) = spec_body(source, *line) else {
            continue;
        };
        if let Some(reason) = unmet(body, caps, daemon_kinds) {
            checked.unservable.push(Unservable {
                name: spec.name.clone(),
                text: spec.text.clone(),
                reason,
            });
        }
    }
    checked
}

/// `suite` with the specs in `unservable` skipped. Ginkgo matches a skip regex against the
/// suite's description, a space and the spec's full text, so each escaped full text is
/// anchored at the end and after that space (not at the start of the string).
pub fn skipping(suite: &UpstreamSuite, unservable: &[Unservable]) -> UpstreamSuite {
    let mut s = suite.clone();
    if !unservable.is_empty() {
        let names: Vec<String> = unservable
            .iter()
            .map(|u| format!(" {}$", regex::escape(&u.text)))
            .collect();
        s.skip.push(names.join("|"));
    }
    s
}

/// The results of specs skipped because the cell cannot serve them.
pub fn skipped(unservable: &[Unservable], profile: &str) -> Vec<ScenarioResult> {
    unservable
        .iter()
        .map(|u| {
            result(
                u.name.clone(),
                profile,
                Outcome::Skipped {
                    reason: u.reason.clone(),
                },
                None,
                0.0,
            )
        })
        .collect()
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

/// The one result of a suite that could not run (its binary did not build, its configuration
/// could not be read, its report is missing): an infrastructure error named `upstream/suite`.
pub fn suite_error(reason: &str, profile: &str) -> ScenarioResult {
    super::unrun(
        &format!("{SUITE}/suite"),
        SUITE,
        profile,
        Outcome::InfraError {
            reason: reason.into(),
        },
    )
}

/// The result of one spec.
fn result(
    name: String,
    profile: &str,
    outcome: Outcome,
    failure: Option<String>,
    seconds: f64,
) -> ScenarioResult {
    ScenarioResult {
        scenario: format!("{SUITE}/{name}"),
        suite: SUITE.into(),
        attempt: 1,
        profile: profile.into(),
        outcome,
        failure,
        seconds,
        diagnostics: None,
        sent: Sends::default(),
        failed_tries: vec![],
        steps: vec![],
    }
}

/// Why a spec the run's stop interrupted has no verdict.
pub const INTERRUPTED: &str = "interrupted: the run was stopped while the spec ran";

/// The results of a finished suite run from its JSON report: specs that ran are judged by
/// `judge` (name, failure -> outcome); specs the suite skipped itself are skipped with its
/// message; specs the focus and skip left out are not results at all.
pub fn results(
    report: &str,
    profile: &str,
    judge: impl Fn(&str, Option<&str>) -> Outcome,
) -> Result<Vec<ScenarioResult>, String> {
    let mut out = vec![];
    for s in ginkgo::parse(report)? {
        let name = format!("{SUITE}/{}", s.name);
        match s.state {
            SpecState::Skipped => {
                if let Some(reason) = s.message {
                    out.push(result(
                        s.name,
                        profile,
                        Outcome::Skipped { reason },
                        None,
                        s.seconds,
                    ));
                }
            }
            SpecState::Passed => {
                out.push(result(s.name, profile, judge(&name, None), None, s.seconds));
            }
            SpecState::Interrupted => out.push(result(
                s.name,
                profile,
                Outcome::Skipped {
                    reason: INTERRUPTED.into(),
                },
                None,
                s.seconds,
            )),
            SpecState::Failed => {
                let failure = s.message.unwrap_or_else(|| "failed".into());
                let outcome = judge(&name, Some(&failure));
                out.push(result(s.name, profile, outcome, Some(failure), s.seconds));
            }
        }
    }
    Ok(out)
}

/// The file of a suite's work directory that holds its [`area_table`].
pub const AREAS_FILE: &str = "areas.txt";

/// The area of each spec of a Ginkgo report (its outermost container: `CloneSet`,
/// `[apps] StatefulSet`), by the spec's full text.
pub fn areas(report: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(ginkgo::parse(report)?
        .into_iter()
        .map(|s| (s.name, s.area))
        .collect())
}

/// `results` of an upstream suite counted by area (`areas` from [`areas`]; a result of no
/// spec, such as a failed `BeforeSuite`, counts as `(suite)`): the specs, and of them how many
/// passed, failed (a failure, an unexpected pass or an infrastructure error), failed as a known
/// bug of the ledger, and were skipped. A line per area and one for all.
pub fn area_table(results: &[ScenarioResult], areas: &BTreeMap<String, String>) -> String {
    use crate::results::Verdict;
    #[derive(Default)]
    struct Row {
        specs: usize,
        passed: usize,
        failed: usize,
        known: usize,
        skipped: usize,
    }
    let prefix = format!("{SUITE}/");
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    let mut all = Row::default();
    for r in results {
        let name = r.scenario.strip_prefix(&prefix).unwrap_or(&r.scenario);
        let area = areas.get(name).map_or("(suite)", String::as_str);
        for row in [rows.entry(area).or_default(), &mut all] {
            row.specs += 1;
            match &r.outcome {
                Outcome::Judged(Verdict::Pass) | Outcome::Flaky { .. } => row.passed += 1,
                Outcome::Judged(Verdict::ExpectedFail { .. }) => row.known += 1,
                Outcome::Skipped { .. } => row.skipped += 1,
                Outcome::Judged(Verdict::Fail | Verdict::UnexpectedPass { .. })
                | Outcome::InfraError { .. } => row.failed += 1,
            }
        }
    }
    let line = |area: &str, r: &Row| {
        format!(
            "{area:<40} {:>5} {:>6} {:>6} {:>5} {:>7}\n",
            r.specs, r.passed, r.failed, r.known, r.skipped
        )
    };
    let mut out = format!(
        "{:<40} {:>5} {:>6} {:>6} {:>5} {:>7}\n",
        "AREA", "SPECS", "PASSED", "FAILED", "KNOWN", "SKIPPED"
    );
    for (area, r) in &rows {
        out.push_str(&line(area, r));
    }
    out.push_str(&line("all", &all));
    out
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
    use crate::results::Verdict;

    #[test]
    fn a_suite_cluster_has_kind_s_three_workers_or_only_its_real_nodes_untainted() {
        assert_eq!(
            kind_workers(3),
            [
                "ci-testing-worker",
                "ci-testing-worker2",
                "ci-testing-worker3"
            ]
        );
        let suite = Choice::default().suite(&"openkruise@v1.9.0".parse().unwrap());
        let mut p = plan(
            "1.32".parse().unwrap(),
            &"openkruise@v1.9.0".parse().unwrap(),
            suite,
            vec![],
        );
        let profile = &mut p.clusters[0].profile;
        assert!(!profile.nodes.is_empty() && profile.real_node_taint);
        let mut fake = profile.clone();
        profile.only_real_nodes(&kind_workers(2)).unwrap();
        assert!(profile.nodes.is_empty() && !profile.real_node_taint);
        assert_eq!(profile.real_nodes[1].name, "ci-testing-worker2");
        assert!(profile.only_real_nodes(&[]).is_err());
        let mut real = fake.clone();
        kind_layout(&mut real, 3).unwrap();
        assert_eq!(real.real_nodes.len(), 3);
        assert!(real.nodes.is_empty());
        // Without real nodes: kind's three workers as fake nodes, no zones.
        kind_layout(&mut fake, 0).unwrap();
        let names: Vec<&str> = fake.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, kind_workers(KIND_WORKERS));
        assert!(fake.nodes.iter().all(|n| n.labels.is_empty()) && fake.real_nodes.is_empty());
    }

    #[test]
    fn a_suite_that_verifies_service_accounts_says_so_in_its_help() {
        // As Go's flag package prints it.
        let help = "  -e2e-output-dir string\n    \tOutput directory (default \"/tmp\")\n  \
            -e2e-verify-service-account\n    \tIf true tests will verify the service account \
            before running. (default true)\n";
        assert!(waits_for_service_accounts(help));
        assert!(waits_for_service_accounts(
            "  -e2e-verify-service-account\n    \tIf true tests will verify ...\n"
        ));
        assert!(!waits_for_service_accounts(
            "  -ginkgo.v\n  -e2e-verify-service-accounts-x\n"
        ));
    }

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

    #[test]
    fn specs_whose_source_cannot_be_read_are_named_not_silently_passed() {
        let cache = tempfile::tempdir().unwrap();
        let module = cache.path().join("example.com/suite@v1.0.0");
        std::fs::create_dir_all(&module).unwrap();
        let src = "package e2e\n\nvar _ = Describe(\"x\", func() {\n\tIt(\"recreates\", func() {\n\t\tcrr := &appsv1alpha1.ContainerRecreateRequest{}\n\t})\n})\n";
        std::fs::write(module.join("a.go"), src).unwrap();
        let spec = |file: &str| ginkgo::Spec {
            name: format!("x recreates [{file}]"),
            text: "x recreates".into(),
            area: "x".into(),
            state: SpecState::Passed,
            seconds: 0.0,
            message: None,
            location: Some((file.into(), 4)),
        };
        let planned = [
            spec("example.com/suite@v1.0.0/a.go"),
            // A build that names its files without the module's version.
            spec("example.com/suite/a.go"),
        ];
        let caps = Capabilities {
            node_daemon: false,
            node_containers: false,
        };
        let checked = unservable(&planned, caps, &["ContainerRecreateRequest"], cache.path());
        assert_eq!(checked.unservable.len(), 1, "{checked:?}");
        assert_eq!(
            checked.unread.iter().collect::<Vec<_>>(),
            ["example.com/suite/a.go"]
        );
        let w = checked.warning(cache.path()).unwrap();
        assert!(
            w.contains("1 file(s)") && w.contains("example.com/suite/a.go"),
            "{w}"
        );
        let all_read = unservable(&planned[..1], caps, &[], cache.path());
        assert_eq!(all_read.warning(cache.path()), None);
    }

    #[test]
    fn a_spec_body_is_its_block_and_daemon_apis_need_a_daemon() {
        let src = "package e2e\n\nvar _ = Describe(\"x\", func() {\n\tIt(\"recreates\", func() {\n\t\tcrr := &appsv1alpha1.ContainerRecreateRequest{}\n\t\tif x { y() }\n\t})\n\tIt(\"scales\", func() {\n\t\tscale()\n\t})\n})\n";
        let first = spec_body(src, 4).unwrap();
        assert!(first.contains("ContainerRecreateRequest") && first.ends_with('}'));
        assert!(!first.contains("scale()"), "{first}");
        let second = spec_body(src, 8).unwrap();
        assert!(second.contains("scale()") && !second.contains("Recreate"));
        let kinds = &["ContainerRecreateRequest", "ImagePullJob"];
        let none = Capabilities {
            node_daemon: false,
            node_containers: false,
        };
        let daemon = Capabilities {
            node_daemon: true,
            ..none
        };
        assert!(
            unmet(first, none, kinds)
                .unwrap()
                .contains("needs the node daemon (it uses ContainerRecreateRequest)")
        );
        assert_eq!(unmet(first, daemon, kinds), None);
        assert_eq!(unmet(second, none, kinds), None);
        assert_eq!(spec_body(src, 0), None);
        // A spec that stops a node by stopping its kind container needs kind's nodes, real
        // nodes or not.
        let stops = "{\n\terr = exec.Command(\"docker\", \"stop\", node.Name).Run()\n}";
        for caps in [none, daemon] {
            assert!(
                unmet(stops, caps, kinds)
                    .unwrap()
                    .starts_with("needs kind's node containers (it runs `docker` on the host")
            );
        }
        let kind = Capabilities {
            node_containers: true,
            ..none
        };
        assert_eq!(unmet(stops, kind, kinds), None);
        assert!(unmet(first, kind, kinds).is_some());
        let suite = UpstreamSuite {
            from: "openkruise@v1.9.0".parse().unwrap(),
            focus: vec![],
            skip: vec![],
            procs: 1,
        };
        let skip = skipping(
            &UpstreamSuite {
                skip: vec!["Scaling".into()],
                ..suite
            },
            &[Unservable {
                name: "[apps] CRR recreates (a+b) [apps/v1beta1/crr.go]".into(),
                text: "[apps] CRR recreates (a+b)".into(),
                reason: "r".into(),
            }],
        );
        // As Ginkgo applies it: the skip strings joined by `|`, matched against the suite's
        // description, a space and the spec's full text.
        let ginkgo = regex::Regex::new(&skip.skip.join("|")).unwrap();
        let skipped = |text: &str| ginkgo.is_match(&format!("Kruise e2e suite {text}"));
        assert!(skipped("[apps] CRR recreates (a+b)"));
        assert!(skipped("Scaling up"));
        assert!(!skipped("[apps] CRR recreates (a+b) twice"));
        assert!(!skipped("[apps] CRR recreates aab"));
    }

    /// The results of `report`, a spec with a failure judged a failure, else a pass.
    fn judged_by_failure(report: &str) -> Vec<ScenarioResult> {
        results(report, "upstream", |name, failure| {
            assert!(name.starts_with("upstream/"), "{name}");
            Outcome::Judged(if failure.is_some() {
                Verdict::Fail
            } else {
                Verdict::Pass
            })
        })
        .unwrap()
    }

    /// Each result's name and outcome label.
    fn labels(results: &[ScenarioResult]) -> Vec<(&str, &str)> {
        results
            .iter()
            .map(|r| (r.scenario.as_str(), r.outcome.label()))
            .collect()
    }

    #[test]
    fn a_stopped_suite_keeps_what_ran_and_its_interrupted_specs_have_no_verdict() {
        // What Ginkgo writes for a suite it interrupts: the specs that ended, the running ones
        // interrupted by the signal (or by another process of the suite), the rest skipped.
        let report = r#"[{"SpecReports": [
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "scales", "State": "passed", "RunTime": 1000000000},
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "updates", "State": "interrupted", "RunTime": 2000000000,
           "Failure": {"Message": "Interrupted by User"}},
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "aborted", "State": "interrupted",
           "Failure": {"Message": "Interrupted by Other Ginkgo Process"}},
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "never ran", "State": "skipped"}
        ]}]"#;
        let judged = judged_by_failure(report);
        assert_eq!(
            labels(&judged),
            [
                ("upstream/CloneSet scales", "pass"),
                ("upstream/CloneSet updates", "skipped"),
                ("upstream/CloneSet aborted", "FAIL"),
            ]
        );
        assert!(
            matches!(&judged[1].outcome, Outcome::Skipped { reason } if reason == INTERRUPTED),
            "{:?}",
            judged[1].outcome
        );
    }

    #[test]
    fn specs_become_results_judged_by_name_and_filtered_specs_are_left_out() {
        let report = r#"[{"SpecReports": [
          {"ContainerHierarchyTexts": ["[apps] CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "scales", "State": "passed", "RunTime": 1000000000},
          {"ContainerHierarchyTexts": ["[apps] CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "updates", "State": "failed", "RunTime": 2000000000,
           "Failure": {"Message": "boom"}},
          {"ContainerHierarchyTexts": ["[apps] Job"], "LeafNodeType": "It",
           "LeafNodeText": "not focused", "State": "skipped"},
          {"ContainerHierarchyTexts": ["[apps] Job"], "LeafNodeType": "It",
           "LeafNodeText": "needs three workers", "State": "skipped",
           "Failure": {"Message": "only 1 worker"}}
        ]}]"#;
        let judged = judged_by_failure(report);
        assert_eq!(
            labels(&judged),
            [
                ("upstream/[apps] CloneSet scales", "pass"),
                ("upstream/[apps] CloneSet updates", "FAIL"),
                ("upstream/[apps] Job needs three workers", "skipped"),
            ]
        );
        assert_eq!(judged[1].failure.as_deref(), Some("boom"));
        assert_eq!(judged[1].suite, SUITE);

        // By area: the run's specs, a spec the harness skipped and a failed suite node.
        let mut all = judged.clone();
        all.extend(skipped(
            &[Unservable {
                name: "[apps] CloneSet recreates".into(),
                text: "[apps] CloneSet recreates".into(),
                reason: "needs the node daemon".into(),
            }],
            "upstream",
        ));
        all.push(suite_error("no report", "upstream"));
        let mut known = all[0].clone();
        known.outcome = Outcome::Judged(Verdict::ExpectedFail { bug: "b".into() });
        known.scenario = "upstream/[apps] CloneSet known".into();
        all.push(known);
        let mut by = areas(report).unwrap();
        by.insert("[apps] CloneSet recreates".into(), "[apps] CloneSet".into());
        by.insert("[apps] CloneSet known".into(), "[apps] CloneSet".into());
        let table = area_table(&all, &by);
        let counts = |area: &str| -> Vec<&str> {
            let l = table.lines().find(|l| l.starts_with(area)).unwrap();
            l[40..].split_whitespace().collect()
        };
        assert_eq!(table.lines().count(), 5, "{table}");
        assert_eq!(
            counts("AREA"),
            ["SPECS", "PASSED", "FAILED", "KNOWN", "SKIPPED"]
        );
        assert_eq!(counts("(suite)"), ["1", "0", "1", "0", "0"], "{table}");
        assert_eq!(
            counts("[apps] CloneSet"),
            ["4", "1", "1", "1", "1"],
            "{table}"
        );
        assert_eq!(counts("[apps] Job"), ["1", "0", "0", "0", "1"], "{table}");
        assert_eq!(counts("all"), ["6", "1", "2", "1", "2"], "{table}");
        let s = UpstreamSuite {
            from: "openkruise@v1.9.0".parse().unwrap(),
            focus: vec!["CloneSet".into()],
            skip: vec!["Scaling".into()],
            procs: 4,
        };
        let args = s.args(Path::new("/w/r.json"));
        assert!(args.contains(&"--ginkgo.json-report=/w/r.json".to_string()));
        assert!(args.contains(&"--ginkgo.focus=CloneSet".to_string()));
        assert!(args.contains(&"--ginkgo.skip=Scaling".to_string()));
        // In parallel, the `ginkgo` command gets the same settings as it spells them, and the
        // suite binary last.
        let cli = s.cli_args(Path::new("/w"), Path::new("/w/kruise-e2e.test"));
        assert_eq!(cli[0], "--procs=4");
        assert_eq!(cli.last().unwrap(), "/w/kruise-e2e.test");
        for a in [
            "--output-dir=/w",
            "--json-report=ginkgo-report.json",
            "--focus=CloneSet",
            "--skip=Scaling",
            "--v",
        ] {
            assert!(cli.contains(&a.to_string()), "{a} in {cli:?}");
        }
        assert!(!cli.iter().any(|a| a.starts_with("--ginkgo.")), "{cli:?}");
    }
}
