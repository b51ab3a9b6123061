//! Behaviour that only real nodes show: a kubelet that really restarts containers, resizes
//! their cgroups and holds a container back until its environment can be resolved, and a
//! container runtime that really pulls images. In-place image updates restart the container;
//! a SidecarSet's hot upgrade keeps one sidecar container working throughout; container launch
//! priority starts a pod's containers in order; an in-place resize changes the limits in the
//! host's cgroups without a restart. Each scenario asks for a real node
//! ([`Scenario::on_real_nodes`]); its pods select and tolerate it.

use std::collections::BTreeMap;

use anyhow::ensure;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::{Value, json};

use super::common::*;
use crate::cluster::local::node::REAL_NODE_LABEL;
use crate::cluster::local::node::probe::{CgroupLimits, cgroup_limits};
use crate::scenario::wait::Check;
use crate::scenario::workload::{CloneSet, REAL_IMAGE_V1, REAL_IMAGE_V2, same_image};
use crate::scenario::{Ctx, Scenario, status};

/// The sandbox image, which a hot-upgrade sidecar's idle container runs.
const EMPTY_IMAGE: &str = crate::cluster::local::node::SANDBOX_IMAGE;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "cloneset/in-place-image-update-restarts-the-container-on-a-real-node",
            "an in-place image update on a real node keeps the pod and restarts only its container, which then runs the new image",
            &["real-node", "in-place"],
            |ctx| in_place_restart(ctx).boxed(),
        )
        .on_real_nodes(1),
        Scenario::new(
            "sidecarset/hot-upgrade-keeps-a-working-sidecar-on-a-real-node",
            "a hot-upgrade sidecar is injected as two containers, one working and one idle on the empty image; a new sidecar image starts in the idle one, becomes the working one, and only then is the old one emptied, so a ready sidecar runs throughout and the app container is never restarted",
            &["sidecarset", "hot-upgrade", "real-node", "in-place"],
            |ctx| hot_upgrade(ctx).boxed(),
        )
        .on_real_nodes(1),
        Scenario::new(
            "containerlaunchpriority/starts-containers-in-order-on-a-real-node",
            "a pod annotated for ordered launch gets a barrier ConfigMap: its second container starts only once the first is ready, then (from v1.6.0) the pod is marked launch-completed",
            &["containerlaunchpriority", "real-node"],
            |ctx| launch_priority(ctx).boxed(),
        )
        // The kubelet reports the held-back container (its barrier key is not there yet).
        .allowing(&["Failed"])
        .on_real_nodes(1),
        Scenario::new(
            "cloneset/in-place-resize-changes-the-host-cgroup-limits-on-a-real-node",
            "with InPlacePodVerticalScaling and InPlaceWorkloadVerticalScaling on, a CloneSet whose container resources change resizes its pod in place: same pod, same container, no restart, the new resources reported, and the new CPU and memory limits in the host's cgroups",
            &["cloneset", "in-place", "resize", "real-node"],
            |ctx| resize(ctx).boxed(),
        )
        .with_cluster_gate("InPlacePodVerticalScaling")
        .with_controller_gate("InPlaceWorkloadVerticalScaling")
        .since("v1.8.0")
        .on_real_nodes(1),
    ]
}

const NAME: &str = "real";

/// What the kubelet reports of container `main`: image, image ID, container ID, restarts.
fn main_container(p: &k8s_openapi::api::core::v1::Pod) -> (String, String, String, i32) {
    container_status(p, "main")
        .map(|c| {
            (
                c.image,
                c.image_id,
                c.container_id.unwrap_or_default(),
                c.restart_count,
            )
        })
        .unwrap_or_default()
}

