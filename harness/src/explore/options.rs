//! How an exploration goes: [`Options`] (start there, with [`Options::new`]'s defaults), the
//! feature [`Gates`] of its cell, and [`Exploring`], what `--explore` asks of a matrix or a
//! qualification.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::trial::{self, Mode};
use crate::controller::ControllerRef;
use crate::toolchain::KubeVersion;

/// How an exploration goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Kubernetes version of the cell.
    pub kubernetes: KubeVersion,
    /// The controller under test.
    pub controller: ControllerRef,
    /// The subjects, by name (empty: every one).
    pub kinds: Vec<String>,
    /// The seed every choice comes from.
    pub seed: u64,
    /// How long the whole exploration may take, bring-up aside.
    pub budget: Duration,
    /// Which trials are judged: admission trials always run (behaviour trials are made of
    /// the values they admit), their findings are reported when asked for.
    pub modes: Vec<Mode>,
    /// The classes of perturbation behaviour trials draw from (none: they perturb nothing).
    pub perturbations: Vec<trial::Class>,
    /// Behaviour trials at once to start with, on each cell: the pool's width then adapts
    /// between 1 and the larger of this and [`pace::MAX_WIDTH`] ([`pace::Pacer`]).
    pub parallel: usize,
    /// Cells behaviour trials run on, each its own control plane and controller, the budget
    /// shared (admission trials run on the first); see [`default_cells`].
    pub cells: usize,
    /// How long a behaviour trial may take to settle.
    pub settle: Duration,
    /// Times a shrunk finding runs again to be called stable.
    pub confirm: usize,
    /// Candidates minimizing one finding may run.
    pub shrink_runs: usize,
    /// The share of the budget shrinking and confirming findings may take together (0 to 1):
    /// past it, a new finding is written as it fired, for `--replay` to shrink and confirm.
    pub shrink_share: f64,
    /// How behaviour trials are shared among the subjects.
    pub share: Share,
    /// Where findings are written (`<dir>/findings/<n>-<oracle>-<subject>/`).
    pub dir: PathBuf,
    /// A baseline release: every trial also runs on a cell of it, and where the controller
    /// under test answers or settles otherwise is a finding (O5).
    pub baseline: Option<ControllerRef>,
    /// The feature gates of the cell (and of the baseline's).
    pub gates: Gates,
    /// Findings an earlier cell of the same run reported ([`super::gates`]): one alike fired
    /// here is that cell's, counted ([`super::pace::Pace::earlier`]), neither shrunk nor
    /// written again.
    pub known: Vec<super::oracle::Finding>,
}

impl Options {
    /// The options `harness explore` takes by default, for `controller` on Kubernetes
    /// `kubernetes`, with `seed` and `budget`, into `dir`: every kind, both modes, the
    /// default perturbations, two behaviour trials at once to start with settling within 60 s,
    /// on [`default_cells`] cells, 12 shrinking runs, three confirming runs, behaviour trials
    /// shared by kind first ([`Share::Kinds`]), no baseline,
    /// default gates.
    pub fn new(
        kubernetes: KubeVersion,
        controller: ControllerRef,
        seed: u64,
        budget: Duration,
        dir: PathBuf,
    ) -> Self {
        Options {
            kubernetes,
            controller,
            kinds: vec![],
            seed,
            budget,
            modes: vec![Mode::Admission, Mode::Behaviour],
            perturbations: trial::Class::DEFAULT.to_vec(),
            parallel: DEFAULT_PARALLEL,
            cells: default_cells(),
            settle: DEFAULT_SETTLE,
            confirm: 3,
            shrink_runs: DEFAULT_SHRINK_RUNS,
            shrink_share: SHRINK_SHARE,
            share: Share::default(),
            dir,
            baseline: None,
            gates: Gates::default(),
            known: vec![],
        }
    }
}

/// How the behaviour trials are shared among subjects (`--share`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Share {
    /// Each kind alike, then within a kind each of what its subjects differ in next alike (a
    /// policy's target kinds, a union's members), then each subject alike: a kind with forty
    /// subjects (a policy over twenty targets in two versions) gets what a kind with one
    /// gets.
    #[default]
    Kinds,
    /// Each subject alike: a kind gets as many turns as it has subjects.
    Subjects,
}

impl Share {
    /// Every share, as `--share` names them.
    pub const ALL: [(&'static str, Share); 2] =
        [("kinds", Share::Kinds), ("subjects", Share::Subjects)];

    /// Its name, as `--share` takes it.
    pub fn name(self) -> &'static str {
        Share::ALL
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("", |(n, _)| n)
    }
}

impl std::str::FromStr for Share {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Share> {
        Share::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| *v)
            .ok_or_else(|| anyhow::anyhow!("no share {s:?}: one of kinds, subjects"))
    }
}

