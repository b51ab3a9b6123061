//! The cell's own description of its API: the OpenAPI v3 documents its apiserver serves
//! (`/openapi/v3/<group-version>`), merged into one [`Doc`]. Start with [`Doc`] and [`fetch`].
//!
//! Exploration reads three things from it: the schemas of the core types a CRD embeds
//! (a pod template, a claim template), walked into leaves by [`super::schema`]; the enum of
//! a native twin's field, for a CRD field that declares none; and the kinds the cell serves,
//! which say what a field refers to ([`Doc::reference`]) and what object the cell makes for
//! it ([`Doc::referenced`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The name of every object the cell makes for a reference to name ([`Doc::referenced`]).
pub const REFERENCED: &str = "explore-ref";

/// A kind the cell serves and can create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Its API version.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// The name of its schema among the components.
    pub schema: String,
}

/// An object the cell makes before trials refer to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Made {
    /// The object (named [`REFERENCED`]).
    pub object: Value,
    /// Whether it lives in each trial's namespace (else once in the cluster).
    pub namespaced: bool,
}

/// The merged OpenAPI v3 documents of a cell: every component schema by name, and the kinds
/// that can be created, by kind.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    schemas: BTreeMap<String, Value>,
    kinds: BTreeMap<String, Served>,
    /// Kinds whose made object the cell refused ([`Doc::unmade`]).
    unmade: std::collections::BTreeSet<String>,
    /// The resources the cell's nodes offer, each at a share of the least a node offers
    /// ([`Doc::offer`]).
    offered: BTreeMap<String, String>,
}

/// Reads every group-version document the cell's apiserver lists at `/openapi/v3`.
pub async fn fetch(client: &kube::Client) -> anyhow::Result<Doc> {
    let get = |path: String| async move {
        let req = http::Request::get(path).body(Vec::new())?;
        let text = client.request_text(req).await?;
        anyhow::Ok(serde_json::from_str::<Value>(&text)?)
    };
    let index = get("/openapi/v3".into()).await?;
    let mut docs = vec![];
    for (path, at) in index["paths"].as_object().into_iter().flatten() {
        // Group-version documents only (`api/v1`, `apis/<group>/<version>`).
        if path != "api/v1" && path.matches('/').count() != 2 {
            continue;
        }
        let url = at["serverRelativeURL"]
            .as_str()
            .map_or_else(|| format!("/openapi/v3/{path}"), String::from);
        // A document the cell does not serve whole leaves its types out, not the run.
        match get(url).await {
            Ok(d) => docs.push(d),
            Err(e) => tracing::warn!("read the OpenAPI of {path}: {e:#}"),
        }
    }
    Ok(Doc::new(&docs))
}

impl Doc {
    /// The document merged from group-version documents `docs`.
    pub fn new(docs: &[Value]) -> Doc {
        let mut d = Doc::default();
        for doc in docs {
            for (k, v) in doc["components"]["schemas"]
                .as_object()
                .into_iter()
                .flatten()
            {
                d.schemas.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        // A kind that can be created: a `post` on a collection (not on a subresource), whose
        // schema is the one of the same group, version and kind.
        for doc in docs {
            for (path, ops) in doc["paths"].as_object().into_iter().flatten() {
                let gvk = &ops["post"]["x-kubernetes-group-version-kind"];
                let Some(kind) = gvk["kind"].as_str() else {
                    continue;
                };
                if path.ends_with('}') || path.contains("{name}") {
                    continue;
                }
                let (group, version) = (
                    gvk["group"].as_str().unwrap_or_default(),
                    gvk["version"].as_str().unwrap_or_default(),
                );
                let Some(schema) = d.schemas.iter().find_map(|(name, s)| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|g| {
                            g["group"] == group && g["version"] == version && g["kind"] == kind
                        })
                        .then(|| name.clone())
                }) else {
                    continue;
                };
                let served = Served {
                    api_version: match group {
                        "" => version.to_string(),
                        g => format!("{g}/{version}"),
                    },
                    kind: kind.to_string(),
                    namespaced: path.contains("{namespace}"),
                    schema,
                };
                // One per kind: the core group's, else the first group in name order (a
                // built-in's before an extension's of the same kind).
                let better = |old: &Served| {
                    let rank = |s: &Served| (s.api_version.contains('.'), s.api_version.clone());
                    rank(&served) < rank(old)
                };
                match d.kinds.get(kind) {
                    Some(old) if !better(old) => {}
                    _ => {
                        d.kinds.insert(kind.to_string(), served);
                    }
                }
            }
        }
        d
    }

    /// The kind `kind`, if the cell serves it and it can be created.
    pub fn served(&self, kind: &str) -> Option<&Served> {
        self.kinds.get(kind)
    }

