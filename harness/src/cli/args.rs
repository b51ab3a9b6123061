//! The command line's flags: the clap structures of every command, and their conversion into
//! what the library takes (a request of [`crate::run::drive`], [`crate::matrix::drive`],
//! [`crate::qualify`], [`crate::up`], a [`ProviderConfig`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::cluster::any::{self, ProviderConfig};
use crate::cluster::{Profile, parse_key_values};
use crate::controller::ControllerRef;
use crate::toolchain::KubeVersion;

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
pub(super) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
    /// Build what the kind provider runs offline.
    #[command(subcommand)]
    Kind(KindCommand),
    /// Install controllers under test into running clusters.
    #[command(subcommand)]
    Bundle(BundleCommand),
    /// Remove what killed runs left behind: processes and directories of clusters, and private
    /// Docker daemons, whose owner is gone.
    Gc,
    /// Work with reports: merge the outputs of a sharded matrix or qualification.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Measure things (see docs/benchmarks.md for figures).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// chainsaw tests: which of them the harness can run (see `run --chainsaw`).
    #[command(subcommand)]
    Chainsaw(ChainsawCommand),
    /// The OCI runtime of a private Docker daemon (run by the daemon itself): runc, minus the
    /// capabilities outside this process's bounding set in what `create`, `run` and `exec`
    /// start.
    #[command(hide = true, name = "oci-runtime")]
    OciRuntime {
        /// The runc to run.
        #[arg(long)]
        runc: PathBuf,
        /// runc's arguments, after `--`, as they are.
        #[arg(last = true)]
        args: Vec<std::ffi::OsString>,
    },
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
pub struct ExploreArgs {
    /// Kubernetes version of the cell (default: 1.32; with --replay, the finding's).
    #[arg(long = "k8s")]
    pub kubernetes: Option<String>,
    /// Controller under test (default: openkruise@v1.9.0; with --replay, the finding's).
    #[arg(long, value_name = "NAME@TAG")]
    pub controller: Option<String>,
    /// How long to explore, bring-up aside (`90s`, `30m`, `1h`).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub budget: Duration,
    /// Only these kinds (comma-separated; default: every one, see docs/exploration/README.md).
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// The seed every choice comes from (default: from the clock, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Which trials: admission (dry runs, seconds a kind) and behaviour (objects driven
    /// through generated steps until the budget ends).
    #[arg(long, value_delimiter = ',', default_values = ["admission", "behaviour"], value_parser = ["admission", "behaviour"])]
    pub modes: Vec<String>,
    /// Which environment perturbations behaviour trials draw while the controller converges,
    /// by class: `pods` (a pod deleted at the old or new template, or evicted; a copy
    /// deleted), `nodes` (a node cordoned), `manager` (the manager killed right after a write
    /// and started again), `watches` (the manager's watch events held or dropped, or its
    /// watches ended, through an apiserver proxy: local cells), `node-down` (the kubelet of a
    /// pod's node silent until the steps are done: the node goes NotReady; local cells) and
    /// `apiserver` (the apiserver crashed and started again; local cells). A comma-separated
    /// list, `all`, `none` (or `false`), or `default` (or `true`: pods,nodes). Trials with a
    /// perturbation of the last four classes run one at a time (they act on the whole
    /// controller or cluster).
    #[arg(long, default_value = "default", value_name = "CLASSES")]
    pub perturbations: String,
    /// Behaviour trials at once to start with; the number then adapts between 1 and 8 (or
    /// this, if more) to what the cell sustains: narrower when the apiserver's latency, the
    /// harness's CPU or the trials' settle times rise, wider while they stay low.
    #[arg(long, default_value_t = crate::explore::DEFAULT_PARALLEL)]
    pub parallel: usize,
    /// How long a behaviour trial may take to settle.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Candidates minimizing one behaviour finding may run (admission findings: four times as
    /// many).
    #[arg(long, default_value_t = crate::explore::DEFAULT_SHRINK_RUNS)]
    pub shrink_runs: usize,
    /// The share of the budget that shrinking and confirming findings may take together (0 to
    /// 1); past it, a new finding is written as it fired, and `--replay <its directory>`
    /// shrinks and confirms it.
    #[arg(long, default_value_t = crate::explore::SHRINK_SHARE, value_parser = parse_share)]
    pub shrink_share: f64,
    /// Run one finding's trial again (a findings/<n>-... directory) and say whether it still
    /// fires its oracle.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
    /// Also run every trial on a cell of this release (NAME@TAG, or TAG of the controller
    /// under test) and report where the controller under test answers or settles otherwise
    /// (O5, the release differential)
    #[arg(long, value_name = "NAME@TAG")]
    pub baseline: Option<String>,
    /// A cluster profile of the catalog: `default`, or one named after the Kubernetes
    /// feature gates some scenarios need (each is a file of kind-configs/, see `harness
    /// cluster configs`). The cell has its gates.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Feature gates of the cell's control plane, e.g. InPlacePodVerticalScaling=true, beside
    /// the profile's (repeatable or comma-separated; with --replay, default: the finding's).
    #[arg(long = "feature-gates", value_name = "GATE=BOOL")]
    pub feature_gates: Vec<String>,
    /// Feature gates of the controller manager (repeatable or comma-separated; with
    /// --replay, default: the finding's).
    #[arg(long = "controller-gates", value_name = "GATE=BOOL")]
    pub controller_gates: Vec<String>,
    /// Explore the release's own feature gates too: `pairwise` explores, after a cell at the
    /// release's default gates (half the budget), cells that turn on gates the release keeps
    /// off by default (read from its sources, less those its CI pins off and those set with
    /// --controller-gates), so that every pair of two gates' settings meets in a cell; each
    /// cell gets an equal share of the other half (at least 3 minutes; sets that do not fit
    /// are listed). `none`: one cell at the default gates
    #[arg(long, default_value = "none", value_parser = ["none", "pairwise"])]
    pub gate_sets: String,
    /// Exit 1 when a stable finding was reported (default: 0 once the exploration ran, the
    /// findings being its report).
    #[arg(long)]
    pub fail_on_findings: bool,
    /// Where the run's directory goes.
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
}

