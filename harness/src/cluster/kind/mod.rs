//! The kind provider, for hosts with Docker: start with [`KindProvider`].
//!
//! A [`Profile`] becomes a kind config ([`config_yaml`]): its feature gates and runtime-config,
//! one control-plane node, one worker per profile node with that node's labels, and the node
//! image for the Kubernetes version from [`NODE_IMAGES`], pinned by digest together with the
//! kind release it was built for (node images do not carry across kind releases, so the harness
//! runs that kind release, built from Go modules like every other binary).
//!
//! Every `kind` invocation goes through a [`CommandRunner`], so the provider's logic (retries on
//! known transient failures, logs exported before every delete, delete on every exit path) is
//! tested without Docker by a fake runner.

//!
//! Where each part is: the config and the pinned node images in `config`, the commands and
//! their runner in `command`, a created [`KindCluster`] in `cluster`; the nodes' network on an
//! offline image in [`cni`], their image registry in [`registry`].

mod cluster;
pub mod cni;
mod command;
mod config;
pub mod registry;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{ClusterProvider, Profile};
use crate::toolchain::{Toolchain, ToolchainError};

pub use cluster::{KindCluster, OFFLINE_VOLUMES};
use command::teardown_commands;
pub use command::{CommandLine, CommandOutput, CommandRunner, KindPlan, ProcessRunner};
use command::{tail, without_stacks};
use config::merge;
pub use config::{
    ConfigSync, NODE_IMAGES, NodeImage, REAL_NODE_JOIN_PATCH, config, config_with, config_yaml,
    config_yaml_with, node_image, sync_configs,
};

/// How many times `kind create cluster` is tried when it fails in a known transient way.
pub const CREATE_ATTEMPTS: usize = 3;

/// Failure messages of `kind create cluster` that a retry can cure (image pulls, a slow
/// node boot, a kubeadm phase timing out on a loaded host).
pub const TRANSIENT_FAILURES: &[&str] = &[
    "i/o timeout",
    "TLS handshake timeout",
    "connection reset by peer",
    "context deadline exceeded",
    "failed to pull image",
    "error pulling image",
    "could not find a log line that matches",
    "failed to init node with kubeadm",
    "failed to join node with kubeadm",
    "timed out waiting for the condition",
];

/// Errors of the kind provider.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// No pinned image for the version.
    #[error(
        "kind has no pinned node image for Kubernetes {given}; known: {known} (add a line to \
         NODE_IMAGES in harness/src/cluster/kind/config.rs with the digest from that kind release's notes)"
    )]
    UnknownVersion {
        /// The version asked for.
        given: String,
        /// The known minors with their kind releases.
        known: String,
    },
    /// kind could not be built.
    #[error("prepare kind")]
    Toolchain(#[from] ToolchainError),
    /// A kind command could not be started at all.
    #[error("run `{command}`: {source} (is kind installed, or pass --kind-binary)")]
    Spawn {
        /// The command line.
        command: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `kind create cluster` failed.
    #[error(
        "create kind cluster `{name}` failed after {attempts} attempt(s); logs exported to {}; \
         the partial cluster was deleted; last lines of kind's output:\n{tail}",
        logs.display()
    )]
    Create {
        /// Cluster name.
        name: String,
        /// Attempts made.
        attempts: usize,
        /// Where the logs went.
        logs: PathBuf,
        /// The tail of the last attempt's stderr.
        tail: String,
    },
    /// Another kind command failed.
    #[error("`{command}` failed: {tail}")]
    Command {
        /// The command line.
        command: String,
        /// The tail of its stderr.
        tail: String,
    },
    /// The Docker daemon or the offline node image could not be had.
    #[error("kind on an offline node image: {0}")]
    Docker(String),
    /// The pod network of a cluster on an offline node image could not be set up.
    #[error("set up the pod network of kind cluster `{name}`: {detail}")]
    Network {
        /// Cluster name.
        name: String,
        /// What failed.
        detail: String,
    },
    /// Teardown steps failed.
    #[error("tear down kind cluster `{name}`: {}", errors.join("; "))]
    Teardown {
        /// Cluster name.
        name: String,
        /// Every failed step.
        errors: Vec<String>,
    },
    /// A file operation failed.
    #[error("access {}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> KindError + '_ {
    move |source| KindError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The host's limit on inotify instances per user, which every kind node's systemd, kubelet and
