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

pub mod cni;
pub mod registry;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Cluster, ClusterProvider, Profile};
use crate::toolchain::{KubeVersion, Toolchain, ToolchainError};

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
         NODE_IMAGES in harness/src/cluster/kind/mod.rs with the digest from that kind release's notes)"
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

/// What kube-proxy's iptables rules say of the apiserver's Service (its comment).
const KUBERNETES_SERVICE_RULE: &str = "default/kubernetes:https";

/// The kubeadm patch that registers a kind worker with the real nodes' taint (kind's node
/// config has labels but no taints).
pub const REAL_NODE_JOIN_PATCH: &str = "kind: JoinConfiguration\nnodeRegistration:\n  taints:\n  - key: harness.io/real-node\n    value: \"true\"\n    effect: NoSchedule\n";

/// Merges `extra` into `c`: objects key by key, arrays appended, anything else replaced.
fn merge(c: &mut Value, extra: &Value) {
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

/// One command: program and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it (`DOCKER_HOST` of a private daemon).
    pub env: Vec<(String, String)>,
}

impl std::fmt::Display for CommandLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (k, v) in &self.env {
            write!(f, "{k}={v} ")?;
        }
        write!(f, "{}", self.program.display())?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// What a finished command left.
#[derive(Debug, Clone, Default)]
pub struct CommandOutput {
    /// Exit status 0.
    pub success: bool,
    /// Its standard output (kept out of the run's progress: `kind export logs` and
    /// `docker load` print there).
    pub stdout: String,
    /// Its standard error (kind reports there).
    pub stderr: String,
}

/// Runs commands; the real one starts processes, tests use a fake.
pub trait CommandRunner: Send + Sync {
    /// Runs `cmd` to completion.
    fn run(&self, cmd: &CommandLine) -> std::io::Result<CommandOutput>;
}

/// Runs commands as child processes, their output captured.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

