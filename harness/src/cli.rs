//! The command-line layer: parses arguments with clap, calls the library, prints results and
//! maps errors to exit codes. Start with [`main`].
//!
//! Exit codes: 0 success, 1 failure or error, 2 a command line clap refuses, 130 interrupted
//! (Ctrl-C / SIGTERM).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::cluster::local::{LocalOptions, LocalProvider};
use crate::cluster::{Profile, parse_key_values};
use crate::progress::Progress;
use crate::toolchain::versions::{KUBERNETES_RELEASES, KWOK_VERSION};
use crate::toolchain::{Cache, KubeVersion, Toolchain};

/// Checks a command line (without the program name) against the CLI's flags and values,
/// without running anything: the error is clap's own message.
pub fn check_args<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    let argv = std::iter::once("harness").chain(args.iter().map(AsRef::as_ref));
    Cli::try_parse_from(argv)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Exit code for an interrupted command.
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    about = "Conformance test harness for Kubernetes workload controllers",
    long_about = "Conformance test harness for Kubernetes workload controllers.\n\n\
        Brings up real Kubernetes control planes as local processes (built from pinned Go \
        modules, no Docker needed), with the feature gates a profile asks for; or uses kind, \
        k3s or an existing cluster (--provider).\n\n\
        Exit codes: 0 success; 1 failure (for `run`: a regression or an unexpected pass) or \
        error (bad input included); 2 a command line that does not parse; 3 infrastructure \
        error (a cluster or controller did not start); 130 interrupted."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run conformance scenarios against a controller (on local clusters unless --provider
    /// says otherwise). With no arguments:
    /// every suite on Kubernetes 1.32 with OpenKruise v1.9.0.
    Run(RunArgs),
    /// Run the scenarios on every cell of a version matrix (Kubernetes x controller releases).
    Matrix(MatrixArgs),
    /// Qualify a controller release against a baseline on the same cells: regressions, fixes,
    /// unchanged results; exit 1 on any regression.
    Qualify(QualifyArgs),
    /// API field coverage: which own spec fields of each API of the controller the selected
    /// scenarios set, and which they leave uncovered. Reads what the scenarios sent from a
    /// run's report (the newest by default); the controller's CRDs come from its sources (a
    /// download, nothing is built or started).
    Coverage(CoverageArgs),
    /// Find bugs no scenario names: trials generated from each CRD's schema (values alone, at
    /// create and update, and pairwise), semantic operations and perturbations while the
    /// controller converges, judged by oracles that need no per-trial assertion (a refusal
    /// names a field; the native twin answers the same; the object converges; the monitor's
    /// rules hold; the controller stays healthy). Each finding is shrunk, run again three
    /// times and written as a reproduction under <report-dir>/<run>/findings/. With
    /// --fail-on-findings, exit 1 when a stable finding was reported.
    Explore(ExploreArgs),
    /// Create, list and remove clusters.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Build and list the pinned binaries (Kubernetes, etcd, kwok).
    #[command(subcommand)]
    Toolchain(ToolchainCommand),
    /// Install controllers under test into running clusters.
    #[command(subcommand)]
    Bundle(BundleCommand),
    /// Remove what killed runs left behind: processes and directories of clusters whose owner
    /// is gone.
    Gc,
    /// Work with reports: merge the outputs of a sharded matrix or qualification.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Measure things (see the README for figures).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// chainsaw tests: which of them the harness can run (see `run --chainsaw`).
    #[command(subcommand)]
    Chainsaw(ChainsawCommand),
    /// Run the storage provisioner of a local cluster (started by the harness itself).
    #[command(hide = true)]
    Provisioner {
        /// Kubeconfig to use.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Directory the volumes' hostPath directories go in.
        #[arg(long = "volumes-dir")]
        volumes_dir: PathBuf,
    },
}

/// The flags of `explore`.
#[derive(Debug, Args)]
struct ExploreArgs {
    /// Kubernetes version of the cell (default: 1.32; with --replay, the finding's).
    #[arg(long = "k8s")]
    kubernetes: Option<String>,
    /// Controller under test (default: openkruise@v1.9.0; with --replay, the finding's).
    #[arg(long, value_name = "NAME@TAG")]
    controller: Option<String>,
    /// How long to explore, bring-up aside (`90s`, `30m`, `1h`).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    budget: Duration,
    /// Only these kinds (comma-separated; default: every one, see the README).
    #[arg(long, value_delimiter = ',')]
    kinds: Vec<String>,
    /// The seed every choice comes from (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Which trials: admission (dry runs, seconds a kind) and behaviour (objects driven
    /// through generated steps until the budget ends).
    #[arg(long, value_delimiter = ',', default_values = ["admission", "behaviour"], value_parser = ["admission", "behaviour"])]
    modes: Vec<String>,
    /// Perturb the environment while the controller converges (pod deletion and eviction, a
    /// cordoned node).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    perturbations: bool,
    /// Behaviour trials at once.
    #[arg(long, default_value_t = 2)]
    parallel: usize,
    /// How long a behaviour trial may take to settle.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    settle: Duration,
    /// Candidates minimizing one behaviour finding may run (admission findings: four times as
    /// many).
    #[arg(long, default_value_t = 12)]
    shrink_runs: usize,
    /// Run one finding's trial again (a findings/<n>-... directory) and say whether it still
    /// fires its oracle.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Also run every trial on a cell of this release (NAME@TAG) and report where the
    /// controller under test answers or settles otherwise (O5, the release differential)
    #[arg(long, value_name = "NAME@TAG")]
    baseline: Option<String>,
    /// Exit 1 when a stable finding was reported (default: 0 once the exploration ran, the
    /// findings being its report).
    #[arg(long)]
    fail_on_findings: bool,
    /// Where the run's directory goes.
    #[arg(long, default_value = "reports")]
    report_dir: PathBuf,
}

/// Parses `90s`, `30m`, `1h` or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s.trim().split_at(
        s.trim()
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(s.trim().len()),
    );
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 90s, 30m or 1h"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("`{s}` is not a duration like 90s, 30m or 1h")),
    }
}

/// Which scenarios: the selection flags of `run` and `coverage`.
#[derive(Debug, Args)]
struct Selection {
    /// Only these suites (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    suite: Vec<String>,
    /// Only scenarios whose name contains one of these (repeatable).
    #[arg(long)]
    focus: Vec<String>,
    /// Not scenarios whose name contains one of these (repeatable).
    #[arg(long)]
    skip: Vec<String>,
    /// Only scenarios with one of these labels (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    labels: Vec<String>,
    /// Run chainsaw tests (`chainsaw.kyverno.io/v1alpha1` Test) instead of the catalog: test
    /// files, or directories searched for chainsaw-test.yaml (repeatable). Each test is a
    /// scenario `<suite>/<test name>` (suite `chainsaw` unless its `harness.io/suite`
    /// annotation names one), with the requirements of its `harness.io/` annotations; a
    /// feature the harness does not implement is refused by name.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    chainsaw: Vec<PathBuf>,
    /// Run the controller release's own end-to-end suite (OpenKruise's Ginkgo `test/e2e`,
    /// built from the release module and cached) on each cell instead of the catalog: one
    /// result per spec (`upstream/<spec text>`), judged by the ledger. --focus and --skip are
    /// then Ginkgo regexes over the spec texts. Its e2e configuration is created before the
    /// manager starts, as upstream's CI does; specs needing what the cell lacks (the node
    /// daemon without real nodes) are skipped with the reason.
    #[arg(long = "upstream-e2e")]
    upstream_e2e: bool,
    /// With --upstream-e2e: another release's suite on every cell, e.g. openkruise@v1.9.1
    /// against an older manager (how a fix's regression test qualifies an older line).
    #[arg(long = "upstream-e2e-from", value_name = "NAME@TAG")]
    upstream_e2e_from: Option<String>,
    /// With --upstream-e2e: the suite's cluster has N real nodes (a kubelet and containerd
    /// each, with OpenKruise's node daemon; root and the local provider) as its only workers,
    /// untainted and named as upstream CI's kind workers (ci-testing-worker, ...), and the
    /// specs that need the daemon run. Real nodes pull only from the cluster's registry: the
    /// images the suite names are stand-ins (busybox and a small web server; see the README).
    #[arg(long = "upstream-real-nodes", value_name = "N", default_value_t = 0)]
    upstream_real_nodes: usize,
    /// With --upstream-e2e: run the suite in N parallel Ginkgo processes (the `ginkgo`
    /// command, built at the suite's Ginkgo version), as upstream's CI does with `ginkgo -p`
    /// (4 processes on its 4-CPU runners); Serial specs still run alone, at the end.
    #[arg(long = "upstream-procs", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=32))]
    upstream_procs: u16,
}

