//! The kind config of a [`Profile`]: start with [`config`] (and [`config_yaml`], the file kind
//! reads), on the node image pinned for its Kubernetes version ([`NODE_IMAGES`]); the checked-in
//! `kind-configs/` are kept in line by [`sync_configs`].

use std::path::Path;

use serde_json::{Value, json};

use super::{KindError, NodeSource};
use crate::cluster::Profile;
use crate::toolchain::KubeVersion;

/// A kind node image, pinned by digest, and the kind release it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeImage {
    /// Kubernetes minor, `1.32`.
    pub minor: &'static str,
    /// The kind release that built the image, `v0.29.0`.
    pub kind_release: &'static str,
    /// The image, tag and digest.
    pub image: &'static str,
}

/// Node images per Kubernetes minor, taken from the kind release notes.
pub const NODE_IMAGES: &[NodeImage] = &[
    NodeImage {
        minor: "1.29",
        kind_release: "v0.27.0",
        image: "kindest/node:v1.29.14@sha256:8703bd94ee24e51b778d5556ae310c6c0fa67d761fae6379c8e0bb480e6fea29",
    },
    NodeImage {
        minor: "1.32",
        kind_release: "v0.29.0",
        image: "kindest/node:v1.32.5@sha256:e3b2327e3a5ab8c76f5ece68936e4cafaa82edf58486b769727ab0b3b97a5b0d",
    },
    NodeImage {
        minor: "1.37",
        kind_release: "v0.33.0",
        image: "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5",
    },
];

