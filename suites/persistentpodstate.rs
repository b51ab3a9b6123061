//! PersistentPodState (`apps.kruise.io/v1alpha1`): the node topology a StatefulSet's pods ran
//! on is recorded, and a pod recreated under the same name is admitted with that topology as
//! its node selector (required) or node affinity preference (preferred). Start with
//! [`scenarios`].

use anyhow::{Context, ensure};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};

use super::common::*;
use crate::scenario::wait::{Check, until};
use crate::scenario::workload::{AdvancedStatefulSet, Handle, Kind, Spec, StatefulSet};
use crate::scenario::{Ctx, Scenario, status};

const API: &str = "apps.kruise.io/v1alpha1";
const KIND: &str = "PersistentPodState";
const ZONE: &str = "topology.kubernetes.io/zone";
const NODE_TYPE: &str = "node-type";
const INJECTED: &str = "kruise.io/injected-persistent-pod-state";
const KEPT: &str = "harness/slot";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "persistentpodstate/statefulset-pod-recreated-in-its-recorded-zone",
            "a StatefulSet pod deleted by hand comes back in the zone recorded for it (required) with its node type preferred, its annotation recorded; scaling down drops the record (WhenScaled)",
            &[
                "smoke",
                "persistentpodstate",
                "statefulset",
                "topology",
                "retention",
            ],
            |ctx| explicit(ctx).boxed(),
        ),
        Scenario::new(
            "persistentpodstate/advanced-statefulset-annotations-generate-the-state",
            "annotations on an Advanced StatefulSet make the controller create its PersistentPodState; a deleted pod comes back in its recorded zone",
            &[
                "persistentpodstate",
                "advanced-statefulset",
                "topology",
                "auto-generate",
            ],
            |ctx| generated(ctx).boxed(),
        ),
    ]
}

/// Creates `w` with `replicas` pods annotated `KEPT=<value>` and `annotations` on the workload.
async fn start<K: Kind>(
    ctx: &Ctx,
    w: Spec<K>,
    replicas: i64,
    annotations: Value,
) -> anyhow::Result<Handle<K>> {
    let mut m = w.replicas(replicas).manifest();
    m["metadata"]["annotations"] = annotations;
    m["spec"]["template"]["metadata"]["annotations"] = json!({KEPT: "kept"});
    let name = m["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    create(ctx, m).await?;
    let w = Handle::of(ctx, &name);
    w.wait_rolled_out(replicas, ctx.timeouts.converge, &[])
        .await?;
    Ok(w)
}

/// Waits until the state `name` records exactly `pods`, each with the `keys` of its node.
async fn wait_recorded(
    ctx: &Ctx,
    name: &str,
    pods: &[String],
    keys: &'static [&'static str],
) -> anyhow::Result<Value> {
    let api = ctx.dyn_api(API, KIND).await?;
    let want = pods.to_vec();
    let what = format!("{KIND} {name} to record pods {pods:?} with {keys:?}");
    let o = until(&api, name, &what, ctx.timeouts.converge, move |o| {
        let want = want.clone();
        async move {
            let Some(o) = o else {
                return Check::Pending("the state does not exist".into());
            };
            let states = &status(&o)["podStates"];
            let recorded: Vec<String> = states
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            let complete = want.iter().all(|p| {
                keys.iter()
                    .all(|k| states[p]["nodeTopologyLabels"][k].is_string())
            });
            Check::when(recorded == want && complete, || {
                format!("status.podStates {states}, want {want:?} each with {keys:?}")
            })
        }
        .boxed()
    })
    .await?;
    o.map(|o| status(&o)["podStates"].clone())
        .context("the state vanished")
}

/// Deletes pod `name` and waits for its successor (another UID) to run; returns it.
async fn recreate(ctx: &Ctx, name: &str) -> anyhow::Result<Pod> {
    let api: Api<Pod> = ctx.api();
    let old = api.get(name).await?.metadata.uid;
    ctx.delete("v1", "Pod", name)
        .await
        .map_err(refusal)
        .with_context(|| format!("delete pod {name}"))?;
    let what = format!("pod {name} recreated and running");
    let pod = until(&api, name, &what, ctx.timeouts.converge, move |p| {
        let old = old.clone();
        async move {
            let Some(p) = p else {
                return Check::Pending("absent".into());
            };
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            Check::when(
                p.metadata.uid != old && phase.as_deref() == Some("Running"),
                || format!("uid {:?} (old {old:?}), phase {phase:?}", p.metadata.uid),
            )
        }
        .boxed()
    })
    .await?;
    pod.context("the pod vanished")
}

/// The zone of the node `p` runs on.
fn zone_of(ctx: &Ctx, p: &Pod) -> Option<String> {
    let node = p.spec.as_ref()?.node_name.as_ref()?;
    ctx.facts
        .zones
        .iter()
        .find(|(_, nodes)| nodes.contains(node))
        .map(|(z, _)| z.clone())
}

