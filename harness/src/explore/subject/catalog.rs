//! The kinds exploration knows how to seed, as tables: [`WORKLOADS`] (the controller's own
//! and the built-in ones), [`UNIONS`] (a kind whose pod template is one member of a union of
//! workload templates), [`POLICIES`] (a kind that applies to a workload it names or whose pods
//! it selects) and [`COPIERS`]. Each entry holds what the API cannot say: how to write a valid
//! object of the kind (its seed), where its pods come from, and its native twin. What is
//! tried — the versions, the union members, the claim templates, the targets, the values —
//! is derived from what the cell serves ([`super::derive`]); nothing here names a case.

use serde_json::{Value, json};

use super::{IMAGE_V1, Kind, NAMESPACE, embedded_values, target_name};

/// A seed object at an API version, for a name.
pub type Build = fn(&str, &str) -> Value;

/// A kind of workload: an object that makes pods from a pod template.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Its name as subjects and `--kinds` call it (`AdvancedStatefulSet`).
    pub name: &'static str,
    /// The API version its seed is written for: its subject in this version has the plain
    /// name, one in another served version is named `name@version`.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed: valid in every version the kind serves, one container running
    /// [`IMAGE_V1`], pods labelled `app=<name>`.
    pub build: Build,
    /// Where its pod template is.
    pub template: &'static str,
    /// The kinds of the objects between it and its pods, from the top.
    pub via: &'static [Kind],
    /// Whether it keeps `spec.replicas` pods.
    pub replicated: bool,
    /// Whether it keeps its pods at its template (false for job kinds).
    pub rolls_out: bool,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
    /// Its native counterpart (for one of the controller's kinds).
    pub twin: Option<Native>,
    /// Whether it is built into Kubernetes: then a twin and a policy's target, not a subject
    /// of its own (exploration explores the controller).
    pub builtin: bool,
}

impl Workload {
    /// The name of the union member that holds a template of this workload
    /// (`cloneSetTemplate` for `CloneSet`): the API's naming of its unions of workload
    /// templates.
    pub fn member(&self) -> String {
        let mut c = self.name.chars();
        let first = c.next().map(|f| f.to_ascii_lowercase());
        format!(
            "{}{}Template",
            first.into_iter().collect::<String>(),
            c.as_str()
        )
    }
}

/// The native twin of a kind: a built-in workload (by its name among [`WORKLOADS`]) and how
/// the two differ.
#[derive(Debug, Clone, Copy)]
pub struct Native {
    /// The built-in workload.
    pub workload: &'static str,
    /// Its seed when it starts from other defaults than its own, to match the kind's.
    pub build: Option<Build>,
    /// Fields the two keep at different paths: (the kind's path, the twin's path).
    pub renamed: &'static [(&'static str, &'static str)],
    /// Fields the two treat differently by design, as OpenKruise documents it (the parity
    /// table's differences): the twin's answer on them is not compared.
    pub documented: &'static [&'static str],
}

/// A kind whose pod template is one member of a union of workload templates, each a
/// property of the object at [`Union::members_at`] named after the workload it holds
/// ([`Workload::member`]): a subject per member the schema has.
#[derive(Debug, Clone, Copy)]
pub struct Union {
    /// Its name as subjects and `--kinds` call it.
    pub name: &'static str,
    /// The API version its seed is written for.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Where its members are.
    pub members_at: &'static str,
    /// Its seed at an API version, for a name, holding `member` with `spec` (a member
    /// workload's seed's spec).
    pub build: fn(&str, &str, &str, Value) -> Value,
    /// Whether it keeps `spec.replicas` pods.
    pub replicated: bool,
    /// Whether it keeps its pods at its template.
    pub rolls_out: bool,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
    /// The member that has a native twin, and the twin: that member's subject has the
    /// kind's plain name, the others `Kind.member`.
    pub twin: Option<(&'static str, Native)>,
}

/// A policy seed at an API version, over the target (API version, kind) of the policy
/// named, given that version's `spec` schema (null when not read from a cell).
pub type PolicyBuild = fn(&str, (&str, &str), &str, &Value) -> Value;

/// A kind that applies to a workload: it names one (`spec.targetRef`) or selects its pods.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Its name as subjects and `--kinds` call it.
    pub name: &'static str,
    /// The API version its seed is written for.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed: whatever the target's kind (a policy over a kind its webhook refuses is a
    /// subject as any other: the refusal is what it finds).
    pub build: PolicyBuild,
}

