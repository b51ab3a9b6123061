//! OpenKruise's node daemon on a real node: installed with the manager when the cluster has
//! real nodes, it pulls images for an ImagePullJob into the node's own containerd and
//! recreates a container for a ContainerRecreateRequest — and it ends with the cluster.
//! Needs root (as CI runs).

mod common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{create, dyn_api, provider, wait_dyn, within};
use harness::cluster::local::node::RealNode;
use harness::cluster::{Cluster, ClusterProvider, Profile};
use harness::controller::Window;
use harness::controller::openkruise::{InstallOptions, install_local};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

/// 1 kwok node and 1 real node.
fn profile() -> Profile {
    let mut p = Profile::new(KubeVersion::default_version());
    p.set_nodes(1, &["zone-a"], &Default::default()).unwrap();
    p.set_real_nodes(1, &["zone-a"], &Default::default())
        .unwrap();
    p
}

/// The image references containerd of `node` holds (in Kubernetes' namespace).
async fn images_on(node: &RealNode) -> String {
    let out = tokio::process::Command::new("ctr")
        .arg("--address")
        .arg(node.socket())
        .args(["--namespace", "k8s.io", "images", "ls", "-q"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("ctr runs");
    assert!(
        out.status.success(),
        "ctr images ls: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A pod on the real node running the busybox image (which sleeps until SIGTERM).
fn sleeper() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sleeper"},
        "spec": {
            "nodeSelector": {"harness.io/node": "real"},
            "tolerations": [{"key": "harness.io/real-node", "operator": "Exists"}],
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": "harness.local/busybox:v1"}],
        },
    }))
    .unwrap()
}