impl Selection {
    /// The scenarios to select from: the chainsaw tests given, or the built-in catalog.
    fn catalog(&self) -> anyhow::Result<Vec<crate::scenario::Scenario>> {
        if self.chainsaw.is_empty() {
            return Ok(crate::suites::all());
        }
        let tests = crate::chainsaw::load(&self.chainsaw).context("load chainsaw tests")?;
        Ok(tests.into_iter().map(crate::chainsaw::scenario).collect())
    }

    /// The upstream suite asked for (`--upstream-e2e`, `--upstream-e2e-from`), if any; refuses
    /// it beside chainsaw tests or the scenario selectors it cannot honour.
    fn upstream(&self) -> anyhow::Result<Option<crate::run::upstream::Choice>> {
        if !self.upstream_e2e && self.upstream_e2e_from.is_none() {
            if self.upstream_real_nodes > 0 {
                bail!(
                    "--upstream-real-nodes shapes the cluster of --upstream-e2e; add --upstream-e2e"
                );
            }
            if self.upstream_procs > 1 {
                bail!("--upstream-procs runs the suite of --upstream-e2e; add --upstream-e2e");
            }
            return Ok(None);
        }
        if !self.chainsaw.is_empty() {
            bail!("--chainsaw and --upstream-e2e pick different suites; give one of them");
        }
        if !self.suite.is_empty() || !self.labels.is_empty() {
            bail!(
                "--suite and --labels select harness scenarios; with --upstream-e2e use --focus \
                 and --skip (Ginkgo regexes over the spec texts)"
            );
        }
        let from = match &self.upstream_e2e_from {
            Some(r) => Some(r.parse()?),
            None => None,
        };
        Ok(Some(crate::run::upstream::Choice {
            from,
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            real_nodes: self.upstream_real_nodes,
            procs: self.upstream_procs.into(),
        }))
    }

    fn filter(&self) -> crate::run::Filter {
        crate::run::Filter {
            suites: self.suite.clone(),
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            labels: self.labels.clone(),
        }
    }
}

#[derive(Debug, Args)]
struct CoverageArgs {
    /// The controller whose APIs are counted (default: the one the report's run tested).
    #[arg(long, value_name = "NAME@TAG")]
    controller: Option<String>,
    #[command(flatten)]
    select: Selection,
    /// The run's report.json to read what the scenarios sent from.
    #[arg(long, value_name = "REPORT_JSON")]
    from: Option<PathBuf>,
    /// Where reports are (`<dir>/latest/report.json` is read unless --from names one).
    #[arg(long, default_value = "reports")]
    report_dir: PathBuf,
    /// Print the coverage as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Kubernetes version of the cell.
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    kubernetes: String,
    /// Controller under test.
    #[arg(long, default_value = "openkruise@v1.9.0", value_name = "NAME@TAG")]
    controller: String,
    #[command(flatten)]
    select: Selection,
    /// List the selected scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Print the plan (clusters, gates, scenarios) and exit without starting anything.
    #[arg(long)]
    dry_run: bool,
    /// Run every scenario N times, one time after another (flake hunting); the summary then
    /// prints each scenario's failure rate.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    #[command(flatten)]
    flakes: FlakeArgs,
    /// Scenarios at once per cluster (they mostly wait on the controller).
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    /// Clusters at once (the plan has one per profile: Kubernetes feature gates and controller
    /// gates); each is brought up, used and removed on its own.
    #[arg(long, default_value_t = 2)]
    clusters_parallel: usize,
    /// Leave a cluster running if one of its scenarios failed (end it with `cluster down`).
    #[arg(long)]
    keep_cluster_on_failure: bool,
    /// Where reports go (`<dir>/<run-id>/`, `<dir>/latest`).
    #[arg(long, default_value = "reports")]
    report_dir: PathBuf,
    /// A ledger of known bugs to use instead of the checked-in suites/ledger.yaml.
    #[arg(long)]
    ledger: Option<PathBuf>,
    /// An earlier run's report.json whose times order the work longest first (clusters, and
    /// scenarios in each); default: the newest report in --report-dir, if there is one.
    #[arg(long, value_name = "REPORT_JSON")]
    costs: Option<PathBuf>,
    #[command(flatten)]
    provider: ProviderArgs,
}

/// Where clusters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderKind {
    /// The embedded default: a control plane as local processes built from Go modules.
    Local,
    /// kind (needs Docker); the harness builds the kind release its node image belongs to.
    Kind,
    /// k3s in a container through testcontainers (needs Docker and the `k3s` cargo feature).
    K3s,
    /// A cluster you already have (`--kubeconfig`, `--context`); the harness creates only
    /// namespaced test objects there and removes only those.
    Existing,
}

#[derive(Debug, Args)]
struct ProviderArgs {
    /// Where the cluster comes from.
    #[arg(long, value_enum, default_value_t = ProviderKind::Local)]
    provider: ProviderKind,
    /// Kubeconfig of the existing cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Context of the existing cluster to use (required with --provider existing; the
    /// current context is never used implicitly).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// The API server URL the context must point at; the run is refused if it points
    /// elsewhere.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// kind binary to use instead of building the kind release the node image belongs to.
    #[arg(long, value_name = "PATH")]
    kind_binary: Option<PathBuf>,
}

impl ProviderArgs {
    /// Refuses flags that belong to another provider, and missing required ones.
    fn validate(&self) -> anyhow::Result<()> {
        let existing_only = [
            ("--kubeconfig", self.kubeconfig.is_some()),
            ("--context", self.context.is_some()),
            ("--server", self.server.is_some()),
        ];
        if self.provider != ProviderKind::Existing {
            if let Some((flag, _)) = existing_only.iter().find(|(_, set)| *set) {
                bail!("{flag} is for --provider existing");
            }
        } else if self.context.is_none() {
            bail!(
                "--provider existing needs --context NAME: the current context is never used \
                 implicitly (see `kubectl config get-contexts`)"
            );
        }
        if self.kind_binary.is_some() && self.provider != ProviderKind::Kind {
            bail!("--kind-binary is for --provider kind");
        }
        Ok(())
    }

    fn label(&self) -> &'static str {
        match self.provider {
            ProviderKind::Local => "local",
            ProviderKind::Kind => "kind",
            ProviderKind::K3s => "k3s",
            ProviderKind::Existing => "existing",
        }
    }

    fn existing_provider(&self) -> crate::cluster::existing::ExistingProvider {
        crate::cluster::existing::ExistingProvider {
            kubeconfig: self
                .kubeconfig
                .clone()
                .unwrap_or_else(crate::cluster::existing::default_kubeconfig),
            context: self.context.clone().unwrap_or_default(),
            server: self.server.clone(),
            root: providers_root().join("existing"),
        }
    }

    /// The provider; `logs` is where kind exports cluster logs before deleting.
    fn build(&self, logs: PathBuf) -> anyhow::Result<crate::cluster::any::Provider> {
        use crate::cluster::any::Provider;
        self.validate()?;
        if matches!(self.provider, ProviderKind::Kind | ProviderKind::K3s) {
            docker_ready().map_err(|why| {
                anyhow::anyhow!(
                    "--provider {}: Docker is needed and {why}; start Docker or use --provider \
                     local (no Docker needed)",
                    self.label()
                )
            })?;
        }
        Ok(match self.provider {
            ProviderKind::Local => Provider::Local(provider(None)),
            ProviderKind::Kind => Provider::Kind(kind_provider(self.kind_binary.clone(), logs)),
            ProviderKind::Existing => Provider::Existing(self.existing_provider()),
            ProviderKind::K3s => k3s_provider()?,
        })
    }

    /// What the provider would do for cluster `name` of `profile`, for --dry-run.
    fn dry_run(
        &self,
        name: &str,
        profile: &Profile,
        logs: &std::path::Path,
    ) -> anyhow::Result<String> {
        Ok(match self.provider {
            ProviderKind::Local => unreachable!("the local dry run lists component processes"),
            ProviderKind::Kind => {
                let kind = self
                    .kind_binary
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("kind"));
                crate::cluster::kind::KindProvider::plan_with(
                    &kind,
                    name,
                    profile,
                    &providers_root().join("kind").join(name),
                    logs,
                    Duration::from_secs(300),
                )?
                .to_string()
            }
            ProviderKind::K3s => crate::cluster::k3s::dry_run(profile),
            ProviderKind::Existing => self.existing_provider().plan(name).join("\n") + "\n",
        })
    }
}

/// The kind provider: `kind_binary`, or the kind release each node image belongs to, built.
fn kind_provider(
    kind_binary: Option<PathBuf>,
    logs: PathBuf,
) -> crate::cluster::kind::KindProvider {
    use crate::cluster::kind::{
        CREATE_ATTEMPTS, KindBinary, KindOptions, KindProvider, ProcessRunner,
    };
    let binary = match kind_binary {
        Some(p) => KindBinary::Path(p),
        None => KindBinary::Build(toolchain()),
    };
    KindProvider::new(
        binary,
        std::sync::Arc::new(ProcessRunner),
        KindOptions {
            root: providers_root().join("kind"),
            logs,
            attempts: CREATE_ATTEMPTS,
            wait: Duration::from_secs(300),
        },
    )
}

