//! The monitor on a real cluster: pods of a CloneSet deleted by hand beyond its maxUnavailable
//! are reported as it happens, with the rule, the object and the instant; a scenario that
//! declares the rule in `expected_violations` is not failed by it.

mod common;

use std::time::Duration;

use common::{create, dyn_api, kruise_cluster, wait_dyn};
use harness::controller::openkruise::{DEFAULT_VERSION, InstallOptions};
use harness::scenario::monitor::{Monitor, Settings, rules, unexpected};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

fn ready(n: i64) -> impl Fn(&kube::api::DynamicObject) -> bool {
    move |o| {
        let s = &o.data["status"];
        s["readyReplicas"].as_i64() == Some(n)
            && s["updatedReadyReplicas"].as_i64() == Some(n)
            && s["observedGeneration"].as_i64() == o.metadata.generation
    }
}

#[tokio::test]
async fn pods_deleted_beyond_max_unavailable_are_reported_as_it_happens() {
    let (c, _m, _root) = kruise_cluster(DEFAULT_VERSION, InstallOptions::default()).await;
    let client = c.client();
    let monitor = Monitor::start(
        &client,
        "default",
        Settings::with_liveness(Duration::from_secs(90)),
    );
    let clonesets = dyn_api(&client, "apps.kruise.io/v1alpha1", "CloneSet").await;
    create(
        &clonesets,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "CloneSet",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "updateStrategy": {"maxUnavailable": 1},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
                }
            }
        }),
    )
    .await;
    wait_dyn(&clonesets, "web", "3 ready", ready(3)).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let before = time::OffsetDateTime::now_utc();
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    for p in list.items.iter().take(2) {
        let name = p.metadata.name.as_deref().unwrap();
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    // Deleted pods make the CloneSet not ready; it recreates them and is ready again.
    wait_dyn(&clonesets, "web", "2 pods recreated", |o| {
        o.data["status"]["readyReplicas"].as_i64() != Some(3)
    })
    .await;
    wait_dyn(&clonesets, "web", "3 ready again", ready(3)).await;
    let found = monitor.stop().await.unwrap();
    let v = found
        .iter()
        .find(|v| v.rule == rules::MAX_UNAVAILABLE)
        .unwrap_or_else(|| panic!("no max-unavailable violation in {found:?}"));
    assert_eq!(v.object, "CloneSet web");
    assert!(
        v.what
            .contains("of 3 pods unavailable, maxUnavailable allows 1"),
        "{v}"
    );
    // Its plot: unavailable pods against maxUnavailable 1, from 0 to over the bound (where it
    // ends depends on how far the monitor's watch got before it stopped).
    let plot = v
        .plot
        .as_ref()
        .expect("a rollout bound's violation has a plot");
    assert_eq!(plot.counter, "unavailable pods");
    let counts: Vec<i64> = plot.points.iter().map(|p| p.1).collect();
    assert!(plot.points.iter().all(|p| p.2 == 1), "{plot:?}");
    assert_eq!(counts.first(), Some(&0), "{plot:?}");
    assert!(counts.iter().any(|&n| n > 1), "{plot:?}");
    assert!(
        plot.points.windows(2).all(|w| w[0].0 <= w[1].0),
        "in time order: {plot:?}"
    );
    // RFC 3339 UTC; to the second, it sorts as it reads.
    let rfc3339 = &time::format_description::well_known::Rfc3339;
    let before = before.format(rfc3339).unwrap();
    assert!(v.at.ends_with('Z') && v.at.len() >= 20, "{}", v.at);
    assert!(
        v.at[..19] >= before[..19],
        "seen at {}, pods deleted from {before}",
        v.at
    );
    assert!(
        unexpected(&found, &[rules::MAX_UNAVAILABLE])
            .iter()
            .all(|v| v.rule != rules::MAX_UNAVAILABLE),
        "declared, it is not a finding"
    );
    assert!(
        !unexpected(&found, &[""; 0]).is_empty(),
        "undeclared, it is one"
    );
    // Nothing else broke: the counters agree, the CloneSet made progress.
    let others: Vec<_> = found
        .iter()
        .filter(|v| v.rule != rules::MAX_UNAVAILABLE)
        .collect();
    assert!(others.is_empty(), "{others:?}");
}
