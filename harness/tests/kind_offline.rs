//! The kind provider for real, on the node image the harness assembles offline, in a private
//! Docker daemon: a cluster comes up with its nodes Ready, pods on a worker reach each other
//! and a Service, a claim of the `standard` class is provisioned and mounted; then the cluster
//! and the daemon go, leaving no container, daemon process or record. The nightly tier
//! (`--ignored`): the node image takes several minutes cold.

mod common;

use std::time::Duration;

use harness::cluster::any::{Provider, ProviderConfig, ProviderKind};
use harness::cluster::{Cluster, ClusterProvider, Profile};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;

/// The private daemons' records (one directory each) under the harness's state.
fn docker_records() -> Vec<String> {
    std::fs::read_dir(harness::cluster::docker::default_root())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "nightly tier: assembles the offline kind node image (minutes cold) and runs kind"]
async fn a_kind_cluster_on_the_offline_image_works_and_leaves_nothing() {
    if !common::private_docker_possible() {
        return;
    }
    let before = docker_records();
    let logs = tempfile::tempdir().unwrap();
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let (local, _root) = common::provider();
    let config = ProviderConfig {
        kind: ProviderKind::Kind,
        kind_offline: true,
        ..Default::default()
    };
    let Provider::Kind(kind) = config
        .build(local, &toolchain, logs.path().to_path_buf())
        .unwrap()
    else {
        panic!("a kind provider");
    };
    let mut profile = Profile::new(KubeVersion::default_version());
    profile
        .set_nodes(1, &["zone-a"], &Default::default())
        .unwrap();
    let name = format!("ko-{:04x}", rand::random::<u16>());
    let cluster = kind.create(&name, &profile).await.expect("create");
    let client = harness::cluster::admin_client(cluster.kubeconfig())
        .await
        .unwrap();

    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&Default::default()).await.unwrap().items;
    assert_eq!(nodes.len(), 2, "a control plane and a worker");
    let worker = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .find(|n| n.ends_with("-worker"))
        .expect("a worker");

    // The harness's busybox image, loaded into the nodes (nothing is pulled).
    let busybox = toolchain
        .images()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.name.to_string() == harness::toolchain::images::BUSYBOX_V1_IMAGE)
        .expect("the busybox image");
    let archive = logs.path().join("busybox.tar");
    harness::toolchain::images::write_oci_archive(&busybox, &archive).unwrap();
    cluster.load_image_archive(&archive).expect("load busybox");

    // A server on the worker behind a Service; a client on the control plane with a claim of
    // the default class: bound, mounted, written; the server reached by pod IP and Service.
    let pvcs: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let pvc = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let image = harness::toolchain::images::BUSYBOX_V1_IMAGE;
    let server = json!({
        "metadata": {"name": "server", "labels": {"app": "server"}},
        "spec": {"nodeName": worker, "containers": [{"name": "httpd", "image": image,
            "imagePullPolicy": "Never",
            "command": ["sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"]}]}
    });
    let client_pod = json!({
        "metadata": {"name": "client"},
        "spec": {"tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    });
    for pod in [server, client_pod] {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::default_namespaced(client.clone());
    let svc = serde_json::from_value(json!({
        "metadata": {"name": "server"},
        "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))
    .unwrap();
    let svc = services.create(&PostParams::default(), &svc).await.unwrap();
    let cluster_ip = svc.spec.and_then(|s| s.cluster_ip).unwrap();
    for name in ["server", "client"] {
        harness::wait::until(
            &pods,
            name,
            "Running",
            Duration::from_secs(180),
            |p: Option<Pod>| {
                let phase = p
                    .and_then(|p| p.status)
                    .and_then(|s| s.phase)
                    .unwrap_or_default();
                Box::pin(async move {
                    harness::wait::Check::when(phase == "Running", || format!("phase {phase:?}"))
                })
            },
        )
        .await
        .unwrap();
    }
    let server_ip = pods
        .get("server")
        .await
        .unwrap()
        .status
        .and_then(|s| s.pod_ip)
        .unwrap();
    let get = |host: &str, port: u16| {
        format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {host} {port}")
    };
    let script = format!(
        "echo written > /data/x && cat /data/x && {} && {}",
        get(&server_ip, 8080),
        get(&cluster_ip, 80)
    );
    let kubectl = toolchain
        .kubernetes(KubeVersion::default_version())
        .await
        .unwrap()
        .path("kubectl");
    let exec = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["exec", "client", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&exec.stdout).into_owned();
    assert!(out.contains("written"), "{out:?}");
    assert_eq!(
        out.matches("hello").count(),
        2,
        "by pod IP and by Service: {out:?}"
    );

    cluster.destroy().expect("destroy");
    drop(kind);
    assert_eq!(
        docker_records(),
        before,
        "the private daemon's record is gone"
    );
    let left = common::processes_with(
        &harness::cluster::docker::default_root()
            .display()
            .to_string(),
    );
    assert!(left.is_empty(), "{left:#?}");
    let kind_nodes = common::processes_with(&name);
    assert!(kind_nodes.is_empty(), "{kind_nodes:#?}");
}
