//! The APIs OpenKruise's node daemon serves, on a real node (kruise-daemon runs beside its
//! kubelet and talks to its containerd): ContainerRecreateRequest recreates the named
//! containers of a running pod in place, ImagePullJob pulls an image onto the selected nodes
//! (NodeImage records it), PodProbeMarker runs probes in containers and marks the pods (through
//! the node's NodePodProbe). Start with [`scenarios`]. Their pods are bare pods (what these APIs
//! act on); each scenario deletes its own.

use anyhow::ensure;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::common::*;
use crate::cluster::local::node::REAL_NODE_LABEL;
use crate::scenario::wait::{Check, until};
use crate::scenario::workload::REAL_IMAGE_V1;
use crate::scenario::{Ctx, Scenario, status};

const API: &str = "apps.kruise.io/v1alpha1";
/// An image no other scenario of the cluster pulls.
const PULLED: &str = "harness.local/health:v1";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "containerrecreaterequest/recreates-only-the-named-container-in-place",
            "a ContainerRecreateRequest for one container of a running pod on a real node recreates that container (new container ID, restartCount + 1) and leaves the pod and its other container alone",
            &["containerrecreaterequest", "real-node", "node-daemon"],
            |ctx| recreate(ctx).boxed(),
        )
        .on_real_nodes(1),
        // Its own cluster (the gate is on by default): where the daemon's probe worker panics
        // (a known bug of older releases), no other scenario's daemon check sees it.
        Scenario::new(
            "podprobemarker/marks-pods-by-the-result-of-their-probes",
            "a PodProbeMarker's probes run in the selected pods' containers on a real node: a passing probe sets its condition True and its Succeeded labels, a failing one False and its Failed labels, and the node's NodePodProbe lists both",
            &["podprobemarker", "real-node", "node-daemon"],
            |ctx| probe(ctx).boxed(),
        )
        .with_controller_gate("PodProbeMarkerGate")
        .on_real_nodes(1),
        Scenario::new(
            "imagepulljob/pulls-the-image-onto-the-selected-nodes",
            "an ImagePullJob pulls its image onto the real nodes its selector picks: the job counts them succeeded, NodeImage records the tag, and a pod that may not pull starts from it",
            &["imagepulljob", "real-node", "node-daemon"],
            |ctx| pull(ctx).boxed(),
        )
        .with_controller_gate("ImagePullJobGate")
        .on_real_nodes(1),
    ]
}

/// A pod on the real node: containers `main` and `side`, both the long-running busybox.
fn two_containers(name: &str) -> Value {
    let c = |n: &str| json!({"name": n, "image": REAL_IMAGE_V1});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL.0: REAL_NODE_LABEL.1},
            "tolerations": [{"key": "harness.io/real-node", "operator": "Exists"}],
            "terminationGracePeriodSeconds": 2,
            "containers": [c("main"), c("side")],
        }
    })
}

/// Waits for pod `name` until `check` holds.
async fn wait_pod<F>(ctx: &Ctx, name: &str, what: &str, check: F) -> anyhow::Result<Pod>
where
    F: Fn(&Pod) -> Check + Send + Sync + Clone + 'static,
{
    let pod = until(
        &ctx.api::<Pod>(),
        name,
        what,
        ctx.timeouts.converge,
        move |p: Option<Pod>| {
            let check = check.clone();
            async move {
                match p {
                    None => Check::Pending("no such pod".into()),
                    Some(p) => check(&p),
                }
            }
            .boxed()
        },
    )
    .await?;
    pod.ok_or_else(|| anyhow::anyhow!("pod {name} vanished"))
}

/// (container ID, restart count, ready) of container `name`.
fn state(p: &Pod, name: &str) -> (String, i32, bool) {
    container_status(p, name)
        .map(|c| (c.container_id.unwrap_or_default(), c.restart_count, c.ready))
        .unwrap_or_default()
}

async fn wait_object<F>(
    ctx: &Ctx,
    kind: &str,
    name: &str,
    what: &str,
    check: F,
) -> anyhow::Result<DynamicObject>
where
    F: Fn(&DynamicObject) -> Check + Send + Sync + Clone + 'static,
{
    let api = ctx.dyn_api(API, kind).await?;
    let kind = kind.to_string();
    let o = until(&api, name, what, ctx.timeouts.converge, move |o| {
        let (check, kind) = (check.clone(), kind.clone());
        async move {
            match o {
                None => Check::Pending(format!("the {kind} does not exist")),
                Some(o) => check(&o),
            }
        }
        .boxed()
    })
    .await?;
    o.ok_or_else(|| anyhow::anyhow!("{name} vanished"))
}

