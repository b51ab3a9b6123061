//! Judging the explorations: [`judge`] is where to start. It reads each release's findings
//! against the list and gives one [`Row`] per bug: whether its bad release [`Found`] it and
//! whether its fixed release stayed clean ([`Fixed`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;

use super::{Bug, Exploration, List};
use crate::explore::{Reported, Summary};

/// Whether a bug was found on its bad release.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Found {
    /// A finding that counts.
    Found(Seen),
    /// The exploration ran and showed none.
    NotFound,
    /// The exploration did not run to its end.
    NotRun {
        /// Why.
        why: String,
    },
    /// Its release was not asked for (`--releases`).
    NotAsked,
}

/// Whether a bug's fixed release is clean of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Fixed {
    /// The list names no fixed release.
    Unfixed,
    /// The exploration ran and showed no finding that counts.
    Clean,
    /// It showed one.
    Seen(Seen),
    /// The exploration did not run to its end.
    NotRun {
        /// Why.
        why: String,
    },
    /// Its release was not asked for (`--releases`).
    NotAsked,
}

/// A finding that counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seen {
    /// Seconds into the exploration when it was first seen.
    pub after: f64,
    /// Its subject.
    pub subject: String,
    /// Its key.
    pub key: String,
    /// Whether every confirming run fired it.
    pub stable: bool,
    /// Confirming runs that fired it, of `confirm_runs`.
    pub reproduced: usize,
    /// Confirming runs.
    pub confirm_runs: usize,
    /// Its directory.
    pub dir: PathBuf,
}

impl From<(&Reported, &str)> for Seen {
    /// A finding, and the key of it that counted ([`super::Wanted::key_of`]).
    fn from((r, key): (&Reported, &str)) -> Self {
        Self {
            after: r.first_seen,
            subject: r.finding.subject.clone(),
            key: key.to_string(),
            stable: r.stable,
            reproduced: r.reproduced,
            confirm_runs: r.confirm_runs,
            dir: r.dir.clone(),
        }
    }
}

/// One bug's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The bug, as listed.
    pub bug: Bug,
    /// On its bad release.
    pub found: Found,
    /// On its fixed release.
    pub fixed: Fixed,
}

/// What an exploration left: its summary, or why there is none.
pub type Outcome = Result<Summary, String>;

/// Each bug of `plan` judged from the explorations' outcomes by release (a release missing
/// from `outcomes` has not run yet).
pub fn judge(list: &List, plan: &[Exploration], outcomes: &BTreeMap<String, Outcome>) -> Vec<Row> {
    let asked = |r: &str| plan.iter().any(|e| e.release == r);
    let touched: BTreeSet<usize> = plan
        .iter()
        .flat_map(|e| e.find.iter().chain(&e.clean))
        .copied()
        .collect();
    let not_run = |r: &str| match outcomes.get(r) {
        Some(Err(why)) => why.clone(),
        _ => "not run yet".into(),
    };
    touched
        .into_iter()
        .map(|i| {
            let b = &list.bugs[i];
            let found = match outcomes.get(&b.bad) {
                _ if !asked(&b.bad) => Found::NotAsked,
                Some(Ok(s)) => match b.finding.first(&s.findings) {
                    Some(r) => Found::Found(r.into()),
                    None => Found::NotFound,
                },
                _ => Found::NotRun {
                    why: not_run(&b.bad),
                },
            };
            let fixed = match &b.fixed {
                None => Fixed::Unfixed,
                Some(f) if !asked(f) => Fixed::NotAsked,
                Some(f) => match outcomes.get(f) {
                    Some(Ok(s)) => match b.finding.first(&s.findings) {
                        Some(r) => Fixed::Seen(r.into()),
                        None => Fixed::Clean,
                    },
                    _ => Fixed::NotRun { why: not_run(f) },
                },
            };
            Row {
                bug: b.clone(),
                found,
                fixed,
            }
        })
        .collect()
}

