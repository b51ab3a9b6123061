//! What a local cluster records on disk so that `cluster list`, `cluster down` and `gc` work
//! from any process: [`ClusterState`] in `<cluster>/cluster.json`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::LocalError;
use crate::cluster::Profile;
use crate::process::ProcRecord;

/// The on-disk record of one local cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterState {
    /// Cluster name.
    pub name: String,
    /// The profile it was made from.
    pub profile: Profile,
    /// The harness process that owns it; `None` once detached.
    pub owner: Option<ProcRecord>,
    /// The apiserver URL.
    pub server: String,
    /// Admin kubeconfig path.
    pub kubeconfig: PathBuf,
    /// Every process started for it, in start order.
    pub processes: Vec<ProcRecord>,
    /// Unix seconds at creation.
    pub created: u64,
    /// Set once every component is ready.
    pub ready: bool,
    /// Its real nodes, recorded before any of their host resources is made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub real_nodes: Vec<super::node::RealNode>,
    /// The port on 127.0.0.1 of the image registry its real nodes pull from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_port: Option<u16>,
}

impl ClusterState {
    /// Writes atomically (temp file + rename).
    pub fn save(&self, path: &Path) -> Result<(), LocalError> {
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(self).expect("state serializes");
        fs::write(&tmp, body).map_err(|e| LocalError::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| LocalError::io(path, e))
    }

    /// Reads a state file.
    pub fn load(path: &Path) -> Result<Self, LocalError> {
        let bytes = fs::read(path).map_err(|e| LocalError::io(path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| LocalError::BadState {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
    }

    /// Whether the owning harness process is alive (always false once detached).
    pub fn owner_alive(&self) -> bool {
        self.owner.as_ref().is_some_and(ProcRecord::alive)
    }

    /// Its line in `harness cluster list`: name, version, running / dead / degraded, attached
    /// or detached, kubeconfig.
    pub fn summary(&self) -> String {
        let alive = self.alive_processes().len();
        let status = if alive == self.processes.len() && self.ready {
            "running"
        } else if alive == 0 {
            "dead (run `harness gc`)"
        } else {
            "degraded"
        };
        let owner = if self.owner.is_some() {
            "attached"
        } else {
            "detached"
        };
        format!(
            "{}\tKubernetes {}\t{status}\t{owner}\t{}",
            self.name,
            self.profile.kubernetes,
            self.kubeconfig.display()
        )
    }

    /// The names of its processes that are alive.
    pub fn alive_processes(&self) -> Vec<&ProcRecord> {
        self.processes.iter().filter(|p| p.alive()).collect()
    }
}

/// The harness's state directory: `HARNESS_STATE_DIR`, else `$XDG_STATE_HOME/harness`, else
/// `~/.local/state/harness`.
pub fn state_root() -> PathBuf {
    if let Some(p) = std::env::var_os("HARNESS_STATE_DIR") {
        PathBuf::from(p)
    } else if let Some(p) = std::env::var_os("XDG_STATE_HOME") {
        PathBuf::from(p).join("harness")
    } else {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join(".local/state/harness")
    }
}

/// Where local clusters live: the `clusters/` of [`state_root`].
pub fn default_clusters_root() -> PathBuf {
    state_root().join("clusters")
}

/// Where non-local providers keep their cluster directories (kind's, k3s's, the private Docker
/// daemons'): beside [`default_clusters_root`].
pub fn providers_root() -> PathBuf {
    default_clusters_root()
        .parent()
        .map(|p| p.join("providers"))
        .unwrap_or_else(|| PathBuf::from("harness-providers"))
}
