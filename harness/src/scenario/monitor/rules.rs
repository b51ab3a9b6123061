//! The monitor's rules, pure: functions over a [`Snapshot`] (one workload, its pods) or over
//! the namespace's pods and PVCs, returning what they find. No I/O and no clock: the
//! [`super::Monitor`] feeds them what it watched and decides when a finding becomes a
//! violation (at once, or after it persisted for a grace window).

use std::collections::BTreeSet;

use serde_json::Value;

pub mod availability;

/// Status counters, or the revision the status says every pod is at, disagree with the pods
/// observed.
pub const COUNTERS: &str = "status-counters";
/// A DaemonSet's `numberAvailable` fell below every count its pods had while the status could
/// have been computed ([`availability`]).
pub const AVAILABLE: &str = "status-available";
/// More pods unavailable during a rollout than the strategy allows.
pub const MAX_UNAVAILABLE: &str = "max-unavailable";
/// More pods than replicas plus the strategy's surge.
pub const MAX_SURGE: &str = "max-surge";
/// A pod the partition protects was updated (judged from the pods' revision labels).
pub const PARTITION: &str = "partition";
/// A rollout or scale the spec allows made no progress within the bound.
pub const LIVENESS: &str = "liveness";
/// A PVC was deleted while a live pod still mounts it.
pub const PVC_IN_USE: &str = "pvc-deleted-in-use";
/// A PVC the retention policy keeps was deleted.
pub const PVC_RETAINED: &str = "pvc-deleted-retained";
/// A PVC the retention policy deletes was left behind.
pub const PVC_LEFT_BEHIND: &str = "pvc-left-behind";
/// A workload's pods keep failing to be created.
pub const FAILED_CREATE: &str = "failed-create";

/// The label CloneSets, StatefulSets and DaemonSets put the pod's revision in.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// The label tying a CloneSet's pod to its PVCs.
pub const INSTANCE_LABEL: &str = "apps.kruise.io/cloneset-instance-id";

/// The workload kinds the monitor watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// OpenKruise CloneSet.
    CloneSet,
    /// OpenKruise Advanced StatefulSet.
    AdvancedStatefulSet,
    /// OpenKruise Advanced DaemonSet.
    AdvancedDaemonSet,
    /// apps/v1 Deployment (its pods are those of its ReplicaSets).
    Deployment,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

impl WorkloadKind {
    /// How violations name it.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::CloneSet => "CloneSet",
            WorkloadKind::AdvancedStatefulSet => "StatefulSet.apps.kruise.io",
            WorkloadKind::AdvancedDaemonSet => "DaemonSet.apps.kruise.io",
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }

    fn daemon(self) -> bool {
        matches!(
            self,
            WorkloadKind::DaemonSet | WorkloadKind::AdvancedDaemonSet
        )
    }

    fn stateful(self) -> bool {
        matches!(
            self,
            WorkloadKind::StatefulSet | WorkloadKind::AdvancedStatefulSet
        )
    }
}

/// A workload as watched: its identity, spec and status.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Kind.
    pub kind: WorkloadKind,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Whether it is being deleted.
    pub deleting: bool,
    /// `spec`.
    pub spec: Value,
    /// `status`.
    pub status: Value,
}

impl Workload {
    /// For a StatefulSet (native or Advanced), whether it keeps a pod (and its claims) at an
    /// ordinal: one of the first `desired` ordinals from `spec.ordinals.start` that
    /// `spec.reserveOrdinals` (numbers, or ranges `"a-b"`) does not reserve.
    pub fn wants_ordinal(&self) -> impl Fn(i64) -> bool {
        let index = self.wanted_index();
        move |ordinal| index(ordinal).is_some()
    }

