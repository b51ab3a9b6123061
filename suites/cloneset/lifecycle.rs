//! CloneSet lifecycle: the documented contract of `apps.kruise.io/v1alpha1` CloneSet — scaling
//! (podsToDelete, scaleStrategy.maxUnavailable), update strategies (ReCreate, in-place,
//! partition as a number and a percentage, paused, maxSurge, priorities, grace period),
//! lifecycle hooks, revision history, PVCs and status conditions. Start with [`scenarios`].
//! The helpers other suites share live in `suites/common/` (the pod readers and waits in
//! `pods`, the lifecycle hook cases in `lifecycle`).

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::scenario::wait::{Check, until};
use crate::scenario::workload::{CloneSet, CloneSetKind, Handle, same_image};
use crate::scenario::{Ctx, Scenario, status};
use crate::suites::common::lifecycle::{
    STATE, hook, in_place_update_case, pre_delete_case, pre_normal_case, releasing_finalizers,
};
use crate::suites::common::*;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "cloneset/scale-in-deletes-the-pods-named-in-pods-to-delete",
            "scaling in with scaleStrategy.podsToDelete removes exactly the named pod; status counts and labelSelector follow",
            &["cloneset", "scale", "pods-to-delete", "status"],
            scale_in_pods_to_delete,
        ),
        Scenario::new(
            "cloneset/scale-out-waits-for-available-pods-under-scale-max-unavailable",
            "with scaleStrategy.maxUnavailable 1 and minReadySeconds, a scale-out creates the next pod only once the previous one is available",
            &["cloneset", "scale", "max-unavailable", "min-ready-seconds"],
            scale_out_max_unavailable,
        )
        .allowing(&["ScaleUpLimited"]),
        Scenario::new(
            "cloneset/scale-max-unavailable-zero-is-refused-or-makes-its-pods",
            "scaleStrategy.maxUnavailable 0 is refused, or the CloneSet still makes its replicas and replaces a pod it deleted",
            &["cloneset", "scale", "max-unavailable", "webhook"],
            scale_max_unavailable_zero,
        )
        .allowing(&["ScaleUpLimited"]),
        Scenario::new(
            "cloneset/partition-as-number-and-percentage-keeps-old-pods",
            "updateStrategy.partition (3, then 50%, then 0) keeps that many pods at the old revision; expectedUpdatedReplicas follows",
            &["smoke", "cloneset", "update", "partition", "status"],
            partition,
        ),
        Scenario::new(
            "cloneset/paused-update-touches-no-pod-until-resumed",
            "with updateStrategy.paused no pod moves to the new revision; resuming finishes the rollout",
            &["cloneset", "update", "paused"],
            paused,
        ),
        Scenario::new(
            "cloneset/update-types-recreate-or-update-in-place",
            "ReCreate replaces pods on an image change; InPlaceIfPossible keeps them for an image change and recreates them for an env change",
            &["cloneset", "update", "in-place", "recreate"],
            update_types,
        ),
        Scenario::new(
            "cloneset/max-surge-adds-pods-before-removing-old-ones",
            "maxSurge 1 / maxUnavailable 0 runs replicas+1 pods and keeps every replica available; maxSurge 0 / maxUnavailable 2 keeps at least replicas-2 available",
            &["cloneset", "update", "max-surge", "max-unavailable"],
            max_surge,
        ),
        Scenario::new(
            "cloneset/priority-strategy-picks-which-pods-update-first",
            "weightPriority and orderPriority choose the pods a partitioned rollout updates",
            &["cloneset", "update", "priority"],
            priority,
        ),
        Scenario::new(
            "cloneset/scatter-strategy-spreads-matching-pods-over-the-update-order",
            "updateStrategy.scatterStrategy moves pods matching key=value apart in the update order: of two such pods that the priority puts first, a partitioned rollout updates only one",
            &["cloneset", "update", "scatter", "priority"],
            scatter,
        ),
        Scenario::new(
            "cloneset/pre-delete-hook-holds-the-pod-until-its-label-goes",
            "lifecycle.preDelete.labelsHandler keeps a scaled-in pod in PreparingDelete until the label is removed",
            &["cloneset", "lifecycle", "hook", "scale"],
            pre_delete_hook,
        ),
        Scenario::new(
            "cloneset/in-place-update-hook-holds-the-pod-until-its-label-goes",
            "lifecycle.inPlaceUpdate.labelsHandler keeps a pod in PreparingUpdate, on its old image, until the label is removed",
            &["cloneset", "lifecycle", "hook", "in-place"],
            in_place_update_hook,
        ),
        Scenario::new(
            "cloneset/pre-normal-hook-holds-new-pods-until-label-and-finalizer",
            "lifecycle.preNormal keeps new pods PreparingNormal (ready, not available) until they carry both the labelsHandler label and the finalizersHandler finalizer; its markPodNotReady has no effect",
            &["cloneset", "lifecycle", "hook", "pre-normal"],
            pre_normal_hook,
        ),
        Scenario::new(
            "cloneset/pre-delete-finalizer-hook-holds-the-pod-marked-not-ready",
            "lifecycle.preDelete.finalizersHandler keeps a scaled-in pod PreparingDelete until the finalizer goes; markPodNotReady sets its KruisePodReady condition False meanwhile",
            &["cloneset", "lifecycle", "hook", "scale", "mark-pod-not-ready"],
            pre_delete_finalizer_hook,
        ),
        Scenario::new(
            "cloneset/in-place-update-finalizer-hook-marks-the-pod-not-ready",
            "lifecycle.inPlaceUpdate.finalizersHandler holds a pod PreparingUpdate and markPodNotReady sets it not ready; once released it is updated, ready again, and Normal when the finalizer is back",
            &["cloneset", "lifecycle", "hook", "in-place", "mark-pod-not-ready"],
            in_place_update_finalizer_hook,
        ),
        Scenario::new(
            "cloneset/in-place-update-grace-period-marks-the-pod-first",
            "inPlaceUpdateStrategy.gracePeriodSeconds sets the pod not ready before its image changes",
            &["cloneset", "update", "in-place", "grace-period"],
            grace_period,
        ),
        Scenario::new(
            "cloneset/revision-history-limit-prunes-controller-revisions",
            "after three updates with revisionHistoryLimit 1, only the live revision and one old one remain",
            &["cloneset", "revision-history"],
            revision_history,
        ),
        // Recreating a deleted pod under its instance id races the old pod's deletion:
