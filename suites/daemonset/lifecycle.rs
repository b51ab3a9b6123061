//! Advanced DaemonSet lifecycle: the documented contract of `apps.kruise.io/v1alpha1`
//! DaemonSet's rolling update — partition, paused, in-place updates, the node selector of a
//! rollout, maxSurge and maxUnavailable, the preDelete hook, revision history — and its status
//! counters. Start with [`scenarios`].

use anyhow::{Context, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::cluster::ZONE_LABEL;
use crate::scenario::wait::Check;
use crate::scenario::workload::{AdvancedDaemonSet, AdvancedDaemonSetKind, Handle, same_image};
use crate::scenario::{Ctx, Scenario, status};
use crate::suites::common::*;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "daemonset/partition-keeps-nodes-at-the-old-revision",
            "rollingUpdate.partition (3, then 50%, then 0) keeps that many pods at the old revision; daemonSetHash and updatedNumberScheduled follow",
            &["advanced-daemonset", "update", "partition", "status"],
            partition,
        )
        // rollingUpdate.partition takes a percentage from v1.9.0 on.
        .since("v1.9.0"),
        Scenario::new(
            "daemonset/paused-rolling-update-touches-no-pod",
            "with rollingUpdate.paused no pod moves to the new revision until it is resumed",
            &["smoke", "advanced-daemonset", "update", "paused"],
            paused,
        ),
        Scenario::new(
            "daemonset/on-delete-updates-only-deleted-pods",
            "with updateStrategy OnDelete a template change replaces no pod until one is deleted; its replacement runs the new revision",
            &["advanced-daemonset", "update", "on-delete"],
            on_delete,
        ),
        Scenario::new(
            "daemonset/in-place-if-possible-updates-the-image-in-place",
            "rollingUpdateType InPlaceIfPossible changes the image of every pod without recreating it",
            &["advanced-daemonset", "update", "in-place"],
            in_place,
        ),
        Scenario::new(
            "daemonset/in-place-rollout-counts-updating-pods-against-max-unavailable",
            "with InPlaceIfPossible and maxUnavailable 1, a pod being updated in place is unavailable: no second pod is updated before the first is ready again, even when the kubelet takes a moment to turn it unready",
            &["advanced-daemonset", "update", "in-place", "max-unavailable"],
            in_place_slow_readiness,
        ),
        Scenario::new(
            "daemonset/rolling-selector-updates-only-matching-nodes",
            "rollingUpdate.selector limits the rollout to the pods on nodes it matches",
            &["advanced-daemonset", "update", "selector"],
            rolling_selector,
        ),
        Scenario::new(
            "daemonset/node-selector-restricts-pods-to-matching-nodes",
            "a template nodeSelector on one zone runs one pod per node of that zone; the status counters agree",
            &["advanced-daemonset", "scheduling", "status"],
            node_selector,
        ),
        Scenario::new(
            "daemonset/max-surge-and-max-unavailable-bound-the-rollout",
            "maxSurge 1 / maxUnavailable 0 runs a second pod on a node before stopping the old one; maxUnavailable 2 keeps at least 2 available",
            &[
                "advanced-daemonset",
                "update",
                "max-surge",
                "max-unavailable",
                "min-ready-seconds"
            ],
            surge_and_unavailable,
        ),
        Scenario::new(
            "daemonset/pre-delete-hook-holds-old-pods",
            "lifecycle.preDelete.labelsHandler holds the pods a rollout would delete in PreparingDelete until the label goes",
            &["advanced-daemonset", "lifecycle", "hook"],
            pre_delete_hook,
        ),
        Scenario::new(
            "daemonset/pre-delete-finalizer-hook-marks-held-pods-not-ready",
            "lifecycle.preDelete.finalizersHandler holds the pods a rollout would delete in PreparingDelete while the finalizer is on; markPodNotReady turns their KruisePodReady condition False",
            &["advanced-daemonset", "lifecycle", "hook", "readiness"],
            pre_delete_finalizer_hook,
        ),
        Scenario::new(
            "daemonset/in-place-update-hook-is-refused",
            "an Advanced DaemonSet supports only the preDelete hook: a lifecycle.inPlaceUpdate hook is refused at admission",
            &["advanced-daemonset", "lifecycle", "hook", "webhook"],
            in_place_update_hook_refused,
        ),
        Scenario::new(
            "daemonset/revision-history-limit-prunes-controller-revisions",
            "after three updates with revisionHistoryLimit 1 only the live revision and one old one remain",
            &["advanced-daemonset", "revision-history"],
            revision_history,
        ),
    ]
}