    /// Records that the cell refused the object made for `kind` ([`Doc::referenced`]): a
    /// reference to it is then a string as any other.
    pub fn unmade(&mut self, kind: &str) {
        self.unmade.insert(kind.to_string());
    }

    /// The component schema `name`.
    pub fn schema(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }

    /// Schema node `s` with its reference followed (`$ref`, or an `allOf` of one reference,
    /// whose siblings only describe it), and the name of the type it is, if it is one.
    pub fn resolve<'a>(&'a self, s: &'a Value) -> (Option<&'a str>, &'a Value) {
        let reference = s["$ref"].as_str().or_else(|| match s["allOf"].as_array() {
            Some(all) if all.len() == 1 => all[0]["$ref"].as_str(),
            _ => None,
        });
        match reference
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .and_then(|n| self.schemas.get_key_value(n))
        {
            Some((name, schema)) => (Some(name.as_str()), schema),
            None => (None, s),
        }
    }

    /// The schema of `kind` in `api_version`, if the cell serves it.
    pub fn kind_schema(&self, api_version: &str, kind: &str) -> Option<&Value> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.schemas.values().find(|s| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
        })
    }

    /// The node at `path` (dot-separated, `name[i]` for a list's item) below schema `root`.
    pub fn at<'a>(&'a self, root: &'a Value, path: &str) -> Option<&'a Value> {
        let mut at = self.resolve(root).1;
        for part in path.split('.') {
            let (key, item) = match part.split_once('[') {
                Some((k, _)) => (k, true),
                None => (part, false),
            };
            at = self.resolve(at["properties"].get(key)?).1;
            if item {
                at = self.resolve(at.get("items")?).1;
            }
        }
        Some(at)
    }

    /// The kind a string field refers to, by the API's naming of references: a field
    /// `<name>Name` where `<name>` ends a kind the cell serves (`claimName`, a
    /// `PersistentVolumeClaim`), or a `name` described as the name of the referent, in a type
    /// named after a kind (a `ConfigMapKeySelector`) or held by a field named after one (the
    /// items of `imagePullSecrets`, `Secrets`). None for a field that names no kind.
    pub fn reference(
        &self,
        field: &str,
        description: &str,
        type_name: Option<&str>,
        holder: &str,
    ) -> Option<&Served> {
        if let Some(stem) = field.strip_suffix("Name").filter(|s| !s.is_empty()) {
            return self.ending(stem);
        }
        if field != "name" || !description.starts_with("Name of the referent") {
            return None;
        }
        let short = type_name.and_then(|t| t.rsplit('.').next()).unwrap_or("");
        // The longest kind the type's name begins with.
        let by_type = self
            .kinds
            .values()
            .filter(|k| short.starts_with(k.kind.as_str()))
            .max_by_key(|k| k.kind.len());
        by_type.or_else(|| {
            let singular = holder.strip_suffix('s').unwrap_or(holder);
            let last = camel_words(singular).pop().unwrap_or_default();
            self.ending(&last)
        })
    }

    /// The kind named `stem`, or else the one kind whose name ends with it (case aside).
    fn ending(&self, stem: &str) -> Option<&Served> {
        let stem = stem.to_lowercase();
        if let Some(k) = self.kinds.values().find(|k| k.kind.to_lowercase() == stem) {
            return Some(k);
        }
        let mut ends = self
            .kinds
            .values()
            .filter(|k| k.kind.to_lowercase().ends_with(&stem));
        match (ends.next(), ends.next()) {
            (Some(k), None) => Some(k),
            _ => None,
        }
    }

    /// Records the resources the cell's nodes offer (their `status.allocatable`): a map of
    /// quantities is tried with them ([`super::schema::Shape::Quantities`]), each at a
    /// hundredth of the least any node offers ([`share`]), so that many pods asking for it
    /// fit on any node. A resource a node does not state a valid quantity for is left out.
    pub fn offer(&mut self, allocatable: &[BTreeMap<String, String>]) {
        let mut least: BTreeMap<String, f64> = BTreeMap::new();
        for node in allocatable {
            for (name, q) in node {
                let Some(v) = quantity(q) else { continue };
                let e = least.entry(name.clone()).or_insert(v);
                *e = e.min(v);
            }
        }
        self.offered = least
            .into_iter()
            .filter_map(|(name, v)| Some((name, share(v)?)))
            .collect();
    }

    /// The resources the cell's nodes offer, each at the share a trial asks for
    /// ([`Doc::offer`]); empty when none was recorded.
    pub fn offered(&self) -> &BTreeMap<String, String> {
        &self.offered
    }

    /// The object the cell makes for references to `kind` to name: [`REFERENCED`], with its
    /// schema's required fields at their first values ([`Doc::minimal`]). None for a kind with
    /// a `spec`: an object of it is realized by a controller or a node (a claim bound, a node
    /// run), and one made bare would be a broken one (see the module's callers).
    pub fn referenced(&self, kind: &Served) -> Option<Made> {
        let schema = self.schemas.get(&kind.schema)?;
        if schema["properties"].get("spec").is_some() || self.unmade.contains(&kind.kind) {
            return None;
        }
        let mut object = self.minimal(schema, 0);
        if !object.is_object() {
            object = json!({});
        }
        object["apiVersion"] = json!(kind.api_version);
        object["kind"] = json!(kind.kind);
        object["metadata"] = json!({"name": REFERENCED});
        Some(Made {
            object,
            namespaced: kind.namespaced,
        })
    }

    /// A minimal value of schema node `s`: an object with its required fields each at its
    /// minimal value, a list with one minimal item, a scalar at its first value (the first
    /// enum member, 0, false, a word), `depth` levels deep at most.
    pub fn minimal(&self, s: &Value, depth: usize) -> Value {
        let (_, s) = self.resolve(s);
        if let Some(first) = s["enum"].as_array().and_then(|e| e.first()) {
            return first.clone();
        }
        if s["x-kubernetes-int-or-string"] == true || s["format"] == "int-or-string" {
            return json!(1);
        }
        match s["type"].as_str() {
            Some("boolean") => json!(false),
            Some("integer") | Some("number") => json!(s["minimum"].as_i64().unwrap_or(0).max(1)),
            Some("string") => json!("x"),
            Some("array") if depth < 6 => json!([self.minimal(&s["items"], depth + 1)]),
            Some("array") => json!([]),
            _ if s["oneOf"].is_array() || s["anyOf"].is_array() => json!("1"),
            _ => {
                let mut o = serde_json::Map::new();
                for r in s["required"].as_array().into_iter().flatten() {
                    let Some(r) = r.as_str() else { continue };
                    if depth < 6
                        && let Some(p) = s["properties"].get(r)
                    {
                        o.insert(r.into(), self.minimal(p, depth + 1));
                    }
                }
                Value::Object(o)
            }
        }
    }
}

