//! Advanced StatefulSet (`apps.kruise.io/v1beta1` StatefulSet): pod management, rolling and
//! in-place updates (partition, maxUnavailable, paused), reserved ordinals, scale
//! strategy, PVC retention, the preDelete lifecycle hook, revision history and selector
//! immutability. Start with [`scenarios`]; every scenario builds its manifest with [`sts`].
//!
//! Pods that must stay unavailable (to hold a rollout or a scale-out at its limit) are pinned
//! to a node label no node has, so they stay Pending: the scheduler's `FailedScheduling`
//! warnings are expected there.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, ensure};
use futures::FutureExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use super::common::lifecycle::{
    HOOK_LABEL, hook, in_place_update_case, pre_delete_case, pre_normal_case, releasing_finalizers,
};
use super::common::*;
use crate::scenario::wait::{Check, until, until_all};
use crate::scenario::workload::{AdvancedStatefulSet, AdvancedStatefulSetKind, Handle, same_image};
use crate::scenario::{Ctx, Scenario, status};

type Sts = Handle<AdvancedStatefulSetKind>;

const NAME: &str = "web";
const API: &str = "apps.kruise.io/v1beta1";
/// A node label no node carries: pods asking for it stay Pending (never available).
const NOWHERE: (&str, &str) = ("harness-node-pool", "none");
const PENDING: &[&str] = &["FailedScheduling"];

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "statefulset/parallel-creates-every-pod-without-waiting-for-readiness",
            "podManagementPolicy Parallel creates all replicas at once even when none becomes ready",
            &["advancedstatefulset", "pod-management"],
            |ctx| pod_management(ctx, "Parallel").boxed(),
        )
        .allowing(PENDING),
        Scenario::new(
            "statefulset/ordered-ready-waits-for-each-pod",
            "podManagementPolicy OrderedReady creates ordinal 0 only while it is not ready",
            &["advancedstatefulset", "pod-management"],
            |ctx| pod_management(ctx, "OrderedReady").boxed(),
        )
        .allowing(PENDING),
        Scenario::new(
            "statefulset/partition-keeps-lower-ordinals-on-the-old-revision",
            "rollingUpdate.partition updates only ordinals >= partition; lowering it finishes the rollout",
            &["advancedstatefulset", "rolling-update", "partition"],
            |ctx| partition(ctx).boxed(),
        )
        // Seen once in five runs on v1.9.0: lowering the partition, the controller deleted
        // ordinal 0 while ordinal 1 was still terminating (2 of 3 unavailable, maxUnavailable
        // 1). Not yet triaged; declared so the rest of the scenario keeps its value.
        .expecting(&["max-unavailable"]),
        Scenario::new(
            "statefulset/max-unavailable-updates-pods-in-parallel",
            "rollingUpdate.maxUnavailable 2 (Parallel) takes exactly two pods down at once when new pods never become ready",
            &["advancedstatefulset", "rolling-update", "max-unavailable"],
            |ctx| max_unavailable(ctx).boxed(),
        )
        .allowing(PENDING),
        Scenario::new(
            "statefulset/paused-rollout-updates-no-pod-until-resumed",
            "rollingUpdate.paused holds every pod on the old revision; resuming rolls them all",
            &["advancedstatefulset", "rolling-update", "paused"],
            |ctx| paused(ctx).boxed(),
        )
        // Seen once on v1.8.3: resuming, both pods terminating at once (maxUnavailable 1), as
        // in the partition scenario above; not yet triaged.
        .expecting(&["max-unavailable"]),
        Scenario::new(
            "statefulset/in-place-if-possible-updates-the-image-keeping-pods",
            "podUpdatePolicy InPlaceIfPossible changes the image in place: same UIDs, restartCount 1",
            &["smoke", "advancedstatefulset", "in-place"],
            |ctx| in_place(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/reserve-ordinals-skips-those-pod-names",
            "reserveOrdinals leaves the reserved ordinals out of the pod names, on scale-out and scale-in; serviceName sets each pod's hostname and subdomain",
            &["advancedstatefulset", "reserve-ordinals", "service-name"],
            |ctx| reserve_ordinals(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/scale-strategy-max-unavailable-limits-scale-out",
            "scaleStrategy.maxUnavailable 2 stops a scale-out at two unavailable pods",
            &["advancedstatefulset", "scale-strategy"],
            |ctx| scale_max_unavailable(ctx).boxed(),
        )
        .allowing(PENDING),
        Scenario::new(
            "statefulset/pvcs-deleted-on-scale-in-and-deletion-with-delete-policy",
            "persistentVolumeClaimRetentionPolicy Delete/Delete: claims of removed ordinals and of the deleted set go away",
            &["advancedstatefulset", "pvc", "retention"],
            |ctx| retention_delete(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/pvcs-retained-on-scale-in-and-deletion-with-retain-policy",
            "persistentVolumeClaimRetentionPolicy Retain/Retain: claims outlive scale-in (and are reused on scale-out) and the set",
            &["advancedstatefulset", "pvc", "retention"],
            |ctx| retention_retain(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/pre-delete-hook-holds-a-scaled-in-pod",
            "lifecycle.preDelete labelsHandler keeps a condemned pod in PreparingDelete until the label goes",
            &["advancedstatefulset", "lifecycle"],
            |ctx| pre_delete(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/pre-normal-hook-holds-new-pods-until-label-and-finalizer",
            "lifecycle.preNormal keeps new pods PreparingNormal (ready, not available) until they carry both the labelsHandler label and the finalizersHandler finalizer; its markPodNotReady has no effect",
            &["advancedstatefulset", "lifecycle", "pre-normal"],
            |ctx| pre_normal(ctx).boxed(),
        )
        // The Advanced StatefulSet's preNormal hook, and lifecycle states other than Normal
        // counting as unavailable, came with #1858 in v1.8.0.
        .since("v1.8.0"),
        Scenario::new(
            "statefulset/pre-delete-finalizer-hook-holds-the-pod-marked-not-ready",
            "lifecycle.preDelete.finalizersHandler keeps a scaled-in pod PreparingDelete until the finalizer goes; markPodNotReady sets its KruisePodReady condition False meanwhile",
            &["advancedstatefulset", "lifecycle", "mark-pod-not-ready"],
            |ctx| pre_delete_finalizer(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/in-place-update-hook-holds-the-pod-marked-not-ready",
            "lifecycle.inPlaceUpdate.labelsHandler holds a pod PreparingUpdate on its old image and markPodNotReady sets it not ready; released, it is updated, ready again, and Normal once the label and finalizer are on",
            &["advancedstatefulset", "lifecycle", "in-place", "mark-pod-not-ready"],
            |ctx| in_place_update_hook(ctx).boxed(),
        )
        // An Updated pod is unavailable until Normal from v1.8.0 on (#1858).
        .since("v1.8.0"),
        Scenario::new(
            "statefulset/in-place-grace-period-delays-the-image-change",
            "rollingUpdate.inPlaceUpdateStrategy.gracePeriodSeconds marks the pod not ready on its old image and changes the image no sooner than the grace period later",
            &["advancedstatefulset", "in-place", "grace-period"],
            |ctx| grace_period(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/unordered-update-priority-picks-which-pods-update-first",
            "unorderedUpdate.priorityStrategy (weightPriority, then orderPriority) chooses the pod a partitioned Parallel rollout updates, instead of the highest ordinal",
            &["advancedstatefulset", "rolling-update", "priority", "partition"],
            |ctx| unordered_priority(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/revision-history-limit-prunes-old-revisions",
            "revisionHistoryLimit 1 keeps at most the current revision and one more",
            &["advancedstatefulset", "revision-history"],
            |ctx| history(ctx).boxed(),
        ),
        Scenario::new(
            "statefulset/selector-is-immutable",
            "updating an Advanced StatefulSet's selector is refused; pods keep their owner",
            &["advancedstatefulset", "selector", "webhook"],
            |ctx| selector_immutable(ctx).boxed(),
        ),
    ]
}

/// An Advanced StatefulSet manifest of `replicas`, governed by the Service of its own name,
/// with `spec` merged over it (objects merge key by key, other values replace).
fn sts(replicas: i64, spec: Value) -> Value {
    let mut m = AdvancedStatefulSet::new(NAME).replicas(replicas).manifest();
    m["spec"]["serviceName"] = json!(NAME);
    merge(&mut m["spec"], spec);
    m
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Creates the set.
async fn create_sts(ctx: &Ctx, manifest: Value) -> anyhow::Result<Sts> {
    create(ctx, manifest).await?;
    Ok(Handle::of(ctx, NAME))
}

fn pod_name(ordinal: i64) -> String {
    format!("{NAME}-{ordinal}")
}

fn names(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

fn revision(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("controller-revision-hash"))
        .cloned()
        .unwrap_or_default()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn caught_up(o: &DynamicObject) -> bool {
    status(o)["observedGeneration"].as_i64() >= o.metadata.generation
}

/// Waits until `check` holds over the set and its live pods (re-evaluated on every change of
/// the set and every second).
async fn wait_pods<F>(ctx: &Ctx, sts: &Sts, what: &str, check: F) -> anyhow::Result<Vec<Pod>>
where
    F: Fn(&DynamicObject, &[Pod]) -> Check + Send + Sync + Clone + 'static,
{
    super::common::wait_pods(ctx, &sts.api(), sts.name(), &sts.selector(), what, check).await?;
    sts.pods().await
}

/// Waits until the (deleted) set's pods are gone too.
/// Waits until the set's status, caught up, counts `updated` pods at the update revision and
/// `ready` ready ones, over `pods` pods; returns the pods.
async fn wait_counts(
    ctx: &Ctx,
    sts: &Sts,
    what: &str,
    pods: usize,
    updated: i64,
    ready: i64,
) -> anyhow::Result<Vec<Pod>> {
    wait_pods(ctx, sts, what, move |o, seen| {
        let s = status(o);
        Check::when(
            caught_up(o)
                && s["updatedReplicas"].as_i64() == Some(updated)
                && s["readyReplicas"].as_i64() == Some(ready)
                && seen.len() == pods,
            || format!("{} pods; status {s}", seen.len()),
        )
    })
    .await
}

async fn wait_pods_gone(ctx: &Ctx, sts: &Sts) -> anyhow::Result<()> {
    let c = ctx.clone();
    let what = "the deleted set's pods gone";
    until(
        &sts.api(),
        sts.name(),
        what,
        ctx.timeouts.converge,
        move |_| {
            let c = c.clone();
            async move {
                match pods(&c, &format!("app={NAME}")).await {
                    Ok(left) => Check::when(left.is_empty(), || format!("pods {:?}", names(&left))),
                    Err(e) => Check::Failed(format!("list pods: {e}")),
                }
            }
            .boxed()
        },
    )
    .await?;
    Ok(())
}

/// Waits until exactly the pods `want` exist (and the set has observed its spec).
async fn wait_names(ctx: &Ctx, sts: &Sts, want: &[i64]) -> anyhow::Result<Vec<Pod>> {
    let want: BTreeSet<String> = want.iter().map(|i| pod_name(*i)).collect();
    let what = format!("pods {want:?}");
    wait_pods(ctx, sts, &what, move |o, pods| {
        let have = names(pods);
        Check::when(caught_up(o) && have == want, || {
            format!("pods {have:?}, want {want:?}; status {}", status(o))
        })
    })
    .await
}

async fn pod_management(ctx: Ctx, policy: &'static str) -> anyhow::Result<()> {
    let sts = ctx
        .step("a StatefulSet of 3 pods that never become ready", async {
            let spec = json!({"podManagementPolicy": policy,
            "template": {"spec": {"nodeSelector": {NOWHERE.0: NOWHERE.1}}}});
            let sts = create_sts(&ctx, sts(3, spec)).await?;
            Ok(sts)
        })
        .await?;
    if policy == "Parallel" {
        ctx.step("Parallel creates all three pods at once", async {
            wait_names(&ctx, &sts, &[0, 1, 2]).await?;
            Ok(())
        })
        .await?;
        return Ok(());
    }
    ctx.step(
        "OrderedReady creates ordinal 0 only, while it is not ready",
        async {
            // OrderedReady: ordinal 0 exists, is not ready, and its successors are not created.
            let pods = wait_pods(&ctx, &sts, "ordinal 0 created and reported", |o, pods| {
                Check::when(
                    caught_up(o) && status(o)["replicas"].as_i64() == Some(1) && !pods.is_empty(),
                    || format!("{} pods; status {}", pods.len(), status(o)),
                )
            })
            .await?;
            ensure!(
                names(&pods) == BTreeSet::from([pod_name(0)]),
                "OrderedReady created {:?} while ordinal 0 was not ready, want only {}",
                names(&pods),
                pod_name(0)
            );
            Ok(())
        },
    )
    .await
}

async fn partition(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx.step("a StatefulSet of 3 pods under partition 2 gets a new image", async {
        let spec =
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}});
        let sts = create_sts(&ctx, sts(3, spec)).await?;
        sts.wait_rolled_out(3, ctx.timeouts.converge, &[]).await?;
        sts.set_image(IMAGE_V2).await?;
        Ok(sts)
    })
    .await?;
    ctx.step("only ordinal 2 is updated", async {
        let pods = wait_counts(&ctx, &sts, "ordinal 2 updated, 0 and 1 kept", 3, 1, 3).await?;
        let update = status(&sts.get().await?)["updateRevision"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for p in &pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let updated = name == pod_name(2);
            ensure!(
                (revision(p) == update) == updated && (image(p) == IMAGE_V2) == updated,
                "pod {name} has revision {} image {}; with partition 2 only {} may be updated",
                revision(p),
                image(p),
                pod_name(2)
            );
        }
        Ok(())
    })
    .await?;
    ctx.step("lower the partition to 0: every pod is updated", async {
        sts.patch(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}))
            .await
            .map_err(refusal)?;
        sts.wait_rolled_out(3, ctx.timeouts.converge, &[]).await?;
        for p in sts.pods().await? {
            ensure!(
                image(&p) == IMAGE_V2,
                "pod {:?} kept {} after partition 0",
                p.metadata.name,
                image(&p)
            );
        }
        Ok(())
    })
    .await
}

async fn max_unavailable(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx
        .step(
            "a Parallel StatefulSet of 4 pods with maxUnavailable 2 rolls out",
            async {
                let spec = json!({"podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}});
                let sts = create_sts(&ctx, sts(4, spec)).await?;
                sts.wait_rolled_out(4, ctx.timeouts.converge, &[]).await?;
                Ok(sts)
            },
        )
        .await?;
    let (worst, pods) = ctx.step("a revision that never becomes ready updates two pods", async {
        // The new revision can never become available: the rollout stops at maxUnavailable.
        sts.patch(json!({"spec": {"template": {"spec": {"nodeSelector": {NOWHERE.0: NOWHERE.1}}}}}))
            .await
            .map_err(refusal)?;
        let worst = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = worst.clone();
        let pods = wait_pods(&ctx, &sts, "two pods updated, two ready", move |o, pods| {
            let unready = 4 - pods.iter().filter(|p| ready(p)).count().min(4);
            seen.fetch_max(unready, std::sync::atomic::Ordering::Relaxed);
            let s = status(o);
            Check::when(
                caught_up(o)
                    && s["updatedReplicas"].as_i64() == Some(2)
                    && s["readyReplicas"].as_i64() == Some(2)
                    && pods.len() == 4,
                || format!("{} pods; status {s}", pods.len()),
            )
        })
        .await?;
        Ok((worst, pods))
    })
    .await?;
    ctx.step("at most two pods were unavailable at once", async {
        let worst = worst.load(std::sync::atomic::Ordering::Relaxed);
        ensure!(
            worst <= 2,
            "{worst} pods were unavailable at once, maxUnavailable is 2"
        );
        Ok(())
    })
    .await?;
    ctx.step("two pods are on the new revision and two ready on the old one", async {
        let update = status(&sts.get().await?)["updateRevision"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (new, old): (Vec<&Pod>, Vec<&Pod>) = pods.iter().partition(|p| revision(p) == update);
        ensure!(
            new.len() == 2 && old.len() == 2 && old.iter().all(|p| ready(p)),
            "want 2 pods on the new revision and 2 ready on the old one, got {} new and {} old ({} ready)",
            new.len(),
            old.len(),
            old.iter().filter(|p| ready(p)).count()
        );
        Ok(())
    })
    .await
}

async fn paused(ctx: Ctx) -> anyhow::Result<()> {
    let (sts, before) = ctx.step("a paused StatefulSet of 2 pods gets a new image", async {
        let spec =
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"paused": true}}});
        let sts = create_sts(&ctx, sts(2, spec)).await?;
        sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        let before = pod_uids(&ctx, &sts.selector()).await?;
        sts.set_image(IMAGE_V2).await?;
        Ok((sts, before))
    })
    .await?;
    ctx.step("no pod moves to the new revision", async {
        let o = wait_pods(
            &ctx,
            &sts,
            "the paused set to observe the new revision",
            |o, _| {
                let s = status(o);
                Check::when(
                    caught_up(o) && s["updateRevision"] != s["currentRevision"],
                    || format!("status {s}"),
                )
            },
        )
        .await?;
        let s = status(&sts.get().await?).clone();
        ensure!(
            s["updatedReplicas"].as_i64().unwrap_or(0) == 0
                && o.iter().all(|p| image(p) == IMAGE_V1)
                && before == pod_uids(&ctx, &sts.selector()).await?,
            "a paused rollout touched pods: status {s}"
        );
        Ok(())
    })
    .await?;
    ctx.step("resumed, every pod is updated", async {
        sts.patch(json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}}))
            .await
            .map_err(refusal)?;
        sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        for p in sts.pods().await? {
            ensure!(
                image(&p) == IMAGE_V2,
                "pod {:?} not updated after resuming",
                p.metadata.name
            );
        }
        Ok(())
    })
    .await
}

