//! Release qualification: may a candidate ship? [`compare`] turns a baseline's and a
//! candidate's results on the same cells into regressions, fixes and unchanged results (an
//! infrastructure error on either side is neither); [`upgrades`] checks, on each Kubernetes
//! version, that workloads survive replacing the baseline with the candidate. The verdict is a
//! [`Qualification`], written to `qualify.json` atomically.

use std::collections::BTreeMap;
use std::path::Path;

use futures::FutureExt;
use serde::{Deserialize, Serialize};

use crate::cluster::local::LocalProvider;
use crate::controller::{ControllerRef, Host};
use crate::matrix::MatrixReport;
use crate::run::{Outcome, ScenarioResult, Status};
use crate::toolchain::{KubeVersion, Toolchain};

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
/// compares the results, checks the upgrade on every Kubernetes version of the report, and
/// writes `qualify.json` into `dir`.
pub async fn qualify(
    report: &MatrixReport,
    provider: &LocalProvider,
    toolchain: &Toolchain,
    baseline: &ControllerRef,
    candidate: &ControllerRef,
    dir: &Path,
) -> std::io::Result<Qualification> {
    let mut q = compare(report, baseline, candidate);
    let mut versions: Vec<KubeVersion> = report.cells.iter().map(|c| c.kubernetes).collect();
    versions.dedup();
    for v in versions {
        let name = format!("{}-upgrade-{}", report.id, v.minor);
        let checked = upgrade(provider, toolchain, v, baseline, candidate, &name).await;
        q.upgrades.push(checked.unwrap_or_else(|e| UpgradeReport {
            kubernetes: v,
            baseline: baseline.clone(),
            candidate: candidate.clone(),
            problems: vec![format!("{e:#}")],
        }));
    }
    q.write(dir)?;
    Ok(q)
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
    let no_gates = BTreeMap::new();
    baseline
        .controller()
        .install(Host::Processes(&mut cluster), toolchain, &no_gates)
        .await?;
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
    use crate::suites::common::*;
    create(
        &ctx,
        with_data_volume(cloneset("data", 2, "InPlaceIfPossible"), "1Gi"),
    )
    .await?;
    let mut ds = cloneset("agent", 0, "RollingUpdate");
    ds["kind"] = json!("DaemonSet");
    let spec = ds["spec"].as_object_mut().expect("object");
    spec.remove("replicas");
    spec.remove("updateStrategy");
    create(&ctx, ds).await?;
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
    let mut dep = cloneset("spread", 2, "RollingUpdate");
    dep["apiVersion"] = json!("apps/v1");
    dep["kind"] = json!("Deployment");
    dep["spec"]
        .as_object_mut()
        .expect("object")
        .remove("updateStrategy");
    create(&ctx, dep).await?;
    create(&ctx, cloneset("with-sidecar", 2, "InPlaceIfPossible")).await?;

    let settle = |ctx: crate::scenario::Ctx| async move {
        rolled_out(&ctx, "apps.kruise.io/v1alpha1", "CloneSet", "data", 2, &[]).await?;
        rolled_out(
            &ctx,
            "apps.kruise.io/v1alpha1",
            "CloneSet",
            "with-sidecar",
            2,
            &[],
        )
        .await?;
        rolled_out(&ctx, "apps/v1", "Deployment", "spread", 2, &[]).await?;
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
    let upgraded = candidate
        .controller()
        .install(Host::Processes(&mut cluster), toolchain, &no_gates)
        .await?;
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
    if let Err(e) = upgraded.check().await {
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
}