    /// For a StatefulSet (native or Advanced), the position of an ordinal in the sequence of
    /// ordinals it wants ([`Self::wants_ordinal`]), `None` for one it does not want. A
    /// partition counts positions, not ordinals: with `ordinals.start` 3 and ordinal 4
    /// reserved, ordinal 5 is the second pod (position 1).
    pub fn wanted_index(&self) -> impl Fn(i64) -> Option<i64> {
        let reserved: Vec<(i64, i64)> = self.spec["reserveOrdinals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| match r.as_i64() {
                Some(n) => Some((n, n)),
                None => {
                    let (a, b) = r.as_str()?.split_once('-')?;
                    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
                }
            })
            .collect();
        let start = self.spec["ordinals"]["start"].as_i64().unwrap_or(0);
        let desired = self.desired().unwrap_or(0);
        move |ordinal| {
            let free = |o: &i64| !reserved.iter().any(|(a, b)| (a..=b).contains(&o));
            if ordinal < start || !free(&ordinal) {
                return None;
            }
            // Counted up to the ordinal, not to `desired` (which a trial may make huge).
            let index = (start..ordinal).filter(free).count() as i64;
            (index < desired).then_some(index)
        }
    }

    /// "CloneSet web".
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind.name(), self.name)
    }

    /// The controller has observed the latest generation.
    pub fn caught_up(&self) -> bool {
        let observed = self.status["observedGeneration"].as_i64();
        observed.is_some() && observed >= self.generation
    }

    /// Pods it wants: `spec.replicas` (default 1), or for DaemonSets the desired number
    /// scheduled its status reports.
    pub fn desired(&self) -> Option<i64> {
        if self.kind.daemon() {
            self.status["desiredNumberScheduled"].as_i64()
        } else {
            Some(self.spec["replicas"].as_i64().unwrap_or(1))
        }
    }

    /// The revision pods are updated to, when the kind reports one.
    pub fn update_revision(&self) -> Option<&str> {
        match self.kind {
            WorkloadKind::CloneSet | WorkloadKind::StatefulSet => {
                self.status["updateRevision"].as_str()
            }
            WorkloadKind::AdvancedStatefulSet => self.status["updateRevision"].as_str(),
            WorkloadKind::AdvancedDaemonSet => self.status["daemonSetHash"].as_str(),
            _ => None,
        }
    }

    /// The revision the status says every pod is at once a rollout is over, when the kind
    /// reports one.
    fn current_revision(&self) -> Option<&str> {
        match self.kind {
            WorkloadKind::CloneSet
            | WorkloadKind::StatefulSet
            | WorkloadKind::AdvancedStatefulSet => self.status["currentRevision"].as_str(),
            _ => None,
        }
    }

    /// Updates are paused by the spec.
    fn paused(&self) -> bool {
        self.spec["paused"].as_bool() == Some(true)
            || self.spec["updateStrategy"]["paused"].as_bool() == Some(true)
            || self.spec["updateStrategy"]["rollingUpdate"]["paused"].as_bool() == Some(true)
    }
}

/// A pod as watched.
#[derive(Debug, Clone, Default)]
pub struct PodState {
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Its Ready condition is True.
    pub ready: bool,
    /// It has a deletion timestamp.
    pub terminating: bool,
    /// Its `controller-revision-hash` label.
    pub revision: Option<String>,
    /// Its `apps.kruise.io/cloneset-instance-id` label.
    pub instance: Option<String>,
    /// The UID of its controller.
    pub owner: Option<String>,
    /// The PVCs its volumes claim.
    pub claims: Vec<String>,
    /// The node it is bound to.
    pub node: Option<String>,
    /// When its Ready condition last became True (Unix seconds), while it is True.
    pub ready_since: Option<i64>,
}

impl PodState {
    /// The ordinal a StatefulSet gives it (the name's last number).
    pub fn ordinal(&self) -> Option<i64> {
        self.name.rsplit('-').next()?.parse().ok()
    }

    fn at(&self, revision: &str) -> bool {
        self.revision
            .as_deref()
            .is_some_and(|r| same_revision(r, revision))
    }
}

/// One workload and its pods (for a Deployment, the pods of its ReplicaSets).
#[derive(Debug, Clone)]
pub struct Snapshot<'a> {
    /// The workload.
    pub workload: &'a Workload,
    /// Its pods, terminating ones included.
    pub pods: Vec<&'a PodState>,
    /// For a Deployment, its ReplicaSets (none for other kinds).
    pub replica_sets: Vec<&'a Workload>,
}

/// What a rollout's bounds are measured on, at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolloutCounters {
    /// Desired pods.
    pub desired: i64,
    /// Desired minus ready pods.
    pub unavailable: i64,
    /// The strategy's maxUnavailable, scaled on `desired`.
    pub max_unavailable: i64,
    /// Live pods (for a Deployment, its ReplicaSets' replicas).
    pub live: i64,
    /// The strategy's maxSurge, scaled on `desired`.
    pub max_surge: i64,
}