impl CommandRunner for ProcessRunner {
    fn run(&self, cmd: &CommandLine) -> std::io::Result<CommandOutput> {
        let out = std::process::Command::new(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .output()?;
        Ok(CommandOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
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

/// The commands for one cluster, in the order the provider runs them on success.
#[derive(Debug, Clone)]
pub struct KindPlan {
    /// The config file's contents.
    pub config: String,
    /// `kind create cluster ...`
    pub create: CommandLine,
    /// `kind export logs ...`
    pub export_logs: CommandLine,
    /// `kind delete cluster ...`
    pub delete: CommandLine,
}

impl CommandLine {
    fn kind(kind: &Path, args: &[&str]) -> Self {
        Self {
            program: kind.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![],
        }
    }

    /// The same command with `env` set.
    pub fn with_env(mut self, env: &[(String, String)]) -> Self {
        self.env.extend(env.iter().cloned());
        self
    }
}

/// `kind export logs` and `kind delete cluster` for cluster `name` in `dir`.
fn teardown_commands(
    kind: &Path,
    name: &str,
    dir: &Path,
    logs: &Path,
) -> (CommandLine, CommandLine) {
    let kubeconfig = dir.join("kubeconfig").display().to_string();
    (
        CommandLine::kind(
            kind,
            &[
                "export",
                "logs",
                &logs.join(name).display().to_string(),
                "--name",
                name,
            ],
        ),
        CommandLine::kind(
            kind,
            &[
                "delete",
                "cluster",
                "--name",
                name,
                "--kubeconfig",
                &kubeconfig,
            ],
        ),
    )
}

impl std::fmt::Display for KindPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "# kind-config.yaml")?;
        write!(f, "{}", self.config)?;
        writeln!(
            f,
            "# commands (export logs and delete also run after a failed create)"
        )?;
        writeln!(f, "{}", self.create)?;
        writeln!(f, "{}", self.export_logs)?;
        writeln!(f, "{}", self.delete)
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

/// `s` without the frames of Go stack traces (a function line, then its tab-indented file
/// line), which would fill a tail with no cause in it.
fn without_stacks(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let frame = |i: usize| {
        let l = lines[i];
        l.starts_with('\t')
            || (!l.contains(' ') && lines.get(i + 1).is_some_and(|next| next.starts_with('\t')))
    };
    (0..lines.len())
        .filter(|&i| !frame(i))
        .map(|i| lines[i])
        .collect::<Vec<_>>()
        .join("\n")
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
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

/// Where the volumes of the `standard` class go on a node of an offline image.
pub const OFFLINE_VOLUMES: &str = "/var/lib/harness-volumes";

impl KindCluster {
    /// What kindnetd and local-path-provisioner would do on a kind node image, for a cluster
    /// on an offline image that has neither: once every one of the `nodes` nodes has its pod
    /// range, each gets its pod network by `docker exec` ([`cni::commands`]); then the nodes
    /// must turn Ready, and the harness's provisioner serves the `standard` class.
    async fn offline_setup(&mut self, nodes: usize) -> Result<(), KindError> {
        use k8s_openapi::api::core::v1::Node;
        let fail = |detail: String| KindError::Network {
            name: self.name.clone(),
            detail,
        };
        let client = self.client().await.map_err(|e| fail(format!("{e:#}")))?;
        let api: kube::Api<Node> = kube::Api::all(client.clone());
        let list = |api: kube::Api<Node>| async move {
            api.list(&Default::default())
                .await
                .map(|l| serde_json::to_value(l).expect("serializes"))
                .map_err(|e| format!("list nodes: {e}"))
        };
        crate::wait::poll(
            "every node to have its pod range",
            Duration::from_secs(300),
            Duration::from_secs(1),
            || {
                let api = api.clone();
                async move {
                    match list(api).await.and_then(|l| cni::nodes(&l)) {
                        Ok(n) if n.len() == nodes => crate::wait::Check::Met,
                        Ok(n) => crate::wait::Check::Pending(format!(
                            "{} of {nodes} nodes registered",
                            n.len()
                        )),
                        Err(e) => crate::wait::Check::Pending(e),
                    }
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        // Pod ranges, once given, do not change.
        let found = list(api.clone())
            .await
            .and_then(|l| cni::nodes(&l))
            .map_err(fail)?;
        for node in &found {
            for cmd in cni::commands(node, &found) {
                let line = self.provider.docker(
                    ["exec".to_string(), node.name.clone()]
                        .into_iter()
                        .chain(cmd),
                );
                let provider = self.provider.clone();
                let out =
                    tokio::task::spawn_blocking(move || provider.run(&line).map(|o| (line, o)))
                        .await
                        .expect("docker exec does not panic")?;
                if !out.1.success {
                    return Err(fail(format!("`{}`: {}", out.0, tail(&out.1.stderr, 5))));
                }
            }
        }
        crate::wait::poll(
            "every node Ready",
            Duration::from_secs(300),
            Duration::from_secs(1),
            || {
                let api = api.clone();
                async move {
                    let Ok(l) = api.list(&Default::default()).await else {
                        return crate::wait::Check::Pending("list nodes".into());
                    };
                    let not_ready: Vec<String> = l
                        .items
                        .iter()
                        .filter(|n| {
                            !n.status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| {
                                    c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                })
                        })
                        .filter_map(|n| n.metadata.name.clone())
                        .collect();
                    crate::wait::Check::when(not_ready.is_empty(), || {
                        format!("not Ready: {}", not_ready.join(", "))
                    })
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        // A pod that starts before its node's kube-proxy has written the Service rules cannot
        // reach the apiserver by its Service address (a controller then exits and restarts):
        // ready means every node has the rules of the `kubernetes` Service.
        let names: Vec<String> = found.iter().map(|n| n.name.clone()).collect();
        crate::wait::poll(
            "every node's kube-proxy serves the kubernetes Service",
            Duration::from_secs(300),
            Duration::from_secs(1),
            || {
                let (names, provider) = (names.clone(), self.provider.clone());
                async move {
                    let missing = tokio::task::spawn_blocking(move || {
                        names
                            .into_iter()
                            .filter(|node| {
                                let line =
                                    provider.docker(["exec", node, "iptables-save", "-t", "nat"]);
                                !provider.run(&line).is_ok_and(|o| {
                                    o.success && o.stdout.contains(KUBERNETES_SERVICE_RULE)
                                })
                            })
                            .collect::<Vec<_>>()
                    })
                    .await
                    .unwrap_or_default();
                    crate::wait::Check::when(missing.is_empty(), || {
                        format!("no Service rules yet on {}", missing.join(", "))
                    })
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        let provisioner = tokio::spawn(async move {
            if let Err(e) =
                super::local::provisioner::run(client, PathBuf::from(OFFLINE_VOLUMES)).await
            {
                tracing::warn!("provisioner: {e:#}");
            }
        });
        self.provisioner = Some(provisioner.abort_handle());
        Ok(())
    }
}

/// A kind cluster the harness created; deleted (logs exported first) when destroyed or
/// dropped.
pub struct KindCluster {
    name: String,
    dir: PathBuf,
    kubeconfig: PathBuf,
    plan: KindPlan,
    provider: KindProvider,
    done: bool,
    /// The volume provisioner of a cluster on an offline image, stopped at teardown.
    provisioner: Option<tokio::task::AbortHandle>,
    /// The nodes' image registry ([`registry`]), in the control-plane node.
    registry: Option<std::net::SocketAddr>,
}

impl std::fmt::Debug for KindCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCluster")
            .field("name", &self.name)
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

impl KindCluster {
    /// The commands this cluster was made with and will be removed with.
    pub fn plan(&self) -> &KindPlan {
        &self.plan
    }

    /// The environment a `docker` command needs to reach the daemon the cluster's nodes run
    /// in (`DOCKER_HOST` of a private daemon; nothing for the user's default one).
    pub fn docker_env(&self) -> Vec<(String, String)> {
        self.provider.env()
    }

    /// Loads an image archive (docker or OCI) into every node, as `kind load image-archive`.
    pub fn load_image_archive(&self, archive: &Path) -> Result<(), KindError> {
        let cmd = CommandLine {
            program: self.plan.create.program.clone(),
            args: vec![
                "load".into(),
                "image-archive".into(),
                archive.display().to_string(),
                "--name".into(),
                self.name.clone(),
            ],
            env: self.provider.env(),
        };
        let out = self.provider.run(&cmd)?;
        match out.success {
            true => Ok(()),
            false => Err(KindError::Command {
                command: cmd.to_string(),
                tail: tail(&out.stderr, 5),
            }),
        }
    }

    /// A client with the cluster's admin kubeconfig.
    pub async fn client(&self) -> Result<kube::Client, super::client::KubeconfigError> {
        super::admin_client(&self.kubeconfig).await
    }

    fn teardown(&mut self) -> Result<(), KindError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        if let Some(p) = self.provisioner.take() {
            p.abort();
        }
        let mut errors = self
            .provider
            .export_then_delete(&self.plan.export_logs, &self.plan.delete);
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            errors.push(format!("remove {}: {e}", self.dir.display()));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(KindError::Teardown {
                name: self.name.clone(),
                errors,
            })
        }
    }
}

impl Cluster for KindCluster {
    type Error = KindError;

    fn name(&self) -> &str {
        &self.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn export_logs(&self, dest: &Path) -> Result<(), KindError> {
        let mut cmd = self.plan.export_logs.clone();
        cmd.args[2] = dest.display().to_string();
        let out = self.provider.run(&cmd)?;
        if out.success {
            Ok(())
        } else {
            Err(KindError::Command {
                command: cmd.to_string(),
                tail: tail(&out.stderr, 5),
            })
        }
    }

    fn destroy(mut self) -> Result<(), KindError> {
        self.teardown()
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("warning: {e}");
        }
    }
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
            nodes[2]["labels"][super::super::ZONE_LABEL],
            json!("zone-b")
        );
        let yaml = config_yaml(&p).unwrap();
        let back: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, c, "the YAML reads back as the config");
    }

    #[test]
    fn a_low_inotify_limit_is_named_with_the_fix() {
        let w = inotify_warning(128).unwrap();
        assert!(
            w.contains("is 128") && w.contains("max_user_instances=512"),
            "{w}"
        );
        assert_eq!(inotify_warning(8192), None);
    }

    #[test]
    fn a_failure_tail_leaves_out_go_stack_frames() {
        let out = "I0 starting\nerror execution phase kubelet-start: timed out\n\
                   k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run\n\
                   \tk8s.io/kubernetes@v1.32.5/cmd/kubeadm/app/cmd/phases/workflow/runner.go:234\n\
                   main.main\n\tk8s.io/kubernetes@v1.32.5/cmd/kubeadm/kubeadm.go:25\n";
        assert_eq!(
            without_stacks(out),
            "I0 starting\nerror execution phase kubelet-start: timed out"
        );
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