/// The number of nodes of the cluster.
fn node_count(ctx: &Ctx) -> usize {
    ctx.facts.zones.values().map(Vec::len).sum()
}

/// An Advanced DaemonSet `name` with `spec` merged into its manifest's spec, created and
/// rolled out on `want` nodes.
async fn start(
    ctx: &Ctx,
    name: &str,
    want: usize,
    spec: Value,
) -> anyhow::Result<Handle<AdvancedDaemonSetKind>> {
    start_with(ctx, AdvancedDaemonSet::new(name).manifest(), want, spec).await
}

/// Like [`start`], from a manifest.
async fn start_with(
    ctx: &Ctx,
    mut m: Value,
    want: usize,
    spec: Value,
) -> anyhow::Result<Handle<AdvancedDaemonSetKind>> {
    merge(&mut m["spec"], spec);
    create(ctx, m.clone()).await?;
    let name = m["metadata"]["name"].as_str().unwrap_or_default();
    let ds = Handle::<AdvancedDaemonSetKind>::of(ctx, name);
    ds.wait_rolled_out(want as i64, ctx.timeouts.converge, &[])
        .await?;
    Ok(ds)
}

/// Rolling update settings.
fn rolling(settings: Value) -> Value {
    json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": settings}})
}

/// The number of `pods` at the DaemonSet's current hash (`status.daemonSetHash`).
fn at_hash(o: &DynamicObject, pods: &[Pod]) -> usize {
    let hash = text(o, "daemonSetHash");
    pods.iter()
        .filter(|p| !hash.is_empty() && label(p, "controller-revision-hash") == Some(hash.as_str()))
        .count()
}

/// Waits until `want` of `total` ready pods are at the current hash and
/// `status.updatedNumberScheduled` says so.
async fn wait_updated(
    ctx: &Ctx,
    ds: &Handle<AdvancedDaemonSetKind>,
    total: usize,
    want: usize,
) -> anyhow::Result<DynamicObject> {
    let what = format!("{want} of {total} pods of {} at daemonSetHash", ds.name());
    wait_pods(ctx, &ds.api(), ds.name(), &ds.selector(), &what, move |o, pods| {
        let updated = at_hash(o, pods);
        let ready_n = pods.iter().filter(|p| crate::suites::common::ready(p)).count();
        Check::when(
            observed(o)
                && pods.len() == total
                && ready_n == total
                && updated == want
                && count(o, "updatedNumberScheduled") == want as i64,
            || {
                format!(
                    "{} pods ({ready_n} ready), {updated} at hash {:?}, status.updatedNumberScheduled {}",
                    pods.len(),
                    text(o, "daemonSetHash"),
                    count(o, "updatedNumberScheduled")
                )
            },
        )
    })
    .await
}