// the controller reports FailedCreate ("object is being deleted") and retries,
// with backoff, until the old pod is gone (openkruise/kruise#1099: expected
// behaviour; the opt-out is disablePVCReuse). The body still asks for the pod back
// with its PVC, so only the retries are expected.
        Scenario::new(
            "cloneset/pvcs-go-on-scale-in-and-are-reused-by-a-recreated-pod",
            "a scaled-in pod's PVC is deleted; a deleted pod comes back with the same instance id and PVC, or a new one under disablePVCReuse",
            &["cloneset", "pvc", "scale", "pvc-reuse"],
            pvcs,
        )
        .allowing(&["FailedCreate"])
        .expecting(&["failed-create"]),
        Scenario::new(
            "cloneset/progress-deadline-sets-the-progressing-condition",
            "progressDeadlineSeconds: an available CloneSet reports Progressing=True, a stuck rollout ProgressDeadlineExceeded",
            &["cloneset", "status", "conditions", "progress-deadline"],
            progress_deadline,
        )
        .allowing(&["FailedScheduling"])
        // spec.progressDeadlineSeconds is new in v1.9.0.
        .since("v1.9.0"),
    ]
}

/// A CloneSet `name` of `replicas` pods with `spec` merged into its manifest's spec, created
/// and rolled out.
async fn start(
    ctx: &Ctx,
    name: &str,
    replicas: i64,
    spec: Value,
) -> anyhow::Result<Handle<CloneSetKind>> {
    let mut m = CloneSet::new(name).replicas(replicas).manifest();
    merge(&mut m["spec"], spec);
    create(ctx, m).await?;
    let cs = Handle::<CloneSetKind>::of(ctx, name);
    cs.wait_rolled_out(replicas, ctx.timeouts.converge, &[])
        .await?;
    Ok(cs)
}

/// Waits until `want` pods of the CloneSet are at its update revision and the rest at another,
/// with `status.updatedReplicas` equal to `want` and the controller caught up.
async fn wait_updated(
    cs: &Handle<CloneSetKind>,
    ctx: &Ctx,
    total: usize,
    want: usize,
) -> anyhow::Result<DynamicObject> {
    let what = format!(
        "{want} of {total} pods of {} at the update revision",
        cs.name()
    );
    wait_pods(ctx, &cs.api(), cs.name(), &cs.selector(), &what, move |o, pods| {
        let rev = text(o, "updateRevision");
        let updated = at_revision(pods, &rev);
        let ready_n = pods.iter().filter(|p| ready(p)).count();
        Check::when(
            observed(o)
                && pods.len() == total
                && updated == want
                && ready_n == total
                && count(o, "updatedReplicas") == want as i64,
            || {
                format!(
                    "{} live pods ({ready_n} ready), {updated} at revision {rev}, status.updatedReplicas {}",
                    pods.len(),
                    count(o, "updatedReplicas")
                )
            },
        )
    })
    .await
}

async fn scale_in_pods_to_delete(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step("a CloneSet of 3 pods rolls out", async {
            let cs = start(&ctx, "scale", 3, json!({})).await?;
            Ok(cs)
        })
        .await?;
    let o = ctx.step("scaling in with podsToDelete removes exactly the named pod", async {
        let before = pod_uids(&ctx, &cs.selector()).await?;
        let victim = before.keys().nth(1).cloned().context("no second pod")?;
        cs.patch(json!({"spec": {"replicas": 2, "scaleStrategy": {"podsToDelete": [victim]}}}))
            .await
            .map_err(refusal)?;
        let o = cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        let after = pod_uids(&ctx, &cs.selector()).await?;
        let mut expected = before.clone();
        expected.remove(&victim);
        ensure!(
            after == expected,
            "scaling in with podsToDelete [{victim}] should leave {expected:?}, left {after:?}"
        );
        Ok(o)
    })
    .await?;
    ctx.step(
        "status counts 2 available pods and reports the labelSelector",
        async {
            ensure!(
                count(&o, "availableReplicas") == 2,
                "status.availableReplicas: want 2, got {}",
                count(&o, "availableReplicas")
            );
            ensure!(
                text(&o, "labelSelector") == cs.selector(),
                "status.labelSelector: want {}, got {:?}",
                cs.selector(),
                text(&o, "labelSelector")
            );
            Ok(())
        },
    )
    .await?;
    ctx.step(
        "scaled out, new pods are named after their instance id",
        async {
            // Scaling out again adds pods named after the CloneSet and their instance id.
            cs.patch(json!({"spec": {"replicas": 4}}))
                .await
                .map_err(refusal)?;
            cs.wait_rolled_out(4, ctx.timeouts.converge, &[]).await?;
            for p in pods(&ctx, &cs.selector()).await? {
                let id = label(&p, "apps.kruise.io/cloneset-instance-id").unwrap_or_default();
                ensure!(
                    !id.is_empty() && name_of(&p) == format!("scale-{id}"),
                    "pod {} is not named after its instance id {id:?}",
                    name_of(&p)
                );
            }
            Ok(())
        },
    )
    .await
}