fn restarts(p: Option<&Pod>) -> Option<(i32, bool)> {
    let cs = p?.status.as_ref()?.container_statuses.as_ref()?;
    let main = cs.iter().find(|c| c.name == "main")?;
    Some((main.restart_count, main.ready))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_releases_daemon_pulls_images_and_recreates_containers_on_a_real_node() {
    the_daemon_pulls_images_and_recreates_containers(
        harness::controller::openkruise::DEFAULT_VERSION,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "nightly tier: builds OpenKruise v1.5.0"]
async fn the_oldest_releases_daemon_pulls_images_and_recreates_containers_on_a_real_node() {
    the_daemon_pulls_images_and_recreates_containers("v1.5.0").await;
}

async fn the_daemon_pulls_images_and_recreates_containers(version: &str) {
    if !common::real_nodes_possible() {
        return;
    }
    let (p, _root) = provider();
    let started = Instant::now();
    let mut c = p.create("d", &profile()).await.unwrap();
    eprintln!("cluster with a real node ready in {:?}", started.elapsed());
    let node = c.state().real_nodes[0].clone();
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let options = InstallOptions {
        version: Some(version.into()),
        gates: BTreeMap::from([("ImagePullJobGate".to_string(), true)]),
        ..InstallOptions::default()
    };
    let started = Instant::now();
    let local = install_local(&mut c, &toolchain, &options)
        .await
        .unwrap_or_else(|e| panic!("install openkruise {version}: {e:?}"));
    eprintln!(
        "openkruise {version} with its daemon ready in {:?}",
        started.elapsed()
    );
    assert_eq!(local.manager.gates.get("KruiseDaemon"), Some(&true));
    assert_eq!(local.daemons.len(), 1, "one daemon per real node");
    let daemon = local.daemons[0].clone();
    assert_eq!(daemon.node, node.name);
    let client = c.client();
    // Installing waits for the daemon's readiness; settling, for its node's NodeImage, which
    // the manager makes only some time after the node turned Ready.
    let started = Instant::now();
    harness::controller::Component::settled(&daemon, &client, Duration::from_secs(180))
        .await
        .unwrap_or_else(|e| panic!("the daemon settles: {e}"));
    eprintln!(
        "the daemon settled {:?} after it was ready",
        started.elapsed()
    );
    let node_images = dyn_api(&client, "apps.kruise.io/v1alpha1", "NodeImage").await;
    assert!(
        node_images.get_opt(&node.name).await.unwrap().is_some(),
        "settled means the node's NodeImage exists"
    );

    // An ImagePullJob for the real node pulls busybox:v2 into that node's containerd.
    assert!(
        !images_on(&node).await.contains("harness.local/busybox:v2"),
        "not on the node before the job"
    );
    // A job picks nodes by their NodeImages' labels, which the manager copies from the node
    // some moment after it makes the NodeImage: a job made before would find no node.
    wait_dyn(
        &node_images,
        &node.name,
        "the node's NodeImage labelled like the node",
        |o| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("harness.io/node"))
                .map(String::as_str)
                == Some("real")
        },
    )
    .await;
    let jobs = dyn_api(&client, "apps.kruise.io/v1alpha1", "ImagePullJob").await;
    let started = Instant::now();
    create(
        &jobs,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "ImagePullJob",
            "metadata": {"name": "pull-v2"},
            "spec": {
                "image": "harness.local/busybox:v2",
                "selector": {"matchLabels": {"harness.io/node": "real"}},
                "parallelism": 1,
                "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 60},
                "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 120},
            },
        }),
    )
    .await;
    wait_dyn(
        &jobs,
        "pull-v2",
        "the ImagePullJob succeeded on 1 node",
        |o| {
            let s = &o.data["status"];
            s["desired"].as_i64() == Some(1)
                && s["succeeded"].as_i64() == Some(1)
                && !s["completionTime"].is_null()
        },
    )
    .await;
    eprintln!("image pulled by the daemon in {:?}", started.elapsed());
    assert!(
        images_on(&node).await.contains("harness.local/busybox:v2"),
        "busybox:v2 is in the node's containerd"
    );
    let images = dyn_api(&client, "apps.kruise.io/v1alpha1", "NodeImage").await;
    let ni = images.get(&node.name).await.unwrap();
    let tags = &ni.data["status"]["imageStatuses"]["harness.local/busybox"]["tags"];
    assert_eq!(
        tags[0]["tag"], "v2",
        "NodeImage status: {}",
        ni.data["status"]
    );
    assert_eq!(tags[0]["phase"], "Succeeded");

    // A ContainerRecreateRequest restarts the pod's container in place.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &sleeper())
        .await
        .unwrap();
    within(
        "the sleeper running on the real node",
        Duration::from_secs(60),
        await_condition(pods.clone(), "sleeper", |p: Option<&Pod>| {
            restarts(p) == Some((0, true))
        }),
        || async { format!("{:?}", pods.get("sleeper").await.map(|p| p.status)) },
    )
    .await
    .unwrap();
    let crrs = dyn_api(
        &client,
        "apps.kruise.io/v1alpha1",
        "ContainerRecreateRequest",
    )
    .await;
    // Releases before v1.9.0 take a container that started after the request's
    // creationTimestamp — which has second precision — for one already recreated, and
    // complete the request without recreating it: a request made in the second its container
    // started does nothing. This test shows the daemon at work, so it makes its request once
    // the clock has left that second (the race is a finding of its own, see docs/findings.md).
    let container_started = pods
        .get("sleeper")
        .await
        .unwrap()
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.running)
        .and_then(|r| r.started_at)
        .map(|t| t.0.as_second())
        .expect("the sleeper runs");
    let now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let next_second_ms = (container_started + 1) * 1000;
    if next_second_ms > now_ms {
        tokio::time::sleep(Duration::from_millis((next_second_ms - now_ms) as u64)).await;
    }
    let started = Instant::now();
    create(
        &crrs,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "ContainerRecreateRequest",
            "metadata": {"name": "recreate-main"},
            "spec": {
                "podName": "sleeper",
                "containers": [{"name": "main"}],
                "strategy": {"failurePolicy": "Fail", "terminationGracePeriodSeconds": 2},
                "activeDeadlineSeconds": 120,
            },
        }),
    )
    .await;
    wait_dyn(&crrs, "recreate-main", "the CRR completed", |o| {
        let s = &o.data["status"];
        s["phase"] == "Completed" && s["containerRecreateStates"][0]["phase"] == "Succeeded"
    })
    .await;
    within(
        "the container restarted once and ready",
        Duration::from_secs(60),
        await_condition(pods.clone(), "sleeper", |p: Option<&Pod>| {
            restarts(p) == Some((1, true))
        }),
        || async {
            format!(
                "{:?}; the request: {}",
                pods.get("sleeper").await.map(|p| p.status),
                crrs.get("recreate-main")
                    .await
                    .map(|o| serde_json::to_string(&o.data).unwrap_or_default())
                    .unwrap_or_default()
            )
        },
    )
    .await
    .unwrap();
    eprintln!("container recreated in {:?}", started.elapsed());

    // Neither the manager nor the daemon was refused by the RBAC it ships, or panicked.
    local.manager.check_process(&Window::all()).unwrap();
    daemon.check_process(&Window::all()).unwrap();
    let log = std::fs::read_to_string(&daemon.log).unwrap();
    assert!(log.contains(&node.name), "the daemon's log names its node");

    // The daemon ends with the cluster.
    let dir = c.layout().dir.clone();
    c.destroy().unwrap();
    assert!(!daemon.record.alive(), "{} still runs", daemon.name);
    assert!(!dir.exists(), "{} removed", dir.display());
}

/// As a user that is not root, every other test of this binary skips, saying so (and fails
/// with `CI` set): what the README says of `cargo test` without root.
#[test]
fn without_root_every_test_skips_saying_so_and_fails_in_ci() {
    common::root_tests_skip_without_root();
}
