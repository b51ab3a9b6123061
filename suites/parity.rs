//! Differential parity: each OpenKruise workload against its native counterpart (CloneSet and
//! Deployment, Advanced StatefulSet and StatefulSet, Advanced DaemonSet and DaemonSet,
//! BroadcastJob and Job, AdvancedCronJob and CronJob) on the same pod templates and strategy
//! values, from one table of [`cases`]. Admission must agree (both admitted or both refused),
//! and admitted pairs must settle on the same number of ready pods (for jobs: of succeeded
//! pods). A disagreement is a finding that quotes both answers, unless [`DIFFERENCES`]
//! documents it.

use std::collections::BTreeMap;

use anyhow::bail;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::scenario::steps;
use crate::scenario::wait::{Check, until_all};
use crate::scenario::workload::{IMAGE_V1, refusal};
use crate::scenario::{Ctx, FINDING, Scenario};

/// The scenarios of this suite: one per pair.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario(
            "parity/cloneset-agrees-with-deployment",
            "CloneSet and Deployment admit the same templates and strategies and settle on the same ready pods",
            &["smoke", "parity", "cloneset"],
            |ctx| run(ctx, Pair::CloneSet).boxed(),
        )
        // Some 60 CloneSets created at once: the manager's status updates were seen more than
        // 10 s behind their pods on a loaded 2-core host. The parity is in the admissions and
        // the ready pods; the CloneSet counters are checked by the cloneset suites. The
        // `node-selector-unmatched` case's pods stay pending on both sides by design, so a
        // table that runs longer than the liveness bound after it (a loaded host) sees both
        // sets without progress.
        .expecting(&["status-counters", "liveness"]),
        scenario(
            "parity/advanced-statefulset-agrees-with-statefulset",
            "Advanced StatefulSet and StatefulSet admit the same templates and strategies and settle on the same ready pods",
            &["parity", "statefulset"],
            |ctx| run(ctx, Pair::StatefulSet).boxed(),
        )
        // A case one side cannot converge (a finding of its own, like the preStop `sleep`
        // bug before v1.8.0) leaves that set without progress for as long as the table runs.
        .expecting(&["failed-create", "liveness"]),
        scenario(
            "parity/advanced-daemonset-agrees-with-daemonset",
            "Advanced DaemonSet and DaemonSet admit the same templates and strategies and settle on the same ready pods",
            &["parity", "daemonset"],
            |ctx| run(ctx, Pair::DaemonSet).boxed(),
        )
        // Some 60 native DaemonSets created at once: kube-controller-manager's DaemonSet
        // controller (two workers) updates their status counters more than the grace window
        // behind their pods on a loaded 2-core host. The native side is the control here;
        // the Advanced DaemonSet counters are checked by the daemonset suite.
        .expecting(&["failed-create", "status-counters"]),
        scenario(
            "parity/broadcastjob-agrees-with-job",
            "BroadcastJob and Job admit the same pod templates",
            &["parity", "broadcastjob"],
            |ctx| run(ctx, Pair::Job).boxed(),
        ),
        scenario(
            "parity/advancedcronjob-agrees-with-cronjob",
            "AdvancedCronJob and CronJob admit the same job templates and schedules",
            &["parity", "advancedcronjob"],
            |ctx| run(ctx, Pair::CronJob).boxed(),
        ),
    ]
}

fn scenario(
    name: &'static str,
    summary: &'static str,
    labels: &'static [&'static str],
    body: impl Fn(crate::scenario::Ctx) -> futures::future::BoxFuture<'static, anyhow::Result<()>>
    + Send
    + Sync
    + 'static,
) -> Scenario {
    // Pods a template makes unschedulable, or invalid, on purpose (on both sides).
    Scenario::new(name, summary, labels, body)
        // A real kubelet probes: a case's probe on a port name no container has is
        // reported Unhealthy on both sides alike.
        .allowing(&["FailedScheduling", "FailedCreate", "Unhealthy"])
        .expecting(&["failed-create"])
}

/// An OpenKruise workload and its native counterpart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pair {
    /// CloneSet and Deployment.
    CloneSet,
    /// Advanced StatefulSet and StatefulSet.
    StatefulSet,
    /// Advanced DaemonSet and DaemonSet.
    DaemonSet,
    /// BroadcastJob and Job.
    Job,
    /// AdvancedCronJob and CronJob.
    CronJob,
}

/// One side of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The OpenKruise workload.
    Kruise,
    /// The native one.
    Native,
}

impl Pair {
    fn api(self, side: Side) -> (&'static str, &'static str) {
        match (self, side) {
            (Pair::CloneSet, Side::Kruise) => ("apps.kruise.io/v1alpha1", "CloneSet"),
            (Pair::CloneSet, Side::Native) => ("apps/v1", "Deployment"),
            (Pair::StatefulSet, Side::Kruise) => ("apps.kruise.io/v1beta1", "StatefulSet"),
            (Pair::StatefulSet, Side::Native) => ("apps/v1", "StatefulSet"),
            (Pair::DaemonSet, Side::Kruise) => ("apps.kruise.io/v1alpha1", "DaemonSet"),
            (Pair::DaemonSet, Side::Native) => ("apps/v1", "DaemonSet"),
            (Pair::Job, Side::Kruise) => ("apps.kruise.io/v1alpha1", "BroadcastJob"),
            (Pair::Job, Side::Native) => ("batch/v1", "Job"),
            (Pair::CronJob, Side::Kruise) => ("apps.kruise.io/v1alpha1", "AdvancedCronJob"),
            (Pair::CronJob, Side::Native) => ("batch/v1", "CronJob"),
        }
    }