/// A kind that copies the resource its spec holds into namespaces.
#[derive(Debug, Clone, Copy)]
pub struct Copier {
    /// Its name as subjects and `--kinds` call it.
    pub name: &'static str,
    /// The API version its seed is written for.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed.
    pub build: Build,
    /// The controller's feature gates it needs on.
    pub gates: &'static [&'static str],
}

const KRUISE: &str = "apps.kruise.io/v1alpha1";
const KRUISE_BETA: &str = "apps.kruise.io/v1beta1";
const REPLICA_SETS: &[Kind] = &[("apps/v1", "ReplicaSet")];
const JOBS: &[Kind] = &[("batch/v1", "Job")];

/// The schedule of a cron seed: once a year, so that no run starts during a trial.
const YEARLY: &str = "0 0 1 1 *";

/// A pod template whose pods are labelled `app=<name>` (restarting never for a job's).
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

/// A workload of `kind` keeping two pods.
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

/// The native kinds: each a twin of one of the controller's and a target of every policy.
const DEPLOYMENT: Workload = Workload {
    name: "Deployment",
    api_version: "apps/v1",
    kind: "Deployment",
    build: |v, n| replicated(v, "Deployment", n),
    template: "spec.template",
    via: REPLICA_SETS,
    replicated: true,
    rolls_out: true,
    observes_generation: true,
    twin: None,
    builtin: true,
};

/// The workload kinds, the controller's first, in the order they are explored.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "CloneSet",
        api_version: KRUISE,
        kind: "CloneSet",
        build: |v, n| replicated(v, "CloneSet", n),
        template: "spec.template",
        via: &[],
        replicated: true,
        rolls_out: true,
        observes_generation: true,
        twin: Some(Native {
            workload: "Deployment",
            // With the CloneSet's defaults (maxSurge 0, maxUnavailable 20 %), where a
            // Deployment's differ (25 % each): both start from the same strategy.
            build: Some(|v, n| {
                let mut d = replicated(v, "Deployment", n);
                d["spec"]["strategy"] = json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "20%"}});
                d
            }),
            // v1alpha1 keeps the rolling update's bounds in `updateStrategy`, v1beta1 in
            // `updateStrategy.rollingUpdate`; a Deployment in `strategy.rollingUpdate`.
            renamed: &[
                (
                    "spec.updateStrategy.maxUnavailable",
                    "spec.strategy.rollingUpdate.maxUnavailable",
                ),
                (
                    "spec.updateStrategy.maxSurge",
                    "spec.strategy.rollingUpdate.maxSurge",
                ),
                (
                    "spec.updateStrategy.rollingUpdate.maxUnavailable",
                    "spec.strategy.rollingUpdate.maxUnavailable",
                ),
                (
                    "spec.updateStrategy.rollingUpdate.maxSurge",
                    "spec.strategy.rollingUpdate.maxSurge",
                ),
            ],
            documented: &[],
        }),
        builtin: false,
    },
    Workload {
        name: "AdvancedStatefulSet",
        api_version: KRUISE_BETA,
        kind: "StatefulSet",
        build: stateful,
        template: "spec.template",
        via: &[],
        replicated: true,
        rolls_out: true,
        observes_generation: true,
        twin: Some(Native {
            workload: "StatefulSet",
            build: None,
            renamed: &[],
            documented: &["spec.updateStrategy.rollingUpdate.maxUnavailable"],
        }),
        builtin: false,
    },
    Workload {
        name: "AdvancedDaemonSet",
        api_version: KRUISE,
        kind: "DaemonSet",
        build: per_node,
        template: "spec.template",
        via: &[],
        replicated: false,
        rolls_out: true,
        observes_generation: true,
        twin: Some(Native {
            workload: "DaemonSet",
            build: None,
            renamed: &[],
            documented: &["spec.updateStrategy.rollingUpdate.maxSurge"],
        }),
        builtin: false,
    },
    Workload {
        name: "BroadcastJob",
        api_version: KRUISE,
        kind: "BroadcastJob",
        build: |v, n| {
            object(
                v,
                "BroadcastJob",
                n,
                json!({"template": template(n, true), "completionPolicy": {"type": "Always"}}),
            )
        },
        template: "spec.template",
        via: &[],
        replicated: false,
        rolls_out: false,
        observes_generation: false,
        twin: Some(Native {
            workload: "Job",
            build: None,
            renamed: &[],
            documented: &[],
        }),
        builtin: false,
    },
    DEPLOYMENT,
    Workload {
        name: "StatefulSet",
        api_version: "apps/v1",
        kind: "StatefulSet",
        build: stateful,
        template: "spec.template",
        via: &[],
        replicated: true,
        rolls_out: true,
        observes_generation: true,
        twin: None,
        builtin: true,
    },
    Workload {
        name: "DaemonSet",
        api_version: "apps/v1",
        kind: "DaemonSet",
        build: per_node,
        template: "spec.template",
        via: &[],
        replicated: false,
        rolls_out: true,
        observes_generation: true,
        twin: None,
        builtin: true,
    },
    Workload {
        name: "Job",
        api_version: "batch/v1",
        kind: "Job",
        build: |v, n| object(v, "Job", n, json!({"template": template(n, true)})),
        template: "spec.template",
        via: &[],
        replicated: false,
        rolls_out: false,
        observes_generation: false,
        twin: None,
        builtin: true,
    },
    Workload {
        name: "CronJob",
        api_version: "batch/v1",
        kind: "CronJob",
        build: |v, n| {
            object(
                v,
                "CronJob",
                n,
                json!({"schedule": YEARLY, "jobTemplate": {
                    "spec": {"template": template(n, true)}}}),
            )
        },
        template: "spec.jobTemplate.spec.template",
        via: JOBS,
        replicated: false,
        rolls_out: false,
        observes_generation: false,
        twin: None,
        builtin: true,
    },
];

