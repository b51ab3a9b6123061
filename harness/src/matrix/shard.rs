//! Splitting a matrix over CI runners, and putting it back together. Start with [`Shard`]
//! (`--shard K/N`) and [`split`]: the units of work (cells, and qualification's upgrade checks)
//! go to shards by expected cost ([`Costs`]) in a deterministic longest-first split, recorded
//! in each shard's `matrix.json` ([`ShardInfo`]); [`merge`] rebuilds from the shards' outputs
//! what one unsharded run writes, refusing missing, duplicate, foreign or incomplete shards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::controller::ControllerRef;
use crate::results::UpgradeReport;
use crate::toolchain::KubeVersion;

use super::{CellReport, MatrixReport};

pub use crate::run::costs::{Costs, CostsError, DEFAULT_BRING_UP, DEFAULT_SCENARIO};

/// One shard of N: `K/N`, K counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// K.
    pub index: usize,
    /// N.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{s}` is not a shard like 2/4 (K of N, 1 <= K <= N)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A unit of work a shard takes whole.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "unit", rename_all = "kebab-case")]
pub enum Unit {
    /// A cell: the selected scenarios on one Kubernetes version with one release.
    Cell {
        /// Kubernetes version.
        kubernetes: KubeVersion,
        /// Controller release.
        controller: ControllerRef,
    },
    /// Qualification's upgrade check on one Kubernetes version.
    Upgrade {
        /// Kubernetes version.
        kubernetes: KubeVersion,
    },
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unit::Cell {
                kubernetes,
                controller,
            } => write!(f, "Kubernetes {kubernetes} x {controller}"),
            Unit::Upgrade { kubernetes } => write!(f, "upgrade check on Kubernetes {kubernetes}"),
        }
    }
}

/// A unit, its expected cost and the shard it goes to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The unit.
    #[serde(flatten)]
    pub unit: Unit,
    /// Expected seconds.
    pub cost: f64,
    /// The shard (1-based).
    pub shard: usize,
}

/// What a shard's `matrix.json` says of the whole it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// K.
    pub index: usize,
    /// N.
    pub count: usize,
    /// Every unit of the whole matrix, in grid order, with its shard.
    pub units: Vec<Assignment>,
    /// For a qualification: the two releases and this shard's upgrade checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qualify: Option<QualifyShard>,
}

impl ShardInfo {
    /// The units of this shard.
    pub fn mine(&self) -> impl Iterator<Item = &Unit> {
        self.units
            .iter()
            .filter(|a| a.shard == self.index)
            .map(|a| &a.unit)
    }

    /// Whether this shard runs `unit`.
    pub fn runs(&self, unit: &Unit) -> bool {
        self.mine().any(|u| u == unit)
    }
}

/// A qualification shard's own part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualifyShard {
    /// The release it must not regress from.
    pub baseline: ControllerRef,
    /// The candidate.
    pub candidate: ControllerRef,
    /// This shard's upgrade checks.
    pub upgrades: Vec<UpgradeReport>,
}

/// Splits `units` (with their costs) over `count` shards: longest first, each to the least
/// loaded shard (the lowest index on a tie), units of equal cost in the order given. The same
/// input always gives the same split.
pub fn split(units: Vec<(Unit, f64)>, count: usize) -> Vec<Assignment> {
    let count = count.max(1);
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|a, b| units[*b].1.total_cmp(&units[*a].1).then(a.cmp(b)));
    let mut load = vec![0.0f64; count];
    let mut shard_of = vec![0usize; units.len()];
    for i in order {
        let (k, _) = load
            .iter()
            .enumerate()
            .min_by(|(ia, a), (ib, b)| a.total_cmp(b).then(ia.cmp(ib)))
            .expect("at least one shard");
        load[k] += units[i].1;
        shard_of[i] = k + 1;
    }
    units
        .into_iter()
        .zip(shard_of)
        .map(|((unit, cost), shard)| Assignment { unit, cost, shard })
        .collect()
}

/// The binaries shard `index` of `split` needs, sorted and each once (a cache key): each
/// cell's Kubernetes version and release, and with `upstream` the release whose e2e suite the
/// cell runs.
pub fn binaries(
    split: &[Assignment],
    index: usize,
    upstream: Option<&crate::run::upstream::Choice>,
) -> Vec<String> {
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
    names
}

