//! PodUnavailableBudget (`policy.kruise.io/v1alpha1`): the pod webhook refuses deletions,
//! evictions and in-place updates that would take more pods down than the budget allows, over
//! every target kind, by `targetRef` and by `selector`. Start with [`scenarios`]: one table of
//! budgets (named [`Case`]s), the in-place update case, and a budget over a kind that owns no
//! pod itself (a CronJob).

use std::collections::BTreeMap;

use anyhow::{Context, bail, ensure};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, EvictParams};
use serde_json::{Value, json};

use super::common::*;
use crate::scenario::wait::{Check, until};
use crate::scenario::workload::{
    AdvancedStatefulSet, CloneSet, Deployment, Handle, IMAGE_V1, Kind, Spec, StatefulSet,
    same_image,
};
use crate::scenario::{BodyFn, Ctx, Requirements, Scenario, status};

const API: &str = "policy.kruise.io/v1alpha1";
const KIND: &str = "PodUnavailableBudget";
const BUDGET: &str = "budget";
/// The refusal the pod webhook answers when a budget has no unavailability left.
const EXHAUSTED: &str = "unavailable allowed is negative";
/// The Warning event the webhook records on a pod it protected.
const PREVENTED: &str = "PubPreventPodDeletion";
const REPLICAS: i64 = 3;

/// The budget suite runs with the budget protecting deletion, eviction and in-place update.
fn requires() -> Requirements {
    Requirements {
        controller_gates: BTreeMap::from([
            ("PodUnavailableBudgetDeleteGate".to_string(), true),
            ("PodUnavailableBudgetUpdateGate".to_string(), true),
        ]),
        ..Default::default()
    }
}

/// The kinds a budget protects.
#[derive(Debug, Clone, Copy)]
enum Target {
    Deployment,
    StatefulSet,
    CloneSet,
    AdvancedStatefulSet,
}

/// How the budget picks its pods.
#[derive(Debug, Clone, Copy)]
enum Selection {
    TargetRef,
    Selector,
}

/// One budget case: the exhausted budget, then the open one and the `desiredAvailable` it
/// yields over [`REPLICAS`] pods.
struct Case {
    target: Target,
    selection: Selection,
    closed: fn() -> Value,
    open: fn() -> Value,
    desired: i64,
}

// The cases: each target kind by `targetRef`, two by `selector`; int and percent forms of
// `maxUnavailable` and `minAvailable` (percentages round up).

/// A Deployment by `targetRef`: `maxUnavailable` 0, then 1.
static DEPLOYMENT_BY_TARGET_REF: Case = Case {
    target: Target::Deployment,
    selection: Selection::TargetRef,
    closed: || json!({"maxUnavailable": 0}),
    open: || json!({"maxUnavailable": 1}),
    desired: 2,
};

/// A StatefulSet by `targetRef`: `maxUnavailable` 0%, then 30% (rounded up: 1 of 3).
static STATEFULSET_BY_TARGET_REF: Case = Case {
    target: Target::StatefulSet,
    selection: Selection::TargetRef,
    closed: || json!({"maxUnavailable": "0%"}),
    open: || json!({"maxUnavailable": "30%"}),
    desired: 2,
};

/// A CloneSet by `targetRef`: `minAvailable` 3 of 3, then 2.
static CLONESET_BY_TARGET_REF: Case = Case {
    target: Target::CloneSet,
    selection: Selection::TargetRef,
    closed: || json!({"minAvailable": 3}),
    open: || json!({"minAvailable": 2}),
    desired: 2,
};

/// An Advanced StatefulSet by `targetRef`: `minAvailable` 100%, then 60% (rounded up: 2 of 3).
static ADVANCED_STATEFULSET_BY_TARGET_REF: Case = Case {
    target: Target::AdvancedStatefulSet,
    selection: Selection::TargetRef,
    closed: || json!({"minAvailable": "100%"}),
    open: || json!({"minAvailable": "60%"}),
    desired: 2,
};

/// CloneSet pods by `selector`: `maxUnavailable` 0, then 50% (rounded up: 2 of 3).
static CLONESET_BY_SELECTOR: Case = Case {
    target: Target::CloneSet,
    selection: Selection::Selector,
    closed: || json!({"maxUnavailable": 0}),
    open: || json!({"maxUnavailable": "50%"}),
    desired: 1,
};

