//! One type over every provider, for the runner and the CLI: [`Provider`] makes an
//! [`AnyCluster`]; [`ProviderConfig`] is what a run asks for, checked and built into a
//! [`Provider`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::existing::{ExistingCluster, ExistingProvider};
use super::kind::{KindCluster, KindProvider};
use super::local::{LocalCluster, LocalProvider};
use super::{Cluster, ClusterProvider, Profile};
use crate::toolchain::Toolchain;

pub use super::local::state::providers_root;

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
    /// The cached builds a cluster of `profile` needs from this provider (the control plane,
    /// kwok, and for real nodes the kubelet and the registry), for the plan of cold builds.
    pub fn builds(&self, profile: &Profile) -> Vec<crate::toolchain::BuildKey> {
        use crate::toolchain::{BuildKey, KWOK_VERSION, REGISTRY_VERSION};
        match self {
            Provider::Local(_) => {
                let tag = profile.kubernetes.tag();
                let mut out = vec![
                    BuildKey::new("kubernetes", tag.clone()),
                    BuildKey::new("kwok", KWOK_VERSION),
                ];
                if !profile.real_nodes.is_empty() {
                    out.push(BuildKey::new("kubelet", tag));
                    out.push(BuildKey::new("registry", REGISTRY_VERSION));
                }
                out
            }
            _ => vec![],
        }
    }

    /// Why it cannot add real nodes to a cluster (a profile's `real_nodes`), if it cannot: the
    /// local provider adds them as root, kind's nodes are all real.
    pub fn no_real_nodes(&self) -> Option<String> {
        match self {
            Provider::Local(_) if nix::unistd::geteuid().is_root() => None,
            Provider::Local(_) => Some(
                "needs real nodes, which need root (a kubelet and containerd manage cgroups, \
                 mounts and network devices): run the harness as root"
                    .into(),
            ),
            // Every kind node is a real one.
            Provider::Kind(_) => None,
            _ => Some(format!(
                "needs real nodes, which only the local and kind providers add (this run uses {})",
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

    /// The environment a `docker` command on the host needs to reach its nodes' containers
    /// (kind's: `DOCKER_HOST` of the daemon they run in); empty for the other providers.
    pub fn docker_env(&self) -> Vec<(String, String)> {
        match self {
            AnyCluster::Kind(c) => c.docker_env(),
            _ => vec![],
        }
    }

    /// Whether its nodes pull every image from a registry of the harness's and nothing else
    /// (kind's, on the node image the harness assembles): what runs there is pushed first.
    pub fn pulls_only_from_harness(&self) -> bool {
        matches!(self, AnyCluster::Kind(c) if c.has_registry())
    }

    /// Pushes `images` to the registry its nodes pull from (the local provider's real nodes,
    /// and kind's nodes on the node image the harness assembles).
    pub async fn push_images(&self, images: &[crate::toolchain::BuiltImage]) -> anyhow::Result<()> {
        match self {
            AnyCluster::Local(c) => Ok(c.push_images(images).await?),
            AnyCluster::Kind(c) => Ok(c.push_images(images).await?),
            _ => anyhow::bail!(
                "cluster {} has no image registry of the harness: only the local provider's real \
                 nodes and kind's nodes on the harness's node image pull from one",
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

    /// Crashes its apiserver and waits until a new one serves (the local provider's: see
    /// `LocalCluster::restart_apiserver`): how long it took, or `None` when the harness does
    /// not run this cluster's apiserver and so cannot restart it.
    pub async fn restart_apiserver(&self) -> anyhow::Result<Option<std::time::Duration>> {
        Ok(match self {
            AnyCluster::Local(c) => c.restart_apiserver().await?,
            _ => None,
        })
    }

    /// Makes node `node`'s kubelet go silent until [`resume_node`](Self::resume_node), and
    /// waits until the node is NotReady (the local provider's kwok nodes: see
    /// `LocalCluster::silence_node`): how long that took, or `None` when the harness cannot
    /// silence that node's kubelet.
    pub async fn silence_node(&self, node: &str) -> anyhow::Result<Option<std::time::Duration>> {
        Ok(match self {
            AnyCluster::Local(c) => c.silence_node(node).await?,
            _ => None,
        })
    }

    /// Has a node [`silence_node`](Self::silence_node) silenced report again, and waits until
    /// it is Ready.
    pub async fn resume_node(&self, node: &str) -> anyhow::Result<()> {
        match self {
            AnyCluster::Local(c) => Ok(c.resume_node(node).await?),
            _ => Ok(()),
        }
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

/// Where clusters come from: the providers a run can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// The embedded default: a control plane as local processes built from Go modules.
    Local,
    /// kind (needs Docker).
    Kind,
    /// k3s in a container (needs Docker and the `k3s` cargo feature).
    K3s,
    /// A cluster the user already has.
    Existing,
}

impl ProviderKind {
    /// Its name on the command line.
    pub fn label(self) -> &'static str {
        match self {
            ProviderKind::Local => "local",
            ProviderKind::Kind => "kind",
            ProviderKind::K3s => "k3s",
            ProviderKind::Existing => "existing",
        }
    }
}

/// Why a provider cannot be made as asked.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// A flag of the existing provider given with another provider.
    #[error("{flag} is for --provider existing")]
    ExistingOnly {
        /// The flag.
        flag: &'static str,
    },
    /// The existing provider without a context.
    #[error(
        "--provider existing needs --context NAME: the current context is never used \
         implicitly (see `kubectl config get-contexts`)"
    )]
    NoContext,
    /// A kind flag given with another provider.
    #[error("{flag} is for --provider kind")]
    KindOnly {
        /// The flag.
        flag: &'static str,
    },
    /// A provider that needs Docker, with no Docker daemon answering.
    #[error(
        "--provider {provider}: Docker is needed and {why}; start Docker{offline} or use \
         --provider local (no Docker needed)"
    )]
    NoDocker {
        /// The provider.
        provider: &'static str,
        /// What `docker info` said.
        why: String,
        /// For kind, the way that needs neither a running daemon nor a registry.
        offline: &'static str,
    },
    /// The k3s provider in a build without it.
    #[error(
        "this harness was built without the k3s provider; build it with \
         `cargo run -p harness --features k3s -- ...`"
    )]
    NoK3s,
}

