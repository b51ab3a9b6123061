//! The leaves of a CRD's `spec` that a trial can set, each with its [`Shape`], and the values
//! each shape is tried with ([`Shape::values`]). Start with [`leaves`].
//!
//! The walk follows the field coverage's rules ([`crate::scenario::coverage`]) for what a
//! template is. The subject's own pod template, and every claim template, are walked from
//! the core types the cell serves ([`super::openapi`]: `PodTemplateSpec`, `PodSpec`,
//! `Container`, … and `PersistentVolumeClaim`), as the CRD's own fields are, with the same
//! values per shape, below a nested workload's template too (a UnitedDeployment's subset
//! template); another template (a nested workload's not the subject's) gives only its metadata.
//!
//! How far the walk goes, so that a pod template's hundreds of leaves stay a bounded number
//! of admission trials: an object more than [`MAX_DEPTH`] fields below the template is one
//! leaf (its minimal value); a list of objects is a leaf (empty, and one minimal item) whose
//! item's fields are walked when the seed has an item (the seed's container) or, through a
//! minimal item, for one such list on a path (the second is not walked into), and a type
//! walked through a list's item once (or one holding all its fields, an extension of it) is
//! not walked through a minimal item again but for its own scalar fields, through the seed's
//! item of that type with its required fields at their first values (an init container: the
//! seed's container renamed, and its restart policy, image pull policy, … each tried; its
//! probes, resources and lifecycle are the seed's container's). Deprecated fields are
//! not walked. [`super::singles`] then bounds the values tried per subject.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::openapi::{Doc, REFERENCED, quoted};
use super::path::NAME;
use crate::scenario::coverage;

/// The depth (fields below a template's root) past which an object is one leaf.
pub const MAX_DEPTH: usize = 6;

/// The most words of a description a string is tried with.
const MAX_WORDS: usize = 6;

/// What a leaf holds, as far as the values tried on it go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// `type: boolean`.
    Bool,
    /// `type: integer`, with the schema's bounds if it has them.
    Integer {
        /// `minimum`.
        minimum: Option<i64>,
        /// `maximum`.
        maximum: Option<i64>,
    },
    /// `x-kubernetes-int-or-string`.
    IntOrString,
    /// A number or a string (a quantity).
    Quantity,
    /// A string with an `enum`.
    Enum(Vec<String>),
    /// Any other string, with the words the API uses for it: the enum of the same field in
    /// the native twin's schema, and the literals its description quotes.
    String(Vec<String>),
    /// A string that names an object of this kind ([`Doc::reference`]), which the cell makes
    /// ([`Doc::referenced`]).
    Reference(String),
    /// A list of scalars.
    List(Box<Shape>),
    /// A list of objects, with a minimal item (its required fields at their first values).
    Objects(Value),
    /// An object not walked into (past [`MAX_DEPTH`], or a union tried with no member):
    /// tried as this value.
    Object(Value),
    /// A string map (`additionalProperties`).
    Map,
    /// A map of quantities (`additionalProperties` a number or a string): tried with what
    /// the seed states there grown and shrunk, and with the resources the cell's nodes offer,
    /// each at a share of it ([`super::openapi::Doc::offered`]).
    Quantities {
        /// What the seed object states at the map, by resource name.
        stated: BTreeMap<String, String>,
        /// What the cell's nodes offer, each at the share a trial asks for.
        offered: BTreeMap<String, String>,
    },
    /// A label selector: tried with another selector that still selects the object's pods
    /// (see [`super::singles`]), and absent.
    Selector,
    /// An object that keeps unknown fields and declares none (a patch of a pod): tried as
    /// these patches ([`pod_patches`]).
    Free(Vec<Value>),
    /// A whole object of some kind (`x-kubernetes-embedded-resource`): tried as each of the
    /// core objects that hold data ([`embedded_values`]).
    Embedded,
}

/// The label of each of [`embedded_values`] (so of their copies).
pub const COPIED_LABEL: &str = "explore.harness.io/copied";

