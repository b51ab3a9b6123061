//! What exploration works on: a [`Subject`] is one kind of the controller under test at one
//! API version the cell serves — its API, a valid seed object, its native twin if it has one,
//! the workload a policy applies to, and the seed variants behaviour trials draw. Start with
//! [`served`]: the subjects derived ([`derive`]) from what a cell serves, over the kinds of
//! [`catalog`].
//!
//! Nothing here names a case to try: the versions, the union members, the claim templates,
//! the targets of a policy and the seed variants come from the cell's CRDs and OpenAPI; the
//! values trials set come from the CRD schema and the cell's core types ([`super::schema`],
//! [`super::openapi`]), and from [`embedded_values`], the core objects that hold data, each
//! tried alike.

pub mod catalog;
pub mod derive;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

pub use self::derive::{served, subjects};
pub use super::path::{NAME, NAMESPACE, claims_at, get, parent, put, set};
pub use super::schema::{COPIED_LABEL, embedded_values};
use super::trial::{Fields, Op, Perturbation, Rng, Watched, meets, stream_of};

/// The image of every seed object.
pub use crate::scenario::workload::{IMAGE_V1, IMAGE_V2};

/// A seed object for a name: valid, with one container running [`IMAGE_V1`], pods labelled
/// `app=<name>`. Made by its kind's builder ([`catalog`]) for the subject's API version, its
/// target, its union member and its claim templates ([`derive`]).
#[derive(Clone)]
pub struct Seed(Arc<dyn Fn(&str) -> Value + Send + Sync>);

impl Seed {
    /// The seed `make` builds.
    pub fn new(make: impl Fn(&str) -> Value + Send + Sync + 'static) -> Self {
        Seed(Arc::new(make))
    }

    /// The seed object named `name`.
    pub fn make(&self, name: &str) -> Value {
        (self.0)(name)
    }
}

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

/// The native counterpart of a subject.
#[derive(Debug, Clone)]
pub struct Twin {
    /// Its API version.
    pub api_version: String,
    /// Its kind.
    pub kind: &'static str,
    /// The boolean that holds all its pods, if its schema has one ([`Subject::suspend`]).
    pub suspend: Option<String>,
    /// Its seed object for a name.
    pub seed: Seed,
    /// Fields the two keep at different paths: (subject's path, twin's path).
    pub renamed: &'static [(&'static str, &'static str)],
    /// Fields the two treat differently by design, as OpenKruise documents it (the parity
    /// table's differences): the twin's answer on them is not compared.
    pub documented: &'static [&'static str],
    /// Where its pod template is.
    pub template: String,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
    /// The kinds of the objects between it and its pods, from the top (see [`Subject::via`]).
    pub via: Vec<Kind>,
    /// The workload it applies to, when it is a policy (see [`Subject::target`]).
    pub target: Option<Box<Subject>>,
}

impl Twin {
    /// What it is, as a finding names it: its kind, and the kind of its target for a policy.
    pub fn describe(&self) -> String {
        match &self.target {
            Some(t) => format!("{} over a {}", self.kind, t.kind),
            None => self.kind.to_string(),
        }
    }
}

/// An API version and kind.
pub type Kind = (&'static str, &'static str);

/// The name of the target of the policy object `name` (see [`Subject::target`]).
pub fn target_name(policy: &str) -> String {
    format!("{policy}-target")
}

