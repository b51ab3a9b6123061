//! Each rule on synthetic snapshots: one case where it fires, one where it does not.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;

fn workload(kind: WorkloadKind, spec: Value, status: Value) -> Workload {
    Workload {
        kind,
        name: "web".into(),
        uid: "w-uid".into(),
        generation: Some(2),
        deleting: false,
        spec,
        status,
    }
}

fn pod(name: &str, ready: bool, revision: &str) -> PodState {
    PodState {
        name: name.into(),
        uid: format!("{name}-uid"),
        ready,
        terminating: false,
        revision: Some(revision.into()),
        instance: None,
        owner: Some("w-uid".into()),
        claims: vec![],
        node: None,
        ready_since: None,
    }
}

fn snap<'a>(w: &'a Workload, pods: &'a [PodState]) -> Snapshot<'a> {
    Snapshot {
        workload: w,
        pods: pods.iter().collect(),
        replica_sets: vec![],
    }
}

fn cloneset(replicas: i64, strategy: Value, status: Value) -> Workload {
    workload(
        WorkloadKind::CloneSet,
        json!({"replicas": replicas, "updateStrategy": strategy}),
        status,
    )
}

fn status(replicas: i64, ready: i64, updated: i64) -> Value {
    json!({"observedGeneration": 2, "replicas": replicas, "readyReplicas": ready,
           "updatedReplicas": updated, "currentRevision": "web-old", "updateRevision": "web-new"})
}

#[test]
fn counters_fire_on_a_disagreement_once_caught_up() {
    let w = cloneset(2, json!({}), status(2, 2, 2));
    let pods = [
        pod("web-a", true, "web-new"),
        pod("web-b", false, "web-old"),
    ];
    let found = snap(&w, &pods).counters().expect("a mismatch");
    assert!(
        found.contains("status.readyReplicas is 2, ready pods 1"),
        "{found}"
    );
    assert!(
        found.contains("status.updatedReplicas is 2, pods at updateRevision 1"),
        "{found}"
    );
}

#[test]
fn counters_hold_when_they_agree_lag_a_generation_or_pods_terminate() {
    let w = cloneset(2, json!({}), status(2, 1, 1));
    // The short hash names the same revision.
    let pods = [pod("web-a", true, "new"), pod("web-b", false, "web-old")];
    assert_eq!(snap(&w, &pods).counters(), None);
    let mut lagging = cloneset(2, json!({}), status(5, 5, 5));
    lagging.status["observedGeneration"] = json!(1);
    assert_eq!(snap(&lagging, &pods).counters(), None);
    let w = cloneset(2, json!({}), status(5, 5, 5));
    let mut terminating = pods.clone();
    terminating[0].terminating = true;
    assert_eq!(snap(&w, &terminating).counters(), None);
}

#[test]
fn daemonset_counters_compare_ready_and_scheduled_pods() {
    let st = json!({"observedGeneration": 2, "desiredNumberScheduled": 2, "numberReady": 2,
                    "currentNumberScheduled": 2});
    let w = workload(WorkloadKind::DaemonSet, json!({}), st);
    let pods = [pod("d-a", true, "h"), pod("d-b", true, "h")];
    assert_eq!(snap(&w, &pods).counters(), None);
    let pods = [pod("d-a", true, "h"), pod("d-b", false, "h")];
    assert!(snap(&w, &pods).counters().unwrap().contains("numberReady"));
}

#[test]
fn a_daemon_s_count_bounds_its_rollout_once_its_status_observed_its_spec() {
    // Settled at 0 (kept off every node), then let onto them: a pod comes before the status
    // of the new generation counts it.
    let lagging = json!({"observedGeneration": 1, "desiredNumberScheduled": 0, "numberReady": 0});
    let w = workload(WorkloadKind::DaemonSet, json!({}), lagging);
    let pods = [pod("d-a", false, "h")];
    assert!(snap(&w, &pods).rollout(Some(0)).is_empty());
    // The same count, observed for this generation: that pod is one too many.
    let caught = json!({"observedGeneration": 2, "desiredNumberScheduled": 0, "numberReady": 0});
    let w = workload(WorkloadKind::DaemonSet, json!({}), caught);
    let found = snap(&w, &pods).rollout(Some(0));
    assert_eq!(found[0].0, MAX_SURGE, "{found:?}");
}

