//! The local provider against real clusters: scheduling, admission, garbage collection,
//! storage, versions, and teardown.

mod common;

use std::time::Duration;

use common::{cluster, default_profile, within};
use harness::cluster::Cluster;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
            }
        }
    }))
    .unwrap()
}

fn pod_running_and_ready(p: &Pod) -> bool {
    let s = p.status.as_ref();
    s.and_then(|s| s.phase.as_deref()) == Some("Running")
        && s.and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn apiserver_reports_the_true_version() {
    let (c, _root) = cluster(&default_profile()).await;
    let v = c.client().apiserver_version().await.unwrap();
    assert_eq!(v.git_version, "v1.32.5");
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "32"));
}

#[tokio::test]
async fn deployment_pods_are_scheduled_onto_kwok_nodes_and_become_ready() {
    let (c, _root) = cluster(&default_profile()).await;
    let client = c.client();
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    deploys
        .create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();
    let available = await_condition(deploys.clone(), "web", |d: Option<&Deployment>| {
        d.and_then(|d| d.status.as_ref())
            .and_then(|s| s.available_replicas)
            == Some(3)
    });
    within("deployment web available", WAIT, available, || async {
        format!("{:?}", deploys.get("web").await.map(|d| d.status))
    })
    .await
    .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 3);
    for p in &list.items {
        assert!(pod_running_and_ready(p), "{:?}", p.status);
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert!(node.starts_with("kwok-node-"), "{node}");
    }
}

fn resized_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sized"},
        "spec": {"containers": [{
            "name": "main",
            "image": "nginx:1.25",
            "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"cpu": "200m", "memory": "128Mi"}
            }
        }]}
    }))
    .unwrap()
}

#[tokio::test]
async fn in_place_vertical_scaling_gate_defaults_and_guards_resize_policy() {
    let mut profile = default_profile();
    profile
        .add_gates(&["InPlacePodVerticalScaling=true"])
        .unwrap();
    let (c, _root) = cluster(&profile).await;
    let pods: Api<Pod> = Api::default_namespaced(c.client());
    let created = pods
        .create(&PostParams::default(), &resized_pod())
        .await
        .unwrap();
    let policy = |p: &Pod| {
        p.spec.as_ref().unwrap().containers[0]
            .resize_policy
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|r| format!("{}={}", r.resource_name, r.restart_policy))
            .collect::<Vec<_>>()
    };
    assert_eq!(policy(&created), ["cpu=NotRequired", "memory=NotRequired"]);
    let running = await_condition(pods.clone(), "sized", |p: Option<&Pod>| {
        p.is_some_and(pod_running_and_ready)
    });
    within("pod running", WAIT, running, || async { String::new() })
        .await
        .unwrap();
    let created = pods.get("sized").await.unwrap();

    // A read-modify-write by a client that does not know the field: the apiserver defaults it
    // again while decoding the update, so the stored policy is unchanged.
    let mut dropped = created.clone();
    dropped.spec.as_mut().unwrap().containers[0].resize_policy = None;
    dropped.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.26".into());
    let replaced = pods
        .replace("sized", &PostParams::default(), &dropped)
        .await
        .unwrap();
    assert_eq!(policy(&replaced), ["cpu=NotRequired", "memory=NotRequired"]);

    // A policy that differs from the defaulted one is a forbidden pod update.
    let mut changed = replaced.clone();
    changed.spec.as_mut().unwrap().containers[0].resize_policy = Some(vec![
        serde_json::from_value(json!({"resourceName": "cpu", "restartPolicy": "RestartContainer"}))
            .unwrap(),
    ]);
    let err = pods
        .replace("sized", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("pod updates may not change fields other than"),
        "{msg}"
    );
}

#[tokio::test]
async fn without_the_gate_resize_policy_is_not_defaulted() {
    let (c, _root) = cluster(&default_profile()).await;
    let pods: Api<Pod> = Api::default_namespaced(c.client());
    let created = pods
        .create(&PostParams::default(), &resized_pod())
        .await
        .unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().containers[0].resize_policy,
        None
    );
}

