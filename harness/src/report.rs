//! Reporters fed by the run's event stream: [`Terminal`] (progress and a summary table) and
//! [`Files`] (JSON, JUnit and a single-file HTML report under `reports/<run-id>/`, rewritten
//! atomically after every finished scenario, with `reports/latest` pointing at the newest run).
//! Results are kept in a stable order (suite, scenario, attempt) whatever order they finish in.
//! Both also report API field coverage ([`coverage_of`]): the own spec fields of every CRD of
//! the controller under test that the scenarios set.
//!
//! Where each part is: [`Terminal`] in `terminal`, [`Files`] and [`JsonReport`] in `files`, the
//! JUnit mapping in `junit`, the HTML page ([`html`], its template `report/page.html`) in
//! `page`, field coverage in `coverage`.

mod coverage;
pub mod diff;
pub mod explore;
mod files;
mod junit;
mod page;
pub mod plot;
pub mod summary;
mod terminal;
pub mod timeline;

use crate::results::ScenarioResult;

pub use coverage::{
    ReadError, Recorded, RunCoverage, coverage_of, coverage_table, run_coverage, uncovered_list,
};
pub use files::{Files, JsonReport, atomic_write, standard};
pub use junit::{junit, test_case};
pub use page::{class_of, esc, html, rerun_command};
pub use terminal::{Terminal, failure_rates};

type Key = (String, String, usize);

fn key(r: &ScenarioResult) -> Key {
    (r.suite.clone(), r.scenario.clone(), r.attempt)
}

/// Results that the reporters' tests share.
#[cfg(test)]
mod fixtures {
    use crate::results::{Diagnostics, Outcome, ScenarioResult, Verdict};

    pub(super) fn result(name: &str, outcome: Outcome, failure: Option<&str>) -> ScenarioResult {
        ScenarioResult {
            scenario: name.into(),
            suite: "s".into(),
            attempt: 1,
            profile: "default".into(),
            outcome,
            failure: failure.map(String::from),
            seconds: 1.5,
            diagnostics: failure.map(|_| Diagnostics {
                events: vec!["Warning FailedCreate <boom>".into()],
                objects: "kind: Pod".into(),
                manager_log: "E1121 line".into(),
                plots: vec![],
            }),
            sent: Default::default(),
            failed_tries: vec![],
            steps: vec![],
        }
    }

    pub(super) fn flaky(name: &str) -> ScenarioResult {
        let mut r = result(
            name,
            Outcome::Flaky {
                verdict: Verdict::Pass,
            },
            None,
        );
        r.failed_tries = vec![crate::results::FailedTry {
            verdict: Verdict::Fail,
            failure: Some("timed out <first>".into()),
            seconds: 3.0,
            diagnostics: None,
        }];
        r
    }
}