async fn explicit(ctx: Ctx) -> anyhow::Result<()> {
    let name = "zoned";
    let sts_ar = crate::scenario::workload::StatefulSetKind::api_resource();
    let w = ctx
        .step("a PersistentPodState over a StatefulSet of 2 pods", async {
            create_observed(
        &ctx,
        json!({
            "apiVersion": API, "kind": KIND, "metadata": {"name": "state"},
            "spec": {
                "targetRef": {"apiVersion": sts_ar.api_version, "kind": sts_ar.kind, "name": name},
                "requiredPersistentTopology": {"nodeTopologyKeys": [ZONE]},
                "preferredPersistentTopology": [
                    {"weight": 50, "preference": {"nodeTopologyKeys": [NODE_TYPE]}}
                ],
                "persistentPodAnnotations": [{"key": KEPT}],
                "persistentPodStateRetentionPolicy": "WhenScaled"
            }
        }),
    )
    .await?;
            let w = start(
                &ctx,
                StatefulSet::new(name).parallel_owning_claims(),
                2,
                json!({}),
            )
            .await?;
            Ok(w)
        })
        .await?;
    let pods = vec![format!("{name}-0"), format!("{name}-1")];
    let states = ctx
        .step(
            "both pods are recorded with their zone and node type",
            async {
                let states = wait_recorded(&ctx, "state", &pods, &[ZONE, NODE_TYPE]).await?;
                Ok(states)
            },
        )
        .await?;
    let first = &states[&pods[0]];
    ctx.step("the record of pod 0 holds its node and annotation", async {
        ensure!(
            first["annotations"][KEPT] == "kept" && first["nodeName"].is_string(),
            "pod {} recorded without its node or annotation {KEPT}: {first}",
            pods[0]
        );
        Ok(())
    })
    .await?;
    ctx.step("deleted, pod 0 comes back in its recorded zone, preferring its node type", async {
        let p = recreate(&ctx, &pods[0]).await?;
        let spec = p.spec.clone().unwrap_or_default();
        let zone = first["nodeTopologyLabels"][ZONE]
            .as_str()
            .unwrap_or_default();
        let selected = spec.node_selector.clone().unwrap_or_default();
        ensure!(
            selected.get(ZONE).map(String::as_str) == Some(zone)
                && zone_of(&ctx, &p).as_deref() == Some(zone),
            "pod {} came back with nodeSelector {selected:?} on node {:?} (zone {:?}), want zone {zone}",
            pods[0],
            spec.node_name,
            zone_of(&ctx, &p)
        );
        let preferred = serde_json::to_value(
            spec.affinity
                .and_then(|a| a.node_affinity)
                .and_then(|n| n.preferred_during_scheduling_ignored_during_execution),
        )?;
        let node_type = &first["nodeTopologyLabels"][NODE_TYPE];
        ensure!(
            preferred[0]["weight"] == 50
                && preferred[0]["preference"]["matchExpressions"][0]
                    == json!({"key": NODE_TYPE, "operator": "In", "values": [node_type]}),
            "pod {} prefers {preferred}, want weight 50 on {NODE_TYPE} {node_type}",
            pods[0]
        );
        let injected = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INJECTED));
        ensure!(
            injected.map(String::as_str) == Some("state"),
            "pod {} lacks {INJECTED}=state: {injected:?}",
            pods[0]
        );
        Ok(())
    })
    .await?;
    ctx.step("scaled in to 1, the record of pod 1 is dropped", async {
        w.patch(json!({"spec": {"replicas": 1}}))
            .await
            .map_err(refusal)?;
        w.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        wait_recorded(&ctx, "state", &pods[..1], &[ZONE, NODE_TYPE]).await?;
        Ok(())
    })
    .await
}

async fn generated(ctx: Ctx) -> anyhow::Result<()> {
    let name = "generated";
    ctx.step(
        "an annotated Advanced StatefulSet of 2 pods rolls out",
        async {
            let annotations = json!({
                "kruise.io/auto-generate-persistent-pod-state": "true",
                "kruise.io/required-persistent-topology": ZONE,
            });
            start(&ctx, AdvancedStatefulSet::new(name), 2, annotations).await?;
            Ok(())
        },
    )
    .await?;
    let pods = vec![format!("{name}-0"), format!("{name}-1")];
    let states = ctx
        .step(
            "the generated state bears its name, points at it and records both pods",
            async {
                // The state bears the workload's name and points at it.
                let states = wait_recorded(&ctx, name, &pods, &[ZONE]).await?;
                let api = ctx.dyn_api(API, KIND).await?;
                let state = api.get(name).await?;
                let ar = crate::scenario::workload::AdvancedStatefulSetKind::api_resource();
                let spec = &state.data["spec"];
                ensure!(
                    spec["targetRef"]["kind"] == ar.kind.as_str()
                        && spec["targetRef"]["name"] == name
                        && spec["requiredPersistentTopology"]["nodeTopologyKeys"] == json!([ZONE]),
                    "the generated state's spec does not follow the annotations: {spec}"
                );
                Ok(states)
            },
        )
        .await?;
    ctx.step("deleted, pod 1 comes back in its recorded zone", async {
        let zone = states[&pods[1]]["nodeTopologyLabels"][ZONE]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let p = recreate(&ctx, &pods[1]).await?;
        ensure!(
            zone_of(&ctx, &p).as_deref() == Some(zone.as_str()),
            "pod {} came back on node {:?} outside its recorded zone {zone}",
            pods[1],
            p.spec.as_ref().and_then(|s| s.node_name.clone())
        );
        Ok(())
    })
    .await
}