/// A node selector term for the nodes of `zone`.
fn in_zone(zone: &str) -> Value {
    json!({"matchExpressions": [{"key": crate::cluster::ZONE_LABEL, "operator": "In",
        "values": [zone]}]})
}

/// The kinds whose pod template is one member of a union.
pub const UNIONS: &[Union] = &[
    Union {
        name: "AdvancedCronJob",
        api_version: KRUISE,
        kind: "AdvancedCronJob",
        members_at: "spec.template",
        build: |v, n, member, spec| {
            object(
                v,
                "AdvancedCronJob",
                n,
                json!({"schedule": YEARLY, "template": {member: {"spec": spec}}}),
            )
        },
        replicated: false,
        rolls_out: false,
        observes_generation: false,
        twin: Some((
            "jobTemplate",
            Native {
                workload: "CronJob",
                build: None,
                renamed: &[("spec.template.jobTemplate", "spec.jobTemplate")],
                documented: &[],
            },
        )),
    },
    // Over two subsets, one per zone; a member's spec without its replicas (the subsets
    // share the UnitedDeployment's).
    Union {
        name: "UnitedDeployment",
        api_version: KRUISE,
        kind: "UnitedDeployment",
        members_at: "spec.template",
        build: |v, n, member, mut spec| {
            if let Some(m) = spec.as_object_mut() {
                m.remove("replicas");
            }
            object(
                v,
                "UnitedDeployment",
                n,
                json!({"replicas": 2, "selector": {"matchLabels": {"app": n}},
                       "template": {member: {"metadata": {"labels": {"app": n}}, "spec": spec}},
                       "topology": {"subsets": [
                           {"name": "a", "nodeSelectorTerm": in_zone("zone-a")},
                           {"name": "b", "nodeSelectorTerm": in_zone("zone-b")}]}}),
            )
        },
        replicated: true,
        rolls_out: true,
        observes_generation: true,
        twin: None,
    },
];

/// The properties of the items of list `list` of `spec` (a version's `spec` schema).
fn item_properties<'a>(spec: &'a Value, list: &str) -> Option<&'a serde_json::Map<String, Value>> {
    spec["properties"][list]["items"]["properties"].as_object()
}