/// One kind of the controller that exploration creates objects of, at one API version.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Its name, as `--kinds` and findings name it: the kind's name in the [`catalog`], then
    /// for a union the member (`UnitedDeployment.cloneSetTemplate`), for a policy its
    /// target's subject (`WorkloadSpread.CloneSet`), [`CLAIMS`] when its pods have claim
    /// templates, and `@version` for another API version than the one its seed is written
    /// for (`CloneSet@v1beta1`, `WorkloadSpread@v1beta1.CloneSet`).
    pub name: String,
    /// The name of its kind in the [`catalog`] (`CloneSet`, `WorkloadSpread`): `--kinds`
    /// with it selects every subject of the kind.
    pub family: &'static str,
    /// Its API version.
    pub api_version: String,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed object for a name.
    pub seed: Seed,
    /// Its native twin.
    pub twin: Option<Box<Twin>>,
    /// Whether it keeps `spec.replicas` pods (false for one-per-node and job kinds; for a
    /// policy, whether its target does).
    pub replicated: bool,
    /// The boolean its schema offers to hold all its pods (the API's `spec.suspend`), if any:
    /// how [`Subject::idle`] keeps it from making pods when it has no replicas.
    pub suspend: Option<String>,
    /// Where its pod template is.
    pub template: String,
    /// Whether it keeps its pods at its template (rolls out): false for job kinds, whose
    /// pods run to completion.
    pub rolls_out: bool,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
    /// The kinds of the objects between it and its pods, from the top (a Deployment's
    /// ReplicaSets): its pods are those it owns through them.
    pub via: Vec<Kind>,
    /// The workload a policy applies to (none for a workload kind): made before the policy,
    /// kept from making pods ([`Subject::idle`]), and let make them once the policy exists
    /// ([`Subject::wake`]), so that every pod it makes meets the policy. Semantic operations
    /// and perturbations act on it, and convergence is judged on it.
    pub target: Option<Box<Subject>>,
    /// What its objects make, which says how they converge.
    pub makes: Makes,
    /// The controller's feature gates it needs on (the controller serves nothing of it
    /// without them): an exploration of it turns them on.
    pub gates: &'static [&'static str],
    /// Seeds besides the one as written, as the fields each sets: its replicas one below
    /// and one above the seed's, and rows of the values the schema gives the settings of its
    /// own spec outside its templates, its replicas and lists (a string's: an update
    /// strategy's type, a pod management policy, as an enum's members, the words a
    /// description quotes, or the twin's enum; a number's typical value: a
    /// `minReadySeconds`, a rolling update's bounds) and of what its seed's containers ask
    /// of the cell's nodes (each map of quantities of a container the seed declares, at a
    /// resource the nodes offer), at most three settings a row and every two values of two
    /// settings together in some row; a policy's own and its target's (as [`TARGET`]
    /// fields). Behaviour trials draw them ([`Subject::vary`]).
    pub variants: Vec<Fields>,
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

/// The suffix of the name of a subject whose pods have claim templates (a volume of their
/// own), beside the subject without.
pub const CLAIMS: &str = "WithClaims";

/// The label of each namespace a trial makes, valued with the name of the trial's first
/// namespace: a selector of it selects the trial's namespaces and no other trial's.
pub const TRIAL_LABEL: &str = "explore.harness.io/trial";

