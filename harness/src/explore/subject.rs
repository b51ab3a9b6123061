//! What exploration works on: a [`Subject`] is one kind of the controller under test — its
//! API, a valid seed object, its native twin if it has one, and where its spec keeps the
//! knobs the semantic operations turn. Start with [`subjects`].
//!
//! Nothing here names a case to try: the values come from the CRD schema and the cell's core
//! types ([`super::schema`], [`super::openapi`]), and from [`embedded_values`], the core
//! objects that hold data, each tried alike.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::trial::{Op, Perturbation, Watched};

/// The image of every seed object.
pub use crate::scenario::workload::{IMAGE_V1, IMAGE_V2};

/// The native counterpart of a subject.
#[derive(Debug, Clone, Copy)]
pub struct Twin {
    /// Its API version.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed object for a name.
    pub seed: fn(&str) -> Value,
    /// Fields the two keep at different paths: (subject's path, twin's path).
    pub renamed: &'static [(&'static str, &'static str)],
    /// Fields the two treat differently by design, as OpenKruise documents it (the parity
    /// table's differences): the twin's answer on them is not compared.
    pub documented: &'static [&'static str],
    /// Where its pod template is.
    pub template: &'static str,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
    /// The kinds of the objects between it and its pods, from the top (see [`Subject::via`]).
    pub via: &'static [Kind],
    /// The workload it applies to, when it is a policy (see [`Subject::target`]).
    pub target: Option<Target>,
}

impl Twin {
    /// What it is, as a finding names it: its kind, and the kind of its target for a policy.
    pub fn describe(&self) -> String {
        match self.target {
            Some(t) => format!("{} over a {}", self.kind, t.kind),
            None => self.kind.to_string(),
        }
    }
}

/// A seed object for a name.
pub type Seed = fn(&str) -> Value;

/// An API version and kind.
pub type Kind = (&'static str, &'static str);

/// The workload a policy subject applies to: made before the policy, with no pods, and
/// scaled to its seed's replicas once the policy exists, so that every pod it makes meets
/// the policy. Semantic operations and perturbations act on it, and convergence is judged
/// on it.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its API version.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed object for a name.
    pub seed: fn(&str) -> Value,
    /// Where its pod template is.
    pub template: &'static str,
    /// The kinds between it and its pods.
    pub via: &'static [Kind],
}

impl Target {
    /// The name of the target of the policy object `name`.
    pub fn name(policy: &str) -> String {
        format!("{policy}-target")
    }

    /// The target as a subject of its own (what operations, perturbations and convergence
    /// act on).
    pub fn subject(&self) -> Subject {
        Subject {
            name: self.kind,
            api_version: self.api_version,
            kind: self.kind,
            seed: self.seed,
            twin: None,
            replicated: true,
            template: self.template,
            rolls_out: true,
            observes_generation: true,
            via: self.via,
            target: None,
            makes: Makes::Pods,
            gates: &[],
        }
    }
}

/// One kind of the controller that exploration creates objects of.
#[derive(Debug, Clone, Copy)]
pub struct Subject {
    /// Its kind, as `--kinds` names it.
    pub name: &'static str,
    /// Its API version.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed object for a name: valid, with one container running [`IMAGE_V1`], pods
    /// labelled `app=<name>`.
    pub seed: fn(&str) -> Value,
    /// Its native twin.
    pub twin: Option<Twin>,
    /// Whether it keeps `spec.replicas` pods (false for one-per-node and job kinds).
    pub replicated: bool,
    /// Where its pod template is.
    pub template: &'static str,
    /// Whether it keeps its pods at its template (rolls out): false for job kinds, whose
    /// pods run to completion.
    pub rolls_out: bool,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
    /// The kinds of the objects between it and its pods, from the top (a Deployment's
    /// ReplicaSets): its pods are those it owns through them.
    pub via: &'static [Kind],
    /// The workload it applies to, for a policy kind (none for a workload kind).
    pub target: Option<Target>,
    /// What its objects make, which says how they converge.
    pub makes: Makes,
    /// The controller's feature gates it needs on (the controller serves nothing of it
    /// without them): an exploration of it turns them on.
    pub gates: &'static [&'static str],
}

/// What a subject's objects make: what operations and perturbations act on and convergence
/// is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Makes {
    /// Pods: its own, or its target's for a policy.
    Pods,
    /// Copies of the resource its spec holds (`spec.resource`), one in each namespace its
    /// targets select (`spec.targets`).
    Copies,
}

/// In a seed or a value, the name of the trial's namespace: resolved when the trial runs
/// ([`resolve`]), so that a trial stays the same data whatever namespace it runs in.
pub const NAMESPACE: &str = "$(NAMESPACE)";

