//! The release's own feature gates as a dimension of exploration (`--gate-sets pairwise`),
//! and the catalog's cluster profiles as another (`--profiles all`).
//!
//! What a release keeps behind a gate that is off by default is never reached by a cell at
//! its default gates. The gates come from the release itself: every gate it registers with
//! its default ([`crate::controller::ControllerRef::gate_defaults`]), less those its own CI pins
//! off (it does not run with them: [`crate::controller::Controller::ci_gates`]) and those the
//! user set. Over the rest, each either at its default or turned on, the cells cover every
//! pair of two gates' settings ([`super::trial::covering_rows`]); the default cell comes
//! first. What a release does only on a cluster with some Kubernetes feature gate on is never
//! reached on a cell without it: the profiles are the catalog's own (each the control-plane
//! gates some of its scenarios need), and each gets a cell ([`plan`]). The cells run one after
//! another, each with its share of the budget ([`shares`]), each into a directory of its own;
//! a cell that does not start is a result of its own (the gates it had and why), and the
//! others go on. A finding alike one an earlier cell reported is that cell's: counted, not
//! shrunk or written again, so a later cell spends its share on what is new there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::trial::{Rng, covering_rows};
use super::{Options, Summary};
use crate::cluster::any::Provider;
use crate::toolchain::Toolchain;

/// The least budget a cell with gates on is given: less would end in its bring-up and
/// admission trials. Cells that would get less are left out, last first, and listed.
pub const MIN_CELL: Duration = Duration::from_secs(180);

/// The gates every Kubernetes-style gate set knows that turn many others on at once: not a
/// gate of the release's own.
const META_GATES: &[&str] = &["AllAlpha", "AllBeta"];

/// The gates of the dimension: those off by default in `defaults`, neither pinned off by the
/// release's CI (`ci`) nor set by the user (`user`). Sorted.
pub fn factors(
    defaults: &BTreeMap<String, bool>,
    ci: &BTreeMap<String, bool>,
    user: &BTreeMap<String, bool>,
) -> Vec<String> {
    defaults
        .iter()
        .filter(|(g, on)| !**on && !META_GATES.contains(&g.as_str()))
        .filter(|(g, _)| ci.get(*g) != Some(&false) && !user.contains_key(*g))
        .map(|(g, _)| g.clone())
        .collect()
}

/// The gate sets to explore: first none (the default cell), then rows of a pairwise covering
/// of `factors`, each gate at its default or on, that turn at least one on; each the gates it
/// turns on. Drawn with `seed`; no set twice.
pub fn sets(factors: &[String], seed: u64) -> Vec<BTreeSet<String>> {
    let values = vec![Value::Bool(true), Value::Bool(false)];
    let fields: Vec<(String, Vec<Value>)> = factors
        .iter()
        .map(|g| (g.clone(), values.clone()))
        .collect();
    let mut out = vec![BTreeSet::new()];
    for row in covering_rows(&fields, &mut Rng::new(seed, u64::MAX - 2)) {
        let on: BTreeSet<String> = row
            .into_iter()
            .filter(|(_, v)| v == &Value::Bool(true))
            .map(|(g, _)| g)
            .collect();
        if !out.contains(&on) {
            out.push(on);
        }
    }
    out
}

/// How `budget` is shared among `cells` cells, the default one first: it gets half (all of it
/// alone), the others share the rest evenly, none under [`MIN_CELL`] — cells that would be
/// are left out (the result is shorter than `cells`).
pub fn shares(budget: Duration, cells: usize) -> Vec<Duration> {
    if cells <= 1 {
        return vec![budget; cells];
    }
    let first = budget / 2;
    let rest = budget - first;
    let others = ((rest.as_secs_f64() / MIN_CELL.as_secs_f64()) as usize).min(cells - 1);
    if others == 0 {
        return vec![budget];
    }
    let mut out = vec![first];
    out.extend(std::iter::repeat_n(rest / others as u32, others));
    out
}

/// A cluster profile a cell runs on: its name and the control-plane gates it turns on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Its name in the catalog (`default`, or one named after its gates).
    pub name: String,
    /// Its Kubernetes feature gates.
    pub gates: BTreeMap<String, bool>,
}

/// A cell to explore: the cluster profile it runs on (none: the options' own cluster) and the
/// release's gates it turns on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    /// The cluster profile, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The release's gates it turns on.
    pub on: BTreeSet<String>,
}