    /// Whether pods are compared (jobs and cron jobs: admission only).
    fn converges(self) -> bool {
        matches!(self, Pair::CloneSet | Pair::StatefulSet | Pair::DaemonSet)
    }

    fn batch(self) -> bool {
        matches!(self, Pair::Job | Pair::CronJob)
    }
}

/// A workload-level value a case sets, mapped to each kind's own field.
#[derive(Debug, Clone)]
pub enum Knob {
    /// `spec.replicas`.
    Replicas(i64),
    /// The rolling update's `maxUnavailable`.
    MaxUnavailable(Value),
    /// The rolling update's `maxSurge`.
    MaxSurge(Value),
    /// `maxUnavailable` and `maxSurge` together.
    Unavailable0Surge0,
    /// The rolling update's `partition`.
    Partition(i64),
    /// `spec.minReadySeconds`.
    MinReadySeconds(i64),
    /// `spec.revisionHistoryLimit`.
    RevisionHistoryLimit(i64),
    /// A selector with `matchExpressions` matching the template.
    SelectorExpressions,
    /// A selector the template's labels do not match.
    SelectorMismatch,
    /// StatefulSets: `podManagementPolicy: Parallel`.
    Parallel,
    /// StatefulSets: `ordinals.start`.
    OrdinalsStart(i64),
    /// StatefulSets: a claim template mounted by the container, with a retention policy.
    ClaimTemplate,
    /// A hostPort on container 0 (a different port per side, so they do not compete).
    HostPort,
    /// Jobs: `activeDeadlineSeconds`.
    ActiveDeadlineSeconds(i64),
    /// Cron jobs: `schedule`.
    Schedule(&'static str),
    /// Cron jobs: `concurrencyPolicy`.
    ConcurrencyPolicy(&'static str),
    /// Jobs: `parallelism`.
    Parallelism(i64),
    /// `spec.revisionHistoryLimit: -1`, where a native workload refuses it (a Deployment and a
    /// DaemonSet). A StatefulSet admits it, and so does an Advanced StatefulSet, whose
    /// controller then panics on every sync (see docs/catalog/known-bugs.md): a case both sides
    /// admit is made, and the table does not judge a controller's panic.
    NegativeRevisionHistoryLimit,
}

/// One row of the parity table.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name.
    pub name: &'static str,
    /// Merged into the pod spec.
    pub pod: Value,
    /// Merged into container 0.
    pub container: Value,
    /// A workload-level value, if any.
    pub knob: Option<Knob>,
}

fn case(name: &'static str, pod: Value, container: Value) -> Case {
    Case {
        name,
        pod,
        container,
        knob: None,
    }
}

fn knob(name: &'static str, knob: Knob) -> Case {
    Case {
        name,
        pod: json!({}),
        container: json!({}),
        knob: Some(knob),
    }
}

/// The table: pod templates (ports, host networking, volumes of several kinds, probes,
/// resources, security contexts, init containers, tolerations, affinity, topology spread,
/// invalid templates) and strategy values (IntOrString fields as ints, percentages and
/// strings, selectors, ordinals, claims).
pub fn cases() -> Vec<Case> {
    let mut v = pod_cases();
    v.extend(container_cases());
    v.extend(workload_cases());
    v
}

fn pod_cases() -> Vec<Case> {
    let mount = |name: &str| json!({"volumeMounts": [{"name": name, "mountPath": "/mnt/v"}]});
    vec![
        case("plain", json!({}), json!({})),
        case(
            "host-network",
            json!({"hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"}),
            json!({}),
        ),
        case(
            "volume-empty-dir",
            json!({"volumes": [{"name": "v", "emptyDir": {}}]}),
            mount("v"),
        ),
        case(
            "volume-empty-dir-memory",
            json!({"volumes": [{"name": "v", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}]}),
            mount("v"),
        ),
        case(
            "volume-config-map",
            json!({"volumes": [{"name": "v", "configMap": {"name": "cfg", "optional": true}}]}),
            mount("v"),
        ),
        case(
            "volume-secret",
            json!({"volumes": [{"name": "v", "secret": {"secretName": "s", "optional": true, "defaultMode": 256}}]}),
            mount("v"),
        ),
        case(
            "volume-projected",
            json!({"volumes": [{"name": "v", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}}]}),
            mount("v"),
        ),
        case(
            "volume-host-path",
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/tmp", "type": "Directory"}}]}),
            mount("v"),
        ),
        case(
            "volume-ephemeral",
            json!({"volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}),
            mount("v"),
        ),
        case("volume-mount-undefined", json!({}), mount("nosuch")),
        case(
            "pod-security-context",
            json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}}),
            json!({}),
        ),
        case(
            "init-container",
            json!({"initContainers": [{"name": "init", "image": IMAGE_V1, "command": ["true"]}]}),
            json!({}),
        ),
        case(
            "restartable-init-container",
            json!({"initContainers": [{"name": "side", "image": IMAGE_V1, "restartPolicy": "Always"}]}),
            json!({}),
        ),
        case(
            "tolerations",
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}, {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]}),
            json!({}),
        ),
        case(
            "node-selector-zone",
            json!({"nodeSelector": {"topology.kubernetes.io/zone": "zone-a"}}),
            json!({}),
        ),
        case(
            "node-selector-unmatched",
            json!({"nodeSelector": {"no-such-label": "x"}}),
            json!({}),
        ),
        case(
            "node-affinity",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}]}}}}),
            json!({}),
        ),
        case(
            "pod-anti-affinity",
            json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"tier": "parity"}}}}]}}}),
            json!({}),
        ),
        case(
            "topology-spread",
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"tier": "parity"}}}]}),
            json!({}),
        ),
        case(
            "termination-grace",
            json!({"terminationGracePeriodSeconds": 5}),
            json!({}),
        ),
        case(
            "dns-config",
            json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]}}),
            json!({}),
        ),
        case(
            "host-aliases",
            json!({"hostAliases": [{"ip": "127.0.0.2", "hostnames": ["db.local"]}]}),
            json!({}),
        ),
        case(
            "share-process-namespace",
            json!({"shareProcessNamespace": true}),
            json!({}),
        ),
        case(
            "image-pull-secrets",
            json!({"imagePullSecrets": [{"name": "regcred"}]}),
            json!({}),
        ),
        case(
            "restart-policy-never",
            json!({"restartPolicy": "Never"}),
            json!({}),
        ),
        case("no-containers", json!({"containers": []}), json!({})),
    ]
}

