//! A suite's results: [`results`] is where to start. It reads the suite's Ginkgo report as one
//! result per spec judged by the ledger ([`suite_error`] when there is no report), and
//! [`area_table`] sums them up by area of the suite ([`areas`]).

use std::collections::BTreeMap;

use super::SUITE;
use crate::results::{Outcome, ScenarioResult};
use crate::run::ginkgo::{self, SpecState};
use crate::scenario::record::Sends;

/// The one result of a suite that could not run (its binary did not build, its configuration
/// could not be read, its report is missing): an infrastructure error named `upstream/suite`.
pub fn suite_error(reason: &str, profile: &str) -> ScenarioResult {
    crate::run::unrun(
        &format!("{SUITE}/suite"),
        SUITE,
        profile,
        Outcome::InfraError {
            reason: reason.into(),
        },
    )
}

/// The result of one spec.
pub(super) fn result(
    name: String,
    profile: &str,
    outcome: Outcome,
    failure: Option<String>,
    seconds: f64,
) -> ScenarioResult {
    ScenarioResult {
        scenario: format!("{SUITE}/{name}"),
        suite: SUITE.into(),
        attempt: 1,
        profile: profile.into(),
        outcome,
        failure,
        seconds,
        diagnostics: None,
        sent: Sends::default(),
        failed_tries: vec![],
        steps: vec![],
    }
}

/// Why a spec the run's stop interrupted has no verdict.
pub const INTERRUPTED: &str = "interrupted: the run was stopped while the spec ran";

/// The results of a finished suite run from its JSON report: specs that ran are judged by
/// `judge` (name, failure -> outcome); specs the suite skipped itself are skipped with its
/// message; specs the focus and skip left out are not results at all.
pub fn results(
    report: &str,
    profile: &str,
    judge: impl Fn(&str, Option<&str>) -> Outcome,
) -> Result<Vec<ScenarioResult>, String> {
    let mut out = vec![];
    for s in ginkgo::parse(report)? {
        let name = format!("{SUITE}/{}", s.name);
        match s.state {
            SpecState::Skipped => {
                if let Some(reason) = s.message {
                    out.push(result(
                        s.name,
                        profile,
                        Outcome::Skipped { reason },
                        None,
                        s.seconds,
                    ));
                }
            }
            SpecState::Passed => {
                out.push(result(s.name, profile, judge(&name, None), None, s.seconds));
            }
            SpecState::Interrupted => out.push(result(
                s.name,
                profile,
                Outcome::Skipped {
                    reason: INTERRUPTED.into(),
                },
                None,
                s.seconds,
            )),
            SpecState::Failed => {
                let failure = s.message.unwrap_or_else(|| "failed".into());
                let outcome = judge(&name, Some(&failure));
                out.push(result(s.name, profile, outcome, Some(failure), s.seconds));
            }
        }
    }
    Ok(out)
}

/// The file of a suite's work directory that holds its [`area_table`].
pub const AREAS_FILE: &str = "areas.txt";

/// The area of each spec of a Ginkgo report (its outermost container: `CloneSet`,
/// `[apps] StatefulSet`), by the spec's full text.
pub fn areas(report: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(ginkgo::parse(report)?
        .into_iter()
        .map(|s| (s.name, s.area))
        .collect())
}

