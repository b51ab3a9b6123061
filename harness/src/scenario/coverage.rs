//! API field coverage: which spec fields of each CRD the scenarios set. Start with
//! [`Coverage::compute`]: it takes the field universe of the installed release
//! ([`ApiFields::of_crd`], read from each CRD's OpenAPI schema) and the paths the scenarios
//! sent ([`super::record`]), and gives one [`KindCoverage`] per CRD kind.
//!
//! A CRD's **own fields** are the leaves of its `spec` schema, where a few embedded Kubernetes
//! types count as one field each (a label selector, a node selector term, a toleration, object
//! metadata) and templates stop the walk: a pod template (`template`, or a schema with
//! `spec.containers`), a claim template (`volumeClaimTemplates`, or `spec.accessModes`) and a
//! nested workload template (`metadata` + `spec`, as UnitedDeployment's `cloneSetTemplate`)
//! are one own field each, and what scenarios set inside them is listed separately, as
//! template internals.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record::Sends;

/// What a template field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Template {
    /// A pod template.
    Pod,
    /// A PersistentVolumeClaim template.
    Claim,
    /// Another workload's template (metadata + spec).
    Workload,
    /// An embedded Kubernetes object extended with fields of its own (a SidecarSet's
    /// container): its own fields are counted, the rest are listed as its internals.
    Extended,
}

/// The spec fields of one served version of a CRD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiFields {
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Whether this is the storage version.
    pub storage: bool,
    /// Own field paths (`spec.updateStrategy.partition`, `spec.subsets[].name`).
    pub own: BTreeSet<String>,
    /// The own fields that are templates, and what they hold.
    pub templates: BTreeMap<String, Template>,
}

impl ApiFields {
    /// The fields of every served version of `crd` (a `CustomResourceDefinition` as JSON);
    /// empty for a CRD without a `spec` in its schema.
    pub fn of_crd(crd: &Value) -> Vec<ApiFields> {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let mut out = vec![];
        for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
            if v["served"] == Value::Bool(false) {
                continue;
            }
            let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
            if spec.is_null() {
                continue;
            }
            let mut fields = ApiFields {
                group: group.into(),
                version: v["name"].as_str().unwrap_or_default().into(),
                kind: kind.into(),
                storage: v["storage"] == Value::Bool(true),
                own: BTreeSet::new(),
                templates: BTreeMap::new(),
            };
            walk(spec, "spec", "spec", &mut fields);
            out.push(fields);
        }
        out
    }

    /// `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Adds the own fields below schema node `s` at `path` (`name` is its property name).
fn walk(s: &Value, path: &str, name: &str, out: &mut ApiFields) {
    if s["type"] == "array" && s["items"].is_object() {
        return walk(&s["items"], &format!("{path}[]"), name, out);
    }
    let props = s["properties"].as_object();
    if let Some(t) = template(s, name) {
        out.own.insert(path.into());
        out.templates.insert(path.into(), t);
        return;
    }
    match props {
        Some(p) if !p.is_empty() && !embedded(p) => {
            if s["x-kubernetes-preserve-unknown-fields"] == true {
                out.own.insert(path.into());
                out.templates.insert(path.into(), Template::Extended);
            }
            for (k, v) in p {
                walk(v, &format!("{path}.{k}"), k, out);
            }
        }
        _ => {
            out.own.insert(path.into());
        }
    }
}

/// Whether schema node `s` (property `name`) is a template, and of what.
pub fn template(s: &Value, name: &str) -> Option<Template> {
    let props = s["properties"].as_object();
    let spec = props.and_then(|p| p.get("spec")).map(|s| &s["properties"]);
    let has = |k: &str| spec.is_some_and(|s| s.get(k).is_some());
    if has("containers") {
        return Some(Template::Pod);
    }
    if has("accessModes") {
        return Some(Template::Claim);
    }
    if props.is_some_and(|p| p.contains_key("metadata") && p.contains_key("spec")) {
        return Some(Template::Workload);
    }
    let opaque = props.is_none_or(|p| p.is_empty());
    match name {
        "template" if opaque => Some(Template::Pod),
        "volumeClaimTemplates" if opaque => Some(Template::Claim),
        _ => None,
    }
}

/// Embedded Kubernetes types that count as one field: label selectors, node selector terms,
/// tolerations, object metadata.
pub fn embedded(p: &serde_json::Map<String, Value>) -> bool {
    let keys: BTreeSet<&str> = p.keys().map(String::as_str).collect();
    keys == BTreeSet::from(["matchLabels", "matchExpressions"])
        || keys == BTreeSet::from(["matchFields", "matchExpressions"])
        || (keys.contains("tolerationSeconds") && keys.contains("effect"))
        || (keys.contains("annotations") && keys.contains("labels") && keys.contains("name"))
}