async fn recreate(ctx: Ctx) -> anyhow::Result<()> {
    create(&ctx, two_containers("app")).await?;
    let before = wait_pod(&ctx, "app", "both containers ready", |p| {
        let ready = ["main", "side"].iter().all(|c| state(p, c).2);
        Check::when(ready, || "not ready yet".into())
    })
    .await?;
    // A request made in the second its container started is taken for one already done by
    // releases before v1.9.0 (the start time is compared with the request's creationTimestamp,
    // which has second precision). The documented behaviour is what this scenario asks of every
    // release, so the request is made once the clock has left that second.
    let started = container_status(&before, "main")
        .and_then(|c| c.state)
        .and_then(|s| s.running)
        .and_then(|r| r.started_at)
        .map(|t| t.0.as_millisecond())
        .unwrap_or_default();
    let next_second = (started / 1000 + 1) * 1000;
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    if next_second > now {
        tokio::time::sleep(std::time::Duration::from_millis((next_second - now) as u64)).await;
    }
    create(
        &ctx,
        json!({
            "apiVersion": API,
            "kind": "ContainerRecreateRequest",
            "metadata": {"name": "recreate-main"},
            "spec": {
                "podName": "app",
                "containers": [{"name": "main"}],
                "strategy": {"failurePolicy": "Fail", "terminationGracePeriodSeconds": 2},
                "activeDeadlineSeconds": 60,
            },
        }),
    )
    .await?;
    wait_object(
        &ctx,
        "ContainerRecreateRequest",
        "recreate-main",
        "the request Completed with main Succeeded",
        |o| {
            let s = status(o);
            Check::when(
                s["phase"] == "Completed"
                    && s["containerRecreateStates"][0]["phase"] == "Succeeded",
                || format!("status {s}"),
            )
        },
    )
    .await?;
    let (main_id, main_restarts, _) = state(&before, "main");
    let (side_id, side_restarts, _) = state(&before, "side");
    let after = wait_pod(&ctx, "app", "main restarted and ready", move |p| {
        let (_, restarts, ready) = state(p, "main");
        Check::when(restarts == main_restarts + 1 && ready, || {
            format!("main restartCount {restarts}, ready {ready}")
        })
    })
    .await?;
    ensure!(
        after.metadata.uid == before.metadata.uid,
        "the pod was recreated, not its container"
    );
    let (main_id2, _, _) = state(&after, "main");
    ensure!(
        main_id2 != main_id,
        "container main kept its ID {main_id} though the request completed"
    );
    let (side_id2, side_restarts2, _) = state(&after, "side");
    ensure!(
        side_id2 == side_id && side_restarts2 == side_restarts,
        "container side was touched: {side_id} ({side_restarts} restarts) -> {side_id2} ({side_restarts2})"
    );
    // A bare pod has no owner to remove it.
    ctx.delete("v1", "Pod", "app").await?;
    Ok(())
}

