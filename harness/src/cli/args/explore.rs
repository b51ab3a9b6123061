//! The flags of `harness explore`: [`ExploreArgs`], and [`ExploreArgs::options`] is where to
//! start: it turns them into the explorer's [`crate::explore::Options`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::{parse_duration, parse_share};
use crate::toolchain::KubeVersion;

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
    /// Behaviour trials at once to start with; the number then adapts between 1 and 16 (or
    /// this, if more) to what the cell sustains: narrower when the apiserver's latency, the
    /// harness's CPU or the trials' settle times rise, wider while they stay low.
    #[arg(long, default_value_t = crate::explore::DEFAULT_PARALLEL)]
    pub parallel: usize,
    /// Cells to run behaviour trials on, each its own control plane and controller, the
    /// budget shared and each cell's width adapting as --parallel says (admission trials run
    /// on the first). Default: one per two cores of this machine, at least one.
    #[arg(long, value_name = "N")]
    pub cells: Option<usize>,
    /// How long a behaviour trial may take to settle.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Candidates minimizing one behaviour finding may run (admission findings: four times as
    /// many).
    #[arg(long, default_value_t = crate::explore::DEFAULT_SHRINK_RUNS)]
    pub shrink_runs: usize,
    /// The share of the budget that shrinking and confirming findings may take together (0 to
    /// 1); a candidate or confirming run still waiting when it is spent stops waiting there;
    /// past it, a new finding is written as it fired, and `--replay <its directory>` shrinks
    /// and confirms it.
    #[arg(long, default_value_t = crate::explore::SHRINK_SHARE, value_parser = parse_share)]
    pub shrink_share: f64,
    /// How behaviour trials are shared among the subjects: `kinds` (each kind alike, then
    /// within it each target kind or member alike, then each subject), or `subjects` (each
    /// subject alike, so a policy over twenty targets gets twenty kinds' turns).
    #[arg(long, default_value = "kinds", value_parser = ["kinds", "subjects"])]
    pub share: String,
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
    #[arg(long, value_name = "NAME", conflicts_with = "profiles")]
    pub profile: Option<String>,
    /// Explore the catalog's cluster profiles too: `all` explores a cell on each profile the
    /// catalog defines at this Kubernetes version (each the control-plane gates some
    /// scenarios need; the default profile first, with half the budget), so that what a
    /// release does only on such a cluster is reached; with `--gate-sets pairwise`, each
    /// profile at the release's default gates comes before any gate set. `none`: the cell of
    /// --profile and --feature-gates alone
    #[arg(long, default_value = "none", value_parser = ["none", "all"])]
    pub profiles: String,
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
    /// The cluster profiles `--profiles` asks for at `kubernetes` (none for `none`): the
    /// catalog's, the default one first.
    pub fn cell_profiles(&self, kubernetes: KubeVersion) -> Vec<crate::explore::gates::Profile> {
        if self.profiles != "all" {
            return vec![];
        }
        let mut out: Vec<crate::explore::gates::Profile> =
            crate::run::cluster_profiles(&crate::suites::all(), kubernetes)
                .into_iter()
                .map(|p| crate::explore::gates::Profile {
                    name: p.name,
                    gates: p.feature_gates,
                })
                .collect();
        out.sort_by_key(|p| !p.gates.is_empty());
        out
    }

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
        if self.cells == Some(0) {
            anyhow::bail!("--cells must be at least 1");
        }
        if self.replay.is_some() && self.profiles == "all" {
            anyhow::bail!(
                "--profiles all explores cells; a replay runs on its finding's cell (set \
                 --profile or --feature-gates to run it elsewhere)"
            );
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
            cells: self.cells.unwrap_or_else(crate::explore::default_cells),
            settle: self.settle,
            confirm: 3,
            shrink_runs: self.shrink_runs,
            shrink_share: self.shrink_share,
            share: self.share.parse()?,
            dir,
            baseline: match self.baseline.as_deref() {
                Some(b) if b.contains('@') => Some(b.parse()?),
                Some(tag) => Some(format!("{}@{tag}", controller.kind.name()).parse()?),
                None => None,
            },
            controller,
            gates,
            known: vec![],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Command;
    use crate::cli::args::parse;

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
        assert_eq!(o.cells, crate::explore::default_cells());
        let Command::Explore(args) = parse(&["explore", "--cells", "0"]) else {
            panic!("explore");
        };
        let e = args.options(None, 1, "out".into()).unwrap_err();
        assert_eq!(e.to_string(), "--cells must be at least 1");
        let Command::Explore(args) = parse(&["explore", "--cells", "3"]) else {
            panic!("explore");
        };
        assert_eq!(args.options(None, 1, "out".into()).unwrap().cells, 3);
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
    fn profiles_all_is_the_catalog_s_profiles_the_default_first() {
        let k: KubeVersion = crate::toolchain::versions::DEFAULT_KUBERNETES
            .parse()
            .unwrap();
        let Command::Explore(args) = parse(&["explore"]) else {
            panic!("explore");
        };
        assert!(args.cell_profiles(k).is_empty());
        let Command::Explore(args) = parse(&["explore", "--profiles", "all"]) else {
            panic!("explore");
        };
        let profiles = args.cell_profiles(k);
        let catalog = crate::run::cluster_profiles(&crate::suites::all(), k);
        assert_eq!(profiles.len(), catalog.len());
        assert!(profiles.len() >= 2, "{profiles:?}");
        assert!(profiles[0].gates.is_empty(), "{profiles:?}");
        assert!(
            profiles[1..].iter().all(|p| !p.gates.is_empty()),
            "{profiles:?}"
        );
        // One cell's gates or every profile's, not both; a replay runs on its finding's cell.
        assert!(
            <crate::cli::args::Cli as clap::Parser>::try_parse_from([
                "harness",
                "explore",
                "--profiles",
                "all",
                "--profile",
                "default"
            ])
            .is_err()
        );
        let Command::Explore(args) = parse(&["explore", "--profiles", "all", "--replay", "d"])
        else {
            panic!("explore");
        };
        let e = args.options(None, 1, "out".into()).unwrap_err().to_string();
        assert!(e.contains("--profiles all"), "{e}");
    }
}