/// What a run asks of its provider: which one and its settings.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Which provider.
    pub kind: ProviderKind,
    /// Kubeconfig of the existing cluster (default: $KUBECONFIG, then ~/.kube/config).
    pub kubeconfig: Option<PathBuf>,
    /// Context of the existing cluster.
    pub context: Option<String>,
    /// The API server URL the existing context must point at.
    pub server: Option<String>,
    /// A kind binary instead of the kind release the node image belongs to, built.
    pub kind_binary: Option<PathBuf>,
    /// kind on a node image assembled here, in a private Docker daemon unless `DOCKER_HOST`
    /// names one.
    pub kind_offline: bool,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            kind: ProviderKind::Local,
            kubeconfig: None,
            context: None,
            server: None,
            kind_binary: None,
            kind_offline: false,
        }
    }
}

impl ProviderConfig {
    /// Refuses settings that belong to another provider, and missing required ones.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let existing_only = [
            ("--kubeconfig", self.kubeconfig.is_some()),
            ("--context", self.context.is_some()),
            ("--server", self.server.is_some()),
        ];
        if self.kind != ProviderKind::Existing {
            if let Some((flag, _)) = existing_only.iter().find(|(_, set)| *set) {
                return Err(ProviderError::ExistingOnly { flag });
            }
        } else if self.context.is_none() {
            return Err(ProviderError::NoContext);
        }
        if self.kind != ProviderKind::Kind {
            let kind_only = [
                ("--kind-binary", self.kind_binary.is_some()),
                ("--kind-offline", self.kind_offline),
            ];
            if let Some((flag, _)) = kind_only.iter().find(|(_, set)| *set) {
                return Err(ProviderError::KindOnly { flag });
            }
        }
        Ok(())
    }

    /// Its name on the command line.
    pub fn label(&self) -> &'static str {
        self.kind.label()
    }

    fn existing_provider(&self) -> ExistingProvider {
        ExistingProvider {
            kubeconfig: self
                .kubeconfig
                .clone()
                .unwrap_or_else(super::existing::default_kubeconfig),
            context: self.context.clone().unwrap_or_default(),
            server: self.server.clone(),
            root: providers_root().join("existing"),
        }
    }

    /// The provider, once validated (and Docker found, for kind and k3s); `local` is the local
    /// provider to use, `logs` where kind exports cluster logs before deleting.
    pub fn build(
        &self,
        local: LocalProvider,
        toolchain: &Toolchain,
        logs: PathBuf,
    ) -> Result<Provider, ProviderError> {
        self.validate()?;
        // An offline kind brings its own daemon when DOCKER_HOST names none.
        let own_docker = self.kind_offline && std::env::var_os("DOCKER_HOST").is_none();
        if matches!(self.kind, ProviderKind::Kind | ProviderKind::K3s) && !own_docker {
            docker_ready().map_err(|why| ProviderError::NoDocker {
                provider: self.label(),
                why,
                offline: no_docker_way(self.kind, std::env::var_os("DOCKER_HOST").is_some()),
            })?;
        }
        Ok(match self.kind {
            ProviderKind::Local => Provider::Local(local),
            ProviderKind::Kind => {
                let kind = kind_provider(self.kind_binary.clone(), toolchain, logs);
                Provider::Kind(match self.kind_offline {
                    true => kind.with_node(super::kind::NodeSource::Assemble {
                        toolchain: toolchain.clone(),
                        harness_binary: local.options().harness_binary.clone(),
                    }),
                    false => kind,
                })
            }
            ProviderKind::Existing => Provider::Existing(self.existing_provider()),
            ProviderKind::K3s => k3s_provider()?,
        })
    }

    /// What the provider would do for cluster `name` of `profile`, for a dry run (not for the
    /// local provider, whose dry run lists its component processes).
    pub fn dry_run(
        &self,
        name: &str,
        profile: &Profile,
        logs: &Path,
    ) -> Result<String, super::kind::KindError> {
        Ok(match self.kind {
            ProviderKind::Local => unreachable!("the local dry run lists component processes"),
            ProviderKind::Kind => {
                let kind = self
                    .kind_binary
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("kind"));
                KindProvider::plan_with(
                    &kind,
                    name,
                    profile,
                    &providers_root().join("kind").join(name),
                    logs,
                    Duration::from_secs(300),
                )?
                .to_string()
            }
            ProviderKind::K3s => super::k3s::dry_run(profile),
            ProviderKind::Existing => self.existing_provider().plan(name).join("\n") + "\n",
        })
    }
}

