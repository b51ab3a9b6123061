//! Release qualification: may a candidate ship? [`compare`] turns a baseline's and a
//! candidate's results on the same cells into regressions, fixes and unchanged results (an
//! infrastructure error on either side is neither); [`qualify`] also runs the upgrade
//! scenarios (the `upgrade` suite), each installed at the baseline and upgraded to the
//! candidate by its body, on each Kubernetes version. The verdict is a
//! [`Qualification`], written to `qualify.json` atomically.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::controller::ControllerRef;
use crate::matrix::MatrixReport;
use crate::report::{Files, Terminal};
use crate::run::{Env, Filter, Outcome, Reporter, RunOptions, ScenarioResult, Status};
use crate::toolchain::KubeVersion;

/// One scenario's change between a baseline and a candidate on one Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Kubernetes version.
    pub kubernetes: KubeVersion,
    /// Scenario.
    pub scenario: String,
    /// Baseline result label.
    pub baseline: String,
    /// Candidate result label.
    pub candidate: String,
}

/// The qualification verdict.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Qualification {
    /// The upgrade checks, one per Kubernetes version.
    pub upgrades: Vec<UpgradeReport>,
    /// Baseline passed, candidate failed.
    pub regressions: Vec<Change>,
    /// Baseline failed, candidate passed.
    pub fixes: Vec<Change>,
    /// Same on both.
    pub unchanged: Vec<Change>,
    /// Either side did not run because its cluster or controller did not start: nothing can
    /// be said of the candidate there.
    #[serde(default)]
    pub infra_errors: Vec<Change>,
}

impl Qualification {
    /// Writes `qualify.json` into `dir`, atomically like every other report.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let body = serde_json::to_vec_pretty(self).expect("the qualification serializes");
        crate::report::atomic_write(&dir.join("qualify.json"), &body)
    }

    /// Whether the candidate may not ship: a regression or a failed upgrade.
    pub fn failed(&self) -> bool {
        !self.regressions.is_empty() || self.upgrades.iter().any(|u| !u.problems.is_empty())
    }

    /// Failed (a regression or a failed upgrade), else an infrastructure error if any result
    /// could not be compared, else passed.
    pub fn status(&self) -> Status {
        if self.failed() {
            Status::Failed
        } else if self.infra_errors.is_empty() {
            Status::Passed
        } else {
            Status::InfraError
        }
    }

    /// What a person reads: one line per regression, fix, upgrade and uncompared result, then
    /// the counts.
    pub fn summary(&self, baseline: &ControllerRef, candidate: &ControllerRef) -> String {
        let mut out = vec![format!("qualify {candidate} against {baseline}")];
        let change = |title: &str, c: &Change| {
            format!(
                "{title:<11} Kubernetes {}  {}  ({} -> {})",
                c.kubernetes, c.scenario, c.baseline, c.candidate
            )
        };
        out.extend(self.regressions.iter().map(|c| change("REGRESSION", c)));
        out.extend(self.fixes.iter().map(|c| change("FIX", c)));
        for u in &self.upgrades {
            let verdict = if u.problems.is_empty() {
                "clean".to_string()
            } else {
                format!("FAILED: {}", u.problems.join("; "))
            };
            out.push(format!(
                "UPGRADE     Kubernetes {}  {baseline} -> {candidate}: {verdict}",
                u.kubernetes
            ));
        }
        out.extend(self.infra_errors.iter().map(|c| change("INFRA-ERROR", c)));
        out.push(format!(
            "{} regression(s), {} fix(es), {} unchanged, {} not compared (infrastructure error)",
            self.regressions.len(),
            self.fixes.len(),
            self.unchanged.len(),
            self.infra_errors.len()
        ));
        out.join("\n")
    }
}

/// Qualifies `candidate` against `baseline` from a matrix `report` of both on the same cells:
/// compares the results, runs the upgrade scenarios on every Kubernetes version of the report
/// ([`upgrades`]), and writes `qualify.json` into `dir`.
pub async fn qualify(
    report: &MatrixReport,
    env: Env<'_>,
    baseline: &ControllerRef,
    candidate: &ControllerRef,
    dir: &Path,
) -> std::io::Result<Qualification> {
    let mut q = compare(report, baseline, candidate);
    let mut versions: Vec<KubeVersion> = report.cells.iter().map(|c| c.kubernetes).collect();
    versions.dedup();
    q.upgrades = upgrades(&report.id, env, &versions, baseline, candidate, dir).await?;
    q.write(dir)?;
    Ok(q)
}

/// Runs the upgrade scenarios on each of `versions`: each installed at the baseline and
/// upgraded to the candidate by its body; reports under `dir/upgrade-<version>/`.
pub async fn upgrades(
    id: &str,
    env: Env<'_>,
    versions: &[KubeVersion],
    baseline: &ControllerRef,
    candidate: &ControllerRef,
    dir: &Path,
) -> std::io::Result<Vec<UpgradeReport>> {
    let mut out = vec![];
    for v in versions.iter().copied() {
        // Every upgrade scenario, whatever selected the cells' scenarios.
        let every = Filter::default();
        let plan = crate::run::plan_upgrade(env.scenarios, &every, v, baseline, candidate);
        let run_id = format!("{id}-upgrade-{}", v.minor);
        let files = Files::new(dir, &format!("upgrade-{v}"))?;
        let options = RunOptions {
            logs_dir: Some(files.dir().join("cluster-logs")),
            ..env.options.clone()
        };
        let mut reporters: Vec<Box<dyn Reporter>> =
            vec![Box::new(Terminal::default()), Box::new(files)];
        let env = Env {
            options: &options,
            ..env
        };
        let results = crate::run::execute(&plan, env, &run_id, &mut reporters).await;
        let problems = results
            .iter()
            .filter(|r| Status::of([*r]) != Status::Passed)
            .map(|r| {
                let why = r.failure.as_deref().unwrap_or(r.outcome.label());
                format!("{}: {why}", r.scenario)
            })
            .collect();
        out.push(UpgradeReport {
            kubernetes: v,
            baseline: baseline.clone(),
            candidate: candidate.clone(),
            problems,
        });
    }
    let _ = std::fs::remove_file(dir.join("latest"));
    Ok(out)
}