async fn pull(ctx: Ctx) -> anyhow::Result<()> {
    let node = ctx
        .facts
        .real_nodes
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the cluster has no real node"))?;
    // A job picks nodes by their NodeImages' labels, which the manager copies from the node
    // some moment after it makes the NodeImage: a job made before would find no node.
    for n in ctx.facts.real_nodes.clone() {
        wait_object(
            &ctx,
            "NodeImage",
            &n,
            "the real node's NodeImage labelled like the node",
            |o| {
                let labels = o.metadata.labels.clone().unwrap_or_default();
                Check::when(
                    labels.get(REAL_NODE_LABEL.0).map(String::as_str) == Some(REAL_NODE_LABEL.1),
                    || format!("labels {labels:?}"),
                )
            },
        )
        .await?;
    }
    create(
        &ctx,
        json!({
            "apiVersion": API,
            "kind": "ImagePullJob",
            "metadata": {"name": "pull"},
            "spec": {
                "image": PULLED,
                "selector": {"matchLabels": {REAL_NODE_LABEL.0: REAL_NODE_LABEL.1}},
                "parallelism": 1,
                "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 60},
                "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 120},
            },
        }),
    )
    .await?;
    let real = ctx.facts.real_nodes.len() as i64;
    wait_object(
        &ctx,
        "ImagePullJob",
        "pull",
        "the job completed with every real node succeeded",
        move |o| {
            let s = status(o);
            Check::when(
                s["desired"].as_i64() == Some(real)
                    && s["succeeded"].as_i64() == Some(real)
                    && !s["completionTime"].is_null(),
                || format!("status {s}"),
            )
        },
    )
    .await?;
    // NodeImage records the tag pulled on the node.
    let images = ctx.dyn_api(API, "NodeImage").await?;
    let ni = images.get(&node).await?;
    let (repo, tag) = PULLED.rsplit_once(':').expect("a tag");
    let tags = &ni.data["status"]["imageStatuses"][repo]["tags"];
    ensure!(
        tags.as_array().is_some_and(|t| t
            .iter()
            .any(|x| x["tag"] == tag && x["phase"] == "Succeeded")),
        "NodeImage {node} does not record {PULLED} pulled: {}",
        ni.data["status"]
    );
    // A pod that may not pull starts: the image is in the node's runtime.
    create(
        &ctx,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "from-cache"},
            "spec": {
                "nodeSelector": {REAL_NODE_LABEL.0: REAL_NODE_LABEL.1},
                "tolerations": [{"key": "harness.io/real-node", "operator": "Exists"}],
                "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "main", "image": PULLED, "imagePullPolicy": "Never"}],
            },
        }),
    )
    .await?;
    wait_pod(
        &ctx,
        "from-cache",
        "the pod running from the pulled image",
        |p| {
            let (_, _, ready) = state(p, "main");
            let waiting = container_status(p, "main")
                .and_then(|c| c.state)
                .and_then(|s| s.waiting)
                .and_then(|w| w.reason);
            match waiting.as_deref() {
                Some("ErrImageNeverPull") => Check::Failed("the image is not on the node".into()),
                _ => Check::when(ready, || format!("waiting: {waiting:?}")),
            }
        },
    )
    .await?;
    // A bare pod has no owner to remove it.
    ctx.delete("v1", "Pod", "from-cache").await?;
    Ok(())
}

async fn probe(ctx: Ctx) -> anyhow::Result<()> {
    let mut pod = two_containers("probed");
    pod["metadata"]["labels"] = json!({"app": "probed"});
    create(&ctx, pod).await?;
    // One probe that passes (the image's version file is there) and one that fails.
    let probe = |name: &str, command: &[&str]| {
        json!({
            "name": name,
            "containerName": "main",
            "probe": {
                "exec": {"command": command},
                "periodSeconds": 1,
                "timeoutSeconds": 5,
            },
            "podConditionType": format!("harness.io/{name}"),
            "markerPolicy": [
                {"state": "Succeeded", "labels": {format!("harness-{name}"): "ok"}},
                {"state": "Failed", "labels": {format!("harness-{name}"): "failed"}},
            ],
        })
    };
    create(
        &ctx,
        json!({
            "apiVersion": API,
            "kind": "PodProbeMarker",
            "metadata": {"name": "markers"},
            "spec": {
                "selector": {"matchLabels": {"app": "probed"}},
                "probes": [
                    probe("versioned", &["cat", "/etc/harness-image"]),
                    probe("broken", &["cat", "/no/such/file"]),
                ],
            },
        }),
    )
    .await?;
    let condition = |p: &Pod, t: &str| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t))
            .map(|c| c.status.clone())
    };
    wait_pod(&ctx, "probed", "both probes marked the pod", move |p| {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let want = [
            ("harness.io/versioned", "True", "harness-versioned", "ok"),
            ("harness.io/broken", "False", "harness-broken", "failed"),
        ];
        let done = want.iter().all(|(t, s, l, v)| {
            condition(p, t).as_deref() == Some(*s) && labels.get(*l).map(String::as_str) == Some(*v)
        });
        Check::when(done, || {
            format!(
                "conditions versioned={:?} broken={:?}, labels {labels:?}",
                condition(p, "harness.io/versioned"),
                condition(p, "harness.io/broken")
            )
        })
    })
    .await?;
    // The manager gave the node's daemon the probes of the pod.
    let node = ctx
        .facts
        .real_nodes
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the cluster has no real node"))?;
    let npp = ctx.dyn_api(API, "NodePodProbe").await?.get(&node).await?;
    let listed: Vec<String> = npp.data["spec"]["podProbes"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter(|p| p["name"] == "probed" && p["namespace"] == ctx.namespace.as_str())
                .flat_map(|p| p["probes"].as_array().cloned().unwrap_or_default())
                .filter_map(|p| p["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    ensure!(
        listed.len() == 2,
        "NodePodProbe {node} lists probes {listed:?} for the pod, want both"
    );
    ctx.delete("v1", "Pod", "probed").await?;
    Ok(())
}
