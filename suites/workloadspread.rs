//! WorkloadSpread: subset patches admitted by the validating webhook (S1), interplay with
//! Priority admission (S4), what a subset injects into the pods it admits, the target filter,
//! the adaptive schedule strategy that moves unschedulable pods to the next subset, and subset
//! patches validated over an Advanced StatefulSet as over a StatefulSet.

use std::time::Duration;

use anyhow::{bail, ensure};
use futures::FutureExt;
use serde_json::{Value, json};

use super::common::*;
use crate::scenario::workload::{
    AdvancedStatefulSet, AdvancedStatefulSetKind, CloneSet, Deployment, Kind, Spec, StatefulSet,
    StatefulSetKind,
};
use crate::scenario::{Ctx, Scenario, status};
use crate::wait::{Check, poll, until};

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "workloadspread/cloneset-volume-claim-templates",
            "a WorkloadSpread with a subset patch over a CloneSet whose container mounts a volumeClaimTemplate is admitted and applied (S1)",
            &["seed", "s1", "webhook"],
            |ctx| s1(ctx, Target::CloneSet).boxed(),
        ),
        Scenario::new(
            "workloadspread/statefulset-volume-claim-templates",
            "the StatefulSet variant of S1",
            &["s1", "webhook"],
            |ctx| s1(ctx, Target::StatefulSet).boxed(),
        ),
        Scenario::new(
            "workloadspread/deployment-priority-class-patch",
            "a subset patching priorityClassName admits pods with the class's priority (S4)",
            &["seed", "s4", "webhook", "admission"],
            |ctx| s4(ctx, Target::Deployment).boxed(),
        ),
        Scenario::new(
            "workloadspread/cloneset-priority-class-patch",
            "the CloneSet variant of S4",
            &["s4", "webhook", "admission"],
            |ctx| s4(ctx, Target::CloneSet).boxed(),
        ),
        Scenario::new(
            "workloadspread/subset-tolerations-and-preferred-terms-are-injected",
            "a subset's tolerations and preferredNodeSelectorTerms (weight and preference) are injected into the pods it admits, and only into those",
            &["workloadspread", "webhook", "admission", "scheduling"],
            |ctx| injected(ctx).boxed(),
        ),
        Scenario::new(
            "workloadspread/target-filter-selects-and-counts-the-managed-pods",
            "pods outside targetFilter.selector are not placed in subsets; replicasPathList's sum is the total a subset's percentage maxReplicas is taken of",
            &["workloadspread", "webhook", "admission", "target-filter"],
            |ctx| target_filter(ctx).boxed(),
        )
        // spec.targetFilter is new in v1.8.0.
        .since("v1.8.0"),
        Scenario::new(
            "workloadspread/numeric-string-max-replicas-is-refused-or-observed",
            "a subset's maxReplicas changed to \"1\" (a numeric string, neither an integer nor a percentage) is refused, or observed by the controller with a status for every subset",
            &["workloadspread", "webhook", "status"],
            |ctx| numeric_string(ctx).boxed(),
        ),
        Scenario::new(
            "workloadspread/adaptive-strategy-reschedules-unschedulable-pods",
            "with scheduleStrategy Adaptive, pods left unschedulable in a subset past rescheduleCriticalSeconds are deleted, the subset is marked unschedulable and their replacements go to the next subset",
            &["workloadspread", "schedule-strategy", "adaptive", "reschedule"],
            |ctx| adaptive(ctx).boxed(),
        )
        // The pods admitted into the subset without nodes fail to schedule. The controller
        // records DeletePodFailed for any error deleting one (NotFound from a stale cache
        // included) and retries on requeue; the body asserts the replacements landed.
        .allowing(&["FailedScheduling", "DeletePodFailed"]),
        Scenario::new(
            "workloadspread/advanced-statefulset-subset-patch-is-validated",
            "a subset patch that leaves the pod invalid (a preStop hook with no handler) is refused over an Advanced StatefulSet as it is over a StatefulSet",
            &["workloadspread", "webhook", "advanced-statefulset"],
            |ctx| patch_validated(ctx).boxed(),
        )
        // Before v1.9.0 (v1.7.0 checked) the webhook refuses no such patch over a StatefulSet
        // either, within the bound: the comparison has no reference there.
        .since("v1.9.0"),
    ]
}

