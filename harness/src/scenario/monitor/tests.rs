use super::*;
use serde_json::json;

fn cloneset(ready: i64) -> Workload {
    Workload {
        kind: WorkloadKind::CloneSet,
        name: "web".into(),
        uid: "w".into(),
        generation: Some(1),
        deleting: false,
        spec: json!({"replicas": 1}),
        status: json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": ready,
                       "updatedReplicas": 1, "currentRevision": "web-a", "updateRevision": "web-a"}),
    }
}

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-x", "uid": "p", "labels": {"controller-revision-hash": "web-a"},
                     "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                                          "name": "web", "uid": "w", "controller": true}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

#[test]
fn a_counter_mismatch_is_a_violation_only_once_it_persisted_for_the_grace_window() {
    let settings = Settings::with_liveness(Duration::from_secs(90));
    let t0 = Instant::now();
    let mut m = Model::default();
    m.apply(Change::Pod(Box::new(pod())));
    m.apply(Change::Workload(Box::new(cloneset(0))));
    m.evaluate(t0, &settings);
    m.evaluate(t0 + Duration::from_secs(2), &settings);
    assert!(
        m.violations().is_empty(),
        "status may lag: {:?}",
        m.violations()
    );
    // It catches up: the finding is forgotten, and a later lag starts a new window.
    m.apply(Change::Workload(Box::new(cloneset(1))));
    m.evaluate(t0 + Duration::from_secs(3), &settings);
    m.apply(Change::Workload(Box::new(cloneset(0))));
    m.evaluate(t0 + Duration::from_secs(7), &settings);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    m.evaluate(t0 + Duration::from_secs(6) + settings.grace, &settings);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    m.evaluate(t0 + Duration::from_secs(7) + settings.grace, &settings);
    let v = &m.violations()[0];
    assert_eq!(
        (v.rule, v.object.as_str()),
        (rules::COUNTERS, "CloneSet web")
    );
    assert!(
        v.what.contains("status.readyReplicas is 0, ready pods 1"),
        "{v}"
    );
    assert_eq!(
        unexpected(m.violations(), &[rules::COUNTERS]).len(),
        0,
        "a declared rule is not a finding"
    );
}

#[test]
fn a_scale_that_returns_to_the_settled_count_is_not_bounded_until_it_settles_again() {
    let mut m = Model::default();
    let mut w = cloneset(0);
    w.spec = json!({"replicas": 0, "updateStrategy": {"maxSurge": 0}});
    w.status = json!({"observedGeneration": 1, "replicas": 0, "readyReplicas": 0,
                      "updatedReplicas": 0, "currentRevision": "web-a", "updateRevision": "web-a"});
    m.apply(Change::Workload(Box::new(w.clone())));
    let now = Instant::now();
    let s = Settings::with_liveness(Duration::from_secs(60));
    m.evaluate(now, &s);
    // Scaled to 2: two pods come.
    w.generation = Some(2);
    w.spec["replicas"] = json!(2);
    m.apply(Change::Workload(Box::new(w.clone())));
    m.evaluate(now, &s);
    let mut p = pod();
    for name in ["web-a", "web-b"] {
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(format!("{name}-uid"));
        m.apply(Change::Pod(Box::new(p.clone())));
    }
    m.evaluate(now, &s);
    // Back to 0 before it settled at 2: its pods are still there, a scale in progress.
    w.generation = Some(3);
    w.spec["replicas"] = json!(0);
    m.apply(Change::Workload(Box::new(w.clone())));
    m.evaluate(now, &s);
    assert!(m.take_suspects().is_empty());
    // Settled at 0 again, a third pod is beyond maxSurge.
    for name in ["web-a", "web-b"] {
        m.apply(Change::PodGone(format!("{name}-uid")));
    }
    w.status["observedGeneration"] = json!(3);
    m.apply(Change::Workload(Box::new(w)));
    m.evaluate(now, &s);
    p.metadata.name = Some("web-c".into());
    p.metadata.uid = Some("web-c-uid".into());
    m.apply(Change::Pod(Box::new(p)));
    m.evaluate(now, &s);
    let held = m.take_suspects();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0.0, rules::MAX_SURGE);
}

