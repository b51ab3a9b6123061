//! A DaemonSet's `status.numberAvailable` judged, when it falls, against every state its pods
//! were in while the status could have been computed.
//!
//! A status lags its pods, and pods and workloads come on separate watches, so the count is
//! not compared with the pods of one instant. Each time the status changes its count to a
//! lower one (a fall), the new count must be at least the fewest nodes that had an available
//! pod at any instant of the span since the write before the previous one, and of a short
//! wait after it ([`WAIT`], for pod events the pod watch brings late). A count below that is
//! a number no state of the pods in the span had: the status says fewer nodes have an
//! available pod than ever did while it could have looked. A rise is not judged: a pod
//! becomes available by the clock, with no event, and a count that rises late is a lag.
//!
//! Judged only where the pods alone tell what the status counts: a DaemonSet (native or
//! Advanced), over the same eligible nodes (the status's `desiredNumberScheduled` and the
//! template's placement fields; a change of either starts the spans afresh). A node counts
//! when one of its pods is Ready, not terminating, and Ready for `minReadySeconds` by its
//! Ready condition's transition time (whole seconds, so a pod counts up to a second early:
//! only a rise could be judged on that second, and rises are not). Whichever of a node's pods
//! a correct status judges the node by, it counts no fewer.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use super::Snapshot;

/// How long a count under the floor waits for pod events the pod watch brings after the
/// status's: whatever the pods were meanwhile lowers the floor it is judged against.
pub const WAIT: Duration = Duration::from_secs(2);

/// What the rule remembers of one DaemonSet from one instant to the next.
#[derive(Debug, Clone, Default)]
pub struct Availability {
    /// The status as last seen.
    status: Value,
    /// The eligibility it is judged under: a change starts afresh.
    scope: Option<Value>,
    /// The fewest nodes with an available pod at any instant since the status last changed...
    fewest: i64,
    /// ...and in the span before that.
    before: i64,
    /// Counts under the floor waiting out [`WAIT`].
    waiting: Vec<Fall>,
}

#[derive(Debug, Clone)]
struct Fall {
    said: i64,
    was: i64,
    floor: i64,
    ms: u64,
    at: String,
}

/// The nodes with an available pod (Ready, not terminating, Ready for `minReadySeconds` at
/// `now`, Unix seconds), the status's `numberAvailable` and the eligibility, for a workload
/// the rule judges.
fn counts(s: &Snapshot, now: i64) -> Option<(i64, i64, Value)> {
    let w = s.workload;
    if !w.kind.daemon() || w.status.get("observedGeneration").is_none() {
        return None;
    }
    let min_ready = w.spec["minReadySeconds"].as_i64().unwrap_or(0);
    let nodes: BTreeSet<&str> = s
        .pods
        .iter()
        .filter(|p| p.ready && !p.terminating)
        .filter(|p| min_ready <= 0 || p.ready_since.is_some_and(|r| now - r >= min_ready))
        .filter_map(|p| p.node.as_deref())
        .collect();
    let t = &w.spec["template"]["spec"];
    let scope = json!([
        w.status["desiredNumberScheduled"],
        t["nodeName"],
        t["nodeSelector"],
        t["affinity"],
        t["tolerations"]
    ]);
    let said = w.status["numberAvailable"].as_i64().unwrap_or(0);
    Some((nodes.len() as i64, said, scope))
}

