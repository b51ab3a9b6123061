//! Version-compatibility matrices and release qualification. Start with [`run_matrix`]: every
//! cell (Kubernetes version x controller release) runs the selected scenarios as `harness run`
//! would, with its own reports; the matrix report is a grid coloured by each cell's worst
//! result. [`compare`] turns two releases' results on the same cells into regressions, fixes
//! and unchanged results.

use std::collections::BTreeMap;
use std::path::Path;

use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};

use crate::controller::ControllerRef;
use crate::progress::Progress;
use crate::report::{Files, Terminal};
use crate::run::ledger::{Ledger, Verdict};
use crate::run::{Env, Filter, Outcome, Reporter, RunOptions, ScenarioResult};
use crate::scenario::Scenario;
use crate::toolchain::{KubeVersion, Toolchain};

/// Errors of matrix specifications.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// A Kubernetes range or list that names no supported version.
    #[error("parse Kubernetes versions `{given}`: {detail}")]
    Versions {
        /// Input.
        given: String,
        /// Why.
        detail: String,
    },
    /// A controller list that does not parse.
    #[error("parse controllers `{given}`: {detail}")]
    Controllers {
        /// Input.
        given: String,
        /// Why.
        detail: String,
    },
    /// The matrix file is unreadable.
    #[error("read the matrix file {path}: {detail}")]
    File {
        /// Path.
        path: String,
        /// Why.
        detail: String,
    },
}

/// Expands `1.29..1.37` (every supported version in the inclusive range) or `1.29,1.32`.
pub fn parse_versions(spec: &str) -> Result<Vec<KubeVersion>, MatrixError> {
    let err = |detail: String| MatrixError::Versions {
        given: spec.into(),
        detail,
    };
    let mut out = vec![];
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((lo, hi)) = part.split_once("..") {
            let key = |s: &str| crate::toolchain::versions::version_key(s);
            let (lo, hi) = (key(lo), key(hi));
            if lo.len() < 2 || hi.len() < 2 {
                return Err(err(format!("`{part}` is not a range like 1.27..1.37")));
            }
            let inside: Vec<KubeVersion> = KubeVersion::supported()
                .into_iter()
                .filter(|v| {
                    let k = vec![u64::from(v.major), u64::from(v.minor)];
                    k >= lo[..2].to_vec() && k <= hi[..2].to_vec()
                })
                .collect();
            if inside.is_empty() {
                return Err(err(format!("no supported version lies in `{part}`")));
            }
            out.extend(inside);
        } else {
            out.push(
                part.parse()
                    .map_err(|e: crate::toolchain::versions::UnknownVersion| err(e.to_string()))?,
            );
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(err("it names no version".into()));
    }
    Ok(out)
}

/// Parses `openkruise@v1.6.0,v1.7.0,openkruise@v1.9.0` (a bare tag reuses the previous name).
pub fn parse_controllers(spec: &str) -> Result<Vec<ControllerRef>, MatrixError> {
    let mut out: Vec<ControllerRef> = vec![];
    let mut name: Option<String> = None;
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let full = if part.contains('@') {
            name = part.split('@').next().map(String::from);
            part.to_string()
        } else {
            match &name {
                Some(n) => format!("{n}@{part}"),
                None => {
                    return Err(MatrixError::Controllers {
                        given: spec.into(),
                        detail: format!("`{part}` has no controller name; write openkruise@{part}"),
                    });
                }
            }
        };
        let r: ControllerRef =
            full.parse()
                .map_err(|e: crate::controller::RefError| MatrixError::Controllers {
                    given: spec.into(),
                    detail: e.to_string(),
                })?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if out.is_empty() {
        return Err(MatrixError::Controllers {
            given: spec.into(),
            detail: "it names no controller".into(),
        });
    }
    Ok(out)
}

/// `ci/matrix.yaml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixFile {
    /// Kubernetes versions (range or list).
    pub kubernetes: String,
    /// Controllers.
    pub controllers: String,
}

impl MatrixFile {
    /// Reads one.
    pub fn load(path: &Path) -> Result<Self, MatrixError> {
        let err = |detail: String| MatrixError::File {
            path: path.display().to_string(),
            detail,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))
    }
}

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
}

/// The matrix report (`matrix.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixReport {
    /// Matrix id.
    pub id: String,
    /// Cells, by Kubernetes version then controller.
    pub cells: Vec<CellReport>,
}

