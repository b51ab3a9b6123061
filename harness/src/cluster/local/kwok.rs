//! kwok's part of a local cluster: the stages that drive fake nodes and pods ([`config`]) and
//! the Node objects it plays the kubelet for ([`node`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::ObjectMeta;

use super::components::KWOK_NODE_LABEL;
use crate::cluster::NodeSpec;

/// The stage set: node init + heartbeat, pod ready / in-place image update / complete / delete.
pub const STAGES: &str = include_str!("assets/kwok-stages.yaml");

/// The kwok configuration file: the stages.
pub fn config() -> String {
    STAGES.to_string()
}

/// The Node object for `spec`: its labels plus the kwok selector label, hostname, OS and arch.
pub fn node(spec: &NodeSpec) -> Node {
    let mut labels: BTreeMap<String, String> = spec.labels.clone();
    labels.insert(KWOK_NODE_LABEL.0.into(), KWOK_NODE_LABEL.1.into());
    labels.insert("kubernetes.io/hostname".into(), spec.name.clone());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    Node {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                ("kwok.x-k8s.io/node".to_string(), "fake".to_string()),
                ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_parse_as_yaml_documents_with_unique_names() {
        let mut names = vec![];
        for doc in STAGES.split("\n---\n") {
            let v: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
            assert_eq!(v["kind"], "Stage");
            names.push(v["metadata"]["name"].as_str().unwrap().to_string());
        }
        let before = names.len();
        names.sort();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(names.contains(&"harness-pod-inplace-image-update".to_string()));
    }
}