#[test]
fn max_unavailable_fires_beyond_the_strategy_once_settled() {
    let w = cloneset(3, json!({"maxUnavailable": 1}), status(3, 3, 3));
    let mut pods = vec![
        pod("web-a", true, "web-new"),
        pod("web-b", true, "web-new"),
        pod("web-c", true, "web-new"),
    ];
    assert!(snap(&w, &pods).rollout(Some(3)).is_empty());
    pods[0].terminating = true;
    assert!(
        snap(&w, &pods).rollout(Some(3)).is_empty(),
        "one is allowed"
    );
    pods[1].ready = false;
    let found = snap(&w, &pods).rollout(Some(3));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, MAX_UNAVAILABLE);
    assert!(
        found[0]
            .1
            .contains("2 of 3 pods unavailable, maxUnavailable allows 1")
            && found[0].1.contains("web-a (terminating)")
            && found[0].1.contains("web-b (not ready)"),
        "{}",
        found[0].1
    );
    // Not while scaling (desired differs from where it settled), nor before it settled.
    assert!(snap(&w, &pods).rollout(Some(2)).is_empty());
    assert!(snap(&w, &pods).rollout(None).is_empty());
}

#[test]
fn cloneset_percentages_round_as_kruise_does() {
    let w = cloneset(2, json!({}), status(2, 2, 2));
    // 20% of 2 rounds up to 1 without surge.
    assert_eq!(snap(&w, &[]).bounds(2), Some((1, 0)));
    let w = cloneset(
        10,
        json!({"maxSurge": "15%", "maxUnavailable": "15%"}),
        json!({}),
    );
    assert_eq!(snap(&w, &[]).bounds(10), Some((1, 2)));
}

#[test]
fn an_admitted_negative_bound_bounds_as_zero() {
    let w = cloneset(
        2,
        json!({"maxSurge": -1, "maxUnavailable": "-50%"}),
        status(2, 2, 2),
    );
    assert_eq!(snap(&w, &[]).bounds(2), Some((0, 0)));
    // Settled at its two ready pods: nothing above or below what zero allows.
    let pods = [pod("web-a", true, "web-new"), pod("web-b", true, "web-new")];
    assert!(snap(&w, &pods).rollout(Some(2)).is_empty());
    let w = workload(
        WorkloadKind::StatefulSet,
        json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"maxUnavailable": -2}}}),
        json!({}),
    );
    assert_eq!(snap(&w, &[]).bounds(3), Some((1, 0)));
}

#[test]
fn deployment_defaults_and_recreate() {
    let w = workload(WorkloadKind::Deployment, json!({"replicas": 4}), json!({}));
    assert_eq!(snap(&w, &[]).bounds(4), Some((1, 1)));
    let w = workload(
        WorkloadKind::Deployment,
        json!({"replicas": 4, "strategy": {"type": "Recreate"}}),
        json!({}),
    );
    assert_eq!(snap(&w, &[]).bounds(4), None);
}

#[test]
fn max_surge_fires_on_pods_above_replicas_plus_surge() {
    let w = cloneset(2, json!({"maxSurge": 1}), status(3, 3, 3));
    let pods = [
        pod("web-a", true, "web-new"),
        pod("web-b", true, "web-new"),
        pod("web-c", true, "web-old"),
    ];
    assert!(snap(&w, &pods).rollout(Some(2)).is_empty());
    let w = cloneset(2, json!({}), status(3, 3, 3));
    let found = snap(&w, &pods).rollout(Some(2));
    assert_eq!(found[0].0, MAX_SURGE, "{found:?}");
    assert!(
        found[0]
            .1
            .contains("3 pods for 2 desired, maxSurge allows 0")
    );
}