async fn in_place_restart(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, before, image_id, container, restarts) = ctx.step("a CloneSet pod on a real node runs the image pulled from the registry", async {
        let cs = CloneSet::new(NAME)
            .on_real_nodes()
            .in_place_if_possible()
            .create(&ctx)
            .await?;
        cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        let before = pods(&ctx, &cs.selector()).await?;
        ensure!(before.len() == 1, "{} pods, want 1", before.len());
        let node = before[0]
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        ensure!(
            ctx.facts.real_nodes.contains(&node),
            "the pod runs on {node}, not on a real node {:?}",
            ctx.facts.real_nodes
        );
        let (image, image_id, container, restarts) = main_container(&before[0]);
        ensure!(
            image == REAL_IMAGE_V1 && image_id.starts_with("harness.local/busybox@sha256:"),
            "the kubelet reports image {image} ({image_id}), want {REAL_IMAGE_V1} pulled from the registry"
        );
        Ok((cs, before, image_id, container, restarts))
    })
    .await?;
    ctx.step("the new image rolls out", async {
        cs.set_image(REAL_IMAGE_V2).await?;
        cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        Ok(())
    })
    .await?;
    ctx.step(
        "the same pod restarted its container once, on the new image",
        async {
            let after = pods(&ctx, &cs.selector()).await?;
            ensure!(after.len() == 1, "{} pods, want 1", after.len());
            ensure!(
                after[0].metadata.uid == before[0].metadata.uid,
                "the pod was recreated, not updated in place"
            );
            let (image2, image_id2, container2, restarts2) = main_container(&after[0]);
            ensure!(
                image2 == REAL_IMAGE_V2,
                "the kubelet reports image {image2}, want {REAL_IMAGE_V2}"
            );
            ensure!(
                image_id2 != image_id && image_id2.starts_with("harness.local/busybox@sha256:"),
                "the image ID did not change: {image_id} -> {image_id2}"
            );
            ensure!(
                container2 != container,
                "the container was not replaced: {container}"
            );
            ensure!(
                restarts2 == restarts + 1,
                "restartCount {restarts} -> {restarts2}, want one restart"
            );
            Ok(())
        },
    )
    .await
}

/// A bare pod `name` on the real node, labelled `labels`, with `containers`.
fn real_pod(name: &str, labels: Value, annotations: Value, containers: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL.0: REAL_NODE_LABEL.1},
            "tolerations": [{"key": "harness.io/real-node", "operator": "Exists"}],
            "terminationGracePeriodSeconds": 2,
            "containers": containers,
        }
    })
}

/// The container a hot-upgrade sidecar `side` works in, from the pod's annotation.
fn working(p: &Pod, side: &str) -> Option<String> {
    let a = p.metadata.annotations.as_ref()?;
    let map: BTreeMap<String, String> =
        serde_json::from_str(a.get("kruise.io/sidecarset-working-hotupgrade-container")?).ok()?;
    map.get(side).cloned()
}

/// The image of container `name` in the pod's spec.
fn spec_image(p: &Pod, name: &str) -> Option<String> {
    p.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == name)?
        .image
        .clone()
}

/// Whether container `name` runs a busybox image (not the empty one) and is ready.
fn serving(p: &Pod, name: &str) -> bool {
    container_status(p, name).is_some_and(|c| {
        c.ready
            && c.state.and_then(|s| s.running).is_some()
            && c.image.starts_with("harness.local/busybox:")
    })
}