/// `label` names `revision`, in full (`web-7d9f`) or by its short hash (`7d9f`).
pub fn same_revision(label: &str, revision: &str) -> bool {
    let short = |s: &str| s.rsplit('-').next().unwrap_or(s).to_string();
    label == revision || short(label) == short(revision)
}

/// An int-or-percent field scaled on `total`, rounding up or down; `None` when absent.
pub fn scaled(v: &Value, total: i64, round_up: bool) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let pct: i64 = v.as_str()?.strip_suffix('%')?.parse().ok()?;
    let x = pct * total;
    Some(if round_up { (x + 99) / 100 } else { x / 100 })
}

impl Snapshot<'_> {
    fn active(&self) -> impl Iterator<Item = &&PodState> {
        self.pods.iter().filter(|p| !p.terminating)
    }

    fn ready(&self) -> i64 {
        self.active().filter(|p| p.ready).count() as i64
    }

    fn updated(&self, revision: &str) -> i64 {
        self.active().filter(|p| p.at(revision)).count() as i64
    }

    /// Caught up, as many live pods as desired, all ready, none terminating, and for a
    /// StatefulSet each at an ordinal it wants: the state a rollout's bounds are measured
    /// from. (Scaled down while an update recreates a pod, a StatefulSet can hold, for a
    /// moment, as many pods as it wants but one of them at an ordinal it is removing: it makes
    /// the missing one before it deletes the condemned one.)
    pub fn settled(&self) -> bool {
        let w = self.workload;
        w.caught_up()
            && !self.pods.iter().any(|p| p.terminating)
            && Some(self.active().count() as i64) == w.desired()
            && Some(self.ready()) == w.desired()
            && (!w.kind.stateful() || {
                let wants = w.wants_ordinal();
                self.active().all(|p| p.ordinal().is_none_or(&wants))
            })
    }

    /// Settled and, unless paused, as many pods at the update revision as the partition
    /// lets through: nothing left for the controller to do.
    pub fn complete(&self) -> bool {
        let w = self.workload;
        if !self.settled() {
            return false;
        }
        match (w.update_revision(), w.paused()) {
            (Some(rev), false) => {
                let desired = w.desired().unwrap_or(0);
                self.updated(rev) >= desired - self.partition().unwrap_or(0).min(desired)
            }
            _ => true,
        }
    }

    /// Status counters that disagree with the pods, and a status that says the rollout is
    /// over while a live pod is at another revision, once the
    /// controller has observed the latest generation and no pod is terminating (a transition
    /// the status may lag).
    pub fn counters(&self) -> Option<String> {
        let w = self.workload;
        if !w.caught_up() || self.pods.iter().any(|p| p.terminating) {
            return None;
        }
        let n = self.active().count() as i64;
        let mut fields = vec![];
        if w.kind.daemon() {
            fields.push(("numberReady", self.ready(), "ready pods"));
            fields.push(("currentNumberScheduled", n, "pods"));
        } else {
            fields.push(("replicas", n, "pods"));
            fields.push(("readyReplicas", self.ready(), "ready pods"));
        }
        if let Some(rev) = w.update_revision()
            && !w.kind.daemon()
        {
            fields.push((
                "updatedReplicas",
                self.updated(rev),
                "pods at updateRevision",
            ));
        }
        let mut wrong: Vec<String> = fields
            .into_iter()
            .filter_map(|(field, seen, what)| {
                let status = w.status[field].as_i64().unwrap_or(0);
                (status != seen).then(|| format!("status.{field} is {status}, {what} {seen}"))
            })
            .collect();
        wrong.extend(self.revision_claim());
        (!wrong.is_empty()).then(|| wrong.join(", "))
    }

    /// The status's claim that the rollout is over (`currentRevision` is the update
    /// revision) against the pods' revision labels: every live pod must then be at it.
    fn revision_claim(&self) -> Option<String> {
        let w = self.workload;
        let rev = w.update_revision()?;
        if w.current_revision()? != rev {
            return None;
        }
        let elsewhere: Vec<String> = self
            .active()
            .filter(|p| !p.at(rev))
            .map(|p| {
                format!(
                    "{} ({})",
                    p.name,
                    p.revision.as_deref().unwrap_or("no revision")
                )
            })
            .collect();
        (!elsewhere.is_empty()).then(|| {
            format!(
                "status.currentRevision is updateRevision {rev}, pods at another revision: {}",
                elsewhere.join(", ")
            )
        })
    }

    /// The strategy's `(maxUnavailable, maxSurge)` for `desired` pods; `None` when it bounds
    /// nothing (Recreate, OnDelete, a bare ReplicaSet). A negative bound the API admitted
    /// bounds as zero: no instant can honour "fewer than none", so taken literally it would
    /// fire at every instant and say only what admission already said of the value.
    pub fn bounds(&self, desired: i64) -> Option<(i64, i64)> {
        self.literal_bounds(desired)
            .map(|(unavailable, surge)| (unavailable.max(0), surge.max(0)))
    }

    fn literal_bounds(&self, desired: i64) -> Option<(i64, i64)> {
        let w = self.workload;
        let s = &w.spec;
        match w.kind {
            WorkloadKind::CloneSet => {
                let u = &s["updateStrategy"];
                let surge = scaled(&u["maxSurge"], desired, true).unwrap_or(0);
                let surge = if w.paused() { 0 } else { surge };
                let unavailable = scaled(&u["maxUnavailable"], desired, surge == 0)
                    .unwrap_or_else(|| scaled(&"20%".into(), desired, surge == 0).unwrap_or(0));
                Some((unavailable, surge))
            }
            WorkloadKind::Deployment => {
                if s["strategy"]["type"].as_str() == Some("Recreate") {
                    return None;
                }
                let r = &s["strategy"]["rollingUpdate"];
                let surge = scaled(&r["maxSurge"], desired, true)
                    .unwrap_or_else(|| scaled(&"25%".into(), desired, true).unwrap_or(0));
                let unavailable = scaled(&r["maxUnavailable"], desired, false)
                    .unwrap_or_else(|| scaled(&"25%".into(), desired, false).unwrap_or(0));
                Some((
                    if surge + unavailable == 0 {
                        1
                    } else {
                        unavailable
                    },
                    surge,
                ))
            }
            k if k.stateful() || k.daemon() => {
                if s["updateStrategy"]["type"].as_str() == Some("OnDelete") {
                    return None;
                }
                let r = &s["updateStrategy"]["rollingUpdate"];
                let surge = scaled(&r["maxSurge"], desired, true).unwrap_or(0);
                let unavailable = scaled(&r["maxUnavailable"], desired, k.daemon())
                    .unwrap_or(1)
                    .max(if surge == 0 { 1 } else { 0 });
                Some((unavailable, surge))
            }
            _ => None,
        }
    }

    /// The counters a rollout's bounds judge, for a workload whose desired count is the one it
    /// last settled at (a scale in progress is bounded by neither); `None` when unbounded. A
    /// count read from the status (a daemon's) is the count of the generation the status
    /// observed: until it has observed the spec, it bounds nothing (a daemon let onto its
    /// nodes makes pods before its status counts them).
    pub fn rollout_counters(&self, settled_at: Option<i64>) -> Option<RolloutCounters> {
        let w = self.workload;
        let desired = match w.desired() {
            _ if w.kind.daemon() && !w.caught_up() => return None,
            Some(d) if Some(d) == settled_at => d,
            _ => return None,
        };
        let (max_unavailable, max_surge) = self.bounds(desired)?;
        // A Deployment bounds its ReplicaSets' replicas; their pods follow, each ReplicaSet on
        // its own (a new ReplicaSet's pod can come before the pod an old one was scaled down
        // by goes: one more pod than the bound for a moment).
        let live = if self.workload.kind == WorkloadKind::Deployment {
            self.replica_sets
                .iter()
                .filter(|rs| !rs.deleting)
                .map(|rs| rs.spec["replicas"].as_i64().unwrap_or(1))
                .sum::<i64>()
        } else {
            self.active().count() as i64
        };
        Some(RolloutCounters {
            desired,
            unavailable: desired - self.ready(),
            max_unavailable,
            live,
            max_surge,
        })
    }

    /// maxUnavailable and maxSurge findings ([`Self::rollout_counters`] over their bounds).
    pub fn rollout(&self, settled_at: Option<i64>) -> Vec<(&'static str, String)> {
        let Some(c) = self.rollout_counters(settled_at) else {
            return vec![];
        };
        let RolloutCounters {
            desired,
            unavailable,
            max_unavailable,
            live,
            max_surge,
        } = c;
        let mut found = vec![];
        if unavailable > max_unavailable {
            let names: Vec<String> = self
                .pods
                .iter()
                .filter(|p| p.terminating || !p.ready)
                .map(|p| {
                    let why = if p.terminating {
                        "terminating"
                    } else {
                        "not ready"
                    };
                    format!("{} ({why})", p.name)
                })
                .collect();
            found.push((
                MAX_UNAVAILABLE,
                format!(
                    "{unavailable} of {desired} pods unavailable, maxUnavailable allows \
                     {max_unavailable}: {}",
                    names.join(", ")
                ),
            ));
        }
        if live > desired + max_surge {
            let what = if self.workload.kind == WorkloadKind::Deployment {
                "replicas of its ReplicaSets"
            } else {
                "pods"
            };
            found.push((
                MAX_SURGE,
                format!("{live} {what} for {desired} desired, maxSurge allows {max_surge}"),
            ));
        }
        found
    }

    /// The partition: CloneSet `updateStrategy.partition` (pods kept at the old revision,
    /// int or percent rounded up), StatefulSet `rollingUpdate.partition` (the ordinal below
    /// which pods are not updated).
    pub fn partition(&self) -> Option<i64> {
        let w = self.workload;
        let desired = w.desired().unwrap_or(0);
        match w.kind {
            WorkloadKind::CloneSet => {
                let p = &w.spec["updateStrategy"]["partition"];
                let v = scaled(p, desired, true)?;
                let pct = p.as_str().is_some_and(|s| s != "100%");
                Some(if desired > 1 && v == desired && pct {
                    desired - 1
                } else {
                    v
                })
            }
            k if k.stateful() => w.spec["updateStrategy"]["rollingUpdate"]["partition"].as_i64(),
            _ => None,
        }
    }

    /// Whether the pods and the status agree that the rollout to `rev` is over: every live
    /// pod is at it, and the status names it as the current revision. A partition raised
    /// after that holds nothing back (its pods were updated while a lower one allowed them);
    /// a status that says so while a pod is elsewhere is [`Self::counters`]' finding, and the
    /// partition is still judged.
    fn rollout_over(&self, rev: &str) -> bool {
        self.workload
            .current_revision()
            .is_some_and(|c| same_revision(c, rev))
            && self.active().all(|p| p.at(rev))
    }

    /// Pods the partition protects that are at the update revision, judged from the pods'
    /// revision labels whatever the status says (unless pods and status agree the rollout is
    /// over); `baseline` are the pods already at the update revision when the monitor first saw
    /// it (not the controller's doing under this partition).
    ///
    /// A StatefulSet's partition protects the pods at the first `partition` positions among
    /// the ordinals it wants ([`Workload::wanted_index`]); a CloneSet's (and an Advanced
    /// StatefulSet's under `unorderedUpdate`) keeps that many pods at the old revision, so no
    /// more pods than the rest may be updated. Pods beyond the desired count (a scale-down or
    /// a surge under way) may be at either revision.
    pub fn partition_breach(&self, baseline: &BTreeSet<String>) -> Option<String> {
        let w = self.workload;
        let (Some(rev), Some(partition)) = (w.update_revision(), self.partition()) else {
            return None;
        };
        if partition <= 0 || self.rollout_over(rev) {
            return None;
        }
        // With unorderedUpdate (Advanced StatefulSet), the partition is a number of pods kept
        // at the old revision, whichever their ordinals, as a CloneSet's is.
        let unordered = !w.spec["updateStrategy"]["rollingUpdate"]["unorderedUpdate"].is_null();
        if w.kind.stateful() && !unordered {
            let index = w.wanted_index();
            let breached: Vec<String> = self
                .active()
                .filter(|p| p.at(rev) && !baseline.contains(&p.uid))
                .filter_map(|p| {
                    let ordinal = p.ordinal()?;
                    let i = index(ordinal)?;
                    (i < partition).then(|| {
                        if i == ordinal {
                            p.name.clone()
                        } else {
                            format!("{} (position {i} among the ordinals it wants)", p.name)
                        }
                    })
                })
                .collect();
            return (!breached.is_empty()).then(|| {
                format!(
                    "pods below partition {partition} at updateRevision {rev}: {}",
                    breached.join(", ")
                )
            });
        }
        let desired = w.desired().unwrap_or(0);
        let surplus = (self.active().count() as i64 - desired).max(0);
        let allowed = (desired - partition).max(0) + surplus;
        let updated = self.updated(rev);
        let kept = self
            .active()
            .filter(|p| p.at(rev) && baseline.contains(&p.uid))
            .count() as i64;
        (updated > allowed.max(kept)).then(|| {
            let beyond = if surplus > 0 {
                format!(" and {surplus} pods beyond it")
            } else {
                String::new()
            };
            format!(
                "{updated} pods at updateRevision {rev}, partition {partition} of {desired}{beyond} \
                 allows {allowed}"
            )
        })
    }
}