#[tokio::test]
async fn priority_admission_refuses_an_inconsistent_priority() {
    let (c, _root) = cluster(&default_profile()).await;
    let classes: Api<PriorityClass> = Api::all(c.client());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "stable"},
                "value": 1000000000
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.client());
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "priorityClassName": "stable",
            "priority": 0,
            "containers": [{"name": "main", "image": "nginx:1.25"}]
        }
    }))
    .unwrap();
    let msg = pods
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(
            "the integer value of priority (0) must not be provided in pod spec; priority \
             admission controller computed 1000000000 from the given PriorityClass name"
        ),
        "{msg}"
    );
    // The consistent pod is admitted and gets the class's value.
    let mut ok = pod.clone();
    ok.spec.as_mut().unwrap().priority = None;
    let created = pods.create(&PostParams::default(), &ok).await.unwrap();
    assert_eq!(created.spec.unwrap().priority, Some(1000000000));
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_dependents() {
    let (c, _root) = cluster(&default_profile()).await;
    let client = c.client();
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    deploys
        .create(&PostParams::default(), &deployment("owner", 2))
        .await
        .unwrap();
    let ready = await_condition(deploys.clone(), "owner", |d: Option<&Deployment>| {
        d.and_then(|d| d.status.as_ref())
            .and_then(|s| s.ready_replicas)
            == Some(2)
    });
    within("deployment owner ready", WAIT, ready, || async {
        String::new()
    })
    .await
    .unwrap();
    let rs = rss
        .list(&ListParams::default().labels("app=owner"))
        .await
        .unwrap()
        .items;
    assert_eq!(rs.len(), 1);
    let rs_name = rs[0].metadata.name.clone().unwrap();
    let rs_uid = rs[0].metadata.uid.clone().unwrap();
    let pod_list = pods
        .list(&ListParams::default().labels("app=owner"))
        .await
        .unwrap()
        .items;
    assert_eq!(pod_list.len(), 2);

    // Background propagation: the owner goes at once, the garbage collector removes the rest.
    deploys
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    let rs_gone = await_condition(rss.clone(), &rs_name, conditions::is_deleted(&rs_uid));
    within("replicaset collected", WAIT, rs_gone, || async {
        format!(
            "{:?}",
            rss.get_opt(&rs_name).await.map(|r| r.map(|r| r.metadata))
        )
    })
    .await
    .unwrap();
    for p in pod_list {
        let name = p.metadata.name.clone().unwrap();
        let uid = p.metadata.uid.clone().unwrap();
        let gone = await_condition(pods.clone(), &name, conditions::is_deleted(&uid));
        within(&format!("pod {name} collected"), WAIT, gone, || async {
            String::new()
        })
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_claim_binds_and_the_pod_using_it_runs() {
    let (c, _root) = cluster(&default_profile()).await;
    let client = c.client();
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "user"},
            "spec": {
                "containers": [{
                    "name": "main",
                    "image": "nginx:1.25",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
            }
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let bound = await_condition(
        claims.clone(),
        "data",
        |c: Option<&PersistentVolumeClaim>| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Bound")
        },
    );
    within("claim bound", WAIT, bound, || async {
        format!("{:?}", claims.get("data").await.map(|c| c.status))
    })
    .await
    .unwrap();
    let running = await_condition(pods.clone(), "user", |p: Option<&Pod>| {
        p.is_some_and(pod_running_and_ready)
    });
    within("pod running", WAIT, running, || async {
        format!("{:?}", pods.get("user").await.map(|p| p.status))
    })
    .await
    .unwrap();
    let claim = claims.get("data").await.unwrap();
    assert_eq!(claim.status.unwrap().capacity.unwrap()["storage"].0, "1Gi");
}

#[tokio::test]
async fn an_image_change_is_reflected_in_place_like_a_kubelet_does() {
    // In-place restarts take the profile's time.
    let mut profile = default_profile();
    profile.pod_timing.in_place_restart_ms = 2000;
    let (c, _root) = cluster(&profile).await;
    let pods: Api<Pod> = Api::default_namespaced(c.client());
    let pod = pods
        .create(&PostParams::default(), &resized_pod())
        .await
        .unwrap();
    let running = await_condition(pods.clone(), "sized", |p: Option<&Pod>| {
        p.is_some_and(pod_running_and_ready)
    });
    within("pod running", WAIT, running, || async { String::new() })
        .await
        .unwrap();
    let before = pods.get("sized").await.unwrap();
    let status = |p: &Pod| p.status.clone().unwrap().container_statuses.unwrap()[0].clone();
    let old = status(&before);
    let mut updated = before.clone();
    updated.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.26".into());
    let patched = std::time::Instant::now();
    pods.replace("sized", &PostParams::default(), &updated)
        .await
        .unwrap();
    let restarted = await_condition(pods.clone(), "sized", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs[0].image == "nginx:1.26")
    });
    within("status shows the new image", WAIT, restarted, || async {
        format!("{:?}", pods.get("sized").await.map(|p| p.status))
    })
    .await
    .unwrap();
    let took = patched.elapsed();
    assert!(
        took >= Duration::from_millis(2000),
        "the restart took {took:?}, less than the profile's 2 s"
    );
    let after = pods.get("sized").await.unwrap();
    let new = status(&after);
    assert_eq!(
        after.metadata.uid, pod.metadata.uid,
        "same pod, updated in place"
    );
    assert_eq!(new.restart_count, old.restart_count + 1);
    assert_ne!(new.image_id, old.image_id);
    assert_ne!(new.container_id, old.container_id);
    assert_eq!(
        new.last_state.unwrap().terminated.unwrap().container_id,
        old.container_id
    );
    assert!(pod_running_and_ready(&after));
}