async fn hot_upgrade(ctx: Ctx) -> anyhow::Result<()> {
    let sidecarset = ctx.unique("hot");
    let before = ctx.step("the hot-upgrade sidecar is injected as a working and an idle container", async {
        create_observed(
            &ctx,
            json!({
                "apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "SidecarSet",
                "metadata": {"name": sidecarset},
                "spec": {
                    "selector": {"matchLabels": {"harness-hot": ctx.namespace}},
                    "containers": [{
                        "name": "side",
                        "image": REAL_IMAGE_V1,
                        "upgradeStrategy": {
                            "upgradeType": "HotUpgrade",
                            "hotUpgradeEmptyImage": EMPTY_IMAGE,
                        },
                    }],
                }
            }),
        )
        .await?;
        create(
            &ctx,
            real_pod(
                "app",
                json!({"harness-hot": ctx.namespace}),
                json!({}),
                json!([{"name": "main", "image": REAL_IMAGE_V1}]),
            ),
        )
        .await?;
        let before = wait_pod(&ctx, "app", "every container running and ready", |p| {
            let ready = ["main", "side-1", "side-2"]
                .iter()
                .all(|c| container_state(p, c).2);
            Check::when(ready, || "not every container ready yet".into())
        })
        .await?;
        ensure!(
            working(&before, "side").as_deref() == Some("side-1")
                && spec_image(&before, "side-1").as_deref() == Some(REAL_IMAGE_V1)
                && spec_image(&before, "side-2").as_deref() == Some(EMPTY_IMAGE),
            "injected: working {:?}, side-1 {:?}, side-2 {:?}; want side-1 on {REAL_IMAGE_V1} working and side-2 on {EMPTY_IMAGE}",
            working(&before, "side"),
            spec_image(&before, "side-1"),
            spec_image(&before, "side-2")
        );
        Ok(before)
    })
    .await?;
    let (main_id, main_restarts, _) = container_state(&before, "main");
    let (old_id, _, _) = container_state(&before, "side-1");
    let after = ctx
        .step(
            "a new sidecar image moves the work to side-2, a sidecar serving throughout",
            async {
                ctx.json_patch(
            "apps.kruise.io/v1alpha1",
            "SidecarSet",
            &sidecarset,
            json!([{"op": "replace", "path": "/spec/containers/0/image", "value": REAL_IMAGE_V2}]),
        )
        .await?;
                // Every state of the pod the watch shows, until the upgrade is
                // done, has a ready sidecar container running a busybox image.
                let after = wait_pod(
                    &ctx,
                    "app",
                    "side-2 working on the new image, side-1 emptied, a sidecar serving throughout",
                    |p| {
                        if !serving(p, "side-1") && !serving(p, "side-2") {
                            return Check::Failed(format!(
                                "no sidecar container was serving: side-1 {:?}, side-2 {:?}",
                                container_status(p, "side-1").map(|c| (c.image, c.ready)),
                                container_status(p, "side-2").map(|c| (c.image, c.ready)),
                            ));
                        }
                        let done = working(p, "side").as_deref() == Some("side-2")
                            && spec_image(p, "side-2").as_deref() == Some(REAL_IMAGE_V2)
                            && spec_image(p, "side-1").as_deref() == Some(EMPTY_IMAGE)
                            && container_status(p, "side-2")
                                .is_some_and(|c| same_image(&c.image, REAL_IMAGE_V2))
                            && container_status(p, "side-1")
                                .is_some_and(|c| same_image(&c.image, EMPTY_IMAGE) && c.ready)
                            && serving(p, "side-2");
                        Check::when(done, || {
                            format!(
                                "working {:?}, side-1 {:?}, side-2 {:?}",
                                working(p, "side"),
                                container_status(p, "side-1").map(|c| (c.image, c.ready)),
                                container_status(p, "side-2").map(|c| (c.image, c.ready)),
                            )
                        })
                    },
                )
                .await?;
                Ok(after)
            },
        )
        .await?;
    ctx.step(
        "the pod and its app container are kept and side-1 is emptied",
        async {
            ensure!(
                after.metadata.uid == before.metadata.uid,
                "the pod was recreated"
            );
            let (main_id2, main_restarts2, _) = container_state(&after, "main");
            ensure!(
                main_id2 == main_id && main_restarts2 == main_restarts,
                "the app container was restarted: {main_id} -> {main_id2}"
            );
            let (old_id2, _, _) = container_state(&after, "side-1");
            ensure!(
                old_id2 != old_id,
                "side-1 kept its container {old_id} though it now runs the empty image"
            );
            Ok(())
        },
    )
    .await?;
    ctx.step("the SidecarSet counts its pod updated and ready", async {
        // The SidecarSet counts the pod updated and ready.
        wait_object(
            &ctx,
            "apps.kruise.io/v1alpha1",
            "SidecarSet",
            &sidecarset,
            "the SidecarSet counting its pod updated and ready",
            |o| {
                let s = status(o);
                Check::when(
                    s["matchedPods"] == 1 && s["updatedPods"] == 1 && s["updatedReadyPods"] == 1,
                    || format!("status {s}"),
                )
            },
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step("the bare pod is deleted", async {
        ctx.delete("v1", "Pod", "app").await?;
        Ok(())
    })
    .await
}

/// The running container `name`'s start time, in seconds since the epoch.
fn started(p: &Pod, name: &str) -> Option<i64> {
    container_status(p, name)?
        .state?
        .running?
        .started_at
        .map(|t| t.0.as_second())
}

async fn launch_priority(ctx: Ctx) -> anyhow::Result<()> {
    // The first container turns ready 4 s after it starts (no probe runs before).
    const READY_AFTER: i64 = 4;
    ctx.step("an ordered pod's containers are tied to keys of its barrier", async {
        create(
            &ctx,
            real_pod(
                "ordered",
                json!({}),
                json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
                json!([
                    {
                        "name": "first",
                        "image": REAL_IMAGE_V1,
                        "readinessProbe": {
                            "exec": {"command": ["cat", "/etc/harness-image"]},
                            "initialDelaySeconds": READY_AFTER,
                            "periodSeconds": 1,
                        },
                    },
                    {"name": "second", "image": REAL_IMAGE_V1},
                ]),
            ),
        )
        .await?;
        // The webhook ties each container to a key of the pod's barrier, by priority.
        let pod = ctx.api::<Pod>().get("ordered").await?;
        for (c, key) in [("first", "p_0"), ("second", "p_-1")] {
            let env = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|x| x.name == c))
                .and_then(|x| x.env.clone())
                .unwrap_or_default();
            let barrier = env
                .iter()
                .find(|e| e.name == "KRUISE_CONTAINER_BARRIER")
                .and_then(|e| e.value_from.as_ref()?.config_map_key_ref.clone());
            ensure!(
                barrier
                    .as_ref()
                    .is_some_and(|r| r.name == "ordered-barrier" && r.key == key),
                "container {c}: barrier {barrier:?}, want key {key} of ConfigMap ordered-barrier"
            );
        }
        Ok(())
    })
    .await?;
    let done = ctx
        .step(
            "the second container starts only once the first is ready",
            async {
                // Releases from v1.6.0 also mark the pod once its last priority is let through
                // (openkruise/kruise#1490).
                let marks = ctx.facts.controller_since("v1.6.0");
                let done = wait_pod(
            &ctx,
            "ordered",
            "both containers ready (and the launch marked complete)",
            move |p| {
                let complete = !marks
                    || p.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("apps.kruise.io/container-launch-priority-completed"))
                        .is_some_and(|v| v == "true");
                // The second may not run before the first is ready.
                if started(p, "second").is_some() && !container_state(p, "first").2 {
                    return Check::Failed("second runs while first is not ready".into());
                }
                let ready = container_state(p, "first").2 && container_state(p, "second").2;
                Check::when(ready && complete, || {
                    format!(
                        "first ready {}, second started {:?}, completed annotation {complete}",
                        container_state(p, "first").2,
                        started(p, "second")
                    )
                })
            },
        )
        .await?;
                Ok(done)
            },
        )
        .await?;
    ctx.step("their start times are the readiness delay apart", async {
        let (first, second) = (started(&done, "first"), started(&done, "second"));
        let (Some(first), Some(second)) = (first, second) else {
            anyhow::bail!("start times first {first:?}, second {second:?}");
        };
        // Start times have second precision.
        ensure!(
            second - first >= READY_AFTER - 1,
            "second started {} s after first, before first could be ready ({READY_AFTER} s)",
            second - first
        );
        Ok(())
    })
    .await?;
    ctx.step(
        "the barrier holds both keys and is owned by the pod",
        async {
            let barrier = ctx.api::<ConfigMap>().get("ordered-barrier").await?;
            let keys: Vec<String> = barrier.data.unwrap_or_default().into_keys().collect();
            ensure!(
                keys == ["p_-1", "p_0"],
                "barrier keys {keys:?}, want p_0 and p_-1"
            );
            ensure!(
                barrier
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.kind == "Pod" && Some(&r.uid) == done.metadata.uid.as_ref()),
                "the barrier is not owned by its pod"
            );
            Ok(())
        },
    )
    .await?;
    ctx.step("the bare pod is deleted", async {
        ctx.delete("v1", "Pod", "ordered").await?;
        Ok(())
    })
    .await
}