/// A PVC as watched.
#[derive(Debug, Clone, Default)]
pub struct ClaimState {
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// It has a deletion timestamp.
    pub terminating: bool,
    /// Its `apps.kruise.io/cloneset-instance-id` label.
    pub instance: Option<String>,
    /// UIDs of its owners.
    pub owners: Vec<String>,
}

/// A PVC being deleted while a live (not terminating) pod claims it.
pub fn claim_in_use(claim: &str, pods: &[&PodState]) -> Option<String> {
    let users: Vec<&str> = pods
        .iter()
        .filter(|p| !p.terminating && p.claims.iter().any(|c| c == claim))
        .map(|p| p.name.as_str())
        .collect();
    (!users.is_empty()).then(|| {
        format!(
            "PVC {claim} deleted while live pod(s) {} claim it",
            users.join(", ")
        )
    })
}

/// The StatefulSet PVC `<template>-<workload>-<ordinal>` this claim is, by its ordinal.
fn stateful_ordinal(w: &Workload, claim: &str) -> Option<i64> {
    // Only a StatefulSet's claims end in an ordinal: a CloneSet's end in its pod's instance
    // id, which may be all digits (`data-disk-88278`).
    if !w.kind.stateful() {
        return None;
    }
    w.spec["volumeClaimTemplates"]
        .as_array()?
        .iter()
        .filter_map(|t| t["metadata"]["name"].as_str())
        .find_map(|t| {
            claim
                .strip_prefix(&format!("{t}-{}-", w.name))?
                .parse()
                .ok()
        })
}

