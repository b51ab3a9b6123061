//! What a scenario sends. Start with [`Recorder`]: every write a scenario makes through
//! [`super::Ctx`] (create, merge or JSON patch, replace) is kept as a [`Sent`] — the object's
//! API and the field paths the write sets — so that coverage can be computed from the
//! installed release's CRD schemas ([`super::coverage`]).
//!
//! A field path is dotted, with `[]` for an array element: `spec.template.spec.containers[].image`.
//! Map keys stay in the path (`spec.selector.matchLabels.app`); a schema walk stops at the map.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How an object was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// POST of a whole object.
    Create,
    /// PUT of a whole object.
    Replace,
    /// A JSON merge patch.
    MergePatch,
    /// A JSON patch (RFC 6902).
    JsonPatch,
}

/// One write: the object's API and the field paths it set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// `group/version` (or `v1`).
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// How it was sent.
    pub verb: Verb,
    /// Field paths set (apiVersion, kind, metadata and status left out).
    pub paths: BTreeSet<String>,
}

impl Sent {
    /// A write of a whole object or a merge patch: the leaf paths of `body`.
    pub fn of_object(api_version: &str, kind: &str, verb: Verb, body: &Value) -> Self {
        let mut paths = BTreeSet::new();
        if let Value::Object(m) = body {
            for (k, v) in m {
                if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                    leaves(v, k.clone(), &mut paths);
                }
            }
        }
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            verb,
            paths,
        }
    }

    /// A JSON patch: the paths its `add` and `replace` operations set (removals and tests
    /// set nothing).
    pub fn of_json_patch(api_version: &str, kind: &str, ops: &Value) -> Self {
        let mut paths = BTreeSet::new();
        for op in ops.as_array().into_iter().flatten() {
            let setting = matches!(op["op"].as_str(), Some("add" | "replace" | "copy" | "move"));
            let (Some(pointer), true) = (op["path"].as_str(), setting) else {
                continue;
            };
            let base = from_pointer(pointer);
            let top = base.split(['.', '[']).next().unwrap_or_default();
            if base.is_empty() || matches!(top, "apiVersion" | "kind" | "metadata" | "status") {
                continue;
            }
            match op.get("value") {
                Some(v) => leaves(v, base, &mut paths),
                None => {
                    paths.insert(base);
                }
            }
        }
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            verb: Verb::JsonPatch,
            paths,
        }
    }
}

/// The leaf paths of `v` below `prefix` (an empty object or array is a leaf; a null sets
/// nothing).
fn leaves(v: &Value, prefix: String, out: &mut BTreeSet<String>) {
    match v {
        Value::Null => {}
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                leaves(v, format!("{prefix}.{k}"), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for v in a {
                leaves(v, format!("{prefix}[]"), out);
            }
        }
        _ => {
            out.insert(prefix);
        }
    }
}

/// A JSON pointer (`/spec/containers/0/image`) as a field path (`spec.containers[].image`).
fn from_pointer(pointer: &str) -> String {
    let mut path = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if seg == "-" || (!seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit())) {
            path.push_str("[]");
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&seg);
        }
    }
    path
}

/// What was sent of one API (`apiVersion/Kind`): how many writes, and every path they set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentKind {
    /// Writes.
    pub writes: usize,
    /// Field paths set by any of them.
    pub paths: BTreeSet<String>,
}

/// What scenarios sent, by `apiVersion/Kind` (`apps.kruise.io/v1alpha1/CloneSet`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sends(pub BTreeMap<String, SentKind>);

impl Sends {
    /// The writes `sent`, summed up by API.
    pub fn of(sent: &[Sent]) -> Self {
        let mut out = Sends::default();
        for s in sent {
            let k = out
                .0
                .entry(format!("{}/{}", s.api_version, s.kind))
                .or_default();
            k.writes += 1;
            k.paths.extend(s.paths.iter().cloned());
        }
        out
    }