/// The cells in the order they run: the default cell (the first profile, the release's
/// default gates); then each other profile at the default gates; then each gate set of `sets`
/// after its first (the default set), on each profile in turn. Each value of one dimension
/// is thus met at the other's default before any combination. No profiles: the options' own
/// cluster.
pub fn plan(profiles: &[Profile], sets: &[BTreeSet<String>]) -> Vec<Planned> {
    let names: Vec<Option<String>> = match profiles.is_empty() {
        true => vec![None],
        false => profiles.iter().map(|p| Some(p.name.clone())).collect(),
    };
    let default_set = sets.first().cloned().unwrap_or_default();
    let mut out: Vec<Planned> = names
        .iter()
        .map(|p| Planned {
            profile: p.clone(),
            on: default_set.clone(),
        })
        .collect();
    for on in sets.iter().skip(1) {
        out.extend(names.iter().map(|p| Planned {
            profile: p.clone(),
            on: on.clone(),
        }));
    }
    out
}

/// One cell of a gate-set or profile exploration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellRun {
    /// The cluster profile it ran on (none: the options' own cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The gates it turned on beyond the options' own (none: the default cell).
    pub on: BTreeSet<String>,
    /// Its budget, in seconds.
    pub budget: f64,
    /// Its directory, relative to the run's.
    pub dir: PathBuf,
    /// What it found and did, if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Why it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a gate-set or profile exploration did: the dimensions and each cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cells {
    /// The gates of the dimension ([`factors`]).
    pub factors: Vec<String>,
    /// The cluster profiles of the dimension, by name (none: the options' own cluster).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<String>,
    /// The cells that ran or failed to, in order.
    pub cells: Vec<CellRun>,
    /// The cells the budget left out.
    pub left_out: Vec<Planned>,
}

impl Cells {
    /// Every stable finding of every cell.
    pub fn stable(&self) -> impl Iterator<Item = &super::Reported> {
        self.cells
            .iter()
            .filter_map(|c| c.summary.as_ref())
            .flat_map(|s| s.stable())
    }

    /// The cells as one exploration: their trials and seconds added, their findings in cell
    /// order, each first seen at its time into the whole (the cells before it counted), each
    /// with its own cell's gates; the rest (controller, seed, pace, reach, gates) the first
    /// cell's that ran. `None` when no cell ran.
    pub fn merged(&self) -> Option<Summary> {
        let mut ran = self.cells.iter().filter_map(|c| c.summary.as_ref());
        let mut whole = ran.next()?.clone();
        for s in ran {
            let before = whole.seconds;
            for (k, n) in &s.trials {
                *whole.trials.entry(k.clone()).or_default() += n;
            }
            whole.findings.extend(s.findings.iter().map(|r| {
                let mut r = r.clone();
                r.first_seen += before;
                r
            }));
            whole.seconds += s.seconds;
        }
        Some(whole)
    }