#[test]
fn an_instant_finding_stands_only_if_its_workload_is_still_at_that_generation() {
    let mut m = Model::default();
    let mut w = cloneset(2);
    w.spec = json!({"replicas": 2, "updateStrategy": {"maxSurge": 0}});
    w.status = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                      "updatedReplicas": 2, "currentRevision": "web-a", "updateRevision": "web-a"});
    m.apply(Change::Workload(Box::new(w)));
    let mut p = pod();
    for name in ["web-a", "web-b"] {
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(format!("{name}-uid"));
        m.apply(Change::Pod(Box::new(p.clone())));
    }
    let now = Instant::now();
    let s = Settings::with_liveness(Duration::from_secs(60));
    m.evaluate(now, &s);
    // Settled at 2 by the first evaluation, bounded from the second on.
    m.evaluate(now, &s);
    // A third pod, seen before the spec that asked for it.
    p.metadata.name = Some("web-c".into());
    p.metadata.uid = Some("web-c-uid".into());
    m.apply(Change::Pod(Box::new(p)));
    m.evaluate(now, &s);
    let held = m.take_suspects();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0.0, rules::MAX_SURGE);
    assert!(m.violations().is_empty(), "held, not reported");
    // Not read (an apiserver just restarted): held for the next read, not reported.
    let (key, suspect) = held[0].clone();
    m.unread(key.clone(), suspect.clone(), false);
    assert!(m.violations().is_empty(), "unknown is not confirmed");
    let again = m.take_suspects();
    assert_eq!(again.len(), 1, "held for the next read: {again:?}");
    // Read afresh, the workload is at a newer generation: the finding goes.
    m.confirm(key.clone(), suspect.clone(), Some(2));
    assert!(m.violations().is_empty());
    // At the same generation, it stands, with the instant it was seen.
    let at = suspect.at.clone();
    let (key_seen, seen) = (key.clone(), suspect.clone());
    m.confirm(key, suspect, Some(1));
    assert_eq!(m.violations().len(), 1);
    assert_eq!(m.violations()[0].at, at);
    // Not read on the monitor's last read: reported as seen (nothing later can tell).
    let mut last = Model::default();
    last.unread(key_seen, seen, true);
    assert_eq!(last.violations().len(), 1);
    // Finished, it carries the counter it bounds: 2 live pods, then 3, against 2 + 0.
    let v = m.finish();
    let plot = v[0].plot.as_ref().expect("a rollout bound has a plot");
    assert_eq!(
        (plot.counter.as_str(), plot.bound.as_str()),
        ("live pods", "desired + maxSurge")
    );
    let seen: Vec<(i64, i64)> = plot.points.iter().map(|&(_, v, b)| (v, b)).collect();
    assert_eq!(seen, [(2, 2), (3, 2)]);
}

#[test]
fn a_partition_judges_only_what_the_controller_did_once_it_observed_it() {
    let mut m = Model::default();
    let mut w = cloneset(2);
    w.spec = json!({"replicas": 2});
    w.status = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                      "updatedReplicas": 0, "currentRevision": "web-a", "updateRevision": "web-b"});
    m.apply(Change::Workload(Box::new(w.clone())));
    let mut p = pod();
    let at = |p: &mut Pod, name: &str, rev: &str| {
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(format!("{name}-uid"));
        p.metadata.labels = Some([("controller-revision-hash".into(), rev.into())].into());
    };
    at(&mut p, "web-1", "web-a");
    m.apply(Change::Pod(Box::new(p.clone())));
    let now = Instant::now();
    let s = Settings::with_liveness(Duration::from_secs(60));
    m.evaluate(now, &s);
    // The partition rises to keep both pods; before the controller observed it, it made a
    // pod at the update revision from the spec it knew: not the partition's breach.
    w.generation = Some(2);
    w.spec["updateStrategy"] = json!({"partition": 2});
    m.apply(Change::Workload(Box::new(w.clone())));
    at(&mut p, "web-2", "web-b");
    m.apply(Change::Pod(Box::new(p.clone())));
    m.evaluate(now, &s);
    assert!(m.take_suspects().is_empty());
    w.status["observedGeneration"] = json!(2);
    m.apply(Change::Workload(Box::new(w)));
    m.evaluate(now, &s);
    assert!(m.take_suspects().is_empty(), "the pod made before stands");
    // Once it observed the partition, the old pod replaced by one at the update revision
    // breaches it.
    m.apply(Change::PodGone("web-1-uid".into()));
    at(&mut p, "web-3", "web-b");
    m.apply(Change::Pod(Box::new(p)));
    m.evaluate(now, &s);
    let held = m.take_suspects();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0.0, rules::PARTITION);
}