/// The suffixes of a Kubernetes quantity, each with its scale (binary ones first: `Mi`
/// before `M`).
const SUFFIXES: [(&str, f64); 15] = [
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
    ("Pi", 1_125_899_906_842_624.0),
    ("Ei", 1_152_921_504_606_846_976.0),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];

/// A quantity's number, suffix and the suffix's scale (`256Gi` → 256, `Gi`, 2³⁰; `1e3` →
/// 1000, none, 1); None for what is not a quantity (or a negative one).
fn split_quantity(q: &str) -> Option<(f64, &str, f64)> {
    let q = q.trim();
    let (number, suffix, scale) = SUFFIXES
        .iter()
        .find_map(|(suffix, scale)| q.strip_suffix(suffix).map(|n| (n, *suffix, *scale)))
        .unwrap_or((q, "", 1.0));
    let number: f64 = number.parse().ok()?;
    (number.is_finite() && number >= 0.0).then_some((number, suffix, scale))
}

/// The value of a quantity (`64`, `250m`, `256Gi`, `1e3`) in its base unit; None for what is
/// not one.
pub fn quantity(q: &str) -> Option<f64> {
    split_quantity(q).map(|(number, _, scale)| number * scale)
}

/// Quantity `q` times `factor`, in `q`'s own suffix (`1Gi` × 2 → `2Gi`, × 0.5 → `0.5Gi`);
/// None for what is not a quantity.
pub fn scaled(q: &str, factor: f64) -> Option<String> {
    let (number, suffix, _) = split_quantity(q)?;
    let n = number * factor;
    Some(match n.fract() == 0.0 {
        true => format!("{}{suffix}", n as u64),
        false => format!("{n}{suffix}"),
    })
}

/// A hundredth of `v` as a quantity: whole units when it is at least one (`2748779069`),
/// else milli-units (`640m`), at least `1m`. None for nothing offered.
pub fn share(v: f64) -> Option<String> {
    let s = v / 100.0;
    if s <= 0.0 {
        return None;
    }
    Some(match s >= 1.0 {
        true => format!("{}", s.floor() as u64),
        false => format!("{}m", ((s * 1000.0).floor() as u64).max(1)),
    })
}

/// The words of a camel-case name (`imagePullSecret` → image, Pull, Secret).
fn camel_words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for c in name.chars() {
        match out.last_mut() {
            Some(w) if !c.is_uppercase() => w.push(c),
            _ => out.push(c.to_string()),
        }
    }
    out
}

