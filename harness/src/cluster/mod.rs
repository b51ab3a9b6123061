//! Clusters: a [`Profile`] says what a cluster must be, a [`ClusterProvider`] makes one.
//!
//! Start with [`local::LocalProvider`], the embedded default: a real control plane as local
//! processes built from Go modules.

pub mod any;
pub mod client;
pub mod docker;
pub mod existing;
pub mod k3s;
pub mod kind;
pub mod local;
pub mod proxy;
pub mod seed;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::toolchain::KubeVersion;

/// A fake node: its name and labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Labels (zone, node type, ...).
    pub labels: BTreeMap<String, String>,
}

pub use client::admin_client;

/// The label on every namespace the harness creates, valued with the name of the cluster it
/// used (so the existing provider deletes only those).
pub const OWNER_LABEL: &str = "conformance-harness/owner";

/// The zone label nodes carry.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// What a cluster must be: Kubernetes version, apiserver feature gates and runtime-config,
/// and its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// Profile name (used in reports and for kind config file names).
    pub name: String,
    /// Kubernetes version.
    pub kubernetes: KubeVersion,
    /// Feature gates for the control-plane components.
    pub feature_gates: BTreeMap<String, bool>,
    /// `--runtime-config` entries of the apiserver.
    pub runtime_config: BTreeMap<String, String>,
    /// Nodes (kwok's fake nodes).
    pub nodes: Vec<NodeSpec>,
    /// Real nodes: a kubelet and a containerd each (local provider only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub real_nodes: Vec<NodeSpec>,
    /// Whether the real nodes register with the taint that keeps off every pod not asking for
    /// a real node (the default); a cluster of real nodes only ([`Profile::only_real_nodes`])
    /// has none.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub real_node_taint: bool,
    /// How long the fake nodes take for what takes a kubelet time (local provider).
    #[serde(default)]
    pub pod_timing: PodTiming,
    /// Objects created once the cluster is up, before the controller is installed (see
    /// [`seed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<serde_json::Value>,
}

/// How long kwok, playing the kubelet of the fake nodes, takes for what takes a real kubelet
/// time. The defaults are what the harness's real nodes take (see docs/providers/local.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodTiming {
    /// An in-place container restart for a new image: the old container stopped, the new one
    /// started and ready (milliseconds; each restart takes up to half as long again).
    pub in_place_restart_ms: u64,
    /// A deleted pod's containers exiting on SIGTERM (milliseconds; the grace period caps it,
    /// and a pod's `harness.kwok/stop-seconds` annotation overrides it).
    pub stop_ms: u64,
}

impl Default for PodTiming {
    fn default() -> Self {
        Self {
            in_place_restart_ms: DEFAULT_IN_PLACE_RESTART_MS,
            stop_ms: DEFAULT_STOP_MS,
        }
    }
}

/// [`PodTiming::in_place_restart_ms`] by default.
pub const DEFAULT_IN_PLACE_RESTART_MS: u64 = 1500;
/// [`PodTiming::stop_ms`] by default.
pub const DEFAULT_STOP_MS: u64 = 1200;

/// A malformed profile setting.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A `key=value` entry without `=`.
    #[error("parse `{entry}`: expected KEY=VALUE")]
    NotKeyValue {
        /// The entry.
        entry: String,
    },
    /// A feature gate value that is not a boolean.
    #[error("parse feature gate `{entry}`: the value must be true or false")]
    NotBool {
        /// The entry.
        entry: String,
    },
    /// No nodes.
    #[error("a cluster needs at least one node")]
    NoNodes,
    /// No zones.
    #[error("a cluster needs at least one zone")]
    NoZones,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

impl Profile {
    /// The default profile for `kubernetes`: no extra gates, four nodes over zones
    /// `zone-a` and `zone-b`.
    pub fn new(kubernetes: KubeVersion) -> Self {
        let mut p = Self {
            name: "default".into(),
            kubernetes,
            feature_gates: BTreeMap::new(),
            runtime_config: BTreeMap::new(),
            nodes: vec![],
            real_nodes: vec![],
            real_node_taint: true,
            pod_timing: PodTiming::default(),
            objects: vec![],
        };
        p.set_nodes(4, &["zone-a", "zone-b"], &BTreeMap::new())
            .expect("default node layout is valid");
        p
    }

    /// Replaces the nodes with `count` nodes `kwok-node-<i>`, spread round-robin over `zones`,
    /// each also carrying `labels`.
    pub fn set_nodes(
        &mut self,
        count: usize,
        zones: &[&str],
        labels: &BTreeMap<String, String>,
    ) -> Result<(), ProfileError> {
        if count == 0 {
            return Err(ProfileError::NoNodes);
        }
        if zones.is_empty() {
            return Err(ProfileError::NoZones);
        }
        self.nodes = (0..count)
            .map(|i| {
                let mut l = labels.clone();
                l.insert(ZONE_LABEL.into(), zones[i % zones.len()].to_string());
                NodeSpec {
                    name: format!("kwok-node-{i}"),
                    labels: l,
                }
            })
            .collect();
        Ok(())
    }

