//! The JUnit report for CI: [`junit`], one test suite per scenario suite, each result a
//! [`test_case`].

use std::collections::BTreeMap;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};

use crate::results::{Outcome, ScenarioResult, Verdict};

/// JUnit XML: one test suite per scenario suite; skips as skipped, expected failures as passes
/// with the bug in their output, regressions and unexpected passes as failures.
pub fn junit<'a>(run_id: &str, results: impl Iterator<Item = &'a ScenarioResult>) -> String {
    let mut report = Report::new(format!("harness {run_id}"));
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    for r in results {
        suites
            .entry(r.suite.clone())
            .or_insert_with(|| TestSuite::new(r.suite.clone()))
            .add_test_case(test_case(r));
    }
    for (_, s) in suites {
        report.add_test_suite(s);
    }
    report.to_string().unwrap_or_default()
}

/// One result as a JUnit test case: skips as skipped, expected failures as passes with the bug
/// in their output, regressions and unexpected passes as failures, flaky results as passes
/// with their failed tries as flaky runs.
pub fn test_case(r: &ScenarioResult) -> TestCase {
    let name = if r.attempt > 1 {
        format!("{}#{}", r.scenario, r.attempt)
    } else {
        r.scenario.clone()
    };
    let mut status = match &r.outcome {
        Outcome::Judged(Verdict::Pass) => TestCaseStatus::success(),
        Outcome::Judged(Verdict::ExpectedFail { .. }) => TestCaseStatus::success(),
        // Its failed tries become <flakyFailure> elements below.
        Outcome::Flaky { .. } => TestCaseStatus::success(),
        Outcome::Judged(Verdict::Fail) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message("regression");
            s.set_description(r.failure.clone().unwrap_or_default());
            s
        }
        Outcome::Judged(Verdict::UnexpectedPass { bug }) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("unexpected pass: known bug {bug} did not show"));
            s
        }
        Outcome::InfraError { reason } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message("infrastructure error");
            s.set_description(reason.clone());
            s
        }
        Outcome::Skipped { reason } => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason.clone());
            s
        }
    };
    // Failed tries before the last: flaky runs of a pass, reruns of a failure.
    status.add_reruns(r.failed_tries.iter().map(|t| {
        let mut rerun = TestRerun::new(NonSuccessKind::Failure);
        rerun.set_time(std::time::Duration::from_secs_f64(t.seconds));
        match (&t.verdict, &t.failure) {
            (Verdict::UnexpectedPass { bug }, _) => {
                rerun.set_message(format!("unexpected pass: known bug {bug} did not show"));
            }
            (_, failure) => {
                rerun.set_message("regression");
                rerun.set_system_out(failure.clone().unwrap_or_default());
            }
        }
        rerun
    }));
    let mut case = TestCase::new(name, status);
    case.set_classname(r.suite.clone());
    case.set_time(std::time::Duration::from_secs_f64(r.seconds));
    if let Outcome::Judged(Verdict::ExpectedFail { bug }) = &r.outcome {
        case.set_system_out(format!(
            "expected failure (known bug {bug}):\n{}",
            r.failure.clone().unwrap_or_default()
        ));
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{flaky, result};

    #[test]
    fn junit_parses_back_with_the_right_counts() {
        let rs = [
            result("a", Outcome::Judged(Verdict::Pass), None),
            result("b", Outcome::Judged(Verdict::Fail), Some("boom")),
            result(
                "c",
                Outcome::Judged(Verdict::ExpectedFail { bug: "k".into() }),
                Some("sig"),
            ),
            result(
                "d",
                Outcome::Judged(Verdict::UnexpectedPass { bug: "k".into() }),
                None,
            ),
            result(
                "e",
                Outcome::Skipped {
                    reason: "needs 1.27".into(),
                },
                None,
            ),
        ];
        let xml = junit("r1", rs.iter());
        let parsed = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(parsed.tests, 5);
        assert_eq!(parsed.failures, 2);
        let suite = &parsed.test_suites[0];
        let skipped = suite
            .test_cases
            .iter()
            .filter(|c| matches!(c.status, TestCaseStatus::Skipped { .. }))
            .count();
        assert_eq!(skipped, 1);
        let c = suite
            .test_cases
            .iter()
            .find(|c| c.name.as_str() == "c")
            .unwrap();
        assert!(
            c.system_out
                .as_ref()
                .unwrap()
                .as_str()
                .contains("known bug k")
        );
    }

    #[test]
    fn a_flaky_result_is_a_junit_pass_with_its_failed_tries_as_flaky_runs() {
        let mut failed = result("b", Outcome::Judged(Verdict::Fail), Some("again"));
        failed.failed_tries = flaky("x").failed_tries;
        let rs = [flaky("a"), failed];
        let xml = junit("r1", rs.iter());
        let parsed = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!((parsed.tests, parsed.failures), (2, 1));
        let cases = &parsed.test_suites[0].test_cases;
        match &cases[0].status {
            TestCaseStatus::Success { flaky_runs } => {
                assert_eq!(flaky_runs.len(), 1);
                let out = flaky_runs[0].system_out.as_ref().unwrap();
                assert!(out.as_str().contains("timed out <first>"));
            }
            other => panic!("a flaky result passes: {other:?}"),
        }
        match &cases[1].status {
            TestCaseStatus::NonSuccess { reruns, .. } => assert_eq!(reruns.runs.len(), 1),
            other => panic!("a failure stays one: {other:?}"),
        }
    }
}