/// Deployment pods by `selector`: `minAvailable` 3, then switched to `maxUnavailable` 1.
static DEPLOYMENT_BY_SELECTOR: Case = Case {
    target: Target::Deployment,
    selection: Selection::Selector,
    closed: || json!({"minAvailable": 3}),
    open: || json!({"minAvailable": null, "maxUnavailable": 1}),
    desired: 2,
};

/// One scenario per budget [`Case`], then the in-place update case.
pub fn scenarios() -> Vec<Scenario> {
    // The scenario evicts a pod the budget lets go, beyond what the workload's own rollout
    // strategy would take down at once.
    let budget = |name: &'static str,
                  summary: &'static str,
                  labels: &'static [&'static str],
                  body: BodyFn| {
        Scenario::new(name, summary, labels, body)
            .requiring(requires())
            .allowing(&[PREVENTED])
            .expecting(&["max-unavailable"])
    };
    // A StatefulSet's successor pod bears the evicted pod's name (see `budget_over`).
    let same_name = |name: &'static str,
                     summary: &'static str,
                     labels: &'static [&'static str],
                     body: BodyFn| {
        budget(name, summary, labels, body).allowing(&[PREVENTED, "NotDeleted"])
    };
    vec![
        budget(
            "podunavailablebudget/deployment-by-target-ref-refuses-then-allows-disruption",
            "maxUnavailable 0 over a Deployment refuses deletion and eviction; maxUnavailable 1 allows one eviction",
            &[
                "smoke",
                "podunavailablebudget",
                "deployment",
                "target-ref",
                "eviction",
            ],
            |ctx| budget_case(ctx, &DEPLOYMENT_BY_TARGET_REF).boxed(),
        ),
        same_name(
            "podunavailablebudget/statefulset-by-target-ref-refuses-then-allows-disruption",
            "maxUnavailable 0% over a StatefulSet refuses deletion and eviction; 30% of 3 (rounded up) allows one",
            &[
                "podunavailablebudget",
                "statefulset",
                "target-ref",
                "eviction",
            ],
            |ctx| budget_case(ctx, &STATEFULSET_BY_TARGET_REF).boxed(),
        ),
        budget(
            "podunavailablebudget/cloneset-by-target-ref-refuses-then-allows-disruption",
            "minAvailable 3 of 3 over a CloneSet refuses deletion and eviction; minAvailable 2 allows one",
            &["podunavailablebudget", "cloneset", "target-ref", "eviction"],
            |ctx| budget_case(ctx, &CLONESET_BY_TARGET_REF).boxed(),
        ),
        same_name(
            "podunavailablebudget/advanced-statefulset-by-target-ref-refuses-then-allows-disruption",
            "minAvailable 100% over an Advanced StatefulSet refuses deletion and eviction; 60% of 3 (rounded up) allows one",
            &[
                "podunavailablebudget",
                "advanced-statefulset",
                "target-ref",
                "eviction",
            ],
            |ctx| budget_case(ctx, &ADVANCED_STATEFULSET_BY_TARGET_REF).boxed(),
        ),
        budget(
            "podunavailablebudget/cloneset-by-selector-refuses-then-allows-disruption",
            "a selector budget over CloneSet pods: maxUnavailable 0 refuses, 50% of 3 (rounded up) allows two",
            &["podunavailablebudget", "cloneset", "selector", "eviction"],
            |ctx| budget_case(ctx, &CLONESET_BY_SELECTOR).boxed(),
        ),
        budget(
            "podunavailablebudget/deployment-by-selector-switches-min-available-to-max-unavailable",
            "a selector budget over Deployment pods: minAvailable 3 refuses, switching to maxUnavailable 1 allows one",
            &["podunavailablebudget", "deployment", "selector", "eviction"],
            |ctx| budget_case(ctx, &DEPLOYMENT_BY_SELECTOR).boxed(),
        ),
        Scenario::new(
            "podunavailablebudget/cloneset-in-place-update-waits-for-budget",
            "a CloneSet's in-place update holds while the budget allows no unavailable pod and completes once it allows one",
            &["podunavailablebudget", "cloneset", "in-place"],
            |ctx| in_place_update(ctx).boxed(),
        )
        .requiring(requires())
        .allowing(&[PREVENTED])
        // The PubPreventPodDeletion event it watches for came in v1.5.1.
        .since("v1.5.1"),
        Scenario::new(
            "podunavailablebudget/cronjob-target-is-reconciled",
            "a budget whose targetRef names a CronJob (suspended: no pod) is reconciled, counting no pod, without the manager denied reading the CronJob",
            &["podunavailablebudget", "cronjob", "target-ref", "rbac"],
            |ctx| cronjob_target(ctx).boxed(),
        )
        .requiring(requires()),
    ]
}