async fn partition(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let ds = ctx
        .step(
            &format!(
                "a DaemonSet on {n} nodes gets a new image under partition {}",
                n - 1
            ),
            async {
                let ds = start(&ctx, "part", n, rolling(json!({"partition": n - 1}))).await?;
                ds.set_image(IMAGE_V2).await?;
                Ok(ds)
            },
        )
        .await?;
    for (partition, want) in [(json!(n - 1), 1), (json!("50%"), n / 2), (json!(0), n)] {
        ctx.step(&format!("partition {partition} updates {want} of {n} pods"), async {
            ds.patch(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": partition}}}}))
                .await
                .map_err(refusal)?;
            wait_updated(&ctx, &ds, n, want)
                .await
                .with_context(|| format!("partition {partition}"))?;
            let v2 = ds
                .pods()
                .await?
                .iter()
                .filter(|p| {
                    p.spec
                        .as_ref()
                        .is_some_and(|s| s.containers[0].image.as_deref() == Some(IMAGE_V2))
                })
                .count();
            ensure!(
                v2 == want,
                "partition {partition}: {v2} pods run {IMAGE_V2}, want {want}"
            );
            Ok(())
        })
        .await?;
    }
    Ok(())
}

async fn paused(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let (ds, before) = ctx
        .step("a paused DaemonSet on every node gets a new image", async {
            let ds = start(&ctx, "paused", n, rolling(json!({"paused": true}))).await?;
            let before = pod_uids(&ctx, &ds.selector()).await?;
            ds.set_image(IMAGE_V2).await?;
            Ok((ds, before))
        })
        .await?;
    ctx.step("no pod moves to the new revision", async {
        let o = wait_pods(
            &ctx,
            &ds.api(),
            "paused",
            &ds.selector(),
            "the paused update observed",
            |o, _| Check::when(observed(o), || format!("status {}", status(o))),
        )
        .await?;
        let now = ds.pods().await?;
        ensure!(
            at_hash(&o, &now) == 0 && count(&o, "updatedNumberScheduled") == 0,
            "a paused rollout updated pods: status {}",
            status(&o)
        );
        ensure!(
            pod_uids(&ctx, &ds.selector()).await? == before,
            "a paused rollout replaced pods"
        );
        Ok(())
    })
    .await?;
    ctx.step("resumed, every pod is updated", async {
        ds.patch(json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}}))
            .await
            .map_err(refusal)?;
        wait_updated(&ctx, &ds, n, n).await?;
        Ok(())
    })
    .await
}

async fn on_delete(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let (ds, before) = ctx
        .step(
            "an OnDelete DaemonSet on every node gets a new image",
            async {
                let spec = json!({"updateStrategy": {"type": "OnDelete"}});
                let ds = start(&ctx, "ondelete", n, spec).await?;
                let before = pod_uids(&ctx, &ds.selector()).await?;
                ds.set_image(IMAGE_V2).await?;
                Ok((ds, before))
            },
        )
        .await?;
    ctx.step("the template change replaces no pod", async {
        let o = wait_pods(
            &ctx,
            &ds.api(),
            "ondelete",
            &ds.selector(),
            "the update observed",
            |o, _| Check::when(observed(o), || format!("status {}", status(o))),
        )
        .await?;
        ensure!(
            count(&o, "updatedNumberScheduled") == 0
                && pod_uids(&ctx, &ds.selector()).await? == before,
            "OnDelete replaced pods on a template change: status {}",
            status(&o)
        );
        Ok(())
    })
    .await?;
    ctx.step("a deleted pod's replacement runs the new revision", async {
        let victim = before.keys().next().context("no pod")?;
        ctx.delete("v1", "Pod", victim).await.map_err(refusal)?;
        wait_updated(&ctx, &ds, n, 1).await?;
        Ok(())
    })
    .await?;
    ctx.step("the other pods are untouched", async {
        let kept = pod_uids(&ctx, &ds.selector())
            .await?
            .into_iter()
            .filter(|(name, uid)| before.get(name) == Some(uid))
            .count();
        ensure!(
            kept == n - 1,
            "OnDelete: {kept} of {} untouched pods kept, want {}",
            n - 1,
            n - 1
        );
        Ok(())
    })
    .await
}