/// The values of an embedded object (`x-kubernetes-embedded-resource`): the objects of the
/// core API that hold data, in each of the ways they hold it — a ConfigMap with `data`, with
/// `binaryData`, immutable; a Secret with `data`, with `stringData`, immutable — and an object
/// that holds none (a ServiceAccount). Each is named after the trial's object ([`super::path::NAME`]), so
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

/// One settable leaf of a spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaf {
    /// Its path, dot-separated from `spec` (`spec.updateStrategy.partition`).
    pub path: String,
    /// Its shape.
    pub shape: Shape,
    /// Whether its object requires it (it is then never removed).
    pub required: bool,
}

/// What a walk reads besides the CRD: the cell's core types, where the subject's pod template
/// is, and the seed (which lists have an item to walk through).
#[derive(Debug, Clone, Copy)]
pub struct Walk<'a> {
    /// The cell's OpenAPI; none walks no template.
    pub doc: Option<&'a Doc>,
    /// The path of the subject's pod template (`spec.template`); empty for none.
    pub template: &'a str,
    /// The seed object.
    pub seed: &'a Value,
    /// The pod template free-form patches ([`Shape::Free`]) patch.
    pub pod: &'a Value,
}

/// The settable leaves of version `version` of `crd` (a `CustomResourceDefinition` as JSON),
/// no template walked, in path order; empty when that version is not served or has no `spec`.
pub fn leaves(crd: &Value, version: &str) -> Vec<Leaf> {
    let none = Value::Null;
    leaves_with(
        crd,
        version,
        &Walk {
            doc: None,
            template: "",
            seed: &none,
            pod: &none,
        },
    )
}

/// As [`leaves`], with the templates `w` says walked from its core types.
pub fn leaves_with(crd: &Value, version: &str, w: &Walk<'_>) -> Vec<Leaf> {
    let Some(v) = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == version && v["served"] != Value::Bool(false))
    else {
        return vec![];
    };
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut walker = Walker::new(w);
    if spec.is_object() {
        walker.walk(spec, At::root("spec"));
    }
    walker.done()
}

/// The leaves of a pod template at `path` of `seed`, walked from the core
/// `PodTemplateSpec` of `doc`, in path order.
pub fn template_leaves(doc: &Doc, path: &str, seed: &Value) -> Vec<Leaf> {
    let w = Walk {
        doc: Some(doc),
        template: path,
        seed,
        pod: &Value::Null,
    };
    let mut walker = Walker::new(&w);
    if let Some(s) = doc.schema(POD_TEMPLATE) {
        walker.node(s, At::root(path).typed(Some(POD_TEMPLATE)));
    }
    walker.done()
}

const POD_TEMPLATE: &str = "io.k8s.api.core.v1.PodTemplateSpec";
const CLAIM: &str = "io.k8s.api.core.v1.PersistentVolumeClaim";

/// Where a walk is: a node's path, its field name, whether its object requires it, the type
/// and field that hold it (for references), the minimal-item lists on its path, and its
/// depth below a template (none outside one).
#[derive(Debug, Clone)]
struct At {
    path: String,
    name: String,
    required: bool,
    holder_type: Option<String>,
    holder: String,
    fresh: usize,
    depth: Option<usize>,
}

impl At {
    fn root(path: &str) -> At {
        At {
            path: path.into(),
            name: path.rsplit('.').next().unwrap_or(path).into(),
            required: false,
            holder_type: None,
            holder: String::new(),
            fresh: 0,
            depth: None,
        }
    }

    fn typed(mut self, t: Option<&str>) -> At {
        self.depth = Some(0);
        self.holder_type = t.map(String::from);
        self
    }

    fn field(&self, name: &str, required: bool, holder_type: Option<&str>) -> At {
        At {
            path: format!("{}.{name}", self.path),
            name: name.into(),
            required,
            holder_type: holder_type.map(String::from).or(self.holder_type.clone()),
            holder: self.name.clone(),
            fresh: self.fresh,
            depth: self.depth.map(|d| d + 1),
        }
    }
}