    /// Replaces the real nodes with `count` nodes `real-node-<i>`, spread round-robin over
    /// `zones`, each also carrying `labels`.
    pub fn set_real_nodes(
        &mut self,
        count: usize,
        zones: &[&str],
        labels: &BTreeMap<String, String>,
    ) -> Result<(), ProfileError> {
        if zones.is_empty() && count > 0 {
            return Err(ProfileError::NoZones);
        }
        self.real_nodes = (0..count)
            .map(|i| {
                let mut l = labels.clone();
                l.insert(ZONE_LABEL.into(), zones[i % zones.len()].to_string());
                NodeSpec {
                    name: format!("real-node-{i}"),
                    labels: l,
                }
            })
            .collect();
        Ok(())
    }

    /// Makes the real nodes named `names` the only nodes (no kwok nodes), untainted, as the
    /// workers of a cluster whose every pod needs a kubelet.
    pub fn only_real_nodes(&mut self, names: &[String]) -> Result<(), ProfileError> {
        if names.is_empty() {
            return Err(ProfileError::NoNodes);
        }
        self.nodes.clear();
        self.real_nodes = names
            .iter()
            .map(|n| NodeSpec {
                name: n.clone(),
                labels: BTreeMap::new(),
            })
            .collect();
        self.real_node_taint = false;
        Ok(())
    }

    /// Parses and adds `Gate=true` entries.
    pub fn add_gates<S: AsRef<str>>(&mut self, entries: &[S]) -> Result<(), ProfileError> {
        self.feature_gates.extend(parse_gates(entries)?);
        Ok(())
    }

    /// Parses and adds `api/version=true` runtime-config entries.
    pub fn add_runtime_config<S: AsRef<str>>(&mut self, entries: &[S]) -> Result<(), ProfileError> {
        self.runtime_config.extend(parse_key_values(entries)?);
        Ok(())
    }
}

/// Parses `Gate=true` / `Gate=false` entries (each may be a comma-separated list).
pub fn parse_gates<S: AsRef<str>>(entries: &[S]) -> Result<BTreeMap<String, bool>, ProfileError> {
    parse_key_values(entries)?
        .into_iter()
        .map(|(k, v)| match v.as_str() {
            "true" => Ok((k, true)),
            "false" => Ok((k, false)),
            _ => Err(ProfileError::NotBool {
                entry: format!("{k}={v}"),
            }),
        })
        .collect()
}

/// Parses `k=v` entries (each entry may itself be a comma-separated list).
pub fn parse_key_values<S: AsRef<str>>(
    entries: &[S],
) -> Result<BTreeMap<String, String>, ProfileError> {
    let mut out = BTreeMap::new();
    for entry in entries {
        for part in entry.as_ref().split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| ProfileError::NotKeyValue {
                    entry: part.to_string(),
                })?;
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    Ok(out)
}

/// Makes clusters from profiles. Extra abilities (e.g. installing images) are separate traits.
pub trait ClusterProvider {
    /// The cluster it makes.
    type Cluster: Cluster;
    /// Its error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Creates a cluster named `name` as `profile` says and waits until it is ready.
    fn create(
        &self,
        name: &str,
        profile: &Profile,
    ) -> impl Future<Output = Result<Self::Cluster, Self::Error>> + Send;
}

/// A running cluster.
pub trait Cluster {
    /// Its error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Its name.
    fn name(&self) -> &str;
    /// Path of an admin kubeconfig.
    fn kubeconfig(&self) -> &Path;
    /// Copies every component log into `dest`.
    fn export_logs(&self, dest: &Path) -> Result<(), Self::Error>;
    /// Ends the cluster and removes what it left; collects every error rather than stopping
    /// at the first.
    fn destroy(self) -> Result<(), Self::Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_spreads_nodes_over_two_zones() {
        let p = Profile::new(KubeVersion::default_version());
        let zones: Vec<_> = p
            .nodes
            .iter()
            .map(|n| n.labels[ZONE_LABEL].as_str())
            .collect();
        assert_eq!(zones, ["zone-a", "zone-b", "zone-a", "zone-b"]);
    }

    #[test]
    fn gates_parse_and_refuse_non_booleans() {
        let mut p = Profile::new(KubeVersion::default_version());
        p.add_gates(&["InPlacePodVerticalScaling=true,Foo=false"])
            .unwrap();
        assert!(p.feature_gates["InPlacePodVerticalScaling"]);
        assert!(!p.feature_gates["Foo"]);
        let e = p.add_gates(&["Bar=yes"]).unwrap_err().to_string();
        assert!(e.contains("Bar=yes"), "{e}");
        let e = p.add_gates(&["Bar"]).unwrap_err().to_string();
        assert!(e.contains("KEY=VALUE"), "{e}");
    }
}