/// The findings of an exploration that would count for one of `bugs` (indices into `list`)
/// but were written as they fired, never confirmed (shrinking's share of its budget was spent):
/// for each bug, the earliest finding [`super::Wanted::first`] gives, when it is one of those
/// and its directory is not in `tried`. Indices into `findings`, each once, in order.
pub fn unconfirmed(
    list: &List,
    bugs: &[usize],
    findings: &[Reported],
    tried: &BTreeSet<PathBuf>,
) -> Vec<usize> {
    let mut out: Vec<usize> = bugs
        .iter()
        .filter_map(|&i| list.bugs[i].finding.first(findings))
        .filter(|(r, _)| !r.confirmed() && !tried.contains(&r.dir))
        .filter_map(|(r, _)| findings.iter().position(|f| std::ptr::eq(f, r)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rediscovery::fixtures::*;
    use crate::bench::rediscovery::{Ran, Report, command, markdown, plan};
    use crate::explore::oracle::Oracle;

    #[test]
    fn each_bug_is_judged_on_its_bad_and_its_fixed_release() {
        let list = small();
        let p = plan(&list, &[]).unwrap();
        let summary = |findings: Vec<Reported>| Summary {
            findings,
            ..Summary::default()
        };
        let outcomes: BTreeMap<String, Outcome> = [
            // b found (unstable), a not found yet present in its bad release.
            (
                "v1.5.5".to_string(),
                Ok(summary(vec![reported(
                    finding(
                        Oracle::Realizable,
                        "UnitedDeployment.statefulSetTemplate",
                        "drops spec.x admitted on create",
                    ),
                    12.0,
                    false,
                )])),
            ),
            ("v1.7.0".to_string(), Ok(summary(vec![]))),
            // a's fixed release shows it.
            (
                "v1.8.0".to_string(),
                Ok(summary(vec![reported(
                    finding(
                        Oracle::Native,
                        "CloneSet",
                        "admits on update of spec.x as zero what Deployment does not",
                    ),
                    30.0,
                    true,
                )])),
            ),
            (
                "v1.9.1".to_string(),
                Err("explore exited with 1".to_string()),
            ),
        ]
        .into();
        let rows = judge(&list, &p, &outcomes);
        let by = |id: &str| rows.iter().find(|r| r.bug.id == id).unwrap();
        assert_eq!(by("a").found, Found::NotFound);
        assert!(matches!(&by("a").fixed, Fixed::Seen(s) if s.after == 30.0));
        assert!(matches!(&by("b").found, Found::Found(s) if !s.stable && s.after == 12.0));
        assert_eq!(by("b").fixed, Fixed::Clean);
        assert_eq!(
            by("c").found,
            Found::NotRun {
                why: "explore exited with 1".into()
            }
        );
        assert_eq!(by("c").fixed, Fixed::Unfixed);
        // Asked for one release: the other side is not asked; a release yet to run is not run.
        let only = plan(&list, &["v1.7.0".into()]).unwrap();
        let rows = judge(&list, &only, &BTreeMap::new());
        assert_eq!(rows.len(), 2);
        assert!(matches!(rows[0].found, Found::NotRun { .. }));
        assert_eq!(rows[0].fixed, Fixed::NotAsked);
        assert_eq!(rows[1].found, Found::NotAsked);

        let report = Report {
            date: "d".into(),
            commit: "c".into(),
            machine: crate::bench::flakes::tally::Machine {
                cpus: 2,
                memory_kib: Some(1024 * 1024),
            },
            command: command(&request(&[])),
            budget: 1800,
            seed: 7,
            explorations: vec![Ran {
                release: "v1.9.1".into(),
                error: Some("explore exited with 1".into()),
                log: "logs/v1.9.1.log".into(),
                ..Ran::default()
            }],
            bugs: judge(&list, &p, &outcomes),
        };
        let md = markdown(&report);
        assert!(
            md.contains("**Found 1 of 2** bugs on their bad release · **the benchmark's rows: 1 of 1** · **fixed releases clean: 1 of 2**"),
            "{md}"
        );
        assert!(
            md.contains("| `a` | v1.7.0 | no | O4 CloneSet | — | v1.8.0 | **no**: after 30 s |"),
            "{md}"
        );
        assert!(
            md.contains("| `b` (B) | v1.5.5 | **yes** (unstable, 1/3) | O1 UnitedDeployment | 12 s | v1.7.0 | yes |"),
            "{md}"
        );
        assert!(
            md.contains("| `c` | v1.9.1 | not run | O6 AdvancedDaemonSet | — | — | unfixed |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| v1.9.1 | 0 | **no**: explore exited with 1 | 0 | 0 (0) | 0 (0) | `logs/v1.9.1.log` |"
            ),
            "{md}"
        );
    }

    #[test]
    fn a_finding_never_fired_again_counts_for_nothing_and_one_unconfirmed_is_replayed_first() {
        let list = small();
        let p = plan(&list, &["v1.7.0".into()]).unwrap();
        let e = p.iter().find(|e| e.release == "v1.7.0").unwrap();
        let bugs: Vec<usize> = e.find.iter().chain(&e.clean).copied().collect();
        let of_a = |first_seen: f64, dir: &str, reproduced: usize, confirm_runs: usize| {
            let mut r = reported(
                finding(
                    Oracle::Native,
                    "CloneSet",
                    "admits on create of spec.x as zero",
                ),
                first_seen,
                false,
            );
            r.reproduced = reproduced;
            r.confirm_runs = confirm_runs;
            r.dir = dir.into();
            r
        };
        // Written as it fired at 10 s, refuted at 20 s, unstable at 30 s.
        let mut findings = vec![
            of_a(20.0, "f/2", 0, 3),
            of_a(10.0, "f/1", 0, 0),
            of_a(30.0, "f/3", 1, 3),
        ];
        let mut tried = BTreeSet::new();
        assert_eq!(unconfirmed(&list, &bugs, &findings, &tried), vec![1]);
        let a = list.bugs.iter().position(|b| b.id == "a").unwrap();
        // Its replay refutes it: the refuted ones give way to the next.
        tried.insert(PathBuf::from("f/1"));
        findings[1].confirm_runs = 3;
        assert!(unconfirmed(&list, &bugs, &findings, &tried).is_empty());
        let (r, _) = list.bugs[a].finding.first(&findings).unwrap();
        assert_eq!(r.dir, PathBuf::from("f/3"));
        // A replay that could not confirm it leaves it as written, counted, and not tried again.
        findings[1].confirm_runs = 0;
        assert!(unconfirmed(&list, &bugs, &findings, &tried).is_empty());
        let outcomes: BTreeMap<String, Outcome> = [(
            "v1.7.0".to_string(),
            Ok(Summary {
                findings: findings.clone(),
                ..Summary::default()
            }),
        )]
        .into();
        let rows = judge(&list, &p, &outcomes);
        let row = rows.iter().find(|r| r.bug.id == "a").unwrap();
        assert!(matches!(&row.found, Found::Found(s) if s.after == 10.0 && s.confirm_runs == 0));
        // Every one refuted: not found.
        for f in &mut findings {
            (f.reproduced, f.confirm_runs) = (0, 3);
        }
        let outcomes: BTreeMap<String, Outcome> = [(
            "v1.7.0".to_string(),
            Ok(Summary {
                findings,
                ..Summary::default()
            }),
        )]
        .into();
        let rows = judge(&list, &p, &outcomes);
        assert_eq!(
            rows.iter().find(|r| r.bug.id == "a").unwrap().found,
            Found::NotFound
        );
    }
}