impl ExploreArgs {
    /// The exploration's options, with `seed`, into `dir`; the cell defaults to the replayed
    /// finding's (`found`), then to the default one.
    pub fn options(
        &self,
        found: Option<&crate::explore::Reported>,
        seed: u64,
        dir: PathBuf,
    ) -> anyhow::Result<crate::explore::Options> {
        let kubernetes: KubeVersion = match (&self.kubernetes, found) {
            (Some(k), _) => k.parse()?,
            (None, Some(r)) => r.kubernetes.parse()?,
            (None, None) => crate::toolchain::versions::DEFAULT_KUBERNETES.parse()?,
        };
        let controller: crate::controller::ControllerRef = match (&self.controller, found) {
            (Some(c), _) => c.parse()?,
            (None, Some(r)) => r.controller.parse()?,
            (None, None) => crate::controller::ControllerRef::default_ref(),
        };
        crate::explore::select(&self.kinds)?;
        let mut cluster = BTreeMap::new();
        if let Some(name) = &self.profile {
            let profiles = crate::run::cluster_profiles(&crate::suites::all(), kubernetes);
            let Some(p) = profiles.iter().find(|p| &p.name == name) else {
                anyhow::bail!(
                    "--profile {name}: the catalog has no such cluster profile at Kubernetes \
                     {kubernetes}; it has: {}",
                    profiles
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            };
            cluster = p.feature_gates.clone();
        }
        cluster
            .extend(crate::cluster::parse_gates(&self.feature_gates).context("--feature-gates")?);
        let mut gates = crate::explore::Gates {
            cluster,
            controller: crate::cluster::parse_gates(&self.controller_gates)
                .context("--controller-gates")?,
        };
        if let Some(r) = found {
            if self.feature_gates.is_empty() && self.profile.is_none() {
                gates.cluster = r.gates.cluster.clone();
            }
            if self.controller_gates.is_empty() {
                gates.controller = r.gates.controller.clone();
            }
        }
        if self.parallel == 0 {
            anyhow::bail!("--parallel must be at least 1");
        }
        Ok(crate::explore::Options {
            kubernetes,
            kinds: self.kinds.clone(),
            seed,
            budget: self.budget,
            modes: self
                .modes
                .iter()
                .map(|m| match m.as_str() {
                    "admission" => crate::explore::trial::Mode::Admission,
                    _ => crate::explore::trial::Mode::Behaviour,
                })
                .collect(),
            perturbations: crate::explore::trial::Class::parse_list(&self.perturbations)
                .map_err(|e| anyhow::anyhow!("--perturbations: {e}"))?,
            parallel: self.parallel,
            settle: self.settle,
            confirm: 3,
            shrink_runs: self.shrink_runs,
            shrink_share: self.shrink_share,
            dir,
            baseline: match self.baseline.as_deref() {
                Some(b) if b.contains('@') => Some(b.parse()?),
                Some(tag) => Some(format!("{}@{tag}", controller.kind.name()).parse()?),
                None => None,
            },
            controller,
            gates,
        })
    }
}

/// Parses `90s`, `30m`, `1h` or plain seconds.
/// A share between 0 and 1 (`0.25`), or a percentage (`25%`).
pub fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let share = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a share like 0.25 or 25%"))?;
    if !(0.0..=1.0).contains(&share) {
        return Err(format!("`{s}` is not between 0 and 1 (0% and 100%)"));
    }
    Ok(share)
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
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
pub struct Selection {
    /// Only these suites (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub suite: Vec<String>,
    /// Only scenarios whose name contains one of these (repeatable).
    #[arg(long)]
    pub focus: Vec<String>,
    /// Not scenarios whose name contains one of these (repeatable).
    #[arg(long)]
    pub skip: Vec<String>,
    /// Only scenarios with one of these labels (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Run chainsaw tests (`chainsaw.kyverno.io/v1alpha1` Test) instead of the catalog: test
    /// files, or directories searched for chainsaw-test.yaml (repeatable). Each test is a
    /// scenario `<suite>/<test name>` (suite `chainsaw` unless its `harness.io/suite`
    /// annotation names one), with the requirements of its `harness.io/` annotations. chainsaw
    /// itself (built at the harness's pinned release) runs each test against the cell.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub chainsaw: Vec<PathBuf>,
    /// With --chainsaw: chainsaw's configuration file (a `Configuration`, as chainsaw's
    /// `--config`), e.g. a namespace template or default timeouts.
    #[arg(long = "chainsaw-config", value_name = "FILE", requires = "chainsaw")]
    pub chainsaw_config: Option<PathBuf>,
    /// With --chainsaw: values files for the tests' `$values` (as chainsaw's `--values`;
    /// repeatable).
    #[arg(long = "chainsaw-values", value_name = "FILE", requires = "chainsaw")]
    pub chainsaw_values: Vec<PathBuf>,
    /// With --chainsaw: another flag of `chainsaw test`, passed as given (repeatable), e.g.
    /// --chainsaw-flag=--remarshal.
    #[arg(
        long = "chainsaw-flag",
        value_name = "FLAG",
        requires = "chainsaw",
        allow_hyphen_values = true
    )]
    pub chainsaw_flags: Vec<String>,
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
    /// images the suite names are stand-ins (busybox and a small web server; see
    /// docs/controllers/upstream-e2e.md).
    #[arg(long = "upstream-real-nodes", value_name = "N", default_value_t = 0)]
    pub upstream_real_nodes: usize,
    /// With --upstream-e2e: run the suite in N parallel Ginkgo processes (the `ginkgo`
    /// command, built at the suite's Ginkgo version), as upstream's CI does with `ginkgo -p`
    /// (4 processes on its 4-CPU runners); Serial specs still run alone, at the end.
    #[arg(long = "upstream-procs", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=32))]
    pub upstream_procs: u16,
}