/// `scaleStrategy.maxUnavailable: 0` on a running CloneSet, then a rollout that recreates its
/// pods: refused at the update, or every replica made again (a new pod is unavailable until
/// ready, so a limit of 0 taken as written would never let one be created).
async fn scale_max_unavailable_zero(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step("a CloneSet of 2 pods rolls out", async {
            let cs = start(&ctx, "zero", 2, json!({})).await?;
            Ok(cs)
        })
        .await?;
    let refused = ctx
        .step(
            "scaleStrategy.maxUnavailable 0 is refused naming the field, or admitted",
            async {
                match cs
                    .patch(json!({"spec": {"scaleStrategy": {"maxUnavailable": 0}}}))
                    .await
                {
                    Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 || e.code == 403 => {
                        ensure!(
                            e.message.contains("maxUnavailable"),
                            "refused without naming the field: {}",
                            e.message
                        );
                        ctx.passed_by("refused");
                        return Ok(true);
                    }
                    Err(e) => return Err(e.into()),
                    Ok(_) => {}
                }
                ctx.passed_by("admitted");
                Ok(false)
            },
        )
        .await?;
    if refused {
        return Ok(());
    }
    ctx.step("a rollout that recreates every pod completes", async {
        let before = pods(&ctx, &cs.selector()).await?;
        // A change no in-place update carries: every pod is deleted and made again.
        cs.patch(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": crate::scenario::workload::IMAGE_V1,
         "env": [{"name": "ROLL", "value": "1"}]}]}}}}))
            .await
            .map_err(refusal)?;
        cs.wait_rolled_out(2, ctx.timeouts.converge, &["ScaleUpLimited"])
            .await
            .context("scaleStrategy.maxUnavailable 0 was admitted")?;
        let after = pods(&ctx, &cs.selector()).await?;
        let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
        ensure!(
            after
                .iter()
                .all(|a| before.iter().all(|b| uid(a) != uid(b))),
            "the rollout recreated no pod: the test of the limit did not run"
        );
        Ok(())
    })
    .await
}