/// A WorkloadSpread over the target of `name`: two subsets, one per zone, the first bounded
/// to one pod. A subset's node selector term is the subset field whose schema is one (its
/// name changed between versions).
fn spread(api_version: &str, target: (&str, &str), name: &str, spec: &Value) -> Value {
    let term = item_properties(spec, "subsets")
        .and_then(|p| {
            p.iter().find_map(|(k, s)| {
                (s["properties"]["matchExpressions"].is_object() && s["type"] != "array")
                    .then_some(k.as_str())
            })
        })
        .unwrap_or("requiredNodeSelectorTerm");
    object(
        api_version,
        "WorkloadSpread",
        name,
        json!({"targetRef": {"apiVersion": target.0, "kind": target.1, "name": target_name(name)},
               "subsets": [
                   {"name": "a", term: in_zone("zone-a"), "maxReplicas": 1},
                   {"name": "b", term: in_zone("zone-b")}]}),
    )
}

/// A SidecarSet injecting one container into the pods of the target of `name` (labelled
/// `app=<target name>`).
fn sidecars(api_version: &str, _: (&str, &str), name: &str, _: &Value) -> Value {
    object(
        api_version,
        "SidecarSet",
        name,
        json!({"selector": {"matchLabels": {"app": target_name(name)}},
               "containers": [{"name": "sidecar", "image": IMAGE_V1}]}),
    )
}

/// A policy of `kind` over the target of `name`, with `spec` besides its `targetRef`.
fn targeting(
    api_version: &str,
    kind: &str,
    name: &str,
    target: (&str, &str),
    spec: Value,
) -> Value {
    let mut spec = spec;
    spec["targetRef"] =
        json!({"apiVersion": target.0, "kind": target.1, "name": target_name(name)});
    object(api_version, kind, name, spec)
}

/// A PodUnavailableBudget over the target of `name`: at most one pod unavailable.
fn budget(api_version: &str, target: (&str, &str), name: &str, _: &Value) -> Value {
    targeting(
        api_version,
        "PodUnavailableBudget",
        name,
        target,
        json!({"maxUnavailable": 1}),
    )
}

/// A PersistentPodState over the target of `name`: each pod comes back in its zone. The
/// topology's keys are its one required field (its name changed between versions).
fn persistent_state(api_version: &str, target: (&str, &str), name: &str, spec: &Value) -> Value {
    let keys = spec["properties"]["requiredPersistentTopology"]["required"][0]
        .as_str()
        .unwrap_or("nodeTopologyKeys");
    targeting(
        api_version,
        "PersistentPodState",
        name,
        target,
        json!({"requiredPersistentTopology": {keys: [crate::cluster::ZONE_LABEL]}}),
    )
}

/// The policy kinds.
pub const POLICIES: &[Policy] = &[
    Policy {
        name: "WorkloadSpread",
        api_version: KRUISE,
        kind: "WorkloadSpread",
        build: spread,
    },
    Policy {
        name: "SidecarSet",
        api_version: KRUISE,
        kind: "SidecarSet",
        build: sidecars,
    },
    Policy {
        name: "PodUnavailableBudget",
        api_version: "policy.kruise.io/v1alpha1",
        kind: "PodUnavailableBudget",
        build: budget,
    },
    Policy {
        name: "PersistentPodState",
        api_version: KRUISE,
        kind: "PersistentPodState",
        build: persistent_state,
    },
];

/// A ResourceDistribution copying the first of [`embedded_values`] into the trial's
/// namespace, and excluding another (which does not exist).
fn distribution(api_version: &str, name: &str) -> Value {
    let excluded = format!("{NAMESPACE}-excluded");
    object(
        api_version,
        "ResourceDistribution",
        name,
        json!({"resource": embedded_values()[0],
               "targets": {"includedNamespaces": {"list": [{"name": NAMESPACE}]},
                           "excludedNamespaces": {"list": [{"name": excluded}]}}}),
    )
}

/// The kinds the catalog makes objects of (workloads, unions, policies, copiers), not their
/// twins: the controller's own kinds, as a panic's stack names their controllers.
pub fn kinds() -> Vec<&'static str> {
    let mut k: Vec<&'static str> = WORKLOADS.iter().map(|w| w.kind).collect();
    k.extend(UNIONS.iter().map(|u| u.kind));
    k.extend(POLICIES.iter().map(|p| p.kind));
    k.extend(COPIERS.iter().map(|c| c.kind));
    k.sort_unstable();
    k.dedup();
    k
}