impl Selection {
    /// The selection as the library takes it.
    pub fn selection(&self) -> crate::run::select::Selection {
        crate::run::select::Selection {
            suites: self.suite.clone(),
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            labels: self.labels.clone(),
            chainsaw: self.chainsaw.clone(),
            chainsaw_settings: crate::chainsaw::Settings {
                config: self.chainsaw_config.clone(),
                values: self.chainsaw_values.clone(),
                flags: self.chainsaw_flags.clone(),
            },
            upstream_e2e: self.upstream_e2e,
            upstream_e2e_from: self.upstream_e2e_from.clone(),
            upstream_real_nodes: self.upstream_real_nodes,
            upstream_procs: self.upstream_procs,
        }
    }
}

#[derive(Debug, Args)]
pub struct CoverageArgs {
    /// The controller whose APIs are counted (default: the one the report's run tested).
    #[arg(long, value_name = "NAME@TAG")]
    pub controller: Option<String>,
    #[command(flatten)]
    pub select: Selection,
    /// The run's report.json to read what the scenarios sent from.
    #[arg(long, value_name = "REPORT_JSON")]
    pub from: Option<PathBuf>,
    /// Where reports are (`<dir>/latest/report.json` is read unless --from names one).
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
    /// Print the coverage as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubernetes version of the cell.
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    pub kubernetes: String,
    /// Controller under test.
    #[arg(long, default_value_t = ControllerRef::default_ref().to_string(), value_name = "NAME@TAG")]
    pub controller: String,
    #[command(flatten)]
    pub select: Selection,
    /// List the selected scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Print the plan (clusters, gates, scenarios) and exit without starting anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Run every scenario N times, one time after another (flake hunting); the summary then
    /// prints each scenario's failure rate.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    #[command(flatten)]
    pub flakes: FlakeArgs,
    /// Scenarios at once per cluster (they mostly wait on the controller).
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// Clusters at once (the plan has one per profile: Kubernetes feature gates and controller
    /// gates); each is brought up, used and removed on its own.
    #[arg(long, default_value_t = 2)]
    pub clusters_parallel: usize,
    /// Leave a cluster running if one of its scenarios failed (end it with `cluster down`).
    #[arg(long)]
    pub keep_cluster_on_failure: bool,
    /// Where reports go (`<dir>/<run-id>/`, `<dir>/latest`).
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
    /// A ledger of known bugs to use instead of the checked-in suites/ledger.yaml.
    #[arg(long)]
    pub ledger: Option<PathBuf>,
    /// An earlier run's report.json whose times order the work longest first (clusters, and
    /// scenarios in each); default: the newest report in --report-dir, if there is one.
    #[arg(long, value_name = "REPORT_JSON")]
    pub costs: Option<PathBuf>,
    #[command(flatten)]
    pub provider: ProviderArgs,
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
pub struct ProviderArgs {
    /// Where the cluster comes from.
    #[arg(long, value_enum, default_value_t = ProviderKind::Local)]
    pub provider: ProviderKind,
    /// Kubeconfig of the existing cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the existing cluster to use (required with --provider existing; the
    /// current context is never used implicitly).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The API server URL the context must point at; the run is refused if it points
    /// elsewhere.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// kind binary to use instead of building the kind release the node image belongs to.
    #[arg(long, value_name = "PATH")]
    pub kind_binary: Option<PathBuf>,
    /// kind on a node image assembled here from Debian packages and Go modules (no registry
    /// needed), in a private Docker daemon unless DOCKER_HOST names one.
    #[arg(long)]
    pub kind_offline: bool,
}

impl ProviderArgs {
    /// The provider as the library takes it.
    pub fn config(&self) -> ProviderConfig {
        ProviderConfig {
            kind: match self.provider {
                ProviderKind::Local => any::ProviderKind::Local,
                ProviderKind::Kind => any::ProviderKind::Kind,
                ProviderKind::K3s => any::ProviderKind::K3s,
                ProviderKind::Existing => any::ProviderKind::Existing,
            },
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            server: self.server.clone(),
            kind_binary: self.kind_binary.clone(),
            kind_offline: self.kind_offline,
        }
    }
}

/// Retries and what a flaky result does.
#[derive(Debug, Clone, Copy, Args)]
pub struct FlakeArgs {
    /// Run a scenario whose result fails the run up to N more times, each in a fresh
    /// namespace; a pass after a failure is FLAKY (reported as such, with every failed try).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub retries: usize,
    /// Fail the run (exit 1) when a result is flaky.
    #[arg(long, requires = "retries")]
    pub fail_on_flaky: bool,
}

#[derive(Debug, Args)]
pub struct SelectArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Scenarios at once per cluster.
    #[arg(long, default_value_t = 2)]
    pub parallel: usize,
    /// Cells (Kubernetes version x release) at once, each with its own clusters.
    #[arg(long, default_value_t = 2)]
    pub cells_parallel: usize,
    #[command(flatten)]
    pub flakes: FlakeArgs,
    /// Where reports go (`<dir>/<id>/`, `<dir>/latest`).
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
}