/// In a seed or a value, the name of the trial's object (prefixed with the namespace for a
/// cluster-scoped kind).
pub const NAME: &str = "$(NAME)";

/// The label of each of [`embedded_values`] (so of their copies).
pub const COPIED_LABEL: &str = "explore.harness.io/copied";

/// The label of each namespace a trial makes, valued with the name of the trial's first
/// namespace: a selector of it selects the trial's namespaces and no other trial's.
pub const TRIAL_LABEL: &str = "explore.harness.io/trial";

/// `v` with [`NAMESPACE`] and [`NAME`] replaced in every string (keys too) by `namespace`
/// and `name`.
pub fn resolve(v: &Value, namespace: &str, name: &str) -> Value {
    let text = |t: &str| t.replace(NAMESPACE, namespace).replace(NAME, name);
    match v {
        Value::String(t) => Value::String(text(t)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| resolve(i, namespace, name)).collect())
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (text(k), resolve(v, namespace, name)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Subject {
    /// Its twin as a subject of its own (for driving it through the same steps).
    pub fn twin_subject(&self) -> Option<Subject> {
        let t = self.twin?;
        Some(Subject {
            name: t.kind,
            api_version: t.api_version,
            kind: t.kind,
            seed: t.seed,
            twin: None,
            replicated: self.replicated,
            template: t.template,
            rolls_out: self.rolls_out,
            observes_generation: t.observes_generation,
            via: t.via,
            target: t.target,
            makes: self.makes,
            gates: self.gates,
        })
    }

    /// What operations, perturbations and convergence act on: the target of a policy, the
    /// subject itself otherwise.
    pub fn workload(&self) -> Subject {
        match self.target {
            Some(t) => t.subject(),
            None => *self,
        }
    }

    /// The kinds whose Warning events are the subject's: its own, its target's and those
    /// between them and the pods.
    pub fn event_kinds(&self) -> Vec<&'static str> {
        let mut k = vec![self.kind];
        k.extend(self.via.iter().map(|(_, k)| *k));
        if let Some(t) = self.target {
            k.push(t.kind);
            k.extend(t.via.iter().map(|(_, k)| *k));
        }
        k
    }

    /// Fields that keep an object of the subject (and of its twin) from making pods: what an
    /// update's admission is tried on, so that hundreds of them cost no pods. A node selector
    /// matching no node, and no replicas for replicated kinds.
    pub fn quiet(&self) -> BTreeMap<String, Value> {
        // A policy's target is made with no pods for admission trials; copies cost nothing.
        if self.target.is_some() || self.makes == Makes::Copies {
            return BTreeMap::new();
        }
        let mut f = BTreeMap::from([(
            format!("{}.spec.nodeSelector", self.template),
            json!({"explore.harness.io/nowhere": "x"}),
        )]);
        if self.replicated {
            f.insert("spec.replicas".into(), json!(0));
        }
        f
    }

    /// The semantic operations that apply to it, in the order trials draw them from.
    pub fn ops(&self) -> Vec<Op> {
        match self.makes {
            Makes::Pods => {
                let mut ops = vec![Op::Rollout, Op::Recreate, Op::ChangeSelector];
                if self.replicated {
                    ops.extend([Op::ScaleUp, Op::ScaleDown]);
                }
                ops
            }
            Makes::Copies => vec![Op::Rewrite, Op::AddNamespace, Op::Relabel],
        }
    }

    /// Whether perturbation `p` applies to it: what acts on pods and their nodes to kinds that
    /// make pods, the deletion of a copy to kinds that make copies, what acts on the manager
    /// or on its view of the kind itself to every kind.
    pub fn perturbed_by(&self, p: Perturbation) -> bool {
        let pods = self.makes == Makes::Pods;
        match p {
            Perturbation::DeletePod { .. }
            | Perturbation::EvictPod { .. }
            | Perturbation::CordonNode
            | Perturbation::SilenceNode => pods,
            Perturbation::DeleteCopy => !pods,
            Perturbation::HoldEvents { of, .. }
            | Perturbation::DropEvents { of, .. }
            | Perturbation::CloseWatches { of } => pods || of == Watched::Own,
            Perturbation::RestartManager | Perturbation::RestartApiserver => true,
        }
    }

    /// Another selector of what its objects act on, tried on each selector of its schema: its
    /// pods' template labels, each as an `Exists` expression, for a kind that makes pods; the
    /// trial's namespaces, by [`TRIAL_LABEL`], for one that makes copies.
    pub fn reselect(&self) -> Value {
        if self.makes == Makes::Copies {
            return json!({"matchLabels": {TRIAL_LABEL: NAMESPACE}});
        }
        let seed = (self.seed)("x");
        let labels = get(&seed, self.template)["metadata"]["labels"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        json!({"matchExpressions": labels
            .iter()
            .map(|k| json!({"key": k, "operator": "Exists"}))
            .collect::<Vec<_>>()})
    }

    /// Its twin's path for `path`: renamed, the same, or none (a documented difference).
    pub fn twin_path(&self, path: &str) -> Option<String> {
        let twin = self.twin?;
        if twin.documented.contains(&path) {
            return None;
        }
        for (from, to) in twin.renamed {
            if let Some(rest) = path.strip_prefix(from) {
                return Some(format!("{to}{rest}"));
            }
        }
        Some(path.to_string())
    }
}

fn template(name: &str, batch: bool) -> Value {
    let mut spec = json!({"containers": [{"name": "main", "image": IMAGE_V1}]});
    if batch {
        spec["restartPolicy"] = json!("Never");
    }
    json!({"metadata": {"labels": {"app": name}}, "spec": spec})
}

fn object(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec})
}