/// A budget over a suspended CronJob: observed by its controller, which counts no pod (the
/// run's manager check fails the scenario if the manager was denied on the way).
async fn cronjob_target(ctx: Ctx) -> anyhow::Result<()> {
    let name = "scheduled";
    ctx.step("a suspended CronJob", async {
        let pod = json!({"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": IMAGE_V1}]
        }});
        ctx.create(json!({
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": name},
            "spec": {
                "schedule": "0 0 1 1 *",
                "suspend": true,
                "jobTemplate": {"spec": {"template": pod}}
            }
        }))
        .await
        .map_err(refusal)?;
        Ok(())
    })
    .await?;
    ctx.step(
        "a budget over it is observed by its controller and counts no pod",
        async {
            let budget = json!({
                "apiVersion": API,
                "kind": KIND,
                "metadata": {"name": BUDGET},
                "spec": {
                    "targetRef": {"apiVersion": "batch/v1", "kind": "CronJob", "name": name},
                    "maxUnavailable": 1
                }
            });
            create_observed(&ctx, budget).await?;
            let got = Counts::of(&ctx.dyn_api(API, KIND).await?.get(BUDGET).await?);
            ensure!(
                got.total == 0 && got.current == 0,
                "the budget counts pods of a CronJob that has none: {got:?}"
            );
            Ok(())
        },
    )
    .await
}

/// The budget manifest over workload `name` of kind `K`.
fn budget<K: Kind>(name: &str, selection: Selection, amounts: Value) -> Value {
    let ar = K::api_resource();
    let mut spec = match selection {
        Selection::TargetRef => json!({
            "targetRef": {"apiVersion": ar.api_version, "kind": ar.kind, "name": name}
        }),
        Selection::Selector => json!({"selector": {"matchLabels": {"app": name}}}),
    };
    for (k, v) in amounts.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": API, "kind": KIND, "metadata": {"name": BUDGET}, "spec": spec})
}

async fn budget_case(ctx: Ctx, case: &Case) -> anyhow::Result<()> {
    let name = "guarded";
    match case.target {
        Target::Deployment => budget_over(ctx, Deployment::new(name), case).await,
        Target::StatefulSet => {
            budget_over(ctx, StatefulSet::new(name).parallel_owning_claims(), case).await
        }
        Target::CloneSet => budget_over(ctx, CloneSet::new(name), case).await,
        Target::AdvancedStatefulSet => budget_over(ctx, AdvancedStatefulSet::new(name), case).await,
    }
}

/// The budget exhausted refuses deletion and eviction; opened, it allows an eviction, and the
/// status counts the pods again once the workload has replaced it.
async fn budget_over<K: Kind>(ctx: Ctx, w: Spec<K>, case: &Case) -> anyhow::Result<()> {
    let name = w.name().to_string();
    let w = ctx
        .step("an exhausted budget over a workload of 3 pods", async {
            create_observed(&ctx, budget::<K>(&name, case.selection, (case.closed)())).await?;
            let w = w.replicas(REPLICAS).create(&ctx).await?;
            w.wait_rolled_out(REPLICAS, ctx.timeouts.converge, &[])
                .await?;
            Ok(w)
        })
        .await?;
    let pods = ctx
        .step(
            "every pod is related to the budget and counted available",
            async {
                let pods = w.pods().await?;
                for p in &pods {
                    ensure!(
                        related_budget(p).as_deref() == Some(BUDGET),
                        "pod {} was not related to budget {BUDGET} at creation: annotations {:?}",
                        p.metadata.name.as_deref().unwrap_or_default(),
                        p.metadata.annotations
                    );
                }
                wait_counts(&ctx, Counts::all_available(REPLICAS, REPLICAS)).await?;
                Ok(pods)
            },
        )
        .await?;

    let (before, victim) = ctx.step("deleting or evicting a pod is refused", async {
        let before = pod_uids(&ctx, &w.selector()).await?;
        let victim = pods[0].metadata.name.clone().unwrap_or_default();
        let refused = ctx.delete("v1", "Pod", &victim).await;
        expect_refused(refused, &format!("deleting pod {victim}"))?;
        let refused = evict(&ctx, &victim).await;
        expect_refused(refused, &format!("evicting pod {victim}"))?;
        let after = pod_uids(&ctx, &w.selector()).await?;
        ensure!(
            before == after,
            "pods changed while the budget allowed no disruption: before {before:?}, after {after:?}"
        );
        Ok((before, victim))
    })
    .await?;

    ctx.step(
        "opened, the budget allows an eviction and the pod is replaced",
        async {
            ctx.patch(API, KIND, BUDGET, json!({"spec": (case.open)()}))
                .await
                .map_err(refusal)
                .context("open the budget")?;
            wait_counts(&ctx, Counts::all_available(REPLICAS, case.desired)).await?;
            evict(&ctx, &victim)
                .await
                .map_err(refusal)
                .with_context(|| format!("evict pod {victim} within the budget"))?;
            replaced(&ctx, &w, &before[&victim]).await?;
            Ok(())
        },
    )
    .await?;
    if matches!(
        case.target,
        Target::StatefulSet | Target::AdvancedStatefulSet
    ) {
        // The budget keeps the evicted pod's name among its disrupted pods until it sees that
        // pod gone or a deletion timeout passes (a NotDeleted warning); a StatefulSet's
        // successor bears the same name, so the counters recover only after that timeout.
        return Ok(());
    }
    ctx.step("the budget counts every pod available again", async {
        wait_counts(&ctx, Counts::all_available(REPLICAS, case.desired)).await
    })
    .await
}