impl SelectArgs {
    /// The selection and pace as the library takes them.
    pub fn select(&self) -> crate::matrix::drive::Select {
        crate::matrix::drive::Select {
            selection: self.selection.selection(),
            parallel: self.parallel,
            cells_parallel: self.cells_parallel,
            retries: self.flakes.retries,
            fail_on_flaky: self.flakes.fail_on_flaky,
            report_dir: self.report_dir.clone(),
        }
    }
}

impl ShardArgs {
    /// The sharding as the library takes it.
    pub fn options(&self) -> crate::matrix::drive::ShardOptions {
        crate::matrix::drive::ShardOptions {
            shard: self.shard,
            costs: self.costs.clone(),
            plan: self.plan,
            binaries: self.binaries,
            target_minutes: self.target_minutes,
        }
    }
}

impl MatrixArgs {
    /// The request as the library takes it.
    pub fn request(&self) -> crate::matrix::drive::Request {
        crate::matrix::drive::Request {
            kubernetes: self.kubernetes.clone(),
            controllers: self.controllers.clone(),
            matrix_file: self.matrix_file.clone(),
            select: self.select.select(),
            shards: self.shards.options(),
            explore: self.explore.map(|budget| crate::explore::Exploring {
                budget,
                kinds: self.explore_kinds.clone(),
            }),
        }
    }
}

impl QualifyArgs {
    /// The request as the library takes it.
    pub fn request(&self) -> crate::qualify::Request {
        crate::qualify::Request {
            candidate: self.candidate.clone(),
            baseline: self.baseline.clone(),
            kubernetes: self.kubernetes.clone(),
            select: self.select.select(),
            shards: self.shards.options(),
            explore: self.explore.map(|budget| crate::explore::Exploring {
                budget,
                kinds: self.explore_kinds.clone(),
            }),
        }
    }
}

impl RunArgs {
    /// The request as the library takes it.
    pub fn request(&self) -> crate::run::drive::Request {
        crate::run::drive::Request {
            kubernetes: self.kubernetes.clone(),
            controller: self.controller.clone(),
            select: self.select.selection(),
            list: self.list,
            dry_run: self.dry_run,
            repeat: self.repeat,
            retries: self.flakes.retries,
            fail_on_flaky: self.flakes.fail_on_flaky,
            parallel: self.parallel,
            clusters_parallel: self.clusters_parallel,
            keep_cluster_on_failure: self.keep_cluster_on_failure,
            report_dir: self.report_dir.clone(),
            ledger: self.ledger.clone(),
            costs: self.costs.clone(),
            provider: self.provider.config(),
        }
    }
}

/// Splitting a matrix over CI runners.
#[derive(Debug, Args)]
pub struct ShardArgs {
    /// Run only shard K of N: the cells (and upgrade checks) split over N shards by expected
    /// cost, the same way on every runner; merge the outputs with `harness report merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<crate::matrix::Shard>,
    /// An earlier run's report.json or matrix.json to take expected costs from (medians of
    /// scenario and cluster bring-up times); without it, estimates.
    #[arg(long, value_name = "PATH")]
    pub costs: Option<PathBuf>,
    /// Print the split (every unit with its expected time and shard, each shard's total, and
    /// how many shards keep each under --target-minutes) and run nothing.
    #[arg(long, conflicts_with = "binaries")]
    pub plan: bool,
    /// Print the binaries the shard (or the whole matrix) needs, comma-separated (a cache
    /// key), and run nothing.
    #[arg(long)]
    pub binaries: bool,
    /// The wall time a shard should stay under, for --plan.
    #[arg(long, default_value_t = 30, value_name = "MINUTES")]
    pub target_minutes: u64,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Kubernetes versions: a range like 1.27..1.37 (the supported versions inside it) or a
    /// list like 1.29,1.32 (default: from the matrix file).
    #[arg(long = "k8s")]
    pub kubernetes: Option<String>,
    /// Releases, e.g. openkruise@v1.6.0,v1.7.0,v1.9.0 (default: from the matrix file).
    #[arg(long = "controller")]
    pub controllers: Option<String>,
    /// The matrix file with the defaults.
    #[arg(long, default_value = "ci/matrix.yaml")]
    pub matrix_file: PathBuf,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub shards: ShardArgs,
    /// Also explore every cell for this long each (`20m`; as `harness explore` does, every
    /// kind unless --explore-kinds), after the cells ran, one cell after another with the same
    /// seed, so that the same trials run on every cell: each cell's findings go under the
    /// run's directory (`explore/<cell>/`), into matrix.json and the grid, and are listed
    /// after it. They are findings to triage and leave the exit code as the results say. Not
    /// with --shard.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub explore: Option<Duration>,
    /// The kinds --explore explores (comma-separated; default: every one).
    #[arg(long = "explore-kinds", value_delimiter = ',', requires = "explore")]
    pub explore_kinds: Vec<String>,
}