fn replicated(api_version: &str, kind: &str, name: &str) -> Value {
    object(
        api_version,
        kind,
        name,
        json!({"replicas": 2, "selector": {"matchLabels": {"app": name}},
               "template": template(name, false)}),
    )
}

fn stateful(api_version: &str, name: &str) -> Value {
    let mut o = replicated(api_version, "StatefulSet", name);
    o["spec"]["serviceName"] = json!(name);
    o
}

fn per_node(api_version: &str, name: &str) -> Value {
    object(
        api_version,
        "DaemonSet",
        name,
        json!({"selector": {"matchLabels": {"app": name}}, "template": template(name, false)}),
    )
}

const KRUISE: &str = "apps.kruise.io/v1alpha1";
const REPLICA_SETS: &[Kind] = &[("apps/v1", "ReplicaSet")];
const JOBS: &[Kind] = &[("batch/v1", "Job")];

/// A CloneSet seed whose container mounts a volume from a claim template: a policy is also
/// explored over a target whose pods have storage of their own, so that it meets pods with
/// claims.
fn cloneset_with_claims(name: &str) -> Value {
    let mut o = replicated(KRUISE, "CloneSet", name);
    o["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]);
    o["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "data", "mountPath": "/data"}]);
    o
}

/// A node selector term for the nodes of `zone`.
fn in_zone(zone: &str) -> Value {
    json!({"matchExpressions": [{"key": crate::cluster::ZONE_LABEL, "operator": "In",
        "values": [zone]}]})
}

/// A Deployment as a policy's target.
const DEPLOYMENT_TARGET: Target = Target {
    api_version: "apps/v1",
    kind: "Deployment",
    seed: |n| replicated("apps/v1", "Deployment", n),
    template: "spec.template",
    via: REPLICA_SETS,
};

/// A WorkloadSpread over the target `kind` of the policy `name`: two subsets, one per zone,
/// the first bounded to one pod.
fn spread(api_version: &str, kind: &str, name: &str) -> Value {
    object(
        KRUISE,
        "WorkloadSpread",
        name,
        json!({"targetRef": {"apiVersion": api_version, "kind": kind, "name": Target::name(name)},
               "subsets": [
                   {"name": "a", "requiredNodeSelectorTerm": in_zone("zone-a"), "maxReplicas": 1},
                   {"name": "b", "requiredNodeSelectorTerm": in_zone("zone-b")}]}),
    )
}

/// A SidecarSet named `name` injecting one container into the pods of its target (the
/// target's pods are labelled `app=<target name>`).
fn sidecars(name: &str) -> Value {
    object(
        KRUISE,
        "SidecarSet",
        name,
        json!({"selector": {"matchLabels": {"app": Target::name(name)}},
               "containers": [{"name": "sidecar", "image": IMAGE_V1}]}),
    )
}

/// A CloneSet that updates its pods in place when it can: the way of updating a pod that
/// keeps what a policy put into it, where recreating the pod makes it anew.
fn cloneset_in_place(name: &str) -> Value {
    let mut o = replicated(KRUISE, "CloneSet", name);
    o["spec"]["updateStrategy"] = json!({"type": "InPlaceIfPossible"});
    o
}

/// A UnitedDeployment whose template is the union member `member`, holding `workload` (a
/// seed's spec without replicas), over two subsets, one per zone.
fn united(name: &str, member: &str, workload: Value) -> Value {
    let mut spec = workload["spec"].clone();
    if let Some(m) = spec.as_object_mut() {
        m.remove("replicas");
    }
    object(
        KRUISE,
        "UnitedDeployment",
        name,
        json!({"replicas": 2, "selector": {"matchLabels": {"app": name}},
               "template": {member: {"metadata": {"labels": {"app": name}}, "spec": spec}},
               "topology": {"subsets": [
                   {"name": "a", "nodeSelectorTerm": in_zone("zone-a")},
                   {"name": "b", "nodeSelectorTerm": in_zone("zone-b")}]}}),
    )
}

/// A workload subject with no twin.
#[expect(clippy::too_many_arguments, reason = "a subject is these eight facts")]
fn alone(
    name: &'static str,
    api_version: &'static str,
    kind: &'static str,
    seed: fn(&str) -> Value,
    template: &'static str,
    via: &'static [Kind],
    replicated: bool,
    rolls_out: bool,
) -> Subject {
    Subject {
        name,
        api_version,
        kind,
        seed,
        twin: None,
        replicated,
        template,
        rolls_out,
        observes_generation: rolls_out,
        via,
        target: None,
        makes: Makes::Pods,
        gates: &[],
    }
}

/// The policy subject `name` of `kind` (seeded by `seed`) over a CloneSet seeded by `target`.
/// Its twin is the same policy (seeded by `twin_seed`) over a Deployment: a policy admitted
/// over one target and refused over the other judges its target, not itself.
fn over_cloneset(
    name: &'static str,
    kind: &'static str,
    seed: fn(&str) -> Value,
    twin_seed: fn(&str) -> Value,
    target: fn(&str) -> Value,
) -> Subject {
    over(
        name,
        (KRUISE, kind),
        (seed, twin_seed),
        Target {
            api_version: KRUISE,
            kind: "CloneSet",
            seed: target,
            template: "spec.template",
            via: &[],
        },
        DEPLOYMENT_TARGET,
    )
}

/// The policy subject `name` of `policy` (an API version and kind), seeded by the first of
/// `seeds` over `target`; its twin is the same policy, seeded by the second, over `native`,
/// the target's native counterpart.
fn over(
    name: &'static str,
    policy: Kind,
    seeds: (Seed, Seed),
    target: Target,
    native: Target,
) -> Subject {
    let (api_version, kind) = policy;
    Subject {
        name,
        api_version,
        kind,
        seed: seeds.0,
        twin: Some(Twin {
            api_version,
            kind,
            seed: seeds.1,
            renamed: &[],
            documented: &[],
            template: "",
            observes_generation: false,
            via: &[],
            target: Some(native),
        }),
        replicated: true,
        template: "",
        rolls_out: false,
        observes_generation: false,
        via: &[],
        target: Some(target),
        makes: Makes::Pods,
        gates: &[],
    }
}

/// A policy of `kind` (in `api_version`) over the target (of `target_api`, `target_kind`) of
/// the policy `name`, with `spec` besides its `targetRef`.
fn targeting(
    api_version: &str,
    kind: &str,
    name: &str,
    target: (&str, &str),
    mut spec: Value,
) -> Value {
    spec["targetRef"] =
        json!({"apiVersion": target.0, "kind": target.1, "name": Target::name(name)});
    object(api_version, kind, name, spec)
}

/// A PodUnavailableBudget over the target of `name`: at most one pod unavailable.
fn budget(target: (&str, &str), name: &str) -> Value {
    targeting(
        POLICY,
        "PodUnavailableBudget",
        name,
        target,
        json!({"maxUnavailable": 1}),
    )
}

/// A PersistentPodState over the target of `name`: each pod comes back in its zone.
fn persistent_state(target: (&str, &str), name: &str) -> Value {
    targeting(
        KRUISE,
        "PersistentPodState",
        name,
        target,
        json!({"requiredPersistentTopology": {"nodeTopologyKeys": [crate::cluster::ZONE_LABEL]}}),
    )
}

const POLICY: &str = "policy.kruise.io/v1alpha1";

/// An Advanced StatefulSet as a policy's target.
const ADVANCED_STATEFUL_TARGET: Target = Target {
    api_version: "apps.kruise.io/v1beta1",
    kind: "StatefulSet",
    seed: |n| stateful("apps.kruise.io/v1beta1", n),
    template: "spec.template",
    via: &[],
};

/// A StatefulSet as a policy's target.
const STATEFUL_TARGET: Target = Target {
    api_version: "apps/v1",
    kind: "StatefulSet",
    seed: |n| stateful("apps/v1", n),
    template: "spec.template",
    via: &[],
};

/// The subjects exploration knows: every workload and policy kind of OpenKruise that needs
/// no real node. A kind whose pod template is one of several members of a union (the
/// template of an AdvancedCronJob, of a UnitedDeployment) is a subject per member, named
/// `Kind.member`; a policy kind is a subject per kind of target it takes, named
/// `Kind.Target` (and `Kind.TargetWithClaims` over a target whose pods have claims).
pub fn subjects() -> Vec<Subject> {
    const ROLLING: &[(&str, &str)] = &[
        (
            "spec.updateStrategy.maxUnavailable",
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        (
            "spec.updateStrategy.maxSurge",
            "spec.strategy.rollingUpdate.maxSurge",
        ),
    ];
    vec![
        Subject {
            name: "CloneSet",
            api_version: KRUISE,
            kind: "CloneSet",
            seed: |n| replicated(KRUISE, "CloneSet", n),
            twin: Some(Twin {
                api_version: "apps/v1",
                kind: "Deployment",
                // With the CloneSet's defaults (maxSurge 0, maxUnavailable 20 %), where a
                // Deployment's differ (25 % each): both start from the same strategy.
                seed: |n| {
                    let mut d = replicated("apps/v1", "Deployment", n);
                    d["spec"]["strategy"] = json!({"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "20%"}});
                    d
                },
                renamed: ROLLING,
                documented: &[],
                template: "spec.template",
                observes_generation: true,
                via: REPLICA_SETS,
                target: None,
            }),
            replicated: true,
            template: "spec.template",
            rolls_out: true,
            observes_generation: true,
            via: &[],
            target: None,
            makes: Makes::Pods,
            gates: &[],
        },
        Subject {
            name: "AdvancedStatefulSet",
            api_version: "apps.kruise.io/v1beta1",
            kind: "StatefulSet",
            seed: |n| stateful("apps.kruise.io/v1beta1", n),
            twin: Some(Twin {
                api_version: "apps/v1",
                kind: "StatefulSet",
                seed: |n| stateful("apps/v1", n),
                renamed: &[],
                documented: &["spec.updateStrategy.rollingUpdate.maxUnavailable"],
                template: "spec.template",
                observes_generation: true,
                via: &[],
                target: None,
            }),
            replicated: true,
            template: "spec.template",
            rolls_out: true,
            observes_generation: true,
            via: &[],
            target: None,
            makes: Makes::Pods,
            gates: &[],
        },
        Subject {
            name: "AdvancedDaemonSet",
            api_version: KRUISE,
            kind: "DaemonSet",
            seed: |n| per_node(KRUISE, n),
            twin: Some(Twin {
                api_version: "apps/v1",
                kind: "DaemonSet",
                seed: |n| per_node("apps/v1", n),
                renamed: &[],
                documented: &["spec.updateStrategy.rollingUpdate.maxSurge"],
                template: "spec.template",
                observes_generation: true,
                via: &[],
                target: None,
            }),
            replicated: false,
            template: "spec.template",
            rolls_out: true,
            observes_generation: true,
            via: &[],
            target: None,
            makes: Makes::Pods,
            gates: &[],
        },
        Subject {
            name: "BroadcastJob",
            api_version: KRUISE,
            kind: "BroadcastJob",
            seed: |n| {
                object(
                    KRUISE,
                    "BroadcastJob",
                    n,
                    json!({"template": template(n, true), "completionPolicy": {"type": "Always"}}),
                )
            },
            twin: Some(Twin {
                api_version: "batch/v1",
                kind: "Job",
                seed: |n| object("batch/v1", "Job", n, json!({"template": template(n, true)})),
                renamed: &[],
                documented: &[],
                template: "spec.template",
                observes_generation: false,
                via: &[],
                target: None,
            }),
            replicated: false,
            template: "spec.template",
            rolls_out: false,
            observes_generation: false,
            via: &[],
            target: None,
            makes: Makes::Pods,
            gates: &[],
        },
        Subject {
            name: "AdvancedCronJob",
            api_version: KRUISE,
            kind: "AdvancedCronJob",
            seed: |n| {
                object(
                    KRUISE,
                    "AdvancedCronJob",
                    n,
                    json!({"schedule": "0 0 1 1 *", "template": {"jobTemplate": {
                        "spec": {"template": template(n, true)}}}}),
                )
            },
            twin: Some(Twin {
                api_version: "batch/v1",
                kind: "CronJob",
                seed: |n| {
                    object(
                        "batch/v1",
                        "CronJob",
                        n,
                        json!({"schedule": "0 0 1 1 *", "jobTemplate": {
                            "spec": {"template": template(n, true)}}}),
                    )
                },
                renamed: &[("spec.template.jobTemplate", "spec.jobTemplate")],
                documented: &[],
                template: "spec.jobTemplate.spec.template",
                observes_generation: false,
                via: JOBS,
                target: None,
            }),
            replicated: false,
            template: "spec.template.jobTemplate.spec.template",
            rolls_out: false,
            observes_generation: false,
            via: JOBS,
            target: None,
            makes: Makes::Pods,
            gates: &[],
        },
        alone(
            "AdvancedCronJob.broadcastJobTemplate",
            KRUISE,
            "AdvancedCronJob",
            |n| {
                object(
                    KRUISE,
                    "AdvancedCronJob",
                    n,
                    json!({"schedule": "0 0 1 1 *", "template": {"broadcastJobTemplate": {
                        "spec": {"template": template(n, true),
                                 "completionPolicy": {"type": "Always"}}}}}),
                )
            },
            "spec.template.broadcastJobTemplate.spec.template",
            &[(KRUISE, "BroadcastJob")],
            false,
            false,
        ),
        alone(
            "UnitedDeployment.cloneSetTemplate",
            KRUISE,
            "UnitedDeployment",
            |n| united(n, "cloneSetTemplate", replicated(KRUISE, "CloneSet", n)),
            "spec.template.cloneSetTemplate.spec.template",
            &[(KRUISE, "CloneSet")],
            true,
            true,
        ),
        alone(
            "UnitedDeployment.advancedStatefulSetTemplate",
            KRUISE,
            "UnitedDeployment",
            |n| {
                united(
                    n,
                    "advancedStatefulSetTemplate",
                    stateful("apps.kruise.io/v1beta1", n),
                )
            },
            "spec.template.advancedStatefulSetTemplate.spec.template",
            &[("apps.kruise.io/v1beta1", "StatefulSet")],
            true,
            true,
        ),
        alone(
            "UnitedDeployment.statefulSetTemplate",
            KRUISE,
            "UnitedDeployment",
            |n| united(n, "statefulSetTemplate", stateful("apps/v1", n)),
            "spec.template.statefulSetTemplate.spec.template",
            &[("apps/v1", "StatefulSet")],
            true,
            true,
        ),
        alone(
            "UnitedDeployment.deploymentTemplate",
            KRUISE,
            "UnitedDeployment",
            |n| {
                united(
                    n,
                    "deploymentTemplate",
                    replicated("apps/v1", "Deployment", n),
                )
            },
            "spec.template.deploymentTemplate.spec.template",
            &[("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet")],
            true,
            true,
        ),
        over_cloneset(
            "WorkloadSpread.CloneSet",
            "WorkloadSpread",
            |n| spread(KRUISE, "CloneSet", n),
            |n| spread("apps/v1", "Deployment", n),
            |n| replicated(KRUISE, "CloneSet", n),
        ),
        // Over a target whose pods have storage of their own.
        over_cloneset(
            "WorkloadSpread.CloneSetWithClaims",
            "WorkloadSpread",
            |n| spread(KRUISE, "CloneSet", n),
            |n| spread("apps/v1", "Deployment", n),
            cloneset_with_claims,
        ),
        over_cloneset(
            "SidecarSet.CloneSet",
            "SidecarSet",
            sidecars,
            sidecars,
            cloneset_in_place,
        ),
        over(
            "PodUnavailableBudget.CloneSet",
            (POLICY, "PodUnavailableBudget"),
            (
                |n| budget((KRUISE, "CloneSet"), n),
                |n| budget(("apps/v1", "Deployment"), n),
            ),
            Target {
                api_version: KRUISE,
                kind: "CloneSet",
                seed: |n| replicated(KRUISE, "CloneSet", n),
                template: "spec.template",
                via: &[],
            },
            DEPLOYMENT_TARGET,
        ),
        over(
            "PersistentPodState.AdvancedStatefulSet",
            (KRUISE, "PersistentPodState"),
            (
                |n| persistent_state(("apps.kruise.io/v1beta1", "StatefulSet"), n),
                |n| persistent_state(("apps/v1", "StatefulSet"), n),
            ),
            ADVANCED_STATEFUL_TARGET,
            STATEFUL_TARGET,
        ),
        Subject {
            name: "WorkloadSpread.Deployment",
            api_version: KRUISE,
            kind: "WorkloadSpread",
            seed: |n| spread("apps/v1", "Deployment", n),
            twin: None,
            replicated: true,
            template: "",
            rolls_out: false,
            observes_generation: false,
            via: &[],
            target: Some(DEPLOYMENT_TARGET),
            makes: Makes::Pods,
            gates: &[],
        },
        Subject {
            name: "ResourceDistribution",
            api_version: KRUISE,
            kind: "ResourceDistribution",
            seed: distribution,
            twin: None,
            replicated: false,
            template: "",
            rolls_out: false,
            observes_generation: true,
            via: &[],
            target: None,
            makes: Makes::Copies,
            gates: &["ResourceDistributionGate"],
        },
    ]
}

/// A ResourceDistribution copying the first of [`embedded_values`] into the trial's namespace,
/// and excluding another (which does not exist).
fn distribution(name: &str) -> Value {
    let excluded = format!("{NAMESPACE}-excluded");
    object(
        KRUISE,
        "ResourceDistribution",
        name,
        json!({"resource": embedded_values()[0],
               "targets": {"includedNamespaces": {"list": [{"name": NAMESPACE}]},
                           "excludedNamespaces": {"list": [{"name": excluded}]}}}),
    )
}

/// The values of an embedded object (`x-kubernetes-embedded-resource`): the objects of the
/// core API that hold data, in each of the ways they hold it — a ConfigMap with `data`, with
/// `binaryData`, immutable; a Secret with `data`, with `stringData`, immutable — and an object
/// that holds none (a ServiceAccount). Each is named after the trial's object ([`NAME`]), so
/// that copies of trials at once never meet.
pub fn embedded_values() -> Vec<Value> {
    let meta = json!({"name": NAME, "labels": {COPIED_LABEL: "v"}});
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
               "binaryData": {"k": "dg=="}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"},
               "immutable": true}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
               "data": {"k": "dg=="}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta,
               "stringData": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"k": "dg=="},
               "immutable": true}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}),
    ]
}