fn rank(o: &Outcome) -> u8 {
    match o {
        Outcome::Skipped { .. } => 0,
        Outcome::Judged(Verdict::Pass) => 1,
        Outcome::Judged(Verdict::ExpectedFail { .. }) => 2,
        Outcome::InfraError { .. } => 3,
        Outcome::Judged(Verdict::UnexpectedPass { .. }) => 4,
        Outcome::Judged(Verdict::Fail) => 5,
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
}

/// Builds every binary the cells need first, two builds at a time.
async fn prebuild(env: MatrixEnv<'_>, versions: &[KubeVersion], controllers: &[ControllerRef]) {
    let kube = versions.iter().map(|v| {
        let tc = env.toolchain.clone();
        let v = *v;
        async move {
            if let Err(e) = tc.kubernetes(v).await {
                env.progress
                    .line(&format!("warning: Kubernetes {v} did not build: {e}"));
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
                    .line(&format!("warning: {c} did not build: {e}"));
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
    futures::stream::iter(std::iter::once(kwok).chain(kube).chain(ctrl))
        .buffer_unordered(2)
        .collect::<Vec<()>>()
        .await;
}

/// Runs every cell; a cell whose cluster cannot start is an infrastructure error and the
/// others still run. Writes `matrix.json` and `matrix.html` under `dir`.
pub async fn run_matrix(
    env: MatrixEnv<'_>,
    versions: &[KubeVersion],
    controllers: &[ControllerRef],
    id: &str,
    dir: &Path,
) -> std::io::Result<MatrixReport> {
    std::fs::create_dir_all(dir)?;
    env.progress.line(&format!(
        "matrix {id}: {} Kubernetes version(s) x {} release(s); building what is missing",
        versions.len(),
        controllers.len()
    ));
    prebuild(env, versions, controllers).await;
    let mut report = MatrixReport {
        id: id.into(),
        cells: vec![],
    };
    let order: Vec<(KubeVersion, ControllerRef)> = versions
        .iter()
        .flat_map(|v| controllers.iter().map(move |c| (*v, c.clone())))
        .collect();
    let cells = order.iter().cloned().map(|(v, c)| async move {
        let slug = format!("k8s-{}_{}-{}", v, c.kind.name(), c.slug());
        let plan = crate::run::plan(env.scenarios, env.filter, v, &c);
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

fn write_matrix(dir: &Path, report: &MatrixReport) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(report).expect("serializes");
    for (name, body) in [
        ("matrix.json", json),
        ("matrix.html", matrix_html(report).into_bytes()),
    ] {
        crate::report::atomic_write(&dir.join(name), &body)?;
    }
    Ok(())
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The grid: Kubernetes versions down, releases across, each cell coloured by its worst
/// result, naming the known bugs seen there and linking to its own report.
pub fn matrix_html(r: &MatrixReport) -> String {
    let mut versions: Vec<KubeVersion> = r.cells.iter().map(|c| c.kubernetes).collect();
    versions.sort();
    versions.dedup();
    let mut controllers: Vec<ControllerRef> = vec![];
    for c in &r.cells {
        if !controllers.contains(&c.controller) {
            controllers.push(c.controller.clone());
        }
    }
    let mut grid = String::from("<tr><th>Kubernetes \\ release</th>");
    for c in &controllers {
        grid.push_str(&format!("<th>{}</th>", esc(&c.to_string())));
    }
    grid.push_str("</tr>\n");
    for v in &versions {
        grid.push_str(&format!("<tr><th>{v}</th>"));
        for c in &controllers {
            match r
                .cells
                .iter()
                .find(|x| x.kubernetes == *v && &x.controller == c)
            {
                Some(cell) => {
                    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                    let mut bugs: Vec<String> = vec![];
                    for x in &cell.results {
                        *counts.entry(x.outcome.label()).or_default() += 1;
                        if let Outcome::Judged(Verdict::ExpectedFail { bug }) = &x.outcome {
                            bugs.push(format!("{} ({})", bug, x.scenario));
                        }
                    }
                    let class = match cell.worst.as_str() {
                        "pass" => "pass",
                        "expected-fail" => "xfail",
                        "skipped" | "empty" => "skip",
                        "INFRA-ERROR" => "infra",
                        _ => "fail",
                    };
                    grid.push_str(&format!(
                        "<td class=\"{class}\"><a href=\"{}/report.html\">{}</a><br><small>{}</small><ul>{}</ul></td>",
                        esc(&cell.dir),
                        esc(&cell.worst),
                        esc(&counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")),
                        bugs.iter().map(|b| format!("<li>{}</li>", esc(b))).collect::<String>()
                    ));
                }
                None => grid.push_str("<td></td>"),
            }
        }
        grid.push_str("</tr>\n");
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>matrix {id}</title><style>
body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:6px 10px;vertical-align:top}}
td.pass{{background:#cfc}}td.xfail{{background:#ffd}}td.skip{{background:#eee}}td.fail{{background:#fcc}}td.infra{{background:#fc9}}
</style></head><body><h1>compatibility matrix {id}</h1>
<table>{grid}</table></body></html>\n",
        id = esc(&r.id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_expand_ranges_over_supported_releases() {
        let v: Vec<String> = parse_versions("1.20..1.33")
            .unwrap()
            .iter()
            .map(|v| v.minor_string())
            .collect();
        assert_eq!(v, ["1.29", "1.32"]);
        let v: Vec<String> = parse_versions("1.37,1.32,1.32")
            .unwrap()
            .iter()
            .map(|v| v.minor_string())
            .collect();
        assert_eq!(v, ["1.32", "1.37"]);
        assert!(
            parse_versions("1.10..1.12")
                .unwrap_err()
                .to_string()
                .contains("no supported version")
        );
        assert!(parse_versions("1.31").is_err());
    }

    #[test]
    fn controllers_reuse_the_previous_name() {
        let c: Vec<String> = parse_controllers("openkruise@v1.6.0,v1.7.0,openkruise@v1.9.0")
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            c,
            [
                "openkruise@v1.6.0",
                "openkruise@v1.7.0",
                "openkruise@v1.9.0"
            ]
        );
        assert!(
            parse_controllers("v1.6.0")
                .unwrap_err()
                .to_string()
                .contains("no controller name")
        );
    }

    #[test]
    fn the_checked_in_matrix_file_parses() {
        let f = MatrixFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/matrix.yaml"))
            .unwrap();
        assert!(!parse_versions(&f.kubernetes).unwrap().is_empty());
        assert_eq!(parse_controllers(&f.controllers).unwrap().len(), 5);
    }
}
