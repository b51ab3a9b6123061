//! WorkloadSpread: subset patches admitted by the validating webhook (S1) and interplay with
//! Priority admission (S4).

use anyhow::{bail, ensure};
use futures::FutureExt;
use serde_json::{Value, json};

use super::common::*;
use crate::scenario::workload::{CloneSet, Deployment, Kind, Spec, StatefulSet};
use crate::scenario::{Ctx, Requirements, Scenario};

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "workloadspread/cloneset-volume-claim-templates",
            suite: "workloadspread",
            summary: "a WorkloadSpread with a subset patch over a CloneSet whose container mounts a volumeClaimTemplate is admitted and applied (S1)",
            labels: &["seed", "s1", "webhook"],
            requires: Requirements::default(),
            allowed_warnings: &[],
            expected_violations: &[],
            body: |ctx| s1(ctx, Target::CloneSet).boxed(),
        },
        Scenario {
            name: "workloadspread/statefulset-volume-claim-templates",
            suite: "workloadspread",
            summary: "the StatefulSet variant of S1",
            labels: &["s1", "webhook"],
            requires: Requirements::default(),
            allowed_warnings: &[],
            expected_violations: &[],
            body: |ctx| s1(ctx, Target::StatefulSet).boxed(),
        },
        Scenario {
            name: "workloadspread/deployment-priority-class-patch",
            suite: "workloadspread",
            summary: "a subset patching priorityClassName admits pods with the class's priority (S4)",
            labels: &["seed", "s4", "webhook", "admission"],
            requires: Requirements::default(),
            allowed_warnings: &[],
            expected_violations: &[],
            body: |ctx| s4(ctx, Target::Deployment).boxed(),
        },
        Scenario {
            name: "workloadspread/cloneset-priority-class-patch",
            suite: "workloadspread",
            summary: "the CloneSet variant of S4",
            labels: &["s4", "webhook", "admission"],
            requires: Requirements::default(),
            allowed_warnings: &[],
            expected_violations: &[],
            body: |ctx| s4(ctx, Target::CloneSet).boxed(),
        },
    ]
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
    let w = w.replicas(2).data_volume("1Gi").create(&ctx).await?;
    w.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
    let existing = pod_uids(&ctx, &format!("app={name}")).await?;

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
    {
        let name = w.name().to_string();
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
        let w = w.replicas(4).create(&ctx).await?;
        w.wait_rolled_out(4, ctx.timeouts.converge, &["FailedCreate"])
            .await?;
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
    }
}
