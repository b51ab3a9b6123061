//! Version-compatibility matrices. Start with [`run_matrix`]: every cell (Kubernetes version x
//! controller release) runs the selected scenarios as `harness run` would, with its own
//! reports; the matrix report ([`MatrixReport`], `matrix.json`) is drawn as a grid coloured by
//! each cell's worst result ([`html`]). [`spec`] parses what a matrix is made of.

pub mod drive;
pub mod html;
pub mod shard;
pub mod spec;

pub use html::matrix_html;
pub use shard::{Costs, Shard, ShardInfo, Unit};
pub use spec::{MatrixError, MatrixFile, parse_controllers, parse_versions};

use std::path::Path;

use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};

use crate::controller::ControllerRef;
use crate::progress::Progress;
use crate::report::{Files, Terminal};
use crate::results::Verdict;
use crate::results::{Outcome, ScenarioResult};
use crate::run::ledger::Ledger;
use crate::run::{Env, Filter, Reporter, RunOptions};
use crate::scenario::Scenario;
use crate::toolchain::{KubeVersion, Toolchain};

/// One cell's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellReport {
    /// Kubernetes version.
    pub kubernetes: KubeVersion,
    /// Controller.
    pub controller: ControllerRef,
    /// Its report directory, relative to the matrix directory.
    pub dir: String,
    /// Worst result label.
    pub worst: String,
    /// Results.
    pub results: Vec<ScenarioResult>,
    /// The exploration of the cell, when one was asked for (`matrix --explore`): findings to
    /// triage, not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exploration: Option<crate::explore::Explored>,
}

/// The matrix report (`matrix.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixReport {
    /// Matrix id.
    pub id: String,
    /// Cells, by Kubernetes version then controller.
    pub cells: Vec<CellReport>,
    /// When the run was one shard of the matrix (`--shard K/N`): which, and of what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
}

/// The cells of `versions` x `controllers` in grid order (by Kubernetes version, then release
/// as given).
pub fn cell_units(versions: &[KubeVersion], controllers: &[ControllerRef]) -> Vec<Unit> {
    versions
        .iter()
        .flat_map(|v| {
            controllers.iter().map(move |c| Unit::Cell {
                kubernetes: *v,
                controller: c.clone(),
            })
        })
        .collect()
}

fn rank(o: &Outcome) -> u8 {
    match o {
        Outcome::Skipped { .. } => 0,
        Outcome::Judged(Verdict::Pass) => 1,
        Outcome::Judged(Verdict::ExpectedFail { .. }) => 2,
        Outcome::Flaky { .. } => 3,
        Outcome::InfraError { .. } => 4,
        Outcome::Judged(Verdict::UnexpectedPass { .. }) => 5,
        Outcome::Judged(Verdict::Fail) => 6,
    }
}

/// The worst outcome of some results.
pub fn worst(results: &[ScenarioResult]) -> String {
    results
        .iter()
        .max_by_key(|r| rank(&r.outcome))
        .map(|r| r.outcome.label().to_string())
        .unwrap_or_else(|| "empty".into())
}

/// Everything a matrix needs.
#[derive(Clone, Copy)]
pub struct MatrixEnv<'a> {
    /// Scenarios.
    pub scenarios: &'a [Scenario],
    /// Selection.
    pub filter: &'a Filter,
    /// Known bugs.
    pub ledger: &'a Ledger,
    /// Makes clusters.
    pub provider: &'a crate::cluster::any::Provider,
    /// Builds binaries.
    pub toolchain: &'a Toolchain,
    /// How each cell runs.
    pub options: &'a RunOptions,
    /// Progress.
    pub progress: &'a Progress,
    /// Cells run at once (each with its own clusters).
    pub cells_parallel: usize,
    /// The controller's own e2e suite, run on every cell instead of the scenarios.
    pub upstream: Option<&'a crate::run::upstream::Choice>,
}

/// An error with its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out
}

/// Builds every binary the cells need first, two builds at a time.
async fn prebuild(env: MatrixEnv<'_>, versions: &[KubeVersion], controllers: &[ControllerRef]) {
    let kube = versions.iter().map(|v| {
        let tc = env.toolchain.clone();
        let v = *v;
        async move {
            if let Err(e) = tc.kubernetes(v).await {
                env.progress.line(&format!(
                    "warning: Kubernetes {v} did not build: {}",
                    chain(&e)
                ));
            }
        }
        .boxed_local()
    });
    let ctrl = controllers.iter().map(|c| {
        let tc = env.toolchain.clone();
        let c = c.clone();
        async move {
            if let Err(e) = c.controller().prepare(&tc).await {
                env.progress
                    .line(&format!("warning: {c} did not build: {}", chain(&e)));
            }
        }
        .boxed_local()
    });
    let kwok = {
        let tc = env.toolchain.clone();
        async move {
            let _ = tc.kwok().await;
        }
        .boxed_local()
    };
    // The suites the cells run (one per release, or the one of --upstream-e2e-from).
    let mut suites: Vec<ControllerRef> = env
        .upstream
        .map(|u| controllers.iter().map(|c| u.suite(c).from).collect())
        .unwrap_or_default();
    suites.dedup();
    let e2e = suites.into_iter().map(|from| {
        let tc = env.toolchain.clone();
        async move {
            let built = async { crate::run::upstream::e2e_suite(&from)?.build(&tc).await };
            if let Err(e) = built.await {
                env.progress.line(&format!(
                    "warning: the e2e suite of {from} did not build: {e:#}"
                ));
            }
        }
        .boxed_local()
    });
    futures::stream::iter(std::iter::once(kwok).chain(kube).chain(ctrl).chain(e2e))
        .buffer_unordered(2)
        .collect::<Vec<()>>()
        .await;
}