/// A running pod `name` with `grace` seconds of grace, `annotations` and `finalizers`.
fn stopping_pod(
    name: &str,
    grace: i64,
    annotations: serde_json::Value,
    finalizers: &[&str],
) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations, "finalizers": finalizers},
        "spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "nginx:1.25"}],
        }
    }))
    .unwrap()
}

/// Whether every container of the pod has exited and the pod is unready and terminal.
fn stopped(p: &Pod) -> bool {
    let s = p.status.as_ref();
    let exited = s
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .all(|c| c.state.as_ref().is_some_and(|st| st.terminated.is_some()) && !c.ready)
        });
    let unready = s
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "False"));
    exited && unready && s.and_then(|s| s.phase.as_deref()) == Some("Succeeded")
}

#[tokio::test]
async fn deleted_pods_stop_within_their_grace_period_and_keep_their_finalizers() {
    let mut profile = default_profile();
    profile.pod_timing.stop_ms = 1500;
    let (c, _root) = cluster(&profile).await;
    let pods: Api<Pod> = Api::default_namespaced(c.client());
    let cases = [
        // Stops after the profile's stop time; its finalizer holds it until removed.
        stopping_pod("held", 30, json!({}), &["harness.io/hold"]),
        // Ignores SIGTERM for 60 s; killed when its 2 s of grace end.
        stopping_pod(
            "stubborn",
            2,
            json!({"harness.kwok/stop-seconds": "60"}),
            &[],
        ),
        // Stops after the profile's stop time and goes.
        stopping_pod("plain", 30, json!({}), &[]),
    ];
    for p in &cases {
        pods.create(&PostParams::default(), p).await.unwrap();
    }
    for name in ["held", "stubborn", "plain"] {
        let running = await_condition(pods.clone(), name, |p: Option<&Pod>| {
            p.is_some_and(pod_running_and_ready)
        });
        within("pod running", WAIT, running, || async { String::new() })
            .await
            .unwrap();
    }
    let deleted = std::time::Instant::now();
    for name in ["held", "stubborn", "plain"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    // Still running and ready right after the delete: nothing stops at once.
    let now = pods.get("held").await.unwrap();
    assert!(pod_running_and_ready(&now), "{:?}", now.status);

    let held = await_condition(pods.clone(), "held", |p: Option<&Pod>| {
        p.is_some_and(stopped)
    });
    within("held stopped", WAIT, held, || async {
        format!("{:?}", pods.get("held").await.map(|p| p.status))
    })
    .await
    .unwrap();
    let took = deleted.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "held stopped after {took:?}, before the profile's 1.5 s stop time"
    );
    let gone = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let w = await_condition(pods.clone(), name, |p: Option<&Pod>| p.is_none());
            within(&format!("{name} gone"), WAIT, w, || async {
                format!("{:?}", pods.get(name).await.map(|p| p.status))
            })
            .await
            .unwrap();
        }
    };
    gone("stubborn").await;
    let took = deleted.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "stubborn went after {took:?}: its 2 s grace period ends its 60 s stop"
    );
    gone("plain").await;
    // The finalizer keeps the stopped pod until it is removed; then it goes.
    let still = pods.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some() && stopped(&still));
    assert_eq!(
        still.metadata.finalizers.as_deref(),
        Some(&["harness.io/hold".to_string()][..])
    );
    pods.patch(
        "held",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone("held").await;
}