impl Availability {
    /// Hears the instant `ms` (milliseconds since the monitor started; `now` the same in Unix
    /// seconds, `at` as a violation says it) of `s`; returns each fall under its floor that
    /// has waited out [`WAIT`], with the instant it was written.
    pub fn hear(&mut self, s: &Snapshot, ms: u64, now: i64, at: &str) -> Vec<(String, String)> {
        let Some((nodes, said, scope)) = counts(s, now) else {
            *self = Self::default();
            return vec![];
        };
        let status = &s.workload.status;
        if self.scope.as_ref() != Some(&scope) {
            *self = Self {
                status: status.clone(),
                scope: Some(scope),
                fewest: nodes,
                before: nodes,
                waiting: vec![],
            };
            return vec![];
        }
        self.fewest = self.fewest.min(nodes);
        for f in &mut self.waiting {
            f.floor = f.floor.min(nodes);
        }
        if self.status != *status {
            let floor = self.before.min(self.fewest);
            let was = self.status["numberAvailable"].as_i64().unwrap_or(0);
            if said < was && said < floor {
                self.waiting.push(Fall {
                    said,
                    was,
                    floor,
                    ms,
                    at: at.to_string(),
                });
            }
            self.before = self.fewest;
            self.fewest = nodes;
            self.status = status.clone();
        }
        let wait = WAIT.as_millis() as u64;
        let (due, waiting): (Vec<Fall>, Vec<Fall>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|f| ms >= f.ms + wait);
        self.waiting = waiting;
        due.into_iter()
            .filter(|f| f.said < f.floor)
            .map(|f| {
                let what = format!(
                    "status.numberAvailable fell to {} from {} while {} node(s) had an available \
                     pod (Ready for minReadySeconds, not terminating) at every instant since the \
                     status before it",
                    f.said, f.was, f.floor
                );
                (f.at, what)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PodState, Workload, WorkloadKind};
    use super::*;

    /// The Unix second the traces start at.
    const T0: i64 = 1_000_000;

    fn daemonset(kind: WorkloadKind, min_ready: i64, status: (i64, i64)) -> Workload {
        Workload {
            kind,
            name: "d".into(),
            uid: "d-uid".into(),
            generation: Some(2),
            deleting: false,
            spec: json!({"minReadySeconds": min_ready, "template": {"spec": {}}}),
            status: json!({"observedGeneration": 2, "desiredNumberScheduled": 2,
                           "numberAvailable": status.0, "updatedNumberScheduled": status.1}),
        }
    }

    /// A pod on `node`, Ready since second `since` of the trace (not Ready: `None`).
    fn pod(name: &str, node: &str, since: Option<i64>, terminating: bool) -> PodState {
        PodState {
            name: name.into(),
            uid: format!("{name}-uid"),
            ready: since.is_some(),
            terminating,
            revision: None,
            instance: None,
            owner: Some("d-uid".into()),
            claims: vec![],
            node: Some(node.into()),
            ready_since: since.map(|s| T0 + s),
        }
    }

    /// One instant a second: the status's (numberAvailable, updatedNumberScheduled), the pods.
    type Trace = Vec<((i64, i64), Vec<PodState>)>;

    /// Feeds `trace` one instant a second, then the last state once the waits ran out;
    /// returns what the rule found.
    fn replay(kind: WorkloadKind, min_ready: i64, trace: &Trace) -> Vec<String> {
        let mut a = Availability::default();
        let mut found = vec![];
        let last = trace.last().expect("a trace").clone();
        let end = trace.len() as u64 + 10;
        for (second, (status, pods)) in trace.iter().chain([&last]).enumerate() {
            let second = if second < trace.len() {
                second as u64
            } else {
                end
            };
            let w = daemonset(kind, min_ready, *status);
            let s = Snapshot {
                workload: &w,
                pods: pods.iter().collect(),
                replica_sets: vec![],
            };
            let heard = a.hear(&s, second * 1000, T0 + second as i64, &format!("t{second}"));
            found.extend(heard.into_iter().map(|(at, what)| format!("{at}: {what}")));
        }
        found
    }

    /// A surging rollout over nodes a and b, one instant a second: each node's new pod is
    /// Ready (at second 1 and 3) before its old one (Ready long since) is deleted, so some pod
    /// is Ready on both nodes at every instant.
    fn surge(status: [(i64, i64); 6]) -> Trace {
        let old_a = pod("old-a", "a", Some(-10), false);
        let old_b = pod("old-b", "b", Some(-10), false);
        let new_a = pod("new-a", "a", Some(1), false);
        let new_b = pod("new-b", "b", Some(3), false);
        let gone = |p: &PodState| pod(&p.name, "a", None, true);
        let gone_b = |p: &PodState| pod(&p.name, "b", None, true);
        vec![
            (status[0], vec![old_a.clone(), old_b.clone()]),
            (status[1], vec![old_a.clone(), old_b.clone(), new_a.clone()]),
            (status[2], vec![gone(&old_a), old_b.clone(), new_a.clone()]),
            (status[3], vec![new_a.clone(), old_b.clone(), new_b.clone()]),
            (
                status[4],
                vec![new_a.clone(), gone_b(&old_b), new_b.clone()],
            ),
            (status[5], vec![new_a, new_b]),
        ]
    }

    #[test]
    fn a_count_no_state_of_the_pods_had_fires() {
        // The recorded bad trace: the status judges each node by its old pod, deleted and
        // terminal, while the new one there is available.
        let bad = surge([(2, 0), (2, 1), (1, 1), (2, 1), (1, 2), (2, 2)]);
        let found = replay(WorkloadKind::AdvancedDaemonSet, 0, &bad);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with(
                "t2: status.numberAvailable fell to 1 from 2 while 2 node(s) had an available pod"
            ),
            "{found:?}"
        );
        // The good one: the count never leaves 2.
        let good = surge([(2, 0), (2, 1), (2, 1), (2, 1), (2, 2), (2, 2)]);
        assert_eq!(
            replay(WorkloadKind::DaemonSet, 0, &good),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_count_some_recent_state_had_is_a_lag_not_a_fall() {
        // A rollout without surge: the old pod goes before the new one comes, and the status
        // says 1 late, once the new pod is Ready, then 2.
        let (a, b) = (
            pod("old-a", "a", Some(0), false),
            pod("old-b", "b", Some(0), false),
        );
        let new_a = pod("new-a", "a", Some(3), false);
        let lagging = vec![
            ((2, 0), vec![a.clone(), b.clone()]),
            ((2, 0), vec![pod("old-a", "a", None, true), b.clone()]),
            ((2, 0), vec![b.clone()]),
            ((2, 0), vec![new_a.clone(), b.clone()]),
            ((1, 1), vec![new_a.clone(), b.clone()]),
            ((2, 1), vec![new_a.clone(), b.clone()]),
        ];
        let none = Vec::<String>::new();
        assert_eq!(replay(WorkloadKind::AdvancedDaemonSet, 0, &lagging), none);
        // The pod watch brings the deletion after the status that counted it: the wait sees
        // the pods on one node, and the count stands.
        let late = vec![
            ((2, 0), vec![a.clone(), b.clone()]),
            ((1, 0), vec![a.clone(), b.clone()]),
            ((1, 0), vec![pod("old-a", "a", None, true), b.clone()]),
        ];
        assert_eq!(replay(WorkloadKind::AdvancedDaemonSet, 0, &late), none);
    }

    #[test]
    fn a_pod_counts_once_ready_for_min_ready_seconds() {
        // With minReadySeconds 2 the new pods (Ready at seconds 1 and 3) are not yet
        // available when the old ones go: a status that falls then is right.
        let early = surge([(2, 0), (2, 1), (1, 1), (2, 1), (1, 2), (2, 2)]);
        assert_eq!(
            replay(WorkloadKind::AdvancedDaemonSet, 2, &early),
            Vec::<String>::new()
        );
        // Ready long enough before the old pod goes, the node has an available pod
        // throughout, and the same fall fires.
        let mut later = early.clone();
        for (_, pods) in &mut later {
            for p in pods.iter_mut().filter(|p| p.name.starts_with("new")) {
                p.ready_since = Some(T0 - 10);
            }
        }
        assert_eq!(replay(WorkloadKind::AdvancedDaemonSet, 2, &later).len(), 2);
        // A rise is never judged, nor another kind's counters.
        let rise = surge([(0, 0), (1, 1), (2, 1), (2, 1), (2, 2), (2, 2)]);
        assert!(replay(WorkloadKind::AdvancedDaemonSet, 0, &rise).is_empty());
        assert!(replay(WorkloadKind::CloneSet, 0, &later).is_empty());
    }
}
