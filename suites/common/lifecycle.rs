//! Lifecycle hooks on finalizers and markPodNotReady, as cases a suite runs over its own
//! workload: the CloneSet and the Advanced StatefulSet suites share them, since both
//! controllers move a pod through the same lifecycle states (the [`STATE`] label) under the
//! same hook rules. Start with [`pre_delete_case`], [`in_place_update_case`] and
//! [`pre_normal_case`]; [`hook`] is a hook's spec.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use super::objects::{count, label, name_of, observed, ready, wait_pods};
use super::{IMAGE_V1, IMAGE_V2, container_status, refusal};
use crate::scenario::wait::Check;
use crate::scenario::workload::{Handle, Kind};
use crate::scenario::{Ctx, status};

/// The label that carries a pod's lifecycle state.
pub const STATE: &str = "lifecycle.apps.kruise.io/state";

/// The label of a hook's labelsHandler (`HOOK_LABEL: on`).
pub const HOOK_LABEL: &str = "harness-hook";
/// The finalizer of a hook's finalizersHandler.
pub const HOOK_FINALIZER: &str = "harness.io/hook";
/// The readiness gate the webhook injects into every pod a Kruise workload owns; a hook with
/// markPodNotReady sets it False while the hook holds the pod.
const KRUISE_POD_READY: &str = "KruisePodReady";

/// A lifecycle hook on `HOOK_LABEL: on` (with `labels`) and [`HOOK_FINALIZER`], with
/// markPodNotReady.
pub fn hook(labels: bool) -> Value {
    let mut h = json!({"finalizersHandler": [HOOK_FINALIZER], "markPodNotReady": true});
    if labels {
        h["labelsHandler"] = json!({HOOK_LABEL: "on"});
    }
    h
}

/// The status of a pod condition (`None` when absent).
pub fn condition<'a>(p: &'a Pod, ty: &str) -> Option<&'a str> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| c.status.as_str())
}

fn has_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == HOOK_FINALIZER)
}

/// Merge-patches pod `name`: `label` sets or removes `HOOK_LABEL: on`, `finalizer` adds or
/// removes [`HOOK_FINALIZER`] (the pods of these cases carry no other finalizer).
async fn hook_pod(
    ctx: &Ctx,
    name: &str,
    label: Option<bool>,
    finalizer: Option<bool>,
) -> anyhow::Result<()> {
    let mut meta = json!({});
    if let Some(on) = label {
        meta["labels"] = json!({HOOK_LABEL: on.then_some("on")});
    }
    if let Some(on) = finalizer {
        meta["finalizers"] = if on {
            json!([HOOK_FINALIZER])
        } else {
            json!([])
        };
    }
    ctx.patch("v1", "Pod", name, json!({"metadata": meta}))
        .await
        .map_err(refusal)
        .with_context(|| format!("set the hook on pod {name}"))?;
    Ok(())
}

/// Runs `body`, then takes [`HOOK_FINALIZER`] off every pod of `selector` (terminating ones
/// too) whatever the outcome, so that no pod outlives the scenario's namespace.
pub async fn releasing_finalizers(
    ctx: &Ctx,
    selector: &str,
    body: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let outcome = body.await;
    // The scenario's own failure, if any, is the one reported.
    outcome.and(release_finalizers(ctx, selector).await)
}

async fn release_finalizers(ctx: &Ctx, selector: &str) -> anyhow::Result<()> {
    let all = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(selector))
        .await
        .context("list pods to release their finalizers")?;
    for p in all.items.iter().filter(|p| has_finalizer(p)) {
        let release = json!({"metadata": {"finalizers": []}});
        match ctx.patch("v1", "Pod", &name_of(p), release).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(refusal(e)).context(format!("release pod {}", name_of(p))),
        }
    }
    Ok(())
}

/// The lifecycle state of each pod, by name.
fn states(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (name_of(p), label(p, STATE).unwrap_or_default().to_string()))
        .collect()
}

