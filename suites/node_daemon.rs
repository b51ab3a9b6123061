//! The APIs OpenKruise's node daemon serves, on a real node (kruise-daemon runs beside its
//! kubelet and talks to its containerd): ContainerRecreateRequest recreates the named
//! containers of a running pod in place, ImagePullJob pulls an image onto the selected nodes
//! (NodeImage records it), ImageListPullJob does so for a list of images through an
//! ImagePullJob each, PodProbeMarker runs probes in containers and marks the pods (through
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
/// An image no other scenario of the cluster runs.
const PULLED: &str = "harness.local/health:v1";
/// The ImageListPullJob's images: none of them the ImagePullJob scenario's, which shares the
/// cluster (a job deleted while another job pulls the same image on the node stops that pull:
/// PullImageFailed "pulling image ... is stopped").
const LISTED: [&str; 2] = [
    crate::scenario::workload::REAL_IMAGE_V2,
    crate::cluster::local::node::SANDBOX_IMAGE,
];

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
        Scenario::new(
            "imagelistpulljob/pulls-every-listed-image-through-a-job-each",
            "an ImageListPullJob makes one ImagePullJob per listed image, owned by it; it completes when each has pulled its image onto the selected real nodes (NodeImage records both tags), and deleting it removes its jobs",
            &["imagelistpulljob", "imagepulljob", "real-node", "node-daemon"],
            |ctx| list_pull(ctx).boxed(),
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

async fn recreate(ctx: Ctx) -> anyhow::Result<()> {
    let before = ctx
        .step(
            "a bare pod with two containers runs on the real node",
            async {
                create(&ctx, two_containers("app")).await?;
                let before = wait_pod(&ctx, "app", "both containers ready", |p| {
                    let ready = ["main", "side"].iter().all(|c| container_state(p, c).2);
                    Check::when(ready, || "not ready yet".into())
                })
                .await?;
                Ok(before)
            },
        )
        .await?;
    ctx.step("a ContainerRecreateRequest for main completes", async {
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
        let request = json!({
            "apiVersion": API,
            "kind": "ContainerRecreateRequest",
            "metadata": {"name": "recreate-main"},
            "spec": {
                "podName": "app",
                "containers": [{"name": "main"}],
                "strategy": {"failurePolicy": "Fail", "terminationGracePeriodSeconds": 2},
                "activeDeadlineSeconds": 60,
            },
        });
        // The webhook reads the pod from the manager's cache, which may not have seen main's
        // container start yet ("no containerID in main containerStatus, maybe the container
        // has not been initialized"): the request is made again once it has.
        crate::scenario::wait::poll(
            "the webhook to admit the request (its cache to see main started)",
            ctx.timeouts.converge,
            std::time::Duration::from_millis(500),
            || async {
                match create(&ctx, request.clone()).await {
                    Ok(_) => Check::Met,
                    Err(e)
                        if format!("{e:#}").contains("no containerID in main containerStatus") =>
                    {
                        Check::Pending(format!("{e:#}"))
                    }
                    Err(e) => Check::Failed(format!("{e:#}")),
                }
            },
        )
        .await?;
        wait_object(
            &ctx,
            API,
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
        Ok(())
    })
    .await?;
    ctx.step("main is recreated in place and side is left alone", async {
        let (main_id, main_restarts, _) = container_state(&before, "main");
        let (side_id, side_restarts, _) = container_state(&before, "side");
        let after = wait_pod(&ctx, "app", "main restarted and ready", move |p| {
            let (_, restarts, ready) = container_state(p, "main");
            Check::when(restarts == main_restarts + 1 && ready, || {
                format!("main restartCount {restarts}, ready {ready}")
            })
    })
    .await?;
    ensure!(
        after.metadata.uid == before.metadata.uid,
        "the pod was recreated, not its container"
    );
    let (main_id2, _, _) = container_state(&after, "main");
    ensure!(
        main_id2 != main_id,
        "container main kept its ID {main_id} though the request completed"
    );
    let (side_id2, side_restarts2, _) = container_state(&after, "side");
    ensure!(
        side_id2 == side_id && side_restarts2 == side_restarts,
        "container side was touched: {side_id} ({side_restarts} restarts) -> {side_id2} ({side_restarts2})"
    );
        Ok(())
    })
    .await?;
    ctx.step("the bare pod is deleted", async {
        // A bare pod has no owner to remove it.
        ctx.delete("v1", "Pod", "app").await?;
        Ok(())
    })
    .await
}

/// Waits until the real nodes' NodeImages carry the real-node label: a job picks nodes by their
/// NodeImages' labels, which the manager copies from the node some moment after it makes the
/// NodeImage, so a job made before would find no node.
async fn node_images_labelled(ctx: &Ctx) -> anyhow::Result<()> {
    for n in ctx.facts.real_nodes.clone() {
        wait_object(
            ctx,
            API,
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
    Ok(())
}

/// The spec of an image pull job (or list job) with `field` (its image or images) set: onto
/// the real nodes, one node at a time, one retry, done within two minutes.
fn pull_spec(field: &str, value: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {REAL_NODE_LABEL.0: REAL_NODE_LABEL.1}},
        "parallelism": 1,
        "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 60},
        "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 120},
    });
    spec[field] = value;
    spec
}

/// Fails unless NodeImage `node` records `image` (`repo:tag`) as pulled.
async fn node_image_records(ctx: &Ctx, node: &str, image: &str) -> anyhow::Result<()> {
    let ni = ctx.dyn_api(API, "NodeImage").await?.get(node).await?;
    let (repo, tag) = image.rsplit_once(':').expect("a tag");
    let tags = &ni.data["status"]["imageStatuses"][repo]["tags"];
    ensure!(
        tags.as_array().is_some_and(|t| t
            .iter()
            .any(|x| x["tag"] == tag && x["phase"] == "Succeeded")),
        "NodeImage {node} does not record {image} pulled: {}",
        ni.data["status"]
    );
    Ok(())
}

async fn pull(ctx: Ctx) -> anyhow::Result<()> {
    let node = ctx
        .step(
            "the real node's NodeImage is labelled like the node",
            async {
                let node = ctx
                    .facts
                    .real_nodes
                    .first()
                    .cloned()
                    .ok_or_else(|| anyhow::anyhow!("the cluster has no real node"))?;
                node_images_labelled(&ctx).await?;
                Ok(node)
            },
        )
        .await?;
    ctx.step("the ImagePullJob completes on every real node", async {
        create(
            &ctx,
            json!({
                "apiVersion": API,
                "kind": "ImagePullJob",
                "metadata": {"name": "pull"},
                "spec": pull_spec("image", json!(PULLED)),
            }),
        )
        .await?;
        let real = ctx.facts.real_nodes.len() as i64;
        wait_object(
            &ctx,
            API,
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
        Ok(())
    })
    .await?;
    ctx.step("NodeImage records the pulled tag", async {
        // NodeImage records the tag pulled on the node.
        node_image_records(&ctx, &node, PULLED).await?;
        Ok(())
    })
    .await?;
    ctx.step(
        "a pod that may not pull starts from the pulled image",
        async {
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
                    let (_, _, ready) = container_state(p, "main");
                    let waiting = container_status(p, "main")
                        .and_then(|c| c.state)
                        .and_then(|s| s.waiting)
                        .and_then(|w| w.reason);
                    match waiting.as_deref() {
                        Some("ErrImageNeverPull") => {
                            Check::Failed("the image is not on the node".into())
                        }
                        _ => Check::when(ready, || format!("waiting: {waiting:?}")),
                    }
                },
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("the bare pod is deleted", async {
        // A bare pod has no owner to remove it.
        ctx.delete("v1", "Pod", "from-cache").await?;
        Ok(())
    })
    .await
}

async fn list_pull(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step(
        "the real nodes' NodeImages are labelled like the nodes",
        async {
            node_images_labelled(&ctx).await?;
            Ok(())
        },
    )
    .await?;
    let listed = LISTED;
    let uid = ctx
        .step(
            "the ImageListPullJob completes with both images' jobs succeeded",
            async {
                let list = create(
                    &ctx,
                    json!({
                        "apiVersion": API,
                        "kind": "ImageListPullJob",
                        "metadata": {"name": "pull-list"},
                        "spec": pull_spec("images", json!(listed)),
                    }),
                )
                .await?;
                let uid = list.metadata.uid.clone().unwrap_or_default();
                wait_object(
                    &ctx,
                    API,
                    "ImageListPullJob",
                    "pull-list",
                    "the list job completed with both images' jobs succeeded",
                    |o| {
                        let s = status(o);
                        Check::when(
                            s["desired"].as_i64() == Some(2)
                                && s["completed"].as_i64() == Some(2)
                                && s["succeeded"].as_i64() == Some(2)
                                && !s["completionTime"].is_null(),
                            || format!("status {s}"),
                        )
                    },
                )
                .await?;
                Ok(uid)
            },
        )
        .await?;
    let (jobs, children) = ctx
        .step(
            "it owns one ImagePullJob per image, succeeded on every real node",
            async {
                // One ImagePullJob per image, owned by the list job, each done on every real node.
                let jobs = ctx.dyn_api(API, "ImagePullJob").await?;
                let owned = |all: Vec<DynamicObject>| -> Vec<DynamicObject> {
                    all.into_iter()
                        .filter(|j| {
                            j.metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .any(|r| r.uid == uid && r.kind == "ImageListPullJob")
                        })
                        .collect()
                };
                let children = owned(jobs.list(&Default::default()).await?.items);
                let mut images: Vec<String> = children
                    .iter()
                    .map(|j| j.data["spec"]["image"].as_str().unwrap_or_default().into())
                    .collect();
                images.sort();
                let mut want: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
                want.sort();
                ensure!(
                    images == want,
                    "the list job's ImagePullJobs pull {images:?}, want one each for {want:?}"
                );
                let real = ctx.facts.real_nodes.len() as i64;
                for j in &children {
                    ensure!(
                        status(j)["succeeded"].as_i64() == Some(real),
                        "ImagePullJob {} for {}: status {}",
                        j.metadata.name.as_deref().unwrap_or_default(),
                        j.data["spec"]["image"],
                        status(j)
                    );
                }
                Ok((jobs, children))
            },
        )
        .await?;
    ctx.step(
        "each real node's NodeImage records every listed image",
        async {
            for node in &ctx.facts.real_nodes {
                for image in listed {
                    node_image_records(&ctx, node, image).await?;
                }
            }
            Ok(())
        },
    )
    .await?;
    ctx.step("deleting it removes its jobs", async {
        // Its jobs go with it (they are owned by it).
        ctx.delete(API, "ImageListPullJob", "pull-list").await?;
        let names: Vec<String> = children
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect();
        for name in names {
            until(
                &jobs,
                &name,
                "the list job's ImagePullJob removed with it",
                ctx.timeouts.converge,
                |o| async move { Check::when(o.is_none(), || "still there".into()) }.boxed(),
            )
            .await?;
        }
        Ok(())
    })
    .await
}

async fn probe(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step(
        "a bare pod and a PodProbeMarker with a passing and a failing probe",
        async {
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
            Ok(())
        },
    )
    .await?;
    ctx.step(
        "each probe marks the pod with its condition and labels",
        async {
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
                    condition(p, t).as_deref() == Some(*s)
                        && labels.get(*l).map(String::as_str) == Some(*v)
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
            Ok(())
        },
    )
    .await?;
    ctx.step("the node's NodePodProbe lists both probes", async {
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
        Ok(())
    })
    .await?;
    ctx.step("the bare pod is deleted", async {
        ctx.delete("v1", "Pod", "probed").await?;
        Ok(())
    })
    .await
}