async fn in_place(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let (ds, before) = ctx
        .step(
            "an InPlaceIfPossible DaemonSet on every node gets a new image",
            async {
                let spec = rolling(json!({"rollingUpdateType": "InPlaceIfPossible"}));
                let ds = start(&ctx, "inplace", n, spec).await?;
                let before = pod_uids(&ctx, &ds.selector()).await?;
                ds.set_image(IMAGE_V2).await?;
                Ok((ds, before))
            },
        )
        .await?;
    ctx.step("every pod is updated in place", async {
        wait_updated(&ctx, &ds, n, n).await?;
        ensure!(
            pod_uids(&ctx, &ds.selector()).await? == before,
            "InPlaceIfPossible recreated pods for an image change"
        );
        for p in ds.pods().await? {
            let s = container_status(&p, "main");
            ensure!(
                s.as_ref()
                    .is_some_and(|s| same_image(&s.image, IMAGE_V2) && s.restart_count >= 1),
                "pod {} was not restarted in place with {IMAGE_V2}: {s:?}",
                name_of(&p)
            );
        }
        Ok(())
    })
    .await
}

/// The annotation that makes the kwok kubelet of a pod notice a readiness gate turned False
/// only at its next status sync, this many seconds later (a loaded node's kubelet).
const READINESS_SYNC: &str = "harness.kwok/readiness-sync-seconds";