/// Waits until the workload has `REPLICAS` ready pods again, none with UID `gone`.
async fn replaced<K: Kind>(ctx: &Ctx, w: &Handle<K>, gone: &str) -> anyhow::Result<()> {
    w.wait_rolled_out(REPLICAS, ctx.timeouts.converge, &[])
        .await?;
    let api = w.api();
    let (selector, gone) = (w.selector(), gone.to_string());
    let ctx2 = ctx.clone();
    until(
        &api,
        w.name(),
        "the evicted pod replaced",
        ctx.timeouts.converge,
        move |_| {
            let (ctx, selector, gone) = (ctx2.clone(), selector.clone(), gone.clone());
            async move {
                match pod_uids(&ctx, &selector).await {
                    Ok(uids) => Check::when(
                        uids.len() as i64 == REPLICAS && !uids.values().any(|u| *u == gone),
                        || format!("pods {uids:?}, want {REPLICAS} without uid {gone}"),
                    ),
                    Err(e) => Check::Failed(format!("list pods: {e}")),
                }
            }
            .boxed()
        },
    )
    .await?;
    Ok(())
}

/// The evicted or deleted pod: an `Err` naming the exhausted budget is expected.
fn expect_refused<T>(r: Result<T, kube::Error>, what: &str) -> anyhow::Result<()> {
    match r {
        Ok(_) => {
            bail!("{what} was allowed, want a refusal because the budget allows no unavailable pod")
        }
        Err(kube::Error::Api(s)) if s.message.contains(EXHAUSTED) => Ok(()),
        Err(e) => bail!(
            "{what}: want a refusal saying {EXHAUSTED:?}, got {}",
            refusal(e)
        ),
    }
}

/// Asks the API to evict `pod`: a call of the `pods/eviction` subresource, not an object of the
/// scenario, so nothing is recorded for field coverage.
async fn evict(ctx: &Ctx, pod: &str) -> Result<(), kube::Error> {
    ctx.api::<Pod>()
        .evict(pod, &EvictParams::default())
        .await
        .map(|_| ())
}

/// The budget the pod webhook related the pod to (the annotation's name changed in v1.9).
fn related_budget(p: &Pod) -> Option<String> {
    let a = p.metadata.annotations.as_ref()?;
    a.get("pub.kruise.io/related-pub")
        .or_else(|| a.get("kruise.io/related-pub"))
        .cloned()
}

/// The budget's status counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    total: i64,
    desired: i64,
    current: i64,
    allowed: i64,
}

impl Counts {
    /// Every one of `total` pods available, `desired` of them required.
    fn all_available(total: i64, desired: i64) -> Self {
        Self {
            total,
            desired,
            current: total,
            allowed: total - desired,
        }
    }

    fn of(o: &DynamicObject) -> Self {
        let s = status(o);
        let n = |f: &str| s[f].as_i64().unwrap_or(0);
        Self {
            total: n("totalReplicas"),
            desired: n("desiredAvailable"),
            current: n("currentAvailable"),
            allowed: n("unavailableAllowed"),
        }
    }
}