#[test]
fn a_statefulset_settles_only_with_its_pods_at_the_ordinals_it_wants() {
    // Scaled 2 -> 1 while an update recreates web-0: web-1 (condemned) is the one live pod
    // for a moment, then web-0 comes back before web-1 goes. Not settled at 1 until web-1 is
    // the one gone, so two pods then are a scale in progress, not a surge.
    for kind in [WorkloadKind::StatefulSet, WorkloadKind::AdvancedStatefulSet] {
        let w = workload(kind, json!({"replicas": 1}), status(1, 1, 0));
        let condemned = [pod("web-1", true, "web-old")];
        assert!(!snap(&w, &condemned).settled(), "{kind:?}");
        let wanted = [pod("web-0", true, "web-new")];
        assert!(snap(&w, &wanted).settled(), "{kind:?}");
    }
    // The wanted ordinals start at spec.ordinals.start and skip the reserved ones.
    let spec = json!({"replicas": 2, "ordinals": {"start": 3}, "reserveOrdinals": [4, "6-7"]});
    let w = workload(WorkloadKind::AdvancedStatefulSet, spec, status(2, 2, 2));
    let wants = w.wants_ordinal();
    let wanted: Vec<i64> = (0..10).filter(|o| wants(*o)).collect();
    assert_eq!(wanted, [3, 5]);
    let w = workload(
        WorkloadKind::AdvancedStatefulSet,
        json!({"replicas": 3, "reserveOrdinals": [1, "3-4"]}),
        status(3, 3, 3),
    );
    let wants = w.wants_ordinal();
    let wanted: Vec<i64> = (0..10).filter(|o| wants(*o)).collect();
    assert_eq!(wanted, [0, 2, 5]);
    // Other kinds settle whatever their pods' names end in.
    let w = cloneset(1, json!({}), status(1, 1, 1));
    assert!(snap(&w, &[pod("web-12345", true, "web-new")]).settled());
}

#[test]
fn a_deployment_s_surge_is_its_replica_sets_replicas_not_their_pods() {
    // Surge 1 of 3. The Deployment scaled the old ReplicaSet 3 -> 2 and the new one 1 -> 2;
    // the new one's second pod came before the old one's third went: 5 pods for a moment.
    let w = workload(WorkloadKind::Deployment, json!({"replicas": 3}), json!({}));
    let rs = |name: &str, replicas: i64| Workload {
        name: name.into(),
        uid: format!("{name}-uid"),
        ..workload(
            WorkloadKind::ReplicaSet,
            json!({"replicas": replicas}),
            json!({}),
        )
    };
    let (old, new) = (rs("web-old", 2), rs("web-new", 2));
    let owned = |name: &str, owner: &Workload| PodState {
        owner: Some(owner.uid.clone()),
        ..pod(name, true, &owner.name)
    };
    let pods = [
        owned("web-old-a", &old),
        owned("web-old-b", &old),
        owned("web-old-c", &old),
        owned("web-new-a", &new),
        owned("web-new-b", &new),
    ];
    let with = |replica_sets| Snapshot {
        replica_sets,
        ..snap(&w, &pods)
    };
    assert!(with(vec![&old, &new]).rollout(Some(3)).is_empty());
    // A Deployment that scaled its ReplicaSets past the bound.
    let over = rs("web-old", 3);
    let found = with(vec![&over, &new]).rollout(Some(3));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, MAX_SURGE);
    assert!(
        found[0]
            .1
            .contains("5 replicas of its ReplicaSets for 3 desired, maxSurge allows 1"),
        "{found:?}"
    );
}