async fn in_place_slow_readiness(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let (ds, hash_before) = ctx
        .step(
            "a DaemonSet whose kubelet notices unreadiness late gets a new image",
            async {
                let mut m = AdvancedDaemonSet::new("slowsync").manifest();
                m["spec"]["template"]["metadata"]["annotations"] = json!({READINESS_SYNC: "3"});
                let spec =
                    rolling(json!({"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}));
                let ds = start_with(&ctx, m, n, spec).await?;
                let hash_before = text(&ds.get().await?, "daemonSetHash");
                ds.set_image(IMAGE_V2).await?;
                Ok((ds, hash_before))
            },
        )
        .await?;
    let most = ctx
        .step("every pod is updated in place, watched throughout", async {
            // Watch the pods: how many have an in-place update under way (InPlaceUpdateReady not
            // True) at once, until every pod is at the new revision with its update done.
            let pods: Api<Pod> = ctx.api();
            let cfg = watcher::Config::default().labels(&ds.selector());
            let mut stream = watcher(pods, cfg).default_backoff().boxed();
            let mut state: BTreeMap<String, (bool, Option<String>)> = BTreeMap::new();
            let mut most = (0, String::new());
            let deadline = tokio::time::Instant::now() + ctx.timeouts.converge;
            loop {
                let updating: Vec<&String> = state
                    .iter()
                    .filter(|(_, (u, _))| *u)
                    .map(|(k, _)| k)
                    .collect();
                if updating.len() > most.0 {
                    most = (
                        updating.len(),
                        updating
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    );
                }
                let moved = state
                    .values()
                    .filter(|(u, h)| !u && h.as_deref().is_some_and(|h| h != hash_before))
                    .count();
                if state.len() == n && moved == n {
                    break;
                }
                let event = tokio::time::timeout_at(deadline, stream.next())
                    .await
                    .with_context(|| {
                        format!(
                            "{moved} of {n} pods updated in place within {:?}",
                            ctx.timeouts.converge
                        )
                    })?
                    .context("pod watch ended")?
                    .context("watch pods")?;
                let mut seen = |p: Pod| {
                    let name = name_of(&p);
                    if p.metadata.deletion_timestamp.is_some() {
                        state.remove(&name);
                        return;
                    }
                    let updating = p
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter()
                                .any(|c| c.type_ == "InPlaceUpdateReady" && c.status != "True")
                        });
                    let hash = label(&p, "controller-revision-hash").map(str::to_string);
                    state.insert(name, (updating, hash));
                };
                match event {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => seen(p),
                    watcher::Event::Delete(p) => {
                        state.remove(&name_of(&p));
                    }
                    watcher::Event::Init | watcher::Event::InitDone => {}
                }
            }
            Ok(most)
        })
        .await?;
    ctx.step(
        "at most one pod was under an in-place update at once",
        async {
            ensure!(
                most.0 <= 1,
                "{} pods were being updated in place at once ({}), maxUnavailable allows 1",
                most.0,
                most.1
            );
            wait_updated(&ctx, &ds, n, n).await?;
            Ok(())
        },
    )
    .await
}

async fn rolling_selector(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let (zone, nodes) = ctx.facts.zones.iter().next().context("no zone")?;
    let (zone, nodes) = (zone.clone(), nodes.clone());
    let ds = ctx
        .step(
            "a rollout selecting one zone's nodes finishes there",
            async {
                let spec = rolling(json!({
        "selector": {"matchLabels": {ZONE_LABEL: zone}}}));
                let ds = start(&ctx, "zonal", n, spec).await?;
                ds.set_image(IMAGE_V2).await?;
                wait_updated(&ctx, &ds, n, nodes.len()).await?;
                Ok(ds)
            },
        )
        .await?;
    ctx.step("only the pods on that zone's nodes run the new image", async {
        for p in ds.pods().await? {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let v2 = p
                .spec
                .as_ref()
                .is_some_and(|s| s.containers[0].image.as_deref() == Some(IMAGE_V2));
            ensure!(
                v2 == nodes.contains(&node),
                "pod {} on node {node}: updated {v2}, but the rollout selector matches only {zone} nodes {nodes:?}",
                name_of(&p)
            );
        }
        Ok(())
    })
    .await
}

async fn node_selector(ctx: Ctx) -> anyhow::Result<()> {
    let (zone, nodes) = ctx.facts.zones.iter().last().context("no zone")?;
    let (zone, nodes) = (zone.clone(), nodes.clone());
    let (ds, o) = ctx
        .step("a DaemonSet selecting one zone's nodes rolls out", async {
            let m = AdvancedDaemonSet::new("zoned")
                .node_selector(ZONE_LABEL, &zone)
                .manifest();
            let ds = start_with(&ctx, m, nodes.len(), json!({})).await?;
            let o = ds.get().await?;
            Ok((ds, o))
        })
        .await?;
    ctx.step(
        "the status counts one available pod per node of the zone",
        async {
            let want = nodes.len() as i64;
            for field in [
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberAvailable",
            ] {
                ensure!(
                    count(&o, field) == want,
                    "status.{field}: want {want}, got {}",
                    count(&o, field)
                );
            }
            ensure!(
                count(&o, "numberMisscheduled") == 0 && count(&o, "numberUnavailable") == 0,
                "status: want no misscheduled or unavailable pod, got {}",
                status(&o)
            );
            Ok(())
        },
    )
    .await?;
    ctx.step("one pod runs on each node of the zone", async {
        let mut on: Vec<String> = ds
            .pods()
            .await?
            .iter()
            .map(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default()
            })
            .collect();
        on.sort();
        let mut want_nodes = nodes.clone();
        want_nodes.sort();
        ensure!(
            on == want_nodes,
            "pods run on {on:?}, want one on each {zone} node {want_nodes:?}"
        );
        Ok(())
    })
    .await
}

/// Waits until the DaemonSet reports `want` available pods for its latest generation.
async fn wait_available(
    ctx: &Ctx,
    ds: &Handle<AdvancedDaemonSetKind>,
    want: usize,
) -> anyhow::Result<()> {
    let what = format!("{want} available pods");
    wait_pods(
        ctx,
        &ds.api(),
        ds.name(),
        &ds.selector(),
        &what,
        move |o, _| {
            Check::when(
                observed(o) && count(o, "numberAvailable") == want as i64,
                || format!("status.numberAvailable {}", count(o, "numberAvailable")),
            )
        },
    )
    .await?;
    Ok(())
}

/// What a rollout showed: the most pods on one node, the fewest available pods the status
/// reported, and the fewest nodes with an available pod (Ready for `minReadySeconds`) seen
/// among the pods themselves.
#[derive(Debug, Clone, Copy)]
struct Rollout {
    most_on_a_node: usize,
    fewest_reported: i64,
    fewest_seen: i64,
}