#[cfg(feature = "k3s")]
fn k3s_provider() -> anyhow::Result<crate::cluster::any::Provider> {
    Ok(crate::cluster::any::Provider::K3s(
        crate::cluster::k3s::K3sProvider {
            root: providers_root().join("k3s"),
        },
    ))
}

#[cfg(not(feature = "k3s"))]
fn k3s_provider() -> anyhow::Result<crate::cluster::any::Provider> {
    bail!(
        "this harness was built without the k3s provider; build it with \
         `cargo run -p harness --features k3s -- ...`"
    )
}

/// Where non-local providers keep their cluster directories.
fn providers_root() -> PathBuf {
    crate::cluster::local::state::default_clusters_root()
        .parent()
        .map(|p| p.join("providers"))
        .unwrap_or_else(|| PathBuf::from("harness-providers"))
}

/// Whether a Docker daemon answers (`docker info`).
fn docker_ready() -> Result<(), String> {
    let out = std::process::Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("`docker` could not be run ({e})"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "the daemon does not answer (`docker info`: {})",
            err.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output")
                .trim()
        ))
    }
}

/// Retries and what a flaky result does.
#[derive(Debug, Clone, Copy, Args)]
struct FlakeArgs {
    /// Run a scenario whose result fails the run up to N more times, each in a fresh
    /// namespace; a pass after a failure is FLAKY (reported as such, with every failed try).
    #[arg(long, default_value_t = 0, value_name = "N")]
    retries: usize,
    /// Fail the run (exit 1) when a result is flaky.
    #[arg(long, requires = "retries")]
    fail_on_flaky: bool,
}

#[derive(Debug, Args)]
struct SelectArgs {
    #[command(flatten)]
    selection: Selection,
    /// Scenarios at once per cluster.
    #[arg(long, default_value_t = 2)]
    parallel: usize,
    /// Cells (Kubernetes version x release) at once, each with its own clusters.
    #[arg(long, default_value_t = 2)]
    cells_parallel: usize,
    #[command(flatten)]
    flakes: FlakeArgs,
    /// Where reports go (`<dir>/<id>/`, `<dir>/latest`).
    #[arg(long, default_value = "reports")]
    report_dir: PathBuf,
}

impl SelectArgs {
    fn filter(&self) -> crate::run::Filter {
        self.selection.filter()
    }
}

/// Splitting a matrix over CI runners.
#[derive(Debug, Args)]
struct ShardArgs {
    /// Run only shard K of N: the cells (and upgrade checks) split over N shards by expected
    /// cost, the same way on every runner; merge the outputs with `harness report merge`.
    #[arg(long, value_name = "K/N")]
    shard: Option<crate::matrix::Shard>,
    /// An earlier run's report.json or matrix.json to take expected costs from (medians of
    /// scenario and cluster bring-up times); without it, estimates.
    #[arg(long, value_name = "PATH")]
    costs: Option<PathBuf>,
    /// Print the split (every unit with its expected time and shard, each shard's total, and
    /// how many shards keep each under --target-minutes) and run nothing.
    #[arg(long, conflicts_with = "binaries")]
    plan: bool,
    /// Print the binaries the shard (or the whole matrix) needs, comma-separated (a cache
    /// key), and run nothing.
    #[arg(long)]
    binaries: bool,
    /// The wall time a shard should stay under, for --plan.
    #[arg(long, default_value_t = 30, value_name = "MINUTES")]
    target_minutes: u64,
}

#[derive(Debug, Args)]
struct MatrixArgs {
    /// Kubernetes versions: a range like 1.27..1.37 (the supported versions inside it) or a
    /// list like 1.29,1.32 (default: from the matrix file).
    #[arg(long = "k8s")]
    kubernetes: Option<String>,
    /// Releases, e.g. openkruise@v1.6.0,v1.7.0,v1.9.0 (default: from the matrix file).
    #[arg(long = "controller")]
    controllers: Option<String>,
    /// The matrix file with the defaults.
    #[arg(long, default_value = "ci/matrix.yaml")]
    matrix_file: PathBuf,
    #[command(flatten)]
    select: SelectArgs,
    #[command(flatten)]
    shards: ShardArgs,
}

#[derive(Debug, Args)]
struct QualifyArgs {
    /// The release candidate, e.g. openkruise@v1.9.0.
    #[arg(long)]
    candidate: String,
    /// The release it must not regress from, e.g. v1.8.3 (the candidate's controller) or
    /// openkruise@v1.8.3.
    #[arg(long)]
    baseline: String,
    /// Kubernetes versions to qualify on (range or list).
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    kubernetes: String,
    #[command(flatten)]
    select: SelectArgs,
    #[command(flatten)]
    shards: ShardArgs,
}

#[derive(Debug, Subcommand)]
enum ReportCommand {
    /// Merge the shards of a matrix or qualification (`--shard K/N` runs) into what one
    /// unsharded run writes: matrix.json, matrix.html, junit.xml, the cells' reports, and for a
    /// qualification qualify.json with its verdict (exit 1 on a regression). Every shard must
    /// be given exactly once.
    Merge {
        /// The shards' report directories (each holds a matrix.json).
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Where the merged reports go (`<dir>/<id>/`, `<dir>/latest`).
        #[arg(long, default_value = "reports")]
        report_dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start a cluster and keep it running until Ctrl-C (a local one can detach with
    /// --detach).
    Up(Box<UpArgs>),
    /// Stop a cluster and remove its directory.
    Down {
        /// Cluster name.
        name: String,
    },
    /// List clusters with their state and kubeconfig.
    List,
    /// Write the kind config of every profile the suites use (kind-configs/), or check that
    /// the files there are current.
    Configs {
        /// The directory.
        #[arg(long, default_value = "kind-configs")]
        dir: PathBuf,
        /// Only compare; exit 1 and name the files that differ.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Debug, Args)]
struct ProfileArgs {
    /// Kubernetes version (minor like 1.32, or the pinned patch like v1.32.5).
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    kubernetes: String,
    /// Feature gates for the control plane, e.g. InPlacePodVerticalScaling=true (repeatable,
    /// comma-separated).
    #[arg(long = "feature-gates", value_name = "GATE=BOOL")]
    feature_gates: Vec<String>,
    /// apiserver --runtime-config entries, e.g. api/all=true (repeatable, comma-separated).
    #[arg(long = "runtime-config", value_name = "KEY=VALUE")]
    runtime_config: Vec<String>,
    /// Number of fake nodes.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// Zones the nodes are spread over (topology.kubernetes.io/zone), round-robin.
    #[arg(long, value_delimiter = ',', default_value = "zone-a,zone-b")]
    zones: Vec<String>,
    /// Extra label for every node (repeatable).
    #[arg(long = "node-label", value_name = "KEY=VALUE")]
    node_labels: Vec<String>,
    /// Number of real nodes beside the fake ones: a kubelet and a containerd each, running
    /// real containers (local provider; needs root, and Debian's containerd, runc,
    /// containernetworking-plugins, iptables and iproute2, which the harness installs when
    /// they are missing). Real nodes are tainted `harness.io/real-node=true:NoSchedule` and
    /// labelled `harness.io/node=real`.
    #[arg(long = "real-nodes", default_value_t = 0)]
    real_nodes: usize,
    /// How long an in-place container restart (new image) takes on the fake nodes, in
    /// milliseconds (each takes up to half as long again); the default is what the harness's
    /// real nodes take.
    #[arg(long = "in-place-restart-ms", value_name = "MS",
          default_value_t = crate::cluster::DEFAULT_IN_PLACE_RESTART_MS)]
    in_place_restart_ms: u64,
    /// How long a deleted pod's containers take to exit on SIGTERM on the fake nodes, in
    /// milliseconds (the grace period caps it; a pod's `harness.kwok/stop-seconds` annotation
    /// sets its own).
    #[arg(long = "pod-stop-ms", value_name = "MS",
          default_value_t = crate::cluster::DEFAULT_STOP_MS)]
    pod_stop_ms: u64,
    /// A YAML file of objects to create once the cluster is up, before the controller starts
    /// (what a controller reads only at start, e.g. OpenKruise's `kruise-configuration`
    /// ConfigMap in `kruise-system`); missing namespaces are made first (repeatable).
    #[arg(long = "seed", value_name = "FILE")]
    seed: Vec<PathBuf>,
}