async fn in_place(ctx: Ctx) -> anyhow::Result<()> {
    let (sts, before) = ctx
        .step(
            "an InPlaceIfPossible StatefulSet of 2 pods gets a new image",
            async {
                // The pods carry the InPlaceUpdateReady readiness gate the controller flips
                // around an in-place update (the webhook refuses InPlaceIfPossible without it).
                let spec = json!({"updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
            "template": {"spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}]}}});
                let sts = create_sts(&ctx, sts(2, spec)).await?;
                sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
                let before = pod_uids(&ctx, &sts.selector()).await?;
                sts.set_image(IMAGE_V2).await?;
                Ok((sts, before))
            },
        )
        .await?;
    ctx.step("every pod is updated in place, restarted once", async {
        sts.wait_rolled_out(2, ctx.timeouts.converge, &["FailedUpdatePodInPlace"])
            .await?;
        let after = pod_uids(&ctx, &sts.selector()).await?;
        ensure!(
            before == after,
            "pods were recreated: {before:?} -> {after:?}"
        );
        for p in sts.pods().await? {
            let s = container_status(&p, "main");
            ensure!(
                s.as_ref()
                    .is_some_and(|s| same_image(&s.image, IMAGE_V2) && s.restart_count == 1),
                "pod {:?} was not restarted once in place with {IMAGE_V2}: {s:?}",
                p.metadata.name
            );
        }
        Ok(())
    })
    .await
}

async fn reserve_ordinals(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx.step("pods skip ordinal 1, each its own hostname under serviceName", async {
        let sts = create_sts(&ctx, sts(3, json!({"reserveOrdinals": [1]}))).await?;
        let pods = wait_names(&ctx, &sts, &[0, 2, 3]).await?;
        // serviceName governs the pods: each is its own hostname in the service's subdomain.
        for p in &pods {
            let spec = p.spec.clone().unwrap_or_default();
            ensure!(
                spec.hostname == p.metadata.name && spec.subdomain.as_deref() == Some(NAME),
                "pod {:?} has hostname {:?} subdomain {:?}, want its name in subdomain {NAME} (serviceName)",
                p.metadata.name,
                spec.hostname,
                spec.subdomain
            );
        }
        Ok(sts)
    })
    .await?;
    ctx.step("scaled in to 2, ordinal 1 is still skipped", async {
        sts.wait_rolled_out(3, ctx.timeouts.converge, &[]).await?;
        sts.patch(json!({"spec": {"replicas": 2}}))
            .await
            .map_err(refusal)?;
        wait_names(&ctx, &sts, &[0, 2]).await?;
        Ok(())
    })
    .await
}

async fn scale_max_unavailable(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx
        .step(
            "a Parallel StatefulSet of 4 pods that never become available",
            async {
                let spec = json!({"podManagementPolicy": "Parallel",
            "scaleStrategy": {"maxUnavailable": 2},
            "template": {"spec": {"nodeSelector": {NOWHERE.0: NOWHERE.1}}}});
                let sts = create_sts(&ctx, sts(4, spec)).await?;
                Ok(sts)
            },
        )
        .await?;
    ctx.step("the scale-out stops at two unavailable pods", async {
        let pods = wait_pods(&ctx, &sts, "two unavailable pods created", |o, pods| {
            Check::when(
                caught_up(o) && status(o)["replicas"].as_i64() == Some(2) && pods.len() >= 2,
                || format!("{} pods; status {}", pods.len(), status(o)),
            )
        })
        .await?;
        ensure!(
            pods.len() == 2,
            "{} pods created while none is available, scaleStrategy.maxUnavailable is 2: {:?}",
            pods.len(),
            names(&pods)
        );
        Ok(())
    })
    .await
}

/// Claim names of the data template, with their UIDs.
async fn claim_uids(ctx: &Ctx) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(claims(ctx, &format!("app={NAME}"))
        .await?
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.unwrap_or_default(),
                c.metadata.uid.unwrap_or_default(),
            )
        })
        .collect())
}

