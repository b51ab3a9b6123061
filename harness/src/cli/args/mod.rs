//! The command line's flags: the clap structures of every command, and their conversion into
//! what the library takes (a request of [`crate::run::drive`], [`crate::matrix::drive`],
//! [`crate::qualify`], [`crate::up`], a [`ProviderConfig`]).
//!
//! Start with [`Command`], one variant per command; the argument structures of each family of
//! commands are in a module of their own: [`mod@run`] (run, matrix, qualify, coverage),
//! [`mod@explore`], [`mod@cluster`] (the providers and `cluster`) and [`mod@bench`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

mod bench;
mod cluster;
mod explore;
mod run;

pub use self::bench::BenchCommand;
pub use self::cluster::{ClusterCommand, ControllerArgs, ProviderArgs, UpArgs};
pub use self::explore::ExploreArgs;
pub use self::run::{CoverageArgs, MatrixArgs, QualifyArgs, RunArgs};

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
    /// Work with reports: merge the outputs of a sharded matrix or qualification, compare two
    /// runs, explain an exploration's findings.
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
    /// What explains each finding of an exploration: a known bug (the rediscovery list's
    /// entry, with the ledger's range holding the release), a documented difference
    /// (suites/differences.yaml), or nothing; printed as Markdown, unexplained first. Exit 1
    /// when a finding is unexplained.
    Explain {
        /// The exploration's directory, reports/<run>/ (its explore.json).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Read the differences from this file instead of the built-in
        /// suites/differences.yaml.
        #[arg(long, value_name = "FILE")]
        differences: Option<PathBuf>,
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

/// The command `args` parse to: the argument files' tests read the command line through it.
#[cfg(test)]
fn parse(args: &[&str]) -> Command {
    Cli::try_parse_from(std::iter::once("harness").chain(args.iter().copied()))
        .unwrap()
        .command
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