    /// Adds `other`'s writes and paths.
    pub fn merge(&mut self, other: &Sends) {
        for (api, s) in &other.0 {
            let k = self.0.entry(api.clone()).or_default();
            k.writes += s.writes;
            k.paths.extend(s.paths.iter().cloned());
        }
    }

    /// What was sent of `apiVersion/Kind`.
    pub fn get(&self, api: &str) -> Option<&SentKind> {
        self.0.get(api)
    }

    /// Whether nothing was sent.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The writes of one scenario, shared by every clone of its [`super::Ctx`].
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    sent: Arc<Mutex<Vec<Sent>>>,
}

impl Recorder {
    /// Keeps one write.
    pub fn record(&self, sent: Sent) {
        self.sent.lock().expect("not poisoned").push(sent);
    }

    /// Every write so far, in the order sent.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().expect("not poisoned").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_object_records_its_leaves_but_not_its_metadata() {
        let o = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "web", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}},
                "updateStrategy": {"rollingUpdate": {}}, "minReadySeconds": null},
            "status": {"replicas": 2}
        });
        let s = Sent::of_object("apps.kruise.io/v1alpha1", "CloneSet", Verb::Create, &o);
        assert_eq!(
            s.paths,
            set(&[
                "spec.replicas",
                "spec.selector.matchLabels.app",
                "spec.template.spec.containers[].image",
                "spec.template.spec.containers[].name",
                "spec.updateStrategy.rollingUpdate",
            ])
        );
    }

    #[test]
    fn a_json_patch_records_what_its_operations_set() {
        let ops = json!([
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "y"},
            {"op": "add", "path": "/spec/updateStrategy", "value": {"partition": 1, "paused": true}},
            {"op": "add", "path": "/spec/scaleStrategy/podsToDelete/-", "value": "p-1"},
            {"op": "add", "path": "/metadata/labels/a~1b", "value": "c"},
            {"op": "remove", "path": "/spec/minReadySeconds"},
            {"op": "test", "path": "/spec/replicas", "value": 2}
        ]);
        let s = Sent::of_json_patch("apps.kruise.io/v1alpha1", "CloneSet", &ops);
        assert_eq!(s.verb, Verb::JsonPatch);
        assert_eq!(
            s.paths,
            set(&[
                "spec.scaleStrategy.podsToDelete[]",
                "spec.template.spec.containers[].image",
                "spec.updateStrategy.partition",
                "spec.updateStrategy.paused",
            ])
        );
    }

    #[test]
    fn pointers_unescape_and_number_segments_become_elements() {
        assert_eq!(from_pointer("/spec/a~1b/0/c~0d"), "spec.a/b[].c~d");
        assert_eq!(from_pointer(""), "");
    }

    #[test]
    fn a_recorder_is_shared_by_its_clones() {
        let r = Recorder::default();
        let r2 = r.clone();
        r2.record(Sent::of_object(
            "v1",
            "ConfigMap",
            Verb::Create,
            &json!({"data": {"k": "v"}}),
        ));
        assert_eq!(r.sent().len(), 1);
        assert_eq!(r.sent()[0].paths, set(&["data.k"]));
    }

    #[test]
    fn sends_sum_writes_and_paths_by_api() {
        let a = Sent::of_object(
            "v1",
            "ConfigMap",
            Verb::Create,
            &json!({"data": {"k": "v"}}),
        );
        let b = Sent::of_json_patch(
            "v1",
            "ConfigMap",
            &json!([{"op": "add", "path": "/data/j", "value": "w"}]),
        );
        let mut s = Sends::of(&[a.clone(), b]);
        assert_eq!(s.get("v1/ConfigMap").unwrap().writes, 2);
        assert_eq!(
            s.get("v1/ConfigMap").unwrap().paths,
            set(&["data.j", "data.k"])
        );
        s.merge(&Sends::of(&[a]));
        assert_eq!(s.get("v1/ConfigMap").unwrap().writes, 3);
        assert_eq!(
            serde_json::to_value(&s).unwrap()["v1/ConfigMap"]["writes"],
            3
        );
    }
}