/// containerd draw from.
const INOTIFY_INSTANCES: &str = "/proc/sys/fs/inotify/max_user_instances";

/// A warning when `instances` (the host's `fs.inotify.max_user_instances`) is too low for
/// several kind clusters at once: their kubelets, and a local real node's started meanwhile,
/// then fail with "too many open files". The harness leaves the host's setting alone.
pub fn inotify_warning(instances: u64) -> Option<String> {
    (instances < 512).then(|| {
        format!(
            "fs.inotify.max_user_instances is {instances}: a few kind clusters of several nodes \
             exhaust it (kubelets then fail with \"too many open files\"); raise it with \
             `sysctl -w fs.inotify.max_user_instances=512`, or run one cluster at a time \
             (--clusters-parallel 1)"
        )
    })
}

/// Where kind comes from.
#[derive(Debug, Clone)]
pub enum KindBinary {
    /// Build the kind release the node image belongs to with Go (cached like every binary).
    Build(Toolchain),
    /// Use this binary.
    Path(PathBuf),
}

/// Settings of the kind provider.
#[derive(Clone)]
pub struct KindOptions {
    /// Where cluster directories (config, kubeconfig) go.
    pub root: PathBuf,
    /// Where logs are exported before every delete (`<logs>/<cluster>/`).
    pub logs: PathBuf,
    /// Attempts of `kind create cluster` on transient failures.
    pub attempts: usize,
    /// `--wait` for the control plane.
    pub wait: Duration,
    /// The node image: kind's, pinned, or one assembled here.
    pub node: NodeSource,
    /// Environment of every `kind` and `docker` command (`DOCKER_HOST` of a private daemon).
    pub env: Vec<(String, String)>,
}

/// Where a kind cluster's node image comes from.
#[derive(Debug, Clone, Default)]
pub enum NodeSource {
    /// kind's image for the version, pinned by digest ([`NODE_IMAGES`]), pulled by Docker.
    #[default]
    Pinned,
    /// The image the toolchain assembles offline for the version
    /// ([`Toolchain::kind_node_image`]), loaded into a Docker daemon of the harness's own
    /// unless `DOCKER_HOST` names one; then as [`NodeSource::Offline`].
    Assemble {
        /// Builds the image.
        toolchain: Toolchain,
        /// The harness executable a private daemon runs as its OCI runtime.
        harness_binary: PathBuf,
    },
    /// An image already in the Docker daemon, assembled offline by the toolchain: no pull.
    /// It has no CNI: after create each node gets a bridge configuration ([`cni`]), and the
    /// harness provisions the volumes of its `standard` class.
    Offline {
        /// Its tag (no digest: a digest would make kind pull it).
        image: String,
        /// What its clusters' config needs beside the profile (merged at the top level).
        config: Value,
    },
}

/// Who made a kind cluster, kept in its directory so `gc` can remove what a killed run left.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KindOwner {
    /// The harness process that created it.
    pub owner: crate::process::ProcRecord,
    /// The kind binary it was created with.
    pub kind: PathBuf,
    /// Cluster name.
    pub name: String,
}

/// Makes kind clusters.
#[derive(Clone)]
pub struct KindProvider {
    binary: KindBinary,
    runner: Arc<dyn CommandRunner>,
    options: KindOptions,
    /// For [`NodeSource::Assemble`]: the Docker daemon the images go to (a private one unless
    /// `DOCKER_HOST` names one), started by the first cluster and torn down with the last
    /// clone of the provider.
    docker: Arc<tokio::sync::OnceCell<crate::cluster::docker::DockerHost>>,
    /// For [`NodeSource::Assemble`]: the node images already loaded into that daemon.
    loaded: Arc<tokio::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl std::fmt::Debug for KindProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindProvider")
            .field("binary", &self.binary)
            .field("root", &self.options.root)
            .finish()
    }
}