struct Walker<'a> {
    w: &'a Walk<'a>,
    out: Vec<Leaf>,
    /// The fields of the types walked through a list's item, each with the seed's item when
    /// the walk went through it.
    item_types: Vec<(BTreeSet<String>, Option<Value>)>,
}

impl<'a> Walker<'a> {
    fn new(w: &'a Walk<'a>) -> Self {
        Walker {
            w,
            out: vec![],
            item_types: vec![],
        }
    }

    fn done(mut self) -> Vec<Leaf> {
        self.out.sort_by(|a, b| a.path.cmp(&b.path));
        self.out.dedup_by(|a, b| a.path == b.path);
        self.out
    }

    /// The minimal value of schema node `s` ([`Doc::minimal`]).
    fn minimal(&self, s: &Value) -> Value {
        match self.w.doc {
            Some(d) => d.minimal(s, 0),
            None => Doc::default().minimal(s, 0),
        }
    }

    fn push(&mut self, at: &At, shape: Shape) {
        self.out.push(Leaf {
            path: at.path.clone(),
            shape,
            required: at.required,
        });
    }

    fn metadata(&mut self, at: &At) {
        for m in ["labels", "annotations"] {
            self.out.push(Leaf {
                path: format!("{}.metadata.{m}", at.path),
                shape: Shape::Map,
                required: false,
            });
        }
    }

    /// A node of a CRD's schema.
    fn walk(&mut self, s: &Value, at: At) {
        let template = coverage::template(s, &at.name);
        // The subject's pod template, whatever the CRD declares of it.
        let pod = template == Some(coverage::Template::Pod)
            || (template.is_some() && !self.w.template.is_empty() && at.path == self.w.template);
        match template {
            Some(_) if pod => {
                if let Some(doc) = self.w.doc
                    && at.path == self.w.template
                    && let Some(t) = doc.schema(POD_TEMPLATE)
                {
                    self.node(t, at.typed(Some(POD_TEMPLATE)));
                }
                return;
            }
            // A nested workload's template: its metadata is the spec's to set, and the pod
            // template below it when it is the subject's own (a UnitedDeployment's subset
            // template), whatever the CRD declares of it.
            Some(coverage::Template::Workload) => return self.nested(&at),
            Some(coverage::Template::Claim) => {
                if let Some(doc) = self.w.doc
                    && doc.schema(CLAIM).is_some()
                {
                    let claims = json!({"type": "array", "items": {"$ref":
                        format!("#/components/schemas/{CLAIM}")}});
                    self.node(&claims, at.typed(None));
                }
                return;
            }
            Some(_) => return,
            // An object the CRD leaves undeclared on the way to the subject's own pod template
            // (an AdvancedCronJob's job template) is a nested workload's template too.
            None if s["properties"].as_object().is_none_or(|p| p.is_empty())
                && self.above_own_template(&at) =>
            {
                return self.nested(&at);
            }
            None => {}
        }
        self.node(s, at);
    }

    /// A nested workload's template at `at`: its metadata, and the subject's own pod template
    /// when it lies below.
    fn nested(&mut self, at: &At) {
        self.metadata(at);
        if let Some(doc) = self.w.doc
            && self.above_own_template(at)
            && let Some(t) = doc.schema(POD_TEMPLATE)
        {
            self.node(t, At::root(self.w.template).typed(Some(POD_TEMPLATE)));
        }
    }

    /// Whether the subject's own pod template lies below `at`.
    fn above_own_template(&self, at: &At) -> bool {
        self.w.template.starts_with(&format!("{}.", at.path))
    }