/// What the catalog names the workload of `kind` in the group of `api_version` (the Advanced
/// StatefulSet, whose kind is `StatefulSet`), when it has it.
pub fn named(api_version: &str, kind: &str) -> Option<&'static str> {
    let group = |a: &str| a.rsplit_once('/').map_or("", |(g, _)| g).to_string();
    WORKLOADS
        .iter()
        .find(|w| w.kind == kind && group(w.api_version) == group(api_version))
        .map(|w| w.name)
}

/// Every kind the exploration makes ([`kinds`]) and every name the catalog gives a workload
/// (a controller may name its types after either).
pub fn kinds_and_names() -> Vec<&'static str> {
    let mut k = kinds();
    k.extend(WORKLOADS.iter().map(|w| w.name));
    k.sort_unstable();
    k.dedup();
    k
}

/// The kinds that copy a resource.
pub const COPIERS: &[Copier] = &[Copier {
    name: "ResourceDistribution",
    api_version: KRUISE,
    kind: "ResourceDistribution",
    build: distribution,
    gates: &["ResourceDistributionGate"],
}];

/// The workload of the catalog named `name`.
pub fn workload(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// The names `--kinds` takes for a kind: every kind explored on its own (the controller's
/// workloads, its unions, its policies and copiers).
pub fn families() -> Vec<&'static str> {
    WORKLOADS
        .iter()
        .filter(|w| !w.builtin)
        .map(|w| w.name)
        .chain(UNIONS.iter().map(|u| u.name))
        .chain(POLICIES.iter().map(|p| p.name))
        .chain(COPIERS.iter().map(|c| c.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_named_after_their_workloads() {
        let names: Vec<String> = WORKLOADS.iter().map(Workload::member).collect();
        for m in [
            "cloneSetTemplate",
            "advancedStatefulSetTemplate",
            "statefulSetTemplate",
            "deploymentTemplate",
            "jobTemplate",
            "broadcastJobTemplate",
        ] {
            assert!(names.iter().any(|n| n == m), "{m} in {names:?}");
        }
        for u in UNIONS {
            if let Some((member, native)) = u.twin {
                assert!(names.iter().any(|n| n == member), "{member}");
                assert!(workload(native.workload).is_some_and(|w| w.builtin));
            }
        }
        for w in WORKLOADS.iter().filter_map(|w| w.twin) {
            assert!(workload(w.workload).is_some_and(|w| w.builtin));
        }
    }

    #[test]
    fn policy_seeds_name_fields_as_each_version_does() {
        let ws_beta = json!({"properties": {"subsets": {"type": "array", "items": {"properties": {
            "requiredNodeSelector": {"type": "object", "properties": {
                "matchExpressions": {"type": "array"}, "matchFields": {"type": "array"}}},
            "preferredNodeSelector": {"type": "array", "items": {}}}}}}});
        let o = spread(
            "apps.kruise.io/v1beta1",
            ("apps/v1", "Deployment"),
            "p",
            &ws_beta,
        );
        assert!(
            o["spec"]["subsets"][0]["requiredNodeSelector"].is_object(),
            "{o}"
        );
        let o = spread(KRUISE, ("apps/v1", "Deployment"), "p", &Value::Null);
        assert!(
            o["spec"]["subsets"][0]["requiredNodeSelectorTerm"].is_object(),
            "{o}"
        );
        assert_eq!(o["spec"]["targetRef"]["name"], "p-target");
        let pps_beta = json!({"properties": {"requiredPersistentTopology": {
            "required": ["keys"], "properties": {"keys": {"type": "array"}}}}});
        let o = persistent_state("v", ("a/v", "K"), "p", &pps_beta);
        assert!(
            o["spec"]["requiredPersistentTopology"]["keys"].is_array(),
            "{o}"
        );
        let o = persistent_state("v", ("a/v", "K"), "p", &Value::Null);
        assert!(o["spec"]["requiredPersistentTopology"]["nodeTopologyKeys"].is_array());
    }
}