fn container_cases() -> Vec<Case> {
    let probe = |p: Value| json!({"livenessProbe": p});
    vec![
        case(
            "container-ports",
            json!({}),
            json!({"ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]}),
        ),
        case(
            "liveness-http-probe",
            json!({}),
            probe(json!({"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5})),
        ),
        case(
            "readiness-exec-probe",
            json!({}),
            json!({"readinessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 1}}),
        ),
        case(
            "startup-tcp-probe",
            json!({}),
            json!({"startupProbe": {"tcpSocket": {"port": 80}, "failureThreshold": 30}}),
        ),
        case(
            "probe-named-port",
            json!({}),
            json!({"ports": [{"name": "web", "containerPort": 80}], "livenessProbe": {"httpGet": {"path": "/", "port": "web"}}}),
        ),
        case(
            "probe-unknown-named-port",
            json!({}),
            probe(json!({"httpGet": {"path": "/", "port": "nosuch"}})),
        ),
        case(
            "resources",
            json!({}),
            json!({"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}}),
        ),
        case(
            "resources-limits-only",
            json!({}),
            json!({"resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}),
        ),
        case(
            "resources-requests-above-limits",
            json!({}),
            json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
        ),
        case(
            "resources-unknown-extended",
            json!({}),
            json!({"resources": {"requests": {"example.com/widget": "1"}, "limits": {"example.com/widget": "1"}}}),
        ),
        case(
            "container-security-context",
            json!({}),
            json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}}),
        ),
        case(
            "privileged",
            json!({}),
            json!({"securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}}}),
        ),
        case(
            "env-field-refs",
            json!({}),
            json!({"env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}]}),
        ),
        case(
            "env-from-optional",
            json!({}),
            json!({"envFrom": [{"configMapRef": {"name": "cfg", "optional": true}, "prefix": "CFG_"}]}),
        ),
        case(
            "lifecycle-hooks",
            json!({}),
            json!({"lifecycle": {"postStart": {"exec": {"command": ["true"]}}, "preStop": {"sleep": {"seconds": 1}}}}),
        ),
        case(
            "image-pull-policy",
            json!({}),
            json!({"imagePullPolicy": "Always"}),
        ),
        case(
            "invalid-container-name",
            json!({}),
            json!({"name": "Main_1"}),
        ),
        case(
            "invalid-image-pull-policy",
            json!({}),
            json!({"imagePullPolicy": "Sometimes"}),
        ),
    ]
}

fn workload_cases() -> Vec<Case> {
    vec![
        knob("host-port", Knob::HostPort),
        knob("replicas-zero", Knob::Replicas(0)),
        knob("replicas-three", Knob::Replicas(3)),
        knob("replicas-negative", Knob::Replicas(-1)),
        knob("max-unavailable-int", Knob::MaxUnavailable(json!(1))),
        knob(
            "max-unavailable-percent",
            Knob::MaxUnavailable(json!("50%")),
        ),
        knob(
            "max-unavailable-int-as-string",
            Knob::MaxUnavailable(json!("1")),
        ),
        knob(
            "max-unavailable-over-100-percent",
            Knob::MaxUnavailable(json!("150%")),
        ),
        knob("max-surge-percent", Knob::MaxSurge(json!("25%"))),
        knob("max-surge-int", Knob::MaxSurge(json!(1))),
        knob("max-surge-negative", Knob::MaxSurge(json!(-1))),
        knob("max-unavailable-and-surge-zero", Knob::Unavailable0Surge0),
        knob("partition", Knob::Partition(1)),
        knob("min-ready-seconds", Knob::MinReadySeconds(5)),
        knob("min-ready-seconds-negative", Knob::MinReadySeconds(-1)),
        knob("revision-history-limit", Knob::RevisionHistoryLimit(1)),
        knob(
            "revision-history-limit-negative",
            Knob::NegativeRevisionHistoryLimit,
        ),
        knob("selector-match-expressions", Knob::SelectorExpressions),
        knob("selector-mismatch", Knob::SelectorMismatch),
        knob("pod-management-parallel", Knob::Parallel),
        knob("ordinals-start", Knob::OrdinalsStart(5)),
        knob("ordinals-start-negative", Knob::OrdinalsStart(-1)),
        knob("claim-template", Knob::ClaimTemplate),
        knob("active-deadline", Knob::ActiveDeadlineSeconds(600)),
        knob("parallelism-negative", Knob::Parallelism(-1)),
        knob("schedule-every-minute", Knob::Schedule("*/1 * * * *")),
        knob("schedule-invalid", Knob::Schedule("61 * * * *")),
        knob("schedule-macro", Knob::Schedule("@hourly")),
        knob("concurrency-forbid", Knob::ConcurrencyPolicy("Forbid")),
        knob("concurrency-invalid", Knob::ConcurrencyPolicy("Sometimes")),
    ]
}

/// Intentional, documented differences: (pair, case, what differs, the reference). Such a
/// disagreement is expected, and its absence is not a finding either.
pub const DIFFERENCES: &[(Pair, &str, &str, &str)] = &[
    (
        Pair::StatefulSet,
        "max-unavailable-percent",
        "Advanced StatefulSet refuses maxUnavailable without podManagementPolicy Parallel",
        "apis/apps/v1beta1 RollingUpdateStatefulSetStrategy.maxUnavailable: \"can just be allowed to work with Parallel podManagementPolicy\"",
    ),
    (
        Pair::StatefulSet,
        "max-unavailable-int-as-string",
        "Advanced StatefulSet refuses maxUnavailable without podManagementPolicy Parallel",
        "apis/apps/v1beta1 RollingUpdateStatefulSetStrategy.maxUnavailable",
    ),
    (
        Pair::StatefulSet,
        "max-unavailable-over-100-percent",
        "Advanced StatefulSet refuses maxUnavailable without podManagementPolicy Parallel",
        "apis/apps/v1beta1 RollingUpdateStatefulSetStrategy.maxUnavailable",
    ),
    (
        Pair::DaemonSet,
        "max-surge-percent",
        "Advanced DaemonSet leaves maxUnavailable unset when maxSurge is given, so maxSurge alone is valid; a DaemonSet defaults maxUnavailable to 1 and then refuses maxSurge beside it",
        "apis/apps/v1alpha1 RollingUpdateDaemonSet.maxSurge (\"can not be 0 if MaxUnavailable is 0\") and SetDefaultsDaemonSet",
    ),
    (
        Pair::DaemonSet,
        "max-surge-int",
        "as max-surge-percent",
        "apis/apps/v1alpha1 RollingUpdateDaemonSet.maxSurge and SetDefaultsDaemonSet",
    ),
];

/// Pod labels: `app` (own per workload) and `tier=parity` (shared, for spreading).
fn manifest(pair: Pair, side: Side, name: &str, c: &Case, index: usize) -> Option<Value> {
    let (api_version, kind) = pair.api(side);
    let mut container = json!({"name": "main", "image": IMAGE_V1});
    json_patch::merge(&mut container, &c.container);
    let mut pod = json!({"containers": [container]});
    if pair.batch() {
        pod["restartPolicy"] = json!("Never");
    }
    json_patch::merge(&mut pod, &c.pod);
    let template = json!({"metadata": {"labels": {"app": name, "tier": "parity"}}, "spec": pod});
    let selector = json!({"matchLabels": {"app": name}});
    let spec = match pair {
        Pair::CloneSet | Pair::StatefulSet => {
            let mut s = json!({"replicas": 1, "selector": selector, "template": template});
            if pair == Pair::StatefulSet {
                s["serviceName"] = json!(name);
            }
            s
        }
        Pair::DaemonSet => json!({"selector": selector, "template": template}),
        Pair::Job => match side {
            Side::Kruise => json!({"template": template, "completionPolicy": {"type": "Always"}}),
            Side::Native => json!({"template": template}),
        },
        Pair::CronJob => {
            let job = json!({"spec": {"template": template}});
            match side {
                Side::Kruise => json!({"schedule": "0 0 1 1 *", "template": {"jobTemplate": job}}),
                Side::Native => json!({"schedule": "0 0 1 1 *", "jobTemplate": job}),
            }
        }
    };
    let mut obj = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name}, "spec": spec});
    if let Some(k) = &c.knob {
        apply_knob(pair, side, k, &mut obj, index)?;
    }
    Some(obj)
}

/// Where a kind keeps its rolling update parameters.
fn rolling(pair: Pair, side: Side) -> Option<&'static str> {
    match (pair, side) {
        (Pair::CloneSet, Side::Kruise) => Some("/spec/updateStrategy"),
        (Pair::CloneSet, Side::Native) => Some("/spec/strategy/rollingUpdate"),
        (Pair::StatefulSet | Pair::DaemonSet, _) => Some("/spec/updateStrategy/rollingUpdate"),
        _ => None,
    }
}

/// Sets `value` at JSON pointer `path`, making the objects on the way (a number indexes an
/// existing array).
fn set(obj: &mut Value, path: &str, value: Value) {
    let mut cur = obj;
    for seg in path.split('/').skip(1) {
        cur = match (seg.parse::<usize>(), cur) {
            (Ok(i), Value::Array(a)) => &mut a[i],
            (_, cur) => {
                if !cur.is_object() {
                    *cur = json!({});
                }
                cur.as_object_mut()
                    .expect("an object")
                    .entry(seg)
                    .or_insert(Value::Null)
            }
        };
    }
    *cur = value;
}

/// Applies a workload-level value; `None` when the pair has no such field.
fn apply_knob(pair: Pair, side: Side, k: &Knob, obj: &mut Value, index: usize) -> Option<()> {
    let replicated = matches!(pair, Pair::CloneSet | Pair::StatefulSet);
    match k {
        Knob::Replicas(n) if replicated => set(obj, "/spec/replicas", json!(n)),
        Knob::MaxUnavailable(v) => set(
            obj,
            &format!("{}/maxUnavailable", rolling(pair, side)?),
            v.clone(),
        ),
        Knob::MaxSurge(v) if pair != Pair::StatefulSet => set(
            obj,
            &format!("{}/maxSurge", rolling(pair, side)?),
            v.clone(),
        ),
        Knob::Unavailable0Surge0 if pair != Pair::StatefulSet => {
            let r = rolling(pair, side)?;
            set(obj, &format!("{r}/maxUnavailable"), json!(0));
            set(obj, &format!("{r}/maxSurge"), json!(0));
        }
        Knob::Partition(n) if pair == Pair::StatefulSet => set(
            obj,
            &format!("{}/partition", rolling(pair, side)?),
            json!(n),
        ),
        Knob::MinReadySeconds(n) if pair == Pair::StatefulSet && side == Side::Kruise => set(
            obj,
            "/spec/updateStrategy/rollingUpdate/minReadySeconds",
            json!(n),
        ),
        Knob::MinReadySeconds(n) if pair.converges() => set(obj, "/spec/minReadySeconds", json!(n)),
        Knob::RevisionHistoryLimit(n) if pair.converges() => {
            set(obj, "/spec/revisionHistoryLimit", json!(n))
        }
        Knob::SelectorExpressions if pair.converges() => {
            let name = obj["metadata"]["name"].clone();
            set(
                obj,
                "/spec/selector",
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": [name]}]}),
            )
        }
        Knob::SelectorMismatch if pair.converges() => set(
            obj,
            "/spec/selector",
            json!({"matchLabels": {"app": "someone-else"}}),
        ),
        Knob::Parallel if pair == Pair::StatefulSet => {
            set(obj, "/spec/podManagementPolicy", json!("Parallel"))
        }
        Knob::OrdinalsStart(n) if pair == Pair::StatefulSet => {
            set(obj, "/spec/ordinals", json!({"start": n}))
        }
        Knob::ClaimTemplate if pair == Pair::StatefulSet => {
            set(
                obj,
                "/spec/volumeClaimTemplates",
                json!([{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]),
            );
            set(
                obj,
                "/spec/persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Delete", "whenScaled": "Delete"}),
            );
            set(
                obj,
                "/spec/template/spec/containers/0/volumeMounts",
                json!([{"name": "data", "mountPath": "/data"}]),
            );
        }
        Knob::HostPort if pair.converges() => {
            // Host ports are the node's, shared by every scenario running at once: one of
            // its own for each pair, case and side (a DaemonSet's pod takes its port on
            // every node, and a pod of another pair asking for the same one never schedules).
            let port =
                20000 + 200 * pair as i64 + 2 * index as i64 + i64::from(side == Side::Native);
            set(
                obj,
                "/spec/template/spec/containers/0/ports",
                json!([{"containerPort": 8080, "hostPort": port}]),
            );
        }
        Knob::ActiveDeadlineSeconds(n) if pair == Pair::Job => {
            set(obj, "/spec/activeDeadlineSeconds", json!(n))
        }
        Knob::NegativeRevisionHistoryLimit if pair.converges() && pair != Pair::StatefulSet => {
            set(obj, "/spec/revisionHistoryLimit", json!(-1))
        }
        Knob::Parallelism(n) if pair == Pair::Job => set(obj, "/spec/parallelism", json!(n)),
        Knob::Schedule(s) if pair == Pair::CronJob => set(obj, "/spec/schedule", json!(s)),
        Knob::ConcurrencyPolicy(p) if pair == Pair::CronJob => {
            set(obj, "/spec/concurrencyPolicy", json!(p))
        }
        _ => return None,
    }
    Some(())
}

/// What the apiserver (and webhooks) said to one side.
#[derive(Debug, Clone)]
enum Admission {
    Admitted,
    Refused(String),
}

/// One case of one pair: both names and both answers.
struct Row {
    case: &'static str,
    names: [String; 2],
    answers: [Admission; 2],
    /// Replicas wanted (None: one per eligible node, as DaemonSets).
    replicas: Option<i64>,
    /// The pod spec of each side's template.
    pods: [Value; 2],
}

async fn run(ctx: Ctx, pair: Pair) -> anyhow::Result<()> {
    let rows = ctx
        .step(
            "each case is put to both sides, and made where both admit it",
            async {
                // The pull secret the image-pull-secrets case names exists, empty: a real
                // kubelet warns of a missing one, whichever side's pod it is.
                ctx.create(json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "regcred"},
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {".dockerconfigjson": "eyJhdXRocyI6e319"}
                }))
                .await?;
                let mut rows = vec![];
                for (i, c) in cases().iter().enumerate() {
                    let names = [format!("c{i:02}-k"), format!("c{i:02}-n")];
                    let (Some(k), Some(n)) = (
                        manifest(pair, Side::Kruise, &names[0], c, i),
                        manifest(pair, Side::Native, &names[1], c, i),
                    ) else {
                        continue;
                    };
                    let replicas = k["spec"]["replicas"].as_i64();
                    let pods = [
                        k["spec"]["template"]["spec"].clone(),
                        n["spec"]["template"]["spec"].clone(),
                    ];
                    // Both sides are asked first; only a case both admit is
                    // made, so that a value one side refuses (a finding
                    // already) does not go on to act in the other's controller.
                    let (a, b) = futures::join!(admits(&ctx, &k), admits(&ctx, &n));
                    let (a, b) = match (a, b) {
                        (Admission::Admitted, Admission::Admitted) => {
                            futures::join!(admit(&ctx, k), admit(&ctx, n))
                        }
                        other => other,
                    };
                    rows.push(Row {
                        case: c.name,
                        names,
                        answers: [a, b],
                        replicas,
                        pods,
                    });
                }
                Ok(rows)
            },
        )
        .await?;
    let mut findings: Vec<String> = rows
        .iter()
        .filter_map(|r| admission_finding(pair, r))
        .collect();
    if pair.converges() {
        findings.extend(
            ctx.step(
                "the cases both sides admitted settle on the same ready pods",
                converge(&ctx, pair, &rows),
            )
            .await?,
        );
        findings.extend(
            ctx.step(
                "each case's pods carry its template's fields wherever the twin's pods do",
                carried(&ctx, pair, &rows),
            )
            .await?,
        );
    }
    // Not in a step: a step's context would precede the first finding, and
    // the ledger judges a failure by its lines that start with FINDING.
    let cases = rows.len();
    let refused = rows
        .iter()
        .filter(|r| matches!(r.answers, [Admission::Refused(_), Admission::Refused(_)]))
        .count();
    tracing::info!(?pair, cases, refused, findings = findings.len(), "parity");
    if !findings.is_empty() {
        let lines: Vec<String> = findings.iter().map(|f| format!("{FINDING}{f}")).collect();
        bail!("{}", lines.join("\n"));
    }
    Ok(())
}

async fn admits(ctx: &Ctx, obj: &Value) -> Admission {
    match ctx.admits(obj).await {
        Ok(()) => Admission::Admitted,
        Err(e) => Admission::Refused(refusal(e).to_string()),
    }
}

async fn admit(ctx: &Ctx, obj: Value) -> Admission {
    match ctx.create(obj).await {
        Ok(_) => Admission::Admitted,
        Err(e) => Admission::Refused(refusal(e).to_string()),
    }
}

fn documented(pair: Pair, case: &str) -> bool {
    DIFFERENCES
        .iter()
        .any(|(p, c, _, _)| *p == pair && *c == case)
}

fn admission_finding(pair: Pair, r: &Row) -> Option<String> {
    let [k, n] = &r.answers;
    let (kk, nk) = (pair.api(Side::Kruise).1, pair.api(Side::Native).1);
    let text = match (k, n) {
        (Admission::Admitted, Admission::Refused(why)) => {
            format!("{}: {kk} admitted, {nk} refused: {why}", r.case)
        }
        (Admission::Refused(why), Admission::Admitted) => {
            format!("{}: {kk} refused: {why}; {nk} admitted", r.case)
        }
        _ => return None,
    };
    (!documented(pair, r.case)).then_some(text)
}

/// Names of the objects whose pods failed to be created (Warning `FailedCreate`): a workload's
/// own name, or its ReplicaSet's.
async fn failed_creates(
    events: &Api<k8s_openapi::api::core::v1::Event>,
) -> Result<std::collections::BTreeSet<String>, kube::Error> {
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailedCreate"))
        .filter_map(|e| e.involved_object.name)
        .collect())
}

/// The admitted cases whose sides have not settled on the same number of ready pods.
fn disagreements(
    pair: Pair,
    admitted: &[(String, [String; 2], Option<i64>)],
    desired: &BTreeMap<String, i64>,
    blocked: &std::collections::BTreeSet<String>,
    all: Vec<Pod>,
) -> Vec<String> {
    let mut by_app: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for p in all
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let app = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned()
            .unwrap_or_default();
        by_app.entry(app).or_default().push(p);
    }
    let mut open = vec![];
    for (case, names, replicas) in admitted {
        let side = |n: &String| {
            let pods: Vec<&Pod> = by_app
                .get(n)
                .map(|v| v.iter().collect())
                .unwrap_or_default();
            let want = replicas.or_else(|| desired.get(n).copied());
            let failing = blocked
                .iter()
                .any(|b| b == n || b.starts_with(&format!("{n}-")));
            settled(&pods, want, failing)
        };
        match (side(&names[0]), side(&names[1])) {
            (Ok(a), Ok(b)) if a == b => {}
            (a, b) if !documented(pair, case) => open.push(format!(
                "{case}: {} {}, {} {}",
                pair.api(Side::Kruise).1,
                show(&a),
                pair.api(Side::Native).1,
                show(&b)
            )),
            _ => {}
        }
    }
    open
}

/// The pods of one workload, settled (each ready or unschedulable, and as many as wanted
/// unless their creation fails) and how many are ready.
fn settled(pods: &[&Pod], want: Option<i64>, failing: bool) -> Result<usize, String> {
    if let Some(w) = want
        && pods.len() as i64 != w
        && !failing
    {
        return Err(format!("{} of {w} pods", pods.len()));
    }
    let cond = |p: &Pod, t: &str| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t).map(|c| c.status.clone()))
    };
    let mut ready = 0;
    for p in pods {
        match (
            cond(p, "Ready").as_deref(),
            cond(p, "PodScheduled").as_deref(),
        ) {
            (Some("True"), _) => ready += 1,
            (_, Some("False")) => {}
            _ => {
                return Err(format!(
                    "pod {} neither ready nor unschedulable",
                    p.metadata.name.clone().unwrap_or_default()
                ));
            }
        }
    }
    Ok(ready)
}