/// The literal words a description quotes (`"ClusterFirst"`, `'Default'`): each quoted run
/// of letters, digits and `-._/` with a letter in it, in order, each once.
pub fn quoted(description: &str) -> Vec<String> {
    static QUOTED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"["'`]([A-Za-z0-9][A-Za-z0-9._/-]{0,62})["'`]"#).expect("a valid regex")
    });
    let mut out: Vec<String> = vec![];
    for c in QUOTED.captures_iter(description) {
        let w = c[1].to_string();
        if w.len() > 1 && w.chars().any(char::is_alphabetic) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_and_a_share_of_the_least_a_node_offers() {
        assert_eq!(quantity("64"), Some(64.0));
        assert_eq!(quantity("250m"), Some(0.25));
        assert_eq!(quantity("256Gi"), Some(256.0 * 1024f64.powi(3)));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("x"), None);
        assert_eq!(quantity("1Zi"), None);
        assert_eq!(quantity("-1"), None);
        assert_eq!(scaled("1Gi", 2.0).as_deref(), Some("2Gi"));
        assert_eq!(scaled("1Gi", 0.5).as_deref(), Some("0.5Gi"));
        assert_eq!(scaled("250m", 2.0).as_deref(), Some("500m"));
        assert_eq!(scaled("many", 2.0), None);
        let node = |cpu: &str, memory: &str| {
            BTreeMap::from([
                ("cpu".to_string(), cpu.to_string()),
                ("memory".to_string(), memory.to_string()),
                ("pods".to_string(), "250".to_string()),
                ("broken".to_string(), "many".to_string()),
            ])
        };
        let mut d = Doc::default();
        d.offer(&[node("64", "256Gi"), node("2", "512Gi")]);
        assert_eq!(
            d.offered(),
            &BTreeMap::from([
                ("cpu".to_string(), "20m".to_string()),
                ("memory".to_string(), "2748779069".to_string()),
                ("pods".to_string(), "2".to_string()),
            ])
        );
    }

    /// A recorded fragment of a cell's core document.
    pub(crate) fn fixture() -> Doc {
        let text = include_str!("../../tests/fixtures/openapi-core.json");
        Doc::new(&[serde_json::from_str(text).expect("the fixture is JSON")])
    }

    #[test]
    fn kinds_are_read_from_the_collections_that_take_a_post() {
        let d = fixture();
        let cm = d.kinds.get("ConfigMap").expect("ConfigMap is served");
        assert_eq!(cm.api_version, "v1");
        assert!(cm.namespaced);
        let pc = d
            .kinds
            .get("PriorityClass")
            .expect("PriorityClass is served");
        assert_eq!(pc.api_version, "scheduling.k8s.io/v1");
        assert!(!pc.namespaced);
        assert!(d.kind_schema("v1", "ConfigMap").is_some());
    }

    #[test]
    fn references_are_read_from_the_names_of_fields_and_types() {
        let d = fixture();
        let kind = |f: &str, desc: &str, t: Option<&str>, holder: &str| {
            d.reference(f, desc, t, holder).map(|k| k.kind.clone())
        };
        assert_eq!(
            kind("priorityClassName", "", None, "spec").as_deref(),
            Some("PriorityClass")
        );
        assert_eq!(
            kind("claimName", "", None, "x").as_deref(),
            Some("PersistentVolumeClaim")
        );
        assert_eq!(kind("schedulerName", "", None, "spec"), None);
        let referent = "Name of the referent. More info";
        assert_eq!(
            kind(
                "name",
                referent,
                Some("io.k8s.api.core.v1.ConfigMapKeySelector"),
                "x"
            )
            .as_deref(),
            Some("ConfigMap")
        );
        assert_eq!(
            kind(
                "name",
                referent,
                Some("io.k8s.api.core.v1.LocalObjectReference"),
                "imagePullSecrets"
            )
            .as_deref(),
            Some("Secret")
        );
        assert_eq!(kind("name", "Name of the port", None, "ports"), None);
        // A kind with a spec is not made bare; one without is made from its required fields.
        let pvc = d.kinds["PersistentVolumeClaim"].clone();
        assert_eq!(d.referenced(&pvc), None);
        let pc = d.referenced(&d.kinds["PriorityClass"].clone()).unwrap();
        assert_eq!(pc.object["metadata"]["name"], REFERENCED);
        assert!(pc.object["value"].is_number(), "{}", pc.object);
        assert!(!pc.namespaced);
    }

    #[test]
    fn descriptions_quote_their_words() {
        assert_eq!(
            quoted(
                r#"Defaults to "ClusterFirst". Valid values are 'Default' or 'None', "" or "e"."#
            ),
            ["ClusterFirst", "Default", "None"]
        );
    }
}