fn claim(ordinal: i64) -> String {
    format!("data-{NAME}-{ordinal}")
}

/// A set of `replicas` with a data volume and the retention `policy`, rolled out, and its
/// claims (one per pod, bound).
async fn with_claims(ctx: &Ctx, replicas: i64, policy: &str) -> anyhow::Result<Sts> {
    let mut m = AdvancedStatefulSet::new(NAME)
        .replicas(replicas)
        .data_volume("1Gi")
        .manifest();
    m["spec"]["serviceName"] = json!(NAME);
    m["spec"]["podManagementPolicy"] = json!("Parallel");
    m["spec"]["persistentVolumeClaimRetentionPolicy"] =
        json!({"whenScaled": policy, "whenDeleted": policy});
    let sts = create_sts(ctx, m).await?;
    sts.wait_rolled_out(replicas, ctx.timeouts.converge, &[])
        .await?;
    let have = claim_uids(ctx).await?;
    let want: BTreeSet<String> = (0..replicas).map(claim).collect();
    ensure!(
        have.keys().cloned().collect::<BTreeSet<_>>() == want,
        "volumeClaimTemplates made claims {:?}, want {want:?}",
        have.keys()
    );
    Ok(sts)
}

/// Waits until the claims of the set's template are exactly `want` (re-evaluated on every change
/// of the set, which may be gone, and every second).
async fn wait_claims(ctx: &Ctx, sts: &Sts, want: Vec<String>) -> anyhow::Result<()> {
    let want: BTreeSet<String> = want.into_iter().collect();
    let what = format!("claims {want:?}");
    let c = ctx.clone();
    until(
        &sts.api(),
        sts.name(),
        &what,
        ctx.timeouts.converge,
        move |_| {
            let (c, want) = (c.clone(), want.clone());
            async move {
                match claim_uids(&c).await {
                    Ok(have) => {
                        let have: BTreeSet<String> = have.into_keys().collect();
                        Check::when(have == want, || format!("claims {have:?}"))
                    }
                    Err(e) => Check::Failed(format!("list claims: {e}")),
                }
            }
            .boxed()
        },
    )
    .await?;
    Ok(())
}