/// Waits until every admitted pair has settled on the same number of ready pods; returns the
/// pairs that did not, with both sides' states.
async fn converge(ctx: &Ctx, pair: Pair, rows: &[Row]) -> anyhow::Result<Vec<String>> {
    let admitted: Vec<(String, [String; 2], Option<i64>)> = rows
        .iter()
        .filter(|r| matches!(r.answers, [Admission::Admitted, Admission::Admitted]))
        .map(|r| (r.case.to_string(), r.names.clone(), r.replicas))
        .collect();
    let desired = daemon_desired(ctx, pair, &admitted).await?;
    let what = format!(
        "{} admitted cases to settle on the same ready pods",
        admitted.len()
    );
    let pods: Api<Pod> = ctx.api();
    let state = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let out = state.clone();
    let admitted = std::sync::Arc::new(admitted);
    let desired = std::sync::Arc::new(desired);
    let events: Api<k8s_openapi::api::core::v1::Event> = ctx.api();
    let check = move |all: Vec<Pod>| {
        let (admitted, desired, events, state) = (
            admitted.clone(),
            desired.clone(),
            events.clone(),
            state.clone(),
        );
        async move {
            let blocked = match failed_creates(&events).await {
                Ok(b) => b,
                Err(e) => return Check::Failed(format!("list events: {e}")),
            };
            let open = disagreements(pair, &admitted, &desired, &blocked, all);
            *state.lock().expect("not poisoned") = open.clone();
            Check::when(open.is_empty(), || open.join("; "))
        }
        .boxed()
    };
    match until_all(
        &pods,
        watcher::Config::default(),
        &what,
        ctx.timeouts.converge,
        check,
    )
    .await
    {
        Ok(_) => Ok(vec![]),
        Err(crate::scenario::wait::WaitError::Timeout { .. }) => {
            Ok(out.lock().expect("not poisoned").clone())
        }
        Err(e) => Err(e.into()),
    }
}

