//! The result model: what a run writes and reports, matrices and qualifications read. Start
//! with [`ScenarioResult`]: one scenario's [`Outcome`] (its [`Verdict`] against the ledger of
//! known bugs, or why it was skipped, flaky or not run), with its failure and diagnostics;
//! [`Status`] is how a set of results ends a run. [`UpgradeReport`] is what a qualification's
//! upgrade check saw. Pure data, no I/O.

use serde::{Deserialize, Serialize};

use crate::controller::ControllerRef;
use crate::scenario::StepRecord;
use crate::scenario::record::Sends;
use crate::toolchain::KubeVersion;

/// How a scenario's result is judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Verdict {
    /// Passed, as expected.
    Pass,
    /// Failed where no known bug explains it: a regression.
    Fail,
    /// Failed as a known bug predicts, with its signature.
    ExpectedFail {
        /// The bug id.
        bug: String,
    },
    /// Passed where a known bug predicts a failure.
    UnexpectedPass {
        /// The bug id.
        bug: String,
    },
}

impl Verdict {
    /// Whether it fails a run.
    pub fn fails_run(&self) -> bool {
        matches!(self, Verdict::Fail | Verdict::UnexpectedPass { .. })
    }
}

/// What failed, collected before cleanup.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Events in the namespace.
    pub events: Vec<String>,
    /// The namespace's objects, as YAML.
    pub objects: String,
    /// Controller manager log lines of the scenario's window.
    pub manager_log: String,
    /// The counters behind the monitor's rollout-bound violations, over the scenario's time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plots: Vec<crate::scenario::monitor::Plot>,
}

/// The result of one scenario run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Scenario.
    pub scenario: String,
    /// Suite.
    pub suite: String,
    /// Attempt (1-based; `--repeat`).
    pub attempt: usize,
    /// Profile of its cluster.
    pub profile: String,
    /// Verdict.
    pub outcome: Outcome,
    /// The failure text, if it failed.
    pub failure: Option<String>,
    /// Seconds.
    pub seconds: f64,
    /// Collected on failure.
    pub diagnostics: Option<Diagnostics>,
    /// What the scenario sent, by API (for field coverage).
    #[serde(default, skip_serializing_if = "Sends::is_empty")]
    pub sent: Sends,
    /// Earlier tries that failed the run before `--retries` ran the scenario again, oldest
    /// first (the result itself is the last try).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_tries: Vec<FailedTry>,
    /// Its named steps, as they ran (a scenario without named steps has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepRecord>,
}

impl ScenarioResult {
    /// Tries it took: 1, plus one per failed try before it.
    pub fn tries(&self) -> usize {
        self.failed_tries.len() + 1
    }
}

/// A try of a scenario that failed the run and was retried (`--retries`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedTry {
    /// Its verdict.
    pub verdict: Verdict,
    /// Its failure text (none for an unexpected pass).
    pub failure: Option<String>,
    /// Seconds.
    pub seconds: f64,
    /// Collected before its namespace went.
    pub diagnostics: Option<Diagnostics>,
}

/// A result's classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// Ran and was judged.
    Judged(Verdict),
    /// Failed the run on a try, then did not on a retry (`--retries`): judged `verdict` in
    /// the end, but not trusted; `--fail-on-flaky` makes it fail the run.
    Flaky {
        /// The verdict of the last try.
        verdict: Verdict,
    },
    /// Did not run: requirements not met.
    Skipped {
        /// Why.
        reason: String,
    },
    /// Its cluster or bundle did not start.
    InfraError {
        /// Why.
        reason: String,
    },
}

impl Outcome {
    /// A short label for tables.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Judged(Verdict::Pass) => "pass",
            Outcome::Judged(Verdict::Fail) => "FAIL",
            Outcome::Judged(Verdict::ExpectedFail { .. }) => "expected-fail",
            Outcome::Judged(Verdict::UnexpectedPass { .. }) => "UNEXPECTED-PASS",
            Outcome::Flaky { .. } => "FLAKY",
            Outcome::Skipped { .. } => "skipped",
            Outcome::InfraError { .. } => "INFRA-ERROR",
        }
    }

    /// Whether it fails a run; a flaky result does when `fail_on_flaky`.
    pub fn fails_run(&self, fail_on_flaky: bool) -> bool {
        match self {
            Outcome::Judged(v) => v.fails_run(),
            Outcome::Flaky { .. } => fail_on_flaky,
            Outcome::Skipped { .. } | Outcome::InfraError { .. } => false,
        }
    }
}

/// How a run's results end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Nothing failed the run (expected failures and skips included).
    Passed,
    /// A regression or an unexpected pass.
    Failed,
    /// Nothing failed, but a cluster or controller did not start.
    InfraError,
}

impl Status {
    /// The status of `results`: a failure outweighs an infrastructure error; flaky results
    /// pass.
    pub fn of<'a>(results: impl IntoIterator<Item = &'a ScenarioResult>) -> Self {
        Self::judged(results, false)
    }

    /// [`Status::of`], with flaky results failing the run when `fail_on_flaky`.
    pub fn judged<'a>(
        results: impl IntoIterator<Item = &'a ScenarioResult>,
        fail_on_flaky: bool,
    ) -> Self {
        let mut status = Status::Passed;
        for r in results {
            if r.outcome.fails_run(fail_on_flaky) {
                return Status::Failed;
            }
            if let Outcome::InfraError { .. } = r.outcome {
                status = Status::InfraError;
            }
        }
        status
    }
}

/// What a qualification's upgrade check saw on one Kubernetes version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpgradeReport {
    /// Kubernetes version.
    pub kubernetes: KubeVersion,
    /// From.
    pub baseline: ControllerRef,
    /// To.
    pub candidate: ControllerRef,
    /// Problems found (empty when the upgrade is clean).
    pub problems: Vec<String>,
}

#[cfg(test)]
impl ScenarioResult {
    /// A result of scenario `name` for unit tests: attempt 1 on `default`, `seconds` long,
    /// with `failure`, and nothing else.
    pub fn fixture(name: &str, outcome: Outcome, seconds: f64, failure: Option<&str>) -> Self {
        Self {
            scenario: name.into(),
            suite: name.split('/').next().unwrap_or(name).into(),
            attempt: 1,
            profile: "default".into(),
            outcome,
            failure: failure.map(str::to_string),
            seconds,
            diagnostics: None,
            sent: Sends::default(),
            failed_tries: vec![],
            steps: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flaky_result_fails_a_run_only_when_asked() {
        let r = |outcome| ScenarioResult {
            scenario: "a".into(),
            suite: "s".into(),
            attempt: 1,
            profile: "default".into(),
            outcome,
            failure: None,
            seconds: 1.0,
            diagnostics: None,
            sent: Sends::default(),
            failed_tries: vec![],
            steps: vec![],
        };
        let flaky = [r(Outcome::Flaky {
            verdict: Verdict::Pass,
        })];
        assert_eq!(Status::of(&flaky), Status::Passed);
        assert_eq!(Status::judged(&flaky, true), Status::Failed);
        let infra = r(Outcome::InfraError { reason: "x".into() });
        assert_eq!(
            Status::judged([&flaky[0], &infra], false),
            Status::InfraError
        );
        assert_eq!(Status::judged([&flaky[0], &infra], true), Status::Failed);
    }
}