/// A StatefulSet's retention policy for PVCs of ordinal `ordinal`: `Some(true)` when they are
/// deleted, `Some(false)` when kept, `None` when the claim is not the workload's.
fn stateful_retention(w: &Workload, claim: &str) -> Option<bool> {
    let ordinal = stateful_ordinal(w, claim)?;
    let policy = &w.spec["persistentVolumeClaimRetentionPolicy"];
    let scaled = !w.wants_ordinal()(ordinal);
    let field = if w.deleting {
        "whenDeleted"
    } else {
        "whenScaled"
    };
    Some(if w.deleting || scaled {
        policy[field].as_str() == Some("Delete")
    } else {
        false
    })
}

/// A PVC of `w` that was deleted although its retention policy keeps it (StatefulSets: an
/// ordinal below replicas, or a policy of Retain).
pub fn claim_retained(w: &Workload, claim: &str) -> Option<String> {
    (stateful_retention(w, claim) == Some(false)).then(|| {
        format!(
            "PVC {claim} deleted although {}'s retention policy keeps it ({})",
            w.describe(),
            w.spec["persistentVolumeClaimRetentionPolicy"]
        )
    })
}

/// A PVC of `w` still there although the policy deletes it: a StatefulSet claim beyond
/// replicas under `whenScaled: Delete`, a CloneSet claim whose instance has no pod left.
pub fn claim_left_behind(w: &Workload, claim: &ClaimState, pods: &[&PodState]) -> Option<String> {
    if claim.terminating {
        return None;
    }
    let left = match w.kind {
        k if k.stateful() => stateful_retention(w, &claim.name) == Some(true),
        WorkloadKind::CloneSet => {
            claim.owners.contains(&w.uid)
                && claim.instance.is_some()
                && !pods.iter().any(|p| p.instance == claim.instance)
        }
        _ => false,
    };
    left.then(|| {
        format!(
            "PVC {} outlives what {}'s policy keeps",
            claim.name,
            w.describe()
        )
    })
}

/// A Warning `FailedCreate` event repeated at least `threshold` times on a workload.
pub fn failed_create(reason: &str, count: i64, threshold: i64) -> bool {
    reason == "FailedCreate" && count >= threshold
}

#[cfg(test)]
mod tests;
