//! The leaves of a CRD's `spec` that a trial can set, each with its [`Shape`], and the values
//! each shape is tried with ([`Shape::values`]). Start with [`leaves`].
//!
//! The walk follows the field coverage's rules ([`crate::scenario::coverage`]): templates (pod,
//! claim and workload templates) and embedded Kubernetes types (label selectors, tolerations,
//! object metadata) are not walked into; a template's own fields come from the template
//! vocabulary ([`super::subject::TEMPLATE_FIELDS`]) instead. Fields inside a list of objects
//! are not leaves: the list itself is (tried empty).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::scenario::coverage;

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
    /// A string with an `enum`.
    Enum(Vec<String>),
    /// Any other string.
    String,
    /// A list of scalars.
    List(Box<Shape>),
    /// A list of objects.
    Objects,
    /// A string map (`additionalProperties`).
    Map,
    /// A label selector: tried with another selector that still selects the object's pods
    /// (see [`super::singles`]), and absent.
    Selector,
    /// An object that keeps unknown fields and declares none (a patch): tried as patches of
    /// a pod ([`super::subject::pod_patches`]).
    Free,
    /// A whole object of some kind (`x-kubernetes-embedded-resource`): tried as each of the
    /// core objects that hold data ([`super::subject::embedded_values`]).
    Embedded,
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