impl KindProvider {
    /// A provider running `kind` through `runner`.
    pub fn new(binary: KindBinary, runner: Arc<dyn CommandRunner>, options: KindOptions) -> Self {
        Self {
            binary,
            runner,
            options,
            docker: Default::default(),
            loaded: Default::default(),
        }
    }

    /// The commands for cluster `name` of `profile`, with `kind` as the program and the
    /// cluster directory `dir`.
    pub fn plan_with(
        kind: &Path,
        name: &str,
        profile: &Profile,
        dir: &Path,
        logs: &Path,
        wait: Duration,
    ) -> Result<KindPlan, KindError> {
        Self::plan_on(kind, name, profile, dir, logs, wait, &NodeSource::Pinned)
    }

    /// [`plan_with`](Self::plan_with) on the node image of `node`.
    pub fn plan_on(
        kind: &Path,
        name: &str,
        profile: &Profile,
        dir: &Path,
        logs: &Path,
        wait: Duration,
        node: &NodeSource,
    ) -> Result<KindPlan, KindError> {
        let config = config_yaml_with(profile, node)?;
        // Without a CNI no node turns Ready until the harness sets the network up after
        // create: kind must not wait for it.
        let wait = match node {
            NodeSource::Offline { .. } => Duration::ZERO,
            _ => wait,
        };
        let kubeconfig = dir.join("kubeconfig").display().to_string();
        let (export_logs, delete) = teardown_commands(kind, name, dir, logs);
        Ok(KindPlan {
            config,
            create: CommandLine::kind(
                kind,
                &[
                    "create",
                    "cluster",
                    "--name",
                    name,
                    "--config",
                    &dir.join("kind-config.yaml").display().to_string(),
                    "--kubeconfig",
                    &kubeconfig,
                    "--retain",
                    "--wait",
                    &format!("{}s", wait.as_secs()),
                ],
            ),
            export_logs,
            delete,
        })
    }

    /// The kind binary for `profile`: the given one, or the release its image belongs to.
    pub async fn kind_binary(&self, profile: &Profile) -> Result<PathBuf, KindError> {
        let image = node_image(profile.kubernetes)?;
        match &self.binary {
            KindBinary::Path(p) => Ok(p.clone()),
            KindBinary::Build(t) => Ok(t
                .go_install(
                    "sigs.k8s.io/kind",
                    "sigs.k8s.io/kind",
                    image.kind_release,
                    "kind",
                )
                .await?),
        }
    }

    /// The same provider on the node images of `node`.
    pub fn with_node(mut self, node: NodeSource) -> Self {
        self.options.node = node;
        self
    }

    /// Its settings.
    pub fn options(&self) -> &KindOptions {
        &self.options
    }

    /// The environment of its `kind` and `docker` commands: the options', and the Docker
    /// daemon's once one is started.
    fn env(&self) -> Vec<(String, String)> {
        let mut env = self.options.env.clone();
        if let Some(d) = self.docker.get() {
            env.extend(d.env());
        }
        env
    }