/// The prefix of a field of a policy's target among the policy's own: a policy is tried over
/// targets whose templates set the leaves of the core pod template, as a workload is, so that
/// a policy's fields meet the template's (see [`Target`]). The rest of the path is the field's
/// in the target.
pub const TARGET: &str = "target:";

/// `set` split into the fields of the object itself and those of its target (without
/// [`TARGET`]).
pub fn split_target(
    set: &BTreeMap<String, Value>,
) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let (mut own, mut target) = (BTreeMap::new(), BTreeMap::new());
    for (k, v) in set {
        match k.strip_prefix(TARGET) {
            Some(rest) => target.insert(rest.to_string(), v.clone()),
            None => own.insert(k.clone(), v.clone()),
        };
    }
    (own, target)
}

/// Sets `path` (dot-separated, `name[i]` for a list item) in `obj` to `value`, making the
/// objects on the way; `null` removes the field. Fails on a path through a non-object, or an
/// item past the end of a list.
pub fn set(obj: &mut Value, path: &str, value: Value) -> Result<(), String> {
    assign(obj, path, value, true)
}

/// As [`set`], but a `null` is kept as a value (a merge patch's removal).
pub fn put(obj: &mut Value, path: &str, value: Value) -> Result<(), String> {
    assign(obj, path, value, false)
}

