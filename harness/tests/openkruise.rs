//! OpenKruise installed as it ships, on a real local cluster: its workloads work, its webhooks
//! are called by the real apiserver, it runs with its own RBAC, and its failures are reported.
//! Each behaviour is shown for the default release and an older one.

mod common;

use std::collections::BTreeMap;

use common::{create, dyn_api, kruise_cluster, wait_dyn};
use harness::controller::ControllerError;
use harness::controller::openkruise::InstallOptions;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use rstest::rstest;
use serde_json::json;

const OLDER: &str = "v1.7.0";

fn cloneset(name: &str, replicas: i64) -> serde_json::Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
            }
        }
    })
}

fn ready_replicas(n: i64) -> impl Fn(&kube::api::DynamicObject) -> bool {
    move |o| {
        let s = &o.data["status"];
        s["readyReplicas"].as_i64() == Some(n)
            && s["replicas"].as_i64() == Some(n)
            && s["observedGeneration"].as_i64() == o.metadata.generation
    }
}

async fn pods_with(client: &kube::Client, selector: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

#[rstest]
#[case::default_release(harness::controller::openkruise::DEFAULT_VERSION)]
#[case::older_release(OLDER)]
#[tokio::test]
async fn a_cloneset_becomes_ready_and_scales(#[case] version: &str) {
    let (c, m, _root) = kruise_cluster(version, InstallOptions::default()).await;
    let client = c.client();
    let api = dyn_api(&client, "apps.kruise.io/v1alpha1", "CloneSet").await;
    create(&api, cloneset("web", 3)).await;
    wait_dyn(&api, "web", "3 ready", ready_replicas(3)).await;
    for n in [5, 2] {
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": n}})),
        )
        .await
        .unwrap();
        wait_dyn(&api, "web", &format!("{n} ready"), ready_replicas(n)).await;
        assert_eq!(pods_with(&client, "app=web").await.len() as i64, n);
    }
    m.check_process(&harness::controller::Window::all())
        .unwrap();
}

#[rstest]
#[case::default_release(harness::controller::openkruise::DEFAULT_VERSION)]
#[case::older_release(OLDER)]
#[tokio::test]
async fn a_sidecarset_injects_into_matching_pods_created_afterwards(#[case] version: &str) {
    let (c, m, _root) = kruise_cluster(version, InstallOptions::default()).await;
    let client = c.client();
    let sidecarsets = dyn_api(&client, "apps.kruise.io/v1alpha1", "SidecarSet").await;
    let ss = create(
        &sidecarsets,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "SidecarSet",
            "metadata": {"name": "logger"},
            "spec": {
                "selector": {"matchLabels": {"sidecar": "logger"}},
                "containers": [{"name": "logger", "image": "busybox:1.36", "command": ["sleep", "3600"]}]
            }
        }),
    )
    .await;
    let generation = ss.metadata.generation;
    wait_dyn(&sidecarsets, "logger", "sidecarset observed", move |o| {
        o.data["status"]["observedGeneration"].as_i64() == generation
    })
    .await;
    let clonesets = dyn_api(&client, "apps.kruise.io/v1alpha1", "CloneSet").await;
    let mut with = cloneset("with", 2);
    with["spec"]["template"]["metadata"]["labels"]["sidecar"] = json!("logger");
    create(&clonesets, with).await;
    create(&clonesets, cloneset("without", 1)).await;
    wait_dyn(&clonesets, "with", "2 ready", ready_replicas(2)).await;
    wait_dyn(&clonesets, "without", "1 ready", ready_replicas(1)).await;
    let names = |p: &Pod| {
        p.spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    for p in pods_with(&client, "app=with").await {
        assert!(names(&p).contains(&"logger".to_string()), "{:?}", names(&p));
    }
    for p in pods_with(&client, "app=without").await {
        assert_eq!(names(&p), ["main"]);
    }
    m.check_process(&harness::controller::Window::all())
        .unwrap();
}

#[rstest]
#[case::default_release(harness::controller::openkruise::DEFAULT_VERSION)]
#[case::older_release(OLDER)]
#[tokio::test]
async fn an_advanced_daemonset_runs_one_pod_per_node(#[case] version: &str) {
    let (c, m, _root) = kruise_cluster(version, InstallOptions::default()).await;
    let client = c.client();
    let api = dyn_api(&client, "apps.kruise.io/v1alpha1", "DaemonSet").await;
    create(
        &api,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
                }
            }
        }),
    )
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node_count = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len() as i64;
    wait_dyn(&api, "agent", "a ready pod on every node", move |o| {
        let s = &o.data["status"];
        s["desiredNumberScheduled"].as_i64() == Some(node_count)
            && s["numberReady"].as_i64() == Some(node_count)
    })
    .await;
    let mut on: Vec<String> = pods_with(&client, "app=agent")
        .await
        .iter()
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    on.sort();
    on.dedup();
    assert_eq!(on.len() as i64, node_count, "one pod per node: {on:?}");
    m.check_process(&harness::controller::Window::all())
        .unwrap();
}