/// preNormal with labelsHandler and finalizersHandler: the workload `w` was created with 2
/// replicas and `lifecycle.preNormal` = [`hook`]`(true)`. New pods stay PreparingNormal, ready
/// but not available, until they carry every handler's label and finalizer; markPodNotReady
/// does not apply to preNormal (it only acts on the inPlaceUpdate and preDelete hooks).
pub async fn pre_normal_case<K: Kind>(ctx: &Ctx, w: &Handle<K>) -> anyhow::Result<()> {
    let held = |o: &DynamicObject, pods: &[Pod]| {
        let s = states(pods);
        Check::when(
            observed(o)
                && pods.len() == 2
                && s.values().all(|s| s == "PreparingNormal")
                && count(o, "readyReplicas") == 2
                && count(o, "availableReplicas") == 0,
            || {
                format!(
                    "states {s:?}; status ready {} available {}",
                    count(o, "readyReplicas"),
                    count(o, "availableReplicas")
                )
            },
        )
    };
    let pods = ctx.step("both new pods are held PreparingNormal, ready and not available", async {
        let what = "2 ready pods held in PreparingNormal, none available";
        wait_pods(ctx, &w.api(), w.name(), &w.selector(), what, held).await?;
        let pods = w.pods().await?;
        for p in &pods {
            ensure!(
                condition(p, KRUISE_POD_READY) == Some("True") && ready(p),
                "pod {} held by preNormal with markPodNotReady: {KRUISE_POD_READY} {:?}, Ready {}; markPodNotReady must not act on preNormal",
                name_of(p),
                condition(p, KRUISE_POD_READY),
                ready(p)
            );
        }
        Ok(pods)
    })
    .await?;
    let (a, b) = (name_of(&pods[0]), name_of(&pods[1]));
    ctx.step(
        "a pod with only the finalizer and one with only the label stay held",
        async {
            // One pod gets only the finalizer, the other only the label: neither is released.
            hook_pod(ctx, &a, None, Some(true)).await?;
            hook_pod(ctx, &b, Some(true), None).await?;
            // A spec change the pods do not depend on makes the controller sync and report its new
            // generation after both pod changes were made.
            w.patch(json!({"spec": {"revisionHistoryLimit": 5}}))
                .await
                .map_err(refusal)?;
            let what = "both pods still held in PreparingNormal after the partial hooks";
            wait_pods(ctx, &w.api(), w.name(), &w.selector(), what, held).await?;
            Ok(())
        },
    )
    .await?;
    ctx.step(
        "with both the label and the finalizer each pod becomes Normal and available",
        async {
            // With both the label and the finalizer, each pod becomes Normal, and available.
            hook_pod(ctx, &a, Some(true), None).await?;
            hook_pod(ctx, &b, None, Some(true)).await?;
            let what = "both pods Normal and available";
            wait_pods(ctx, &w.api(), w.name(), &w.selector(), what, |o, pods| {
                let s = states(pods);
                Check::when(
                    observed(o)
                        && s.len() == 2
                        && s.values().all(|s| s == "Normal")
                        && count(o, "availableReplicas") == 2,
                    || {
                        format!(
                            "states {s:?}; status available {}",
                            count(o, "availableReplicas")
                        )
                    },
                )
            })
            .await?;
            Ok(())
        },
    )
    .await
}