/// What one side of a comparison says, raw (the ledger aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Passed,
    Failed,
    Skipped,
    Infra,
}

fn side(r: &ScenarioResult) -> Side {
    match &r.outcome {
        Outcome::Skipped { .. } => Side::Skipped,
        Outcome::InfraError { .. } => Side::Infra,
        Outcome::Judged(_) | Outcome::Flaky { .. } if r.failure.is_some() => Side::Failed,
        // A flaky result passed on its last try.
        Outcome::Judged(_) | Outcome::Flaky { .. } => Side::Passed,
    }
}

/// Compares two releases' results on the same cells (by raw pass/fail, not the ledger).
pub fn compare(
    report: &MatrixReport,
    baseline: &ControllerRef,
    candidate: &ControllerRef,
) -> Qualification {
    let mut q = Qualification::default();
    for b in report.cells.iter().filter(|c| &c.controller == baseline) {
        let Some(c) = report
            .cells
            .iter()
            .find(|c| &c.controller == candidate && c.kubernetes == b.kubernetes)
        else {
            continue;
        };
        for br in &b.results {
            let Some(cr) = c
                .results
                .iter()
                .find(|x| x.scenario == br.scenario && x.attempt == br.attempt)
            else {
                continue;
            };
            let change = Change {
                kubernetes: b.kubernetes,
                scenario: br.scenario.clone(),
                baseline: br.outcome.label().into(),
                candidate: cr.outcome.label().into(),
            };
            match (side(br), side(cr)) {
                (Side::Infra, _) | (_, Side::Infra) => q.infra_errors.push(change),
                (Side::Passed, Side::Failed) => q.regressions.push(change),
                (Side::Failed, Side::Passed) => q.fixes.push(change),
                _ => q.unchanged.push(change),
            }
        }
    }
    q
}

/// What the upgrade check saw.
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
mod tests {
    use super::*;
    use crate::matrix::CellReport;
    use crate::run::ledger::Verdict;

    fn result(scenario: &str, outcome: Outcome) -> ScenarioResult {
        let failure = match &outcome {
            Outcome::Judged(Verdict::Fail | Verdict::ExpectedFail { .. }) => Some("boom".into()),
            Outcome::InfraError { reason } => Some(reason.clone()),
            _ => None,
        };
        ScenarioResult {
            scenario: scenario.into(),
            suite: "s".into(),
            attempt: 1,
            profile: "default".into(),
            outcome,
            failure,
            seconds: 1.0,
            diagnostics: None,
            sent: Default::default(),
            failed_tries: vec![],
        }
    }

    #[test]
    fn an_infra_error_of_either_side_is_no_regression_and_no_fix() {
        let k: KubeVersion = "1.32".parse().unwrap();
        let (base, cand): (ControllerRef, ControllerRef) = (
            "openkruise@v1.8.3".parse().unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
        );
        let infra = || Outcome::InfraError {
            reason: "manager did not start".into(),
        };
        let cell = |controller: &ControllerRef, results| CellReport {
            kubernetes: k,
            controller: controller.clone(),
            dir: String::new(),
            worst: String::new(),
            results,
        };
        let report = MatrixReport {
            shard: None,
            id: "m".into(),
            cells: vec![
                cell(
                    &base,
                    vec![
                        result("a", Outcome::Judged(Verdict::Pass)),
                        result("b", infra()),
                        result("c", Outcome::Judged(Verdict::Pass)),
                        result("d", Outcome::Judged(Verdict::Fail)),
                    ],
                ),
                cell(
                    &cand,
                    vec![
                        result("a", infra()),
                        result("b", Outcome::Judged(Verdict::Pass)),
                        result("c", Outcome::Judged(Verdict::Fail)),
                        result("d", Outcome::Judged(Verdict::Pass)),
                    ],
                ),
            ],
        };
        let q = compare(&report, &base, &cand);
        let names = |l: &[Change]| l.iter().map(|c| c.scenario.clone()).collect::<Vec<_>>();
        assert_eq!(names(&q.infra_errors), ["a", "b"]);
        assert_eq!(names(&q.regressions), ["c"]);
        assert_eq!(names(&q.fixes), ["d"]);
        assert!(q.unchanged.is_empty());
    }

    #[test]
    fn qualify_json_is_replaced_never_rewritten_in_place() {
        // A reader holding the previous file (here: a second link to it) keeps a whole file.
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("held-by-a-reader.json");
        std::fs::write(&old, b"{\"previous\": true}").unwrap();
        std::fs::hard_link(&old, tmp.path().join("qualify.json")).unwrap();
        let q = Qualification::default();
        q.write(tmp.path()).unwrap();
        assert_eq!(std::fs::read(&old).unwrap(), b"{\"previous\": true}");
        let back: Qualification =
            serde_json::from_slice(&std::fs::read(tmp.path().join("qualify.json")).unwrap())
                .unwrap();
        assert!(back.regressions.is_empty() && !back.failed());
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    }
}