#[test]
fn cloneset_partition_keeps_that_many_pods_at_the_old_revision() {
    let w = cloneset(3, json!({"partition": 2}), status(3, 3, 1));
    let mut pods = vec![
        pod("web-a", true, "web-new"),
        pod("web-b", true, "web-old"),
        pod("web-c", true, "web-old"),
    ];
    assert_eq!(snap(&w, &pods).partition_breach(&BTreeSet::new()), None);
    pods[1].revision = Some("web-new".into());
    let found = snap(&w, &pods).partition_breach(&BTreeSet::new()).unwrap();
    assert!(
        found.contains("2 pods at updateRevision web-new, partition 2 of 3 allows 1"),
        "{found}"
    );
    // Pods already updated when the monitor first saw the revision are not the partition's.
    let baseline = BTreeSet::from(["web-a-uid".to_string(), "web-b-uid".to_string()]);
    assert_eq!(snap(&w, &pods).partition_breach(&baseline), None);
}

#[test]
fn cloneset_partition_percentages_round_up_and_keep_one_update() {
    let w = cloneset(3, json!({"partition": "50%"}), json!({}));
    assert_eq!(snap(&w, &[]).partition(), Some(2));
    let w = cloneset(3, json!({"partition": "99%"}), json!({}));
    assert_eq!(snap(&w, &[]).partition(), Some(2));
    let w = cloneset(3, json!({"partition": "100%"}), json!({}));
    assert_eq!(snap(&w, &[]).partition(), Some(3));
}

#[test]
fn statefulset_partition_protects_ordinals_below_it_even_recreated() {
    let spec = json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}});
    let w = workload(WorkloadKind::StatefulSet, spec, status(3, 3, 1));
    let mut pods = vec![
        pod("web-0", true, "web-old"),
        pod("web-1", true, "web-old"),
        pod("web-2", true, "web-new"),
    ];
    assert_eq!(snap(&w, &pods).partition_breach(&BTreeSet::new()), None);
    // web-1 deleted and recreated at the update revision.
    pods[1] = PodState {
        uid: "web-1-again".into(),
        ..pod("web-1", true, "web-new")
    };
    let found = snap(&w, &pods).partition_breach(&BTreeSet::new()).unwrap();
    assert!(
        found.contains("pods below partition 2 at updateRevision web-new: web-1"),
        "{found}"
    );
    // A status that says the rollout is over while web-0 is still at the old revision does
    // not switch the rule off.
    let mut flipped = w.clone();
    flipped.status["currentRevision"] = json!("web-new");
    assert!(
        snap(&flipped, &pods)
            .partition_breach(&BTreeSet::new())
            .is_some()
    );
}

#[test]
fn a_partition_raised_after_the_rollout_is_over_holds_nothing_back() {
    // Every pod at web-new and the status agreeing: the partition came after the update.
    let spec = json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}});
    let mut over = status(3, 3, 3);
    over["currentRevision"] = json!("web-new");
    let w = workload(WorkloadKind::StatefulSet, spec, over);
    let pods = [
        pod("web-0", true, "web-new"),
        pod("web-1", true, "web-new"),
        pod("web-2", true, "web-new"),
    ];
    assert_eq!(snap(&w, &pods).partition_breach(&BTreeSet::new()), None);
    assert_eq!(snap(&w, &pods).counters(), None);
    // The same pods while the status still says a rollout is under way: the partition of 2
    // protects web-0 and web-1, which were updated under it.
    let w = workload(WorkloadKind::StatefulSet, w.spec.clone(), status(3, 3, 3));
    let found = snap(&w, &pods).partition_breach(&BTreeSet::new()).unwrap();
    assert!(found.contains("web-0, web-1"), "{found}");
    // A CloneSet whose every pod was updated beyond its partition, its status not yet over.
    let w = cloneset(2, json!({"partition": 1}), status(2, 2, 2));
    let both = [pod("web-a", true, "web-new"), pod("web-b", true, "web-new")];
    let found = snap(&w, &both).partition_breach(&BTreeSet::new()).unwrap();
    assert!(found.contains("partition 1 of 2 allows 1"), "{found}");
}