#[test]
fn a_relist_forgets_what_was_deleted_while_the_watch_was_down() {
    let mut m = Model::default();
    m.apply(Change::Pod(Box::new(pod())));
    m.apply(Change::Workload(Box::new(cloneset(1))));
    assert_eq!(m.pods.len(), 1);
    m.apply(Change::Relisted(Listed::Pods, BTreeSet::new()));
    assert!(m.pods.is_empty(), "the pod was not in the relist");
    // Another kind's relist leaves the CloneSet alone; its own drops it.
    m.apply(Change::Relisted(
        Listed::Workloads(WorkloadKind::Deployment),
        BTreeSet::new(),
    ));
    assert_eq!(m.workloads.len(), 1);
    m.apply(Change::Relisted(
        Listed::Workloads(WorkloadKind::CloneSet),
        BTreeSet::new(),
    ));
    assert!(m.workloads.is_empty());
}

#[test]
fn a_workload_without_progress_for_the_bound_breaks_liveness() {
    let settings = Settings::with_liveness(Duration::from_secs(30));
    let t0 = Instant::now();
    let mut m = Model::default();
    let mut w = cloneset(0);
    w.spec["replicas"] = json!(2);
    m.apply(Change::Workload(Box::new(w)));
    m.evaluate(t0, &settings);
    m.evaluate(t0 + Duration::from_secs(29), &settings);
    assert!(m.violations().iter().all(|v| v.rule != rules::LIVENESS));
    m.evaluate(t0 + Duration::from_secs(31), &settings);
    assert!(m.violations().iter().any(|v| v.rule == rules::LIVENESS));
    // A complete workload is never late.
    let mut m = Model::default();
    m.apply(Change::Pod(Box::new(pod())));
    m.apply(Change::Workload(Box::new(cloneset(1))));
    m.evaluate(t0, &settings);
    m.evaluate(t0 + Duration::from_secs(300), &settings);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn deleting_a_claim_a_live_pod_mounts_is_seen_at_once() {
    let settings = Settings::with_liveness(Duration::from_secs(30));
    let mut m = Model::default();
    let mut p = pod();
    p.spec = Some(
        serde_json::from_value(json!({"containers": [],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-web-x"}}]}))
        .unwrap(),
    );
    m.apply(Change::Pod(Box::new(p)));
    let claim: PersistentVolumeClaim =
        serde_json::from_value(json!({"metadata": {"name": "data-web-x", "uid": "c"}})).unwrap();
    m.apply(Change::Claim(Box::new(claim.clone())));
    m.evaluate(Instant::now(), &settings);
    assert!(m.violations().is_empty());
    let mut marked = claim;
    marked.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    m.apply(Change::Claim(Box::new(marked)));
    assert!(
        m.violations().is_empty(),
        "marked for deletion, the claim is held by its protection finalizer"
    );
    m.apply(Change::ClaimGone("c".into()));
    let v = &m.violations()[0];
    assert_eq!(
        (v.rule, v.object.as_str()),
        (rules::PVC_IN_USE, "PVC data-web-x")
    );
}
