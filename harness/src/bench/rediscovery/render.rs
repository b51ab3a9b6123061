//! The benchmark's report: [`Report`] is where to start, the rows and what ran, rendered by
//! [`markdown`] as `rediscovery.md` (and written as `rediscovery.json`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::{Fixed, Found, Row, Seen, duration};

/// One exploration as it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ran {
    /// The release.
    pub release: String,
    /// Its command line (the harness's arguments).
    pub command: String,
    /// Wall seconds, bring-up and teardown included.
    pub wall: f64,
    /// Whether it exited 0 and its `explore.json` was read.
    pub ok: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    /// Trials run.
    pub trials: usize,
    /// Findings reported, and of them the stable ones.
    pub findings: (usize, usize),
    /// Findings that would count but were written as they fired, replayed to confirm them
    /// after the exploration, and of them those never fired again.
    pub replayed: (usize, usize),
    /// Its directory (`explore.json`, `findings/`).
    pub dir: Option<PathBuf>,
    /// Its output.
    pub log: PathBuf,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// When (RFC 3339, UTC).
    pub date: String,
    /// The commit of the binary that ran the bench (see [`crate::bench::commit`]).
    pub commit: String,
    /// CPUs and memory.
    pub machine: crate::bench::flakes::tally::Machine,
    /// The command that reproduces it.
    pub command: String,
    /// Each exploration's budget, seconds.
    pub budget: u64,
    /// Each exploration's seed.
    pub seed: u64,
    /// The explorations, in the order they ran.
    pub explorations: Vec<Ran>,
    /// Each bug.
    pub bugs: Vec<Row>,
}

/// A Markdown table cell: no `|` or line break breaks the row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The report as Markdown: what ran, a summary strip, the table (bug, bad release, found,
/// oracle, after, fixed release, clean), then what counted and each row's note.
pub fn markdown(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "## Rediscovery\n");
    out.push_str(&r.machine.provenance(&r.date, &r.commit, &r.command));
    let judged: Vec<&Row> = r
        .bugs
        .iter()
        .filter(|b| matches!(b.found, Found::Found(_) | Found::NotFound))
        .collect();
    let found = judged
        .iter()
        .filter(|b| matches!(b.found, Found::Found(_)))
        .count();
    let mut rows: BTreeMap<&str, bool> = BTreeMap::new();
    for b in &judged {
        if let Some(row) = &b.bug.benchmark {
            *rows.entry(row).or_default() |= matches!(b.found, Found::Found(_));
        }
    }
    let checked: Vec<&Row> = r
        .bugs
        .iter()
        .filter(|b| matches!(b.fixed, Fixed::Clean | Fixed::Seen(_)))
        .collect();
    let clean = checked
        .iter()
        .filter(|b| matches!(b.fixed, Fixed::Clean))
        .count();
    let _ = writeln!(
        out,
        "**Found {found} of {}** bugs on their bad release · **the benchmark's rows: {} of {}** \
         · **fixed releases clean: {clean} of {}** · {} exploration(s) of {} each, seed {}\n",
        judged.len(),
        rows.values().filter(|f| **f).count(),
        rows.len(),
        checked.len(),
        r.explorations.len(),
        duration(Duration::from_secs(r.budget)),
        r.seed
    );
    let _ = writeln!(
        out,
        "| bug | bad release | found | oracle | after | fixed release | clean |"
    );
    let _ = writeln!(out, "|---|---|---|---|--:|---|---|");
    for row in &r.bugs {
        let b = &row.bug;
        let (found, after) = match &row.found {
            Found::Found(s) => (
                match (s.confirm_runs, s.stable) {
                    (0, _) => "**yes** (not confirmed)".to_string(),
                    (_, true) => "**yes**".to_string(),
                    _ => format!("**yes** (unstable, {}/{})", s.reproduced, s.confirm_runs),
                },
                format!("{:.0} s", s.after),
            ),
            Found::NotFound => ("no".into(), "—".into()),
            Found::NotRun { .. } => ("not run".into(), "—".into()),
            Found::NotAsked => ("not asked".into(), "—".into()),
        };
        let clean = match &row.fixed {
            Fixed::Unfixed => "unfixed".to_string(),
            Fixed::Clean => "yes".into(),
            Fixed::Seen(s) => format!("**no**: after {:.0} s", s.after),
            Fixed::NotRun { .. } => "not run".into(),
            Fixed::NotAsked => "not asked".into(),
        };
        let id = match &b.benchmark {
            Some(row) => format!("`{}` ({})", b.id, cell(row)),
            None => format!("`{}`", b.id),
        };
        let _ = writeln!(
            out,
            "| {id} | {} | {found} | {} {} | {after} | {} | {clean} |",
            b.bad,
            b.finding.oracle,
            cell(&b.finding.kind),
            b.fixed.as_deref().unwrap_or("—"),
        );
    }
    let mut notes = vec![];
    for row in &r.bugs {
        let b = &row.bug;
        let seen = |what: &str, s: &Seen| {
            format!(
                "`{}` {what}: {} `{}` (`{}`)",
                b.id,
                cell(&s.subject),
                cell(&s.key),
                s.dir.display()
            )
        };
        if let Found::Found(s) = &row.found {
            notes.push(seen(&format!("on {}", b.bad), s));
        }
        if let Fixed::Seen(s) = &row.fixed {
            notes.push(seen(
                &format!(
                    "on {}, where it is fixed",
                    b.fixed.as_deref().unwrap_or("?")
                ),
                s,
            ));
        }
        if let Some(n) = &b.note {
            notes.push(format!("`{}`: {}", b.id, cell(n)));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\nWhat counted, and notes:\n");
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = writeln!(
        out,
        "\n| release | wall s | ran | trials | findings (stable) | replayed (never again) | log |"
    );
    let _ = writeln!(out, "|---|--:|---|--:|--:|--:|---|");
    for e in &r.explorations {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {} ({}) | {} ({}) | `{}` |",
            e.release,
            e.wall,
            match &e.error {
                None => "yes".to_string(),
                Some(why) => format!("**no**: {}", cell(why)),
            },
            e.trials,
            e.findings.0,
            e.findings.1,
            e.replayed.0,
            e.replayed.1,
            e.log.display()
        );
    }
    out
}
