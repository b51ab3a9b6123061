//! Release qualification: may a candidate ship? [`compare`] turns a baseline's and a
//! candidate's results on the same cells into regressions, fixes and unchanged results (an
//! infrastructure error on either side is neither); [`qualify`] also runs the upgrade
//! scenarios (the `upgrade` suite), each installed at the baseline and upgraded to the
//! candidate by its body, on each Kubernetes version. The verdict is a
//! [`Qualification`], written to `qualify.json` atomically. [`drive`] runs `harness qualify`
//! (whole or one shard); [`merge`] draws the verdict of a sharded qualification from its
//! merged shards. Above [`crate::matrix`]: a qualification reads a matrix report.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::controller::ControllerRef;
use crate::matrix::MatrixReport;
use crate::matrix::drive::{Select, Setup, ShardOptions, Sharding, sharding};
use crate::matrix::shard::{QualifyShard, Unit};
use crate::report::{Files, Terminal};
use crate::results::{Outcome, ScenarioResult, Status, UpgradeReport};
use crate::run::{Env, Filter, Reporter, RunOptions};
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
    /// The exploration of the candidate against the baseline, when one was asked for
    /// (`--explore`): differences to triage, not part of the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exploration: Option<Explored>,
}

pub use crate::explore::{Explored, Exploring};

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
        if let Some(e) = &self.exploration {
            out.extend(e.lines(&format!("{candidate} against {baseline}")));
        }
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

/// What `harness qualify` asks for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The release candidate (`NAME@TAG`).
    pub candidate: String,
    /// The release it must not regress from: `TAG` (the candidate's controller) or
    /// `NAME@TAG`.
    pub baseline: String,
    /// Kubernetes versions (range or list).
    pub kubernetes: String,
    /// Selection and pace.
    pub select: Select,
    /// Sharding.
    pub shards: ShardOptions,
    /// An exploration of the candidate against the baseline to make as well.
    pub explore: Option<Exploring>,
}

impl Request {
    /// The baseline and the candidate; refuses a baseline that is the candidate itself.
    pub fn releases(&self) -> anyhow::Result<(ControllerRef, ControllerRef)> {
        let candidate: ControllerRef = self.candidate.parse()?;
        let baseline: ControllerRef = if self.baseline.contains('@') {
            self.baseline.parse()?
        } else {
            format!("{}@{}", candidate.kind.name(), self.baseline).parse()?
        };
        if baseline == candidate {
            anyhow::bail!("qualify {candidate}: the baseline is the candidate itself");
        }
        Ok((baseline, candidate))
    }
}

/// What came of a qualification [`Request`].
#[derive(Debug)]
pub enum Driven {
    /// Nothing ran; this was printed instead (`--plan`, `--binaries`).
    Printed(String),
    /// One shard ran; the verdict comes from merging every shard.
    ShardDone {
        /// K.
        index: usize,
        /// N.
        count: usize,
    },
    /// The verdict.
    Qualified {
        /// The release it must not regress from.
        baseline: ControllerRef,
        /// The candidate.
        candidate: ControllerRef,
        /// The verdict.
        qualification: Box<Qualification>,
        /// Whether a result was flaky while flaky results fail the qualification.
        failed_on_flaky: bool,
    },
}

