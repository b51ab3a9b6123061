//! OpenKruise as it runs on clusters with real nodes (kind, k3s, existing): the release's own
//! manifests with the manager Deployment on the release image and the same gates as on the
//! local provider, and a manager restart detected from its pod's status.

mod common;

use std::collections::BTreeMap;

use harness::controller::openkruise::{
    self, BINARY, DEFAULT_VERSION, NAMESPACE, gate_arg, in_cluster_manifests, manager_gates,
};
use harness::controller::{Component, ControllerError, InClusterManager};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn kind_of(d: &Value) -> &str {
    d["kind"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn the_release_manifests_run_the_release_image_with_the_local_gates() {
    let tc = Toolchain::new(Cache::from_env(), Progress::plain());
    let kubectl = tc
        .kubernetes(KubeVersion::default_version())
        .await
        .unwrap()
        .path("kubectl");
    let docs = openkruise::render(&kubectl, DEFAULT_VERSION).await.unwrap();
    let gates = manager_gates(&BTreeMap::from([(
        "RecreatePodWhenChangeVCTInCloneSetGate".to_string(),
        true,
    )]));
    let out = in_cluster_manifests(docs.clone(), DEFAULT_VERSION, &gates);
    let count = |docs: &[Value], k: &str| docs.iter().filter(|d| kind_of(d) == k).count();
    assert_eq!(
        count(&docs, "DaemonSet"),
        1,
        "the release ships kruise-daemon"
    );
    assert_eq!(count(&out, "DaemonSet"), 0, "KruiseDaemon=false: no daemon");
    for k in [
        "CustomResourceDefinition",
        "ClusterRole",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Service",
    ] {
        assert_eq!(count(&docs, k), count(&out, k), "{k} kept as shipped");
    }
    let deployment = out.iter().find(|d| kind_of(d) == "Deployment").unwrap();
    let manager = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "manager")
        .unwrap();
    assert_eq!(
        manager["image"],
        json!(format!("openkruise/kruise-manager:{DEFAULT_VERSION}"))
    );
    let gate_args: Vec<&str> = manager["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--feature-gates"))
        .collect();
    assert_eq!(
        gate_args,
        [gate_arg(&gates).as_str()],
        "the release's own gate list is replaced by the local provider's"
    );
    assert_eq!(
        gate_args[0],
        "--feature-gates=KruiseDaemon=false,RecreatePodWhenChangeVCTInCloneSetGate=true"
    );

    // With the daemon (every node real): the DaemonSet stays, on the same image and gates.
    let gates = openkruise::manager_gates_for(&BTreeMap::new(), true);
    let out = in_cluster_manifests(docs.clone(), DEFAULT_VERSION, &gates);
    let daemonset = out.iter().find(|d| kind_of(d) == "DaemonSet").unwrap();
    let daemon = &daemonset["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(daemon["name"], "daemon");
    assert_eq!(
        daemon["image"],
        json!(format!("openkruise/kruise-manager:{DEFAULT_VERSION}"))
    );
    assert_eq!(daemon["imagePullPolicy"], "IfNotPresent");
    let daemon_gates: Vec<&str> = daemon["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--feature-gates"))
        .collect();
    assert_eq!(daemon_gates, ["--feature-gates=KruiseDaemon=true"]);
}

#[tokio::test]
async fn a_restarted_in_cluster_manager_is_reported() {
    let (c, _root) = common::cluster(&common::default_profile()).await;
    let client = c.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // Not scheduled (no node name, a selector nothing matches), so only this test writes its
    // status.
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "manager-0", "labels": {"control-plane": "controller-manager"}},
            "spec": {
                "nodeSelector": {"no-such-node": "x"},
                "containers": [{"name": "manager", "image": "openkruise/kruise-manager:v1.9.0"}]
            }
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let manager = InClusterManager {
        name: BINARY.into(),
        version: DEFAULT_VERSION.into(),
        namespace: NAMESPACE.into(),
        selector: "control-plane=controller-manager".into(),
        gates: BTreeMap::new(),
        client: client.clone(),
    };
    manager
        .check(&harness::controller::Window::all())
        .await
        .expect("no restarts yet");
    let status = |restarts: i32| {
        json!({"status": {"containerStatuses": [{
            "name": "manager", "image": "openkruise/kruise-manager:v1.9.0", "imageID": "",
            "ready": false, "restartCount": restarts,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}}
        }]}})
    };
    pods.patch_status(
        "manager-0",
        &PatchParams::default(),
        &Patch::Merge(status(1)),
    )
    .await
    .unwrap();
    let e = manager
        .check(&harness::controller::Window::all())
        .await
        .unwrap_err();
    assert!(matches!(e, ControllerError::ManagerRestarted { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("restarted 1 time(s)"), "{msg}");
    assert!(msg.contains("exit 2 (Error)"), "{msg}");
}