/// The pinned image for `version`'s minor.
pub fn node_image(version: KubeVersion) -> Result<&'static NodeImage, KindError> {
    let minor = format!("{}.{}", version.major, version.minor);
    NODE_IMAGES
        .iter()
        .find(|i| i.minor == minor)
        .ok_or_else(|| KindError::UnknownVersion {
            given: minor,
            known: NODE_IMAGES
                .iter()
                .map(|i| format!("{} (kind {})", i.minor, i.kind_release))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The kind config for `profile`: gates, runtime-config, the API server on 127.0.0.1, one
/// control-plane node and one labelled worker per profile node, all on the pinned image.
pub fn config(profile: &Profile) -> Result<Value, KindError> {
    config_with(profile, &NodeSource::Pinned)
}

/// [`config`] on the node image of `node`, with what that image needs beside the profile.
pub fn config_with(profile: &Profile, node: &NodeSource) -> Result<Value, KindError> {
    let image = match node {
        NodeSource::Pinned => node_image(profile.kubernetes)?.image,
        NodeSource::Assemble { .. } => "harness.local/kind-node (assembled at create)",
        NodeSource::Offline { image, .. } => image.as_str(),
    };
    let mut nodes = vec![json!({"role": "control-plane", "image": image})];
    for n in &profile.nodes {
        nodes.push(json!({"role": "worker", "image": image, "labels": n.labels}));
    }
    // A kind node is as real as the local provider's real nodes: those the profile asks for
    // carry the same label, and the same taint unless the profile has no other nodes.
    use crate::cluster::local::node::REAL_NODE_LABEL;
    for n in &profile.real_nodes {
        let mut labels = n.labels.clone();
        labels.insert(REAL_NODE_LABEL.0.into(), REAL_NODE_LABEL.1.into());
        let mut node = json!({"role": "worker", "image": image, "labels": labels});
        if profile.real_node_taint {
            node["kubeadmConfigPatches"] = json!([REAL_NODE_JOIN_PATCH]);
        }
        nodes.push(node);
    }
    let mut c = json!({
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {"apiServerAddress": "127.0.0.1"},
        "nodes": nodes,
    });
    if !profile.feature_gates.is_empty() {
        c["featureGates"] = json!(profile.feature_gates);
    }
    if !profile.runtime_config.is_empty() {
        c["runtimeConfig"] = json!(profile.runtime_config);
    }
    if let NodeSource::Offline { config, .. } = node {
        merge(&mut c, config);
    }
    Ok(c)
}

/// The kubeadm patch that registers a kind worker with the real nodes' taint (kind's node
/// config has labels but no taints).
pub const REAL_NODE_JOIN_PATCH: &str = "kind: JoinConfiguration\nnodeRegistration:\n  taints:\n  - key: harness.io/real-node\n    value: \"true\"\n    effect: NoSchedule\n";

/// Merges `extra` into `c`: objects key by key, arrays appended, anything else replaced.
pub(super) fn merge(c: &mut Value, extra: &Value) {
    match (c, extra) {
        (Value::Object(c), Value::Object(e)) => {
            for (k, v) in e {
                merge(c.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (Value::Array(c), Value::Array(e)) => c.extend(e.iter().cloned()),
        (c, e) => *c = e.clone(),
    }
}

/// [`config`] as the YAML file kind reads, with a header naming the profile.
pub fn config_yaml(profile: &Profile) -> Result<String, KindError> {
    config_yaml_with(profile, &NodeSource::Pinned)
}

/// [`config_with`] as the YAML file kind reads, with a header naming the profile.
pub fn config_yaml_with(profile: &Profile, node: &NodeSource) -> Result<String, KindError> {
    let c = config_with(profile, node)?;
    let body = serde_saphyr::to_string(&c).expect("a JSON value serializes");
    Ok(format!(
        "# kind config for profile `{}` (Kubernetes {}), generated by `harness cluster configs`.\n\
         # Do not edit: a test regenerates it and fails on any difference.\n{body}",
        profile.name, profile.kubernetes
    ))
}

/// What [`sync_configs`] did.
#[derive(Debug, Default)]
pub struct ConfigSync {
    /// Files (re)written.
    pub written: Vec<std::path::PathBuf>,
    /// Files that differ from what the profiles generate (when only checking).
    pub stale: Vec<std::path::PathBuf>,
}

/// Brings `dir` in line with `files` (name, text): with `check`, only lists the files that
/// differ; otherwise rewrites them, each atomically.
pub fn sync_configs(
    dir: &Path,
    files: &[(String, String)],
    check: bool,
) -> std::io::Result<ConfigSync> {
    let mut out = ConfigSync::default();
    if !check {
        std::fs::create_dir_all(dir)?;
    }
    for (name, text) in files {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        if check {
            out.stale.push(path);
        } else {
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &path))?;
            out.written.push(path);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::KubeVersion;

    #[test]
    fn every_supported_version_has_a_pinned_image() {
        for v in KubeVersion::supported() {
            let i = node_image(v).unwrap();
            assert!(i.image.contains("@sha256:"), "{i:?}");
            assert!(
                i.image.contains(&format!(":v{}.{}.", v.major, v.minor)),
                "{i:?}"
            );
        }
    }

    #[test]
    fn an_unknown_version_names_the_known_ones() {
        let v = KubeVersion {
            major: 1,
            minor: 30,
            patch: 0,
        };
        let e = node_image(v).unwrap_err().to_string();
        assert!(e.contains("Kubernetes 1.30"), "{e}");
        assert!(e.contains("1.32 (kind v0.29.0)"), "{e}");
    }

    #[test]
    fn the_config_carries_gates_runtime_config_and_labelled_workers() {
        let mut p = Profile::new(KubeVersion::default_version());
        p.add_gates(&["InPlacePodVerticalScaling=true"]).unwrap();
        p.add_runtime_config(&["api/all=true"]).unwrap();
        let c = config(&p).unwrap();
        assert_eq!(c["featureGates"]["InPlacePodVerticalScaling"], json!(true));
        assert_eq!(c["runtimeConfig"]["api/all"], json!("true"));
        assert_eq!(c["networking"]["apiServerAddress"], json!("127.0.0.1"));
        let nodes = c["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 5);
        assert_eq!(nodes[0]["role"], json!("control-plane"));
        assert_eq!(
            nodes[2]["labels"][crate::cluster::ZONE_LABEL],
            json!("zone-b")
        );
        let yaml = config_yaml(&p).unwrap();
        let back: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, c, "the YAML reads back as the config");
    }

    #[test]
    fn real_nodes_are_workers_with_the_real_node_label_and_taint() {
        use crate::cluster::local::node::{REAL_NODE_LABEL, REAL_NODE_TAINT};
        let mut p = Profile::new(KubeVersion::default_version());
        p.set_real_nodes(1, &["zone-a"], &Default::default())
            .unwrap();
        let c = config(&p).unwrap();
        let nodes = c["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 6, "control plane, 4 workers, 1 real");
        let real = &nodes[5];
        assert_eq!(real["labels"][REAL_NODE_LABEL.0], json!(REAL_NODE_LABEL.1));
        let patch: Value =
            serde_saphyr::from_str(real["kubeadmConfigPatches"][0].as_str().unwrap()).unwrap();
        let taint = &patch["nodeRegistration"]["taints"][0];
        let (key, rest) = REAL_NODE_TAINT.split_once('=').unwrap();
        let (value, effect) = rest.split_once(':').unwrap();
        assert_eq!(
            (&taint["key"], &taint["value"], &taint["effect"]),
            (&json!(key), &json!(value), &json!(effect))
        );
        assert!(nodes[1].get("kubeadmConfigPatches").is_none());
    }
}