#[test]
fn a_statefulset_partition_counts_positions_among_the_ordinals_it_wants() {
    // Ordinals from 3, 4 reserved: the set wants 3, 5 and 6, at positions 0, 1 and 2. A
    // partition of 2 protects web-3 and web-5; web-6 is the one pod it lets through.
    let spec = json!({"replicas": 3, "ordinals": {"start": 3}, "reserveOrdinals": [4],
                      "updateStrategy": {"rollingUpdate": {"partition": 2}}});
    let w = workload(WorkloadKind::AdvancedStatefulSet, spec, status(3, 3, 1));
    let index = w.wanted_index();
    let positions: Vec<Option<i64>> = (2..8).map(&index).collect();
    assert_eq!(positions, [None, Some(0), None, Some(1), Some(2), None]);
    let mut pods = vec![
        pod("web-3", true, "web-old"),
        pod("web-5", true, "web-old"),
        pod("web-6", true, "web-new"),
    ];
    assert_eq!(snap(&w, &pods).partition_breach(&BTreeSet::new()), None);
    pods[1].revision = Some("web-new".into());
    let found = snap(&w, &pods).partition_breach(&BTreeSet::new()).unwrap();
    assert!(
        found.contains(
            "pods below partition 2 at updateRevision web-new: web-5 (position 1 among the \
             ordinals it wants)"
        ),
        "{found}"
    );
}

#[test]
fn pods_beyond_the_desired_count_may_be_at_either_revision() {
    // Scaled 3 -> 2 under a partition of 1: the CloneSet removes an updated pod, which is
    // still there for a moment.
    let w = cloneset(2, json!({"partition": 1}), status(3, 3, 2));
    let mut pods = vec![
        pod("web-a", true, "web-new"),
        pod("web-b", true, "web-new"),
        pod("web-c", true, "web-old"),
    ];
    assert_eq!(snap(&w, &pods).partition_breach(&BTreeSet::new()), None);
    // Once it is gone, two updated pods of two are one too many.
    pods[2].revision = Some("web-new".into());
    pods.pop();
    pods.push(pod("web-d", true, "web-new"));
    pods.remove(0);
    let found = snap(&w, &pods).partition_breach(&BTreeSet::new()).unwrap();
    assert!(found.contains("partition 1 of 2 allows 1"), "{found}");
}

#[test]
fn a_status_that_says_the_rollout_is_over_must_have_every_pod_at_its_revision() {
    let mut over = status(2, 2, 1);
    over["currentRevision"] = json!("web-new");
    let w = cloneset(2, json!({}), over.clone());
    let pods = [pod("web-a", true, "web-new"), pod("web-b", true, "web-old")];
    let found = snap(&w, &pods).counters().expect("a claim the pods deny");
    assert!(
        found.contains(
            "status.currentRevision is updateRevision web-new, pods at another revision: \
             web-b (web-old)"
        ),
        "{found}"
    );
    // Every pod there (by its short hash too): the claim holds.
    over["updatedReplicas"] = json!(2);
    let w = cloneset(2, json!({}), over);
    let pods = [pod("web-a", true, "web-new"), pod("web-b", true, "new")];
    assert_eq!(snap(&w, &pods).counters(), None);
    // A rollout under way claims nothing.
    let w = cloneset(2, json!({}), status(2, 2, 1));
    let pods = [pod("web-a", true, "web-new"), pod("web-b", true, "web-old")];
    assert_eq!(snap(&w, &pods).counters(), None);
}

#[test]
fn unordered_update_makes_the_partition_a_count_of_pods() {
    let spec = json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {
        "partition": 2, "unorderedUpdate": {"priorityStrategy": {}}}}});
    let w = workload(WorkloadKind::AdvancedStatefulSet, spec, status(3, 3, 1));
    // Ordinal 0 first, as a priority may order it: allowed, one pod updated of one.
    let mut pods = vec![
        pod("web-0", true, "web-new"),
        pod("web-1", true, "web-old"),
        pod("web-2", true, "web-old"),
    ];
    assert_eq!(snap(&w, &pods).partition_breach(&BTreeSet::new()), None);
    pods[1] = pod("web-1", true, "web-new");
    let found = snap(&w, &pods).partition_breach(&BTreeSet::new()).unwrap();
    assert!(found.contains("partition 2 of 3 allows 1"), "{found}");
}