async fn scale_out_max_unavailable(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step(
            "a CloneSet of 1 pod with minReadySeconds 3 and scaleStrategy.maxUnavailable 1",
            async {
                let spec = json!({"minReadySeconds": 3, "scaleStrategy": {"maxUnavailable": 1}});
                let cs = start(&ctx, "slow", 1, spec).await?;
                Ok(cs)
            },
        )
        .await?;
    ctx.step("scaled out to 3, every replica becomes available", async {
        cs.patch(json!({"spec": {"replicas": 3}}))
            .await
            .map_err(refusal)?;
        wait_pods(
            &ctx,
            &cs.api(),
            "slow",
            &cs.selector(),
            "3 available replicas",
            |o, _| {
                Check::when(count(o, "availableReplicas") == 3, || {
                    format!("status.availableReplicas {}", count(o, "availableReplicas"))
                })
            },
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step("each pod was created only once the one before was available", async {
        let mut ps = pods(&ctx, &cs.selector()).await?;
        ps.sort_by_key(|p| {
            p.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
    });
    ensure!(ps.len() == 3, "want 3 pods, got {}", ps.len());
    for w in ps.windows(2) {
        let ready_at = ready_since(&w[0]).context("a pod is not ready")?;
        let next = w[1]
            .metadata
            .creation_timestamp
            .as_ref()
            .context("no creation time")?
            .0
            .as_second();
        // Timestamps have one-second resolution: allow one second of rounding.
        let gap = next - ready_at;
        ensure!(
            gap >= 2,
            "pod {} was created {gap}s after {} became ready; scaleStrategy.maxUnavailable 1 with minReadySeconds 3 should wait for it to be available",
            name_of(&w[1]),
            name_of(&w[0])
        );
    }
    Ok(())
    })
    .await
}

/// Waits until the CloneSet reports `want` available replicas for its latest generation.
async fn wait_available(ctx: &Ctx, cs: &Handle<CloneSetKind>, want: i64) -> anyhow::Result<()> {
    let what = format!("{want} available replicas");
    wait_pods(
        ctx,
        &cs.api(),
        cs.name(),
        &cs.selector(),
        &what,
        move |o, _| {
            Check::when(observed(o) && count(o, "availableReplicas") == want, || {
                format!("status.availableReplicas {}", count(o, "availableReplicas"))
            })
        },
    )
    .await?;
    Ok(())
}

async fn partition(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step(
            "a CloneSet of 4 pods under partition 3 gets a new image",
            async {
                let spec = json!({"updateStrategy": {"type": "InPlaceIfPossible", "partition": 3}});
                let cs = start(&ctx, "part", 4, spec).await?;
                cs.set_image(IMAGE_V2).await?;
                Ok(cs)
            },
        )
        .await?;
    for (partition, want) in [(json!(3), 1), (json!("50%"), 2), (json!(0), 4)] {
        ctx.step(
            &format!("partition {partition} updates {want} of 4 pods"),
            async {
                cs.patch(json!({"spec": {"updateStrategy": {"partition": partition}}}))
                    .await
                    .map_err(refusal)?;
                let o = wait_updated(&cs, &ctx, 4, want)
                    .await
                    .with_context(|| format!("partition {partition}"))?;
                ensure!(
                    count(&o, "expectedUpdatedReplicas") == want as i64,
                    "partition {partition}: status.expectedUpdatedReplicas want {want}, got {}",
                    count(&o, "expectedUpdatedReplicas")
                );
                // The status counts a pod updated once its spec changed; its container runs the new
                // image a moment later (in place).
                let runs_v2 = |p: &Pod| {
                    container_status(p, "main").is_some_and(|s| same_image(&s.image, IMAGE_V2))
                };
                wait_pods(
                    &ctx,
                    &cs.api(),
                    "part",
                    &cs.selector(),
                    &format!("{want} pods running {IMAGE_V2} under partition {partition}"),
                    move |_, pods| {
                        let v2 = pods.iter().filter(|p| runs_v2(p)).count();
                        Check::when(v2 == want && pods.len() == 4, || {
                            format!("{v2} of {} pods run {IMAGE_V2}", pods.len())
                        })
                    },
                )
                .await?;
                Ok(())
            },
        )
        .await?;
    }
    Ok(())
}

async fn paused(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, before) = ctx
        .step("a paused CloneSet of 2 pods gets a new image", async {
            let cs = start(
                &ctx,
                "paused",
                2,
                json!({"updateStrategy": {"paused": true}}),
            )
            .await?;
            let before = pod_uids(&ctx, &cs.selector()).await?;
            cs.set_image(IMAGE_V2).await?;
            Ok((cs, before))
        })
        .await?;
    ctx.step("no pod moves to the new revision", async {
        let o = wait_pods(
            &ctx,
            &cs.api(),
            "paused",
            &cs.selector(),
            "the paused update observed",
            |o, _| {
                Check::when(
                    observed(o) && text(o, "updateRevision") != text(o, "currentRevision"),
                    || format!("status {}", status(o)),
                )
            },
        )
        .await?;
        ensure!(
            count(&o, "updatedReplicas") == 0,
            "paused: status.updatedReplicas want 0, got {}",
            count(&o, "updatedReplicas")
        );
        let now = pods(&ctx, &cs.selector()).await?;
        ensure!(
            at_revision(&now, &text(&o, "updateRevision")) == 0
                && pod_uids(&ctx, &cs.selector()).await? == before,
            "a paused CloneSet touched its pods"
        );
        Ok(())
    })
    .await?;
    ctx.step("resumed, every pod is updated", async {
        cs.patch(json!({"spec": {"updateStrategy": {"paused": false}}}))
            .await
            .map_err(refusal)?;
        wait_updated(&cs, &ctx, 2, 2).await?;
        Ok(())
    })
    .await
}

/// Sets the image (or, with `env`, adds an env var) and waits for the rollout; returns how
/// many pods kept their UID.
async fn roll(cs: &Handle<CloneSetKind>, ctx: &Ctx, env: bool) -> anyhow::Result<usize> {
    let before = pod_uids(ctx, &cs.selector()).await?;
    if env {
        cs.json_patch(
            json!([{"op": "add", "path": "/spec/template/spec/containers/0/env",
            "value": [{"name": "MODE", "value": "v2"}]}]),
        )
        .await?;
    } else {
        cs.set_image(IMAGE_V2).await?;
    }
    wait_updated(cs, ctx, 2, 2).await?;
    let after = pod_uids(ctx, &cs.selector()).await?;
    Ok(after
        .values()
        .filter(|u| before.values().any(|b| &b == u))
        .count())
}

async fn update_types(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step("ReCreate replaces every pod on an image change", async {
        let rec = start(
            &ctx,
            "rec",
            2,
            json!({"updateStrategy": {"type": "ReCreate"}}),
        )
        .await?;
        let kept = roll(&rec, &ctx, false).await?;
        ensure!(
            kept == 0,
            "ReCreate: {kept} pods kept their UID across an image change"
        );
        Ok(())
    })
    .await?;
    let inp = ctx
        .step(
            "InPlaceIfPossible updates every pod in place on an image change",
            async {
                let inp = start(
                    &ctx,
                    "inp",
                    2,
                    json!({"updateStrategy": {"type": "InPlaceIfPossible"}}),
                )
                .await?;
                let kept = roll(&inp, &ctx, false).await?;
                ensure!(
                    kept == 2,
                    "InPlaceIfPossible: only {kept} of 2 pods were updated in place"
                );
                for p in pods(&ctx, &inp.selector()).await? {
                    let s = container_status(&p, "main");
                    ensure!(
                        s.as_ref()
                            .is_some_and(|s| same_image(&s.image, IMAGE_V2) && s.restart_count >= 1),
                        "pod {} was not restarted in place with {IMAGE_V2}: {s:?}",
                        name_of(&p)
                    );
                }
                Ok(inp)
            },
        )
        .await?;
    ctx.step(
        "InPlaceIfPossible recreates every pod on an env change",
        async {
            let kept = roll(&inp, &ctx, true).await?;
            ensure!(
                kept == 0,
                "InPlaceIfPossible: an env change must recreate pods, {kept} kept their UID"
            );
            Ok(())
        },
    )
    .await
}

/// Rolls a ReCreate CloneSet of `replicas` with `strategy` (and minReadySeconds 2) to a new
/// image; returns the most live pods and the fewest available replicas seen meanwhile.
async fn observe_rollout(
    ctx: &Ctx,
    name: &str,
    replicas: usize,
    strategy: Value,
) -> anyhow::Result<(usize, usize)> {
    let mut spec = json!({"minReadySeconds": 2, "updateStrategy": {"type": "ReCreate"}});
    merge(&mut spec["updateStrategy"], strategy);
    let cs = start(ctx, name, replicas as i64, spec).await?;
    wait_available(ctx, &cs, replicas as i64).await?;
    cs.set_image(IMAGE_V2).await?;
    let seen = std::sync::Arc::new(std::sync::Mutex::new((0usize, usize::MAX)));
    let record = seen.clone();
    let what = format!("{name}: the rollout to finish");
    wait_pods(
        ctx,
        &cs.api(),
        name,
        &cs.selector(),
        &what,
        move |o, pods| {
            let available = count(o, "availableReplicas") as usize;
            let mut s = record.lock().expect("not poisoned");
            s.0 = s.0.max(pods.len());
            if observed(o) {
                s.1 = s.1.min(available);
            }
            let rev = text(o, "updateRevision");
            let updated = at_revision(pods, &rev);
            Check::when(
                observed(o)
                    && pods.len() == replicas
                    && updated == replicas
                    && available == replicas,
                || {
                    format!(
                        "{} pods, {updated} at {rev}, {available} available",
                        pods.len()
                    )
                },
            )
        },
    )
    .await?;
    let s = *seen.lock().expect("not poisoned");
    Ok(s)
}

async fn max_surge(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step(
        "maxSurge 1 with maxUnavailable 0 adds one pod and keeps every replica available",
        async {
            let (most, fewest) = observe_rollout(
                &ctx,
                "surge",
                2,
                json!({"maxSurge": 1, "maxUnavailable": 0}),
            )
            .await?;
            ensure!(
                most == 3,
                "maxSurge 1 over 2 replicas: at most {most} pods were seen, want 3"
            );
            ensure!(
                fewest >= 2,
                "maxUnavailable 0: availableReplicas fell to {fewest}"
            );
            Ok(())
        },
    )
    .await?;
    ctx.step(
        "maxSurge 0 with maxUnavailable 2 keeps at least 2 of 4 available",
        async {
            let (most, fewest) = observe_rollout(
                &ctx,
                "unavail",
                4,
                json!({"maxSurge": 0, "maxUnavailable": 2}),
            )
            .await?;
            ensure!(
                most <= 4,
                "maxSurge 0 over 4 replicas: {most} pods were seen"
            );
            ensure!(
                fewest >= 2,
                "maxUnavailable 2 of 4: availableReplicas fell to {fewest}"
            );
            Ok(())
        },
    )
    .await
}

/// Labels pod `name` with `key=value` (through the context).
async fn label_pod(ctx: &Ctx, name: &str, key: &str, value: Option<&str>) -> anyhow::Result<()> {
    ctx.patch(
        "v1",
        "Pod",
        name,
        json!({"metadata": {"labels": {key: value}}}),
    )
    .await
    .map_err(refusal)
    .with_context(|| format!("label pod {name}"))?;
    Ok(())
}

async fn priority(ctx: Ctx) -> anyhow::Result<()> {
    let weight = json!({"weightPriority": [
        {"weight": 50, "matchSelector": {"matchLabels": {"tier": "first"}}}
    ]});
    let order = json!({"orderPriority": [{"orderedKey": "rank"}]});
    for (name, strategy, labels) in [
        (
            "weight",
            weight,
            [("tier", "other"), ("tier", "first"), ("tier", "other")],
        ),
        (
            "order",
            order,
            [("rank", "r-1"), ("rank", "r-7"), ("rank", "r-3")],
        ),
    ] {
        let (cs, names) = ctx.step(&format!("{name}: one of 3 labelled pods is updated"), async {
            let spec = json!({"updateStrategy": {"type": "InPlaceIfPossible", "partition": 2, "priorityStrategy": strategy}});
            let cs = start(&ctx, name, 3, spec).await?;
            let names: Vec<String> = pod_uids(&ctx, &cs.selector()).await?.into_keys().collect();
            for (pod, (k, v)) in names.iter().zip(labels) {
                label_pod(&ctx, pod, k, Some(v)).await?;
            }
            cs.set_image(IMAGE_V2).await?;
            wait_updated(&cs, &ctx, 3, 1).await?;
            Ok((cs, names))
        })
        .await?;
        ctx.step(&format!("{name}: the pod the priority puts first is the one updated"), async {
            let first = &names[1];
            let updated: Vec<String> = pods(&ctx, &cs.selector())
                .await?
                .iter()
                .filter(|p| container_status(p, "main").is_some_and(|s| same_image(&s.image, IMAGE_V2)))
                .map(name_of)
                .collect();
            ensure!(
                updated == [first.clone()],
                "{name} priority: the pod labelled {:?} should update first, updated {updated:?}",
                labels[1]
            );
            Ok(())
        })
        .await?;
    }
    Ok(())
}

async fn scatter(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step(
            "two of four pods labelled zone=a, two of them updated",
            async {
                // The weight priority puts the two zone=a pods first;
                // scattering zone=a spreads them over the order (first and last
                // of four), so updating two pods at once takes one of them.
                let spec = json!({"updateStrategy": {"type": "InPlaceIfPossible", "partition": 2,
        "maxUnavailable": 2,
        "priorityStrategy": {"weightPriority": [
            {"weight": 50, "matchSelector": {"matchLabels": {"zone": "a"}}}]},
        "scatterStrategy": [{"key": "zone", "value": "a"}]}});
                let cs = start(&ctx, "scatter", 4, spec).await?;
                let names: Vec<String> =
                    pod_uids(&ctx, &cs.selector()).await?.into_keys().collect();
                for (pod, zone) in names.iter().zip(["a", "a", "b", "b"]) {
                    label_pod(&ctx, pod, "zone", Some(zone)).await?;
                }
                cs.set_image(IMAGE_V2).await?;
                wait_updated(&cs, &ctx, 4, 2).await?;
                Ok(cs)
            },
        )
        .await?;
    ctx.step("exactly one zone=a pod is among the two updated", async {
        let updated: Vec<(String, Option<String>)> = pods(&ctx, &cs.selector())
            .await?
            .iter()
            .filter(|p| container_status(p, "main").is_some_and(|s| same_image(&s.image, IMAGE_V2)))
            .map(|p| (name_of(p), label(p, "zone").map(str::to_string)))
            .collect();
        let in_a = updated
            .iter()
            .filter(|(_, z)| z.as_deref() == Some("a"))
            .count();
        ensure!(
            updated.len() == 2 && in_a == 1,
            "scatterStrategy zone=a: the two updated pods should include exactly one zone=a pod, updated {updated:?}"
        );
        Ok(())
    })
    .await
}

async fn pre_delete_hook(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, victim) = ctx
        .step("a CloneSet of 2 pods with a preDelete labels hook", async {
            let mut m = CloneSet::new("hook")
                .replicas(2)
                .label("hold", "true")
                .manifest();
            m["spec"]["lifecycle"] = json!({"preDelete": {"labelsHandler": {"hold": "true"}}});
            create(&ctx, m).await?;
            let cs = Handle::<CloneSetKind>::of(&ctx, "hook");
            cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
            let victim = pod_uids(&ctx, &cs.selector())
                .await?
                .into_keys()
                .next()
                .context("no pod")?;
            Ok((cs, victim))
        })
        .await?;
    ctx.step(
        "the pod named in podsToDelete is held PreparingDelete",
        async {
            cs.patch(json!({"spec": {"replicas": 1, "scaleStrategy": {"podsToDelete": [victim]}}}))
                .await
                .map_err(refusal)?;
            let v = victim.clone();
            wait_pods(
                &ctx,
                &cs.api(),
                "hook",
                &cs.selector(),
                "the pod held in PreparingDelete",
                move |_, pods| {
                    let p = pods.iter().find(|p| name_of(p) == v);
                    Check::when(
                        p.is_some_and(|p| label(p, STATE) == Some("PreparingDelete")),
                        || format!("pod {v}: state {:?}", p.map(|p| label(p, STATE))),
                    )
                },
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("the held pod is not deleted", async {
        // Held: still there once the controller has settled on replicas 1.
        let o = cs.get().await?;
        ensure!(
            pods(&ctx, &cs.selector())
                .await?
                .iter()
                .any(|p| name_of(p) == victim),
            "pod {victim} was deleted while its preDelete hook label was on; status {}",
            status(&o)
        );
        Ok(())
    })
    .await?;
    ctx.step("without its label, the pod is deleted", async {
        label_pod(&ctx, &victim, "hold", None).await?;
        let v = victim.clone();
        wait_pods(
            &ctx,
            &cs.api(),
            "hook",
            &cs.selector(),
            "the released pod deleted",
            move |_, pods| {
                Check::when(
                    pods.len() == 1 && pods.iter().all(|p| name_of(p) != v),
                    || format!("pods {:?}", pods.iter().map(name_of).collect::<Vec<_>>()),
                )
            },
        )
        .await?;
        Ok(())
    })
    .await
}

async fn in_place_update_hook(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, pod) = ctx
        .step(
            "a CloneSet of 1 pod with an inPlaceUpdate labels hook",
            async {
                let mut m = CloneSet::new("iphook")
                    .replicas(1)
                    .label("hold", "true")
                    .in_place_if_possible()
                    .manifest();
                m["spec"]["lifecycle"] =
                    json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}});
                create(&ctx, m).await?;
                let cs = Handle::<CloneSetKind>::of(&ctx, "iphook");
                cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
                let pod = pod_uids(&ctx, &cs.selector())
                    .await?
                    .into_keys()
                    .next()
                    .context("no pod")?;
                Ok((cs, pod))
            },
        )
        .await?;
    ctx.step(
        "on a new image the pod is held PreparingUpdate on its old image",
        async {
            cs.set_image(IMAGE_V2).await?;
            let what = "the pod held in PreparingUpdate on its old image";
            wait_pods(
                &ctx,
                &cs.api(),
                "iphook",
                &cs.selector(),
                what,
                |_, pods| {
                    let p = pods.first();
                    let image = p.and_then(|p| container_status(p, "main")).map(|s| s.image);
                    let spec_image = p
                        .and_then(|p| p.spec.as_ref())
                        .and_then(|s| s.containers[0].image.clone());
                    Check::when(
                        p.is_some_and(|p| label(p, STATE) == Some("PreparingUpdate"))
                            && image.as_deref() == Some(IMAGE_V1)
                            && spec_image.as_deref() == Some(IMAGE_V1),
                        || {
                            format!(
                                "state {:?}, image {image:?}, spec image {spec_image:?}",
                                p.map(|p| label(p, STATE))
                            )
                        },
                    )
                },
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("without its label, the pod is updated in place", async {
        label_pod(&ctx, &pod, "hold", None).await?;
        wait_updated(&cs, &ctx, 1, 1).await?;
        let p = pods(&ctx, &cs.selector()).await?;
        ensure!(
            p.len() == 1 && name_of(&p[0]) == pod,
            "the released pod {pod} was replaced instead of updated in place"
        );
        Ok(())
    })
    .await
}

async fn pre_normal_hook(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step("a CloneSet of 2 pods with a preNormal hook", async {
            let mut m = CloneSet::new("prenormal").replicas(2).manifest();
            m["spec"]["lifecycle"] = json!({"preNormal": hook(true)});
            create(&ctx, m).await?;
            let cs = Handle::<CloneSetKind>::of(&ctx, "prenormal");
            Ok(cs)
        })
        .await?;
    releasing_finalizers(&ctx, &cs.selector(), pre_normal_case(&ctx, &cs)).await
}

async fn pre_delete_finalizer_hook(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, victim) = ctx
        .step(
            "a CloneSet of 2 pods with a preDelete finalizer hook",
            async {
                let spec = json!({"lifecycle": {"preDelete": hook(false)}});
                let cs = start(&ctx, "predel", 2, spec).await?;
                let victim = name_of(
                    pods(&ctx, &cs.selector())
                        .await?
                        .first()
                        .context("no pod")?,
                );
                Ok((cs, victim))
            },
        )
        .await?;
    let scale_in = json!({"spec": {"replicas": 1, "scaleStrategy": {"podsToDelete": [victim]}}});
    let case = pre_delete_case(&ctx, &cs, &victim, scale_in);
    releasing_finalizers(&ctx, &cs.selector(), case).await
}

async fn in_place_update_finalizer_hook(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step(
            "a CloneSet of 1 pod with an inPlaceUpdate finalizer hook",
            async {
                let spec = json!({"updateStrategy": {"type": "InPlaceIfPossible"},
        "lifecycle": {"inPlaceUpdate": hook(false)}});
                let cs = start(&ctx, "iphookfin", 1, spec).await?;
                Ok(cs)
            },
        )
        .await?;
    let case = in_place_update_case(&ctx, &cs, false, true);
    releasing_finalizers(&ctx, &cs.selector(), case).await
}

async fn grace_period(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step(
            "a CloneSet of 1 pod with an in-place grace period of 10 s",
            async {
                let spec = json!({"updateStrategy": {"type": "InPlaceIfPossible",
        "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}});
                let cs = start(&ctx, "grace", 1, spec).await?;
                Ok(cs)
            },
        )
        .await?;
    ctx.step(
        "on a new image the pod is marked not ready before its image changes",
        async {
            cs.set_image(IMAGE_V2).await?;
            // During the grace period the pod is marked
            // not ready while it still runs the old image.
            wait_pods(
                &ctx,
                &cs.api(),
                "grace",
                &cs.selector(),
                "the pod in its grace period",
                |_, pods| {
                    let p = pods.first();
                    let in_grace = p.is_some_and(|p| {
                        !ready(p)
                            && container_status(p, "main")
                                .is_some_and(|s| same_image(&s.image, IMAGE_V1))
                            && p.metadata.annotations.as_ref().is_some_and(|a| {
                                a.contains_key("apps.kruise.io/inplace-update-grace")
                            })
                    });
                    Check::when(in_grace, || {
                        format!(
                            "pod ready {:?}, image {:?}",
                            p.map(ready),
                            p.and_then(|p| container_status(p, "main")).map(|s| s.image)
                        )
                    })
                },
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("the pod is updated", async {
        wait_updated(&cs, &ctx, 1, 1).await?;
        Ok(())
    })
    .await
}

async fn revision_history(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step("three updates under revisionHistoryLimit 1", async {
            let spec =
                json!({"revisionHistoryLimit": 1, "updateStrategy": {"type": "InPlaceIfPossible"}});
            let cs = start(&ctx, "hist", 1, spec).await?;
            for image in ["nginx:1.26", "nginx:1.27", "nginx:1.28"] {
                cs.set_image(image).await?;
                wait_updated(&cs, &ctx, 1, 1).await?;
            }
            Ok(cs)
        })
        .await?;
    ctx.step("the live revision and one old one remain", async {
        // The live revision and one old one.
        wait_owned_revisions(&ctx, &cs.api(), "hist", 2).await
    })
    .await
}

/// Claim name -> UID of the CloneSet's claims.
async fn claim_uids(ctx: &Ctx, selector: &str) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(claims(ctx, selector)
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

async fn pvcs(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, sel) = ctx
        .step("a CloneSet of 2 pods with a PVC each", async {
            let mut m = CloneSet::new("disk")
                .replicas(2)
                .data_volume("1Gi")
                .manifest();
            m["spec"]["scaleStrategy"] = json!({"disablePVCReuse": false});
            create(&ctx, m).await?;
            let cs = Handle::<CloneSetKind>::of(&ctx, "disk");
            cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
            let sel = cs.selector();
            Ok((cs, sel))
        })
        .await?;
    ctx.step(
        "a deleted pod comes back with its instance id and PVC",
        async {
            // A deleted pod is recreated with the same instance id and PVC.
            let victim = pods(&ctx, &sel)
                .await?
                .into_iter()
                .next()
                .context("no pod")?;
            let id = label(&victim, "apps.kruise.io/cloneset-instance-id")
                .unwrap_or_default()
                .to_string();
            let before = claim_uids(&ctx, &sel).await?;
            ctx.delete("v1", "Pod", &name_of(&victim))
                .await
                .map_err(refusal)?;
            let (old_uid, vname) = (victim.metadata.uid.clone(), name_of(&victim));
            wait_pods(
                &ctx,
                &cs.api(),
                "disk",
                &sel,
                "the deleted pod recreated",
                move |o, pods| {
                    let back = pods.iter().find(|p| name_of(p) == vname);
                    Check::when(
                        back.is_some_and(|p| p.metadata.uid != old_uid && ready(p))
                            && count(o, "readyReplicas") == 2,
                        || {
                            format!(
                                "pod {vname}: {:?}",
                                back.map(|p| (&p.metadata.uid, ready(p)))
                            )
                        },
                    )
                },
            )
            .await?;
            ensure!(
                claim_uids(&ctx, &sel).await? == before,
                "the recreated pod (instance {id}) did not reuse its PVC"
            );
            Ok(())
        },
    )
    .await?;
    pvcs_without_reuse(&ctx, &cs).await
}

/// Under `disablePVCReuse` a deleted pod comes back with a new instance id and its old PVC
/// goes; a scaled-in pod's PVC is deleted with it.
async fn pvcs_without_reuse(ctx: &Ctx, cs: &Handle<CloneSetKind>) -> anyhow::Result<()> {
    let ctx = ctx.clone();
    let sel = cs.selector();
    ctx.step(
        "under disablePVCReuse a deleted pod comes back with a new instance id and PVC",
        async {
            // Without reuse, a deleted pod gets a new instance id and its old PVC goes.
            cs.patch(json!({"spec": {"scaleStrategy": {"disablePVCReuse": true}}}))
                .await
                .map_err(refusal)?;
            let victim = pods(&ctx, &sel)
                .await?
                .into_iter()
                .next()
                .context("no pod")?;
            ctx.delete("v1", "Pod", &name_of(&victim))
                .await
                .map_err(refusal)?;
            let vname = name_of(&victim);
            wait_pods(
                &ctx,
                &cs.api(),
                "disk",
                &sel,
                "a new pod with a new instance id",
                move |o, pods| {
                    Check::when(
                        pods.len() == 2
                            && pods.iter().all(|p| name_of(p) != vname)
                            && count(o, "readyReplicas") == 2,
                        || format!("pods {:?}", pods.iter().map(name_of).collect::<Vec<_>>()),
                    )
                },
            )
            .await?;
            wait_claims(&ctx, &sel, 2).await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("a scaled-in pod's PVC is deleted with it", async {
        // A scaled-in pod's PVC is deleted with it.
        cs.patch(json!({"spec": {"replicas": 1}}))
            .await
            .map_err(refusal)?;
        cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        wait_claims(&ctx, &sel, 1).await
    })
    .await
}

/// Waits until the namespace holds `want` live PVCs matching `selector`, each used by a live
/// pod's volumes.
async fn wait_claims(ctx: &Ctx, selector: &str, want: usize) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = ctx.dyn_api("v1", "Namespace").await?;
    let (c, sel) = (ctx.clone(), selector.to_string());
    let what = format!("{want} PVCs, one per pod");
    until(
        &api,
        &ctx.namespace,
        &what,
        ctx.timeouts.converge,
        move |_| {
            let (c, sel) = (c.clone(), sel.clone());
            async move {
                match (claims(&c, &sel).await, pods(&c, &sel).await) {
                    (Ok(cl), Ok(ps)) => {
                        let used: Vec<String> = ps
                            .iter()
                            .flat_map(|p| p.spec.iter().flat_map(|s| s.volumes.iter().flatten()))
                            .filter_map(|v| {
                                v.persistent_volume_claim
                                    .as_ref()
                                    .map(|c| c.claim_name.clone())
                            })
                            .collect();
                        let names: Vec<String> =
                            cl.into_iter().filter_map(|c| c.metadata.name).collect();
                        Check::when(
                            names.len() == want && names.iter().all(|n| used.contains(n)),
                            || format!("PVCs {names:?}, used by pods {used:?}"),
                        )
                    }
                    (Err(e), _) | (_, Err(e)) => Check::Failed(format!("list: {e}")),
                }
            }
            .boxed()
        },
    )
    .await?;
    Ok(())
}

/// The `Progressing` condition's status and reason.
fn progressing(o: &DynamicObject) -> Option<(String, String)> {
    status(o)["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Progressing")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
}

async fn progress_deadline(ctx: Ctx) -> anyhow::Result<()> {
    let cs = ctx
        .step(
            "a CloneSet of 1 pod with progressDeadlineSeconds 3",
            async {
                let spec = json!({"progressDeadlineSeconds": 3,
        "updateStrategy": {"type": "ReCreate", "maxSurge": 1, "maxUnavailable": 0}});
                let cs = start(&ctx, "deadline", 1, spec).await?;
                Ok(cs)
            },
        )
        .await?;
    let want = |s: &'static str, r: &'static str| {
        move |o: &DynamicObject, _: &[Pod]| {
            let c = progressing(o);
            Check::when(observed(o) && c == Some((s.into(), r.into())), || {
                format!("Progressing condition {c:?}, want {s}/{r}")
            })
        }
    };
    ctx.step("an available CloneSet reports Progressing=True", async {
        wait_pods(
            &ctx,
            &cs.api(),
            "deadline",
            &cs.selector(),
            "Progressing=True (available)",
            want("True", "CloneSetAvailable"),
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step(
        "an unschedulable revision exceeds the progress deadline",
        async {
            // A new revision that cannot be scheduled never becomes available.
            cs.json_patch(
                json!([{"op": "add", "path": "/spec/template/spec/nodeSelector",
        "value": {"harness.io/no-such-node": "x"}}]),
            )
            .await?;
            wait_pods(
                &ctx,
                &cs.api(),
                "deadline",
                &cs.selector(),
                "Progressing=False past the deadline",
                want("False", "ProgressDeadlineExceeded"),
            )
            .await?;
            Ok(())
        },
    )
    .await
}
