//! What changed between two runs ([`diff`]): scenarios that fail now and did not, those fixed,
//! new flakes, those that got more than [`SLOWER`] slower, and those only one run has. Read
//! from two `report.json` files (or the run directories holding them) by [`load`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::results::{Outcome, ScenarioResult, Verdict};

/// How much slower (a ratio) a scenario must get to be listed: 20 %.
pub const SLOWER: f64 = 1.2;

/// Below this many seconds in both runs a slowdown is noise, not listed.
pub const MIN_SECONDS: f64 = 5.0;

/// The part of `report.json` a comparison reads.
#[derive(Debug, Deserialize)]
pub struct Run {
    /// The run's id.
    pub run_id: String,
    /// Its results.
    pub results: Vec<ScenarioResult>,
}

/// The part of a matrix's `matrix.json` a comparison reads.
#[derive(Debug, Deserialize)]
struct Matrix {
    id: String,
    cells: Vec<Cell>,
}

#[derive(Debug, Deserialize)]
struct Cell {
    kubernetes: crate::toolchain::KubeVersion,
    controller: crate::controller::ControllerRef,
    results: Vec<ScenarioResult>,
}

/// Reads the run at `path`: a `report.json` or a matrix's `matrix.json`, or a directory
/// holding one. A matrix's results are named by their cell (`1.32.5 x openkruise@v1.9.0:
/// <scenario>`), so two matrices compare cell by cell.
pub fn load(path: &Path) -> anyhow::Result<Run> {
    let file: PathBuf = match (path.is_dir(), path.join("matrix.json").is_file()) {
        (true, true) => path.join("matrix.json"),
        (true, false) => path.join("report.json"),
        (false, _) => path.to_path_buf(),
    };
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "read {} (give a run's report.json, a matrix's matrix.json, or its directory)",
            file.display()
        )
    })?;
    if file.file_name().is_some_and(|n| n == "matrix.json") {
        let m: Matrix = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a matrix's report", file.display()))?;
        let results = m
            .cells
            .into_iter()
            .flat_map(|c| {
                let cell = format!("{} x {}", c.kubernetes, c.controller);
                c.results.into_iter().map(move |mut r| {
                    r.scenario = format!("{cell}: {}", r.scenario);
                    r
                })
            })
            .collect();
        return Ok(Run {
            run_id: m.id,
            results,
        });
    }
    serde_json::from_str(&text).with_context(|| format!("{} is not a run's report", file.display()))
}

/// How a scenario came out in one run (its attempts taken together: the worst of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Skipped.
    Skipped,
    /// Passed.
    Pass,
    /// Failed as the ledger predicts.
    ExpectedFail,
    /// Passed on a retry.
    Flaky,
    /// Failed the run (a failure, an unexpected pass, an infrastructure error).
    Fail,
}

impl State {
    fn of(o: &Outcome) -> Self {
        match o {
            Outcome::Skipped { .. } => State::Skipped,
            Outcome::Judged(Verdict::Pass) => State::Pass,
            Outcome::Judged(Verdict::ExpectedFail { .. }) => State::ExpectedFail,
            Outcome::Flaky { .. } => State::Flaky,
            Outcome::Judged(Verdict::Fail | Verdict::UnexpectedPass { .. })
            | Outcome::InfraError { .. } => State::Fail,
        }
    }

    fn label(self) -> &'static str {
        match self {
            State::Skipped => "skipped",
            State::Pass => "pass",
            State::ExpectedFail => "expected-fail",
            State::Flaky => "flaky",
            State::Fail => "FAIL",
        }
    }
}

/// One scenario in one run.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    state: State,
    /// Mean seconds over its attempts.
    seconds: f64,
    /// The first line of its failure, if it failed.
    failure: Option<String>,
}

fn by_scenario(run: &Run) -> BTreeMap<String, Seen> {
    let mut out: BTreeMap<String, (Seen, usize)> = BTreeMap::new();
    for r in &run.results {
        let state = State::of(&r.outcome);
        let failure = r
            .failure
            .as_deref()
            .and_then(|f| f.lines().next())
            .map(str::to_string);
        out.entry(r.scenario.clone())
            .and_modify(|(s, n)| {
                if state > s.state {
                    s.state = state;
                    s.failure = failure.clone();
                }
                s.seconds += r.seconds;
                *n += 1;
            })
            .or_insert((
                Seen {
                    state,
                    seconds: r.seconds,
                    failure,
                },
                1,
            ));
    }
    out.into_iter()
        .map(|(k, (mut s, n))| {
            s.seconds /= n as f64;
            (k, s)
        })
        .collect()
}

/// A scenario whose state changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The scenario.
    pub scenario: String,
    /// Before.
    pub before: State,
    /// After.
    pub after: State,
    /// The first line of its failure now, if it fails now.
    pub failure: Option<String>,
}