/// `results` of an upstream suite counted by area (`areas` from [`areas`]; a result of no
/// spec, such as a failed `BeforeSuite`, counts as `(suite)`): the specs, and of them how many
/// passed, failed (a failure, an unexpected pass or an infrastructure error), failed as a known
/// bug of the ledger, and were skipped. A line per area and one for all.
pub fn area_table(results: &[ScenarioResult], areas: &BTreeMap<String, String>) -> String {
    use crate::results::Verdict;
    #[derive(Default)]
    struct Row {
        specs: usize,
        passed: usize,
        failed: usize,
        known: usize,
        skipped: usize,
    }
    let prefix = format!("{SUITE}/");
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    let mut all = Row::default();
    for r in results {
        let name = r.scenario.strip_prefix(&prefix).unwrap_or(&r.scenario);
        let area = areas.get(name).map_or("(suite)", String::as_str);
        for row in [rows.entry(area).or_default(), &mut all] {
            row.specs += 1;
            match &r.outcome {
                Outcome::Judged(Verdict::Pass) | Outcome::Flaky { .. } => row.passed += 1,
                Outcome::Judged(Verdict::ExpectedFail { .. }) => row.known += 1,
                Outcome::Skipped { .. } => row.skipped += 1,
                Outcome::Judged(Verdict::Fail | Verdict::UnexpectedPass { .. })
                | Outcome::InfraError { .. } => row.failed += 1,
            }
        }
    }
    let line = |area: &str, r: &Row| {
        format!(
            "{area:<40} {:>5} {:>6} {:>6} {:>5} {:>7}\n",
            r.specs, r.passed, r.failed, r.known, r.skipped
        )
    };
    let mut out = format!(
        "{:<40} {:>5} {:>6} {:>6} {:>5} {:>7}\n",
        "AREA", "SPECS", "PASSED", "FAILED", "KNOWN", "SKIPPED"
    );
    for (area, r) in &rows {
        out.push_str(&line(area, r));
    }
    out.push_str(&line("all", &all));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Verdict;
    use crate::run::upstream::skipped;
    use crate::run::upstream::{Unservable, UpstreamSuite};
    use std::path::Path;

    /// The results of `report`, a spec with a failure judged a failure, else a pass.
    fn judged_by_failure(report: &str) -> Vec<ScenarioResult> {
        results(report, "upstream", |name, failure| {
            assert!(name.starts_with("upstream/"), "{name}");
            Outcome::Judged(if failure.is_some() {
                Verdict::Fail
            } else {
                Verdict::Pass
            })
        })
        .unwrap()
    }

    /// Each result's name and outcome label.
    fn labels(results: &[ScenarioResult]) -> Vec<(&str, &str)> {
        results
            .iter()
            .map(|r| (r.scenario.as_str(), r.outcome.label()))
            .collect()
    }

    #[test]
    fn a_stopped_suite_keeps_what_ran_and_its_interrupted_specs_have_no_verdict() {
        // What Ginkgo writes for a suite it interrupts: the specs that ended, the running ones
        // interrupted by the signal (or by another process of the suite), the rest skipped.
        let report = r#"[{"SpecReports": [
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "scales", "State": "passed", "RunTime": 1000000000},
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "updates", "State": "interrupted", "RunTime": 2000000000,
           "Failure": {"Message": "Interrupted by User"}},
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "aborted", "State": "interrupted",
           "Failure": {"Message": "Interrupted by Other Ginkgo Process"}},
          {"ContainerHierarchyTexts": ["CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "never ran", "State": "skipped"}
        ]}]"#;
        let judged = judged_by_failure(report);
        assert_eq!(
            labels(&judged),
            [
                ("upstream/CloneSet scales", "pass"),
                ("upstream/CloneSet updates", "skipped"),
                ("upstream/CloneSet aborted", "FAIL"),
            ]
        );
        assert!(
            matches!(&judged[1].outcome, Outcome::Skipped { reason } if reason == INTERRUPTED),
            "{:?}",
            judged[1].outcome
        );
    }

    #[test]
    fn specs_become_results_judged_by_name_and_filtered_specs_are_left_out() {
        let report = r#"[{"SpecReports": [
          {"ContainerHierarchyTexts": ["[apps] CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "scales", "State": "passed", "RunTime": 1000000000},
          {"ContainerHierarchyTexts": ["[apps] CloneSet"], "LeafNodeType": "It",
           "LeafNodeText": "updates", "State": "failed", "RunTime": 2000000000,
           "Failure": {"Message": "boom"}},
          {"ContainerHierarchyTexts": ["[apps] Job"], "LeafNodeType": "It",
           "LeafNodeText": "not focused", "State": "skipped"},
          {"ContainerHierarchyTexts": ["[apps] Job"], "LeafNodeType": "It",
           "LeafNodeText": "needs three workers", "State": "skipped",
           "Failure": {"Message": "only 1 worker"}}
        ]}]"#;
        let judged = judged_by_failure(report);
        assert_eq!(
            labels(&judged),
            [
                ("upstream/[apps] CloneSet scales", "pass"),
                ("upstream/[apps] CloneSet updates", "FAIL"),
                ("upstream/[apps] Job needs three workers", "skipped"),
            ]
        );
        assert_eq!(judged[1].failure.as_deref(), Some("boom"));
        assert_eq!(judged[1].suite, SUITE);

        // By area: the run's specs, a spec the harness skipped and a failed suite node.
        let mut all = judged.clone();
        all.extend(skipped(
            &[Unservable {
                name: "[apps] CloneSet recreates".into(),
                text: "[apps] CloneSet recreates".into(),
                reason: "needs the node daemon".into(),
            }],
            "upstream",
        ));
        all.push(suite_error("no report", "upstream"));
        let mut known = all[0].clone();
        known.outcome = Outcome::Judged(Verdict::ExpectedFail { bug: "b".into() });
        known.scenario = "upstream/[apps] CloneSet known".into();
        all.push(known);
        let mut by = areas(report).unwrap();
        by.insert("[apps] CloneSet recreates".into(), "[apps] CloneSet".into());
        by.insert("[apps] CloneSet known".into(), "[apps] CloneSet".into());
        let table = area_table(&all, &by);
        let counts = |area: &str| -> Vec<&str> {
            let l = table.lines().find(|l| l.starts_with(area)).unwrap();
            l[40..].split_whitespace().collect()
        };
        assert_eq!(table.lines().count(), 5, "{table}");
        assert_eq!(
            counts("AREA"),
            ["SPECS", "PASSED", "FAILED", "KNOWN", "SKIPPED"]
        );
        assert_eq!(counts("(suite)"), ["1", "0", "1", "0", "0"], "{table}");
        assert_eq!(
            counts("[apps] CloneSet"),
            ["4", "1", "1", "1", "1"],
            "{table}"
        );
        assert_eq!(counts("[apps] Job"), ["1", "0", "0", "0", "1"], "{table}");
        assert_eq!(counts("all"), ["6", "1", "2", "1", "2"], "{table}");
        let s = UpstreamSuite {
            from: "openkruise@v1.9.0".parse().unwrap(),
            focus: vec!["CloneSet".into()],
            skip: vec!["Scaling".into()],
            procs: 4,
        };
        let args = s.args(Path::new("/w/r.json"));
        assert!(args.contains(&"--ginkgo.json-report=/w/r.json".to_string()));
        assert!(args.contains(&"--ginkgo.focus=CloneSet".to_string()));
        assert!(args.contains(&"--ginkgo.skip=Scaling".to_string()));
        // In parallel, the `ginkgo` command gets the same settings as it spells them, and the
        // suite binary last.
        let cli = s.cli_args(Path::new("/w"), Path::new("/w/kruise-e2e.test"));
        assert_eq!(cli[0], "--procs=4");
        assert_eq!(cli.last().unwrap(), "/w/kruise-e2e.test");
        for a in [
            "--output-dir=/w",
            "--json-report=ginkgo-report.json",
            "--focus=CloneSet",
            "--skip=Scaling",
            "--v",
        ] {
            assert!(cli.contains(&a.to_string()), "{a} in {cli:?}");
        }
        assert!(!cli.iter().any(|a| a.starts_with("--ginkgo.")), "{cli:?}");
    }
}