/// Guaranteed resources: requests equal limits.
fn guaranteed(cpu: &str, memory: &str) -> Value {
    json!({
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"cpu": cpu, "memory": memory},
    })
}

/// The host cgroup limits of the pod and of its container `main`.
fn host_limits(p: &Pod) -> anyhow::Result<(CgroupLimits, CgroupLimits)> {
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let (id, _, _) = container_state(p, "main");
    let pod = cgroup_limits(&uid, None).map_err(anyhow::Error::msg)?;
    let container = cgroup_limits(&uid, Some(&id)).map_err(anyhow::Error::msg)?;
    Ok((pod, container))
}

async fn resize(ctx: Ctx) -> anyhow::Result<()> {
    const MIB: u64 = 1 << 20;
    let (cs, before) = ctx.step("a guaranteed CloneSet pod runs with its limits in the host cgroups", async {
        let cs = CloneSet::new("resize")
            .on_real_nodes()
            .in_place_if_possible()
            .resources(guaranteed("200m", "64Mi"))
            .create(&ctx)
            .await?;
        cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        let before = pods(&ctx, &cs.selector()).await?;
        ensure!(before.len() == 1, "{} pods, want 1", before.len());
        let (pod, main) = host_limits(&before[0])?;
        for (what, l) in [("pod", pod), ("container", main)] {
            ensure!(
                l.memory == Some(64 * MIB) && l.cpu_millis() == Some(200),
                "the {what}'s host cgroup limits {l:?} before the resize, want 64 MiB and 200m"
            );
        }
        Ok((cs, before))
    })
    .await?;
    ctx.step("the new container resources roll out", async {
        cs.json_patch(json!([{
            "op": "replace",
            "path": "/spec/template/spec/containers/0/resources",
            "value": guaranteed("300m", "96Mi"),
        }]))
        .await?;
        cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
        Ok(())
    })
    .await?;
    let after = ctx.step("the pod is resized in place: new resources reported, no restart", async {
        // The kubelet reports the resources it applied.
        let name = before[0].metadata.name.clone().unwrap_or_default();
        let after = wait_pod(&ctx, &name, "the new resources reported", |p| {
            let r = container_status(p, "main").and_then(|c| c.resources);
            let limits = r
                .as_ref()
                .and_then(|r| r.limits.clone())
                .unwrap_or_default();
            let applied = limits.get("cpu").map(|q| q.0.as_str()) == Some("300m")
                && limits.get("memory").map(|q| q.0.as_str()) == Some("96Mi");
            Check::when(applied, || format!("status resources {r:?}"))
        })
        .await?;
        ensure!(
            after.metadata.uid == before[0].metadata.uid,
            "the pod was recreated, not resized in place"
        );
        let (id, restarts, _) = container_state(&before[0], "main");
        let (id2, restarts2, _) = container_state(&after, "main");
        ensure!(
            id2 == id && restarts2 == restarts,
            "the container was restarted ({id} -> {id2}, restartCount {restarts} -> {restarts2}); the resize policy asks for none"
        );
        Ok(after)
    })
    .await?;
    ctx.step("the host cgroups hold the new limits", async {
        let (pod, main) = host_limits(&after)?;
        for (what, l) in [("pod", pod), ("container", main)] {
            ensure!(
                l.memory == Some(96 * MIB) && l.cpu_millis() == Some(300),
                "the {what}'s host cgroup limits {l:?} after the resize, want 96 MiB and 300m"
            );
        }
        Ok(())
    })
    .await
}