/// The coverage of one CRD kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCoverage {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// The version counted (the one scenarios sent most, else the storage version).
    pub version: String,
    /// Own fields set by some scenario.
    pub covered: BTreeSet<String>,
    /// Own fields no scenario set.
    pub uncovered: BTreeSet<String>,
    /// Field paths set inside its templates, by template field
    /// (`spec.template` → `spec.containers[].image`).
    pub template_fields: BTreeMap<String, BTreeSet<String>>,
    /// Objects of this kind the scenarios sent.
    pub writes: usize,
}

impl KindCoverage {
    /// Own fields in all.
    pub fn total(&self) -> usize {
        self.covered.len() + self.uncovered.len()
    }

    /// Covered own fields in percent (0 for a kind without own fields).
    pub fn percent(&self) -> f64 {
        match self.total() {
            0 => 0.0,
            n => 100.0 * self.covered.len() as f64 / n as f64,
        }
    }
}

/// Field coverage of every CRD kind of a release.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// One entry per kind, by group then kind.
    pub kinds: Vec<KindCoverage>,
}

impl Coverage {
    /// The coverage of `universe` (every served version of every CRD) by `sent`.
    pub fn compute(universe: &[ApiFields], sent: &Sends) -> Coverage {
        let mut by_kind: BTreeMap<(&str, &str), Vec<&ApiFields>> = BTreeMap::new();
        for f in universe {
            by_kind.entry((&f.group, &f.kind)).or_default().push(f);
        }
        let kinds = by_kind
            .into_iter()
            .map(|((group, kind), versions)| {
                let writes = |f: &ApiFields| {
                    sent.get(&format!("{}/{kind}", f.api_version()))
                        .map_or(0, |s| s.writes)
                };
                let counted = versions
                    .iter()
                    .max_by_key(|f| (writes(f), f.storage))
                    .expect("a kind has a version");
                let mut paths = BTreeSet::new();
                for f in &versions {
                    if let Some(s) = sent.get(&format!("{}/{kind}", f.api_version())) {
                        paths.extend(s.paths.iter().cloned());
                    }
                }
                of_kind(counted, &paths, versions.iter().map(|f| writes(f)).sum()).with_group(group)
            })
            .collect();
        Coverage { kinds }
    }

    /// The entry for `kind`, if the release serves it.
    pub fn kind(&self, kind: &str) -> Option<&KindCoverage> {
        self.kinds.iter().find(|k| k.kind == kind)
    }
}

impl KindCoverage {
    fn with_group(mut self, group: &str) -> Self {
        self.group = group.into();
        self
    }
}