/// The fields of each admitted case's template that its own pods lack and the twin's pods
/// carry (what the controller dropped between its template and the pods it makes), one
/// finding per case. Compared on one live pod of each side; a case without both is left out.
async fn carried(ctx: &Ctx, pair: Pair, rows: &[Row]) -> anyhow::Result<Vec<String>> {
    let pods: Api<Pod> = ctx.api();
    let all = pods.list(&Default::default()).await?.items;
    let pod_of = |app: &str| {
        all.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .find(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .is_some_and(|a| a == app)
            })
            .and_then(|p| serde_json::to_value(&p.spec).ok())
    };
    let mut out = vec![];
    for r in rows
        .iter()
        .filter(|r| matches!(r.answers, [Admission::Admitted, Admission::Admitted]))
    {
        let (Some(k), Some(n)) = (pod_of(&r.names[0]), pod_of(&r.names[1])) else {
            continue;
        };
        let (mut lk, mut ln) = (vec![], vec![]);
        steps::lacking(&r.pods[0], &k, "spec", &mut lk);
        steps::lacking(&r.pods[1], &n, "spec", &mut ln);
        let dropped: Vec<&String> = lk.iter().filter(|f| !ln.contains(f)).collect();
        if !dropped.is_empty() && !documented(pair, r.case) {
            out.push(format!(
                "{}: {}'s pods lack {} of the template; {}'s pods carry it",
                r.case,
                pair.api(Side::Kruise).1,
                dropped
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                pair.api(Side::Native).1,
            ));
        }
    }
    Ok(out)
}

