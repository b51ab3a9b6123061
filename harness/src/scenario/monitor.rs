//! Invariants that watch a scenario while it runs. Start with [`Monitor`]: started by the
//! runner before the body, it watches the scenario's namespace (pods, PVCs and every workload
//! kind), keeps a [`Model`] of it and evaluates the pure [`rules`] on each change and on a
//! short tick; stopped when the body ends, it returns its [`Violation`]s (rule, object,
//! instant, what).
//!
//! Findings a correct controller shows for a moment (status lagging the pods, a PVC the
//! controller has yet to delete) become violations only when they persist for
//! [`Settings::grace`]; rollout bounds, partitions and deletions of claims in use are
//! violations at the instant they are seen.
//!
//! The watches, and the objects they show as the rules' states, are in `watch`.

pub mod rules;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::api::{Api, DynamicObject, ListParams};

use self::rules::{ClaimState, PodState, Snapshot, Workload, WorkloadKind};
pub use self::watch::{claim_state, pod_state, workload_state};
use self::watch::{kinds, watch_all};

/// One broken rule: which, on what, when, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Rule name ([`rules::COUNTERS`], ...).
    pub rule: &'static str,
    /// The object ("CloneSet web", "PVC data-web-0").
    pub object: String,
    /// When it was seen (RFC 3339, UTC).
    pub at: String,
    /// What was seen.
    pub what: String,
    /// For a rollout bound, the counter it bounds over the scenario's time.
    pub plot: Option<Plot>,
}

/// A counter a rule bounds, over the scenario's time: drawn under a violation so the instant
/// it crossed its bound is seen with what came before and after.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Plot {
    /// The rule.
    pub rule: String,
    /// The object.
    pub object: String,
    /// What is counted ("unavailable pods").
    pub counter: String,
    /// What bounds it ("maxUnavailable").
    pub bound: String,
    /// `(milliseconds since the monitor started, the counter, its bound)`, each time either
    /// changed.
    pub points: Vec<(u64, i64, i64)>,
}

/// The most points kept of one workload's rollout counters.
const MAX_POINTS: usize = 2000;

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} at {}: {}",
            self.rule, self.object, self.at, self.what
        )
    }
}

/// The violations whose rule is not in `expected` (the rules a scenario declares it breaks).
pub fn unexpected<'a>(found: &'a [Violation], expected: &[impl AsRef<str>]) -> Vec<&'a Violation> {
    found
        .iter()
        .filter(|v| !expected.iter().any(|e| e.as_ref() == v.rule))
        .collect()
}

/// How the monitor judges.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How long a transient finding must persist to be a violation.
    pub grace: Duration,
    /// How long a workload may go without progress while it has something to do.
    pub liveness: Duration,
    /// How often a `FailedCreate` event must repeat to be a finding.
    pub failed_create: i64,
    /// Whether a DaemonSet's `numberAvailable` is judged against every state of its pods the
    /// status could have been computed from ([`rules::availability`], rule
    /// [`rules::AVAILABLE`]).
    pub availability: bool,
}

impl Settings {
    /// The defaults, with the liveness bound at the scenario's converge timeout.
    pub fn with_liveness(liveness: Duration) -> Self {
        Self {
            grace: Duration::from_secs(20),
            liveness,
            failed_create: 3,
            availability: false,
        }
    }
}

/// What the watchers saw change.
#[derive(Debug)]
pub enum Change {
    /// A pod was added or modified.
    Pod(Box<Pod>),
    /// A pod is gone.
    PodGone(String),
    /// A PVC was added or modified.
    Claim(Box<PersistentVolumeClaim>),
    /// A PVC is gone.
    ClaimGone(String),
    /// A workload was added or modified.
    Workload(Box<Workload>),
    /// A workload is gone.
    WorkloadGone(String),
    /// A watch listed every object of its API anew: these UIDs, and no others.
    Relisted(Listed, BTreeSet<String>),
}

/// What a watch lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// Pods.
    Pods,
    /// PVCs.
    Claims,
    /// Workloads of one kind.
    Workloads(WorkloadKind),
}