/// Whether field `field` is set by sent path `path` (the path is the field or lies below it).
fn covers(field: &str, path: &str) -> bool {
    path.strip_prefix(field)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

fn of_kind(f: &ApiFields, paths: &BTreeSet<String>, writes: usize) -> KindCoverage {
    let mut covered = BTreeSet::new();
    let mut template_fields: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in paths {
        for field in f.own.iter().filter(|field| covers(field, path)) {
            covered.insert(field.clone());
            let deeper = f
                .own
                .iter()
                .any(|o| o.len() > field.len() && o.starts_with(field.as_str()) && covers(o, path));
            if f.templates.contains_key(field) && !deeper {
                let inner = path[field.len()..].trim_start_matches("[]");
                let inner = inner.trim_start_matches('.');
                if !inner.is_empty() {
                    template_fields
                        .entry(field.clone())
                        .or_default()
                        .insert(inner.to_string());
                }
            }
        }
    }
    KindCoverage {
        group: f.group.clone(),
        kind: f.kind.clone(),
        version: f.version.clone(),
        uncovered: f.own.difference(&covered).cloned().collect(),
        covered,
        template_fields,
        writes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({"spec": {"group": "apps.kruise.io", "names": {"kind": "CloneSet"}, "versions": [
            {"name": "v1alpha1", "served": true, "storage": false, "schema": {"openAPIV3Schema":
                {"properties": {"spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer"},
                    "selector": {"type": "object", "properties": {
                        "matchLabels": {"type": "object"}, "matchExpressions": {"type": "array"}}},
                    "template": {"x-kubernetes-preserve-unknown-fields": true},
                    "volumeClaimTemplates": {"x-kubernetes-preserve-unknown-fields": true},
                    "updateStrategy": {"type": "object", "properties": {
                        "partition": {"x-kubernetes-int-or-string": true},
                        "paused": {"type": "boolean"},
                        "priorityStrategy": {"type": "object", "properties": {
                            "weightPriority": {"type": "array", "items": {"type": "object",
                                "properties": {"weight": {"type": "integer"}}}}}}}},
                    "containers": {"type": "array", "items": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"podInjectPolicy": {"type": "string"}}}},
                    "nested": {"type": "object", "properties": {
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}
                }}}}}},
            {"name": "v1beta1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                {"properties": {"spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer"}, "extra": {"type": "string"}}}}}}},
            {"name": "v0", "served": false, "schema": {"openAPIV3Schema":
                {"properties": {"spec": {"type": "object"}}}}}
        ]}})
    }

    #[test]
    fn own_fields_stop_at_templates_and_embedded_types() {
        let v = ApiFields::of_crd(&crd());
        assert_eq!(v.len(), 2, "the unserved version is left out");
        let a = &v[0];
        assert_eq!(
            a.own.iter().map(String::as_str).collect::<Vec<_>>(),
            [
                "spec.containers[]",
                "spec.containers[].podInjectPolicy",
                "spec.nested",
                "spec.replicas",
                "spec.selector",
                "spec.template",
                "spec.updateStrategy.partition",
                "spec.updateStrategy.paused",
                "spec.updateStrategy.priorityStrategy.weightPriority[].weight",
                "spec.volumeClaimTemplates",
            ]
        );
        assert_eq!(a.templates["spec.template"], Template::Pod);
        assert_eq!(a.templates["spec.volumeClaimTemplates"], Template::Claim);
        assert_eq!(a.templates["spec.nested"], Template::Workload);
        assert_eq!(a.templates["spec.containers[]"], Template::Extended);
        assert!(v[1].storage && !a.storage);
    }

    fn sent(entries: &[(&str, &[&str])]) -> Sends {
        use super::super::record::SentKind;
        Sends(
            entries
                .iter()
                .map(|(k, p)| {
                    let paths = p.iter().map(|s| s.to_string()).collect();
                    (k.to_string(), SentKind { writes: 1, paths })
                })
                .collect(),
        )
    }

    #[test]
    fn coverage_counts_own_fields_and_lists_template_internals() {
        let universe = ApiFields::of_crd(&crd());
        let c = Coverage::compute(
            &universe,
            &sent(&[(
                "apps.kruise.io/v1alpha1/CloneSet",
                &[
                    "spec.replicas",
                    "spec.selector.matchLabels.app",
                    "spec.template.spec.containers[].image",
                    "spec.template.metadata.labels.app",
                    "spec.volumeClaimTemplates[].spec.resources.requests.storage",
                    "spec.updateStrategy.partitionx",
                    "spec.containers[].image",
                    "spec.containers[].podInjectPolicy",
                ],
            )]),
        );
        let k = c.kind("CloneSet").unwrap();
        assert_eq!(
            k.version, "v1alpha1",
            "the version scenarios sent is counted"
        );
        assert_eq!(k.group, "apps.kruise.io");
        assert_eq!(
            k.covered.iter().map(String::as_str).collect::<Vec<_>>(),
            [
                "spec.containers[]",
                "spec.containers[].podInjectPolicy",
                "spec.replicas",
                "spec.selector",
                "spec.template",
                "spec.volumeClaimTemplates"
            ]
        );
        assert_eq!(
            k.template_fields["spec.containers[]"],
            BTreeSet::from(["image".to_string()]),
            "a declared field of an extended object is not one of its internals"
        );
        assert!(
            k.uncovered.contains("spec.updateStrategy.partition"),
            "a longer name is not the field"
        );
        assert_eq!(k.total(), 10);
        assert_eq!(k.percent(), 60.0);
        assert_eq!(
            k.template_fields["spec.template"],
            BTreeSet::from([
                "metadata.labels.app".to_string(),
                "spec.containers[].image".to_string()
            ])
        );
        assert_eq!(
            k.template_fields["spec.volumeClaimTemplates"],
            BTreeSet::from(["spec.resources.requests.storage".to_string()])
        );
    }

    #[test]
    fn an_unsent_kind_is_counted_on_its_storage_version() {
        let c = Coverage::compute(&ApiFields::of_crd(&crd()), &Sends::default());
        let k = c.kind("CloneSet").unwrap();
        assert_eq!(k.version, "v1beta1");
        assert_eq!(k.covered.len(), 0);
        assert_eq!(k.uncovered.len(), 2);
        assert_eq!(k.writes, 0);
        assert_eq!(k.percent(), 0.0);
    }
}
