//! Upgrades: workloads of every kind survive replacing the controller with another version.
//! These scenarios run only in qualification (`harness qualify`), which installs the baseline
//! and gives the body an upgrade to the candidate.

use std::collections::BTreeMap;

use anyhow::ensure;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::Api;
use serde_json::json;

use super::common::*;
use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, Requirements, Scenario, status};

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "upgrade/workloads-survive-a-controller-upgrade",
        suite: "upgrade",
        summary: "a CloneSet with a volumeClaimTemplate, an Advanced DaemonSet, a SidecarSet over a \
                  CloneSet and a WorkloadSpread over a Deployment settle across an upgrade: no pod \
                  recreated, no PVC lost",
        labels: &["upgrade"],
        requires: Requirements {
            upgrade: true,
            ..Default::default()
        },
        allowed_warnings: &[],
        body: |ctx| workloads_survive(ctx).boxed(),
    }]
}

async fn workloads_survive(ctx: Ctx) -> anyhow::Result<()> {
    create_workloads(&ctx).await?;
    settle(&ctx).await?;
    let pods: Api<Pod> = ctx.api();
    let pvcs: Api<PersistentVolumeClaim> = ctx.api();
    let pods_before = live_uids(&pods).await?;
    let pvcs_before = live_uids(&pvcs).await?;
    // The candidate replaces the baseline: its CRDs, webhook configurations and manager.
    ctx.upgrade_controller().await?;
    settle(&ctx).await?;
    let pods_after = live_uids(&pods).await?;
    let pvcs_after = live_uids(&pvcs).await?;
    ensure!(
        pods_before == pods_after,
        "pods changed across the upgrade: {pods_before:?} -> {pods_after:?}"
    );
    for (name, uid) in &pvcs_before {
        ensure!(
            pvcs_after.get(name) == Some(uid),
            "PVC {name} was lost or recreated across the upgrade"
        );
    }
    Ok(())
}

/// One workload of each kind the controller manages or acts on.
async fn create_workloads(ctx: &Ctx) -> anyhow::Result<()> {
    create(
        ctx,
        with_data_volume(cloneset("data", 2, "InPlaceIfPossible"), "1Gi"),
    )
    .await?;
    let mut ds = cloneset("agent", 0, "RollingUpdate");
    ds["kind"] = json!("DaemonSet");
    let spec = ds["spec"].as_object_mut().expect("object");
    spec.remove("replicas");
    spec.remove("updateStrategy");
    create(ctx, ds).await?;
    create_observed(
        ctx,
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
        ctx,
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
    create(ctx, dep).await?;
    create(ctx, cloneset("with-sidecar", 2, "InPlaceIfPossible")).await?;

    Ok(())
}

/// Every workload rolled out and ready.
async fn settle(ctx: &Ctx) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let nodes = nodes.list(&Default::default()).await?.items.len() as i64;
    rolled_out(ctx, "apps.kruise.io/v1alpha1", "CloneSet", "data", 2, &[]).await?;
    rolled_out(
        ctx,
        "apps.kruise.io/v1alpha1",
        "CloneSet",
        "with-sidecar",
        2,
        &[],
    )
    .await?;
    rolled_out(ctx, "apps/v1", "Deployment", "spread", 2, &[]).await?;
    let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "DaemonSet").await?;
    until(
        &api,
        "agent",
        "DaemonSet agent ready",
        ctx.timeouts.converge,
        move |o| {
            async move {
                let Some(o) = o else {
                    return Check::Pending("absent".into());
                };
                let s = status(&o);
                Check::when(
                    s["numberReady"].as_i64() == Some(nodes)
                        && s["observedGeneration"].as_i64() == o.metadata.generation,
                    || format!("status {s}"),
                )
            }
            .boxed()
        },
    )
    .await?;
    Ok(())
}

/// Name -> UID of the objects of `api` that are not being deleted.
async fn live_uids<K>(api: &Api<K>) -> Result<BTreeMap<String, String>, kube::Error>
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
            let name = m.name.clone().unwrap_or_default();
            (name, m.uid.clone().unwrap_or_default())
        })
        .collect())
}