/// A subset patch that leaves a container's preStop hook without a handler, which the API
/// refuses in a pod: asked of the webhook (dry runs) over a StatefulSet, its precondition,
/// then over an Advanced StatefulSet. The webhook validates a patch against its target's
/// template as its cache holds it, and admits it unvalidated while the target is not there
/// yet (a WorkloadSpread may come before its workload), so each is asked until refused.
async fn patch_validated(ctx: Ctx) -> anyhow::Result<()> {
    let (native, advanced) = ("native", "advanced");
    let container = ctx
        .step(
            "a StatefulSet and an Advanced StatefulSet with no pod",
            async {
                let s = StatefulSet::new(native).replicas(0);
                let container = s.manifest()["spec"]["template"]["spec"]["containers"][0]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                s.create(&ctx).await?;
                AdvancedStatefulSet::new(advanced)
                    .replicas(0)
                    .create(&ctx)
                    .await?;
                Ok(container)
            },
        )
        .await?;
    let subsets = || {
        vec![json!({"name": "a", "patch": {"spec": {"containers": [
            {"name": container, "lifecycle": {"preStop": {}}}
        ]}}})]
    };
    let over_native = spread::<StatefulSetKind>(native, subsets());
    ctx.step(
        "over the StatefulSet, the webhook refuses the patch",
        refused_in_time(
            &ctx,
            &over_native,
            "the WorkloadSpread over the StatefulSet was admitted with a subset patch that leaves a preStop hook without a handler",
        ),
    )
    .await?;
    let over_advanced = spread::<AdvancedStatefulSetKind>(advanced, subsets());
    ctx.step(
        "over the Advanced StatefulSet, the webhook refuses it too",
        refused_in_time(
            &ctx,
            &over_advanced,
            "the WorkloadSpread over the Advanced StatefulSet was admitted with a subset patch refused over a StatefulSet",
        ),
    )
    .await
}

/// Asks the API (a dry run) to create `obj` until it refuses it (an answer in 4xx), within the
/// converge bound; else fails with `admitted` and the last answer.
async fn refused_in_time(ctx: &Ctx, obj: &Value, admitted: &str) -> anyhow::Result<()> {
    let what = format!("{admitted}, until refused");
    poll(
        &what,
        ctx.timeouts.converge,
        Duration::from_secs(1),
        || async {
            match ctx.admits(obj).await {
                Err(kube::Error::Api(e)) if (400..500).contains(&e.code) => Check::Met,
                Err(e) => Check::Pending(format!("not answered: {e}")),
                Ok(()) => Check::Pending("admitted".into()),
            }
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{admitted}: {e}"))
}

#[derive(Debug, Clone, Copy)]
enum Target {
    CloneSet,
    StatefulSet,
    Deployment,
}

fn spread<K: Kind>(name: &str, subsets: Vec<Value>) -> Value {
    let ar = K::api_resource();
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "WorkloadSpread",
        "metadata": {"name": "spread"},
        "spec": {
            "targetRef": {"apiVersion": ar.api_version, "kind": ar.kind, "name": name},
            "subsets": subsets
        }
    })
}

/// A WorkloadSpread `name` over the CloneSet `target` with `spec` merged into its spec.
fn spread_over_cloneset(name: &str, target: &str, subsets: Vec<Value>, spec: Value) -> Value {
    let mut ws = spread::<crate::scenario::workload::CloneSetKind>(target, subsets);
    ws["metadata"]["name"] = json!(name);
    for (k, v) in spec.as_object().into_iter().flatten() {
        ws["spec"][k] = v.clone();
    }
    ws
}

fn matched_subset(p: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
    let a = p
        .metadata
        .annotations
        .as_ref()?
        .get("apps.kruise.io/matched-workloadspread")?;
    let v: Value = serde_json::from_str(a).ok()?;
    v["subset"].as_str().map(str::to_string)
}

/// S1: a subset patch over a workload whose container mounts a volumeClaimTemplate.
async fn s1(ctx: Ctx, target: Target) -> anyhow::Result<()> {
    let name = "data-app";
    match target {
        Target::CloneSet => s1_over(ctx, CloneSet::new(name).recreate()).await,
        Target::StatefulSet => s1_over(ctx, StatefulSet::new(name).parallel_owning_claims()).await,
        Target::Deployment => s1_over(ctx, Deployment::new(name)).await,
    }
}