/// A finding waiting to persist: since when, and what it said.
type Pending = BTreeMap<(&'static str, String), (Instant, String, String)>;

/// What the monitor knows of the namespace, and what it found.
#[derive(Debug, Default)]
pub struct Model {
    pods: BTreeMap<String, PodState>,
    claims: BTreeMap<String, ClaimState>,
    workloads: BTreeMap<String, Workload>,
    /// Workload UID -> desired count it last settled at.
    settled: BTreeMap<String, i64>,
    /// Workload UID -> (update revision, pods at it when first seen).
    baselines: BTreeMap<String, (String, BTreeSet<String>)>,
    /// Workload UID -> (what its status and generation were, since when).
    progress: BTreeMap<String, (String, Instant)>,
    pending: Pending,
    /// Instant findings waiting for a fresh read of their workload.
    suspects: BTreeMap<(&'static str, String), Suspect>,
    /// Rules and objects already reported (each once).
    reported: BTreeSet<(&'static str, String)>,
    violations: Vec<Violation>,
    /// When the first evaluation ran.
    origin: Option<Instant>,
    /// Workload (as described) -> its rollout counters each time they changed.
    traces: BTreeMap<String, Vec<(u64, rules::RolloutCounters)>>,
    /// Workload UID -> what the rule on a DaemonSet's available count remembers.
    availability: BTreeMap<String, rules::availability::Availability>,
}

/// An instant finding (a rollout bound or a partition broken) seen in the watches, held until
/// a fresh read of its workload confirms it: pods and workloads come on separate watches, so a
/// pod the controller made for a new spec can be seen before that spec. The finding stands
/// only if the workload's generation is still the one it was judged against.
#[derive(Debug, Clone)]
pub struct Suspect {
    /// The workload's kind.
    pub kind: WorkloadKind,
    /// Its name.
    pub name: String,
    /// The generation the finding was judged against.
    pub generation: Option<i64>,
    /// When it was seen.
    pub at: String,
    /// What it said.
    pub what: String,
}

/// The instant as RFC 3339 UTC.
fn stamp() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl Model {
    /// Applies one change; deletions of claims are judged here, at the instant they are seen.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Pod(p) => {
                let s = pod_state(&p);
                self.pods.insert(s.uid.clone(), s);
            }
            Change::PodGone(uid) => {
                self.pods.remove(&uid);
            }
            Change::Claim(c) => {
                let s = claim_state(&c);
                let was = self.claims.get(&s.uid).is_some_and(|o| o.terminating);
                if s.terminating && !was {
                    self.claim_deleted(&s.name, false);
                }
                self.claims.insert(s.uid.clone(), s);
            }
            Change::ClaimGone(uid) => {
                if let Some(c) = self.claims.remove(&uid) {
                    self.claim_deleted(&c.name, true);
                }
            }
            Change::Workload(w) => {
                self.workloads.insert(w.uid.clone(), *w);
            }
            Change::WorkloadGone(uid) => {
                self.workloads.remove(&uid);
            }
            Change::Relisted(Listed::Pods, uids) => self.pods.retain(|u, _| uids.contains(u)),
            Change::Relisted(Listed::Claims, uids) => self.claims.retain(|u, _| uids.contains(u)),
            Change::Relisted(Listed::Workloads(kind), uids) => self
                .workloads
                .retain(|u, w| w.kind != kind || uids.contains(u)),
        }
    }

    /// A claim was marked for deletion (`gone`: it is gone). Marking a claim a live pod uses
    /// is how Kubernetes deletes it (the `kubernetes.io/pvc-protection` finalizer holds it
    /// until the pod is gone); only a claim that is gone while a live pod claims it is lost
    /// from under that pod.
    fn claim_deleted(&mut self, claim: &str, gone: bool) {
        let pods: Vec<&PodState> = self.pods.values().collect();
        let mut found = vec![];
        if gone && let Some(what) = rules::claim_in_use(claim, &pods) {
            found.push((rules::PVC_IN_USE, what));
        }
        for w in self.workloads.values() {
            if let Some(what) = rules::claim_retained(w, claim) {
                found.push((rules::PVC_RETAINED, what));
            }
        }
        for (rule, what) in found {
            self.report(rule, format!("PVC {claim}"), what);
        }
    }

    fn report(&mut self, rule: &'static str, object: String, what: String) {
        self.report_at(rule, object, stamp(), what);
    }

    fn report_at(&mut self, rule: &'static str, object: String, at: String, what: String) {
        if self.reported.insert((rule, object.clone())) {
            self.violations.push(Violation {
                rule,
                object,
                at,
                what,
                plot: None,
            });
        }
    }

    /// The pods of `w`: those it controls, and for a Deployment those of its ReplicaSets.
    fn snapshot<'a>(&'a self, w: &'a Workload) -> Snapshot<'a> {
        let replica_sets: Vec<&Workload> = if w.kind == WorkloadKind::Deployment {
            self.workloads
                .values()
                .filter(|r| r.kind == WorkloadKind::ReplicaSet)
                .filter(|r| r.spec["__owner"].as_str() == Some(&w.uid))
                .collect()
        } else {
            vec![]
        };
        let owners: BTreeSet<&str> = if w.kind == WorkloadKind::Deployment {
            replica_sets.iter().map(|r| r.uid.as_str()).collect()
        } else {
            BTreeSet::from([w.uid.as_str()])
        };
        Snapshot {
            workload: w,
            replica_sets,
            pods: self
                .pods
                .values()
                .filter(|p| p.owner.as_deref().is_some_and(|o| owners.contains(o)))
                .collect(),
        }
    }

    /// Evaluates every rule at `now`.
    pub fn evaluate(&mut self, now: Instant, settings: &Settings) {
        let mut instant = vec![];
        let mut lasting = vec![];
        let mut settled = vec![];
        let mut unsettled = vec![];
        let mut baselines = vec![];
        let mut progress = vec![];
        let mut traced = vec![];
        let mut fallen = vec![];
        let origin = *self.origin.get_or_insert(now);
        let ms = now.duration_since(origin).as_millis() as u64;
        let mut availability = std::mem::take(&mut self.availability);
        availability.retain(|uid, _| self.workloads.contains_key(uid));
        let (unix, stamped) = (time::OffsetDateTime::now_utc().unix_timestamp(), stamp());
        for w in self.workloads.values().filter(|w| !w.deleting) {
            let s = self.snapshot(w);
            let object = w.describe();
            if s.settled()
                && let Some(d) = w.desired()
            {
                settled.push((w.uid.clone(), d));
            } else if w
                .desired()
                .is_some_and(|d| self.settled.get(&w.uid).is_some_and(|at| *at != d))
            {
                // A scale began: the count it settled at no longer bounds it, even when the
                // scale returns there (0 -> 2 -> 0) before its pods have gone.
                unsettled.push(w.uid.clone());
            }
            let held = |rule, what| {
                (
                    rule,
                    object.clone(),
                    what,
                    w.kind,
                    w.name.clone(),
                    w.generation,
                )
            };
            let settled_at = self.settled.get(&w.uid).copied();
            if let Some(c) = s.rollout_counters(settled_at) {
                traced.push((object.clone(), c));
            }
            for (rule, what) in s.rollout(settled_at) {
                instant.push(held(rule, what));
            }
            if let Some(rev) = w.update_revision() {
                let at_rev: BTreeSet<String> = s
                    .pods
                    .iter()
                    .filter(|p| {
                        p.revision
                            .as_deref()
                            .is_some_and(|l| rules::same_revision(l, rev))
                    })
                    .map(|p| p.uid.clone())
                    .collect();
                let (baseline, first) = match self.baselines.get(&w.uid) {
                    Some((r, b)) if r == rev => (b.clone(), false),
                    _ => (at_rev.clone(), true),
                };
                match s.partition_breach(&baseline) {
                    // A controller is judged on what it did once it observed the spec: pods it
                    // made or updated at the update revision before it caught up with the
                    // latest generation (a partition raised a moment before, seen by it only
                    // after) stand, as those a lower partition allowed do.
                    Some(_) if !w.caught_up() => {
                        let mut grown = baseline;
                        grown.extend(at_rev);
                        baselines.push((w.uid.clone(), (rev.to_string(), grown)));
                    }
                    Some(what) => {
                        instant.push(held(rules::PARTITION, what));
                        if first {
                            baselines.push((w.uid.clone(), (rev.to_string(), baseline)));
                        }
                    }
                    // What the partition allowed so far stands: a partition raised later in
                    // the rollout holds back only the pods not yet updated.
                    None => {
                        let mut grown = baseline;
                        grown.extend(at_rev);
                        baselines.push((w.uid.clone(), (rev.to_string(), grown)));
                    }
                }
            }
            if let Some(what) = s.counters() {
                lasting.push((rules::COUNTERS, object.clone(), what));
            }
            if settings.availability {
                let heard = availability.entry(w.uid.clone()).or_default();
                for (at, what) in heard.hear(&s, ms, unix, &stamped) {
                    fallen.push((object.clone(), at, what));
                }
            }
            for c in self.claims.values() {
                if let Some(what) = rules::claim_left_behind(w, c, &s.pods) {
                    lasting.push((rules::PVC_LEFT_BEHIND, format!("PVC {}", c.name), what));
                }
            }
            let seen = format!("{:?} {}", w.generation, w.status);
            progress.push((w.uid.clone(), seen, s.complete(), object));
        }
        self.availability = availability;
        for (object, at, what) in fallen {
            self.report_at(rules::AVAILABLE, object, at, what);
        }
        for (object, c) in traced {
            let trace = self.traces.entry(object).or_default();
            if trace.len() < MAX_POINTS && trace.last().is_none_or(|(_, last)| *last != c) {
                trace.push((ms, c));
            }
        }
        for uid in unsettled {
            self.settled.remove(&uid);
        }
        self.settled.extend(settled);
        self.baselines.extend(baselines);
        for (rule, object, what, kind, name, generation) in instant {
            if self.reported.contains(&(rule, object.clone())) {
                continue;
            }
            self.suspects.entry((rule, object)).or_insert(Suspect {
                kind,
                name,
                generation,
                at: stamp(),
                what,
            });
        }
        self.persist(now, settings.grace, lasting);
        self.liveness(now, settings.liveness, progress);
    }

    /// Keeps the findings that persisted for `grace` (reported with the instant they began),
    /// forgets those no longer seen.
    fn persist(
        &mut self,
        now: Instant,
        grace: Duration,
        found: Vec<(&'static str, String, String)>,
    ) {
        let mut next: Pending = BTreeMap::new();
        for (rule, object, what) in found {
            let key = (rule, object);
            let (since, at) = match self.pending.get(&key) {
                Some((since, at, w)) if *w == what => (*since, at.clone()),
                _ => (now, stamp()),
            };
            next.insert(key, (since, at, what));
        }
        self.pending = next;
        let due: Vec<_> = self
            .pending
            .iter()
            .filter(|(_, (since, _, _))| now.duration_since(*since) >= grace)
            .map(|((rule, object), (_, at, what))| {
                (*rule, object.clone(), at.clone(), what.clone())
            })
            .collect();
        for (rule, object, at, what) in due {
            self.report_at(rule, object, at, format!("{what} (for {grace:?} or more)"));
        }
    }

    /// Reports workloads that have had something to do and changed nothing for `bound`.
    fn liveness(
        &mut self,
        now: Instant,
        bound: Duration,
        seen: Vec<(String, String, bool, String)>,
    ) {
        for (uid, state, complete, object) in seen {
            let since = match self.progress.get(&uid) {
                Some((s, since)) if *s == state => *since,
                _ => now,
            };
            self.progress.insert(uid, (state, since));
            if !complete && now.duration_since(since) >= bound {
                self.report(
                    rules::LIVENESS,
                    object,
                    format!("no progress for {bound:?} while its pods do not match its spec"),
                );
            }
        }
    }

    /// The instant findings waiting for a fresh read of their workload ([`Model::confirm`]).
    pub fn take_suspects(&mut self) -> Vec<((&'static str, String), Suspect)> {
        std::mem::take(&mut self.suspects).into_iter().collect()
    }

    /// Reports a held finding if its workload, read afresh, still has the generation it was
    /// judged against (`fresh`: its generation now, `None` when it is gone).
    pub fn confirm(&mut self, key: (&'static str, String), suspect: Suspect, fresh: Option<i64>) {
        if fresh.is_some() && fresh == suspect.generation {
            self.report_at(key.0, key.1, suspect.at, suspect.what);
        }
    }

    /// Holds a finding whose workload could not be read afresh (a restarted apiserver, a
    /// broken connection) for the next read, or, on the `last` read (the monitor stopping),
    /// reports it as seen: unknown is not confirmed while another read may still tell.
    pub fn unread(&mut self, key: (&'static str, String), suspect: Suspect, last: bool) {
        if last {
            self.report_at(key.0, key.1, suspect.at, suspect.what);
        } else {
            self.suspects.entry(key).or_insert(suspect);
        }
    }

    /// The violations found so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// The violations, each rollout bound's with the plot of the counter it bounds.
    pub fn finish(mut self) -> Vec<Violation> {
        for v in &mut self.violations {
            let Some(trace) = self.traces.get(&v.object) else {
                continue;
            };
            let (counter, bound, points): (&str, &str, Vec<(u64, i64, i64)>) = match v.rule {
                rules::MAX_UNAVAILABLE => (
                    "unavailable pods",
                    "maxUnavailable",
                    trace
                        .iter()
                        .map(|(t, c)| (*t, c.unavailable, c.max_unavailable))
                        .collect(),
                ),
                rules::MAX_SURGE => (
                    "live pods",
                    "desired + maxSurge",
                    trace
                        .iter()
                        .map(|(t, c)| (*t, c.live, c.desired + c.max_surge))
                        .collect(),
                ),
                _ => continue,
            };
            v.plot = Some(Plot {
                rule: v.rule.into(),
                object: v.object.clone(),
                counter: counter.into(),
                bound: bound.into(),
                points,
            });
        }
        self.violations
    }
}

/// Reads the workload of every held finding afresh and reports those it confirms; one it could
/// not read waits for the next read, but on the `last` ([`Model::unread`]).
async fn confirm_suspects(model: &mut Model, client: &kube::Client, namespace: &str, last: bool) {
    for (key, suspect) in model.take_suspects() {
        let Some((_, ar)) = kinds().into_iter().find(|(k, _)| *k == suspect.kind) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        match api.get_opt(&suspect.name).await {
            Ok(o) => model.confirm(key, suspect, o.and_then(|o| o.metadata.generation)),
            Err(e) => {
                tracing::debug!("monitor: read {} afresh: {e}", suspect.name);
                model.unread(key, suspect, last);
            }
        }
    }
}

/// Watches a scenario's namespace while its body runs; [`Monitor::stop`] returns what it
/// found.
pub struct Monitor {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Model>,
    client: kube::Client,
    namespace: String,
    settings: Settings,
}

impl Monitor {
    /// Starts watching `namespace`.
    pub fn start(client: &kube::Client, namespace: &str, settings: Settings) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let mut stream = watch_all(client, namespace);
        let (client2, ns) = (client.clone(), namespace.to_string());
        let task = tokio::spawn(async move {
            let mut model = Model::default();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    Some(change) = stream.next() => model.apply(change),
                    _ = tick.tick() => {}
                }
                model.evaluate(Instant::now(), &settings);
                confirm_suspects(&mut model, &client2, &ns, false).await;
            }
            model.evaluate(Instant::now(), &settings);
            confirm_suspects(&mut model, &client2, &ns, true).await;
            model
        });
        Self {
            stop,
            task,
            client: client.clone(),
            namespace: namespace.into(),
            settings,
        }
    }

    /// Stops watching; returns the violations seen, those of repeated `FailedCreate` events
    /// included.
    pub async fn stop(self) -> Result<Vec<Violation>, kube::Error> {
        let _ = self.stop.send(());
        let mut model = match self.task.await {
            Ok(m) => m,
            Err(e) => {
                return Ok(vec![Violation {
                    rule: "monitor",
                    object: self.namespace,
                    at: stamp(),
                    what: format!("the monitor ended abnormally: {e}"),
                    plot: None,
                }]);
            }
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        for e in events.list(&ListParams::default()).await?.items {
            let count = e.count.unwrap_or(1).into();
            if e.type_.as_deref() == Some("Warning")
                && rules::failed_create(
                    e.reason.as_deref().unwrap_or_default(),
                    count,
                    self.settings.failed_create,
                )
            {
                let o = &e.involved_object;
                model.report_at(
                    rules::FAILED_CREATE,
                    format!(
                        "{} {}",
                        o.kind.as_deref().unwrap_or_default(),
                        o.name.as_deref().unwrap_or_default()
                    ),
                    e.last_timestamp
                        .map(|t| t.0.to_string())
                        .unwrap_or_else(stamp),
                    format!(
                        "pods failed to be created {count} times: {}",
                        e.message.unwrap_or_default()
                    ),
                );
            }
        }
        Ok(model.finish())
    }
}

#[cfg(test)]
mod tests;