    /// The node image source for a cluster of `profile`: [`NodeSource::Assemble`] resolved
    /// (the Docker daemon started, the image built or found, loaded once), the others as
    /// they are.
    async fn node_source(&self, profile: &Profile) -> Result<NodeSource, KindError> {
        let NodeSource::Assemble {
            toolchain,
            harness_binary,
        } = &self.options.node
        else {
            return Ok(self.options.node.clone());
        };
        let docker = self
            .docker
            .get_or_try_init(|| async {
                let instances = std::fs::read_to_string(INOTIFY_INSTANCES)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                if let Some(warning) = instances.and_then(inotify_warning) {
                    eprintln!("warning: {warning}");
                }
                let dir = crate::cluster::docker::default_root()
                    .join(format!("{:08x}", rand::random::<u32>()));
                let mut options = crate::cluster::docker::DockerOptions::new(dir);
                options.logs = Some(self.options.logs.join("docker"));
                options.harness_binary = harness_binary.clone();
                crate::cluster::docker::docker_host_or_private(toolchain, &options).await
            })
            .await
            .map_err(|e| KindError::Docker(format!("{e:#}")))?;
        let image = toolchain
            .kind_node_image(profile.kubernetes)
            .await
            .map_err(|e| KindError::Docker(format!("{e:#}")))?;
        let mut loaded = self.loaded.lock().await;
        if !loaded.contains(&image.tag) {
            let docker_cmd = |args: &[&str]| CommandLine {
                program: PathBuf::from("docker"),
                args: args.iter().map(|a| a.to_string()).collect(),
                env: docker.env(),
            };
            let inspect = docker_cmd(&["image", "inspect", &image.tag]);
            let archive = image.archive.display().to_string();
            let load = docker_cmd(&["load", "--quiet", "--input", &archive]);
            let this = self.clone();
            tokio::task::spawn_blocking(move || {
                if this.run(&inspect)?.success {
                    return Ok(());
                }
                let out = this.run(&load)?;
                match out.success {
                    true => Ok(()),
                    false => Err(KindError::Command {
                        command: load.to_string(),
                        tail: tail(&out.stderr, 5),
                    }),
                }
            })
            .await
            .expect("docker load does not panic")?;
            loaded.insert(image.tag.clone());
        }
        let mut config = json!({});
        crate::toolchain::kind_node::kind_config_additions().merge_into(&mut config);
        Ok(NodeSource::Offline {
            image: image.tag,
            config,
        })
    }

    /// `docker <args>` in the environment of its kind commands (the private daemon's).
    fn docker<S: ToString>(&self, args: impl IntoIterator<Item = S>) -> CommandLine {
        CommandLine {
            program: PathBuf::from("docker"),
            args: args.into_iter().map(|a| a.to_string()).collect(),
            env: self.env(),
        }
    }

    fn run(&self, cmd: &CommandLine) -> Result<CommandOutput, KindError> {
        self.runner.run(cmd).map_err(|source| KindError::Spawn {
            command: cmd.to_string(),
            source,
        })
    }

    /// Exports logs, then deletes; both are always tried. Returns the failures.
    fn export_then_delete(&self, export_logs: &CommandLine, delete: &CommandLine) -> Vec<String> {
        let mut errors = vec![];
        for cmd in [export_logs, delete] {
            match self.run(cmd) {
                Ok(o) if o.success => {}
                Ok(o) => errors.push(format!("`{cmd}`: {}", tail(&o.stderr, 5))),
                Err(e) => errors.push(e.to_string()),
            }
        }
        errors
    }

