//! The page of an exploration: `report.html` beside `explore.json`, one self-contained file
//! listing the findings by oracle and kind, each with what was seen and wanted, how often it
//! reproduced, its shrunk trial, and links to its reproduction files, then the reach table.
//! Start with [`html`], which renders the page's askama template (`report/explore.html`).

use std::collections::BTreeMap;
use std::path::Path;

use askama::Template;

use crate::explore::oracle::Oracle;
use crate::explore::{Reported, Summary};

/// The page (`report/explore.html`): every value it shows, as text the template escapes.
#[derive(Template)]
#[template(path = "report/explore.html")]
struct Page<'a> {
    controller: &'a str,
    kubernetes: &'a str,
    against: String,
    seed: u64,
    total: usize,
    seconds: String,
    stable: usize,
    unstable: usize,
    unconfirmed: usize,
    trials: String,
    oracles: Vec<OracleSection<'a>>,
    reach: Vec<ReachRow<'a>>,
}

/// An oracle's findings, by kind.
struct OracleSection<'a> {
    short: &'static str,
    name: String,
    count: usize,
    kinds: Vec<(&'a str, Vec<FindingView<'a>>)>,
}

/// One finding as the page shows it.
struct FindingView<'a> {
    stable: bool,
    key: &'a str,
    observed: &'a str,
    expected: &'a str,
    reproduction: String,
    seen: String,
    controller: &'a str,
    kubernetes: &'a str,
    steps: usize,
    trial: String,
    /// Its directory relative to the page, for links.
    at: String,
    /// Its directory as written, for `--replay`.
    dir: String,
}

/// A subject's row of the reach table ([`crate::explore::reach`]).
struct ReachRow<'a> {
    subject: &'a str,
    fields: String,
    values: String,
    beyond: usize,
    rows: usize,
    row_creates: usize,
    steps: String,
    trials: String,
}

/// The page of `summary`, whose findings' directories are linked relative to `dir` (where
/// the page is written).
pub fn html(summary: &Summary, dir: &Path) -> String {
    let stable = summary.stable().count();
    let mut by_oracle: BTreeMap<Oracle, BTreeMap<&str, Vec<&Reported>>> = BTreeMap::new();
    for r in &summary.findings {
        by_oracle
            .entry(r.finding.oracle)
            .or_default()
            .entry(r.finding.subject.as_str())
            .or_default()
            .push(r);
    }
    let oracles = by_oracle
        .into_iter()
        .map(|(oracle, kinds)| OracleSection {
            short: oracle.short(),
            name: serde_json::to_value(oracle)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            count: kinds.values().map(Vec::len).sum(),
            kinds: kinds
                .into_iter()
                .map(|(kind, found)| (kind, found.into_iter().map(|r| finding(r, dir)).collect()))
                .collect(),
        })
        .collect();
    let mut against = summary
        .baseline
        .as_ref()
        .map(|b| format!(", against {b}"))
        .unwrap_or_default();
    if !summary.gates.is_empty() {
        against.push_str(&format!(", {}", summary.gates));
    }
    let page = Page {
        controller: &summary.controller,
        kubernetes: &summary.kubernetes,
        against,
        seed: summary.seed,
        total: summary.trials.values().sum(),
        seconds: format!("{:.0}", summary.seconds),
        stable,
        unstable: summary.findings.iter().filter(|r| r.confirmed()).count() - stable,
        unconfirmed: summary.findings.iter().filter(|r| !r.confirmed()).count(),
        trials: summary
            .trials
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        oracles,
        reach: summary
            .reach
            .subjects
            .iter()
            .map(|(name, r)| ReachRow {
                subject: name,
                fields: r.fields.show(),
                values: r.values.show(),
                beyond: r.beyond,
                rows: r.rows,
                row_creates: r.row_creates,
                steps: r.steps_text(),
                trials: r.trials_text(),
            })
            .collect(),
    };
    let mut out = page.render().unwrap_or_else(|e| {
        format!("<!doctype html>\n<p>the exploration page failed to render: {e}</p>")
    });
    out.push('\n');
    out
}

