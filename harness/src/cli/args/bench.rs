//! The flags of `harness bench`: [`BenchCommand`] is where to start, with the arguments of its
//! explore, rediscovery and flakes benchmarks and the requests they become.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::parse_duration;
use crate::controller::ControllerRef;

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
    /// Run nothing: report on explorations already made, each an `explore` run directory (or
    /// a directory holding them: its newest) given in the order to compare, the first the
    /// reference (repeat). CPU seconds are not known then.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["binaries", "runs", "explore_args"])]
    pub from: Vec<PathBuf>,
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
            from: self.from,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Command;
    use crate::cli::args::parse;

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