    /// Removes the clusters whose creating process is gone (killed with SIGKILL, say): logs
    /// exported, then `kind delete cluster`, then the directory. Returns their names.
    pub fn gc(&self) -> Result<Vec<String>, KindError> {
        let mut removed = vec![];
        let mut errors = vec![];
        let Ok(entries) = std::fs::read_dir(&self.options.root) else {
            return Ok(removed);
        };
        for e in entries.flatten() {
            let dir = e.path();
            let Ok(text) = std::fs::read(dir.join("owner.json")) else {
                continue;
            };
            let Ok(owner) = serde_json::from_slice::<KindOwner>(&text) else {
                continue;
            };
            if owner.owner.alive() {
                continue;
            }
            let (export_logs, delete) =
                teardown_commands(&owner.kind, &owner.name, &dir, &self.options.logs);
            let failed = self.export_then_delete(&export_logs, &delete);
            if failed.is_empty() {
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    errors.push(format!("remove {}: {e}", dir.display()));
                }
                removed.push(owner.name);
            } else {
                errors.extend(failed);
            }
        }
        if !errors.is_empty() {
            return Err(KindError::Teardown {
                name: "gc".into(),
                errors,
            });
        }
        removed.sort();
        Ok(removed)
    }

    fn create_blocking(
        &self,
        kind: &Path,
        name: &str,
        profile: &Profile,
        node: &NodeSource,
    ) -> Result<KindCluster, KindError> {
        let dir = self.options.root.join(name);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let mut plan = Self::plan_on(
            kind,
            name,
            profile,
            &dir,
            &self.options.logs,
            self.options.wait,
            node,
        )?;
        let env = &self.env();
        for cmd in [&mut plan.create, &mut plan.export_logs, &mut plan.delete] {
            cmd.env.extend(env.iter().cloned());
        }
        let config_path = dir.join("kind-config.yaml");
        std::fs::write(&config_path, &plan.config).map_err(io_err(&config_path))?;
        let owner_path = dir.join("owner.json");
        let owner = KindOwner {
            owner: crate::process::ProcRecord::current("harness"),
            kind: kind.to_path_buf(),
            name: name.to_string(),
        };
        std::fs::write(
            &owner_path,
            serde_json::to_vec_pretty(&owner).expect("serializes"),
        )
        .map_err(io_err(&owner_path))?;
        let attempts = self.options.attempts.max(1);
        for attempt in 1..=attempts {
            let out = match self.run(&plan.create) {
                Ok(o) => o,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e);
                }
            };
            if out.success {
                return Ok(KindCluster {
                    name: name.to_string(),
                    dir: dir.clone(),
                    kubeconfig: dir.join("kubeconfig"),
                    plan,
                    provider: self.clone(),
                    done: false,
                    provisioner: None,
                    registry: None,
                });
            }
            let last = out.stderr;
            // --retain kept the nodes: their logs first, then the partial cluster goes.
            for e in self.export_then_delete(&plan.export_logs, &plan.delete) {
                tracing::warn!(cluster = name, "{e}");
            }
            let transient = TRANSIENT_FAILURES.iter().any(|t| last.contains(t));
            if !transient || attempt == attempts {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(KindError::Create {
                    name: name.into(),
                    attempts: attempt,
                    logs: self.options.logs.join(name),
                    tail: tail(&without_stacks(&last), 20),
                });
            }
            tracing::warn!(
                cluster = name,
                attempt,
                "kind create failed in a known transient way; retrying"
            );
        }
        unreachable!("the loop returns on the last attempt")
    }
}

impl ClusterProvider for KindProvider {
    type Cluster = KindCluster;
    type Error = KindError;

    async fn create(&self, name: &str, profile: &Profile) -> Result<KindCluster, KindError> {
        let kind = self.kind_binary(profile).await?;
        let mut node = self.node_source(profile).await?;
        // On the image the harness assembles, the nodes pull from a registry of their own.
        let registry = match &self.options.node {
            NodeSource::Assemble { toolchain, .. } => Some(toolchain.registry().await?),
            _ => None,
        };
        if let (Some(_), NodeSource::Offline { config, .. }) = (&registry, &mut node) {
            merge(
                config,
                &json!({"containerdConfigPatches": [registry::mirror_patch(name)]}),
            );
        }
        let this = self.clone();
        let nodes = profile.nodes.len() + profile.real_nodes.len() + 1;
        let (name, profile) = (name.to_string(), profile.clone());
        let offline = matches!(node, NodeSource::Offline { .. });
        let mut cluster = tokio::task::spawn_blocking(move || {
            this.create_blocking(&kind, &name, &profile, &node)
        })
        .await
        .expect("kind create does not panic")?;
        // On failure the cluster is dropped: deleted, its logs exported first.
        if offline {
            cluster.offline_setup(nodes).await?;
        }
        if let Some(binary) = registry {
            cluster.registry = Some(cluster.start_registry(&binary).await?);
        }
        Ok(cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_inotify_limit_is_named_with_the_fix() {
        let w = inotify_warning(128).unwrap();
        assert!(
            w.contains("is 128") && w.contains("max_user_instances=512"),
            "{w}"
        );
        assert_eq!(inotify_warning(8192), None);
    }
}