impl ProfileArgs {
    fn profile(&self) -> anyhow::Result<Profile> {
        let version: KubeVersion = self.kubernetes.parse()?;
        let mut p = Profile::new(version);
        p.add_gates(&self.feature_gates)?;
        p.add_runtime_config(&self.runtime_config)?;
        let zones: Vec<&str> = self.zones.iter().map(String::as_str).collect();
        let labels: BTreeMap<String, String> = parse_key_values(&self.node_labels)?;
        p.set_nodes(self.nodes, &zones, &labels)?;
        p.set_real_nodes(self.real_nodes, &zones, &labels)?;
        p.pod_timing = crate::cluster::PodTiming {
            in_place_restart_ms: self.in_place_restart_ms,
            stop_ms: self.pod_stop_ms,
        };
        p.objects = crate::cluster::seed::load(&self.seed)?;
        Ok(p)
    }
}

#[derive(Debug, Args)]
struct UpArgs {
    /// Cluster name (also its directory name).
    #[arg(long, default_value = "harness")]
    name: String,
    #[command(flatten)]
    profile: ProfileArgs,
    /// Fixed apiserver port on 127.0.0.1 (default: a free one).
    #[arg(long)]
    apiserver_port: Option<u16>,
    /// Return once ready and leave the cluster running; end it with `harness cluster down`.
    #[arg(long)]
    detach: bool,
    /// Keep the cluster directory (logs, certificates) after it stops.
    #[arg(long)]
    keep_dir: bool,
    /// Print the processes or commands that would run, with their arguments, and start
    /// nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    controller: ControllerArgs,
    #[command(flatten)]
    provider: ProviderArgs,
}

#[derive(Debug, Args)]
struct ControllerArgs {
    /// Controller under test to install, e.g. openkruise@v1.9.0.
    #[arg(long = "controller", value_name = "NAME@TAG")]
    controller: Option<String>,
    /// Feature gates for the controller manager, e.g.
    /// RecreatePodWhenChangeVCTInCloneSetGate=true (repeatable, comma-separated).
    #[arg(long = "controller-gates", value_name = "GATE=BOOL")]
    controller_gates: Vec<String>,
}

impl ControllerArgs {
    fn choice(&self) -> anyhow::Result<Option<crate::up::ControllerChoice>> {
        let Some(c) = &self.controller else {
            if !self.controller_gates.is_empty() {
                bail!("--controller-gates needs --controller");
            }
            return Ok(None);
        };
        let mut gates = BTreeMap::new();
        for (k, v) in parse_key_values(&self.controller_gates)? {
            let b = v.parse::<bool>().with_context(|| {
                format!("parse controller gate `{k}={v}`: the value must be true or false")
            })?;
            gates.insert(k, b);
        }
        Ok(Some(crate::up::ControllerChoice {
            reference: c.parse()?,
            gates,
        }))
    }
}

#[derive(Debug, Subcommand)]
enum BundleCommand {
    /// Install a controller into a running local cluster (e.g. one started with --detach).
    Install {
        /// The cluster.
        #[arg(long, default_value = "harness")]
        cluster: String,
        #[command(flatten)]
        controller: ControllerArgs,
    },
}