/// Finding `r` as the page shows it, its directory relative to `dir`.
fn finding<'a>(r: &'a Reported, dir: &Path) -> FindingView<'a> {
    FindingView {
        stable: r.stable,
        key: &r.finding.key,
        observed: &r.finding.observed,
        expected: &r.finding.expected,
        reproduction: r.reproduction(),
        seen: format!("{:.0}", r.first_seen),
        controller: &r.controller,
        kubernetes: &r.kubernetes,
        steps: r.trial.steps.len(),
        trial: r.trial.to_yaml(),
        at: r
            .dir
            .strip_prefix(dir)
            .unwrap_or(&r.dir)
            .display()
            .to_string(),
        dir: r.dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::Finding;
    use crate::explore::trial::{Mode, Step, Trial};

    fn reported(oracle: Oracle, subject: &str, key: &str, stable: bool) -> Reported {
        let trial = Trial {
            subject: subject.into(),
            mode: Mode::Admission,
            seed: 1,
            index: 0,
            steps: vec![Step::Create {
                set: [("spec.x".to_string(), serde_json::json!("<b>"))].into(),
            }],
        };
        Reported {
            finding: Finding {
                oracle,
                subject: subject.into(),
                key: key.into(),
                observed: "seen <script>".into(),
                expected: "wanted".into(),
            },
            original: trial.clone(),
            trial,
            reproduced: if stable { 3 } else { 1 },
            confirm_runs: 3,
            stable,
            first_seen: 12.0,
            dir: format!("/r/run/findings/01-{}", oracle.short()).into(),
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32".into(),
            baseline: None,
            gates: Default::default(),
            also: vec![],
        }
    }

    #[test]
    fn findings_are_grouped_by_oracle_then_kind_escaped_and_linked_relative_to_the_page() {
        let summary = Summary {
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32".into(),
            seed: 7,
            trials: [("admission CloneSet".to_string(), 40)].into(),
            findings: vec![
                reported(Oracle::Native, "CloneSet", "admits a", true),
                reported(Oracle::Realizable, "BroadcastJob", "drops b", false),
                reported(Oracle::Native, "BroadcastJob", "admits c", true),
            ],
            seconds: 60.0,
            baseline: Some("openkruise@v1.8.0".into()),
            gates: crate::explore::Gates {
                cluster: [("InPlacePodVerticalScaling".to_string(), true)].into(),
                controller: Default::default(),
            },
            pace: Default::default(),
            reach: Default::default(),
        };
        let page = html(&summary, Path::new("/r/run"));
        assert!(page.contains("cluster InPlacePodVerticalScaling=true"));
        let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} in the page"));
        assert!(at("id=\"O1\"") < at("id=\"O4\""), "oracles in order");
        assert!(
            at("admits c") < at("admits a"),
            "kinds in order within an oracle"
        );
        assert!(page.contains("2 stable finding(s)") && page.contains("1 unstable"));
        assert!(page.contains("href=\"findings/01-O4/chainsaw-test.yaml\""));
        assert!(!page.contains("<script>") && page.contains("&#60;script&#62;"));
        assert!(page.contains("40 trials in 60 s"));
        assert!(page.contains("against openkruise@v1.8.0"));
    }

    #[test]
    fn a_finding_written_unconfirmed_is_said_so_not_counted_unstable() {
        let mut unconfirmed = reported(Oracle::Native, "CloneSet", "admits a", false);
        (unconfirmed.reproduced, unconfirmed.confirm_runs) = (0, 0);
        assert_eq!(
            unconfirmed.reproduction(),
            "not confirmed (`--replay` confirms it)"
        );
        let unstable = reported(Oracle::Native, "CloneSet", "admits b", false);
        assert_eq!(unstable.reproduction(), "1/3 (unstable)");
        let stable = reported(Oracle::Native, "CloneSet", "admits c", true);
        assert_eq!(stable.reproduction(), "3/3");
        let summary = Summary {
            findings: vec![unconfirmed, unstable, stable],
            ..Summary::default()
        };
        let page = html(&summary, Path::new("/r/run"));
        assert!(page.contains("1 stable finding(s)"), "{page}");
        assert!(page.contains(">1 unstable<"), "{page}");
        assert!(page.contains(">1 not confirmed<"), "{page}");
        assert!(!page.contains("0/0"), "{page}");
        assert!(!page.contains("id=\"reach\""), "no reach, no table: {page}");
        let mut summary = summary;
        summary.reach.offer(
            "CloneSet",
            &[[("spec.replicas".to_string(), serde_json::json!(0))].into()],
        );
        let page = html(&summary, Path::new("/r/run"));
        assert!(
            page.contains("<td>CloneSet</td><td>0/1 (0 %)</td><td>0/1 (0 %)</td>"),
            "{page}"
        );
    }
}