/// The label of the node selector that keeps an object's pods from every node.
const NOWHERE: &str = "explore.harness.io/nowhere";

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
        let t = self.twin.as_deref()?;
        Some(Subject {
            name: t.kind.to_string(),
            family: self.family,
            api_version: t.api_version.clone(),
            kind: t.kind,
            seed: t.seed.clone(),
            twin: None,
            replicated: self.replicated,
            suspend: t.suspend.clone(),
            template: t.template.clone(),
            rolls_out: self.rolls_out,
            observes_generation: t.observes_generation,
            via: t.via.clone(),
            target: t.target.clone(),
            makes: self.makes,
            gates: self.gates,
            variants: vec![],
        })
    }

    /// What operations, perturbations and convergence act on: the target of a policy, the
    /// subject itself otherwise.
    pub fn workload(&self) -> Subject {
        match &self.target {
            Some(t) => (**t).clone(),
            None => self.clone(),
        }
    }

    /// The kinds whose Warning events are the subject's: its own, its target's and those
    /// between them and the pods.
    pub fn event_kinds(&self) -> Vec<&'static str> {
        let mut k = vec![self.kind];
        k.extend(self.via.iter().map(|(_, k)| *k));
        if let Some(t) = &self.target {
            k.push(t.kind);
            k.extend(t.via.iter().map(|(_, k)| *k));
        }
        k
    }

    /// [`Self::event_kinds`] and the names the catalog gives them ([`catalog::named`]: an
    /// Advanced StatefulSet among its objects is `AdvancedStatefulSet` besides `StatefulSet`).
    pub fn event_names(&self) -> Vec<&'static str> {
        let mut k = self.event_kinds();
        let mut objects = vec![(self.api_version.as_str(), self.kind)];
        objects.extend(self.via.iter().map(|(a, k)| (*a, *k)));
        if let Some(t) = &self.target {
            objects.push((t.api_version.as_str(), t.kind));
            objects.extend(t.via.iter().map(|(a, k)| (*a, *k)));
        }
        k.extend(
            objects
                .iter()
                .filter_map(|(a, kind)| catalog::named(a, kind)),
        );
        k.sort_unstable();
        k.dedup();
        k
    }

    /// Whether `--kinds` name `k` selects it (ignoring case): the name of its kind, its own
    /// name, or the start of its name up to a `.` or `@` (`WorkloadSpread.CloneSet` selects
    /// the policy over every served version of CloneSet).
    pub fn selected_by(&self, k: &str) -> bool {
        let (name, k) = (self.name.to_ascii_lowercase(), k.to_ascii_lowercase());
        self.family.eq_ignore_ascii_case(&k)
            || name
                .strip_prefix(&k)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '@']))
    }

    /// Its name as a part of a Kubernetes name: lowercase letters, digits and dashes, at
    /// most 40 characters (a trial's namespace is named after it).
    pub fn slug(&self) -> String {
        let mut out = String::new();
        for c in self.name.chars() {
            match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9') => out.push(c),
                _ if !out.ends_with('-') => out.push('-'),
                _ => {}
            }
        }
        out.truncate(40);
        out.trim_matches('-').to_string()
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
            json!({NOWHERE: "x"}),
        )]);
        if self.replicated {
            f.insert("spec.replicas".into(), json!(0));
        }
        f
    }

    /// What keeps a policy's target (this subject) from making pods until the policy exists:
    /// no replicas for a replicated kind, else suspended when its schema offers it
    /// ([`Subject::suspend`]), else a node selector matching no node.
    pub fn idle(&self) -> Fields {
        match (self.replicated, &self.suspend) {
            (true, _) => Fields::from([("spec.replicas".to_string(), json!(0))]),
            // A template that may not change once the object is made (a Job's) cannot lose a
            // node selector later: the object is suspended, then resumed.
            (false, Some(path)) => Fields::from([(path.clone(), json!(true))]),
            (false, None) => Fields::from([(
                format!("{}.spec.nodeSelector", self.template),
                json!({NOWHERE: "x"}),
            )]),
        }
    }

    /// The merge patch that lets object `name` of this subject, made [`Subject::idle`], make
    /// its pods: each field idle set back to its value among `fields` (the trial's create's
    /// fields of it), else to the seed's (absent, a removal).
    pub fn wake(&self, name: &str, fields: &Fields) -> Value {
        let seed = self.seed.make(name);
        let mut patch = json!({});
        for k in self.idle().keys() {
            let v = fields.get(k).unwrap_or_else(|| get(&seed, k)).clone();
            // The paths are the subject's own, which `put` always takes.
            let _ = put(&mut patch, k, v);
        }
        patch
    }

    /// Whether it is a policy whose seed declares containers to put into its target's pods
    /// (`spec.containers`, not empty): its operations change them too ([`Op::parts`]).
    pub fn declares_containers(&self) -> bool {
        self.target.is_some()
            && self.seed.make("x")["spec"]["containers"]
                .as_array()
                .is_some_and(|c| !c.is_empty())
    }

    /// The semantic operations that apply to it, in the order trials draw them from: a
    /// policy's that declares containers ([`Self::declares_containers`]) end with those that
    /// change only them.
    pub fn ops(&self) -> Vec<Op> {
        match self.makes {
            Makes::Pods => {
                let mut ops = vec![Op::Rollout, Op::Recreate, Op::ChangeSelector];
                if self.replicated {
                    ops.extend([Op::ScaleUp, Op::ScaleDown]);
                }
                if self.declares_containers() {
                    ops.extend([Op::RolloutDeclared, Op::RecreateDeclared]);
                }
                ops
            }
            Makes::Copies => vec![Op::Rewrite, Op::Retag, Op::AddNamespace, Op::Relabel],
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
        let seed = self.seed.make("x");
        let labels = get(&seed, &self.template)["metadata"]["labels"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        json!({"matchExpressions": labels
            .iter()
            .map(|k| json!({"key": k, "operator": "Exists"}))
            .collect::<Vec<_>>()})
    }

    /// Its twin's path for `path`: renamed, the same, or none (a documented difference). A
    /// policy's field of its target ([`TARGET`]) is the target's twin's path of it: the twin
    /// policy acts on the target's twin.
    pub fn twin_path(&self, path: &str) -> Option<String> {
        let twin = self.twin.as_deref()?;
        if let (Some(rest), Some(target)) = (path.strip_prefix(TARGET), &self.target) {
            return target.twin_path(rest).map(|p| format!("{TARGET}{p}"));
        }
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

    /// `set` at its twin's paths ([`Subject::twin_path`]); none when a field has no path there.
    pub fn twin_fields(&self, set: &Fields) -> Option<Fields> {
        set.iter()
            .map(|(k, v)| self.twin_path(k).map(|p| (p, v.clone())))
            .collect()
    }

    /// Where it declares claim templates (beside its pod template, [`claims_at`]), if its
    /// seed object has some: what a subject made with them ([`CLAIMS`]) explores first.
    pub fn claims(&self) -> Option<String> {
        let at = claims_at(&self.template);
        (!get(&self.seed.make("x"), &at).is_null()).then_some(at)
    }

    /// The subject with seed variants for the words the API named when it refused a value
    /// of one of its settings and then admitted (`named`, field and word): the schema's words
    /// of a setting (an enum's, the twin's, those a description quotes) are not always those
    /// the API takes, and a setting whose schema gives none is no variant's. A setting some
    /// variant sets gets each word no variant gives it in a copy of each variant that sets it;
    /// one no variant sets (a field outside the templates and lists, [`Subject::setting`])
    /// gets its words spread over the variants that set nothing of it, in turn, and a variant
    /// of its own for each word left over.
    pub fn with_named(&self, named: &[(String, Value)]) -> Subject {
        let mut s = self.clone();
        let mut words: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for (k, w) in named {
            let ws = words.entry(k).or_default();
            if w.is_string() && !ws.contains(&w) {
                ws.push(w);
            }
        }
        for (k, ws) in words {
            let given: Vec<Value> = s
                .variants
                .iter()
                .filter_map(|f| f.get(k).cloned())
                .collect();
            if !given.is_empty() {
                let mut more = vec![];
                for w in ws.into_iter().filter(|w| !given.contains(w)) {
                    for f in s.variants.iter().filter(|f| f.contains_key(k)) {
                        let mut row = f.clone();
                        row.insert(k.to_string(), w.clone());
                        more.push(row);
                    }
                }
                s.variants.extend(more);
            } else if self.setting(k) && !ws.is_empty() {
                let mut next = 0;
                for f in s.variants.iter_mut() {
                    if f.keys().all(|f| !meets(f, k)) {
                        f.insert(k.to_string(), ws[next % ws.len()].clone());
                        next += 1;
                    }
                }
                for w in ws.iter().skip(next) {
                    s.variants
                        .push(Fields::from([(k.to_string(), (*w).clone())]));
                }
            }
        }
        s
    }

    /// Whether field `k` is one of the settings seed variants set: of its spec, outside its
    /// pod template (its target's, for a [`TARGET`] field), lists and replicas.
    pub fn setting(&self, k: &str) -> bool {
        let (path, template) = match k.strip_prefix(TARGET) {
            Some(rest) => match &self.target {
                Some(t) => (rest, t.template.as_str()),
                None => return false,
            },
            None => (k, self.template.as_str()),
        };
        path.starts_with("spec.")
            && !path.contains('[')
            && path != "spec.replicas"
            && (template.is_empty() || !meets(template, path))
    }

    /// `creates` (the field sets behaviour trials create objects with, in their order) with
    /// its [`Subject::variants`] drawn in: every other create (the odd ones) also sets one,
    /// the variants in an order drawn from `seed`, so that behaviour trials start from seeds
    /// of each replica count and setting the schema gives as well as from the seed as
    /// written. A policy's trial makes two objects, itself and its target, and each has its
    /// variants: its even creates set one of its target's (those that set [`TARGET`] fields),
    /// its odd ones one of its own (its target's when it has none), each list in an order of
    /// its own. A variant that sets a field the create sets (or one inside or around it) is
    /// left out of that create. With no creates, the variants alone.
    pub fn vary(&self, creates: Vec<Fields>, seed: u64) -> Vec<Fields> {
        if self.variants.is_empty() {
            return creates;
        }
        if creates.is_empty() {
            return self.variants.clone();
        }
        let stream = stream_of(&self.name);
        let of_target =
            |f: &&Fields| self.target.is_some() && f.keys().any(|k| k.starts_with(TARGET));
        let (mut target, mut own): (Vec<&Fields>, Vec<&Fields>) =
            self.variants.iter().partition(of_target);
        let mut rng = Rng::new(seed, !stream);
        rng.shuffle(&mut own);
        rng.shuffle(&mut target);
        let odd = if own.is_empty() { &target } else { &own };
        creates
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                let from = match i % 2 {
                    1 => odd,
                    _ => &target,
                };
                if from.is_empty() {
                    return c;
                }
                let v = from[(i / 2) % from.len()];
                if !c.keys().any(|k| v.keys().any(|f| meets(k, f))) {
                    c.extend(v.iter().map(|(k, x)| (k.clone(), x.clone())));
                }
                c
            })
            .collect()
    }
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
            cs.twin_path("spec.updateStrategy.rollingUpdate.maxUnavailable")
                .as_deref(),
            Some("spec.strategy.rollingUpdate.maxUnavailable"),
            "as v1beta1 keeps it"
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
        // A policy's twin acts on its target's twin: a field of the target is at the target
        // twin's path, or at none.
        let over = |family: &str| {
            all.iter()
                .find(|s| s.twin.is_some() && s.target.as_ref().is_some_and(|t| t.family == family))
                .unwrap_or_else(|| panic!("a policy over a {family} with a twin"))
        };
        let p = over("CloneSet");
        assert_eq!(
            p.twin_path(&format!("{TARGET}spec.updateStrategy.maxSurge"))
                .as_deref(),
            Some(&*format!("{TARGET}spec.strategy.rollingUpdate.maxSurge"))
        );
        assert_eq!(
            p.twin_path(&format!("{TARGET}spec.replicas")).as_deref(),
            Some(&*format!("{TARGET}spec.replicas"))
        );
        let set = Fields::from([
            (format!("{TARGET}spec.updateStrategy.maxSurge"), json!(1)),
            ("spec.x".to_string(), json!(2)),
        ]);
        assert_eq!(
            p.twin_fields(&set),
            Some(Fields::from([
                (
                    format!("{TARGET}spec.strategy.rollingUpdate.maxSurge"),
                    json!(1)
                ),
                ("spec.x".to_string(), json!(2)),
            ]))
        );
        if let Some(p) = all.iter().find(|s| {
            s.twin.is_some()
                && s.target
                    .as_ref()
                    .is_some_and(|t| t.family == "AdvancedDaemonSet")
        }) {
            let documented = format!("{TARGET}spec.updateStrategy.rollingUpdate.maxSurge");
            assert_eq!(p.twin_path(&documented), None);
            assert_eq!(p.twin_fields(&Fields::from([(documented, json!(1))])), None);
        }
    }

    #[test]
    fn words_a_refusal_named_come_into_the_seed_variants_of_their_setting() {
        let (crds, doc) = derive::tests::cell();
        let all = derive::served(&crds, &doc);
        let mut cs = all.iter().find(|s| s.name == "CloneSet").unwrap().clone();
        let f = |pairs: &[(&str, Value)]| -> Fields {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        cs.variants = vec![
            f(&[("spec.a", json!("A")), ("spec.n", json!(1))]),
            f(&[("spec.a", json!("Z")), ("spec.m", json!(1))]),
            f(&[("spec.n", json!(1))]),
            f(&[("spec.m", json!(1))]),
        ];
        let named = |k: &str, w: &str| (k.to_string(), json!(w));
        // A setting variants set: the new word in a copy of each variant that sets it.
        let got = cs.with_named(&[named("spec.a", "A"), named("spec.a", "B")]);
        assert_eq!(got.variants[..4], cs.variants[..]);
        assert_eq!(
            got.variants[4..],
            [
                f(&[("spec.a", json!("B")), ("spec.n", json!(1))]),
                f(&[("spec.a", json!("B")), ("spec.m", json!(1))]),
            ]
        );
        // One no variant sets: spread over those free of it, in turn, the rest alone.
        let got = cs.with_named(&[named("spec.s.t", "P"), named("spec.s.t", "Q")]);
        let t: Vec<Option<&Value>> = got.variants.iter().map(|v| v.get("spec.s.t")).collect();
        assert_eq!(
            t,
            [
                Some(&json!("P")),
                Some(&json!("Q")),
                Some(&json!("P")),
                Some(&json!("Q"))
            ]
        );
        let got = cs.with_named(&[1, 2, 3, 4, 5].map(|i| named("spec.s.t", &format!("W{i}"))));
        assert_eq!(got.variants.len(), 5);
        assert_eq!(got.variants[4], f(&[("spec.s.t", json!("W5"))]));
        // A field of the pod template, of a list, or a number: no variant.
        for k in [
            "spec.template.spec.dnsPolicy",
            "spec.l[0].t",
            "spec.replicas",
        ] {
            assert!(!cs.setting(k), "{k}");
            assert_eq!(cs.with_named(&[named(k, "P")]).variants, cs.variants);
        }
        assert_eq!(
            cs.with_named(&[("spec.s.t".to_string(), json!(3))])
                .variants,
            cs.variants
        );
    }

    #[test]
    fn a_target_made_idle_wakes_to_the_trials_fields_or_its_seeds() {
        let all = subjects();
        let find = |n: &str| all.iter().find(|s| s.name == n).unwrap().clone();
        let cs = find("CloneSet");
        assert_eq!(
            cs.idle(),
            Fields::from([("spec.replicas".to_string(), json!(0))])
        );
        assert_eq!(
            cs.wake("t", &Fields::new()),
            json!({"spec": {"replicas": 2}})
        );
        let three = Fields::from([("spec.replicas".to_string(), json!(3))]);
        assert_eq!(cs.wake("t", &three), json!({"spec": {"replicas": 3}}));
        // A kind without replicas is kept off every node, then let back.
        let ads = find("AdvancedDaemonSet");
        let idle = ads.idle();
        assert!(
            idle["spec.template.spec.nodeSelector"].is_object(),
            "{idle:?}"
        );
        assert_eq!(
            ads.wake("t", &Fields::new()),
            json!({"spec": {"template": {"spec": {"nodeSelector": null}}}})
        );
        // A policy's target is its workload.
        let pub_ = find("PodUnavailableBudget.AdvancedDaemonSet");
        assert_eq!(pub_.workload().kind, "DaemonSet");
        assert!(!pub_.replicated && !pub_.ops().contains(&Op::ScaleUp));
        // A policy that declares containers changes them alone too; one that does not, never.
        let declared = [Op::RolloutDeclared, Op::RecreateDeclared];
        assert!(!pub_.declares_containers());
        assert!(declared.iter().all(|o| !pub_.ops().contains(o)));
        let sidecars = find("SidecarSet.CloneSet");
        assert!(sidecars.declares_containers());
        assert!(sidecars.ops().ends_with(&declared), "{:?}", sidecars.ops());
        assert!(!find("CloneSet").declares_containers());
    }

    #[test]
    fn an_operation_of_a_policy_s_trial_acts_on_its_target_on_what_it_declares_or_both() {
        assert_eq!(Op::Rollout.parts(), (Some(Op::Rollout), Some(Op::Rollout)));
        assert_eq!(
            Op::Recreate.parts(),
            (Some(Op::Recreate), Some(Op::Recreate))
        );
        assert_eq!(Op::RolloutDeclared.parts(), (None, Some(Op::Rollout)));
        assert_eq!(Op::RecreateDeclared.parts(), (None, Some(Op::Recreate)));
        for op in [Op::ScaleUp, Op::ScaleDown, Op::ChangeSelector, Op::Rewrite] {
            assert_eq!(op.parts(), (Some(op), None));
        }
    }

    #[test]
    fn a_policys_name_selects_it_over_every_target_and_slugs_are_names() {
        let all = subjects();
        let by = |k: &str| -> Vec<&str> {
            all.iter()
                .filter(|s| s.selected_by(k))
                .map(|s| s.name.as_str())
                .collect()
        };
        let spreads = by("workloadspread");
        assert!(spreads.len() > 3, "{spreads:?}");
        assert!(spreads.iter().all(|n| n.starts_with("WorkloadSpread.")));
        assert_eq!(by("WorkloadSpread.CloneSet"), ["WorkloadSpread.CloneSet"]);
        assert_eq!(by("CloneSet"), ["CloneSet"]);
        let long = all
            .iter()
            .find(|s| s.name == "PersistentPodState.AdvancedStatefulSet")
            .unwrap();
        let slug = long.slug();
        assert!(slug.len() <= 40 && slug.starts_with("persistentpodstate-advanced"));
        assert!(
            slug.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }

    #[test]
    fn placeholders_resolve_to_the_trials_namespace_and_name_in_values_and_keys() {
        let seed = subjects()
            .into_iter()
            .find(|s| s.makes == Makes::Copies)
            .expect("a copying subject")
            .seed
            .make(NAME);
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
