//! Objects a profile creates before the controller starts ([`Profile::objects`]): what a
//! controller reads only at start (OpenKruise's `kruise-configuration`, say) must be there
//! first. Start with [`load`] (manifests from files, checked) and [`create`] (into a cluster,
//! making each missing namespace first).

use std::path::Path;

use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

/// A seed manifest that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The file cannot be read.
    #[error("read seed objects {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not YAML.
    #[error("parse seed objects {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's words.
        message: String,
    },
    /// A document lacks what identifies an object.
    #[error(
        "seed object {index} of {path} has no {missing}; each document needs apiVersion, kind and metadata.name"
    )]
    Incomplete {
        /// The file.
        path: String,
        /// Its position in the file (1-based).
        index: usize,
        /// The missing field.
        missing: &'static str,
    },
    /// The cluster refused one.
    #[error("create seed object {what}: {message}")]
    Create {
        /// Kind and name.
        what: String,
        /// The apiserver's words.
        message: String,
    },
}

/// The objects of the YAML documents in `text` (from `path`), each checked for apiVersion,
/// kind and metadata.name; empty documents are skipped.
pub fn parse(text: &str, path: &str) -> Result<Vec<Value>, SeedError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| SeedError::Parse {
        path: path.into(),
        message: e.to_string(),
    })?;
    let mut out = vec![];
    for (i, d) in docs.into_iter().filter(|d| !d.is_null()).enumerate() {
        for (missing, v) in [
            ("apiVersion", &d["apiVersion"]),
            ("kind", &d["kind"]),
            ("metadata.name", &d["metadata"]["name"]),
        ] {
            if v.as_str().is_none_or(str::is_empty) {
                return Err(SeedError::Incomplete {
                    path: path.into(),
                    index: i + 1,
                    missing,
                });
            }
        }
        out.push(d);
    }
    Ok(out)
}

/// The objects of the YAML files `paths`, in order.
pub fn load<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<Value>, SeedError> {
    let mut out = vec![];
    for p in paths {
        let path = p.as_ref().display().to_string();
        let text = std::fs::read_to_string(p).map_err(|source| SeedError::Read {
            path: path.clone(),
            source,
        })?;
        out.extend(parse(&text, &path)?);
    }
    Ok(out)
}

/// The namespaces `objects` live in that must exist first, in order of first use.
pub fn namespaces(objects: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for o in objects {
        if let Some(ns) = o["metadata"]["namespace"].as_str()
            && !out.iter().any(|n| n == ns)
        {
            out.push(ns.into());
        }
    }
    out
}

/// Creates `objects` in the cluster of `client`, in order, each namespace first (an existing
/// namespace is fine; an existing object is an error, since it was not seeded).
pub async fn create(client: &kube::Client, objects: &[Value]) -> Result<(), SeedError> {
    let refused = |what: String| {
        move |e: kube::Error| SeedError::Create {
            what: what.clone(),
            message: e.to_string(),
        }
    };
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in namespaces(objects) {
        let body = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace");
        match ns_api.create(&PostParams::default(), &body).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(refused(format!("Namespace {ns}"))(e)),
        }
    }
    for o in objects {
        let (group, version) = o["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .split_once('/')
            .unwrap_or(("", o["apiVersion"].as_str().unwrap_or_default()));
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("{kind} {name}");
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(refused(what.clone()))?;
        let api: Api<DynamicObject> = match (caps.scope, o["metadata"]["namespace"].as_str()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            (kube::discovery::Scope::Namespaced, None) => {
                Api::default_namespaced_with(client.clone(), &ar)
            }
            (kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &ar),
        };
        let obj: DynamicObject =
            serde_json::from_value(o.clone()).map_err(|e| SeedError::Create {
                what: what.clone(),
                message: e.to_string(),
            })?;
        api.create(&PostParams::default(), &obj)
            .await
            .map_err(refused(what))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_checked_and_namespaces_come_first() {
        let objs = parse(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kruise-configuration, namespace: kruise-system}\ndata: {a: b}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
            "seed.yaml",
        )
        .unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(namespaces(&objs), ["kruise-system"]);
        let e = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "s.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "seed object 1 of s.yaml has no metadata.name; each document needs apiVersion, kind and metadata.name"
        );
        let e = parse("kind: [", "bad.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("parse seed objects bad.yaml:"),
            "{e}"
        );
        let e = load(&["/no/such/seed.yaml"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("read seed objects /no/such/seed.yaml"),
            "{e}"
        );
    }
}