#[test]
fn complete_needs_the_partitioned_share_updated_unless_paused() {
    let w = cloneset(2, json!({"partition": 1}), status(2, 2, 1));
    let pods = [pod("web-a", true, "web-new"), pod("web-b", true, "web-old")];
    assert!(snap(&w, &pods).complete());
    let w = cloneset(2, json!({}), status(2, 2, 1));
    assert!(!snap(&w, &pods).complete());
    let w = cloneset(2, json!({"paused": true}), status(2, 2, 1));
    assert!(snap(&w, &pods).complete());
    let w = cloneset(3, json!({"paused": true}), status(2, 2, 1));
    assert!(!snap(&w, &pods).complete(), "a scale is not paused");
}

#[test]
fn a_claim_deleted_while_a_live_pod_mounts_it() {
    let mut a = pod("web-a", true, "r");
    a.claims = vec!["data-web-a".into()];
    let found = claim_in_use("data-web-a", &[&a]).unwrap();
    assert!(found.contains("live pod(s) web-a"), "{found}");
    a.terminating = true;
    assert_eq!(claim_in_use("data-web-a", &[&a]), None);
    assert_eq!(claim_in_use("other", &[]), None);
}

fn sts(replicas: i64, policy: Value) -> Workload {
    workload(
        WorkloadKind::StatefulSet,
        json!({"replicas": replicas, "persistentVolumeClaimRetentionPolicy": policy,
               "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}),
        json!({}),
    )
}

#[test]
fn statefulset_claims_follow_the_retention_policy() {
    let retain = sts(2, json!({"whenScaled": "Retain", "whenDeleted": "Retain"}));
    assert!(
        claim_retained(&retain, "data-web-3").is_some(),
        "Retain keeps scaled claims"
    );
    assert!(claim_retained(&retain, "data-web-0").is_some());
    assert_eq!(claim_retained(&retain, "logs-web-0"), None, "not its claim");
    let delete = sts(2, json!({"whenScaled": "Delete"}));
    assert_eq!(claim_retained(&delete, "data-web-3"), None);
    assert!(
        claim_retained(&delete, "data-web-1").is_some(),
        "below replicas it is kept"
    );
    let claim = |name: &str| ClaimState {
        name: name.into(),
        ..Default::default()
    };
    assert!(claim_left_behind(&delete, &claim("data-web-3"), &[]).is_some());
    assert_eq!(claim_left_behind(&delete, &claim("data-web-1"), &[]), None);
    assert_eq!(claim_left_behind(&retain, &claim("data-web-3"), &[]), None);
}

#[test]
fn cloneset_claims_go_with_their_instance() {
    let w = cloneset(1, json!({}), json!({}));
    let c = ClaimState {
        name: "data-web-x".into(),
        instance: Some("x".into()),
        owners: vec!["w-uid".into()],
        ..Default::default()
    };
    let mut p = pod("web-x", true, "r");
    p.instance = Some("x".into());
    assert_eq!(claim_left_behind(&w, &c, &[&p]), None);
    assert!(
        claim_left_behind(&w, &c, &[])
            .unwrap()
            .contains("data-web-x")
    );
}

#[test]
fn a_cloneset_claim_whose_instance_id_is_all_digits_has_no_ordinal() {
    // A CloneSet with a claim template and no retention policy: its claim of instance
    // `88278` is no StatefulSet ordinal, and deleting it on scale-in is what the CloneSet does.
    let w = workload(
        WorkloadKind::CloneSet,
        json!({"replicas": 1, "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}),
        json!({}),
    );
    assert_eq!(claim_retained(&w, "data-web-88278"), None);
    let retain = sts(2, json!({"whenScaled": "Retain"}));
    assert!(
        claim_retained(&retain, "data-web-88278").is_some(),
        "a StatefulSet's is"
    );
}

#[test]
fn failed_create_counts_repeats() {
    assert!(failed_create("FailedCreate", 3, 3));
    assert!(!failed_create("FailedCreate", 2, 3));
    assert!(!failed_create("FailedScheduling", 9, 3));
}