/// preDelete on a finalizer with markPodNotReady: the workload `w` runs 2 pods with
/// `lifecycle.preDelete` = [`hook`]`(false)`; `scale_in` (a spec patch) removes `victim`.
/// The victim, given the finalizer, stays in PreparingDelete and is set not ready
/// (`KruisePodReady` False) until the finalizer goes; then it is deleted.
pub async fn pre_delete_case<K: Kind>(
    ctx: &Ctx,
    w: &Handle<K>,
    victim: &str,
    scale_in: Value,
) -> anyhow::Result<()> {
    ctx.step(
        "the scaled-in pod is held PreparingDelete and marked not ready",
        async {
            hook_pod(ctx, victim, None, Some(true)).await?;
            w.patch(scale_in).await.map_err(refusal)?;
            let v = victim.to_string();
            let what = format!("pod {victim} held in PreparingDelete and marked not ready");
            wait_pods(
                ctx,
                &w.api(),
                w.name(),
                &w.selector(),
                &what,
                move |_, pods| {
                    let p = pods.iter().find(|p| name_of(p) == v);
                    Check::when(
                        p.is_some_and(|p| {
                            label(p, STATE) == Some("PreparingDelete")
                                && condition(p, KRUISE_POD_READY) == Some("False")
                                && !ready(p)
                        }),
                        || {
                            format!(
                                "pod {v}: {:?}",
                                p.map(|p| (
                                    label(p, STATE),
                                    condition(p, KRUISE_POD_READY),
                                    ready(p)
                                ))
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
    ctx.step("released, the pod is deleted", async {
        hook_pod(ctx, victim, None, Some(false)).await?;
        let v = victim.to_string();
        wait_pods(
            ctx,
            &w.api(),
            w.name(),
            &w.selector(),
            "the released pod deleted",
            move |o, pods| {
                Check::when(
                    observed(o) && pods.len() == 1 && pods.iter().all(|p| name_of(p) != v),
                    || format!("pods {:?}", states(pods)),
                )
            },
        )
        .await?;
        Ok(())
    })
    .await
}

/// inPlaceUpdate with markPodNotReady: the workload `w` runs 1 pod, updated in place, with
/// `lifecycle.inPlaceUpdate` = [`hook`]`(labels)`; the pod holds the hook by its template's
/// label, or (`hold_with_finalizer`) by the finalizer, given here. On an image change the pod
/// stays PreparingUpdate on its old image and not ready until the hook is removed; it is then
/// updated, reported Updated and ready again (markPodNotReady restores KruisePodReady), and
/// only becomes Normal, and available, once every handler's label and finalizer is back.
pub async fn in_place_update_case<K: Kind>(
    ctx: &Ctx,
    w: &Handle<K>,
    labels: bool,
    hold_with_finalizer: bool,
) -> anyhow::Result<()> {
    let pod = ctx
        .step("the hooked pod gets a new image", async {
            let pod = name_of(w.pods().await?.first().context("no pod")?);
            if hold_with_finalizer {
                hook_pod(ctx, &pod, None, Some(true)).await?;
            }
            w.set_image(IMAGE_V2).await?;
            Ok(pod)
        })
        .await?;
    let stage = |state: &'static str, image: &'static str, kruise_ready: &'static str| {
        move |o: &DynamicObject, pods: &[Pod]| {
            let p = pods.first();
            let spec_image = p
                .and_then(|p| p.spec.as_ref())
                .and_then(|s| s.containers[0].image.clone());
            let run_image = p.and_then(|p| container_status(p, "main")).map(|s| s.image);
            let seen = p.map(|p| (label(p, STATE), condition(p, KRUISE_POD_READY), ready(p)));
            Check::when(
                observed(o)
                    && pods.len() == 1
                    && seen == Some((Some(state), Some(kruise_ready), kruise_ready == "True"))
                    && spec_image.as_deref() == Some(image)
                    && run_image.as_deref() == Some(image),
                || {
                    format!(
                        "(state, {KRUISE_POD_READY}, Ready) {seen:?}, spec image {spec_image:?}, running {run_image:?}"
                    )
                },
            )
        }
    };
    let (api, name, sel) = (w.api(), w.name().to_string(), w.selector());
    let what = "the pod held in PreparingUpdate on its old image, not ready";
    ctx.step(
        "the pod is held PreparingUpdate on its old image, not ready",
        async {
            wait_pods(
                ctx,
                &api,
                &name,
                &sel,
                what,
                stage("PreparingUpdate", IMAGE_V1, "False"),
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    let unhook = |on: bool| (labels.then_some(on), Some(on));
    ctx.step(
        "released, it is updated in place and ready again, not yet available",
        async {
            let (l, f) = unhook(false);
            hook_pod(ctx, &pod, l, f).await?;
            let what = "the released pod updated in place, Updated and ready again";
            let o = wait_pods(
                ctx,
                &api,
                &name,
                &sel,
                what,
                stage("Updated", IMAGE_V2, "True"),
            )
            .await?;
            ensure!(
                count(&o, "availableReplicas") == 0,
                "a pod in state Updated counts as available: status {}",
                status(&o)
            );
            Ok(())
        },
    )
    .await?;
    ctx.step(
        "hooked again, the same pod is Normal and available",
        async {
            let (l, f) = unhook(true);
            hook_pod(ctx, &pod, l, f).await?;
            wait_pods(
                ctx,
                &api,
                &name,
                &sel,
                "the re-hooked pod Normal and available",
                |o, pods| {
                    Check::when(
                        observed(o)
                            && states(pods).values().all(|s| s == "Normal")
                            && count(o, "availableReplicas") == 1,
                        || format!("states {:?}; status {}", states(pods), status(o)),
                    )
                },
            )
            .await?;
            let now = w.pods().await?;
            ensure!(
                now.len() == 1 && name_of(&now[0]) == pod,
                "the pod {pod} was replaced instead of updated in place"
            );
            Ok(())
        },
    )
    .await
}