#[rstest]
#[case::default_release(harness::controller::openkruise::DEFAULT_VERSION)]
#[case::older_release(OLDER)]
#[tokio::test]
async fn a_workloadspread_spreads_a_deployment_over_two_zones(#[case] version: &str) {
    let (c, m, _root) = kruise_cluster(version, InstallOptions::default()).await;
    let client = c.client();
    let spreads = dyn_api(&client, "apps.kruise.io/v1alpha1", "WorkloadSpread").await;
    let subset = |zone: &str, max: Option<i64>| {
        let mut s = json!({
            "name": zone,
            "requiredNodeSelectorTerm": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
            ]}
        });
        if let Some(m) = max {
            s["maxReplicas"] = json!(m);
        }
        s
    };
    let ws = create(
        &spreads,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "WorkloadSpread",
            "metadata": {"name": "spread"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "subsets": [subset("zone-a", Some(2)), subset("zone-b", None)]
            }
        }),
    )
    .await;
    // The admission webhook reads WorkloadSpreads from the manager's cache: pods created
    // before the controller has seen the spread are admitted without it.
    let generation = ws.metadata.generation;
    wait_dyn(&spreads, "spread", "workloadspread observed", move |o| {
        o.data["status"]["observedGeneration"].as_i64() == generation
    })
    .await;
    let deployments = dyn_api(&client, "apps/v1", "Deployment").await;
    create(
        &deployments,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 5,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
                }
            }
        }),
    )
    .await;
    wait_dyn(&deployments, "web", "5 ready", |o| {
        o.data["status"]["readyReplicas"].as_i64() == Some(5)
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let zone_of: BTreeMap<String, String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            let z = n.metadata.labels.as_ref().unwrap()["topology.kubernetes.io/zone"].clone();
            (n.metadata.name.unwrap(), z)
        })
        .collect();
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for p in pods_with(&client, "app=web").await {
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        let annotation = p
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("apps.kruise.io/matched-workloadspread")
            .cloned()
            .unwrap_or_default();
        let zone = zone_of[&node].clone();
        assert!(
            annotation.contains("\"name\":\"spread\"")
                && annotation.contains(&format!("\"subset\":\"{zone}\"")),
            "pod on {node} ({zone}) not admitted through its subset: {annotation:?}"
        );
        *per_zone.entry(zone_of[&node].clone()).or_default() += 1;
    }
    assert_eq!(
        per_zone,
        BTreeMap::from([("zone-a".to_string(), 2), ("zone-b".to_string(), 3)])
    );
    m.check_process(&harness::controller::Window::all())
        .unwrap();
}

#[expect(
    clippy::ptr_arg,
    reason = "the signature InstallOptions::transform takes"
)]
fn without_pod_permissions(docs: &mut Vec<serde_json::Value>) {
    for d in docs.iter_mut() {
        if d["kind"] == "ClusterRole" && d["metadata"]["name"] == "kruise-manager-role" {
            let rules = d["rules"].as_array_mut().unwrap();
            for rule in rules.iter_mut() {
                if let Some(resources) = rule["resources"].as_array_mut() {
                    resources.retain(|r| r != "pods");
                }
            }
            rules.retain(|r| r["resources"].as_array().is_none_or(|rs| !rs.is_empty()));
        }
    }
}

#[rstest]
#[case::default_release(harness::controller::openkruise::DEFAULT_VERSION)]
#[case::older_release(OLDER)]
#[tokio::test]
async fn a_permission_taken_from_the_manager_is_reported(#[case] version: &str) {
    let (c, _root) = common::cluster(&common::default_profile()).await;
    let mut c = c;
    let toolchain = harness::toolchain::Toolchain::new(
        harness::toolchain::Cache::from_env(),
        harness::progress::Progress::plain(),
    );
    let err = harness::controller::openkruise::install(
        &mut c,
        &toolchain,
        &InstallOptions {
            version: Some(version.into()),
            transform: Some(without_pod_permissions),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    match &err {
        ControllerError::ManagerForbidden { first, count, .. } => {
            assert!(*count >= 1);
            assert!(first.contains("pods"), "{first}");
            assert!(
                first.contains("system:serviceaccount:kruise-system:kruise-manager"),
                "{first}"
            );
        }
        other => panic!("expected an RBAC denial, got: {other}"),
    }
}

#[rstest]
#[case::default_release(harness::controller::openkruise::DEFAULT_VERSION)]
#[case::older_release(OLDER)]
#[tokio::test]
async fn a_manager_that_exits_mid_run_is_detected_and_started_again(#[case] version: &str) {
    use harness::controller::Component;
    let (c, m, _root) = kruise_cluster(version, InstallOptions::default()).await;
    m.check_process(&harness::controller::Window::all())
        .unwrap();
    let first = m.supervisor.as_ref().unwrap().current();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The cluster's process watchdog notices the exit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let cluster_err = loop {
        if let Err(e) = c.check_alive() {
            break e.to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the kill was not noticed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        cluster_err.contains("kruise-manager exited"),
        "{cluster_err}"
    );
    // The manager's own check reports the exit once, and its supervisor starts it again, as a
    // kubelet restarts a pod's container.
    let msg = m
        .check_process(&harness::controller::Window::all())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("kruise-manager {version} exited")),
        "{msg}"
    );
    assert!(msg.contains("started again"), "{msg}");
    assert!(msg.contains("kruise-manager.log"), "{msg}");
    let second = m.supervisor.as_ref().unwrap().current();
    assert_ne!(first, second);
    assert!(second.alive());
    // Running and ready again; the cluster records the new process, so what ends the cluster
    // ends it.
    assert_eq!(m.revive().await.unwrap(), None);
    m.check_process(&harness::controller::Window::all())
        .unwrap();
    c.check_alive().unwrap();
    let on_disk = harness::cluster::local::state::ClusterState::load(&c.layout().state()).unwrap();
    assert!(on_disk.processes.contains(&second), "{on_disk:?}");
    assert!(!on_disk.processes.contains(&first), "{on_disk:?}");
    drop(c);
    assert!(
        !second.alive(),
        "the restarted manager outlived its cluster"
    );
}

