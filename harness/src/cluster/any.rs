//! One type over every provider, for the runner and the CLI: [`Provider`] makes an
//! [`AnyCluster`].

use std::path::Path;

use super::existing::{ExistingCluster, ExistingProvider};
use super::kind::{KindCluster, KindProvider};
use super::local::{LocalCluster, LocalProvider};
use super::{Cluster, ClusterProvider, Profile};

/// A provider chosen at run time.
#[derive(Debug, Clone)]
pub enum Provider {
    /// Local processes.
    Local(LocalProvider),
    /// kind.
    Kind(KindProvider),
    /// An existing cluster.
    Existing(ExistingProvider),
    /// k3s in a container.
    #[cfg(feature = "k3s")]
    K3s(super::k3s::K3sProvider),
}

/// A cluster of any provider.
#[derive(Debug)]
pub enum AnyCluster {
    /// Local processes.
    Local(LocalCluster),
    /// kind.
    Kind(KindCluster),
    /// An existing cluster.
    Existing(ExistingCluster),
    /// k3s in a container.
    #[cfg(feature = "k3s")]
    K3s(Box<super::k3s::K3sCluster>),
}

impl Provider {
    /// Why it cannot add real nodes to a cluster (a profile's `real_nodes`), if it cannot: only
    /// the local provider adds them, and only as root.
    pub fn no_real_nodes(&self) -> Option<String> {
        match self {
            Provider::Local(_) if nix::unistd::geteuid().is_root() => None,
            Provider::Local(_) => Some(
                "needs real nodes, which need root (a kubelet and containerd manage cgroups, \
                 mounts and network devices): run the harness as root"
                    .into(),
            ),
            _ => Some(format!(
                "needs real nodes, which only the local provider adds (this run uses {})",
                self.label()
            )),
        }
    }

    /// Its name on the command line.
    pub fn label(&self) -> &'static str {
        match self {
            Provider::Local(_) => "local",
            Provider::Kind(_) => "kind",
            Provider::Existing(_) => "existing",
            #[cfg(feature = "k3s")]
            Provider::K3s(_) => "k3s",
        }
    }

    /// Creates a cluster (for `existing`: takes the named context into use).
    pub async fn create(&self, name: &str, profile: &Profile) -> anyhow::Result<AnyCluster> {
        Ok(match self {
            Provider::Local(p) => AnyCluster::Local(p.create(name, profile).await?),
            Provider::Kind(p) => AnyCluster::Kind(p.create(name, profile).await?),
            Provider::Existing(p) => AnyCluster::Existing(p.create(name, profile).await?),
            #[cfg(feature = "k3s")]
            Provider::K3s(p) => AnyCluster::K3s(Box::new(p.create(name, profile).await?)),
        })
    }
}

impl AnyCluster {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            AnyCluster::Local(c) => c.name(),
            AnyCluster::Kind(c) => c.name(),
            AnyCluster::Existing(c) => c.name(),
            #[cfg(feature = "k3s")]
            AnyCluster::K3s(c) => c.name(),
        }
    }

    /// Its admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        match self {
            AnyCluster::Local(c) => c.kubeconfig(),
            AnyCluster::Kind(c) => c.kubeconfig(),
            AnyCluster::Existing(c) => c.kubeconfig(),
            #[cfg(feature = "k3s")]
            AnyCluster::K3s(c) => c.kubeconfig(),
        }
    }

    /// Pushes `images` to the registry its real nodes pull from (the local provider's real
    /// nodes only).
    pub async fn push_images(&self, images: &[crate::toolchain::BuiltImage]) -> anyhow::Result<()> {
        match self {
            AnyCluster::Local(c) => Ok(c.push_images(images).await?),
            _ => anyhow::bail!(
                "cluster {} has no image registry of the harness: only the local provider's real \
                 nodes pull from one",
                self.name()
            ),
        }
    }

    /// A client.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        Ok(match self {
            AnyCluster::Local(c) => c.client(),
            _ => super::admin_client(self.kubeconfig()).await?,
        })
    }

    /// Copies what logs the provider has into `dest`.
    pub fn export_logs(&self, dest: &Path) -> anyhow::Result<()> {
        match self {
            AnyCluster::Local(c) => c.export_logs(dest)?,
            AnyCluster::Kind(c) => c.export_logs(dest)?,
            AnyCluster::Existing(c) => c.export_logs(dest)?,
            #[cfg(feature = "k3s")]
            AnyCluster::K3s(c) => c.export_logs(dest)?,
        }
        Ok(())
    }

    /// Ends the cluster (for `existing`: removes only what the harness created).
    pub fn destroy(self) -> anyhow::Result<()> {
        match self {
            AnyCluster::Local(c) => c.destroy()?,
            AnyCluster::Kind(c) => c.destroy()?,
            AnyCluster::Existing(c) => c.destroy()?,
            #[cfg(feature = "k3s")]
            AnyCluster::K3s(c) => (*c).destroy()?,
        }
        Ok(())
    }

    /// Leaves a local cluster running for inspection and says how to end it; other providers'
    /// clusters are destroyed as usual (their logs are exported first).
    pub fn keep_for_inspection(self) -> anyhow::Result<String> {
        match self {
            AnyCluster::Local(c) => {
                let state = c.detach()?;
                Ok(format!(
                    "kept cluster `{}` for inspection: KUBECONFIG={} (end it with `harness cluster down {}`)",
                    state.name,
                    state.kubeconfig.display(),
                    state.name
                ))
            }
            other => {
                let name = other.name().to_string();
                other.destroy()?;
                Ok(format!(
                    "cluster `{name}` removed: only local clusters are kept for inspection"
                ))
            }
        }
    }
}