/// Seconds the rolled DaemonSets ask their pods to be Ready before they count as available.
const MIN_READY: i64 = 2;

/// Whether a live pod is available: Running and Ready for at least [`MIN_READY`] seconds.
fn available(p: &Pod, now: i64) -> bool {
    let ready_since = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second());
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && ready_since.is_some_and(|t| now - t >= MIN_READY)
}

/// Rolls a DaemonSet with `settings` to a new image and says what the rollout showed.
async fn observe_rollout(ctx: &Ctx, name: &str, settings: Value) -> anyhow::Result<Rollout> {
    let n = node_count(ctx);
    let mut spec = rolling(settings);
    spec["minReadySeconds"] = json!(MIN_READY);
    let ds = start(ctx, name, n, spec).await?;
    wait_available(ctx, &ds, n).await?;
    ds.set_image(IMAGE_V2).await?;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Rollout {
        most_on_a_node: 0,
        fewest_reported: i64::MAX,
        fewest_seen: i64::MAX,
    }));
    let record = seen.clone();
    let what = "the rollout to finish with every pod available";
    wait_pods(
        ctx,
        &ds.api(),
        name,
        &ds.selector(),
        what,
        move |o, pods| {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let mut per_node = std::collections::BTreeMap::<String, usize>::new();
            let mut available_on = std::collections::BTreeSet::<String>::new();
            for p in pods {
                let node = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default();
                if available(p, now) {
                    available_on.insert(node.clone());
                }
                *per_node.entry(node).or_default() += 1;
            }
            let mut s = record.lock().expect("not poisoned");
            s.most_on_a_node = s
                .most_on_a_node
                .max(per_node.values().copied().max().unwrap_or(0));
            s.fewest_seen = s.fewest_seen.min(available_on.len() as i64);
            if observed(o) {
                s.fewest_reported = s.fewest_reported.min(count(o, "numberAvailable"));
            }
            let updated = at_hash(o, pods);
            Check::when(
                observed(o)
                    && pods.len() == n
                    && updated == n
                    && count(o, "numberAvailable") == n as i64,
                || {
                    format!(
                        "{} pods, {updated} updated, status {}",
                        pods.len(),
                        status(o)
                    )
                },
            )
        },
    )
    .await?;
    let s = *seen.lock().expect("not poisoned");
    Ok(s)
}

async fn surge_and_unavailable(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx) as i64;
    let surge = ctx
        .step("roll out with maxSurge 1 and maxUnavailable 0", async {
            let surge =
                observe_rollout(&ctx, "surge", json!({"maxSurge": 1, "maxUnavailable": 0})).await?;
            Ok(surge)
        })
        .await?;
    let unavail = ctx
        .step("roll out with maxSurge 0 and maxUnavailable 2", async {
            let unavail =
                observe_rollout(&ctx, "unavail", json!({"maxSurge": 0, "maxUnavailable": 2}))
                    .await?;
            Ok(unavail)
        })
        .await?;
    ctx.step(
        "each rollout kept within its surge and unavailability bounds",
        async {
            // What the pods themselves show first; the status's own count last (releases count a
            // deleted, terminal old pod while its surged successor is available).
            ensure!(
                surge.most_on_a_node == 2,
                "maxSurge 1: at most {} pods were seen on one node, want 2 (new before old)",
                surge.most_on_a_node
            );
            ensure!(
                surge.fewest_seen >= n,
                "maxUnavailable 0: the pods had an available one on only {} of {n} nodes",
                surge.fewest_seen
            );
            ensure!(
                unavail.most_on_a_node == 1,
                "maxSurge 0: {} pods were seen on one node",
                unavail.most_on_a_node
            );
            ensure!(
                unavail.fewest_seen >= n - 2,
                "maxUnavailable 2: the pods had an available one on only {} of {n} nodes",
                unavail.fewest_seen
            );
            ensure!(
                unavail.fewest_reported >= n - 2,
                "maxUnavailable 2: numberAvailable fell to {} of {n}",
                unavail.fewest_reported
            );
            ensure!(
                surge.fewest_reported >= n,
                "maxUnavailable 0: numberAvailable fell to {} of {n}",
                surge.fewest_reported
            );
            Ok(())
        },
    )
    .await
}