/// The settable leaves of version `version` of `crd` (a `CustomResourceDefinition` as JSON), in
/// path order; empty when that version is not served or has no `spec`.
pub fn leaves(crd: &Value, version: &str) -> Vec<Leaf> {
    let Some(v) = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == version && v["served"] != Value::Bool(false))
    else {
        return vec![];
    };
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut out = vec![];
    if spec.is_object() {
        walk(spec, "spec", "spec", false, &mut out);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn walk(s: &Value, path: &str, name: &str, required: bool, out: &mut Vec<Leaf>) {
    let leaf = |shape| Leaf {
        path: path.into(),
        shape,
        required,
    };
    match coverage::template(s, name) {
        // A nested workload's template: its metadata is the spec's to set.
        Some(coverage::Template::Workload) => {
            for m in ["labels", "annotations"] {
                out.push(Leaf {
                    path: format!("{path}.metadata.{m}"),
                    shape: Shape::Map,
                    required: false,
                });
            }
            return;
        }
        Some(_) => return,
        None => {}
    }
    if s["x-kubernetes-int-or-string"] == true {
        return out.push(leaf(Shape::IntOrString));
    }
    match s["type"].as_str() {
        Some("boolean") => out.push(leaf(Shape::Bool)),
        Some("integer") => out.push(leaf(Shape::Integer {
            minimum: s["minimum"].as_i64(),
            maximum: s["maximum"].as_i64(),
        })),
        Some("string") => match s["enum"].as_array() {
            Some(e) => out.push(leaf(Shape::Enum(
                e.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect(),
            ))),
            None => out.push(leaf(Shape::String)),
        },
        Some("array") => {
            let items = &s["items"];
            match items["type"].as_str() {
                Some("object") | None => {
                    out.push(leaf(Shape::Objects));
                    // The fields of an item, through the first (tried where the seed has one).
                    walk(items, &format!("{path}[0]"), name, false, out);
                }
                Some(_) => {
                    let mut inner = vec![];
                    walk(items, path, name, false, &mut inner);
                    if let Some(first) = inner.into_iter().next() {
                        out.push(leaf(Shape::List(Box::new(first.shape))));
                    }
                }
            }
        }
        Some("object") | None => {
            let props = s["properties"].as_object();
            match props {
                Some(p) if !p.is_empty() && !coverage::embedded(p) => {
                    let req: Vec<&str> = s["required"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    for (k, v) in p {
                        walk(v, &format!("{path}.{k}"), k, req.contains(&k.as_str()), out);
                    }
                }
                Some(p) if p.contains_key("matchLabels") => out.push(leaf(Shape::Selector)),
                Some(p) if !p.is_empty() => {}
                _ if s["additionalProperties"]["type"] == "string" => out.push(leaf(Shape::Map)),
                // A whole object: its metadata is the spec's to set, as a nested template's.
                _ if s["x-kubernetes-embedded-resource"] == true => {
                    out.push(leaf(Shape::Embedded));
                    for m in ["labels", "annotations"] {
                        out.push(Leaf {
                            path: format!("{path}.metadata.{m}"),
                            shape: Shape::Map,
                            required: false,
                        });
                    }
                }
                _ if s["x-kubernetes-preserve-unknown-fields"] == true => {
                    out.push(leaf(Shape::Free))
                }
                _ => {}
            }
        }
        Some(_) => {}
    }
}

/// A string no enum of the controller's lists.
pub const NOT_A_MEMBER: &str = "NotAMember";

/// A key set in a map by the values tried.
pub const MAP_KEY: &str = "explore.harness.io/key";

impl Shape {
    /// The values this shape is tried with, typical ones first: booleans both ways; integers
    /// at 0, 1, 2, 10, -1, a large value and the schema's bounds and their neighbours;
    /// int-or-strings as ints, as percentages (0 %, 1 %, 50 %, 100 %, over 100 %) and as
    /// numeric strings; each enum member and one that is not; lists empty, with one item and
    /// with two; maps empty and with one key. `Value::Null` (absent) is not among them: an
    /// optional leaf is also tried absent, see [`Leaf::values`].
    pub fn values(&self) -> Vec<Value> {
        let mut v: Vec<Value> = match self {
            Shape::Bool => vec![json!(true), json!(false)],
            Shape::Integer { minimum, maximum } => {
                let mut ints = vec![0, 1, 2, 10, -1, i64::from(i32::MAX)];
                for b in [minimum, maximum].into_iter().flatten() {
                    ints.extend([b.saturating_sub(1), *b, b.saturating_add(1)]);
                }
                ints.into_iter().map(|i| json!(i)).collect()
            }
            Shape::IntOrString => vec![
                json!(0),
                json!(1),
                json!(2),
                json!("0%"),
                json!("1%"),
                json!("50%"),
                json!("100%"),
                json!("150%"),
                json!("1"),
                json!(-1),
            ],
            Shape::Enum(members) => members
                .iter()
                .map(|m| json!(m))
                .chain([json!(NOT_A_MEMBER)])
                .collect(),
            Shape::String => vec![json!("x"), json!("")],
            Shape::List(item) => {
                let items = item.values();
                let one = items.first().cloned().unwrap_or(json!("x"));
                let two = items.get(1).cloned().unwrap_or(json!("y"));
                vec![json!([]), json!([one.clone()]), json!([one, two])]
            }
            Shape::Objects => vec![json!([])],
            Shape::Map => vec![json!({}), json!({MAP_KEY: "v"})],
            Shape::Selector => vec![],
            Shape::Free => super::subject::pod_patches(),
            Shape::Embedded => super::subject::embedded_values(),
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
mod tests {
    use super::*;

    fn crd(spec: Value) -> Value {
        json!({"spec": {"group": "g", "names": {"kind": "K"}, "versions": [
            {"name": "v1", "served": true, "storage": true,
             "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}}]}})
    }

    #[test]
    fn leaves_have_the_shapes_of_their_schemas_and_templates_only_their_metadata() {
        let c = crd(
            json!({"type": "object", "required": ["replicas"], "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "paused": {"type": "boolean"},
            "selector": {"type": "object", "properties": {
                "matchLabels": {"type": "object"}, "matchExpressions": {"type": "array"}}},
            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "jobTemplate": {"type": "object", "properties": {
                "metadata": {"type": "object"}, "spec": {"type": "object"}}},
            "updateStrategy": {"type": "object", "properties": {
                "type": {"type": "string", "enum": ["ReCreate", "InPlaceIfPossible"]},
                "maxUnavailable": {"x-kubernetes-int-or-string": true, "anyOf": [
                    {"type": "integer"}, {"type": "string"}]},
                "priorities": {"type": "array", "items": {"type": "object", "properties": {
                    "weight": {"type": "integer"},
                    "patch": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
                "finalizers": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}),
        );
        let got: Vec<(String, Shape, bool)> = leaves(&c, "v1")
            .into_iter()
            .map(|l| (l.path, l.shape, l.required))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "spec.jobTemplate.metadata.annotations".into(),
                    Shape::Map,
                    false
                ),
                ("spec.jobTemplate.metadata.labels".into(), Shape::Map, false),
                ("spec.paused".into(), Shape::Bool, false),
                (
                    "spec.replicas".into(),
                    Shape::Integer {
                        minimum: Some(0),
                        maximum: None
                    },
                    true
                ),
                ("spec.selector".into(), Shape::Selector, false),
                (
                    "spec.updateStrategy.finalizers".into(),
                    Shape::List(Box::new(Shape::String)),
                    false
                ),
                ("spec.updateStrategy.labels".into(), Shape::Map, false),
                (
                    "spec.updateStrategy.maxUnavailable".into(),
                    Shape::IntOrString,
                    false
                ),
                (
                    "spec.updateStrategy.priorities".into(),
                    Shape::Objects,
                    false
                ),
                (
                    "spec.updateStrategy.priorities[0].patch".into(),
                    Shape::Free,
                    false
                ),
                (
                    "spec.updateStrategy.priorities[0].weight".into(),
                    Shape::Integer {
                        minimum: None,
                        maximum: None
                    },
                    false
                ),
                (
                    "spec.updateStrategy.type".into(),
                    Shape::Enum(vec!["ReCreate".into(), "InPlaceIfPossible".into()]),
                    false
                ),
            ]
        );
        assert!(leaves(&c, "v2").is_empty());
    }

    #[test]
    fn values_follow_the_shape_and_optional_leaves_are_also_absent() {
        let replicas = Leaf {
            path: "spec.replicas".into(),
            shape: Shape::Integer {
                minimum: Some(0),
                maximum: None,
            },
            required: true,
        };
        let v = replicas.values();
        assert!(v.contains(&json!(-1)) && v.contains(&json!(0)) && v.contains(&json!(2147483647)));
        assert!(
            !v.contains(&Value::Null),
            "a required leaf is never removed"
        );
        assert_eq!(v.len(), 6, "bounds already tried are not repeated: {v:?}");
        let surge = Leaf {
            path: "spec.x".into(),
            shape: Shape::IntOrString,
            required: false,
        };
        let v = surge.values();
        for want in [json!("150%"), json!("1"), json!(0), Value::Null] {
            assert!(v.contains(&want), "{want} in {v:?}");
        }
        let e = Shape::Enum(vec!["A".into()]).values();
        assert_eq!(e, vec![json!("A"), json!(NOT_A_MEMBER)]);
    }
}
