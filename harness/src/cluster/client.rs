//! Clients of a cluster: [`admin_client`] reads a kubeconfig file, whatever provider wrote it.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A kubeconfig that could not be turned into a client.
#[derive(Debug, thiserror::Error)]
#[error("load kubeconfig {}", path.display())]
pub struct KubeconfigError {
    /// The file.
    pub path: PathBuf,
    /// Cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// A client from a kubeconfig file (its current context): a 5 s connect timeout and no read
/// timeout, since watches may be quiet for minutes.
pub async fn admin_client(kubeconfig: &Path) -> Result<kube::Client, KubeconfigError> {
    let err = |e: Box<dyn std::error::Error + Send + Sync>| KubeconfigError {
        path: kubeconfig.to_path_buf(),
        source: e,
    };
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| err(Box::new(e)))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| err(Box::new(e)))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = None;
    kube::Client::try_from(config).map_err(|e| err(Box::new(e)))
}