    fn node(&mut self, s: &Value, at: At) {
        let doc = self.w.doc;
        let (type_name, s) = match doc {
            Some(d) => d.resolve(s),
            None => (None, s),
        };
        let type_name = type_name.map(String::from);
        let description = s["description"].as_str().unwrap_or_default();
        if let Some(shape) = number(s) {
            return self.push(&at, shape);
        }
        let one_of = s["oneOf"].as_array().or(s["anyOf"].as_array());
        if s["type"].is_null() && one_of.is_some() {
            return self.push(&at, Shape::Quantity);
        }
        match s["type"].as_str() {
            Some("boolean") => self.push(&at, Shape::Bool),
            Some("string") => {
                let shape = match s["enum"].as_array() {
                    Some(e) => Shape::Enum(
                        e.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect(),
                    ),
                    None => self.string(&at, description),
                };
                self.push(&at, shape)
            }
            Some("array") => self.list(s, at),
            Some("object") | None => self.object(s, at, type_name.as_deref(), description),
            Some(_) => {}
        }
    }

    /// Whether the values of a map (its `additionalProperties` node `values`) are quantities:
    /// a number or a string, as the core API and a CRD declare a quantity.
    fn quantities(&self, values: &Value) -> bool {
        let (_, v) = match self.w.doc {
            Some(d) => d.resolve(values),
            None => (None, values),
        };
        let either = v["oneOf"].as_array().or(v["anyOf"].as_array());
        v["type"].is_null()
            && either.is_some_and(|e| {
                let types: Vec<&str> = e.iter().filter_map(|t| t["type"].as_str()).collect();
                types.contains(&"string")
                    && types.iter().any(|t| matches!(*t, "number" | "integer"))
            })
    }

    /// A string's shape: a reference, or a string with the words its description quotes.
    fn string(&self, at: &At, description: &str) -> Shape {
        if let Some(doc) = self.w.doc
            && let Some(k) =
                doc.reference(&at.name, description, at.holder_type.as_deref(), &at.holder)
            && doc.referenced(k).is_some()
        {
            return Shape::Reference(k.kind.clone());
        }
        let mut words = quoted(description);
        words.truncate(MAX_WORDS);
        Shape::String(words)
    }