fn assign(obj: &mut Value, path: &str, value: Value, null_removes: bool) -> Result<(), String> {
    let mut at = obj;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => {
                let n: usize = rest
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("{path}: `{part}` is not `name[index]`"))?;
                (k, Some(n))
            }
            None => (*part, None),
        };
        let map = at
            .as_object_mut()
            .ok_or_else(|| format!("{path}: `{key}` is inside a non-object"))?;
        if last && index.is_none() {
            if value.is_null() && null_removes {
                map.remove(key);
            } else {
                map.insert(key.into(), value);
            }
            return Ok(());
        }
        let next = map.entry(key).or_insert_with(|| match index {
            Some(_) => json!([]),
            None => json!({}),
        });
        at = match index {
            Some(n) => {
                let list = next
                    .as_array_mut()
                    .ok_or_else(|| format!("{path}: `{key}` is not a list"))?;
                let item = list
                    .get_mut(n)
                    .ok_or_else(|| format!("{path}: `{key}` has no item {n}"))?;
                if last {
                    *item = value;
                    return Ok(());
                }
                item
            }
            None => next,
        };
    }
    Ok(())
}

/// The value at `path` in `obj` (see [`set`]), or null.
pub fn get<'a>(obj: &'a Value, path: &str) -> &'a Value {
    let mut at = obj;
    for part in path.split('.') {
        at = match part.split_once('[') {
            Some((k, rest)) => {
                let n: usize = rest.trim_end_matches(']').parse().unwrap_or(usize::MAX);
                &at[k][n]
            }
            None => &at[part],
        };
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_makes_the_way_and_null_removes() {
        let mut o = json!({"spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}});
        set(&mut o, "spec.updateStrategy.partition", json!(1)).unwrap();
        set(
            &mut o,
            "spec.template.spec.containers[0].lifecycle.preStop",
            json!({"exec": {}}),
        )
        .unwrap();
        assert_eq!(o["spec"]["updateStrategy"]["partition"], 1);
        assert_eq!(
            get(&o, "spec.template.spec.containers[0].lifecycle.preStop"),
            &json!({"exec": {}})
        );
        set(&mut o, "spec.updateStrategy.partition", Value::Null).unwrap();
        assert_eq!(o["spec"]["updateStrategy"], json!({}));
        assert!(set(&mut o, "spec.template.spec.containers[3].image", json!("x")).is_err());
        let mut patch = json!({});
        put(&mut patch, "spec.paused", Value::Null).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"paused": null}}),
            "a patch keeps its removals"
        );
    }

    #[test]
    fn a_policy_trial_sets_its_target_fields_on_the_target() {
        let set = BTreeMap::from([
            ("spec.x".to_string(), json!(1)),
            (
                format!("{TARGET}spec.template.spec.priorityClassName"),
                json!("p"),
            ),
        ]);
        let (own, target) = split_target(&set);
        assert_eq!(own, BTreeMap::from([("spec.x".to_string(), json!(1))]));
        assert_eq!(
            target,
            BTreeMap::from([(
                "spec.template.spec.priorityClassName".to_string(),
                json!("p")
            )])
        );
    }

    #[test]
    fn twin_paths_follow_renames_and_skip_documented_differences() {
        let all = subjects();
        let cs = all.iter().find(|s| s.name == "CloneSet").unwrap();
        assert_eq!(
            cs.twin_path("spec.updateStrategy.maxSurge").as_deref(),
            Some("spec.strategy.rollingUpdate.maxSurge")
        );
        assert_eq!(
            cs.twin_path("spec.minReadySeconds").as_deref(),
            Some("spec.minReadySeconds")
        );
        let ads = all.iter().find(|s| s.name == "AdvancedDaemonSet").unwrap();
        assert_eq!(
            ads.twin_path("spec.updateStrategy.rollingUpdate.maxSurge"),
            None
        );
        for s in &all {
            let seed = (s.seed)("x");
            assert_eq!(seed["kind"], s.kind);
            // A copying kind holds no pod template: what it copies is one of the values its
            // resource is tried with.
            if s.makes == Makes::Copies {
                assert!(
                    embedded_values().contains(&seed["spec"]["resource"]),
                    "{}",
                    s.name
                );
                continue;
            }
            if let Some(t) = s.target {
                let w = s.workload();
                assert_eq!(w.kind, t.kind);
                let target = (w.seed)("x-target");
                // A policy names its target, or selects its pods.
                match seed["spec"]["targetRef"].is_null() {
                    false => {
                        assert_eq!(seed["spec"]["targetRef"]["kind"], t.kind, "{}", s.name);
                        assert_eq!(seed["spec"]["targetRef"]["name"], Target::name("x"));
                    }
                    true => assert_eq!(
                        seed["spec"]["selector"]["matchLabels"]["app"],
                        get(&target, w.template)["metadata"]["labels"]["app"],
                        "{}",
                        s.name
                    ),
                }
                assert_eq!(
                    get(&target, w.template)["spec"]["containers"][0]["image"],
                    IMAGE_V1
                );
                continue;
            }
            assert_eq!(
                get(&seed, s.template)["spec"]["containers"][0]["image"],
                IMAGE_V1,
                "{}",
                s.name
            );
            if let Some(t) = s.twin {
                let twin = (t.seed)("x");
                let at = s.twin_path(s.template).unwrap();
                assert_eq!(at, t.template);
                assert_eq!(get(&twin, &at)["spec"]["containers"][0]["image"], IMAGE_V1);
            }
        }
    }

    #[test]
    fn placeholders_resolve_to_the_trials_namespace_and_name_in_values_and_keys() {
        let seed = (subjects()
            .into_iter()
            .find(|s| s.makes == Makes::Copies)
            .expect("a copying subject")
            .seed)(NAME);
        let o = resolve(&seed, "ns-1", "ns-1-x");
        let text = o.to_string();
        assert!(!text.contains("$("), "{text}");
        assert_eq!(o["spec"]["resource"]["metadata"]["name"], "ns-1-x");
        assert_eq!(
            o["spec"]["targets"]["includedNamespaces"]["list"][0]["name"],
            "ns-1"
        );
        assert_eq!(
            o["spec"]["targets"]["excludedNamespaces"]["list"][0]["name"],
            "ns-1-excluded"
        );
        let keyed = resolve(&json!({"matchLabels": {TRIAL_LABEL: NAMESPACE}}), "n", "x");
        assert_eq!(keyed, json!({"matchLabels": {TRIAL_LABEL: "n"}}));
    }
}