#[derive(Debug, Subcommand)]
enum ToolchainCommand {
    /// Build (or find in the cache) the binaries for Kubernetes versions and kwok.
    Build {
        /// Kubernetes versions (default: the default version); `all` for every supported one.
        #[arg(long = "k8s", value_delimiter = ',')]
        kubernetes: Vec<String>,
        /// Also build kwokctl (used by the bring-up benchmark).
        #[arg(long)]
        kwokctl: bool,
        /// Also build the kubelet of each version (for real nodes).
        #[arg(long)]
        kubelet: bool,
        /// Controller managers to build, e.g. openkruise@v1.9.0 (repeatable, comma-separated).
        #[arg(long = "controller", value_delimiter = ',')]
        controllers: Vec<String>,
        /// Also build each controller's node daemon (kruise-daemon, for real nodes).
        #[arg(long)]
        daemon: bool,
        /// Also build each controller release's own end-to-end suite (OpenKruise's
        /// `test/e2e`, a Go test binary; a cold build takes many minutes).
        #[arg(long = "upstream-e2e")]
        upstream_e2e: bool,
    },
    /// List cached builds and the supported versions.
    List,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Cluster bring-up time (start to: nodes Ready and the default service account present),
    /// the harness against `kwokctl create cluster --runtime binary` on the same binaries.
    ClusterUp {
        /// Runs per tool.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Kubernetes version.
        #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
        kubernetes: String,
        /// Number of nodes.
        #[arg(long, default_value_t = 4)]
        nodes: usize,
        /// Also time the same cluster with this many real nodes added (a kubelet and a
        /// containerd each; needs root), in the same runs.
        #[arg(long = "real-nodes", default_value_t = 0)]
        real_nodes: usize,
    },
    /// Wall time of the default run (clusters, bundle, all suites) and the share of scenario
    /// time spent waiting on the controller.
    Run {
        /// Runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// The default run repeated (a soak): each scenario's failure rate across the runs and the
    /// wall times; exit 1 if any scenario failed in any run. Each run's reports are kept.
    Soak {
        /// Runs.
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Where the runs' reports go (`<dir>/soak-<id>/run-<n>/`).
        #[arg(long, default_value = "reports")]
        report_dir: PathBuf,
    },
    /// Time from a ready cluster to a ready controller bundle (CRDs established, webhooks
    /// patched and answering, smoke CloneSet reconciled).
    Bundle {
        /// Runs.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Controller, e.g. openkruise@v1.9.0.
        #[arg(long = "controller", default_value = "openkruise@v1.9.0")]
        controller: String,
    },
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HARNESS_LOG")
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(async {
        let command = run(cli);
        tokio::pin!(command);
        tokio::select! {
            r = &mut command => match r {
                Ok(code) => code,
                Err(e) => {
                    print_error(&e);
                    ExitCode::FAILURE
                }
            },
            sig = interrupted() => {
                crate::stop::request();
                if crate::stop::salvaging() {
                    eprintln!(
                        "interrupted by {sig}: ending the upstream suite to keep the results of \
                         its specs so far (at most {} s; again to stop at once)",
                        crate::stop::GRACE.as_secs()
                    );
                    tokio::select! {
                        _ = &mut command => {}
                        _ = crate::stop::salvaged() => {}
                        _ = interrupted() => {}
                        _ = tokio::time::sleep(crate::stop::GRACE) => {}
                    }
                }
                eprintln!("interrupted by {sig}: cleaning up");
                ExitCode::from(EXIT_INTERRUPTED)
            }
        }
    });
    // Dropping the runtime drops the interrupted command's future: clusters tear down here.
    drop(rt);
    code
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut hup = signal(SignalKind::hangup()).expect("install SIGHUP handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

fn print_error(e: &anyhow::Error) {
    eprintln!("error: {e}");
    for cause in e.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

fn toolchain() -> Toolchain {
    Toolchain::new(Cache::from_env(), Progress::stderr())
}

fn provider(apiserver_port: Option<u16>) -> LocalProvider {
    LocalProvider::new(
        toolchain(),
        LocalOptions {
            apiserver_port,
            ..LocalOptions::default()
        },
        Progress::stderr(),
    )
}

/// Exit code of a run with regressions or unexpected passes.
pub const EXIT_REGRESSION: u8 = 1;
/// Exit code of a run whose cluster or controller could not start.
pub const EXIT_INFRA: u8 = 3;

async fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    let found = match &args.replay {
        Some(dir) => Some(crate::explore::output::read_finding(dir)?),
        None => None,
    };
    let kubernetes: KubeVersion = match (&args.kubernetes, &found) {
        (Some(k), _) => k.parse()?,
        (None, Some(r)) => r.kubernetes.parse()?,
        (None, None) => crate::toolchain::versions::DEFAULT_KUBERNETES.parse()?,
    };
    let controller: crate::controller::ControllerRef = match (&args.controller, &found) {
        (Some(c), _) => c.parse()?,
        (None, Some(r)) => r.controller.parse()?,
        (None, None) => crate::controller::ControllerRef::default_ref(),
    };
    crate::explore::select(&args.kinds)?;
    if args.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    let seed = args
        .seed
        .unwrap_or_else(|| u64::from(rand::random::<u32>()));
    let run_id = crate::run::new_id("explore");
    let dir = args.report_dir.join(&run_id);
    let options = crate::explore::Options {
        kubernetes,
        controller,
        kinds: args.kinds,
        seed,
        budget: args.budget,
        modes: args
            .modes
            .iter()
            .map(|m| match m.as_str() {
                "admission" => crate::explore::trial::Mode::Admission,
                _ => crate::explore::trial::Mode::Behaviour,
            })
            .collect(),
        perturbations: args.perturbations,
        parallel: args.parallel,
        settle: args.settle,
        confirm: 3,
        shrink_runs: args.shrink_runs,
        dir: dir.clone(),
        baseline: args.baseline.as_deref().map(str::parse).transpose()?,
    };
    let provider = crate::cluster::any::Provider::Local(provider(None));
    if let Some(finding) = &args.replay {
        let (r, fired) = crate::explore::replay(finding, &options, &provider, &toolchain()).await?;
        let again = fired
            .iter()
            .any(|f| f.oracle == r.finding.oracle && f.key == r.finding.key);
        for f in &fired {
            println!("{} {}: {}", f.oracle.short(), f.key, f.observed);
        }
        println!(
            "{}: {} {}",
            finding.display(),
            if again {
                "fires again:"
            } else {
                "no longer fires:"
            },
            r.finding.key
        );
        return Ok(if again {
            ExitCode::from(EXIT_REGRESSION)
        } else {
            ExitCode::SUCCESS
        });
    }
    eprintln!(
        "exploring with seed {seed} for {:?} (findings in {})",
        args.budget,
        dir.display()
    );
    let say = |line: String| eprintln!("{line}");
    let summary = crate::explore::explore(&options, &provider, &toolchain(), &say).await?;
    let page = dir.join("report.html");
    crate::report::atomic_write(
        &page,
        crate::report::explore::html(&summary, &dir).as_bytes(),
    )
    .with_context(|| format!("write {}", page.display()))?;
    print!("{}", crate::explore::output::markdown(&summary));
    eprintln!("report: {}", page.display());
    Ok(
        if args.fail_on_findings && summary.stable().next().is_some() {
            ExitCode::from(EXIT_REGRESSION)
        } else {
            ExitCode::SUCCESS
        },
    )
}

async fn run_scenarios(args: RunArgs) -> anyhow::Result<ExitCode> {
    use crate::run::{RunOptions, ledger::Ledger};
    let kubernetes: KubeVersion = args.kubernetes.parse()?;
    let controller: crate::controller::ControllerRef = args.controller.parse()?;
    if let Some(note) = controller.note() {
        eprintln!("note: {note}");
    }
    if args.parallel == 0 || args.repeat == 0 || args.clusters_parallel == 0 {
        bail!("--parallel, --clusters-parallel and --repeat must be at least 1");
    }
    let ledger = match &args.ledger {
        Some(p) => Ledger::load(p)?,
        None => Ledger::builtin(),
    };
    let upstream = args.select.upstream()?;
    if upstream.is_some() && args.list {
        bail!(
            "--list lists harness scenarios; the upstream suite's specs are listed by its own binary"
        );
    }
    let all = args.select.catalog()?;
    let inject_failures = injected_failures(&all)?;
    let filter = args.select.filter();
    filter.check_suites(&all)?;
    if args.list {
        for s in all.iter().filter(|s| filter.selects(s)) {
            println!("{}\t[{}]\t{}", s.name, s.labels.join(","), s.summary);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let request = crate::run::preflight::Request {
        kubernetes,
        controller: &controller,
        scenarios: &all,
        filter: &filter,
        upstream: upstream.as_ref(),
    };
    for warning in crate::run::preflight::check(&request).await? {
        eprintln!("warning: {warning}");
    }
    let plan = match &upstream {
        Some(choice) => choice.plan(kubernetes, &controller, &toolchain()).await?,
        None => crate::run::plan(&all, &filter, kubernetes, &controller),
    };
    if plan.clusters.is_empty() && plan.skipped.is_empty() {
        bail!("select scenarios: the filters match none (see `harness run --list`)");
    }
    args.provider.validate()?;
    if args.dry_run {
        println!("{}", plan.describe(args.provider.label()));
        return Ok(ExitCode::SUCCESS);
    }
    let costs = match &args.costs {
        Some(p) => crate::run::costs::Costs::load(p)?,
        None => {
            let newest = args.report_dir.join("latest").join("report.json");
            crate::run::costs::Costs::load(&newest).unwrap_or_default()
        }
    };
    let run_id = crate::run::new_id("");
    // The provider is checked before anything is written.
    let provider = args
        .provider
        .build(args.report_dir.join(&run_id).join("cluster-logs"))?;
    if let Some(reason) = upstream
        .as_ref()
        .filter(|u| u.real_nodes > 0)
        .and_then(|_| provider.no_real_nodes())
    {
        bail!("--upstream-real-nodes: the suite's cluster {reason}");
    }
    let files = crate::report::Files::new(&args.report_dir, &run_id).with_context(|| {
        format!(
            "create the report directory in {}",
            args.report_dir.display()
        )
    })?;
    let dir = files.dir().to_path_buf();
    let mut reporters: Vec<Box<dyn crate::run::Reporter>> = vec![
        Box::new(crate::report::Terminal::default()),
        Box::new(files),
    ];
    let tc = toolchain();
    let options = RunOptions {
        parallel: args.parallel,
        clusters_parallel: args.clusters_parallel,
        repeat: args.repeat,
        retries: args.flakes.retries,
        inject_failures,
        keep_cluster_on_failure: args.keep_cluster_on_failure,
        logs_dir: Some(dir.join("cluster-logs")),
        costs,
        ..Default::default()
    };
    let env = crate::run::Env {
        scenarios: &all,
        ledger: &ledger,
        provider: &provider,
        toolchain: &tc,
        options: &options,
    };
    let results = crate::run::execute(&plan, env, &run_id, &mut reporters).await;
    eprintln!("reports: {}", dir.display());
    Ok(exit_code(crate::run::Status::judged(
        &results,
        args.flakes.fail_on_flaky,
    )))
}

/// `HARNESS_INJECT_FAILURES`, checked against the scenarios (see
/// [`crate::run::RunOptions::inject_failures`]).
fn injected_failures(
    all: &[crate::scenario::Scenario],
) -> anyhow::Result<std::collections::BTreeMap<String, usize>> {
    let Ok(spec) = std::env::var("HARNESS_INJECT_FAILURES") else {
        return Ok(Default::default());
    };
    let parsed = crate::run::parse_injected_failures(&spec)
        .map_err(|e| anyhow::anyhow!("read HARNESS_INJECT_FAILURES: {e}"))?;
    if let Some(unknown) = parsed
        .keys()
        .find(|n| !all.iter().any(|s| s.name == n.as_str()))
    {
        bail!(
            "read HARNESS_INJECT_FAILURES: there is no scenario `{unknown}` (see `harness run --list`)"
        );
    }
    if !parsed.is_empty() {
        eprintln!("note: HARNESS_INJECT_FAILURES makes these scenarios fail on purpose: {spec}");
    }
    Ok(parsed)
}

/// The documented exit code of a run's status.
fn exit_code(status: crate::run::Status) -> ExitCode {
    match status {
        crate::run::Status::Passed => ExitCode::SUCCESS,
        crate::run::Status::Failed => ExitCode::from(EXIT_REGRESSION),
        crate::run::Status::InfraError => ExitCode::from(EXIT_INFRA),
    }
}

/// What `matrix` and `qualify` run with, from their selection flags.
struct MatrixSetup {
    scenarios: Vec<crate::scenario::Scenario>,
    ledger: crate::run::ledger::Ledger,
    filter: crate::run::Filter,
    provider: crate::cluster::any::Provider,
    toolchain: Toolchain,
    options: crate::run::RunOptions,
    /// The upstream suite the cells run instead of scenarios.
    upstream: Option<crate::run::upstream::Choice>,
}

impl MatrixSetup {
    fn new(select: &SelectArgs) -> anyhow::Result<Self> {
        if select.parallel == 0 || select.cells_parallel == 0 {
            bail!("--parallel and --cells-parallel must be at least 1");
        }
        let upstream = select.selection.upstream()?;
        let scenarios = select.selection.catalog()?;
        let inject_failures = injected_failures(&scenarios)?;
        let filter = select.filter();
        if upstream.is_none() && !scenarios.iter().any(|s| filter.selects(s)) {
            bail!("select scenarios: the filters match none (see `harness run --list`)");
        }
        Ok(Self {
            scenarios,
            ledger: crate::run::ledger::Ledger::builtin(),
            filter,
            provider: crate::cluster::any::Provider::Local(provider(None)),
            toolchain: toolchain(),
            options: crate::run::RunOptions {
                parallel: select.parallel,
                // Cells already run side by side (--cells-parallel); each runs its clusters
                // one after another.
                clusters_parallel: 1,
                retries: select.flakes.retries,
                inject_failures,
                ..Default::default()
            },
            upstream,
        })
    }

    fn env(&self) -> crate::run::Env<'_> {
        crate::run::Env {
            scenarios: &self.scenarios,
            ledger: &self.ledger,
            provider: &self.provider,
            toolchain: &self.toolchain,
            options: &self.options,
        }
    }

    /// The units of work of a matrix (its cells, and for a qualification its upgrade checks),
    /// in grid order, with their expected seconds.
    fn units(
        &self,
        versions: &[KubeVersion],
        controllers: &[crate::controller::ControllerRef],
        upgrade: Option<(
            &crate::controller::ControllerRef,
            &crate::controller::ControllerRef,
        )>,
        costs: &crate::matrix::Costs,
    ) -> Vec<(crate::matrix::Unit, f64)> {
        use crate::matrix::Unit;
        let mut units: Vec<(Unit, f64)> = crate::matrix::cell_units(versions, controllers)
            .into_iter()
            .map(|u| {
                let Unit::Cell {
                    kubernetes,
                    controller,
                } = &u
                else {
                    unreachable!("cell_units gives cells")
                };
                let plan = match &self.upstream {
                    // The cost of a suite run is its cluster's: no scenario times to add.
                    Some(choice) => crate::run::upstream::plan(
                        *kubernetes,
                        controller,
                        choice.suite(controller),
                        vec![],
                    ),
                    None => {
                        crate::run::plan(&self.scenarios, &self.filter, *kubernetes, controller)
                    }
                };
                let cost = costs.plan(&plan, self.options.parallel);
                (u, cost)
            })
            .collect();
        if let Some((baseline, candidate)) = upgrade {
            for v in versions {
                let every = crate::run::Filter::default();
                let plan =
                    crate::run::plan_upgrade(&self.scenarios, &every, *v, baseline, candidate);
                let cost = costs.plan(&plan, self.options.parallel);
                units.push((Unit::Upgrade { kubernetes: *v }, cost));
            }
        }
        units
    }

    /// Runs the cells (every version with every controller, or those of `shard`) into
    /// `<report dir>/<id>/`.
    async fn cells(
        &self,
        select: &SelectArgs,
        versions: Vec<KubeVersion>,
        controllers: Vec<crate::controller::ControllerRef>,
        prefix: &str,
        shard: Option<crate::matrix::ShardInfo>,
    ) -> anyhow::Result<crate::matrix::MatrixReport> {
        for note in controllers.iter().filter_map(|c| c.note()) {
            eprintln!("note: {note}");
        }
        let progress = Progress::stderr();
        let id = crate::run::new_id(prefix);
        let dir = select.report_dir.join(&id);
        let env = crate::matrix::MatrixEnv {
            scenarios: &self.scenarios,
            filter: &self.filter,
            ledger: &self.ledger,
            provider: &self.provider,
            toolchain: &self.toolchain,
            options: &self.options,
            progress: &progress,
            cells_parallel: select.cells_parallel,
            upstream: self.upstream.as_ref(),
        };
        let report = crate::matrix::run_matrix(env, &versions, &controllers, &id, &dir, shard)
            .await
            .with_context(|| format!("write reports in {}", dir.display()))?;
        let latest = select.report_dir.join("latest");
        let _ = std::fs::remove_file(&latest);
        let _ = std::os::unix::fs::symlink(&id, &latest);
        eprintln!("reports: {}", dir.display());
        Ok(report)
    }
}

/// `harness chainsaw ...`.
#[derive(Debug, Subcommand)]
enum ChainsawCommand {
    /// Read chainsaw tests (files, or directories searched for chainsaw-test.yaml) and say for
    /// each whether the harness can run it, or which feature it uses that the harness does not
    /// implement; exit 1 if any cannot run. Nothing is started.
    Check {
        /// Test files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

fn chainsaw_check(paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let files = crate::chainsaw::check(paths)?;
    let (mut ok, mut refused) = (0, 0);
    for (path, result) in &files {
        match result {
            Ok(tests) => {
                for t in tests {
                    ok += 1;
                    println!("ok       {}\t{}", t.name, path.display());
                }
            }
            Err(e) => {
                refused += 1;
                let why = std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source())
                    .skip(1)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join(": ");
                println!("refused  {}\t{why}", path.display());
            }
        }
    }
    println!("{ok} runnable, {refused} refused, in {} files", files.len());
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Calls the library for one command; errors become exit code 1 in [`main`].
async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run_scenarios(args).await,
        Command::Explore(args) => explore(args).await,
        Command::Matrix(args) => matrix(args).await,
        Command::Coverage(args) => coverage(args).await,
        Command::Chainsaw(ChainsawCommand::Check { paths }) => chainsaw_check(&paths),
        Command::Qualify(args) => qualify(args).await,
        Command::Report(ReportCommand::Merge { dirs, report_dir }) => {
            report_merge(&dirs, &report_dir)
        }
        Command::Cluster(ClusterCommand::Up(args)) => cluster_up(*args).await,
        Command::Cluster(ClusterCommand::Down { name }) => {
            provider(None).down(&name)?;
            println!("cluster `{name}` removed");
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster(ClusterCommand::Configs { dir, check }) => cluster_configs(dir, check),
        Command::Cluster(ClusterCommand::List) => cluster_list(),
        Command::Bundle(BundleCommand::Install {
            cluster,
            controller,
        }) => bundle_install(cluster, controller).await,
        Command::Gc => gc(),
        Command::Toolchain(ToolchainCommand::Build {
            kubernetes,
            kwokctl,
            kubelet,
            controllers,
            daemon,
            upstream_e2e,
        }) => {
            let extras = ControllerExtras {
                daemon,
                upstream_e2e,
            };
            toolchain_build(kubernetes, kwokctl, kubelet, controllers, extras).await
        }
        Command::Toolchain(ToolchainCommand::List) => toolchain_list(),
        Command::Bench(BenchCommand::ClusterUp {
            runs,
            kubernetes,
            nodes,
            real_nodes,
        }) => crate::bench::cluster_up(runs, kubernetes.parse()?, nodes, real_nodes).await,
        Command::Bench(BenchCommand::Run { runs }) => crate::bench::run(runs).await,
        Command::Bench(BenchCommand::Soak { runs, report_dir }) => {
            crate::bench::soak(runs, &report_dir).await
        }
        Command::Bench(BenchCommand::Bundle { runs, controller }) => {
            crate::bench::bundle(runs, controller.parse()?).await
        }
        Command::Provisioner {
            kubeconfig,
            volumes_dir,
        } => {
            let client = crate::cluster::admin_client(&kubeconfig).await?;
            crate::cluster::local::provisioner::run(client, volumes_dir).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn coverage(args: CoverageArgs) -> anyhow::Result<ExitCode> {
    use crate::report::{Recorded, coverage_table, uncovered_list};
    use crate::scenario::coverage::{ApiFields, Coverage};
    let all = crate::suites::all();
    let filter = args.select.filter();
    filter.check_suites(&all)?;
    let selected: Vec<&str> = all
        .iter()
        .filter(|s| filter.selects(s))
        .map(|s| s.name)
        .collect();
    if selected.is_empty() {
        bail!("select scenarios: the filters match none (see `harness run --list`)");
    }
    let path = args
        .from
        .clone()
        .unwrap_or_else(|| args.report_dir.join("latest/report.json"));
    let recorded = Recorded::load(&path)?;
    let controller: crate::controller::ControllerRef =
        match (&args.controller, recorded.controller()) {
            (Some(c), _) => c.parse()?,
            (None, Some(c)) => c.clone(),
            (None, None) => crate::controller::ControllerRef::default_ref(),
        };
    let controller = controller.controller();
    let groups = controller.api_groups();
    let crds = controller.crds().await?;
    let fields: Vec<ApiFields> = crds
        .iter()
        .filter(|c| groups.contains(&c["spec"]["group"].as_str().unwrap_or_default()))
        .flat_map(ApiFields::of_crd)
        .collect();
    let c = Coverage::compute(&fields, &recorded.sends(|s| selected.contains(&s)));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}\n{}", coverage_table(&c), uncovered_list(&c));
    }
    let ran = recorded.scenarios();
    let missing: Vec<&&str> = selected
        .iter()
        .filter(|s| !ran.contains(**s))
        .filter(|s| all.iter().any(|x| x.name == **s && !x.requires.upgrade))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "note: {} selected scenario(s) have no result in {} and count for nothing: {}",
            missing.len(),
            path.display(),
            missing
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What `--shard`, `--plan` and `--binaries` make of a matrix.
enum Sharding {
    /// Run every unit.
    Whole,
    /// Run this shard's units.
    Shard(crate::matrix::ShardInfo),
    /// Something was printed; run nothing.
    Printed,
}

/// Splits `units` as `args` asks, or prints the split or the binaries.
fn sharding(
    args: &ShardArgs,
    units: Vec<(crate::matrix::Unit, f64)>,
    cells_parallel: usize,
    upstream: Option<&crate::run::upstream::Choice>,
) -> Sharding {
    use crate::matrix::Unit;
    let count = args.shard.map_or(1, |s| s.count);
    let split = crate::matrix::shard::split(units.clone(), count);
    let index = args.shard.map_or(1, |s| s.index);
    if args.binaries {
        let mut names: Vec<String> = vec![];
        for a in split.iter().filter(|a| a.shard == index) {
            let (v, c) = match &a.unit {
                Unit::Cell {
                    kubernetes,
                    controller,
                } => {
                    let mut c = vec![format!("{}-{}", controller.kind.name(), controller.slug())];
                    if let Some(choice) = upstream {
                        let from = choice.suite(controller).from;
                        c.push(format!("{}-e2e-{}", from.kind.name(), from.slug()));
                    }
                    (kubernetes, c)
                }
                // The upgrade check runs both releases (named by the cells).
                Unit::Upgrade { kubernetes } => (kubernetes, vec![]),
            };
            names.push(format!("k8s-{v}"));
            names.extend(c);
        }
        names.sort();
        names.dedup();
        println!("{}", names.join(","));
        return Sharding::Printed;
    }
    if args.plan {
        print!(
            "{}",
            split_table(&split, count, cells_parallel, args.target_minutes)
        );
        return Sharding::Printed;
    }
    match args.shard {
        None => Sharding::Whole,
        Some(s) => Sharding::Shard(crate::matrix::ShardInfo {
            index: s.index,
            count: s.count,
            units: split,
            qualify: None,
        }),
    }
}

fn minutes(seconds: f64) -> String {
    format!(
        "{}m{:02}s",
        (seconds / 60.0) as u64,
        (seconds % 60.0) as u64
    )
}

/// The split as a table: units with expected time and shard, each shard's total, and the
/// number of shards that keeps every shard under `target` minutes.
fn split_table(
    split: &[crate::matrix::shard::Assignment],
    count: usize,
    cells_parallel: usize,
    target: u64,
) -> String {
    let per = cells_parallel.max(1) as f64;
    let mut out = format!("{:<64} {:>5} {:>9}\n", "UNIT", "SHARD", "EXPECTED");
    for a in split {
        out.push_str(&format!(
            "{:<64} {:>5} {:>9}\n",
            a.unit.to_string(),
            a.shard,
            minutes(a.cost)
        ));
    }
    let load = |k: usize, of: &[crate::matrix::shard::Assignment]| -> f64 {
        of.iter()
            .filter(|a| a.shard == k)
            .map(|a| a.cost)
            .sum::<f64>()
            / per
    };
    out.push('\n');
    for k in 1..=count {
        out.push_str(&format!(
            "shard {k}/{count}: {} unit(s), about {} ({cells_parallel} cell(s) at once)\n",
            split.iter().filter(|a| a.shard == k).count(),
            minutes(load(k, split))
        ));
    }
    let serial: f64 = split.iter().map(|a| a.cost).sum();
    let units: Vec<(crate::matrix::Unit, f64)> =
        split.iter().map(|a| (a.unit.clone(), a.cost)).collect();
    let needed = (1..=units.len().max(1)).find_map(|n| {
        let s = crate::matrix::shard::split(units.clone(), n);
        let worst = (1..=n).map(|k| load(k, &s)).fold(0.0, f64::max);
        (worst <= target as f64 * 60.0).then_some((n, worst))
    });
    out.push_str(&format!(
        "whole matrix: {} unit(s), {} of work; ",
        split.len(),
        minutes(serial)
    ));
    match needed {
        Some((n, worst)) => out.push_str(&format!(
            "{n} shard(s) keep each under {target} minutes (the slowest about {})\n",
            minutes(worst)
        )),
        None => out.push_str(&format!(
            "one unit alone takes longer than {target} minutes\n"
        )),
    }
    out
}

fn report_merge(dirs: &[PathBuf], report_dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    // The kind of run comes from the first shard; the merge checks the rest.
    let first = dirs.first().map(|d| d.join("matrix.json"));
    let qualify = first
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<crate::matrix::MatrixReport>(&b).ok())
        .and_then(|r| r.shard)
        .is_some_and(|s| s.qualify.is_some());
    let id = crate::run::new_id(if qualify { "qualify" } else { "matrix" });
    let out = report_dir.join(&id);
    let merged = match crate::matrix::shard::merge(dirs, &out, &id) {
        Ok(m) => m,
        Err(e) => {
            // Nothing half-written.
            let _ = std::fs::remove_dir_all(&out);
            return Err(e.into());
        }
    };
    let latest = report_dir.join("latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&id, &latest);
    print_cells(&merged.report);
    eprintln!("reports: {}", out.display());
    if let Some((baseline, candidate, q)) = &merged.qualification {
        println!("{}", q.summary(baseline, candidate));
        return Ok(exit_code(q.status()));
    }
    Ok(exit_code(crate::run::Status::of(
        merged.report.cells.iter().flat_map(|c| &c.results),
    )))
}

fn print_cells(report: &crate::matrix::MatrixReport) {
    println!("{:<10} {:<22} WORST", "KUBERNETES", "RELEASE");
    for c in &report.cells {
        println!(
            "{:<10} {:<22} {}",
            c.kubernetes.to_string(),
            c.controller.to_string(),
            c.worst
        );
    }
}

async fn matrix(args: MatrixArgs) -> anyhow::Result<ExitCode> {
    let file = if args.kubernetes.is_none() || args.controllers.is_none() {
        Some(crate::matrix::MatrixFile::load(&args.matrix_file)?)
    } else {
        None
    };
    let versions = crate::matrix::parse_versions(
        args.kubernetes
            .as_deref()
            .unwrap_or_else(|| &file.as_ref().expect("loaded").kubernetes),
    )?;
    let controllers = crate::matrix::parse_controllers(
        args.controllers
            .as_deref()
            .unwrap_or_else(|| &file.as_ref().expect("loaded").controllers),
    )?;
    let mut setup = MatrixSetup::new(&args.select)?;
    let costs = match &args.shards.costs {
        Some(p) => crate::matrix::Costs::load(p)?,
        None => crate::matrix::Costs::estimate(),
    };
    setup.options.costs = costs.clone();
    let units = setup.units(&versions, &controllers, None, &costs);
    let shard = match sharding(
        &args.shards,
        units,
        args.select.cells_parallel,
        setup.upstream.as_ref(),
    ) {
        Sharding::Printed => return Ok(ExitCode::SUCCESS),
        Sharding::Whole => None,
        Sharding::Shard(info) => Some(info),
    };
    let sharded = shard.as_ref().map(|s| format!("{}/{}", s.index, s.count));
    let report = setup
        .cells(&args.select, versions, controllers, "matrix", shard)
        .await?;
    if let Some(k) = sharded {
        eprintln!(
            "shard {k} done: merge every shard's directory with `harness report merge DIR...`"
        );
    }
    print_cells(&report);
    Ok(exit_code(crate::run::Status::judged(
        report.cells.iter().flat_map(|c| &c.results),
        args.select.flakes.fail_on_flaky,
    )))
}

async fn qualify(args: QualifyArgs) -> anyhow::Result<ExitCode> {
    let candidate: crate::controller::ControllerRef = args.candidate.parse()?;
    let baseline: crate::controller::ControllerRef = if args.baseline.contains('@') {
        args.baseline.parse()?
    } else {
        format!("{}@{}", candidate.kind.name(), args.baseline).parse()?
    };
    if baseline == candidate {
        bail!("qualify {candidate}: the baseline is the candidate itself");
    }
    let versions = crate::matrix::parse_versions(&args.kubernetes)?;
    let mut setup = MatrixSetup::new(&args.select)?;
    let controllers = vec![baseline.clone(), candidate.clone()];
    let costs = match &args.shards.costs {
        Some(p) => crate::matrix::Costs::load(p)?,
        None => crate::matrix::Costs::estimate(),
    };
    setup.options.costs = costs.clone();
    let units = setup.units(
        &versions,
        &controllers,
        Some((&baseline, &candidate)),
        &costs,
    );
    let shard = match sharding(
        &args.shards,
        units,
        args.select.cells_parallel,
        setup.upstream.as_ref(),
    ) {
        Sharding::Printed => return Ok(ExitCode::SUCCESS),
        Sharding::Whole => None,
        Sharding::Shard(mut info) => {
            info.qualify = Some(crate::matrix::shard::QualifyShard {
                baseline: baseline.clone(),
                candidate: candidate.clone(),
                upgrades: vec![],
            });
            Some(info)
        }
    };
    let mut report = setup
        .cells(
            &args.select,
            versions.clone(),
            controllers,
            "qualify",
            shard,
        )
        .await?;
    let dir = args.select.report_dir.join(&report.id);
    if let Some(mut info) = report.shard.take() {
        // A shard runs its upgrade checks and leaves the verdict to the merge.
        let mine: Vec<KubeVersion> = info
            .mine()
            .filter_map(|u| match u {
                crate::matrix::Unit::Upgrade { kubernetes } => Some(*kubernetes),
                crate::matrix::Unit::Cell { .. } => None,
            })
            .collect();
        let upgrades =
            crate::qualify::upgrades(&report.id, setup.env(), &mine, &baseline, &candidate, &dir)
                .await
                .with_context(|| format!("write upgrade reports in {}", dir.display()))?;
        if let Some(q) = info.qualify.as_mut() {
            q.upgrades = upgrades;
        }
        let (index, count) = (info.index, info.count);
        report.shard = Some(info);
        crate::matrix::write_matrix(&dir, &report)
            .with_context(|| format!("write matrix.json in {}", dir.display()))?;
        eprintln!(
            "shard {}/{} done: the verdict comes from `harness report merge DIR...` over every \
             shard's directory",
            index, count
        );
        return Ok(ExitCode::SUCCESS);
    }
    let q = crate::qualify::qualify(&report, setup.env(), &baseline, &candidate, &dir)
        .await
        .with_context(|| format!("write qualify.json in {}", dir.display()))?;
    println!("{}", q.summary(&baseline, &candidate));
    let flaky = report
        .cells
        .iter()
        .flat_map(|c| &c.results)
        .any(|r| matches!(r.outcome, crate::run::Outcome::Flaky { .. }));
    if args.select.flakes.fail_on_flaky && flaky {
        eprintln!("flaky results fail the qualification (--fail-on-flaky)");
        return Ok(exit_code(crate::run::Status::Failed));
    }
    Ok(exit_code(q.status()))
}

fn cluster_configs(dir: PathBuf, check: bool) -> anyhow::Result<ExitCode> {
    let files = crate::run::kind_configs(&crate::suites::all())?;
    let sync = crate::cluster::kind::sync_configs(&dir, &files, check)?;
    for path in &sync.written {
        println!("wrote {}", path.display());
    }
    if sync.stale.is_empty() {
        println!(
            "{} kind configs in {} are current",
            files.len(),
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let stale: Vec<String> = sync.stale.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "out of date (regenerate with `harness cluster configs`): {}",
        stale.join(", ")
    );
    Ok(ExitCode::from(EXIT_REGRESSION))
}

fn cluster_list() -> anyhow::Result<ExitCode> {
    let clusters = provider(None).list();
    if clusters.is_empty() {
        println!("no clusters");
    }
    for s in clusters {
        let alive = s.alive_processes().len();
        let status = if alive == s.processes.len() && s.ready {
            "running"
        } else if alive == 0 {
            "dead (run `harness gc`)"
        } else {
            "degraded"
        };
        println!(
            "{}\tKubernetes {}\t{}\t{}\t{}",
            s.name,
            s.profile.kubernetes,
            status,
            if s.owner.is_some() {
                "attached"
            } else {
                "detached"
            },
            s.kubeconfig.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn bundle_install(cluster: String, controller: ControllerArgs) -> anyhow::Result<ExitCode> {
    let Some(choice) = controller.choice()? else {
        bail!("name the controller with --controller, e.g. openkruise@v1.9.0");
    };
    if let Some(note) = choice.reference.note() {
        eprintln!("note: {note}");
    }
    let provider = provider(None);
    let mut c = provider.attach(&cluster).await?;
    let installed = choice
        .reference
        .controller()
        .install(
            crate::controller::Host::Processes(&mut c),
            &toolchain(),
            &choice.gates,
        )
        .await?;
    c.detach()?;
    let logs: Vec<String> = installed
        .logs()
        .iter()
        .map(|l| l.display().to_string())
        .collect();
    println!(
        "{} ready in cluster `{cluster}` (logs: {})",
        choice.reference,
        logs.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

fn gc() -> anyhow::Result<ExitCode> {
    let removed = provider(None).gc()?;
    // kind clusters of killed runs: their logs exported, then deleted.
    let kind = kind_provider(None, providers_root().join("logs")).gc()?;
    // The work directories of killed benches.
    let benches = crate::bench::gc()?;
    if removed.is_empty() && kind.is_empty() && benches.is_empty() {
        println!("nothing to remove");
    }
    for name in benches {
        println!("removed bench work directory `{name}`");
    }
    for name in removed {
        println!("removed cluster `{name}`");
    }
    for name in kind {
        println!("removed kind cluster `{name}`");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `toolchain build` builds of each controller beside its manager.
#[derive(Debug, Clone, Copy)]
struct ControllerExtras {
    daemon: bool,
    upstream_e2e: bool,
}

async fn toolchain_build(
    kubernetes: Vec<String>,
    kwokctl: bool,
    kubelet: bool,
    controllers: Vec<String>,
    extras: ControllerExtras,
) -> anyhow::Result<ExitCode> {
    let tc = toolchain();
    let controllers: Vec<crate::controller::ControllerRef> = controllers
        .iter()
        .map(|c| c.parse())
        .collect::<Result<_, _>>()?;
    for c in &controllers {
        if let Some(note) = c.note() {
            eprintln!("note: {note}");
        }
        let path = crate::controller::openkruise::build_ref(&tc, c).await?;
        println!("{c}\t{}", path.display());
        if extras.daemon {
            let path = crate::controller::openkruise::daemon::build_ref(&tc, c).await?;
            println!("{c} daemon\t{}", path.display());
        }
        if extras.upstream_e2e {
            let path = crate::controller::openkruise::e2e::build_ref(&tc, c).await?;
            println!("{c} upstream e2e\t{}", path.display());
        }
    }
    if !controllers.is_empty() && kubernetes.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let versions: Vec<KubeVersion> = if kubernetes.iter().any(|k| k == "all") {
        KubeVersion::supported()
    } else if kubernetes.is_empty() {
        vec![KubeVersion::default_version()]
    } else {
        kubernetes
            .iter()
            .map(|k| k.parse())
            .collect::<Result<_, _>>()?
    };
    let kwok = tc.kwok().await?;
    println!("kwok {KWOK_VERSION}\t{}", kwok.display());
    if kwokctl {
        println!("kwokctl {KWOK_VERSION}\t{}", tc.kwokctl().await?.display());
    }
    for v in versions {
        let b = tc.kubernetes(v).await?;
        println!("kubernetes {}\t{}", v.tag(), b.install.dir.display());
        if kubelet {
            println!("kubelet {}\t{}", v.tag(), tc.kubelet(v).await?.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn toolchain_list() -> anyhow::Result<ExitCode> {
    let tc = toolchain();
    println!("supported Kubernetes versions (minor -> pinned release):");
    for r in KUBERNETES_RELEASES {
        let default = if r.minor == crate::toolchain::versions::DEFAULT_KUBERNETES {
            " (default)"
        } else {
            ""
        };
        println!("  {} -> {}{default}", r.minor, r.tag);
    }
    println!("cache: {}", tc.cache().root().display());
    for i in tc.cache().list() {
        println!(
            "  {}\t{}\tbuilt in {}s\t{}",
            i.manifest.key,
            i.manifest.built_with,
            i.manifest.build_seconds,
            i.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn cluster_up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let profile = args.profile.profile()?;
    let controller = args.controller.choice()?;
    if let Some(note) = controller.as_ref().and_then(|c| c.reference.note()) {
        eprintln!("note: {note}");
    }
    if args.name.is_empty()
        || !args
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!(
            "use cluster name `{}`: only letters, digits, `-` and `_` are allowed",
            args.name
        );
    }
    args.provider.validate()?;
    let local = args.provider.provider == ProviderKind::Local;
    if !local && (args.apiserver_port.is_some() || args.detach || args.keep_dir) {
        bail!("--apiserver-port, --detach and --keep-dir are for --provider local");
    }
    let logs = providers_root().join("logs");
    if args.dry_run {
        if local {
            let provider = provider(args.apiserver_port);
            let binaries = provider.binaries(&profile).await?;
            for spec in provider.plan(&args.name, &profile, &binaries) {
                println!("{spec}");
            }
        } else {
            print!("{}", args.provider.dry_run(&args.name, &profile, &logs)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let provider = match args.provider.provider {
        ProviderKind::Local => crate::cluster::any::Provider::Local(provider(args.apiserver_port)),
        _ => args.provider.build(logs)?,
    };
    eprintln!(
        "starting cluster `{}` with the {} provider ...",
        args.name,
        provider.label()
    );
    let mut session = crate::up::Session::start(
        &provider,
        &toolchain(),
        &args.name,
        &profile,
        controller.as_ref(),
    )
    .await?;
    if let Some(i) = &session.installation {
        let logs: Vec<String> = i.logs().iter().map(|l| l.display().to_string()).collect();
        eprintln!("{} ready (logs: {})", i.reference, logs.join(", "));
    }
    println!("{}", session.cluster.kubeconfig().display());
    session.keep_dir(args.keep_dir);
    if args.detach {
        eprintln!("{}", session.detach()?);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("cluster `{}` is running; Ctrl-C to remove it", args.name);
    Err(session.supervise(Duration::from_millis(500)).await)
}