/// A scenario that got slower.
#[derive(Debug, Clone, PartialEq)]
pub struct Slower {
    /// The scenario.
    pub scenario: String,
    /// Seconds before.
    pub before: f64,
    /// Seconds now.
    pub after: f64,
}

/// What changed from one run to another.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Diff {
    /// The runs' ids, before and after.
    pub runs: (String, String),
    /// Failing now, not before.
    pub new_failures: Vec<Change>,
    /// Failing before, passing (or expected to fail) now.
    pub fixed: Vec<Change>,
    /// Flaky now, not before.
    pub new_flakes: Vec<Change>,
    /// Other changes of state (a pass now skipped, an expected failure now passing, ...).
    pub other: Vec<Change>,
    /// More than [`SLOWER`] slower (and over [`MIN_SECONDS`]), slowest ratio first.
    pub slower: Vec<Slower>,
    /// Only in the run after.
    pub added: Vec<String>,
    /// Only in the run before.
    pub removed: Vec<String>,
}

impl Diff {
    /// Whether something got worse: a new failure or a new flake.
    pub fn worse(&self) -> bool {
        !self.new_failures.is_empty() || !self.new_flakes.is_empty()
    }
}

/// What changed from `before` to `after`.
pub fn diff(before: &Run, after: &Run) -> Diff {
    let (b, a) = (by_scenario(before), by_scenario(after));
    let mut d = Diff {
        runs: (before.run_id.clone(), after.run_id.clone()),
        ..Diff::default()
    };
    for (name, now) in &a {
        let Some(was) = b.get(name) else {
            d.added.push(name.clone());
            continue;
        };
        if was.state != now.state {
            let c = Change {
                scenario: name.clone(),
                before: was.state,
                after: now.state,
                failure: now.failure.clone(),
            };
            match (was.state, now.state) {
                (_, State::Fail) => d.new_failures.push(c),
                (State::Fail, State::Pass | State::ExpectedFail | State::Flaky) => d.fixed.push(c),
                (_, State::Flaky) => d.new_flakes.push(c),
                _ => d.other.push(c),
            }
        }
        let comparable = |s: &Seen| matches!(s.state, State::Pass | State::ExpectedFail);
        if comparable(was)
            && comparable(now)
            && now.seconds >= MIN_SECONDS
            && now.seconds > was.seconds * SLOWER
        {
            d.slower.push(Slower {
                scenario: name.clone(),
                before: was.seconds,
                after: now.seconds,
            });
        }
    }
    d.removed = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    d.slower
        .sort_by(|x, y| (y.after / y.before.max(0.1)).total_cmp(&(x.after / x.before.max(0.1))));
    d
}