/// Runs every cell (of `shard`, when given); a cell whose cluster cannot start is an
/// infrastructure error and the others still run. Writes `matrix.json`, `matrix.html` and
/// `junit.xml` under `dir`.
pub async fn run_matrix(
    env: MatrixEnv<'_>,
    versions: &[KubeVersion],
    controllers: &[ControllerRef],
    id: &str,
    dir: &Path,
    shard: Option<ShardInfo>,
) -> std::io::Result<MatrixReport> {
    std::fs::create_dir_all(dir)?;
    let order: Vec<(KubeVersion, ControllerRef)> = versions
        .iter()
        .flat_map(|v| controllers.iter().map(move |c| (*v, c.clone())))
        .filter(|(v, c)| {
            shard.as_ref().is_none_or(|s| {
                s.runs(&Unit::Cell {
                    kubernetes: *v,
                    controller: c.clone(),
                })
            })
        })
        .collect();
    let mut needed_versions: Vec<KubeVersion> = order.iter().map(|(v, _)| *v).collect();
    needed_versions.dedup();
    let needed_controllers: Vec<ControllerRef> = controllers
        .iter()
        .filter(|c| order.iter().any(|(_, x)| x == *c))
        .cloned()
        .collect();
    let of_shard = shard
        .as_ref()
        .map(|s| {
            format!(
                ", shard {}/{} with {} cell(s)",
                s.index,
                s.count,
                order.len()
            )
        })
        .unwrap_or_default();
    env.progress.line(&format!(
        "matrix {id}: {} Kubernetes version(s) x {} release(s){of_shard}; building what is missing",
        versions.len(),
        controllers.len()
    ));
    prebuild(env, &needed_versions, &needed_controllers).await;
    let mut report = MatrixReport {
        id: id.into(),
        cells: vec![],
        shard,
    };
    // A shard with nothing to run still says so in its matrix.json.
    write_matrix(dir, &report)?;
    let cells = order.iter().cloned().map(|(v, c)| async move {
        let slug = format!("k8s-{}_{}-{}", v, c.kind.name(), c.slug());
        let plan = match env.upstream {
            None => crate::run::plan(env.scenarios, env.filter, v, &c),
            Some(choice) => match choice.plan(v, &c, env.toolchain).await {
                Ok(plan) => plan,
                Err(e) => {
                    // The suite's configuration could not be read: the cell cannot run.
                    let results = vec![crate::run::upstream::suite_error(
                        &format!("{e:#}"),
                        crate::run::upstream::SUITE,
                    )];
                    return Ok(CellReport {
                        kubernetes: v,
                        controller: c,
                        dir: slug,
                        worst: worst(&results),
                        results,
                        exploration: None,
                    });
                }
            },
        };
        let files = Files::new(dir, &slug)?;
        let options = RunOptions {
            logs_dir: Some(files.dir().join("cluster-logs")),
            ..env.options.clone()
        };
        let mut reporters: Vec<Box<dyn Reporter>> =
            vec![Box::new(Terminal::default()), Box::new(files)];
        let results = crate::run::execute(
            &plan,
            Env {
                scenarios: env.scenarios,
                ledger: env.ledger,
                provider: env.provider,
                toolchain: env.toolchain,
                options: &options,
            },
            &format!("{id}-{}-{}", v.minor, c.slug().replace('.', "")),
            &mut reporters,
        )
        .await;
        Ok::<_, std::io::Error>(CellReport {
            kubernetes: v,
            controller: c,
            dir: slug,
            worst: worst(&results),
            results,
            exploration: None,
        })
    });
    let mut finished = futures::stream::iter(cells).buffer_unordered(env.cells_parallel.max(1));
    while let Some(cell) = finished.next().await {
        report.cells.push(cell?);
        // Grid order, whatever order cells finish in.
        report.cells.sort_by_key(|c| {
            order
                .iter()
                .position(|(v, r)| *v == c.kubernetes && *r == c.controller)
        });
        write_matrix(dir, &report)?;
    }
    let _ = std::fs::remove_file(dir.join("latest"));
    Ok(report)
}

/// Writes `matrix.json`, `matrix.html` and `junit.xml` (one test suite per cell and scenario
/// suite) of `report` into `dir`.
pub fn write_matrix(dir: &Path, report: &MatrixReport) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(report).expect("serializes");
    for (name, body) in [
        ("matrix.json", json),
        ("matrix.html", matrix_html(report).into_bytes()),
        ("junit.xml", matrix_junit(report).into_bytes()),
    ] {
        crate::report::atomic_write(&dir.join(name), &body)?;
    }
    Ok(())
}

/// JUnit XML of a whole matrix: a test suite per cell and scenario suite, named
/// `<Kubernetes version> <release> <suite>`, each result as [`crate::report::test_case`].
pub fn matrix_junit(report: &MatrixReport) -> String {
    let mut junit = quick_junit::Report::new(format!("harness {}", report.id));
    for cell in &report.cells {
        let mut suites: std::collections::BTreeMap<&str, quick_junit::TestSuite> =
            std::collections::BTreeMap::new();
        for r in &cell.results {
            suites
                .entry(r.suite.as_str())
                .or_insert_with(|| {
                    quick_junit::TestSuite::new(format!(
                        "{} {} {}",
                        cell.kubernetes, cell.controller, r.suite
                    ))
                })
                .add_test_case(crate::report::test_case(r));
        }
        junit.add_test_suites(suites.into_values());
    }
    junit.to_string().unwrap_or_default()
}
