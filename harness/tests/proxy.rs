//! The apiserver proxy (`cluster::proxy`) against a real local cluster: a client whose
//! kubeconfig names the proxy and carries a ServiceAccount token keeps its own RBAC; a held
//! watch event reaches it only after the hold ends, a dropped one only on its next watch; the
//! proxy leaves nothing behind; and OpenKruise's manager works through it.

mod common;

use std::time::Duration;

use common::{cluster, create, default_profile, dyn_api, wait_dyn, within};
use futures::{FutureExt, StreamExt, TryStreamExt};
use harness::cluster::Cluster;
use harness::cluster::local::LocalCluster;
use harness::cluster::local::pki::{Credentials, render_kubeconfig};
use harness::cluster::proxy::{self, ProxyHandle, WatchStats};
use harness::controller::openkruise::{InstallOptions, install_local};
use harness::progress::Progress;
use harness::toolchain::{Cache, Toolchain};
use harness::wait::{self, Check};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

const NS: &str = "default";
const LONG: Duration = Duration::from_secs(600);
/// The verbs the tests use on ConfigMaps through the proxy.
const VERBS: [&str; 4] = ["create", "get", "list", "watch"];

/// A client of `cluster` through `proxy`, authenticated with a token of a ServiceAccount that
/// may edit namespace `default` and nothing else.
async fn client_through(
    cluster: &LocalCluster,
    proxy: &ProxyHandle,
    dir: &std::path::Path,
) -> kube::Client {
    let admin = cluster.client();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "through-proxy"}})).unwrap();
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let binding = RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("through-proxy".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "edit".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "through-proxy".into(),
            namespace: Some(NS.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let token = sas
        .create_token_request(
            "through-proxy",
            &PostParams::default(),
            &TokenRequest::default(),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let text = render_kubeconfig(
        &proxy.url(),
        &cluster.ca_pem().unwrap(),
        &Credentials::Token(token),
        "through-proxy",
    );
    let path = dir.join("through-proxy.kubeconfig");
    std::fs::write(&path, text).unwrap();
    let client = harness::cluster::admin_client(&path).await.unwrap();
    // `edit` is an aggregated ClusterRole that the controller manager fills in after start, in
    // steps: its own rules (create, patch) come from `system:aggregate-to-edit`, its read rules
    // (get, list, watch) from `view`, itself aggregated from `system:aggregate-to-view` — so
    // `edit` may allow a create before it allows a watch. And the authorizer learns of a new
    // binding from its cache. Wait until the apiserver answers yes for every verb the tests
    // use on ConfigMaps.
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    wait::poll(
        "the token's binding to take effect for every verb the tests use",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let reviews = reviews.clone();
            async move {
                let mut denied = Vec::new();
                for verb in VERBS {
                    let review: SelfSubjectAccessReview = serde_json::from_value(json!({
                        "spec": {"resourceAttributes": {
                            "namespace": NS, "verb": verb, "resource": "configmaps"}}
                    }))
                    .unwrap();
                    let allowed = match reviews.create(&PostParams::default(), &review).await {
                        Ok(r) => r.status.is_some_and(|s| s.allowed),
                        Err(_) => false,
                    };
                    if !allowed {
                        denied.push(verb);
                    }
                }
                Check::when(denied.is_empty(), || {
                    format!("not allowed yet: {}", denied.join(", "))
                })
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    client
}

/// Waits (polling the proxy's counters, bounded) until `resource`'s stats satisfy `pred`.
async fn stats_reach(
    proxy: &ProxyHandle,
    resource: &str,
    what: &str,
    pred: impl Fn(&WatchStats) -> bool,
) {
    wait::poll(
        what,
        Duration::from_secs(30),
        Duration::from_millis(20),
        || {
            let s = proxy.stats(resource);
            let ok = pred(&s);
            async move { Check::when(ok, || format!("{resource}: {s:?}")) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

fn data_v(cm: &ConfigMap) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default()
}

async fn set_v(admin: &Api<ConfigMap>, name: &str, v: &str) {
    admin
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": v}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn held_events_arrive_after_the_hold_dropped_ones_on_the_next_watch_and_nothing_is_left() {
    let (c, root) = cluster(&default_profile()).await;
    let dir = c.layout().dir.clone();
    let procs = common::processes(&dir);
    let proxy = proxy::start_local(&c).await.unwrap();
    let client = client_through(&c, &proxy, root.path()).await;

    // Its own RBAC: the token may edit `default`, not read nodes.
    let err = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err:?}"
    );

    let admin: Api<ConfigMap> = Api::namespaced(c.client(), NS);
    let mine: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "seen"}, "data": {"v": "1"}})).unwrap();
    let created = mine.create(&PostParams::default(), &cm).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let wp = WatchParams::default()
        .fields("metadata.name=seen")
        .disable_bookmarks();

    // (a) A held update reaches the client only once the hold ends.
    let mut events = mine.watch(&wp, &rv).await.unwrap().boxed();
    stats_reach(&proxy, "configmaps", "the watch to open", |s| s.open == 1).await;
    proxy.hold("configmaps", LONG);
    set_v(&admin, "seen", "2").await;
    stats_reach(&proxy, "configmaps", "the update to be held", |s| {
        s.held == 1
    })
    .await;
    assert!(
        events.next().now_or_never().is_none(),
        "the client got an event while it was held"
    );
    assert_eq!(proxy.stats("configmaps").forwarded, 0);
    proxy.release("configmaps");
    let event = within(
        "the held event",
        Duration::from_secs(30),
        events.try_next(),
        || async { format!("{:?}", proxy.stats("configmaps")) },
    )
    .await
    .unwrap();
    let seen_rv = match event {
        Some(WatchEvent::Modified(cm)) => {
            assert_eq!(data_v(&cm), "2");
            cm.metadata.resource_version.unwrap()
        }
        other => panic!("expected the held update, got {other:?}"),
    };
    let after_hold = proxy.stats("configmaps");
    assert_eq!(
        (after_hold.held, after_hold.forwarded),
        (1, 1),
        "{after_hold:?}"
    );

    // (b) A dropped update is not delivered on the open watch; the client's next watch from
    // where it stands replays it, and its re-list sees it.
    proxy.drop_events("configmaps", LONG);
    set_v(&admin, "seen", "3").await;
    stats_reach(&proxy, "configmaps", "the update to be dropped", |s| {
        s.dropped == 1
    })
    .await;
    assert!(
        events.next().now_or_never().is_none(),
        "the client got a dropped event"
    );
    assert_eq!(
        data_v(&mine.get("seen").await.unwrap()),
        "3",
        "a GET is not a watch"
    );
    proxy.release("configmaps");
    proxy.close_watches("configmaps");
    let end = within(
        "the closed watch to end",
        Duration::from_secs(30),
        events.next(),
        || async { format!("{:?}", proxy.stats("configmaps")) },
    )
    .await;
    assert!(
        end.is_none(),
        "the watch ended without delivering the dropped event: {end:?}"
    );
    let closed = proxy.stats("configmaps");
    assert_eq!(
        (closed.closed, closed.open, closed.forwarded),
        (1, 0, 1),
        "{closed:?}"
    );
    let listed = mine
        .list(&ListParams::default().fields("metadata.name=seen"))
        .await
        .unwrap();
    assert_eq!(listed.items.iter().map(data_v).collect::<Vec<_>>(), ["3"]);
    let mut again = mine.watch(&wp, &seen_rv).await.unwrap().boxed();
    let replayed = within(
        "the replayed event",
        Duration::from_secs(30),
        again.try_next(),
        || async { format!("{:?}", proxy.stats("configmaps")) },
    )
    .await
    .unwrap();
    match replayed {
        Some(WatchEvent::Modified(cm)) => assert_eq!(data_v(&cm), "3"),
        other => panic!("expected the dropped update again, got {other:?}"),
    }

    // (c) Dropped, the proxy ends its listener, its connections and the open watch.
    let addr = proxy.addr();
    let finished = proxy.finished();
    assert!(!finished.is_finished());
    drop(proxy);
    within(
        "the proxy's tasks to end",
        Duration::from_secs(30),
        finished.clone().wait(),
        || async { "tasks still running".to_string() },
    )
    .await;
    assert!(finished.is_finished());
    let refused = tokio::net::TcpStream::connect(addr).await;
    assert!(refused.is_err(), "{addr} still accepts connections");
    let end = within(
        "the open watch to end",
        Duration::from_secs(30),
        again.next(),
        || async { String::new() },
    )
    .await;
    assert!(
        !matches!(end, Some(Ok(_))),
        "an event after the proxy stopped: {end:?}"
    );

    c.destroy().unwrap();
    common::assert_nothing_left(&procs, &dir);
}

#[tokio::test]
async fn the_manager_works_through_the_proxy_with_its_own_token() {
    let (mut c, _root) = cluster(&default_profile()).await;
    let dir = c.layout().dir.clone();
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let options = InstallOptions {
        version: Some("v1.9.0".into()),
        proxy: true,
        ..InstallOptions::default()
    };
    let local = install_local(&mut c, &toolchain, &options)
        .await
        .unwrap_or_else(|e| panic!("install openkruise through the proxy: {e:?}"));
    let proxy = local.proxy.as_ref().expect("a proxy was asked for");
    let kubeconfig = std::fs::read_to_string(c.layout().kubeconfig("kruise-manager")).unwrap();
    assert!(
        kubeconfig.contains(&format!("server: {}", proxy.url())),
        "{kubeconfig}"
    );
    assert!(
        kubeconfig.contains("token: "),
        "the manager keeps its ServiceAccount token"
    );

    let client = c.client();
    let api = dyn_api(&client, "apps.kruise.io/v1alpha1", "CloneSet").await;
    create(
        &api,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "CloneSet",
            "metadata": {"name": "through-proxy", "namespace": NS},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "through-proxy"}},
                "template": {
                    "metadata": {"labels": {"app": "through-proxy"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}
                }
            }
        }),
    )
    .await;
    wait_dyn(&api, "through-proxy", "the CloneSet's replica ready", |o| {
        o.data
            .pointer("/status/readyReplicas")
            .and_then(|v| v.as_i64())
            == Some(1)
    })
    .await;
    let stats = proxy.all_stats();
    eprintln!("watches of the manager through the proxy: {stats:#?}");
    let clonesets = stats.get("clonesets").copied().unwrap_or_default();
    assert!(
        clonesets.opened >= 1 && clonesets.forwarded >= 1,
        "{clonesets:?}"
    );
    assert_eq!(
        local
            .manager
            .check_process(&harness::controller::Window::all())
            .map_err(|e| e.to_string()),
        Ok(())
    );

    drop(local);
    c.destroy().unwrap();
    assert!(!dir.exists());
}