/// Waits until the budget has observed its latest spec and reports `want`.
async fn wait_counts(ctx: &Ctx, want: Counts) -> anyhow::Result<()> {
    let api = ctx.dyn_api(API, KIND).await?;
    let what = format!("budget {BUDGET} to report {want:?}");
    until(&api, BUDGET, &what, ctx.timeouts.converge, move |o| {
        async move {
            let Some(o) = o else {
                return Check::Pending("the budget does not exist".into());
            };
            let observed = status(&o)["observedGeneration"].as_i64() >= o.metadata.generation;
            let got = Counts::of(&o);
            Check::when(observed && got == want, || {
                format!(
                    "status {got:?} (observedGeneration {} of {:?}), want {want:?}",
                    status(&o)["observedGeneration"],
                    o.metadata.generation
                )
            })
        }
        .boxed()
    })
    .await?;
    Ok(())
}

/// A CloneSet updating in place waits for the budget: no pod changes while it allows no
/// unavailable pod (the webhook records why on the pods), all update in place once it allows one.
async fn in_place_update(ctx: Ctx) -> anyhow::Result<()> {
    let name = "in-place";
    let cs = CloneSet::new(name).replicas(2).in_place_if_possible();
    let cs = ctx
        .step(
            "a budget allowing no unavailable pod over a CloneSet of 2 pods",
            async {
                create_observed(
                    &ctx,
                    budget::<crate::scenario::workload::CloneSetKind>(
                        name,
                        Selection::TargetRef,
                        json!({"maxUnavailable": 0}),
                    ),
                )
                .await?;
                let cs = cs.create(&ctx).await?;
                cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
                wait_counts(&ctx, Counts::all_available(2, 2)).await?;
                Ok(cs)
            },
        )
        .await?;
    let before = ctx
        .step("the budget holds back an in-place update", async {
            let before = pod_uids(&ctx, &cs.selector()).await?;
            cs.set_image(IMAGE_V2).await?;
            prevented(&ctx, &cs).await?;
            for p in cs.pods().await? {
                let image = p.spec.as_ref().and_then(|s| s.containers[0].image.clone());
                ensure!(
                    image.as_deref() == Some(IMAGE_V1),
                    "pod {:?} was updated to {image:?} while the budget allowed no unavailable pod",
                    p.metadata.name
                );
            }
            Ok(before)
        })
        .await?;
    ctx.step("opened, the budget lets every pod update in place", async {
        ctx.patch(API, KIND, BUDGET, json!({"spec": {"maxUnavailable": 1}}))
            .await
            .map_err(refusal)
            .context("open the budget")?;
        cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        let after = pod_uids(&ctx, &cs.selector()).await?;
        ensure!(
            before == after,
            "pods were recreated instead of updated in place: before {before:?}, after {after:?}"
        );
        for p in cs.pods().await? {
            let s = container_status(&p, "main");
            ensure!(
                s.as_ref().is_some_and(|s| same_image(&s.image, IMAGE_V2)),
                "pod {:?} does not run {IMAGE_V2}: {s:?}",
                p.metadata.name
            );
        }
        Ok(())
    })
    .await
}

/// Waits for the Warning the budget records on a pod it kept from being updated.
async fn prevented<K: Kind>(ctx: &Ctx, w: &Handle<K>) -> anyhow::Result<()> {
    let (client, ns) = (ctx.client.clone(), ctx.namespace.clone());
    let prefix = format!("{}-", w.name());
    until(
        &w.api(),
        w.name(),
        "the budget to hold back the update of a pod (a PubPreventPodDeletion event)",
        ctx.timeouts.converge,
        move |_| {
            let (client, ns, prefix) = (client.clone(), ns.clone(), prefix.clone());
            async move {
                match crate::scenario::invariants::warning_events(&client, &ns).await {
                    Ok(events) => Check::when(
                        events.iter().any(|e| {
                            e.reason.as_deref() == Some(PREVENTED)
                                && e.involved_object
                                    .name
                                    .as_deref()
                                    .is_some_and(|n| n.starts_with(&prefix))
                        }),
                        || format!("no {PREVENTED} event on a pod named {prefix}*"),
                    ),
                    Err(e) => Check::Failed(format!("list events: {e}")),
                }
            }
            .boxed()
        },
    )
    .await?;
    Ok(())
}