/// Removes what killed runs left, provider by provider: local clusters, kind clusters (their
/// logs exported first), private Docker daemons. Returns a line for each thing removed.
pub fn gc(local: &LocalProvider, toolchain: &Toolchain) -> anyhow::Result<Vec<String>> {
    let named = |what: &str, names: Vec<String>| -> Vec<String> {
        names
            .into_iter()
            .map(|n| format!("removed {what} `{n}`"))
            .collect()
    };
    let mut out = named("cluster", local.gc()?);
    let kind = kind_provider(None, toolchain, providers_root().join("logs")).gc()?;
    out.extend(named("kind cluster", kind));
    let dockers = super::docker::gc(&super::docker::default_root())?;
    out.extend(named("private Docker daemon", dockers));
    Ok(out)
}

/// The kind provider: `kind_binary`, or the kind release each node image belongs to, built
/// with `toolchain`; `logs` is where cluster logs are exported before deleting.
pub fn kind_provider(
    kind_binary: Option<PathBuf>,
    toolchain: &Toolchain,
    logs: PathBuf,
) -> KindProvider {
    use super::kind::{CREATE_ATTEMPTS, KindBinary, KindOptions, ProcessRunner};
    let binary = match kind_binary {
        Some(p) => KindBinary::Path(p),
        None => KindBinary::Build(toolchain.clone()),
    };
    KindProvider::new(
        binary,
        std::sync::Arc::new(ProcessRunner),
        KindOptions {
            root: providers_root().join("kind"),
            logs,
            attempts: CREATE_ATTEMPTS,
            wait: Duration::from_secs(300),
            node: Default::default(),
            env: vec![],
        },
    )
}

#[cfg(feature = "k3s")]
fn k3s_provider() -> Result<Provider, ProviderError> {
    Ok(Provider::K3s(super::k3s::K3sProvider {
        root: providers_root().join("k3s"),
    }))
}

#[cfg(not(feature = "k3s"))]
fn k3s_provider() -> Result<Provider, ProviderError> {
    Err(ProviderError::NoK3s)
}