impl std::fmt::Display for Diff {
    /// Markdown: a heading per kind of change, a line per scenario.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "## {} -> {}\n", self.runs.0, self.runs.1)?;
        let changes = |f: &mut std::fmt::Formatter<'_>, title: &str, cs: &[Change]| {
            if cs.is_empty() {
                return Ok(());
            }
            writeln!(f, "### {title} ({})\n", cs.len())?;
            for c in cs {
                write!(
                    f,
                    "- `{}`: {} -> {}",
                    c.scenario,
                    c.before.label(),
                    c.after.label()
                )?;
                match &c.failure {
                    Some(why) if c.after != State::Pass => writeln!(f, ": {why}")?,
                    _ => writeln!(f)?,
                }
            }
            writeln!(f)
        };
        changes(f, "New failures", &self.new_failures)?;
        changes(f, "Fixed", &self.fixed)?;
        changes(f, "New flakes", &self.new_flakes)?;
        changes(f, "Other changes", &self.other)?;
        if !self.slower.is_empty() {
            writeln!(f, "### Slower by more than 20 % ({})\n", self.slower.len())?;
            for s in &self.slower {
                writeln!(
                    f,
                    "- `{}`: {:.1} s -> {:.1} s (x{:.2})",
                    s.scenario,
                    s.before,
                    s.after,
                    s.after / s.before.max(0.1)
                )?;
            }
            writeln!(f)?;
        }
        for (title, names) in [("Added", &self.added), ("Removed", &self.removed)] {
            if !names.is_empty() {
                writeln!(f, "### {title} ({})\n", names.len())?;
                for n in names {
                    writeln!(f, "- `{n}`")?;
                }
                writeln!(f)?;
            }
        }
        if self.new_failures.is_empty()
            && self.fixed.is_empty()
            && self.new_flakes.is_empty()
            && self.other.is_empty()
            && self.slower.is_empty()
            && self.added.is_empty()
            && self.removed.is_empty()
        {
            writeln!(f, "No change.")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::ScenarioResult;

    fn result(name: &str, outcome: Outcome, seconds: f64, failure: Option<&str>) -> ScenarioResult {
        ScenarioResult::fixture(name, outcome, seconds, failure)
    }

    fn run(id: &str, results: Vec<ScenarioResult>) -> Run {
        Run {
            run_id: id.into(),
            results,
        }
    }

    const PASS: Outcome = Outcome::Judged(Verdict::Pass);
    const FAIL: Outcome = Outcome::Judged(Verdict::Fail);

    #[test]
    fn matrices_compare_cell_by_cell() {
        let matrix = |id: &str, outcome: &Outcome| {
            let cells: Vec<serde_json::Value> = ["openkruise@v1.8.3", "openkruise@v1.9.0"]
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "kubernetes": crate::toolchain::KubeVersion::default_version(),
                        "controller": c.parse::<crate::controller::ControllerRef>().unwrap(),
                        "dir": c,
                        "worst": "pass",
                        "results": [result("s/x", if *c == "openkruise@v1.9.0" { outcome.clone() } else { PASS }, 10.0, None)],
                    })
                })
                .collect();
            serde_json::json!({"id": id, "cells": cells})
        };
        let dir = tempfile::tempdir().unwrap();
        for (name, outcome) in [("a", PASS), ("b", FAIL)] {
            let d = dir.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("matrix.json"), matrix(name, &outcome).to_string()).unwrap();
        }
        let (a, b) = (
            load(&dir.path().join("a")).unwrap(),
            load(&dir.path().join("b/matrix.json")).unwrap(),
        );
        assert_eq!(a.run_id, "a");
        let d = diff(&a, &b);
        let failed: Vec<&str> = d.new_failures.iter().map(|c| c.scenario.as_str()).collect();
        assert_eq!(failed, ["1.32.5 x openkruise@v1.9.0: s/x"]);
        assert!(d.added.is_empty() && d.removed.is_empty(), "{d:?}");
        // A directory with neither file names both.
        let e = load(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains("matrix.json"), "{e:#}");
    }

    #[test]
    fn every_kind_of_change_is_found() {
        let flaky = Outcome::Flaky {
            verdict: Verdict::Pass,
        };
        let before = run(
            "a",
            vec![
                result("s/breaks", PASS, 10.0, None),
                result("s/heals", FAIL, 10.0, Some("boom\nmore")),
                result("s/wobbles", PASS, 10.0, None),
                result("s/slows", PASS, 10.0, None),
                result("s/quick", PASS, 1.0, None),
                result("s/gone", PASS, 1.0, None),
                result("s/same", PASS, 10.0, None),
            ],
        );
        let after = run(
            "b",
            vec![
                result(
                    "s/breaks",
                    FAIL,
                    10.0,
                    Some("step 2, 'x', after 1.0 s: no\nmore"),
                ),
                result("s/heals", PASS, 10.0, None),
                result("s/wobbles", flaky, 10.0, None),
                result("s/slows", PASS, 12.5, None),
                // 3x slower but under the noise floor.
                result("s/quick", PASS, 3.0, None),
                result("s/new", PASS, 1.0, None),
                result("s/same", PASS, 11.0, None),
            ],
        );
        let d = diff(&before, &after);
        assert_eq!(d.new_failures.len(), 1);
        assert_eq!(d.new_failures[0].scenario, "s/breaks");
        assert_eq!(
            d.new_failures[0].failure.as_deref(),
            Some("step 2, 'x', after 1.0 s: no")
        );
        assert_eq!(d.fixed[0].scenario, "s/heals");
        assert_eq!(d.new_flakes[0].scenario, "s/wobbles");
        assert_eq!(
            d.slower,
            [Slower {
                scenario: "s/slows".into(),
                before: 10.0,
                after: 12.5
            }]
        );
        assert_eq!(
            (d.added.as_slice(), d.removed.as_slice()),
            (&["s/new".to_string()][..], &["s/gone".to_string()][..])
        );
        assert!(d.worse());
        let text = d.to_string();
        assert!(
            text.contains(
                "### New failures (1)\n\n- `s/breaks`: pass -> FAIL: step 2, 'x', after 1.0 s: no\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("- `s/slows`: 10.0 s -> 12.5 s (x1.25)"),
            "{text}"
        );
    }

    #[test]
    fn attempts_count_together_and_an_unchanged_run_says_so() {
        // Two attempts: one failed, so the scenario failed; its time is their mean.
        let a = run(
            "a",
            vec![
                result("s/x", PASS, 10.0, None),
                result("s/x", FAIL, 20.0, Some("no")),
            ],
        );
        let seen = by_scenario(&a);
        assert_eq!(seen["s/x"].state, State::Fail);
        assert_eq!(seen["s/x"].seconds, 15.0);
        let d = diff(&a, &a);
        assert!(!d.worse());
        assert!(d.to_string().contains("No change."));
    }

    #[test]
    fn a_missing_or_foreign_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains("report.json"), "{e:#}");
        std::fs::write(dir.path().join("report.json"), "{}").unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains("is not a run's report"), "{e:#}");
    }
}
