//! A controller manager running as a Deployment inside the cluster (kind, k3s, existing):
//! [`InClusterManager`], checked from its pods' restarts and logs.

use std::collections::BTreeMap;
use std::path::Path;

use futures::future::BoxFuture;

use super::logs::log_findings;
use super::{Component, ControllerError, Window};

/// A manager running as a Deployment inside the cluster (kind, k3s, existing).
#[derive(Clone)]
pub struct InClusterManager {
    /// Process name (`kruise-manager`).
    pub name: String,
    /// Release tag.
    pub version: String,
    /// Its namespace.
    pub namespace: String,
    /// Label selector of its pods.
    pub selector: String,
    /// Its feature gates (empty when the harness did not install it).
    pub gates: BTreeMap<String, bool>,
    /// A client of the cluster.
    pub client: kube::Client,
}

impl std::fmt::Debug for InClusterManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InClusterManager")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl Component for InClusterManager {
    fn name(&self) -> &str {
        &self.name
    }

    fn check<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(self.check_pods(window))
    }

    fn log(&self) -> Option<&Path> {
        None
    }
}

impl InClusterManager {
    /// Fails if a manager container restarted (with its last termination), or its current log
    /// shows RBAC denials of its own ServiceAccount or a panic, within `window`.
    pub async fn check_pods(&self, window: &Window) -> Result<(), ControllerError> {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, ListParams, LogParams};
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = pods
            .list(&ListParams::default().labels(&self.selector))
            .await
            .map_err(ControllerError::kube(format!(
                "list {} pods in {}",
                self.name, self.namespace
            )))?;
        for p in &list.items {
            let pod = p.metadata.name.clone().unwrap_or_default();
            for cs in p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default()
            {
                if cs.restart_count > 0 {
                    let last = cs
                        .last_state
                        .and_then(|s| s.terminated)
                        .map(|t| format!("exit {} ({})", t.exit_code, t.reason.unwrap_or_default()))
                        .unwrap_or_default();
                    return Err(ControllerError::ManagerRestarted {
                        name: self.name.clone(),
                        version: self.version.clone(),
                        detail: format!(
                            "container {} of pod {pod} restarted {} time(s); last: {last}",
                            cs.name, cs.restart_count
                        ),
                    });
                }
            }
            let log = pods
                .logs(
                    &pod,
                    &LogParams {
                        container: Some("manager".into()),
                        since_seconds: window.since_seconds(),
                        ..Default::default()
                    },
                )
                .await
                .unwrap_or_default();
            log_findings(&self.name, &self.version, &log, window)?;
        }
        Ok(())
    }
}