async fn s1_over<K: Kind>(ctx: Ctx, w: Spec<K>) -> anyhow::Result<()> {
    let name = w.name().to_string();
    let w = ctx
        .step("the workload runs with a data volume", async {
            let w = w.replicas(2).data_volume("1Gi").create(&ctx).await?;
            w.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
            Ok(w)
        })
        .await?;
    let existing = pod_uids(&ctx, &format!("app={name}")).await?;

    ctx.step("a WorkloadSpread with a patched subset is admitted", async {
        let patch = json!({
            "metadata": {"labels": {"harness-subset": "zone-a"}},
            "spec": {"containers": [{"name": "main", "env": [{"name": "SUBSET", "value": "zone-a"}]}]}
        });
        create_observed(
            &ctx,
            spread::<K>(
                &name,
                vec![
                    json!({"name": "zone-a", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-a"), "patch": patch}),
                    json!({"name": "zone-b", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-b")}),
                ],
            ),
        )
        .await?;
        Ok(())
    })
    .await?;

    ctx.step("new pods get the subset's patch", async {
        // New pods land per subset with the patch applied.
        w.patch(json!({"spec": {"replicas": 4}}))
            .await
            .map_err(refusal)?;
        w.wait_rolled_out(4, ctx.timeouts.converge, &[]).await?;
        // Pods that existed before only get the subset's metadata; new pods get the whole patch.
        let mut patched = 0;
        for p in pods(&ctx, &format!("app={name}")).await? {
            if existing
                .values()
                .any(|u| Some(u) == p.metadata.uid.as_ref())
            {
                continue;
            }
            let Some(subset) = matched_subset(&p) else {
                continue;
            };
            let pname = p.metadata.name.clone().unwrap_or_default();
            if subset == "zone-a" {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                ensure!(
                    labels.get("harness-subset").map(String::as_str) == Some("zone-a"),
                    "pod {pname} of subset zone-a lacks the patched label: {labels:?}"
                );
                let env = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers[0].env.clone())
                    .unwrap_or_default();
                ensure!(
                    env.iter()
                        .any(|e| e.name == "SUBSET" && e.value.as_deref() == Some("zone-a")),
                    "pod {pname} of subset zone-a lacks the patched env var"
                );
                patched += 1;
            }
        }
        ensure!(patched >= 1, "no new pod was admitted into subset zone-a");
        Ok(())
    })
    .await
}

/// S4: a subset patch setting priorityClassName.
async fn s4(ctx: Ctx, target: Target) -> anyhow::Result<()> {
    let name = "tiered";
    match target {
        Target::CloneSet => s4_over(ctx, CloneSet::new(name).recreate()).await,
        Target::StatefulSet => s4_over(ctx, StatefulSet::new(name).parallel_owning_claims()).await,
        Target::Deployment => s4_over(ctx, Deployment::new(name)).await,
    }
}

async fn s4_over<K: Kind>(ctx: Ctx, w: Spec<K>) -> anyhow::Result<()> {
    let class = ctx.unique("harness-stable");
    let value = 1_000_000_000i64;
    let name = w.name().to_string();
    ctx.step("a WorkloadSpread whose subset patch names a PriorityClass", async {
        create(
            &ctx,
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": class},
                "value": value
            }),
        )
        .await?;
        create_observed(
            &ctx,
            spread::<K>(
                &name,
                vec![
                    json!({"name": "stable", "requiredNodeSelectorTerm": on_nodes("node-type", "stable"), "maxReplicas": 2,
                           "patch": {"spec": {"priorityClassName": class}}}),
                    json!({"name": "elastic", "requiredNodeSelectorTerm": on_nodes("node-type", "elastic")}),
                ],
            ),
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step("the workload's pods are admitted", async {
        let w = w.replicas(4).create(&ctx).await?;
        w.wait_rolled_out(4, ctx.timeouts.converge, &["FailedCreate"])
            .await?;
        Ok(())
    })
    .await?;
    ctx.step("the stable subset's pods carry the class and its priority", async {
        let mut stable = 0;
        for p in pods(&ctx, &format!("app={name}")).await? {
            let pname = p.metadata.name.clone().unwrap_or_default();
            let spec = p.spec.clone().unwrap_or_default();
            match matched_subset(&p).as_deref() {
                Some("stable") => {
                    ensure!(
                        spec.priority_class_name.as_deref() == Some(class.as_str())
                            && spec.priority == Some(value as i32),
                        "pod {pname} of subset stable has class {:?} priority {:?}, want {class} {value}",
                        spec.priority_class_name,
                        spec.priority
                    );
                    stable += 1;
                }
                Some(_) => {}
                None => bail!("pod {pname} was not admitted through the WorkloadSpread"),
            }
        }
        ensure!(stable == 2, "{stable} pods in subset stable, want 2");
        Ok(())
    })
    .await
}

/// The toleration subset `stable` injects.
fn dedicated() -> Value {
    json!({"key": "harness/dedicated", "operator": "Equal", "value": "spread", "effect": "NoSchedule"})
}

/// A subset's `maxReplicas` changed from 1 to "1": a webhook that admits the string must leave
/// a controller that observes it and reports every subset.
async fn numeric_string(ctx: Ctx) -> anyhow::Result<()> {
    let name = "numeric";
    let ws_name = ctx.step("a WorkloadSpread over 2 pods with maxReplicas 1 in subset a", async {
        let w = Deployment::new(name).replicas(2).create(&ctx).await?;
        w.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        let ws = create_observed(
            &ctx,
            spread::<crate::scenario::workload::DeploymentKind>(
                name,
                vec![
                    json!({"name": "a", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-a"), "maxReplicas": 1}),
                    json!({"name": "b", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-b")}),
                ],
            ),
        )
        .await?;
        let ws_name = ws.metadata.name.clone().unwrap_or_default();
        Ok(ws_name)
    })
    .await?;
    let updated = ctx.step("maxReplicas changed to a numeric string is refused, or admitted", async {
        let patch = json!({"spec": {"subsets": [
            {"name": "a", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-a"), "maxReplicas": "1"},
            {"name": "b", "requiredNodeSelectorTerm": on_nodes("topology.kubernetes.io/zone", "zone-b")}]}});
        // Refused: the string is not taken, as a CloneSet's maxUnavailable "1" is not.
        refused_or_admitted(
            &ctx,
            ctx.patch("apps.kruise.io/v1alpha1", "WorkloadSpread", &ws_name, patch)
                .await,
        )
    })
    .await?;
    let Some(updated) = updated else {
        return Ok(());
    };
    ctx.step(
        "admitted, it is observed with a status for both subsets",
        async {
            let generation = updated.metadata.generation;
            let api = ctx
                .dyn_api("apps.kruise.io/v1alpha1", "WorkloadSpread")
                .await?;
            let what = format!(
                "WorkloadSpread {ws_name} to observe its new maxReplicas and report both subsets"
            );
            until(&api, &ws_name, &what, ctx.timeouts.converge, move |o| {
                async move {
                    let Some(o) = o else {
                        return Check::Pending("absent".into());
                    };
                    let st = status(&o);
                    let subsets = st["subsetStatuses"].as_array().map_or(0, Vec::len);
                    Check::when(
                        st["observedGeneration"].as_i64() >= generation && subsets == 2,
                        || format!("status {st}"),
                    )
                }
                .boxed()
            })
            .await?;
            Ok(())
        },
    )
    .await
}

async fn injected(ctx: Ctx) -> anyhow::Result<()> {
    let name = "tolerant";
    let preferred =
        json!({"weight": 60, "preference": on_nodes("topology.kubernetes.io/zone", "zone-a")});
    ctx.step("a WorkloadSpread whose stable subset injects a toleration and a preferred term", async {
        create_observed(
            &ctx,
            spread_over_cloneset(
                "spread",
                name,
                vec![
                    json!({"name": "stable", "requiredNodeSelectorTerm": on_nodes("node-type", "stable"), "maxReplicas": 2,
                           "preferredNodeSelectorTerms": [preferred.clone()], "tolerations": [dedicated()]}),
                    json!({"name": "elastic", "requiredNodeSelectorTerm": on_nodes("node-type", "elastic")}),
                ],
                json!({}),
            ),
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step("a CloneSet of 3 pods rolls out", async {
        let w = CloneSet::new(name)
            .recreate()
            .replicas(3)
            .create(&ctx)
            .await?;
        w.wait_rolled_out(3, ctx.timeouts.converge, &[]).await?;
        Ok(())
    })
    .await?;
    ctx.step("only the stable subset's pods carry the toleration and the preferred term", async {
        let want_toleration: k8s_openapi::api::core::v1::Toleration =
            serde_json::from_value(dedicated())?;
        let want_preferred: k8s_openapi::api::core::v1::PreferredSchedulingTerm =
            serde_json::from_value(preferred)?;
        let mut stable = 0;
        for p in pods(&ctx, &format!("app={name}")).await? {
            let pname = p.metadata.name.clone().unwrap_or_default();
            let spec = p.spec.clone().unwrap_or_default();
            let tolerates = spec
                .tolerations
                .iter()
                .flatten()
                .any(|t| *t == want_toleration);
            let prefers = spec
                .affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .is_some_and(|terms| terms.contains(&want_preferred));
            let subset = matched_subset(&p);
            let in_stable = match subset.as_deref() {
                Some("stable") => true,
                Some(_) => false,
                None => bail!("pod {pname} was not admitted through the WorkloadSpread"),
            };
            ensure!(
                tolerates == in_stable && prefers == in_stable,
                "pod {pname} of subset {subset:?}: toleration {tolerates}, preferred term {prefers}; want both only in subset stable"
            );
            stable += usize::from(in_stable);
        }
        ensure!(stable == 2, "{stable} pods in subset stable, want 2");
        Ok(())
    })
    .await
}

async fn target_filter(ctx: Ctx) -> anyhow::Result<()> {
    let subsets = || {
        vec![
            json!({"name": "stable", "requiredNodeSelectorTerm": on_nodes("node-type", "stable"), "maxReplicas": "50%"}),
            json!({"name": "elastic", "requiredNodeSelectorTerm": on_nodes("node-type", "elastic")}),
        ]
    };
    ctx.step(
        "a WorkloadSpread filtering out others' pods and one summing workers' replicas",
        async {
            // The selector matches no pod of `others`: its pods are left alone.
            create_observed(
                &ctx,
                spread_over_cloneset(
                    "filtered",
                    "others",
                    subsets(),
                    json!({"targetFilter": {"selector": {"matchLabels": {"role": "worker"}}}}),
                ),
            )
            .await?;
            // The replicas counted for `workers` are the sum over the paths:
            // twice spec.replicas, so 50% of them is every one of its 2 pods.
            create_observed(
                &ctx,
                spread_over_cloneset(
                    "summed",
                    "workers",
                    subsets(),
                    json!({"targetFilter": {
                        "selector": {"matchLabels": {"role": "worker"}},
                        "replicasPathList": ["spec.replicas", "spec.replicas"]
                    }}),
                ),
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("both CloneSets roll out", async {
        let others = CloneSet::new("others")
            .recreate()
            .replicas(2)
            .create(&ctx)
            .await?;
        let workers = CloneSet::new("workers")
            .recreate()
            .label("role", "worker")
            .replicas(2)
            .create(&ctx)
            .await?;
        others
            .wait_rolled_out(2, ctx.timeouts.converge, &[])
            .await?;
        workers
            .wait_rolled_out(2, ctx.timeouts.converge, &[])
            .await?;
        Ok(())
    })
    .await?;
    ctx.step("the filtered-out pods are placed in no subset", async {
        for p in pods(&ctx, "app=others").await? {
            ensure!(
                matched_subset(&p).is_none(),
                "pod {} outside targetFilter.selector was placed in subset {:?}",
                p.metadata.name.clone().unwrap_or_default(),
                matched_subset(&p)
            );
        }
        Ok(())
    })
    .await?;
    ctx.step("both worker pods are in stable, 50% of the summed replicas", async {
        let subsets: Vec<Option<String>> = pods(&ctx, "app=workers")
            .await?
            .iter()
            .map(matched_subset)
            .collect();
        ensure!(
            subsets.iter().all(|s| s.as_deref() == Some("stable")) && subsets.len() == 2,
            "pods of workers in subsets {subsets:?}; want both in stable (50% of the 4 replicas replicasPathList sums)"
        );
        Ok(())
    })
    .await
}

async fn adaptive(ctx: Ctx) -> anyhow::Result<()> {
    let name = "adaptive";
    ctx.step("an Adaptive WorkloadSpread whose first subset no node matches", async {
        create_observed(
            &ctx,
            spread_over_cloneset(
                "spread",
                name,
                vec![
                    // No node carries this node-type: pods placed here stay unschedulable.
                    json!({"name": "nowhere", "requiredNodeSelectorTerm": on_nodes("node-type", "nowhere"), "maxReplicas": 2}),
                    json!({"name": "stable", "requiredNodeSelectorTerm": on_nodes("node-type", "stable")}),
                ],
                json!({"scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 2}}}),
            ),
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step("the pods run in subset stable", async {
        let w = CloneSet::new(name)
            .recreate()
            .replicas(2)
            .create(&ctx)
            .await?;
        w.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        let placed: Vec<Option<String>> = pods(&ctx, &format!("app={name}"))
            .await?
            .iter()
            .map(matched_subset)
            .collect();
        ensure!(
            placed.iter().all(|s| s.as_deref() == Some("stable")),
            "running pods in subsets {placed:?}, want all in stable"
        );
        Ok(())
    })
    .await?;
    ctx.step("subset nowhere is marked unschedulable", async {
        let ws = ctx
            .dyn_api("apps.kruise.io/v1alpha1", "WorkloadSpread")
            .await?
            .get("spread")
            .await?;
        let nowhere = crate::scenario::status(&ws)["subsetStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == "nowhere")
            .cloned()
            .unwrap_or_default();
        let schedulable = nowhere["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Schedulable")
            .map(|c| c["status"].clone());
        ensure!(
            schedulable == Some(json!("False")),
            "subset nowhere's Schedulable condition is {schedulable:?}, want False: {nowhere}"
        );
        Ok(())
    })
    .await
}