/// What a refusal for want of Docker offers besides starting it: for kind, `--kind-offline`,
/// which starts a private daemon of the harness's own and needs no registry (when `DOCKER_HOST`
/// names no daemon of the user's).
fn no_docker_way(kind: ProviderKind, docker_host: bool) -> &'static str {
    match (kind, docker_host) {
        (ProviderKind::Kind, false) => {
            ", add --kind-offline (the harness then starts a private Docker daemon of its own, as \
             root, and builds kind's node image here: no daemon and no registry needed),"
        }
        (ProviderKind::Kind, true) => {
            ", unset DOCKER_HOST and add --kind-offline (the harness then starts a private \
             Docker daemon of its own, as root: no registry needed),"
        }
        _ => "",
    }
}

/// Whether a Docker daemon answers (`docker info`).
fn docker_ready() -> Result<(), String> {
    let out = std::process::Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("`docker` could not be run ({e})"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "the daemon does not answer (`docker info`: {})",
            err.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output")
                .trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: ProviderKind) -> ProviderConfig {
        ProviderConfig {
            kind,
            ..ProviderConfig::default()
        }
    }

    #[test]
    fn kind_without_docker_names_the_offline_way() {
        let refusal = |kind, docker_host| {
            ProviderError::NoDocker {
                provider: "kind",
                why: "docker info: Cannot connect to the Docker daemon".into(),
                offline: no_docker_way(kind, docker_host),
            }
            .to_string()
        };
        let kind = refusal(ProviderKind::Kind, false);
        assert!(kind.contains("add --kind-offline"), "{kind}");
        assert!(
            kind.ends_with("or use --provider local (no Docker needed)"),
            "{kind}"
        );
        let host = refusal(ProviderKind::Kind, true);
        assert!(
            host.contains("unset DOCKER_HOST and add --kind-offline"),
            "{host}"
        );
        let k3s = refusal(ProviderKind::K3s, false);
        assert!(!k3s.contains("--kind-offline"), "{k3s}");
        assert!(
            k3s.contains("start Docker or use --provider local"),
            "{k3s}"
        );
    }

    #[test]
    fn flags_of_another_provider_are_refused_by_name() {
        let e = ProviderConfig {
            context: Some("ctx".into()),
            ..config(ProviderKind::Local)
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.to_string(), "--context is for --provider existing");
        let e = ProviderConfig {
            server: Some("https://x".into()),
            ..config(ProviderKind::Kind)
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.to_string(), "--server is for --provider existing");
        let e = ProviderConfig {
            kind_binary: Some("/bin/kind".into()),
            ..config(ProviderKind::K3s)
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.to_string(), "--kind-binary is for --provider kind");
        let e = ProviderConfig {
            kind_offline: true,
            ..config(ProviderKind::Local)
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.to_string(), "--kind-offline is for --provider kind");
        assert!(
            ProviderConfig {
                kind_binary: Some("/bin/kind".into()),
                ..config(ProviderKind::Kind)
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn the_existing_provider_needs_a_context_and_never_takes_the_current_one() {
        let e = config(ProviderKind::Existing).validate().unwrap_err();
        assert!(e.to_string().contains("needs --context NAME"), "{e}");
        let ok = ProviderConfig {
            context: Some("ctx".into()),
            kubeconfig: Some("/k".into()),
            ..config(ProviderKind::Existing)
        };
        assert!(ok.validate().is_ok());
        let plan = ok
            .dry_run(
                "harness",
                &Profile::new(crate::toolchain::KubeVersion::default_version()),
                Path::new("/l"),
            )
            .unwrap();
        assert!(plan.contains("use context `ctx` of /k"), "{plan}");
    }

    #[test]
    fn a_kind_dry_run_names_the_given_binary() {
        let c = ProviderConfig {
            kind_binary: Some("/opt/kind".into()),
            ..config(ProviderKind::Kind)
        };
        let plan = c
            .dry_run(
                "harness",
                &Profile::new(crate::toolchain::KubeVersion::default_version()),
                Path::new("/l"),
            )
            .unwrap();
        assert!(plan.contains("/opt/kind"), "{plan}");
    }

    #[test]
    fn labels_are_the_command_line_names() {
        let all = [
            ProviderKind::Local,
            ProviderKind::Kind,
            ProviderKind::K3s,
            ProviderKind::Existing,
        ];
        let labels: Vec<&str> = all.iter().map(|k| k.label()).collect();
        assert_eq!(labels, ["local", "kind", "k3s", "existing"]);
    }
}