fn minutes(seconds: f64) -> String {
    format!(
        "{}m{:02}s",
        (seconds / 60.0) as u64,
        (seconds % 60.0) as u64
    )
}

/// The split as a table: units with expected time and shard, each shard's total (with
/// `cells_parallel` cells at once), and the number of shards that keeps every shard under
/// `target` minutes.
pub fn plan_table(
    split: &[Assignment],
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
    let load = |k: usize, of: &[Assignment]| -> f64 {
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
    let units: Vec<(Unit, f64)> = split.iter().map(|a| (a.unit.clone(), a.cost)).collect();
    let needed = (1..=units.len().max(1)).find_map(|n| {
        let s = self::split(units.clone(), n);
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

/// Why shards cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("merge shards: name the shard directories (each holds a matrix.json)")]
    Nothing,
    /// A directory without a readable `matrix.json`.
    #[error("merge shards: read {}: {detail}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A `matrix.json` of an unsharded run.
    #[error(
        "merge shards: {} is not a shard's output (it was run without --shard)",
        dir.display()
    )]
    NotAShard {
        /// The directory.
        dir: PathBuf,
    },
    /// Shards of different matrices.
    #[error(
        "merge shards: {} belongs to another matrix than {} ({what} differ)",
        dir.display(),
        first.display()
    )]
    Foreign {
        /// The odd one.
        dir: PathBuf,
        /// The first shard.
        first: PathBuf,
        /// What differs.
        what: &'static str,
    },
    /// The same shard twice.
    #[error("merge shards: shard {index}/{count} is given twice: {} and {}", a.display(), b.display())]
    Duplicate {
        /// K.
        index: usize,
        /// N.
        count: usize,
        /// One.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// Shards not given.
    #[error("merge shards: shard(s) {} missing", missing.iter().map(|k| format!("{k}/{count}")).collect::<Vec<_>>().join(", "))]
    Missing {
        /// Ks.
        missing: Vec<usize>,
        /// N.
        count: usize,
    },
    /// A shard that did not finish its units.
    #[error("merge shards: shard {index} in {} did not finish: {}", dir.display(), units.join("; "))]
    Incomplete {
        /// K.
        index: usize,
        /// Its directory.
        dir: PathBuf,
        /// Units without results.
        units: Vec<String>,
    },
    /// Writing the merged reports failed.
    #[error("merge shards: write {}", path.display())]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What [`merge`] made.
#[derive(Debug)]
pub struct Merged {
    /// The whole matrix, as an unsharded run reports it.
    pub report: MatrixReport,
    /// For a qualification: the two releases and every shard's upgrade checks, by Kubernetes
    /// version (the verdict is the qualification's to draw, see `crate::qualify`).
    pub qualify: Option<QualifyShard>,
}

/// Reads the shards' outputs in `dirs`, checks that they are the N shards of one matrix, each
/// once and finished, and writes into `out` what an unsharded run writes: the cells' report
/// directories (copied), `matrix.json`, `matrix.html`, `junit.xml`, and for a qualification
/// the upgrade checks' directories.
pub fn merge(dirs: &[PathBuf], out: &Path, id: &str) -> Result<Merged, MergeError> {
    if dirs.is_empty() {
        return Err(MergeError::Nothing);
    }
    let mut shards: Vec<(PathBuf, MatrixReport, ShardInfo)> = vec![];
    for dir in dirs {
        let path = dir.join("matrix.json");
        let bytes = std::fs::read(&path).map_err(|e| MergeError::Read {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let report: MatrixReport =
            serde_json::from_slice(&bytes).map_err(|e| MergeError::Read {
                path: path.clone(),
                detail: format!("not a matrix.json: {e}"),
            })?;
        let Some(info) = report.shard.clone() else {
            return Err(MergeError::NotAShard { dir: dir.clone() });
        };
        shards.push((dir.clone(), report, info));
    }
    let (first_dir, _, first) = &shards[0];
    for (dir, _, info) in &shards[1..] {
        let what = if info.count != first.count {
            Some("shard counts")
        } else if info.units != first.units {
            Some("units")
        } else if info.qualify.as_ref().map(|q| (&q.baseline, &q.candidate))
            != first.qualify.as_ref().map(|q| (&q.baseline, &q.candidate))
        {
            Some("releases under qualification")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(MergeError::Foreign {
                dir: dir.clone(),
                first: first_dir.clone(),
                what,
            });
        }
    }
    let count = first.count;
    let mut by_index: BTreeMap<usize, &PathBuf> = BTreeMap::new();
    for (dir, _, info) in &shards {
        if let Some(other) = by_index.insert(info.index, dir) {
            return Err(MergeError::Duplicate {
                index: info.index,
                count,
                a: other.clone(),
                b: dir.clone(),
            });
        }
    }
    let missing: Vec<usize> = (1..=count).filter(|k| !by_index.contains_key(k)).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing, count });
    }
    // Every unit finished by its shard.
    for (dir, report, info) in &shards {
        let upgrades: Vec<KubeVersion> = info
            .qualify
            .iter()
            .flat_map(|q| q.upgrades.iter().map(|u| u.kubernetes))
            .collect();
        let unfinished: Vec<String> = info
            .mine()
            .filter(|u| match u {
                Unit::Cell {
                    kubernetes,
                    controller,
                } => !report
                    .cells
                    .iter()
                    .any(|c| c.kubernetes == *kubernetes && &c.controller == controller),
                Unit::Upgrade { kubernetes } => !upgrades.contains(kubernetes),
            })
            .map(|u| u.to_string())
            .collect();
        if !unfinished.is_empty() {
            return Err(MergeError::Incomplete {
                index: info.index,
                dir: dir.clone(),
                units: unfinished,
            });
        }
    }
    let write = |path: &Path, e: std::io::Error| MergeError::Write {
        path: path.into(),
        source: e,
    };
    std::fs::create_dir_all(out).map_err(|e| write(out, e))?;
    // Cells in grid order (the order of the units), each with its report directory.
    let mut cells: Vec<CellReport> = vec![];
    for a in &first.units {
        let Unit::Cell {
            kubernetes,
            controller,
        } = &a.unit
        else {
            continue;
        };
        let (dir, report, _) = shards
            .iter()
            .find(|(_, _, i)| i.index == a.shard)
            .expect("every shard is there");
        let cell = report
            .cells
            .iter()
            .find(|c| c.kubernetes == *kubernetes && &c.controller == controller)
            .expect("checked complete");
        crate::toolchain::copy_dir(&dir.join(&cell.dir), &out.join(&cell.dir))
            .map_err(|e| write(out, e))?;
        cells.push(cell.clone());
    }
    let report = MatrixReport {
        id: id.into(),
        cells,
        shard: None,
    };
    super::write_matrix(out, &report).map_err(|e| write(out, e))?;
    let qualify = match &first.qualify {
        None => None,
        Some(q) => {
            let mut upgrades = vec![];
            for (dir, _, info) in &shards {
                for u in info.qualify.iter().flat_map(|q| &q.upgrades) {
                    let name = format!("upgrade-{}", u.kubernetes);
                    if dir.join(&name).is_dir() {
                        crate::toolchain::copy_dir(&dir.join(&name), &out.join(&name))
                            .map_err(|e| write(out, e))?;
                    }
                    upgrades.push(u.clone());
                }
            }
            upgrades.sort_by_key(|u| u.kubernetes);
            Some(QualifyShard {
                baseline: q.baseline.clone(),
                candidate: q.candidate.clone(),
                upgrades,
            })
        }
    };
    Ok(Merged { report, qualify })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(minor: u32, version: &str) -> Unit {
        Unit::Cell {
            kubernetes: format!("1.{minor}").parse().unwrap(),
            controller: format!("openkruise@{version}").parse().unwrap(),
        }
    }

    #[test]
    fn shards_parse_or_say_what_is_wrong() {
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
        for bad in ["0/4", "5/4", "4", "a/b", "1/0"] {
            assert!(
                bad.parse::<Shard>().unwrap_err().contains("K of N"),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_split_is_longest_first_balanced_and_deterministic() {
        let units = vec![
            (cell(32, "v1.9.0"), 100.0),
            (cell(32, "v1.8.3"), 60.0),
            (cell(37, "v1.9.0"), 50.0),
            (cell(37, "v1.8.3"), 40.0),
            (
                Unit::Upgrade {
                    kubernetes: "1.32".parse().unwrap(),
                },
                10.0,
            ),
        ];
        let a = split(units.clone(), 2);
        let shards: Vec<usize> = a.iter().map(|x| x.shard).collect();
        // 100 -> 1; 60 -> 2; 50 -> 2 (110); 40 -> 1 (140); 10 -> 2 (120).
        assert_eq!(shards, [1, 2, 2, 1, 2]);
        assert_eq!(split(units.clone(), 2), a, "the same input, the same split");
        // More shards than units: the extra shards run nothing.
        let wide = split(units, 7);
        assert!(wide.iter().all(|x| x.shard <= 5));
    }

    #[test]
    fn a_shard_needs_its_cells_binaries_and_with_upstream_the_suites() {
        let k: KubeVersion = "1.32".parse().unwrap();
        let split = vec![
            Assignment {
                unit: cell(32, "v1.9.0"),
                cost: 1.0,
                shard: 1,
            },
            Assignment {
                unit: Unit::Upgrade { kubernetes: k },
                cost: 1.0,
                shard: 1,
            },
            Assignment {
                unit: cell(37, "v1.8.3"),
                cost: 1.0,
                shard: 2,
            },
        ];
        assert_eq!(
            binaries(&split, 1, None),
            ["k8s-1.32.5", "openkruise-v1.9.0"]
        );
        let from = crate::run::upstream::Choice {
            from: Some("openkruise@v1.9.1".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(
            binaries(&split, 2, Some(&from)),
            ["k8s-1.37.1", "openkruise-e2e-v1.9.1", "openkruise-v1.8.3"]
        );
    }

    #[test]
    fn the_plan_names_each_shards_load_and_how_many_shards_fit_the_target() {
        let split = split(
            vec![
                (cell(32, "v1.9.0"), 1200.0),
                (cell(32, "v1.8.3"), 1200.0),
                (cell(37, "v1.9.0"), 600.0),
            ],
            2,
        );
        let table = plan_table(&split, 2, 1, 30);
        assert!(
            table.contains("shard 1/2: 2 unit(s), about 30m00s"),
            "{table}"
        );
        assert!(
            table.contains("shard 2/2: 1 unit(s), about 20m00s"),
            "{table}"
        );
        assert!(
            table.contains(
                "whole matrix: 3 unit(s), 50m00s of work; 2 shard(s) keep each under 30 minutes"
            ),
            "{table}"
        );
        let table = plan_table(&split, 2, 1, 10);
        assert!(
            table.contains("one unit alone takes longer than 10 minutes"),
            "{table}"
        );
    }

    fn shard_dir(root: &Path, name: &str, report: &MatrixReport) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for c in &report.cells {
            std::fs::create_dir_all(dir.join(&c.dir)).unwrap();
            std::fs::write(dir.join(&c.dir).join("report.json"), "{}").unwrap();
        }
        std::fs::write(dir.join("matrix.json"), serde_json::to_vec(report).unwrap()).unwrap();
        dir
    }

    fn shard_report(index: usize, units: &[Assignment]) -> MatrixReport {
        let info = ShardInfo {
            index,
            count: 2,
            units: units.to_vec(),
            qualify: None,
        };
        let cells = info
            .mine()
            .filter_map(|u| match u {
                Unit::Cell {
                    kubernetes,
                    controller,
                } => Some(CellReport {
                    kubernetes: *kubernetes,
                    controller: controller.clone(),
                    dir: format!("k8s-{kubernetes}_{}", controller.slug()),
                    worst: "pass".into(),
                    results: vec![],
                    exploration: None,
                }),
                Unit::Upgrade { .. } => None,
            })
            .collect();
        MatrixReport {
            id: format!("s{index}"),
            cells,
            shard: Some(info),
        }
    }

    #[test]
    fn a_merged_qualification_gathers_both_releases_and_the_upgrades() {
        use crate::results::Verdict;
        use crate::results::{Outcome, ScenarioResult};
        let (base, cand): (ControllerRef, ControllerRef) = (
            "openkruise@v1.8.3".parse().unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
        );
        let k: KubeVersion = "1.32".parse().unwrap();
        let units = split(
            vec![
                (cell(32, "v1.8.3"), 2.0),
                (cell(32, "v1.9.0"), 2.0),
                (Unit::Upgrade { kubernetes: k }, 1.0),
            ],
            2,
        );
        let result = |failure: Option<&str>| ScenarioResult {
            scenario: "s/a".into(),
            suite: "s".into(),
            attempt: 1,
            profile: "default".into(),
            outcome: Outcome::Judged(if failure.is_some() {
                Verdict::Fail
            } else {
                Verdict::Pass
            }),
            failure: failure.map(String::from),
            seconds: 1.0,
            diagnostics: None,
            sent: Default::default(),
            failed_tries: vec![],
            steps: vec![],
        };
        let root = tempfile::tempdir().unwrap();
        let mut dirs = vec![];
        for index in [1, 2] {
            let mut r = shard_report(index, &units);
            for c in &mut r.cells {
                // The candidate regresses.
                c.results = vec![result((c.controller == cand).then_some("boom"))];
            }
            let info = r.shard.as_mut().unwrap();
            let upgrades = info
                .mine()
                .filter(|u| matches!(u, Unit::Upgrade { .. }))
                .map(|_| UpgradeReport {
                    kubernetes: k,
                    baseline: base.clone(),
                    candidate: cand.clone(),
                    problems: vec![],
                })
                .collect();
            info.qualify = Some(QualifyShard {
                baseline: base.clone(),
                candidate: cand.clone(),
                upgrades,
            });
            dirs.push(shard_dir(root.path(), &format!("q{index}"), &r));
        }
        let out = root.path().join("merged");
        let m = merge(&dirs, &out, "q").unwrap();
        let q = m.qualify.unwrap();
        assert_eq!((q.baseline, q.candidate), (base, cand));
        assert_eq!(q.upgrades.len(), 1);
        assert_eq!(m.report.cells.len(), 2);
        assert!(
            !out.join("qualify.json").exists(),
            "the verdict is the qualification's"
        );
    }

    #[test]
    fn merging_needs_every_shard_once_and_restores_grid_order() {
        let units = split(
            vec![
                (cell(32, "v1.8.3"), 1.0),
                (cell(32, "v1.9.0"), 3.0),
                (cell(37, "v1.8.3"), 2.0),
            ],
            2,
        );
        let root = tempfile::tempdir().unwrap();
        let one = shard_dir(root.path(), "one", &shard_report(1, &units));
        let two = shard_dir(root.path(), "two", &shard_report(2, &units));
        let out = root.path().join("merged");
        let m = merge(&[two.clone(), one.clone()], &out, "m").unwrap();
        let grid: Vec<String> = m
            .report
            .cells
            .iter()
            .map(|c| format!("{} {}", c.kubernetes, c.controller))
            .collect();
        assert_eq!(
            grid,
            [
                "1.32.5 openkruise@v1.8.3",
                "1.32.5 openkruise@v1.9.0",
                "1.37.1 openkruise@v1.8.3"
            ]
        );
        for c in &m.report.cells {
            assert!(out.join(&c.dir).join("report.json").is_file(), "{}", c.dir);
        }
        for f in ["matrix.json", "matrix.html", "junit.xml"] {
            assert!(out.join(f).is_file(), "{f}");
        }
        let e = merge(std::slice::from_ref(&one), &out, "m")
            .unwrap_err()
            .to_string();
        assert!(e.contains("shard(s) 2/2 missing"), "{e}");
        let e = merge(&[one.clone(), one.clone(), two.clone()], &out, "m")
            .unwrap_err()
            .to_string();
        assert!(e.contains("shard 1/2 is given twice"), "{e}");
        // A shard that stopped before its cells finished.
        let mut partial = shard_report(2, &units);
        partial.cells.clear();
        let cut = shard_dir(root.path(), "cut", &partial);
        let e = merge(&[one.clone(), cut], &out, "m")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not finish"), "{e}");
        // Another matrix's shard.
        let other = split(vec![(cell(32, "v1.8.3"), 1.0)], 2);
        let foreign = shard_dir(root.path(), "foreign", &shard_report(2, &other));
        let e = merge(&[one, foreign], &out, "m").unwrap_err().to_string();
        assert!(e.contains("belongs to another matrix"), "{e}");
        let unsharded = MatrixReport {
            id: "u".into(),
            cells: vec![],
            shard: None,
        };
        let plain = shard_dir(root.path(), "plain", &unsharded);
        let e = merge(&[plain], &out, "m").unwrap_err().to_string();
        assert!(e.contains("without --shard"), "{e}");
        let e = merge(&[root.path().join("nowhere")], &out, "m")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nowhere/matrix.json"), "{e}");
    }
}