#[tokio::test]
async fn nodes_carry_zone_labels_and_export_logs_works() {
    let (c, _root) = cluster(&default_profile()).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.client());
    let mut zones: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.metadata.labels.as_ref().unwrap()["topology.kubernetes.io/zone"].clone())
        .collect();
    zones.sort();
    assert_eq!(zones, ["zone-a", "zone-a", "zone-b", "zone-b"]);
    let out = tempfile::tempdir().unwrap();
    c.export_logs(out.path()).unwrap();
    for comp in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "provisioner",
    ] {
        assert!(out.path().join(format!("{comp}.log")).is_file(), "{comp}");
    }
}

#[tokio::test]
async fn exec_and_logs_on_a_kwok_node_run_as_nobody_in_the_scratch_dir() {
    use harness::cluster::local::kwok::{EXEC_UID, POD_LOG_LINE};
    use harness::toolchain::{Cache, KubeVersion, Toolchain};
    use std::process::Command;

    let (c, _root) = cluster(&default_profile()).await;
    let work = c.layout().kwok_exec_dir();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.client());
    for n in nodes.list(&ListParams::default()).await.unwrap() {
        let port = n.status.unwrap().daemon_endpoints.unwrap().kubelet_endpoint;
        assert_ne!(port.unwrap().port, 0, "{:?}", n.metadata.name);
    }
    let pods: Api<Pod> = Api::default_namespaced(c.client());
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fake"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = await_condition(pods.clone(), "fake", |p: Option<&Pod>| {
        p.is_some_and(pod_running_and_ready)
    });
    within("pod running", WAIT, running, || async {
        format!("{:?}", pods.get("fake").await.map(|p| p.status))
    })
    .await
    .unwrap();

    let kubectl = Toolchain::new(Cache::from_env(), harness::progress::Progress::plain())
        .kubernetes(KubeVersion::default_version())
        .await
        .unwrap()
        .path("kubectl");
    let run = |args: &[&str]| {
        let out = Command::new(&kubectl)
            .env("KUBECONFIG", c.kubeconfig())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "kubectl {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run(&["exec", "fake", "--", "id", "-u"]).trim(),
        EXEC_UID.to_string()
    );
    assert_eq!(
        run(&["exec", "fake", "--", "id", "-g"]).trim(),
        EXEC_UID.to_string()
    );
    assert_eq!(
        run(&["exec", "fake", "--", "pwd"]).trim(),
        work.display().to_string()
    );
    // A small environment: kwok's (PATH, KWOK_WORKDIR) and the rule's, nothing of the harness's.
    let env = run(&["exec", "fake", "--", "env"]);
    let mut names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|p| p.0)
        .collect();
    names.sort();
    assert_eq!(names, ["HARNESS_FAKE_POD", "KWOK_WORKDIR", "PATH"], "{env}");
    assert!(env.contains("HARNESS_FAKE_POD=true"), "{env}");
    // A scratch file lands in the work dir, owned by nobody.
    run(&["exec", "fake", "--", "touch", "scratch"]);
    assert!(work.join("scratch").is_file());
    assert_eq!(run(&["logs", "fake"]).trim(), POD_LOG_LINE);

    c.destroy().unwrap();
    assert!(!work.exists(), "{} remains", work.display());
}
