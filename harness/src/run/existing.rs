//! What an existing cluster lacks of a planned cluster's profile. The existing provider uses a
//! cluster as it is: it sets no feature gate and labels no node, so a scenario whose profile
//! asks for what the cluster does not have would fail for the cluster's sake, not the
//! controller's. [`shortfall`] reads what can be read — the nodes' labels, the controller's
//! `--feature-gates` from its Deployment, the apiserver's from its static pod (kubeadm and kind
//! clusters show it) — and says what is missing; the run skips those scenarios with that
//! reason.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};

use super::plan::PlannedCluster;

/// The `--feature-gates` of a command line, parsed (`A=true,B=false`); later flags win.
pub fn gates_of<'a>(args: impl IntoIterator<Item = &'a String>) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for a in args {
        if let Some(list) = a.strip_prefix("--feature-gates=") {
            for kv in list.split(',') {
                if let Some((k, v)) = kv.split_once('=') {
                    out.insert(k.trim().to_string(), v.trim() == "true");
                }
            }
        }
    }
    out
}

/// What of `want` `have` lacks (a gate absent counts as its other value), one entry each.
pub fn missing_gates(want: &BTreeMap<String, bool>, have: &BTreeMap<String, bool>) -> Vec<String> {
    want.iter()
        .filter(|(k, v)| have.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// The labels of `pc`'s nodes that no node of the cluster carries (`key=value`).
pub fn missing_labels(pc: &PlannedCluster, nodes: &[Node]) -> Vec<String> {
    let mut wanted: Vec<(String, String)> = pc
        .profile
        .nodes
        .iter()
        .flat_map(|n| n.labels.clone())
        .collect();
    wanted.sort();
    wanted.dedup();
    wanted
        .into_iter()
        .filter(|(k, v)| {
            !nodes.iter().any(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(k))
                    .is_some_and(|x| x == v)
            })
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// What the existing cluster behind `client` lacks of `pc`, as a skip reason; `None` when it
/// has everything that can be checked. `deployment` is the controller's (namespace, name).
pub async fn shortfall(
    client: &kube::Client,
    pc: &PlannedCluster,
    deployment: Option<(&str, &str)>,
) -> Option<String> {
    let mut lacks = vec![];
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.list(&ListParams::default()).await {
        Ok(l) => {
            let missing = missing_labels(pc, &l.items);
            if !missing.is_empty() {
                lacks.push(format!(
                    "no node labelled {} (label some: `kubectl label node <node> <key>=<value>`)",
                    missing.join(", ")
                ));
            }
        }
        Err(e) => lacks.push(format!("its nodes cannot be listed ({e})")),
    }
    if !pc.controller_gates.is_empty() {
        let have = match deployment {
            Some((ns, name)) => Api::<Deployment>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|d| d.spec?.template.spec)
                .map(|s| {
                    s.containers
                        .iter()
                        .flat_map(|c| c.args.iter().flatten())
                        .cloned()
                        .collect::<Vec<String>>()
                })
                .map(|args| gates_of(&args)),
            None => None,
        };
        match have {
            Some(have) => {
                let missing = missing_gates(&pc.controller_gates, &have);
                if !missing.is_empty() {
                    lacks.push(format!(
                        "the controller runs without the gates {}",
                        missing.join(", ")
                    ));
                }
            }
            None => lacks.push(format!(
                "the controller's gates cannot be read (wanted: {})",
                missing_gates(&pc.controller_gates, &BTreeMap::new()).join(", ")
            )),
        }
    }
    if !pc.profile.feature_gates.is_empty() {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
        let args: Option<Vec<String>> = pods
            .list(&ListParams::default().labels("component=kube-apiserver"))
            .await
            .ok()
            .and_then(|l| l.items.into_iter().next())
            .and_then(|p| p.spec)
            .map(|s| {
                s.containers
                    .iter()
                    .flat_map(|c| c.command.iter().flatten().chain(c.args.iter().flatten()))
                    .cloned()
                    .collect()
            });
        match args {
            Some(args) => {
                let missing = missing_gates(&pc.profile.feature_gates, &gates_of(&args));
                if !missing.is_empty() {
                    lacks.push(format!(
                        "the apiserver runs without the gates {}",
                        missing.join(", ")
                    ));
                }
            }
            None => lacks.push(format!(
                "the apiserver's gates cannot be read (no kube-apiserver pod in kube-system; \
                 wanted: {})",
                missing_gates(&pc.profile.feature_gates, &BTreeMap::new()).join(", ")
            )),
        }
    }
    (!lacks.is_empty()).then(|| {
        format!(
            "needs what this existing cluster lacks: {} (the existing provider uses a cluster \
             as it is; create one with the profile, e.g. `harness cluster up`)",
            lacks.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{NodeSpec, Profile};
    use crate::toolchain::KubeVersion;

    #[test]
    fn gates_are_read_from_flags_and_compared_by_value() {
        let args: Vec<String> = ["--v=2", "--feature-gates=A=true,B=false", "--x"]
            .map(String::from)
            .to_vec();
        let have = gates_of(&args);
        assert_eq!(
            have,
            BTreeMap::from([("A".to_string(), true), ("B".to_string(), false)])
        );
        let want = BTreeMap::from([
            ("A".to_string(), true),
            ("B".to_string(), true),
            ("C".to_string(), true),
        ]);
        assert_eq!(missing_gates(&want, &have), ["B=true", "C=true"]);
    }

    #[test]
    fn a_label_no_node_has_is_missing() {
        let mut profile = Profile::new(KubeVersion::default_version());
        profile.nodes = vec![NodeSpec {
            name: "n".into(),
            labels: BTreeMap::from([
                ("zone".to_string(), "a".to_string()),
                ("node-type".to_string(), "stable".to_string()),
            ]),
        }];
        let pc = PlannedCluster {
            profile,
            controller_gates: BTreeMap::new(),
            dropped_gates: vec![],
            scenarios: vec![],
        };
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w", "labels": {"zone": "a", "node-type": "elastic"}}
        }))
        .unwrap();
        assert_eq!(missing_labels(&pc, &[node]), ["node-type=stable"]);
    }
}
