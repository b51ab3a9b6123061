//! What an exploration reports: [`Summary`] (start there: counts, findings, pace, reach), each
//! finding as [`Reported`] (shrunk, confirmed, written), and [`Explored`], an exploration made
//! beside a matrix cell or a qualification; [`read_summary`] reads a summary back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::oracle::Finding;
use super::trial::Trial;
use super::{Gates, pace, reach};

/// A finding as reported: shrunk, confirmed, written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reported {
    /// What the shrunk trial fired.
    pub finding: Finding,
    /// The trial that first fired it.
    pub original: Trial,
    /// The shrunk trial.
    pub trial: Trial,
    /// Runs of the shrunk trial that fired it, of [`Options::confirm`].
    pub reproduced: usize,
    /// Runs made to confirm it.
    pub confirm_runs: usize,
    /// Whether every confirming run fired it.
    pub stable: bool,
    /// Seconds into the exploration when it was first seen.
    pub first_seen: f64,
    /// Its directory.
    pub dir: PathBuf,
    /// The controller it was found on.
    pub controller: String,
    /// The Kubernetes version it was found on.
    pub kubernetes: String,
    /// The baseline release it was compared with, if any.
    #[serde(default)]
    pub baseline: Option<String>,
    /// The gates of the cell it was found on.
    #[serde(default, skip_serializing_if = "Gates::is_empty")]
    pub gates: Gates,
    /// The other keys it stood for: those of the findings counted as its repeats (alike it:
    /// the same cause on another field, or at the other verb) and the key it fired with before
    /// shrinking, in the order first seen. A finding hides none of the keys its trials showed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

impl Reported {
    /// Whether it was confirmed at all (a finding written as it fired, past shrinking's share
    /// of the budget, was not: `--replay` confirms it).
    pub fn confirmed(&self) -> bool {
        self.confirm_runs > 0
    }

    /// Whether its confirming runs ran and none of them fired it: it fired once, never again.
    pub fn refuted(&self) -> bool {
        self.confirmed() && self.reproduced == 0
    }

    /// How often its confirming runs fired it: `3/3`, `1/3 (unstable)`, or that it was not
    /// confirmed.
    pub fn reproduction(&self) -> String {
        match (self.confirmed(), self.stable) {
            (false, _) => "not confirmed (`--replay` confirms it)".to_string(),
            (true, true) => format!("{}/{}", self.reproduced, self.confirm_runs),
            (true, false) => format!("{}/{} (unstable)", self.reproduced, self.confirm_runs),
        }
    }
}

/// What an exploration did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    /// The controller.
    pub controller: String,
    /// Kubernetes.
    pub kubernetes: String,
    /// The seed.
    pub seed: u64,
    /// Trials run, by mode and subject.
    pub trials: BTreeMap<String, usize>,
    /// Findings, in the order they were first seen.
    pub findings: Vec<Reported>,
    /// Seconds, bring-up included.
    pub seconds: f64,
    /// The baseline release every trial was compared with, if any.
    #[serde(default)]
    pub baseline: Option<String>,
    /// The gates of the cell.
    #[serde(default, skip_serializing_if = "Gates::is_empty")]
    pub gates: Gates,
    /// Where the time went.
    #[serde(default)]
    pub pace: pace::Pace,
    /// What it reached of what the API offers, by subject.
    #[serde(default)]
    pub reach: reach::Reach,
}

impl Summary {
    /// Findings of the stable kind.
    pub fn stable(&self) -> impl Iterator<Item = &Reported> {
        self.findings.iter().filter(|r| r.stable)
    }
}

/// An exploration made beside a matrix cell or a qualification: where it wrote, and its
/// findings a line each (differences to triage, not part of any verdict).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Explored {
    /// Its directory (`explore.json`, `findings.md`, `report.html`, `findings/`).
    pub dir: PathBuf,
    /// Its seed.
    pub seed: u64,
    /// Trials run.
    pub trials: usize,
    /// Its findings, a line each: oracle, kind, key, how often it reproduced.
    pub findings: Vec<String>,
}

impl Explored {
    /// What a person reads of it after a run: `explored <what>: ...` with its counts, seed and
    /// directory, then a `FINDING` line per finding.
    pub fn lines(&self, what: &str) -> Vec<String> {
        let mut out = vec![format!(
            "explored {what}: {} trials, {} finding(s) to triage (seed {}; {})",
            self.trials,
            self.findings.len(),
            self.seed,
            self.dir.display()
        )];
        out.extend(self.findings.iter().map(|f| format!("FINDING     {f}")));
        out
    }
}

/// Reads a summary [`output::write_summary`] wrote; of an exploration over gate sets
/// (`cells.json`, [`super::gates::Cells`]), its cells as one ([`super::gates::Cells::merged`]).
pub fn read_summary(dir: &std::path::Path) -> anyhow::Result<Summary> {
    let cells = dir.join("cells.json");
    if cells.is_file() && !dir.join("explore.json").is_file() {
        let text =
            std::fs::read_to_string(&cells).with_context(|| format!("read {}", cells.display()))?;
        let c: super::gates::Cells =
            serde_json::from_str(&text).with_context(|| format!("parse {}", cells.display()))?;
        return c
            .merged()
            .with_context(|| format!("no cell of {} ran", cells.display()));
    }
    let p = dir.join("explore.json");
    let text = std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_set_run_reads_as_its_cells_merged_and_a_plain_one_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        let cell = |seconds: f64| Summary {
            controller: "openkruise@v1.9.0".into(),
            seconds,
            ..Summary::default()
        };
        let cells = super::super::gates::Cells {
            cells: vec![super::super::gates::CellRun {
                profile: None,
                on: Default::default(),
                budget: 60.0,
                dir: "cells/01-defaults".into(),
                summary: Some(cell(70.0)),
                error: None,
            }],
            ..Default::default()
        };
        super::super::gates::write(dir.path(), &cells).unwrap();
        let read = read_summary(dir.path()).unwrap();
        assert_eq!(
            (read.controller.as_str(), read.seconds),
            ("openkruise@v1.9.0", 70.0)
        );
        // No cell ran: said, not an empty exploration.
        let none = super::super::gates::Cells::default();
        super::super::gates::write(dir.path(), &none).unwrap();
        let e = read_summary(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains("no cell"), "{e:#}");
        // A plain exploration's own explore.json comes first.
        std::fs::write(
            dir.path().join("explore.json"),
            serde_json::to_string(&cell(5.0)).unwrap(),
        )
        .unwrap();
        assert_eq!(read_summary(dir.path()).unwrap().seconds, 5.0);
    }
}