/// Runs the harness binary with `args`, its state under `state`.
fn cli(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .env("HARNESS_STATE_DIR", state)
        .output()
        .unwrap()
}

#[test]
fn bundle_install_adds_the_manager_to_a_running_cluster_and_down_ends_it() {
    use harness::cluster::local::state::ClusterState;
    let state = tempfile::tempdir().unwrap();
    let harness = |args: &[&str]| cli(state.path(), args);
    let up = harness(&["cluster", "up", "--name", "b", "--detach"]);
    assert!(up.status.success(), "{up:?}");
    let install = harness(&[
        "bundle",
        "install",
        "--cluster",
        "b",
        "--controller",
        "openkruise@v1.9.0",
    ]);
    assert!(install.status.success(), "{install:?}");
    let dir = state.path().join("clusters/b");
    let recorded = ClusterState::load(&dir.join("cluster.json"))
        .unwrap()
        .processes;
    let manager = recorded
        .iter()
        .find(|p| p.name == "kruise-manager")
        .expect("the manager is recorded with the cluster")
        .clone();
    assert!(manager.alive());
    let down = harness(&["cluster", "down", "b"]);
    assert!(down.status.success(), "{down:?}");
    for p in &recorded {
        assert!(!p.alive(), "{} survived", p.name);
    }
    assert!(!dir.exists());
}

#[test]
fn the_aliased_tag_is_explained_and_bad_refs_are_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args([
            "bundle",
            "install",
            "--cluster",
            "none",
            "--controller",
            "openkruise@v1.7.5",
        ])
        .env("HARNESS_STATE_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("same commit as v1.8.3"), "{err}");
    assert_eq!(out.status.code(), Some(1));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["cluster", "up", "--controller", "openkruise"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected NAME@TAG"));
}

#[test]
fn seeded_objects_are_there_before_the_controller_and_a_bad_seed_starts_nothing() {
    let state = tempfile::tempdir().unwrap();
    let harness = |args: &[&str]| cli(state.path(), args);
    // A document without a name: refused before anything starts.
    let bad = state.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n").unwrap();
    let up = harness(&[
        "cluster",
        "up",
        "--name",
        "x",
        "--detach",
        "--seed",
        bad.to_str().unwrap(),
    ]);
    assert!(!up.status.success());
    let err = String::from_utf8_lossy(&up.stderr);
    assert!(err.contains("has no metadata.name"), "{err}");
    assert!(!state.path().join("clusters/x").exists());

    let seed = state.path().join("seed.yaml");
    std::fs::write(
        &seed,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kruise-configuration, namespace: kruise-system}\ndata:\n  WorkloadSpread_Watch_Custom_Workload_WhiteList: '{\"workloads\":[]}'\n",
    )
    .unwrap();
    let up = harness(&[
        "cluster",
        "up",
        "--name",
        "s",
        "--detach",
        "--seed",
        seed.to_str().unwrap(),
        "--controller",
        "openkruise@v1.9.0",
    ]);
    assert!(up.status.success(), "{up:?}");
    let kubeconfig = state.path().join("clusters/s/kubeconfig");
    let check = async {
        let client = harness::cluster::admin_client(&kubeconfig).await.unwrap();
        let cm: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(client.clone(), "kruise-system");
        let cm = cm.get("kruise-configuration").await.unwrap();
        assert!(
            cm.data
                .unwrap_or_default()
                .contains_key("WorkloadSpread_Watch_Custom_Workload_WhiteList")
        );
        // Made before the release's own objects (its ServiceAccount), so the manager read it.
        let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client, "kruise-system");
        let sa = sa.get("kruise-manager").await.unwrap();
        assert!(
            cm.metadata.creation_timestamp <= sa.metadata.creation_timestamp,
            "seeded at {:?}, the manager's ServiceAccount at {:?}",
            cm.metadata.creation_timestamp,
            sa.metadata.creation_timestamp
        );
    };
    tokio::runtime::Runtime::new().unwrap().block_on(check);
    let down = harness(&["cluster", "down", "s"]);
    assert!(down.status.success(), "{down:?}");
}