/// Qualifies (or plans, or runs one shard of) what `request` asks on `provider`: both
/// releases' cells, then the upgrade checks; notes go to `say`.
pub async fn drive(
    request: &Request,
    provider: crate::cluster::any::Provider,
    toolchain: crate::toolchain::Toolchain,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Driven> {
    let (baseline, candidate) = request.releases()?;
    let versions = crate::matrix::parse_versions(&request.kubernetes)?;
    if let Some(e) = &request.explore {
        crate::explore::select(&e.kinds)?;
    }
    let mut setup = Setup::new(&request.select, provider, toolchain, say)?;
    let controllers = vec![baseline.clone(), candidate.clone()];
    let costs = request.shards.costs()?;
    setup.options.costs = costs.clone();
    let units = setup.units(
        &versions,
        &controllers,
        Some((&baseline, &candidate)),
        &costs,
    );
    let shard = match sharding(
        &request.shards,
        units,
        request.select.cells_parallel,
        setup.upstream.as_ref(),
    ) {
        Sharding::Print(text) => return Ok(Driven::Printed(text)),
        Sharding::Whole => None,
        Sharding::Shard(_) if request.explore.is_some() => anyhow::bail!(
            "--explore goes with an unsharded qualification: run `harness explore --controller \
             {candidate} --baseline {baseline}` beside the shards instead"
        ),
        Sharding::Shard(mut info) => {
            info.qualify = Some(QualifyShard {
                baseline: baseline.clone(),
                candidate: candidate.clone(),
                upgrades: vec![],
            });
            Some(info)
        }
    };
    let mut report = setup
        .cells(
            &request.select,
            versions.clone(),
            controllers,
            "qualify",
            shard,
            say,
        )
        .await?;
    let dir = request.select.report_dir.join(&report.id);
    if let Some(mut info) = report.shard.take() {
        // A shard runs its upgrade checks and leaves the verdict to the merge.
        let mine: Vec<KubeVersion> = info
            .mine()
            .filter_map(|u| match u {
                Unit::Upgrade { kubernetes } => Some(*kubernetes),
                Unit::Cell { .. } => None,
            })
            .collect();
        let upgrades = upgrades(&report.id, setup.env(), &mine, &baseline, &candidate, &dir)
            .await
            .with_context(|| format!("write upgrade reports in {}", dir.display()))?;
        if let Some(q) = info.qualify.as_mut() {
            q.upgrades = upgrades;
        }
        let (index, count) = (info.index, info.count);
        report.shard = Some(info);
        crate::matrix::write_matrix(&dir, &report)
            .with_context(|| format!("write matrix.json in {}", dir.display()))?;
        return Ok(Driven::ShardDone { index, count });
    }
    let mut qualification = qualify(&report, setup.env(), &baseline, &candidate, &dir)
        .await
        .with_context(|| format!("write qualify.json in {}", dir.display()))?;
    if let Some(e) = &request.explore {
        let kubernetes = versions
            .first()
            .copied()
            .context("a qualification has a Kubernetes version")?;
        let explored = explore_candidate(e, &setup, kubernetes, (&baseline, &candidate), &dir, say)
            .await
            .context("explore the candidate against the baseline")?;
        qualification.exploration = Some(explored);
        qualification
            .write(&dir)
            .with_context(|| format!("write qualify.json in {}", dir.display()))?;
    }
    let flaky = report
        .cells
        .iter()
        .flat_map(|c| &c.results)
        .any(|r| matches!(r.outcome, Outcome::Flaky { .. }));
    Ok(Driven::Qualified {
        baseline,
        candidate,
        qualification: Box::new(qualification),
        failed_on_flaky: request.select.fail_on_flaky && flaky,
    })
}

/// Explores the candidate against the baseline (`releases`: baseline, candidate) on
/// Kubernetes `kubernetes`, as `harness explore --baseline` does with its defaults, into
/// `<dir>/explore`; progress goes to `say`.
async fn explore_candidate(
    e: &Exploring,
    setup: &Setup,
    kubernetes: KubeVersion,
    releases: (&ControllerRef, &ControllerRef),
    dir: &Path,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Explored> {
    let (baseline, candidate) = releases;
    let seed = u64::from(rand::random::<u32>());
    let mut options = e.options(kubernetes, candidate.clone(), seed, dir.join("explore"));
    options.baseline = Some(baseline.clone());
    say(format!(
        "exploring {candidate} against {baseline} for {:?} (seed {seed}; {})",
        e.budget,
        options.dir.display()
    ));
    crate::matrix::drive::explore_into(&options, &setup.provider, &setup.toolchain, say).await
}

/// What merging shards made.
#[derive(Debug)]
pub struct MergedRun {
    /// The whole matrix, as an unsharded run reports it.
    pub report: MatrixReport,
    /// Where the merged reports are.
    pub dir: PathBuf,
    /// For a qualification: the two releases and the verdict.
    pub qualification: Option<(ControllerRef, ControllerRef, Qualification)>,
}

/// Merges the shards (of a matrix or a qualification) in `dirs` into `<report dir>/<id>/`
/// ([`crate::matrix::drive::merge_shards`]); for a qualification, draws the verdict from the
/// merged cells and every shard's upgrade checks ([`of_shards`]) and writes `qualify.json`.
pub fn merge(dirs: &[PathBuf], report_dir: &Path) -> anyhow::Result<MergedRun> {
    let (merged, dir) = crate::matrix::drive::merge_shards(dirs, report_dir)?;
    let qualification = match merged.qualify {
        None => None,
        Some(q) => {
            let verdict = of_shards(&merged.report, &q);
            verdict
                .write(&dir)
                .with_context(|| format!("merge shards: write {}", dir.display()))?;
            Some((q.baseline, q.candidate, verdict))
        }
    };
    Ok(MergedRun {
        report: merged.report,
        dir,
        qualification,
    })
}

/// The verdict of a sharded qualification: both releases compared on the merged `report`, with
/// the upgrade checks the shards ran.
pub fn of_shards(report: &MatrixReport, shards: &QualifyShard) -> Qualification {
    let mut verdict = compare(report, &shards.baseline, &shards.candidate);
    verdict.upgrades = shards.upgrades.clone();
    verdict
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::CellReport;
    use crate::results::Verdict;

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
            steps: vec![],
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
            exploration: None,
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

    fn request(candidate: &str, baseline: &str) -> Request {
        Request {
            candidate: candidate.into(),
            baseline: baseline.into(),
            kubernetes: "1.32".into(),
            select: Select {
                selection: Default::default(),
                parallel: 1,
                cells_parallel: 1,
                retries: 0,
                fail_on_flaky: false,
                report_dir: "reports".into(),
            },
            shards: ShardOptions {
                shard: None,
                costs: None,
                plan: false,
                binaries: false,
                target_minutes: 30,
            },
            explore: None,
        }
    }

    #[test]
    fn an_explorations_findings_are_listed_after_the_verdict_and_do_not_change_it() {
        let (base, cand): (ControllerRef, ControllerRef) = (
            "openkruise@v1.8.3".parse().unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
        );
        let mut q = Qualification::default();
        let quiet = q.summary(&base, &cand);
        assert!(!quiet.contains("explored"), "{quiet}");
        q.exploration = Some(Explored {
            dir: "reports/q/explore".into(),
            seed: 7,
            trials: 120,
            findings: vec!["O5 CloneSet: refuses at step 1 (x) what v1.8.3 does not (3/3)".into()],
        });
        let text = q.summary(&base, &cand);
        assert!(
            text.contains(
                "explored openkruise@v1.9.0 against openkruise@v1.8.3: 120 trials, 1 finding(s)"
            ),
            "{text}"
        );
        assert!(text.contains("FINDING     O5 CloneSet: refuses"), "{text}");
        assert_eq!(q.status(), Status::Passed);
        let back: Qualification =
            serde_json::from_value(serde_json::to_value(&q).unwrap()).unwrap();
        assert_eq!(back.exploration.unwrap().trials, 120);
    }

    #[test]
    fn a_bare_baseline_tag_is_the_candidates_controller_and_never_the_candidate() {
        let (b, c) = request("openkruise@v1.9.0", "v1.8.3").releases().unwrap();
        assert_eq!(
            (b.to_string(), c.to_string()),
            ("openkruise@v1.8.3".into(), "openkruise@v1.9.0".into())
        );
        let (b, _) = request("openkruise@v1.9.0", "openkruise@v1.8.3")
            .releases()
            .unwrap();
        assert_eq!(b.to_string(), "openkruise@v1.8.3");
        let e = request("openkruise@v1.9.0", "v1.9.0")
            .releases()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "qualify openkruise@v1.9.0: the baseline is the candidate itself"
        );
    }

    #[test]
    fn a_sharded_qualification_is_judged_from_the_merged_cells_and_upgrades() {
        let k: KubeVersion = "1.32".parse().unwrap();
        let (base, cand): (ControllerRef, ControllerRef) = (
            "openkruise@v1.8.3".parse().unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
        );
        let cell = |controller: &ControllerRef, outcome| CellReport {
            kubernetes: k,
            controller: controller.clone(),
            dir: String::new(),
            worst: String::new(),
            results: vec![result("a", outcome)],
            exploration: None,
        };
        let report = MatrixReport {
            shard: None,
            id: "m".into(),
            cells: vec![
                cell(&base, Outcome::Judged(Verdict::Pass)),
                cell(&cand, Outcome::Judged(Verdict::Fail)),
            ],
        };
        let upgrade = UpgradeReport {
            kubernetes: k,
            baseline: base.clone(),
            candidate: cand.clone(),
            problems: vec![],
        };
        let q = of_shards(
            &report,
            &QualifyShard {
                baseline: base.clone(),
                candidate: cand.clone(),
                upgrades: vec![upgrade.clone()],
            },
        );
        assert_eq!(q.regressions.len(), 1, "{q:?}");
        assert_eq!(q.upgrades, [upgrade]);
        assert_eq!(q.status(), Status::Failed);
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