async fn retention_delete(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx
        .step(
            "a StatefulSet of 3 pods with a claim each, retention policy Delete",
            async {
                let sts = with_claims(&ctx, 3, "Delete").await?;
                Ok(sts)
            },
        )
        .await?;
    ctx.step(
        "scaled in to 1, the claims of the removed ordinals go",
        async {
            sts.patch(json!({"spec": {"replicas": 1}}))
                .await
                .map_err(refusal)?;
            wait_names(&ctx, &sts, &[0]).await?;
            wait_claims(&ctx, &sts, vec![claim(0)]).await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("deleted, the set takes its claims with it", async {
        ctx.delete(API, "StatefulSet", NAME)
            .await
            .map_err(refusal)?;
        wait_claims(&ctx, &sts, vec![]).await?;
        Ok(())
    })
    .await
}

async fn retention_retain(ctx: Ctx) -> anyhow::Result<()> {
    let (sts, before) = ctx
        .step(
            "a StatefulSet of 2 pods with a claim each, retention policy Retain",
            async {
                let sts = with_claims(&ctx, 2, "Retain").await?;
                let before = claim_uids(&ctx).await?;
                Ok((sts, before))
            },
        )
        .await?;
    ctx.step("scaled in to 1, every claim stays", async {
        sts.patch(json!({"spec": {"replicas": 1}}))
            .await
            .map_err(refusal)?;
        wait_names(&ctx, &sts, &[0]).await?;
        ensure!(
            claim_uids(&ctx).await? == before,
            "claims changed on scale-in with whenScaled Retain"
        );
        Ok(())
    })
    .await?;
    ctx.step("scaled out to 2, the retained claim is reused", async {
        sts.patch(json!({"spec": {"replicas": 2}}))
            .await
            .map_err(refusal)?;
        sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        ensure!(
            claim_uids(&ctx).await? == before,
            "scale-out did not reuse the retained claim {}",
            claim(1)
        );
        Ok(())
    })
    .await?;
    ctx.step("deleted, the set leaves its claims", async {
        ctx.delete(API, "StatefulSet", NAME)
            .await
            .map_err(refusal)?;
        wait_pods_gone(&ctx, &sts).await?;
        ensure!(
            claim_uids(&ctx).await? == before,
            "claims changed on deleting the set with whenDeleted Retain"
        );
        Ok(())
    })
    .await?;
    ctx.step("the retained claims are removed", async {
        // Retained claims have no owner: remove them so nothing is left behind.
        for name in before.keys() {
            ctx.delete("v1", "PersistentVolumeClaim", name)
                .await
                .map_err(refusal)
                .with_context(|| format!("delete retained claim {name}"))?;
        }
        Ok(())
    })
    .await
}

async fn pre_delete(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx.step("a StatefulSet of 2 pods with a preDelete labels hook", async {
        let spec = json!({"lifecycle": {"preDelete": {"labelsHandler": {"harness-hold": "true"}}},
            "template": {"metadata": {"labels": {"harness-hold": "true"}}}});
        let sts = create_sts(&ctx, sts(2, spec)).await?;
        sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        Ok(sts)
    })
    .await?;
    let held = ctx
        .step("scaled in to 1, ordinal 1 is held PreparingDelete", async {
            sts.patch(json!({"spec": {"replicas": 1}}))
                .await
                .map_err(refusal)?;
            let held = pod_name(1);
            let h = held.clone();
            wait_pods(
                &ctx,
                &sts,
                "ordinal 1 held in PreparingDelete",
                move |o, pods| {
                    let state = pods
                        .iter()
                        .find(|p| p.metadata.name.as_deref() == Some(h.as_str()))
                        .and_then(|p| p.metadata.labels.as_ref())
                        .and_then(|l| l.get("lifecycle.apps.kruise.io/state").cloned());
                    Check::when(
                        caught_up(o) && state.as_deref() == Some("PreparingDelete"),
                        || format!("pod {h} lifecycle state {state:?} (or gone)"),
                    )
                },
            )
            .await?;
            Ok(held)
        })
        .await?;
    ctx.step("without its label, ordinal 1 is deleted", async {
        ctx.patch(
            "v1",
            "Pod",
            &held,
            json!({"metadata": {"labels": {"harness-hold": null}}}),
        )
        .await
        .map_err(refusal)?;
        wait_names(&ctx, &sts, &[0]).await?;
        Ok(())
    })
    .await
}

/// Readiness gate of pods updated in place (the webhook refuses InPlaceIfPossible without it).
fn in_place_spec() -> Value {
    json!({"updateStrategy": {"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
        "template": {"spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}]}}})
}

async fn pre_normal(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx.step("a Parallel StatefulSet of 2 pods with a preNormal hook", async {
        let spec = json!({"podManagementPolicy": "Parallel", "lifecycle": {"preNormal": hook(true)}});
        let sts = create_sts(&ctx, sts(2, spec)).await?;
        Ok(sts)
    })
    .await?;
    releasing_finalizers(&ctx, &sts.selector(), pre_normal_case(&ctx, &sts)).await
}

async fn pre_delete_finalizer(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx
        .step(
            "a StatefulSet of 2 pods with a preDelete finalizer hook",
            async {
                let sts = create_sts(
                    &ctx,
                    sts(2, json!({"lifecycle": {"preDelete": hook(false)}})),
                )
                .await?;
                sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
                Ok(sts)
            },
        )
        .await?;
    let scale_in = json!({"spec": {"replicas": 1}});
    releasing_finalizers(
        &ctx,
        &sts.selector(),
        pre_delete_case(&ctx, &sts, &pod_name(1), scale_in),
    )
    .await
}

async fn in_place_update_hook(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx.step("a Parallel StatefulSet of 1 pod with an inPlaceUpdate labels hook", async {
        // The template's label holds every pod by the labelsHandler. Parallel: under OrderedReady,
        // since v1.8.0 (commit aeb7f19f8 of PR #1858 counts a pod whose lifecycle state is not
        // Normal as unavailable), the controller waits for the PreparingUpdate pod to be available
        // before it reaches the rolling update, so even a released pod is never updated (v1.7.0
        // updates it; not reported upstream).
        let mut spec = in_place_spec();
        merge(
            &mut spec,
            json!({"podManagementPolicy": "Parallel", "lifecycle": {"inPlaceUpdate": hook(true)},
                "template": {"metadata": {"labels": {HOOK_LABEL: "on"}}}}),
        );
        let sts = create_sts(&ctx, sts(1, spec)).await?;
        sts.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        Ok(sts)
    })
    .await?;
    releasing_finalizers(
        &ctx,
        &sts.selector(),
        in_place_update_case(&ctx, &sts, true, false),
    )
    .await
}

/// The in-place update state annotation's `updateTimestamp` (when the update began), in Unix
/// seconds.
fn update_started(p: &Pod) -> Option<i64> {
    let state = p
        .metadata
        .annotations
        .as_ref()?
        .get("apps.kruise.io/inplace-update-state")?;
    let v: Value = serde_json::from_str(state).ok()?;
    let t: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(v["updateTimestamp"].clone()).ok()?;
    Some(t.0.as_second())
}

async fn grace_period(ctx: Ctx) -> anyhow::Result<()> {
    // Long enough for a loaded node's status sync to show the pod unready within it.
    const GRACE: i64 = 10;
    let sts = ctx.step("an in-place StatefulSet pod with a grace period gets a new image", async {
        let mut spec = in_place_spec();
        merge(
            &mut spec,
            json!({"updateStrategy": {"rollingUpdate": {"inPlaceUpdateStrategy": {"gracePeriodSeconds": GRACE}}}}),
        );
        let sts = create_sts(&ctx, sts(1, spec)).await?;
        sts.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        sts.set_image(IMAGE_V2).await?;
        Ok(sts)
    })
    .await?;
    let began = ctx
        .step(
            "the pod is marked not ready on its old image during the grace period",
            async {
                // During the grace period the pod is not ready and still
                // runs the old image: a window of seconds, so the pods
                // are watched (each change judged), not listed on a tick.
                let config = kube::runtime::watcher::Config::default().labels(&sts.selector());
                let pods = until_all(
                    &ctx.api::<Pod>(),
                    config,
                    "the pod in its grace period",
                    ctx.timeouts.converge,
                    |pods| {
                        let pods: Vec<Pod> = pods
                            .into_iter()
                            .filter(|p| p.metadata.deletion_timestamp.is_none())
                            .collect();
                        let p = pods.first();
                        let in_grace = p.is_some_and(|p| {
                            !ready(p)
                                && image(p) == IMAGE_V1
                                && update_started(p).is_some()
                                && p.metadata.annotations.as_ref().is_some_and(|a| {
                                    a.contains_key("apps.kruise.io/inplace-update-grace")
                                })
                        });
                        let check = Check::when(in_grace, || {
                            format!(
                                "pod ready {:?}, image {:?}, annotations {:?}",
                                p.map(ready),
                                p.map(image),
                                p.and_then(|p| p.metadata.annotations.as_ref())
                            )
                        });
                        async move { check }.boxed()
                    },
                )
                .await?;
                let pod = pods
                    .iter()
                    .find(|p| p.metadata.deletion_timestamp.is_none())
                    .context("no live pod")?;
                let began = update_started(pod).context("no in-place update timestamp")?;
                Ok(began)
            },
        )
        .await?;
    ctx.step("the new image starts no sooner than the grace period after the update began", async {
        sts.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        let p = sts.pods().await?;
        let started = p
            .first()
            .and_then(|p| container_status(p, "main"))
            .filter(|s| same_image(&s.image, IMAGE_V2))
            .and_then(|s| s.state?.running?.started_at)
            .context("the updated container is not running")?
            .0
            .as_second();
        // Timestamps have one-second resolution.
        ensure!(
            started - began >= GRACE - 1,
            "the new image started {}s after the in-place update began; gracePeriodSeconds is {GRACE}",
            started - began
        );
        Ok(())
    })
    .await
}

async fn unordered_priority(ctx: Ctx) -> anyhow::Result<()> {
    let weight = json!({"weightPriority": [
        {"weight": 50, "matchSelector": {"matchLabels": {"tier": "first"}}}
    ]});
    let order = json!({"orderPriority": [{"orderedKey": "rank"}]});
    // Ordinal 0 gets the highest priority; without it, the highest ordinal goes first.
    for (name, strategy, labels) in [
        (
            "weight",
            weight,
            [("tier", "first"), ("tier", "other"), ("tier", "other")],
        ),
        (
            "order",
            order,
            [("rank", "r-7"), ("rank", "r-1"), ("rank", "r-3")],
        ),
    ] {
        let pods = ctx
            .step(
                &format!("{name}: one of 3 labelled pods is updated"),
                async {
                    let mut m = AdvancedStatefulSet::new(name).replicas(3).manifest();
                    let mut spec = in_place_spec();
                    merge(
                        &mut spec,
                        json!({"serviceName": name, "podManagementPolicy": "Parallel",
                    "updateStrategy": {"rollingUpdate": {"partition": 2,
                        "unorderedUpdate": {"priorityStrategy": strategy}}}}),
                    );
                    merge(&mut m["spec"], spec);
                    create(&ctx, m).await?;
                    let set: Sts = Handle::of(&ctx, name);
                    set.wait_rolled_out(3, ctx.timeouts.converge, &[]).await?;
                    for (ordinal, (k, v)) in labels.iter().enumerate() {
                        ctx.patch(
                            "v1",
                            "Pod",
                            &format!("{name}-{ordinal}"),
                            json!({"metadata": {"labels": {*k: v}}}),
                        )
                        .await
                        .map_err(refusal)?;
                    }
                    set.set_image(IMAGE_V2).await?;
                    let pods =
                        wait_counts(&ctx, &set, "one pod updated, all ready", 3, 1, 3).await?;
                    Ok(pods)
                },
            )
            .await?;
        ctx.step(&format!("{name}: ordinal 0, first by priority, is the one updated"), async {
            let updated: Vec<String> = pods
                .iter()
                .filter(|p| image(p) == IMAGE_V2)
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            ensure!(
                updated == [format!("{name}-0")],
                "{name} priority: {name}-0 (labelled {:?}) should be the one pod updated under partition 2, updated {updated:?}",
                labels[0]
            );
            Ok(())
        })
        .await?;
    }
    Ok(())
}

async fn history(ctx: Ctx) -> anyhow::Result<()> {
    let sts = ctx
        .step("three updates under revisionHistoryLimit 1", async {
            let sts = create_sts(&ctx, sts(1, json!({"revisionHistoryLimit": 1}))).await?;
            sts.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
            for image in [IMAGE_V2, IMAGE_V1, "nginx:1.27"] {
                sts.set_image(image).await?;
                sts.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
            }
            Ok(sts)
        })
        .await?;
    ctx.step("at most the current revision and one more remain", async {
        let uid = sts.get().await?.metadata.uid.unwrap_or_default();
        let what = "at most 2 ControllerRevisions (current + revisionHistoryLimit 1)";
        let list = ctx.api::<ControllerRevision>();
        until(&sts.api(), NAME, what, ctx.timeouts.converge, move |_| {
            let (list, uid) = (list.clone(), uid.clone());
            async move {
                match list.list(&ListParams::default()).await {
                    Ok(l) => {
                        let owned = l
                            .items
                            .iter()
                            .filter(|r| {
                                r.metadata
                                    .owner_references
                                    .as_ref()
                                    .is_some_and(|o| o.iter().any(|o| o.uid == uid))
                            })
                            .count();
                        Check::when(owned <= 2, || format!("{owned} ControllerRevisions"))
                    }
                    Err(e) => Check::Failed(format!("list ControllerRevisions: {e}")),
                }
            }
            .boxed()
        })
        .await?;
        Ok(())
    })
    .await
}

async fn selector_immutable(ctx: Ctx) -> anyhow::Result<()> {
    let (sts, before) = ctx
        .step("a StatefulSet of 2 pods rolls out", async {
            let sts = create_sts(&ctx, sts(2, json!({}))).await?;
            sts.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
            let before = pod_uids(&ctx, &sts.selector()).await?;
            Ok((sts, before))
        })
        .await?;
    ctx.step("the selector update is refused", async {
        let update = sts
            .patch(json!({"spec": {
                "selector": {"matchLabels": {"app": NAME, "release": "v2"}},
                "template": {"metadata": {"labels": {"release": "v2"}}}
            }}))
            .await;
        match update {
            Err(kube::Error::Api(e)) => ensure!(
                e.message.contains("Forbidden") || e.message.contains("immutable"),
                "the selector update was refused for another reason: {}",
                e.message
            ),
            Err(e) => return Err(refusal(e)),
            Ok(_) => {
                anyhow::bail!("the selector update was accepted; it must be refused as immutable")
            }
        }
        Ok(())
    })
    .await?;
    ctx.step("its pods stay", async {
        ensure!(
            before == pod_uids(&ctx, &sts.selector()).await?,
            "pods changed after a refused selector update"
        );
        Ok(())
    })
    .await
}