fn show(s: &Result<usize, String>) -> String {
    match s {
        Ok(n) => format!("settled with {n} ready"),
        Err(e) => format!("not settled ({e})"),
    }
}

/// A DaemonSet's `status.desiredNumberScheduled`, once its controller has observed it.
async fn observed_desired(
    api: Api<DynamicObject>,
    kind: &str,
    name: String,
    timeout: std::time::Duration,
) -> anyhow::Result<(String, i64)> {
    let what = format!("{kind} {name} observed by its controller");
    let o =
        crate::scenario::wait::until(&api, &name, &what, timeout, |o: Option<DynamicObject>| {
            let ok = o.as_ref().is_some_and(|o| {
                o.data["status"]["observedGeneration"].as_i64() >= o.metadata.generation
                    && o.data["status"]["desiredNumberScheduled"].is_i64()
            });
            std::future::ready(Check::when(ok, || {
                "status.desiredNumberScheduled not reported".into()
            }))
            .boxed()
        })
        .await?;
    let n = o
        .and_then(|o| o.data["status"]["desiredNumberScheduled"].as_i64())
        .unwrap_or(0);
    Ok((name, n))
}

/// For DaemonSet pairs: how many pods each admitted DaemonSet wants, once its controller has
/// observed it (`status.desiredNumberScheduled`).
async fn daemon_desired(
    ctx: &Ctx,
    pair: Pair,
    admitted: &[(String, [String; 2], Option<i64>)],
) -> anyhow::Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    if pair != Pair::DaemonSet {
        return Ok(out);
    }
    let mut waits = vec![];
    for side in [Side::Kruise, Side::Native] {
        let (av, kind) = pair.api(side);
        let api: Api<DynamicObject> = ctx.dyn_api(av, kind).await?;
        for (_, names, _) in admitted {
            let name = names[usize::from(side == Side::Native)].clone();
            waits.push(observed_desired(
                api.clone(),
                kind,
                name,
                ctx.timeouts.converge,
            ));
        }
    }
    for r in futures::future::join_all(waits).await {
        let (name, n) = r?;
        out.insert(name, n);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_forty_cases_for_every_converging_pair() {
        for pair in [Pair::CloneSet, Pair::StatefulSet, Pair::DaemonSet] {
            let n = cases()
                .iter()
                .enumerate()
                .filter(|(i, c)| manifest(pair, Side::Kruise, "x", c, *i).is_some())
                .count();
            assert!(n >= 40, "{pair:?} has {n} cases");
        }
    }

    #[test]
    fn knobs_land_on_each_kinds_own_field() {
        let c = knob("m", Knob::MaxUnavailable(json!("50%")));
        let k = manifest(Pair::CloneSet, Side::Kruise, "a", &c, 0).unwrap();
        assert_eq!(k["spec"]["updateStrategy"]["maxUnavailable"], "50%");
        let n = manifest(Pair::CloneSet, Side::Native, "a", &c, 0).unwrap();
        assert_eq!(
            n["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
            "50%"
        );
        let s = manifest(Pair::StatefulSet, Side::Kruise, "a", &c, 0).unwrap();
        assert_eq!(
            s["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            "50%"
        );
        let p = knob("p", Knob::Partition(1));
        assert!(manifest(Pair::CloneSet, Side::Native, "a", &p, 0).is_none());
        let h = knob("h", Knob::HostPort);
        let (a, b) = (
            manifest(Pair::DaemonSet, Side::Kruise, "a", &h, 3).unwrap(),
            manifest(Pair::DaemonSet, Side::Native, "b", &h, 3).unwrap(),
        );
        let port = |o: &Value| {
            o["spec"]["template"]["spec"]["containers"][0]["ports"][0]["hostPort"].clone()
        };
        assert_ne!(
            port(&a),
            port(&b),
            "the sides do not compete for a host port"
        );
        let c = manifest(Pair::CloneSet, Side::Kruise, "c", &h, 3).unwrap();
        assert_ne!(
            port(&a),
            port(&c),
            "nor do the pairs, which run at once on the same nodes"
        );
        let j = manifest(
            Pair::Job,
            Side::Kruise,
            "j",
            &case("plain", json!({}), json!({})),
            0,
        )
        .unwrap();
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let cj = manifest(
            Pair::CronJob,
            Side::Native,
            "c",
            &knob("s", Knob::Schedule("@hourly")),
            0,
        )
        .unwrap();
        assert_eq!(cj["spec"]["schedule"], "@hourly");
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
            "Never"
        );
    }

    #[test]
    fn a_disagreement_quotes_both_answers() {
        let r = Row {
            case: "c",
            names: ["a".into(), "b".into()],
            answers: [
                Admission::Admitted,
                Admission::Refused("spec.x: Invalid".into()),
            ],
            replicas: Some(1),
            pods: [json!({}), json!({})],
        };
        let f = admission_finding(Pair::CloneSet, &r).unwrap();
        assert_eq!(
            f,
            "c: CloneSet admitted, Deployment refused: spec.x: Invalid"
        );
        let same = Row {
            answers: [Admission::Admitted, Admission::Admitted],
            ..r
        };
        assert!(admission_finding(Pair::CloneSet, &same).is_none());
    }
}
