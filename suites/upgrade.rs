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
use crate::scenario::workload::{
    AdvancedDaemonSet, AdvancedDaemonSetKind, CloneSet, CloneSetKind, Deployment, DeploymentKind,
    Handle,
};
use crate::scenario::{Ctx, Requirements, Scenario};

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "upgrade/workloads-survive-a-controller-upgrade",
            "a CloneSet with a volumeClaimTemplate, an Advanced DaemonSet, a SidecarSet over a \
                  CloneSet and a WorkloadSpread over a Deployment settle across an upgrade: no pod \
                  recreated, no PVC lost",
            &["upgrade"],
            |ctx| workloads_survive(ctx).boxed(),
        )
        .requiring(Requirements {
            upgrade: true,
            ..Default::default()
        }),
    ]
}

async fn workloads_survive(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step("a workload of each kind settles", async {
        create_workloads(&ctx).await?;
        settle(&ctx).await?;
        Ok(())
    })
    .await?;
    let pods: Api<Pod> = ctx.api();
    let pvcs: Api<PersistentVolumeClaim> = ctx.api();
    let (pods_before, pvcs_before) = ctx
        .step(
            "the candidate replaces the controller and the workloads settle again",
            async {
                let pods_before = live_uids(&pods).await?;
                let pvcs_before = live_uids(&pvcs).await?;
                // The candidate replaces the baseline: its
                // CRDs, webhook configurations and manager.
                ctx.upgrade_controller().await?;
                settle(&ctx).await?;
                Ok((pods_before, pvcs_before))
            },
        )
        .await?;
    ctx.step("no pod was recreated and no PVC lost", async {
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
    })
    .await
}

/// One workload of each kind the controller manages or acts on.
async fn create_workloads(ctx: &Ctx) -> anyhow::Result<()> {
    CloneSet::new("data")
        .replicas(2)
        .in_place_if_possible()
        .data_volume("1Gi")
        .create(ctx)
        .await?;
    AdvancedDaemonSet::new("agent").create(ctx).await?;
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
    Deployment::new("spread").replicas(2).create(ctx).await?;
    CloneSet::new("with-sidecar")
        .replicas(2)
        .in_place_if_possible()
        .create(ctx)
        .await?;
    Ok(())
}

/// Every workload rolled out and ready (the Advanced DaemonSet on every node).
async fn settle(ctx: &Ctx) -> anyhow::Result<()> {
    let t = ctx.timeouts.converge;
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let nodes = nodes.list(&Default::default()).await?.items.len() as i64;
    let data: Handle<CloneSetKind> = Handle::of(ctx, "data");
    let with_sidecar: Handle<CloneSetKind> = Handle::of(ctx, "with-sidecar");
    let spread: Handle<DeploymentKind> = Handle::of(ctx, "spread");
    let agent: Handle<AdvancedDaemonSetKind> = Handle::of(ctx, "agent");
    data.wait_rolled_out(2, t, &[]).await?;
    with_sidecar.wait_rolled_out(2, t, &[]).await?;
    spread.wait_rolled_out(2, t, &[]).await?;
    agent.wait_rolled_out(nodes, t, &[]).await?;
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