const STATE: &str = "lifecycle.apps.kruise.io/state";

async fn pre_delete_hook(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let (ds, before) = ctx
        .step(
            "a DaemonSet with a preDelete labels hook rolls out",
            async {
                let m = AdvancedDaemonSet::new("hook")
                    .label("hold", "true")
                    .manifest();
                let spec = json!({"lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {}}});
                let ds = start_with(&ctx, m, n, spec).await?;
                let before = pod_uids(&ctx, &ds.selector()).await?;
                Ok((ds, before))
            },
        )
        .await?;
    ctx.step(
        "a rollout that drops the hook label holds an old pod PreparingDelete",
        async {
            // The new template drops the hook label, so only the old pods are held.
            ds.json_patch(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2},
        {"op": "remove", "path": "/spec/template/metadata/labels/hold"}
    ]))
    .await?;
            wait_pods(
                &ctx,
                &ds.api(),
                "hook",
                &ds.selector(),
                "an old pod held in PreparingDelete",
                |_, pods| {
                    let held = pods
                        .iter()
                        .filter(|p| label(p, STATE) == Some("PreparingDelete"))
                        .count();
                    Check::when(held >= 1, || format!("{held} pods in PreparingDelete"))
                },
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("no held pod is deleted", async {
        ensure!(
            pod_uids(&ctx, &ds.selector()).await? == before,
            "pods were deleted while their preDelete hook label was on"
        );
        Ok(())
    })
    .await?;
    ctx.step("released, every pod is updated", async {
        for name in before.keys() {
            ctx.patch(
                "v1",
                "Pod",
                name,
                json!({"metadata": {"labels": {"hold": null}}}),
            )
            .await
            .map_err(refusal)
            .with_context(|| format!("release pod {name}"))?;
        }
        wait_updated(&ctx, &ds, n, n).await?;
        Ok(())
    })
    .await
}

/// The finalizer a hook owner puts on the pods it must see before they go.
const DRAIN: &str = "example.com/drain";

async fn pre_delete_finalizer_hook(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let ds = ctx.step("a DaemonSet with a preDelete finalizer hook rolls out", async {
        let spec = json!({"lifecycle": {"preDelete": {"finalizersHandler": [DRAIN], "markPodNotReady": true}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {}}});
        let ds = start(&ctx, "drain", n, spec).await?;
        Ok(ds)
    })
    .await?;
    let selector = ds.selector();
    let result = finalizer_hook_holds(&ctx, &ds).await;
    // Whatever happened, the finalizers go, so that nothing is left waiting on them.
    let released = release(&ctx, &selector).await;
    result?;
    released?;
    ctx.step("with the finalizers gone, every pod is updated", async {
        wait_updated(&ctx, &ds, n, n).await?;
        Ok(())
    })
    .await
}

/// Puts the hook's finalizer on every pod, starts a rollout and checks that the pod it
/// would delete is held in PreparingDelete, not ready, and not deleted.
async fn finalizer_hook_holds(ctx: &Ctx, ds: &Handle<AdvancedDaemonSetKind>) -> anyhow::Result<()> {
    let before = ctx
        .step(
            "every pod carries the hook finalizer and the image changes",
            async {
                let before = pod_uids(ctx, &ds.selector()).await?;
                for name in before.keys() {
                    ctx.patch(
                        "v1",
                        "Pod",
                        name,
                        json!({"metadata": {"finalizers": [DRAIN]}}),
                    )
                    .await
                    .map_err(refusal)
                    .with_context(|| format!("add the hook finalizer to pod {name}"))?;
                }
                ds.set_image(IMAGE_V2).await?;
                Ok(before)
            },
        )
        .await?;
    ctx.step(
        "an old pod is held PreparingDelete with KruisePodReady False",
        async {
            let held = |p: &Pod| label(p, STATE) == Some("PreparingDelete");
            wait_pods(
        ctx,
        &ds.api(),
        ds.name(),
        &ds.selector(),
        "an old pod held in PreparingDelete with KruisePodReady False",
        move |_, pods| {
            let marked = pods
                .iter()
                .filter(|p| held(p) && kruise_pod_ready(p) == Some(false))
                .count();
            let held_n = pods.iter().filter(|p| held(p)).count();
            Check::when(marked >= 1, || {
                format!(
                    "{held_n} pods in PreparingDelete, {marked} of them with KruisePodReady False"
                )
            })
        },
    )
    .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("no held pod is deleted", async {
        ensure!(
            pod_uids(ctx, &ds.selector()).await? == before,
            "pods were deleted while their preDelete hook finalizer was on"
        );
        Ok(())
    })
    .await
}

/// Removes the hook's finalizer from every pod matching `selector`, terminating ones included.
async fn release(ctx: &Ctx, selector: &str) -> anyhow::Result<()> {
    let list = ctx
        .api::<Pod>()
        .list(&kube::api::ListParams::default().labels(selector))
        .await?;
    for p in list.items {
        let name = name_of(&p);
        if p.metadata.finalizers.iter().flatten().any(|f| f == DRAIN) {
            ctx.patch(
                "v1",
                "Pod",
                &name,
                json!({"metadata": {"finalizers": null}}),
            )
            .await
            .map_err(refusal)
            .with_context(|| format!("remove the hook finalizer from pod {name}"))?;
        }
    }
    Ok(())
}

/// The status of the pod's KruisePodReady condition, if it has one.
fn kruise_pod_ready(p: &Pod) -> Option<bool> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "KruisePodReady")
        .map(|c| c.status == "True")
}

async fn in_place_update_hook_refused(ctx: Ctx) -> anyhow::Result<()> {
    let mut m = AdvancedDaemonSet::new("iphook").manifest();
    merge(
        &mut m["spec"],
        json!({"lifecycle": {"inPlaceUpdate": {
            "labelsHandler": {"hold": "true"},
            "finalizersHandler": [DRAIN],
            "markPodNotReady": true
        }}}),
    );
    ctx.step("a lifecycle.inPlaceUpdate hook is refused at admission", async {
        match ctx.create(m).await {
            Err(kube::Error::Api(e)) => ensure!(
                e.message.contains("inPlaceUpdate"),
                "the inPlaceUpdate hook was refused for another reason: {}",
                e.message
            ),
            Err(e) => return Err(refusal(e)),
            Ok(_) => anyhow::bail!(
                "an Advanced DaemonSet with a lifecycle.inPlaceUpdate hook was admitted; only preDelete is supported"
            ),
        }
        Ok(())
    })
    .await
}

async fn revision_history(ctx: Ctx) -> anyhow::Result<()> {
    let n = node_count(&ctx);
    let ds = ctx
        .step(
            "three in-place updates under revisionHistoryLimit 1",
            async {
                // Every pod at once: the pacing of a rollout is other
                // scenarios' to judge, and one pod at a time made three
                // rollouts of four pods outlast a wait on a loaded machine.
                let mut spec = rolling(json!({
                    "rollingUpdateType": "InPlaceIfPossible",
                    "maxUnavailable": "100%",
                }));
                spec["revisionHistoryLimit"] = json!(1);
                let ds = start(&ctx, "hist", n, spec).await?;
                for image in ["nginx:1.26", "nginx:1.27", "nginx:1.28"] {
                    ds.set_image(image).await?;
                    wait_updated(&ctx, &ds, n, n).await?;
                }
                Ok(ds)
            },
        )
        .await?;
    ctx.step("the live revision and one old one remain", async {
        // The live revision and one old one.
        wait_owned_revisions(&ctx, &ds.api(), "hist", 2).await
    })
    .await
}