    fn list(&mut self, s: &Value, at: At) {
        let (item_type, items) = match self.w.doc {
            Some(d) => d.resolve(&s["items"]),
            None => (None, &s["items"]),
        };
        let scalar = items["x-kubernetes-int-or-string"] == true
            || items["format"] == "int-or-string"
            || matches!(
                items["type"].as_str(),
                Some("string" | "integer" | "number" | "boolean")
            );
        if scalar {
            let mut inner = Walker::new(self.w);
            inner.node(&s["items"], at.clone());
            if let Some(first) = inner.out.into_iter().next() {
                self.push(&at, Shape::List(Box::new(first.shape)));
            }
            return;
        }
        // The fields of an item, through the first: the seed's, or a minimal one.
        let first = super::path::get(self.w.seed, at.path.trim_start_matches('.'))
            .as_array()
            .and_then(|a| a.first().cloned());
        let seeded = first.is_some();
        let mut item = At {
            path: format!("{}[0]", at.path),
            required: false,
            ..at.clone()
        };
        // A type walked already, or one that holds every field of one walked already and
        // less as many again (an extension of it), is not walked again through a minimal item
        // but for its own scalar fields (an init container's restart policy: what a field
        // means may hang on the list it is in).
        let fields = |s: &Value| -> BTreeSet<String> {
            s["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        };
        let keys = fields(items);
        let like =
            |walked: &BTreeSet<String>| walked.is_subset(&keys) && walked.len() * 2 > keys.len();
        let new_type = keys.is_empty() || !self.item_types.iter().any(|(w, _)| like(w));
        // The minimal item: its required fields at their first values, over the seed's item
        // of a type walked already (an init container: the seed's container, renamed), which
        // a workload's pods can run.
        let mut minimal = self.minimal(items);
        if !seeded
            && let Some(base) = self
                .item_types
                .iter()
                .find_map(|(w, v)| v.as_ref().filter(|_| like(w)))
            && let (Some(b), Some(m)) = (base.as_object(), minimal.as_object())
        {
            let mut over = b.clone();
            over.extend(m.clone());
            minimal = Value::Object(over);
        }
        self.push(&at, Shape::Objects(minimal));
        self.item_types.push((keys, first));
        if !seeded && at.depth.is_some() {
            if at.fresh >= 1 {
                return;
            }
            item.fresh += 1;
            if !new_type {
                item.holder_type = item_type.map(String::from).or(item.holder_type);
                return self.scalars(items, item);
            }
        }
        item.holder_type = item_type.map(String::from).or(item.holder_type);
        self.node(&s["items"], item);
    }

    /// The scalar fields of object `s` at `at` (strings, numbers, booleans), none of its
    /// objects or lists.
    fn scalars(&mut self, s: &Value, at: At) {
        let Some(props) = s["properties"].as_object() else {
            return;
        };
        let req = required(s);
        let holder = at.holder_type.clone();
        for (k, v) in props {
            let own = self.w.doc.map_or(v, |d| d.resolve(v).1);
            let scalar = own["enum"].is_array()
                || matches!(
                    own["type"].as_str(),
                    Some("string" | "integer" | "number" | "boolean")
                );
            if scalar && !deprecated(&descriptions(v, own)) {
                self.node(v, at.field(k, req.contains(&k.as_str()), holder.as_deref()));
            }
        }
    }

    fn object(&mut self, s: &Value, at: At, type_name: Option<&str>, description: &str) {
        let props = s["properties"].as_object();
        let in_core = at.depth.is_some();
        match props {
            Some(p) if p.contains_key("matchLabels") => self.push(&at, Shape::Selector),
            // Object metadata: its maps are the spec's to set.
            Some(p) if in_core && coverage::embedded(p) && p.contains_key("labels") => {
                let parent = At {
                    path: at.path.rsplit_once('.').map_or("", |(h, _)| h).to_string(),
                    ..at.clone()
                };
                self.metadata(&parent)
            }
            Some(p) if !p.is_empty() && (in_core || !coverage::embedded(p)) => {
                if at.depth.is_some_and(|d| d > MAX_DEPTH) {
                    let minimal = self.minimal(s);
                    return self.push(&at, Shape::Object(minimal));
                }
                // A union: also tried with no member.
                if in_core && union(description) {
                    self.push(&at, Shape::Object(json!({})));
                }
                let req = required(s);
                let kind = s["x-kubernetes-group-version-kind"].is_array();
                for (k, v) in p {
                    let own = self.w.doc.map_or(v, |d| d.resolve(v).1);
                    if in_core
                        && (deprecated(&descriptions(v, own))
                            || (kind && matches!(k.as_str(), "status" | "apiVersion" | "kind")))
                    {
                        continue;
                    }
                    let next = at.field(k, req.contains(&k.as_str()), type_name);
                    match in_core {
                        true => self.node(v, next),
                        false => self.walk(v, next),
                    }
                }
            }
            Some(p) if !p.is_empty() => {}
            _ if self.quantities(&s["additionalProperties"]) => {
                let offered = self.w.doc.map(|d| d.offered().clone()).unwrap_or_default();
                let stated = super::path::get(self.w.seed, at.path.trim_start_matches('.'))
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, q)| match q {
                        Value::String(q) => Some((k.clone(), q.clone())),
                        Value::Number(n) => Some((k.clone(), n.to_string())),
                        _ => None,
                    })
                    .collect();
                self.push(&at, Shape::Quantities { stated, offered })
            }
            _ if s["additionalProperties"]["type"] == "string"
                || (in_core && s["additionalProperties"].is_object()) =>
            {
                self.push(&at, Shape::Map)
            }
            // A whole object: its metadata is the spec's to set, as a nested template's.
            _ if s["x-kubernetes-embedded-resource"] == true => {
                self.push(&at, Shape::Embedded);
                self.metadata(&at);
            }
            _ if s["x-kubernetes-preserve-unknown-fields"] == true => {
                let patches = match self.w.doc {
                    Some(d) => pod_patches(d, self.w.pod),
                    None => vec![],
                };
                self.push(&at, Shape::Free(patches))
            }
            // An object the API describes no further (an empty action): itself.
            _ if in_core => self.push(&at, Shape::Object(json!({}))),
            _ => {}
        }
    }
}