/// Behaviour trials at once to start with, unless told (`--parallel`).
pub const DEFAULT_PARALLEL: usize = 2;

/// The cores a cell's control plane and controller keep busy while behaviour trials run on
/// it at the width the pacer settles at (an apiserver, etcd, the controller managers and the
/// harness took 1.4 cores of a 2-core machine in the benchmark of docs/benchmarks.md).
pub const CORES_PER_CELL: usize = 2;

/// The cells an exploration brings up, unless told (`--cells`): one per [`CORES_PER_CELL`]
/// cores of this machine, at least one.
pub fn default_cells() -> usize {
    cells_for(std::thread::available_parallelism().map_or(1, usize::from))
}

/// The cells for a machine of `cores` cores.
fn cells_for(cores: usize) -> usize {
    (cores / CORES_PER_CELL).max(1)
}

/// The share of the budget that shrinking and confirming findings (of either mode) may take
/// together, unless told (`--shrink-share`). Past it, a new finding is written as it fired, neither shrunk nor confirmed,
/// and `harness explore --replay <its directory>` shrinks and confirms it.
pub const SHRINK_SHARE: f64 = 0.25;

/// The share of the budget the admission phase may take when behaviour trials follow it:
/// the subjects share it, each in turn with a part of what is left of it among the subjects
/// left in proportion to what its schema offers (a subject that ends early leaves its rest to those after it), and a subject's admission trials not started by then
/// are left out but its first, its seed object alone (the reach table shows what was tried).
/// The subjects reached once the share is spent try only their seed objects, side by side
/// ([`TAIL_SIDE_BY_SIDE`] at once), so that behaviour trials have the rest even when a couple
/// of hundred subjects' seed objects outlast the share; those take at most half of what the
/// share left, and a subject not started by then is left out (said). An admission-only
/// exploration has the whole budget, shared the same way.
pub const ADMISSION_SHARE: f64 = 0.5;

/// How many subjects reached after the admission share try their seed objects at once (see
/// [`ADMISSION_SHARE`]): each is a namespace, a dry run and a target or two, mostly waiting
/// on the cell.
pub const TAIL_SIDE_BY_SIDE: usize = 8;

/// How long a behaviour trial may take to settle, unless told (`--settle`).
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(60);

/// Candidates minimizing one behaviour finding may run, unless told (`--shrink-runs`).
pub const DEFAULT_SHRINK_RUNS: usize = 12;

/// Feature gates a cell is brought up with: the Kubernetes control plane's and the
/// controller manager's. Exploring with a gate on explores what the gate turns on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gates {
    /// The control plane's (`--feature-gates` of the apiserver and the others).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cluster: BTreeMap<String, bool>,
    /// The controller manager's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub controller: BTreeMap<String, bool>,
}

impl Gates {
    /// Whether no gate is set.
    pub fn is_empty(&self) -> bool {
        self.cluster.is_empty() && self.controller.is_empty()
    }
}

impl std::fmt::Display for Gates {
    /// `cluster: A=true; controller: B=true`, or `defaults`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |m: &BTreeMap<String, bool>| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut parts = vec![];
        if !self.cluster.is_empty() {
            parts.push(format!("cluster {}", list(&self.cluster)));
        }
        if !self.controller.is_empty() {
            parts.push(format!("controller {}", list(&self.controller)));
        }
        if parts.is_empty() {
            write!(f, "default gates")
        } else {
            write!(f, "{}", parts.join("; "))
        }
    }
}

/// What `--explore` asks of `matrix` or `qualify`: an exploration beside the run.
#[derive(Debug, Clone)]
pub struct Exploring {
    /// How long each exploration may take, bring-up aside.
    pub budget: Duration,
    /// The kinds (empty: every one).
    pub kinds: Vec<String>,
}

impl Exploring {
    /// `harness explore`'s defaults for `controller` on Kubernetes `kubernetes` with `seed`,
    /// into `dir`, with these kinds and budget, on one cell.
    pub fn options(
        &self,
        kubernetes: KubeVersion,
        controller: ControllerRef,
        seed: u64,
        dir: PathBuf,
    ) -> Options {
        let mut options = Options::new(kubernetes, controller, seed, self.budget, dir);
        options.kinds = self.kinds.clone();
        // The matrix's cells run side by side already: one cell each.
        options.cells = 1;
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_per_two_cores_and_one_at_least() {
        assert_eq!(
            [1, 2, 3, 4, 8, 16].map(cells_for),
            [1, 1, 1, 2, 4, 8],
            "cells for 1, 2, 3, 4, 8 and 16 cores"
        );
        assert!(default_cells() >= 1);
    }
}