#[derive(Debug, Args)]
pub struct QualifyArgs {
    /// The release candidate, e.g. openkruise@v1.9.0.
    #[arg(long)]
    pub candidate: String,
    /// The release it must not regress from, e.g. v1.8.3 (the candidate's controller) or
    /// openkruise@v1.8.3.
    #[arg(long)]
    pub baseline: String,
    /// Kubernetes versions to qualify on (range or list).
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    pub kubernetes: String,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub shards: ShardArgs,
    /// Also explore the candidate against the baseline for this long (`30m`; as `harness
    /// explore --baseline` does, every kind unless --explore-kinds, on the first Kubernetes
    /// version): its findings (where the candidate answers or settles otherwise than the
    /// baseline, O5, and every other oracle's) go under the run's directory (`explore/`) and
    /// into qualify.json, listed after the verdict. They are differences to triage and leave
    /// the exit code as the verdict says. Not with --shard.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub explore: Option<Duration>,
    /// The kinds --explore explores (comma-separated; default: every one).
    #[arg(long = "explore-kinds", value_delimiter = ',', requires = "explore")]
    pub explore_kinds: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
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
    /// What changed from one run to another: new failures, fixes, new flakes, other changes
    /// of state, scenarios more than 20 % slower (and over 5 s), scenarios added or removed;
    /// printed as Markdown (also appended to $GITHUB_STEP_SUMMARY when it is set). Exit 1 on a
    /// new failure or a new flake.
    Diff {
        /// The earlier run: its report.json, a matrix's matrix.json, or its directory.
        #[arg(value_name = "BEFORE")]
        before: PathBuf,
        /// The later run: its report.json, a matrix's matrix.json, or its directory.
        #[arg(value_name = "AFTER")]
        after: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
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
pub struct ProfileArgs {
    /// Kubernetes version (minor like 1.32, or the pinned patch like v1.32.5).
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    pub kubernetes: String,
    /// Feature gates for the control plane, e.g. InPlacePodVerticalScaling=true (repeatable,
    /// comma-separated).
    #[arg(long = "feature-gates", value_name = "GATE=BOOL")]
    pub feature_gates: Vec<String>,
    /// apiserver --runtime-config entries, e.g. api/all=true (repeatable, comma-separated).
    #[arg(long = "runtime-config", value_name = "KEY=VALUE")]
    pub runtime_config: Vec<String>,
    /// Number of fake nodes.
    #[arg(long, default_value_t = 4)]
    pub nodes: usize,
    /// Zones the nodes are spread over (topology.kubernetes.io/zone), round-robin.
    #[arg(long, value_delimiter = ',', default_value = "zone-a,zone-b")]
    pub zones: Vec<String>,
    /// Extra label for every node (repeatable).
    #[arg(long = "node-label", value_name = "KEY=VALUE")]
    pub node_labels: Vec<String>,
    /// Number of real nodes beside the fake ones: a kubelet and a containerd each, running
    /// real containers (local provider; needs root, and Debian's containerd, runc,
    /// containernetworking-plugins, iptables and iproute2, which the harness installs when
    /// they are missing). Real nodes are tainted `harness.io/real-node=true:NoSchedule` and
    /// labelled `harness.io/node=real`.
    #[arg(long = "real-nodes", default_value_t = 0)]
    pub real_nodes: usize,
    /// How long an in-place container restart (new image) takes on the fake nodes, in
    /// milliseconds (each takes up to half as long again); the default is what the harness's
    /// real nodes take.
    #[arg(long = "in-place-restart-ms", value_name = "MS",
          default_value_t = crate::cluster::DEFAULT_IN_PLACE_RESTART_MS)]
    pub in_place_restart_ms: u64,
    /// How long a deleted pod's containers take to exit on SIGTERM on the fake nodes, in
    /// milliseconds (the grace period caps it; a pod's `harness.kwok/stop-seconds` annotation
    /// sets its own).
    #[arg(long = "pod-stop-ms", value_name = "MS",
          default_value_t = crate::cluster::DEFAULT_STOP_MS)]
    pub pod_stop_ms: u64,
    /// A YAML file of objects to create once the cluster is up, before the controller starts
    /// (what a controller reads only at start, e.g. OpenKruise's `kruise-configuration`
    /// ConfigMap in `kruise-system`); missing namespaces are made first (repeatable).
    #[arg(long = "seed", value_name = "FILE")]
    pub seed: Vec<PathBuf>,
}