    /// A Markdown table of the cells: profile, gates on, budget, trials, findings (stable)
    /// and how often one alike an earlier cell's fired, or the reason a cell did not run.
    pub fn markdown(&self) -> String {
        let mut out = "## Cells\n\n".to_string();
        // A run over profiles alone read no gates.
        if !self.factors.is_empty() || self.profiles.is_empty() {
            out.push_str(&format!(
                "The release's gates off by default ({}): {}.\n",
                self.factors.len(),
                if self.factors.is_empty() {
                    "none".to_string()
                } else {
                    self.factors.join(", ")
                }
            ));
        }
        if !self.profiles.is_empty() {
            out.push_str(&format!(
                "The catalog's cluster profiles ({}): {}.\n",
                self.profiles.len(),
                self.profiles.join(", ")
            ));
        }
        out.push_str(
            "\n| cell | profile | gates on | budget | trials | findings (stable) | directory |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for (i, c) in self.cells.iter().enumerate() {
            let on = match c.on.is_empty() {
                true => "(defaults)".to_string(),
                false => c.on.iter().cloned().collect::<Vec<_>>().join(", "),
            };
            let profile = c.profile.as_deref().unwrap_or("(options)");
            let (trials, findings) = match (&c.summary, &c.error) {
                (Some(s), _) => (
                    s.trials.values().sum::<usize>().to_string(),
                    match s.pace.earlier {
                        0 => format!("{} ({})", s.findings.len(), s.stable().count()),
                        n => format!(
                            "{} ({}); {n} fired alike an earlier cell's",
                            s.findings.len(),
                            s.stable().count()
                        ),
                    },
                ),
                (None, Some(e)) => ("did not run".to_string(), e.replace('|', "\\|")),
                (None, None) => ("-".into(), "-".into()),
            };
            out.push_str(&format!(
                "| {} | {profile} | {on} | {:.0} s | {trials} | {findings} | {} |\n",
                i + 1,
                c.budget,
                c.dir.display()
            ));
        }
        if !self.left_out.is_empty() {
            out.push_str(&format!(
                "\n{} cell(s) left out for the budget (each needs {} s): {}\n",
                self.left_out.len(),
                MIN_CELL.as_secs(),
                self.left_out
                    .iter()
                    .map(|p| {
                        let on = match p.on.is_empty() {
                            true => "(defaults)".to_string(),
                            false => p.on.iter().cloned().collect::<Vec<_>>().join("+"),
                        };
                        match &p.profile {
                            Some(profile) => format!("{profile}: {on}"),
                            None => on,
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        out
    }
}

/// The release's gates with their defaults, and the ones its CI pins.
async fn release_gates(
    options: &Options,
) -> anyhow::Result<(BTreeMap<String, bool>, BTreeMap<String, bool>)> {
    use anyhow::Context;
    let reference = &options.controller;
    let go = crate::toolchain::GoEnv::detect().await?;
    let defaults = reference
        .gate_defaults(&go)
        .await
        .with_context(|| format!("read the feature gates of {reference}"))?;
    // A release without an e2e suite of its own has no CI gates to read.
    let ci = match reference.controller().e2e_suite() {
        Some(suite) => {
            suite
                .ci_gates(reference)
                .await
                .with_context(|| format!("read the gates {reference}'s CI runs with"))?
                .controller
        }
        None => BTreeMap::new(),
    };
    Ok((defaults, ci))
}

/// Explores the cells of the release's gate sets (when `pairwise`; else its default gates
/// alone) on each of `profiles` (none: the options' own cluster), in the order of [`plan`]
/// (see the module's documentation), each into `<options.dir>/cells/<n>-…`, and writes
/// `cells.json` and `cells.md` into `options.dir`.
pub async fn explore_cells(
    options: &Options,
    profiles: &[Profile],
    pairwise: bool,
    provider: &Provider,
    toolchain: &Toolchain,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Cells> {
    let (factors, sets) = match pairwise {
        true => {
            let (defaults, ci) = release_gates(options).await?;
            let factors = factors(&defaults, &ci, &options.gates.controller);
            let sets = sets(&factors, options.seed);
            (factors, sets)
        }
        false => (vec![], vec![BTreeSet::new()]),
    };
    let all = plan(profiles, &sets);
    let budgets = shares(options.budget, all.len());
    if pairwise {
        say(format!(
            "gate sets: {} of the release's gates are off by default and free ({}); {} set(s) \
             cover every pair",
            factors.len(),
            factors.join(", "),
            sets.len(),
        ));
    }
    if !profiles.is_empty() {
        say(format!(
            "profiles: the catalog's {} cluster profile(s) ({})",
            profiles.len(),
            profiles
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    say(format!(
        "cells: {}, {} fit the budget",
        all.len(),
        budgets.len()
    ));
    let mut cells = Cells {
        factors,
        profiles: profiles.iter().map(|p| p.name.clone()).collect(),
        left_out: all[budgets.len()..].to_vec(),
        ..Default::default()
    };
    let mut known = options.known.clone();
    for (i, (cell, budget)) in all.iter().zip(&budgets).enumerate() {
        let profile = profiles
            .iter()
            .find(|p| Some(&p.name) == cell.profile.as_ref());
        let dir = Path::new("cells").join(cell_dir(i, profile.map(|p| p.name.as_str()), &cell.on));
        let mut o = options.clone();
        o.budget = *budget;
        o.dir = options.dir.join(&dir);
        o.known = known.clone();
        if let Some(p) = profile {
            // The profile's gates, the user's own over them.
            let mut cluster = p.gates.clone();
            cluster.extend(options.gates.cluster.clone());
            o.gates.cluster = cluster;
        }
        for g in &cell.on {
            o.gates.controller.insert(g.clone(), true);
        }
        let on = match cell.on.is_empty() {
            true => "the release's default gates".to_string(),
            false => format!(
                "gates on: {}",
                cell.on.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        say(format!(
            "cell {}/{}: {}{on} for {:.0} s",
            i + 1,
            budgets.len(),
            match &cell.profile {
                Some(p) => format!("profile {p}, "),
                None => String::new(),
            },
            budget.as_secs_f64()
        ));
        let (summary, error) = match super::explore(&o, provider, toolchain, say).await {
            Ok(s) => (Some(s), None),
            Err(e) => {
                say(format!("cell {}: did not run: {e:#}", i + 1));
                (None, Some(format!("{e:#}")))
            }
        };
        // What this cell reported is known to the cells after it.
        if let Some(s) = &summary {
            known.extend(s.findings.iter().map(|r| r.finding.clone()));
        }
        cells.cells.push(CellRun {
            profile: cell.profile.clone(),
            on: cell.on.clone(),
            budget: budget.as_secs_f64(),
            dir,
            summary,
            error,
        });
        write(&options.dir, &cells)?;
        if crate::stop::is_requested() {
            break;
        }
    }
    Ok(cells)
}

/// A cell's directory name: its position, its profile if it has one, and the gates it turns
/// on (`02-GateA+GateB`, `03-SomeGate-defaults`), the default cell `01-defaults`.
fn cell_dir(i: usize, profile: Option<&str>, on: &BTreeSet<String>) -> String {
    let what = match on.is_empty() {
        true => "defaults".to_string(),
        false => on.iter().cloned().collect::<Vec<_>>().join("+"),
    };
    // A long set is named by its size: the directory name stays within a file name's length.
    let what = match what.len() > 120 {
        true => format!("{}-gates", on.len()),
        false => what,
    };
    match profile {
        Some(p) if p != "default" => format!("{:02}-{p}-{what}", i + 1),
        _ => format!("{:02}-{what}", i + 1),
    }
}

/// Writes `cells.json` and `cells.md` into `dir`.
pub fn write(dir: &Path, cells: &Cells) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let json = dir.join("cells.json");
    std::fs::write(&json, serde_json::to_string_pretty(cells)?)
        .with_context(|| format!("write {}", json.display()))?;
    let md = dir.join("cells.md");
    std::fs::write(&md, cells.markdown()).with_context(|| format!("write {}", md.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(entries: &[(&str, bool)]) -> BTreeMap<String, bool> {
        entries.iter().map(|(g, v)| (g.to_string(), *v)).collect()
    }

    #[test]
    fn the_dimension_is_the_gates_off_by_default_that_neither_ci_nor_user_pins() {
        let defaults = gates(&[
            ("A", false),
            ("B", false),
            ("C", true),
            ("D", false),
            ("E", false),
            ("AllAlpha", false),
        ]);
        let ci = gates(&[("AllAlpha", true), ("D", false), ("B", true)]);
        let user = gates(&[("E", false)]);
        assert_eq!(factors(&defaults, &ci, &user), ["A", "B"]);
    }

    #[test]
    fn gate_sets_start_with_the_defaults_and_cover_every_pair() {
        let factors: Vec<String> = (0..9).map(|i| format!("G{i}")).collect();
        let all = sets(&factors, 3);
        assert!(all[0].is_empty(), "the default cell first: {all:?}");
        assert!(all[1..].iter().all(|s| !s.is_empty()));
        let distinct: BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "no set twice");
        // Every pair of two gates' settings (on or default) is met by a cell.
        for a in &factors {
            for b in &factors {
                if a >= b {
                    continue;
                }
                for (x, y) in [(true, true), (true, false), (false, true), (false, false)] {
                    assert!(
                        all.iter().any(|s| s.contains(a) == x && s.contains(b) == y),
                        "{a}={x} {b}={y} in no cell: {all:?}"
                    );
                }
            }
        }
        // Far fewer cells than gate combinations.
        assert!(all.len() < 16, "{}", all.len());
        assert_eq!(sets(&[], 3), vec![BTreeSet::new()]);
    }

    #[test]
    fn each_profile_and_each_gate_set_is_met_at_the_other_s_default_before_any_pair() {
        let profile = |name: &str| Profile {
            name: name.into(),
            gates: [(name.to_string(), true)].into(),
        };
        let set = |gs: &[&str]| gs.iter().map(|g| g.to_string()).collect::<BTreeSet<_>>();
        let cell = |p: Option<&str>, gs: &[&str]| Planned {
            profile: p.map(String::from),
            on: set(gs),
        };
        let sets = [set(&[]), set(&["A"]), set(&["B"])];
        // No profiles: the gate sets on the options' own cluster.
        assert_eq!(
            plan(&[], &sets),
            [cell(None, &[]), cell(None, &["A"]), cell(None, &["B"])]
        );
        // No gate sets: one cell per profile.
        let profiles = [profile("default"), profile("P")];
        assert_eq!(
            plan(&profiles, &[set(&[])]),
            [cell(Some("default"), &[]), cell(Some("P"), &[])]
        );
        // Both: each profile at the default gates first, then each set on each profile.
        assert_eq!(
            plan(&profiles, &sets),
            [
                cell(Some("default"), &[]),
                cell(Some("P"), &[]),
                cell(Some("default"), &["A"]),
                cell(Some("P"), &["A"]),
                cell(Some("default"), &["B"]),
                cell(Some("P"), &["B"]),
            ]
        );
    }

    #[test]
    fn the_default_cell_gets_half_the_budget_and_no_cell_less_than_the_least() {
        let m = |s: u64| Duration::from_secs(s * 60);
        assert_eq!(shares(m(20), 1), [m(20)]);
        assert_eq!(shares(m(20), 3), [m(10), m(5), m(5)]);
        // 10 minutes for the others: three cells of 3 min 20 s, the rest left out.
        let s = shares(m(20), 9);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0], m(10));
        assert!(s[1..].iter().all(|d| *d >= MIN_CELL));
        // Too short for any other cell: the default cell alone, with all of it.
        assert_eq!(shares(m(4), 5), [m(4)]);
        assert!(shares(m(4), 0).is_empty());
    }

    #[test]
    fn the_cells_table_names_each_cell_s_gates_and_what_came_of_it() {
        let cells = Cells {
            factors: vec!["A".into(), "B".into()],
            cells: vec![
                CellRun {
                    profile: None,
                    on: BTreeSet::new(),
                    budget: 600.0,
                    dir: "cells/01-defaults".into(),
                    summary: Some(Summary::default()),
                    error: None,
                },
                CellRun {
                    profile: None,
                    on: ["A".to_string()].into(),
                    budget: 300.0,
                    dir: "cells/02-A".into(),
                    summary: None,
                    error: Some("the manager exited | at start".into()),
                },
            ],
            left_out: vec![Planned {
                profile: None,
                on: ["A".to_string(), "B".to_string()].into(),
            }],
            ..Cells::default()
        };
        let mut later = cells.clone();
        let mut s = Summary::default();
        s.pace.earlier = 4;
        later.cells[0].summary = Some(s);
        assert!(
            later
                .markdown()
                .contains("| 0 (0); 4 fired alike an earlier cell's |"),
            "{}",
            later.markdown()
        );
        let md = cells.markdown();
        assert!(
            md.contains("| 1 | (options) | (defaults) | 600 s | 0 | 0 (0) |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| 2 | (options) | A | 300 s | did not run | the manager exited \\| at start |"
            ),
            "{md}"
        );
        assert!(
            md.contains("1 cell(s) left out") && md.contains("A+B"),
            "{md}"
        );
        assert_eq!(
            cell_dir(1, None, &["A".to_string(), "B".to_string()].into()),
            "02-A+B"
        );
        assert_eq!(
            cell_dir(0, Some("default"), &BTreeSet::new()),
            "01-defaults"
        );
        assert_eq!(cell_dir(1, Some("G"), &BTreeSet::new()), "02-G-defaults");
    }

    #[test]
    fn cells_merge_into_one_exploration_with_each_finding_at_its_time_into_the_whole() {
        use crate::bench::rediscovery::fixtures::{finding, reported};
        use crate::explore::oracle::Oracle;
        let cell = |seconds: f64, trials: usize, gate: Option<&str>| {
            let mut r = reported(finding(Oracle::Convergence, "Thing", "k"), 10.0, true);
            if let Some(g) = gate {
                r.gates.controller.insert(g.into(), true);
            }
            Summary {
                seconds,
                trials: [("behaviour Thing".to_string(), trials)].into(),
                findings: vec![r],
                ..Summary::default()
            }
        };
        let run = |on: &[&str], summary: Option<Summary>| CellRun {
            profile: None,
            on: on.iter().map(|g| g.to_string()).collect(),
            budget: 60.0,
            dir: "cells/x".into(),
            summary,
            error: None,
        };
        let cells = Cells {
            cells: vec![
                run(&[], Some(cell(100.0, 3, None))),
                run(&["A"], None),
                run(&["B"], Some(cell(50.0, 2, Some("B")))),
            ],
            ..Cells::default()
        };
        let whole = cells.merged().unwrap();
        assert_eq!(whole.seconds, 150.0);
        assert_eq!(whole.trials["behaviour Thing"], 5);
        assert_eq!(whole.findings.len(), 2);
        assert_eq!(whole.findings[1].first_seen, 110.0);
        assert_eq!(whole.findings[1].gates.controller.get("B"), Some(&true));
        assert!(Cells::default().merged().is_none());
    }
}
