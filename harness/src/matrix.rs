//! Version-compatibility matrices and release qualification. Start with [`run_matrix`]: every
//! cell (Kubernetes version x controller release) runs the selected scenarios as `harness run`
//! would, with its own reports; the matrix report is a grid coloured by each cell's worst
//! result. [`compare`] turns two releases' results on the same cells into regressions, fixes
//! and unchanged results.

use std::collections::BTreeMap;
use std::path::Path;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::bundle::{ControllerRef, openkruise};
use crate::cluster::local::LocalProvider;
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
            let key = |s: &str| crate::run::ledger::version_key(s);
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
                .map_err(|e: crate::bundle::RefError| MatrixError::Controllers {
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
            if let Err(e) = openkruise::build_ref(&tc, &c).await {
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

use futures::FutureExt;

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
        let slug = format!("k8s-{}_{}-{}", v, c.controller.name(), c.slug());
        let plan = crate::run::plan(env.scenarios, env.filter, v, &c);
        let files = Files::new(dir, &slug)?;
        let mut reporters: Vec<Box<dyn Reporter>> =
            vec![Box::new(Terminal::default()), Box::new(files)];
        let results = crate::run::execute(
            &plan,
            Env {
                scenarios: env.scenarios,
                ledger: env.ledger,
                provider: env.provider,
                toolchain: env.toolchain,
                options: env.options,
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
        Outcome::Judged(_) if r.failure.is_some() => Side::Failed,
        Outcome::Judged(_) => Side::Passed,
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

/// What the upgrade check saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// Installs `baseline`, creates a workload of each kind (a CloneSet with a volumeClaimTemplate,
/// an Advanced DaemonSet, a SidecarSet injecting into a CloneSet, a WorkloadSpread over a
/// Deployment), replaces the manager with `candidate` (its CRDs and webhooks too), and checks
/// that the workloads settle with no pod recreated, no PVC lost and no orphan left.
pub async fn upgrade(
    provider: &LocalProvider,
    toolchain: &Toolchain,
    kubernetes: KubeVersion,
    baseline: &ControllerRef,
    candidate: &ControllerRef,
    name: &str,
) -> anyhow::Result<UpgradeReport> {
    use crate::cluster::{Cluster, ClusterProvider};
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
    use kube::api::{Api, PostParams};
    use serde_json::json;

    let profile = crate::run::scenario_profile(kubernetes);
    let mut cluster = provider.create(name, &profile).await?;
    let install = |r: &ControllerRef| openkruise::InstallOptions {
        version: Some(r.version.clone()),
        checkout: r.checkout.clone(),
        ..Default::default()
    };
    openkruise::install(&mut cluster, toolchain, &install(baseline)).await?;
    let client = cluster.client();
    let ns = "upgrade";
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
    )
    .await?;
    let ctx = crate::scenario::Ctx {
        namespace: ns.into(),
        client: client.clone(),
        facts: crate::scenario::Facts {
            kubernetes,
            controller: baseline.clone(),
            zones: BTreeMap::new(),
        },
        timeouts: Default::default(),
        cleanup: Default::default(),
    };
    use crate::scenario::workload::{
        AdvancedDaemonSet, CloneSet, CloneSetKind, Deployment, DeploymentKind, Handle,
    };
    use crate::suites::common::*;
    CloneSet::new("data")
        .replicas(2)
        .in_place_if_possible()
        .data_volume("1Gi")
        .create(&ctx)
        .await?;
    AdvancedDaemonSet::new("agent").create(&ctx).await?;
    create_observed(
        &ctx,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "SidecarSet",
            "metadata": {"name": "upgrade-logger"},
            "spec": {
                "selector": {"matchLabels": {"app": "with-sidecar"}},
                "containers": [{"name": "logger", "image": "busybox:1.36", "command": ["sleep", "3600"]}]
            }
        }),
    )
    .await?;
    create_observed(
        &ctx,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "WorkloadSpread",
            "metadata": {"name": "spread"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "spread"},
                "subsets": [
                    {"name": "zone-a", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-a"), "maxReplicas": 1},
                    {"name": "zone-b", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-b")}
                ]
            }
        }),
    )
    .await?;
    Deployment::new("spread").replicas(2).create(&ctx).await?;
    CloneSet::new("with-sidecar")
        .replicas(2)
        .in_place_if_possible()
        .create(&ctx)
        .await?;

    let settle = |ctx: crate::scenario::Ctx| async move {
        let t = ctx.timeouts.converge;
        let data: Handle<CloneSetKind> = Handle::of(&ctx, "data");
        let with_sidecar: Handle<CloneSetKind> = Handle::of(&ctx, "with-sidecar");
        let spread: Handle<DeploymentKind> = Handle::of(&ctx, "spread");
        data.wait_rolled_out(2, t, &[]).await?;
        with_sidecar.wait_rolled_out(2, t, &[]).await?;
        spread.wait_rolled_out(2, t, &[]).await?;
        let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "DaemonSet").await?;
        let nodes = profile_nodes(&ctx).await?;
        crate::scenario::wait::until(
            &api,
            "agent",
            "DaemonSet agent ready",
            ctx.timeouts.converge,
            move |o| {
                async move {
                    let Some(o) = o else {
                        return crate::scenario::wait::Check::Pending("absent".into());
                    };
                    let s = crate::scenario::status(&o);
                    crate::scenario::wait::Check::when(
                        s["numberReady"].as_i64() == Some(nodes)
                            && s["observedGeneration"].as_i64() == o.metadata.generation,
                        || format!("status {s}"),
                    )
                }
                .boxed()
            },
        )
        .await?;
        anyhow::Ok(())
    };
    settle(ctx.clone()).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pods_before = live_uids(&pods).await?;
    let pvcs_before = live_uids(&pvcs).await?;

    // The candidate replaces the baseline: its CRDs, webhook configurations and manager.
    cluster.stop_component("kruise-manager")?;
    let manager = openkruise::install(&mut cluster, toolchain, &install(candidate)).await?;
    settle(ctx.clone()).await?;

    let mut problems = vec![];
    let pods_after = live_uids(&pods).await?;
    let pvcs_after = live_uids(&pvcs).await?;
    if pods_before != pods_after {
        problems.push(format!(
            "pods changed across the upgrade: {pods_before:?} -> {pods_after:?}"
        ));
    }
    for (name, uid) in &pvcs_before {
        if pvcs_after.get(name) != Some(uid) {
            problems.push(format!("PVC {name} was lost or recreated"));
        }
    }
    problems.extend(crate::scenario::invariants::orphans(&client, ns).await?);
    if let Err(e) = manager.check(&cluster) {
        problems.push(e.to_string());
    }
    cluster.destroy()?;
    Ok(UpgradeReport {
        kubernetes,
        baseline: baseline.clone(),
        candidate: candidate.clone(),
        problems,
    })
}

/// Name -> UID of the objects of `api` that are not being deleted.
async fn live_uids<K>(api: &kube::Api<K>) -> Result<BTreeMap<String, String>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(kube::Resource::meta)
        .filter(|m| m.deletion_timestamp.is_none())
        .map(|m| {
            (
                m.name.clone().unwrap_or_default(),
                m.uid.clone().unwrap_or_default(),
            )
        })
        .collect())
}

async fn profile_nodes(ctx: &crate::scenario::Ctx) -> anyhow::Result<i64> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(ctx.client.clone());
    Ok(nodes.list(&Default::default()).await?.items.len() as i64)
}