impl ProfileArgs {
    pub fn profile(&self) -> anyhow::Result<Profile> {
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
pub struct UpArgs {
    /// Cluster name (also its directory name).
    #[arg(long, default_value = "harness")]
    pub name: String,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Fixed apiserver port on 127.0.0.1 (default: a free one).
    #[arg(long)]
    pub apiserver_port: Option<u16>,
    /// Return once ready and leave the cluster running; end it with `harness cluster down`.
    #[arg(long)]
    pub detach: bool,
    /// Keep the cluster directory (logs, certificates) after it stops.
    #[arg(long)]
    pub keep_dir: bool,
    /// Print the processes or commands that would run, with their arguments, and start
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub controller: ControllerArgs,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Controller under test to install, e.g. openkruise@v1.9.0.
    #[arg(long = "controller", value_name = "NAME@TAG")]
    pub controller: Option<String>,
    /// Feature gates for the controller manager, e.g.
    /// RecreatePodWhenChangeVCTInCloneSetGate=true (repeatable, comma-separated).
    #[arg(long = "controller-gates", value_name = "GATE=BOOL")]
    pub controller_gates: Vec<String>,
}

impl ControllerArgs {
    /// The controller to install with its gates, if one is named.
    pub fn choice(&self) -> anyhow::Result<Option<crate::up::ControllerChoice>> {
        crate::up::ControllerChoice::parse(self.controller.as_deref(), &self.controller_gates)
    }
}

impl UpArgs {
    /// The request as the library takes it.
    pub fn request(&self) -> crate::up::Request {
        crate::up::Request {
            name: self.name.clone(),
            apiserver_port: self.apiserver_port,
            detach: self.detach,
            keep_dir: self.keep_dir,
            provider: self.provider.config(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BundleCommand {
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
pub enum ToolchainCommand {
    /// Build (or find in the cache) the binaries for Kubernetes versions and kwok.
    Build {
        /// Kubernetes versions (default: the default version); `all` for every supported one.
        #[arg(long = "k8s", value_delimiter = ',')]
        kubernetes: Vec<String>,
        /// Also build kwokctl (used by the bring-up benchmark).
        #[arg(long)]
        kwokctl: bool,
        /// Also build chainsaw (runs `--chainsaw` tests and the catalog's declarative ones).
        #[arg(long)]
        chainsaw: bool,
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
pub enum KindCommand {
    /// Build (or find in the cache) the kind node image of a Kubernetes version, offline:
    /// Debian's root file system, the Kubernetes binaries and the images kubeadm asks for
    /// preloaded, as a docker archive. Prints its tag and path (`docker load -i <path>`).
    /// Needs root and Go; a cold build takes minutes.
    NodeImage {
        /// Kubernetes version.
        #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
        kubernetes: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
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
        /// Also time the kind provider on the node image the harness assembles
        /// (`--provider kind --kind-offline`: a private Docker daemon, the same profile; root),
        /// in the same runs, to nodes Ready with their Service rules and image registry.
        #[arg(long)]
        kind: bool,
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
    /// Count flaky tests: run integration test targets of the harness package over and over
    /// (and/or the README's test command in fresh clones), count each test's results, print a
    /// per-test table and write flakes.json and flakes.md (date, commit, machine and the
    /// command that reproduces them). Exit 1 if any test failed in any run (or a run failed
    /// outside its tests), 0 otherwise. After a stopped bench, `harness gc` removes what its
    /// killed tests left.
    Flakes(FlakesArgs),
    /// Exploration's pace side by side: each binary (harness executables; default: this one)
    /// runs `explore` with the same budget, seed and flags, the binaries taking turns; prints
    /// and writes bench-explore.md/.json with, per binary, the medians of behaviour trials,
    /// distinct trials and their rate a minute (and its ratio to the first binary), the
    /// seconds settling, shrinking, confirming and bringing up, and the CPU seconds of the
    /// run's processes by class (apiserver, etcd, manager, harness, ...). Exit 1 when a run
    /// failed.
    Explore(ExploreBenchArgs),
    /// The rediscovery benchmark: explore each release of the list (suites/rediscovery.yaml:
    /// known bugs, the release that has each and the one that fixed it, the finding that
    /// counts) with `explore`'s defaults, the same budget and seed, one after another; print
    /// and write rediscovery.md/.json with each bug found or not on its bad release (after how
    /// long) and whether its fixed release is clean. Exit 1 when an exploration failed or a
    /// fixed release showed its bug.
    Rediscovery(RediscoveryArgs),
    /// Time from a ready cluster to a ready controller bundle (CRDs established, webhooks
    /// patched and answering, smoke CloneSet reconciled).
    Bundle {
        /// Runs.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Controller, e.g. openkruise@v1.9.0.
        #[arg(long = "controller", default_value_t = ControllerRef::default_ref().to_string())]
        controller: String,
    },
}

/// The flags of `bench explore`.
#[derive(Debug, Args)]
pub struct ExploreBenchArgs {
    /// A harness executable to run (repeat to compare; the first is the reference of the
    /// ratio). Default: this one.
    #[arg(long = "binary", value_name = "PATH")]
    pub binaries: Vec<PathBuf>,
    /// Runs of each binary (interleaved).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub runs: usize,
    /// Each exploration's budget.
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub budget: Duration,
    /// Each exploration's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the report and each run's log and exploration go [default:
    /// reports/bench-explore-<time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// More flags of `explore` after `--`, the same for every run (e.g. `-- --kinds
    /// CloneSet`).
    #[arg(last = true, value_name = "EXPLORE_FLAGS")]
    pub explore_args: Vec<String>,
}

impl ExploreBenchArgs {
    /// The bench's request.
    pub fn request(self) -> crate::bench::explore::Request {
        crate::bench::explore::Request {
            binaries: self.binaries,
            runs: self.runs,
            budget: self.budget,
            seed: self.seed,
            explore_args: self.explore_args,
            out: self.out,
        }
    }
}

/// The flags of `bench rediscovery`.
#[derive(Debug, Args)]
pub struct RediscoveryArgs {
    /// The list of known bugs [default: suites/rediscovery.yaml, built in].
    #[arg(long, value_name = "FILE")]
    pub list: Option<PathBuf>,
    /// Each exploration's budget.
    #[arg(long, default_value = crate::bench::rediscovery::DEFAULT_BUDGET, value_parser = parse_duration)]
    pub budget: Duration,
    /// Each exploration's seed.
    #[arg(long, default_value_t = crate::bench::rediscovery::DEFAULT_SEED)]
    pub seed: u64,
    /// Only these releases (comma-separated; default: every release the list names).
    #[arg(long, value_delimiter = ',', value_name = "TAGS")]
    pub releases: Vec<String>,
    /// Where the report and each exploration and its log go [default:
    /// reports/rediscovery-<time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the plan (each release's command, the bugs to find and to miss there) and run
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// More flags of `explore` after `--`, the same for every exploration (e.g. `-- --profile
    /// InPlacePodVerticalScaling`).
    #[arg(last = true, value_name = "EXPLORE_FLAGS")]
    pub explore_args: Vec<String>,
}

impl RediscoveryArgs {
    /// The bench's request.
    pub fn request(self) -> crate::bench::rediscovery::Request {
        crate::bench::rediscovery::Request {
            list: self.list,
            budget: self.budget,
            seed: self.seed,
            releases: self.releases,
            out: self.out,
            dry_run: self.dry_run,
            explore_args: self.explore_args,
        }
    }
}

/// The flags of `bench flakes`.
#[derive(Debug, Args)]
pub struct FlakesArgs {
    /// An integration test target of the harness package to run (`harness/tests/NAME.rs`,
    /// e.g. upstream_e2e); repeat the flag for several. Each run is `cargo test -p harness
    /// --test NAME -- --test-threads=T` in the workspace this harness was built from.
    #[arg(long = "test", value_name = "NAME")]
    pub tests: Vec<String>,
    /// How many times to run each --test target (interleaved: run 1 of each target, then run
    /// 2, ...); each target is built once first.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub runs: usize,
    /// libtest's --test-threads for each --test run (default: the CPUs available, libtest's
    /// own default).
    #[arg(long = "test-threads", value_name = "T")]
    pub test_threads: Option<usize>,
    /// Keep every CPU busy during the runs with one busy-looping thread per CPU (stopped when
    /// the runs end, also on Ctrl-C or an error), as on a loaded CI runner.
    #[arg(long)]
    pub load: bool,
    /// Also run the README's test command (`cargo test --workspace`, as `.ci/run` does) K
    /// times, each in a fresh `git clone --no-local` of the workspace's HEAD (committed
    /// changes only), removed afterwards. The clone builds into CARGO_TARGET_DIR when that is
    /// set, else into its own target directory (a cold build).
    #[arg(long = "fresh-clones", value_name = "K", default_value_t = 0)]
    pub fresh_clones: usize,
    /// Where flakes.json, flakes.md and each run's log (logs/) go [default:
    /// reports/flakes-<time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl FlakesArgs {
    /// The bench's request.
    pub fn request(self) -> crate::bench::flakes::Request {
        crate::bench::flakes::Request {
            tests: self.tests,
            runs: self.runs,
            test_threads: self.test_threads,
            load: self.load,
            fresh_clones: self.fresh_clones,
            out: self.out,
        }
    }
}

/// `harness chainsaw ...`.
#[derive(Debug, Subcommand)]
pub enum ChainsawCommand {
    /// Read chainsaw tests (files, or directories searched for chainsaw-test.yaml) and say for
    /// each file whether it can run: its harness section read, and chainsaw's own check of
    /// the format (`chainsaw lint test`); exit 1 if any cannot. Builds chainsaw if it is not
    /// cached; no cluster is started.
    Check {
        /// Test files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Command {
        Cli::try_parse_from(std::iter::once("harness").chain(args.iter().copied()))
            .unwrap()
            .command
    }

    #[test]
    fn durations_are_seconds_minutes_or_hours() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 30m "), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "m", "1d", "1.5h", "-1s"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("is not a duration like 90s"), "{bad}: {e}");
        }
    }

    #[test]
    fn explore_flags_become_the_options() {
        let Command::Explore(args) = parse(&["explore", "--modes", "admission", "--seed", "7"])
        else {
            panic!("explore");
        };
        let o = args.options(None, 7, "out".into()).unwrap();
        assert_eq!(o.kubernetes, KubeVersion::default_version());
        assert_eq!(o.controller.to_string(), "openkruise@v1.9.0");
        assert_eq!(o.modes.len(), 1);
        assert_eq!((o.seed, o.parallel, o.confirm), (7, 2, 3));
        assert_eq!(o.budget, Duration::from_secs(600));
        let Command::Explore(args) = parse(&["explore", "--parallel", "0"]) else {
            panic!("explore");
        };
        let e = args.options(None, 1, "out".into()).unwrap_err();
        assert_eq!(e.to_string(), "--parallel must be at least 1");
        // A bare baseline tag is the controller's own.
        for baseline in ["v1.8.3", "openkruise@v1.8.3"] {
            let Command::Explore(args) = parse(&["explore", "--baseline", baseline]) else {
                panic!("explore");
            };
            let o = args.options(None, 1, "out".into()).unwrap();
            assert_eq!(o.baseline.unwrap().to_string(), "openkruise@v1.8.3");
        }
        let Command::Explore(args) = parse(&[
            "explore",
            "--feature-gates",
            "InPlacePodVerticalScaling=true",
            "--controller-gates",
            "A=true,B=false",
        ]) else {
            panic!("explore");
        };
        let o = args.options(None, 1, "out".into()).unwrap();
        assert_eq!(
            o.gates.to_string(),
            "cluster InPlacePodVerticalScaling=true; controller A=true,B=false"
        );
        let Command::Explore(args) = parse(&["explore", "--feature-gates", "X=maybe"]) else {
            panic!("explore");
        };
        let e = format!("{:#}", args.options(None, 1, "out".into()).unwrap_err());
        assert!(
            e.contains("--feature-gates") && e.contains("X=maybe"),
            "{e}"
        );
        let Command::Explore(args) = parse(&["explore", "--profile", "InPlacePodVerticalScaling"])
        else {
            panic!("explore");
        };
        let o = args.options(None, 1, "out".into()).unwrap();
        assert_eq!(
            o.gates.to_string(),
            "cluster InPlacePodVerticalScaling=true"
        );
        let Command::Explore(args) = parse(&["explore", "--profile", "nope"]) else {
            panic!("explore");
        };
        let e = args.options(None, 1, "out".into()).unwrap_err().to_string();
        assert!(
            e.contains("no such cluster profile") && e.contains("default"),
            "{e}"
        );
        // A replay brings up the finding's cell: its release, Kubernetes and gates.
        let step = serde_json::json!({"step": "create", "set": {}});
        let trial = serde_json::json!({"subject": "CloneSet", "mode": "behaviour", "seed": 1,
            "index": 0, "steps": [step]});
        let found: crate::explore::Reported = serde_json::from_value(serde_json::json!({
            "finding": {"oracle": "O2-convergence", "subject": "CloneSet", "key": "k",
                "observed": "o", "expected": "e"},
            "original": trial, "trial": trial, "reproduced": 3, "confirm_runs": 3,
            "stable": true, "first_seen": 1.0, "dir": "d", "controller": "openkruise@v1.6.0",
            "kubernetes": "1.29", "gates": {"cluster": {"InPlacePodVerticalScaling": true}}}))
        .unwrap();
        let Command::Explore(args) = parse(&["explore", "--replay", "d"]) else {
            panic!("explore");
        };
        let o = args.options(Some(&found), 1, "out".into()).unwrap();
        assert_eq!(o.controller.to_string(), "openkruise@v1.6.0");
        assert_eq!(
            o.gates.to_string(),
            "cluster InPlacePodVerticalScaling=true"
        );
        let Command::Explore(args) = parse(&["explore", "--replay", "d", "--profile", "default"])
        else {
            panic!("explore");
        };
        let o = args.options(Some(&found), 1, "out".into()).unwrap();
        assert!(o.gates.is_empty(), "{}", o.gates);
    }

    #[test]
    fn run_flags_become_the_run_request() {
        let Command::Run(args) = parse(&[
            "run",
            "--k8s",
            "1.33",
            "--suite",
            "a,b",
            "--focus",
            "x",
            "--retries",
            "2",
            "--fail-on-flaky",
            "--provider",
            "existing",
            "--context",
            "ctx",
            "--upstream-procs",
            "4",
        ]) else {
            panic!("run");
        };
        let r = args.request();
        assert_eq!(r.kubernetes, "1.33");
        assert_eq!(r.controller, "openkruise@v1.9.0");
        assert_eq!(r.select.suites, ["a", "b"]);
        assert_eq!(r.select.focus, ["x"]);
        assert_eq!(r.select.upstream_procs, 4);
        assert_eq!((r.retries, r.fail_on_flaky), (2, true));
        assert_eq!((r.parallel, r.clusters_parallel, r.repeat), (4, 2, 1));
        assert_eq!(r.provider.kind, any::ProviderKind::Existing);
        assert_eq!(r.provider.context.as_deref(), Some("ctx"));
        assert_eq!(r.report_dir, PathBuf::from("reports"));
    }

    #[test]
    fn matrix_and_qualify_flags_become_their_requests() {
        let Command::Matrix(args) = parse(&[
            "matrix",
            "--k8s",
            "1.29,1.32",
            "--shard",
            "2/3",
            "--plan",
            "--cells-parallel",
            "3",
        ]) else {
            panic!("matrix");
        };
        let r = args.request();
        assert_eq!(r.kubernetes.as_deref(), Some("1.29,1.32"));
        assert_eq!(r.controllers, None);
        assert_eq!(r.matrix_file, PathBuf::from("ci/matrix.yaml"));
        assert_eq!(
            r.shards.shard.map(|s| s.to_string()).as_deref(),
            Some("2/3")
        );
        assert!(r.shards.plan && !r.shards.binaries);
        assert_eq!((r.select.parallel, r.select.cells_parallel), (2, 3));
        let Command::Qualify(args) = parse(&[
            "qualify",
            "--candidate",
            "openkruise@v1.9.0",
            "--baseline",
            "v1.8.3",
            "--upstream-e2e",
        ]) else {
            panic!("qualify");
        };
        let r = args.request();
        assert_eq!(
            (r.candidate.as_str(), r.baseline.as_str()),
            ("openkruise@v1.9.0", "v1.8.3")
        );
        assert!(r.select.selection.upstream_e2e);
        assert_eq!(r.shards.target_minutes, 30);
    }

    #[test]
    fn cluster_up_flags_become_a_profile_and_a_request() {
        let Command::Cluster(ClusterCommand::Up(args)) = parse(&[
            "cluster",
            "up",
            "--name",
            "c1",
            "--feature-gates",
            "InPlacePodVerticalScaling=true",
            "--nodes",
            "2",
            "--provider",
            "kind",
            "--kind-binary",
            "/opt/kind",
        ]) else {
            panic!("cluster up");
        };
        let p = args.profile.profile().unwrap();
        assert_eq!(p.kubernetes, KubeVersion::default_version());
        assert_eq!(p.nodes.len(), 2);
        let r = args.request();
        assert_eq!(r.name, "c1");
        assert_eq!(r.provider.kind, any::ProviderKind::Kind);
        assert_eq!(r.provider.kind_binary, Some(PathBuf::from("/opt/kind")));
        assert!(r.validate().is_ok());
    }

    #[test]
    fn a_share_is_a_fraction_or_a_percentage_between_none_and_all() {
        assert_eq!(parse_share("0.25"), Ok(0.25));
        assert_eq!(parse_share("50%"), Ok(0.5));
        assert_eq!(parse_share("0"), Ok(0.0));
        assert!(parse_share("1.5").unwrap_err().contains("between 0 and 1"));
        assert!(parse_share("-0.1").is_err());
        assert!(
            parse_share("a quarter")
                .unwrap_err()
                .contains("0.25 or 25%")
        );
    }

    #[test]
    fn rediscovery_flags_become_a_request() {
        let Command::Bench(BenchCommand::Rediscovery(args)) = parse(&[
            "bench",
            "rediscovery",
            "--releases",
            "v1.7.0,v1.8.0",
            "--dry-run",
            "--",
            "--kinds",
            "CloneSet",
        ]) else {
            panic!("bench rediscovery");
        };
        let r = args.request();
        assert_eq!(r.releases, ["v1.7.0", "v1.8.0"]);
        assert_eq!(r.budget, Duration::from_secs(1800));
        assert_eq!(r.seed, crate::bench::rediscovery::DEFAULT_SEED);
        assert!(r.dry_run && r.list.is_none());
        assert_eq!(r.explore_args, ["--kinds", "CloneSet"]);
    }
}
