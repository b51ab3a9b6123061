//! Every supported Kubernetes version builds, boots, reports its true version and runs pods.
//! A cold build of each version takes minutes, so this is the opt-in tier:
//! `cargo test -p harness --test versions -- --ignored`.

mod common;

use std::time::Duration;

use common::{cluster, within};
use harness::cluster::Profile;
use harness::toolchain::KubeVersion;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;

#[tokio::test]
#[ignore = "builds every supported Kubernetes version (nightly tier)"]
async fn every_supported_version_builds_boots_and_runs_pods() {
    for version in KubeVersion::supported() {
        let (c, _root) = cluster(&Profile::new(version)).await;
        let v = c.client().apiserver_version().await.unwrap();
        assert_eq!(v.git_version, version.tag());
        let pods: Api<Pod> = Api::default_namespaced(c.client());
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
        let running = await_condition(pods.clone(), "p", |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Running")
        });
        within(
            &format!("pod running on {version}"),
            Duration::from_secs(60),
            running,
            || async { format!("{:?}", pods.get("p").await.map(|p| p.status)) },
        )
        .await
        .unwrap();
        eprintln!("Kubernetes {version}: ok");
    }
}
