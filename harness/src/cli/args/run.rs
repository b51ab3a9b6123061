//! The flags of `harness run`, `matrix`, `qualify` and `coverage`: [`RunArgs`] is where to
//! start, with the [`Selection`] of scenarios they share and the requests they become.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{ProviderArgs, parse_duration};
use crate::controller::ControllerRef;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Command;
    use crate::cli::args::parse;
    use crate::cluster::any;

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
}