/// Whether a description says its fields are a union (one of them set).
fn union(description: &str) -> bool {
    let d = description.to_lowercase();
    d.contains("one and only one of") || d.contains("only one of") || d.contains("exactly one of")
}

/// The fields object schema `s` requires.
fn required(s: &Value) -> Vec<&str> {
    s["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A field's description where it is used (`v`) and of its type (`own`), together.
fn descriptions(v: &Value, own: &Value) -> String {
    format!(
        "{} {}",
        v["description"].as_str().unwrap_or_default(),
        own["description"].as_str().unwrap_or_default()
    )
}

/// Whether a description says its field is deprecated.
fn deprecated(description: &str) -> bool {
    description.trim_start().starts_with("Deprecated")
        || description.contains("Deprecated:")
        || description.contains("deprecated alias")
}

/// The values of a free-form object that patches pods (a subset's patch): strategic merge
/// patches of the pod template `pod`, each setting one leaf of the core pod template to its
/// first value (a container field on `pod`'s first container, by its name), spread over the
/// template's leaves, [`MAX_PATCHES`] at most; and invalid ones, as an enum gets a word that
/// is not a member: a union with no member, a reference to nothing.
pub fn pod_patches(doc: &Doc, pod: &Value) -> Vec<Value> {
    let leaves = template_leaves(doc, "", pod);
    let container = pod["spec"]["containers"][0]["name"].clone();
    let patch = |path: &str, v: Value| -> Option<Value> {
        let path = path.trim_start_matches('.');
        let mut patch = json!({});
        match path.strip_prefix("spec.containers[0].") {
            Some(rest) => {
                let mut c = json!({"name": container});
                super::path::set(&mut c, rest, v).ok()?;
                patch = json!({"spec": {"containers": [c]}});
            }
            None if path.contains('[') => return None,
            None => super::path::set(&mut patch, path, v).ok()?,
        }
        Some(patch)
    };
    let mut valid: Vec<Value> = leaves
        .iter()
        .filter(|l| !matches!(l.shape, Shape::Object(ref o) if o == &json!({})))
        .filter_map(|l| patch(&l.path, l.shape.values().into_iter().next()?))
        .collect();
    let step = valid.len().div_ceil(MAX_PATCHES).max(1);
    valid = valid.into_iter().step_by(step).collect();
    let invalid = leaves.iter().filter_map(|l| match &l.shape {
        Shape::Object(o) if o == &json!({}) => patch(&l.path, json!({})),
        Shape::Reference(_) => patch(&l.path, json!(format!("{REFERENCED}-none"))),
        _ => None,
    });
    let invalid: Vec<Value> = invalid.collect();
    let step = invalid.len().div_ceil(MAX_PATCHES / 2).max(1);
    valid.extend(invalid.into_iter().step_by(step));
    valid
}

/// The most valid patches a free-form object is tried with (and half as many invalid ones).
pub const MAX_PATCHES: usize = 12;

/// The shape of schema `s` (its `$ref`s followed) when it is a number: an int-or-string, or
/// an integer (or any number) with its bounds; none for any other.
pub fn number(s: &Value) -> Option<Shape> {
    if s["x-kubernetes-int-or-string"] == true || s["format"] == "int-or-string" {
        return Some(Shape::IntOrString);
    }
    matches!(s["type"].as_str(), Some("integer" | "number")).then(|| Shape::Integer {
        minimum: s["minimum"].as_i64(),
        maximum: s["maximum"].as_i64(),
    })
}

/// A string no enum of the controller's lists.
pub const NOT_A_MEMBER: &str = "NotAMember";

/// A key set in a map by the values tried.
pub const MAP_KEY: &str = "explore.harness.io/key";

/// The word a string is tried with that means nothing to the API.
pub const NONSENSE: &str = "x";

impl Shape {
    /// The values this shape is tried with, typical ones first: booleans both ways; integers
    /// at 0, 1, 2, 10, -1, a large value and the schema's bounds and their neighbours;
    /// int-or-strings as ints, as percentages (0 %, 1 %, 50 %, 100 %, over 100 %) and as
    /// numeric strings; quantities whole, in milli-units, binary-suffixed, zero and negative;
    /// each enum member and one that is not; a string's words, a nonsense word and empty; a
    /// reference as the object the cell makes and empty; lists empty, with one item and with
    /// two; lists of objects empty and with a minimal item; maps empty and with one key; maps of
    /// quantities empty, with what the seed states there doubled and halved, with each resource
    /// the cell's nodes offer, with all, and with one none offers.
    /// `Value::Null` (absent) is not among them: an optional leaf is also tried absent, see
    /// [`Leaf::values`].
    pub fn values(&self) -> Vec<Value> {
        let mut v: Vec<Value> = match self {
            Shape::Bool => vec![json!(true), json!(false)],
            // The first value is the typical one (what a bound keeps): a count of one, or the
            // least the schema allows, as the minimal object has it; zero is often "unset".
            Shape::Integer { minimum, maximum } => {
                let typical = minimum.unwrap_or(1).max(1).min(maximum.unwrap_or(i64::MAX));
                let mut ints = vec![typical, 0, 1, 2, 10, -1, i64::from(i32::MAX)];
                for b in [minimum, maximum].into_iter().flatten() {
                    ints.extend([b.saturating_sub(1), *b, b.saturating_add(1)]);
                }
                ints.into_iter().map(|i| json!(i)).collect()
            }
            Shape::IntOrString => vec![
                json!(1),
                json!(0),
                json!(2),
                json!("0%"),
                json!("1%"),
                json!("50%"),
                json!("100%"),
                json!("150%"),
                json!("1"),
                json!(-1),
            ],
            Shape::Quantity => vec![
                json!("1"),
                json!("100m"),
                json!("1Gi"),
                json!("0"),
                json!("-1"),
            ],
            Shape::Enum(members) => members
                .iter()
                .map(|m| json!(m))
                .chain([json!(NOT_A_MEMBER)])
                .collect(),
            Shape::String(words) => words
                .iter()
                .map(|w| json!(w))
                .chain([json!(NONSENSE), json!("")])
                .collect(),
            Shape::Reference(_) => vec![json!(REFERENCED), json!("")],
            Shape::List(item) => {
                let items = item.values();
                let one = items.first().cloned().unwrap_or(json!(NONSENSE));
                let two = items.get(1).cloned().unwrap_or(json!("y"));
                vec![json!([]), json!([one.clone()]), json!([one, two])]
            }
            Shape::Objects(item) => vec![json!([]), json!([item])],
            Shape::Object(o) => vec![o.clone()],
            Shape::Map => vec![json!({}), json!({MAP_KEY: "v"})],
            // Empty; what the seed states, doubled and halved; each resource the nodes offer
            // alone, all of them, and one none offers.
            Shape::Quantities { stated, offered } => {
                let mut v = vec![json!({})];
                for factor in [2.0, 0.5] {
                    let grown: Option<BTreeMap<&String, String>> = stated
                        .iter()
                        .map(|(k, q)| Some((k, super::openapi::scaled(q, factor)?)))
                        .collect();
                    if let Some(g) = grown.filter(|g| !g.is_empty()) {
                        v.push(json!(g));
                    }
                }
                v.extend(offered.iter().map(|(k, q)| json!({k: q})));
                if offered.len() > 1 {
                    v.push(json!(offered));
                }
                v.push(json!({MAP_KEY: "1"}));
                v
            }
            Shape::Selector => vec![],
            Shape::Free(patches) => patches.clone(),
            Shape::Embedded => embedded_values(),
        };
        let mut seen = vec![];
        v.retain(|x| {
            let new = !seen.contains(x);
            seen.push(x.clone());
            new
        });
        v
    }
}

impl Leaf {
    /// Its shape's values, and absent (`null`) when it is optional.
    pub fn values(&self) -> Vec<Value> {
        let mut v = self.shape.values();
        if !self.required {
            v.push(Value::Null);
        }
        v
    }
}

#[cfg(test)]
mod tests;
