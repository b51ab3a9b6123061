//! The embedded default provider: a real control plane as local processes. Start with
//! [`LocalProvider::create`], which returns a [`LocalCluster`].
//!
//! etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (the kubelet of every
//! fake node) and a storage provisioner run as children on free 127.0.0.1 ports, with TLS from a
//! per-cluster CA ([`pki`]). Components are described as data ([`components`]) and run by
//! [`crate::process`]; real nodes ([`node`]) pull their images from a local registry
//! ([`registry`]). A [`LocalCluster`] ends every process and removes its directory when destroyed
//! or dropped (also while a panic unwinds); [`gc`] cleans what a killed run left.
//!
//! kwok's server is the kubelet endpoint of the kwok nodes, so `kubectl exec` and `kubectl
//! logs` work on their pods: exec runs the command on the host as `nobody` in a scratch
//! directory of the cluster, logs print one line saying there is no container (see [`kwok`]).

pub mod components;
pub mod kwok;
pub mod node;
pub mod pki;
pub mod provisioner;
pub mod registry;
pub mod state;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};

use self::components::{Binaries, Inputs, Layout, Ports, RealBinaries};
use self::state::ClusterState;
use super::{Cluster, ClusterProvider, Profile, admin_client};
use crate::process::{ComponentSpec, OnReplace, ProcRecord, Process, ProcessError, Supervisor};
use crate::progress::Progress;
use crate::toolchain::{Toolchain, ToolchainError};
use crate::wait::{self, Check};

/// Errors of the local provider.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A binary could not be built.
    #[error("prepare the binaries")]
    Toolchain(#[from] ToolchainError),
    /// A cluster of that name exists.
    #[error(
        "create cluster `{name}`: a cluster of that name exists at {}; remove it with \
         `harness cluster down {name}` or pick another --name",
        dir.display()
    )]
    Exists {
        /// Name.
        name: String,
        /// Its directory.
        dir: PathBuf,
    },
    /// No cluster of that name.
    #[error("find cluster `{name}`: there is none (see `harness cluster list`)")]
    NotFound {
        /// Name.
        name: String,
    },
    /// A requested port is taken.
    #[error(
        "bind 127.0.0.1:{port} for {what}: the port is in use; choose another port or omit the \
         option to pick a free one"
    )]
    PortInUse {
        /// Port.
        port: u16,
        /// What wanted it.
        what: String,
    },
    /// The process backend failed: a process could not start, its log could not be written,
    /// or a supervisor's replacement of a process could not be recorded.
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// A component exited while the cluster was starting or running.
    #[error("{component} exited ({status}) ; last lines of {}:\n{tail}", log.display())]
    Exited {
        /// Component.
        component: String,
        /// Exit status.
        status: String,
        /// Its log.
        log: PathBuf,
        /// The log's tail.
        tail: String,
    },
    /// A readiness check did not pass in time.
    #[error("wait for {what}: not ready after {timeout:?}; last seen: {last}")]
    NotReady {
        /// What was waited for.
        what: String,
        /// The bound.
        timeout: Duration,
        /// The last observation.
        last: String,
    },
    /// A Kubernetes API call failed.
    #[error("{action}")]
    Kube {
        /// What was being done.
        action: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A wait on a component or object did not end well.
    #[error(transparent)]
    Wait(#[from] crate::wait::WaitError),
    /// The kubeconfig could not be loaded.
    #[error(transparent)]
    Kubeconfig(#[from] super::client::KubeconfigError),
    /// Certificate generation failed.
    #[error("generate certificates")]
    Pki(#[source] rcgen::Error),
    /// A state file is unreadable.
    #[error("read cluster state {}: {detail}", path.display())]
    BadState {
        /// Path.
        path: PathBuf,
        /// Parse error.
        detail: String,
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
    /// The host lacks something real nodes need.
    #[error("{what}; {fix}")]
    Host {
        /// What failed.
        what: String,
        /// How to fix it.
        fix: String,
    },
    /// The image registry failed.
    #[error("serve the images to real nodes: {0}")]
    Registry(String),
    /// Teardown met errors (all of them are listed).
    #[error("tear down cluster `{name}`: {}", errors.join("; "))]
    Teardown {
        /// Name.
        name: String,
        /// Every error met.
        errors: Vec<String>,
    },
}

impl LocalError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub(crate) fn pki(e: rcgen::Error) -> Self {
        Self::Pki(e)
    }
    fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

/// Options of the local provider.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Where cluster directories are made.
    pub clusters_root: PathBuf,
    /// The harness binary (runs the provisioner); defaults to the current executable.
    pub harness_binary: PathBuf,
    /// A fixed apiserver port instead of a free one.
    pub apiserver_port: Option<u16>,
    /// Bound for each readiness step.
    pub ready_timeout: Duration,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            clusters_root: state::default_clusters_root(),
            harness_binary: std::env::current_exe().unwrap_or_else(|_| "harness".into()),
            apiserver_port: None,
            ready_timeout: Duration::from_secs(90),
        }
    }
}

/// The local provider.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    toolchain: Toolchain,
    options: LocalOptions,
    progress: Progress,
}

/// A running local cluster. Dropping it ends its processes and removes its directory.
pub struct LocalCluster {
    state: ClusterState,
    layout: Layout,
    procs: Arc<Mutex<Vec<Process>>>,
    /// Processes started again by a [`Supervisor`]: (the one that exited, its replacement).
    replaced: Arc<Mutex<Vec<(ProcRecord, ProcRecord)>>>,
    client: Option<kube::Client>,
    keep_dir: bool,
    done: bool,
    /// False for a cluster taken over with [`LocalProvider::attach`]: dropping it ends only
    /// what this handle started.
    owned: bool,
    /// What starts kube-apiserver again after [`LocalCluster::restart_apiserver`] killed it
    /// (none for a cluster taken over with [`LocalProvider::attach`]).
    apiserver: Option<Supervisor>,
}

impl LocalProvider {
    /// A provider.
    pub fn new(toolchain: Toolchain, options: LocalOptions, progress: Progress) -> Self {
        Self {
            toolchain,
            options,
            progress,
        }
    }

    /// Its options.
    pub fn options(&self) -> &LocalOptions {
        &self.options
    }

    /// Builds (or finds) the binaries a profile needs.
    pub async fn binaries(&self, profile: &Profile) -> Result<Binaries, LocalError> {
        let (kube, kwok) = tokio::try_join!(
            self.toolchain.kubernetes(profile.kubernetes),
            self.toolchain.kwok()
        )?;
        let real = if profile.real_nodes.is_empty() {
            None
        } else {
            Some(self.real_node_binaries(profile).await?)
        };
        Ok(Binaries {
            etcd: kube.path("etcd"),
            apiserver: kube.path("kube-apiserver"),
            controller_manager: kube.path("kube-controller-manager"),
            scheduler: kube.path("kube-scheduler"),
            kwok,
            harness: self.options.harness_binary.clone(),
            real,
        })
    }

    /// The kubelet, and the host's containerd, runc and CNI plugins (installed with apt-get
    /// when the harness runs as root), after checking the kernel has what they need.
    async fn real_node_binaries(&self, profile: &Profile) -> Result<RealBinaries, LocalError> {
        node::probe::check_kernel()?;
        let mut found = vec![];
        for (package, dirs) in node::probe::PACKAGES {
            found.push(self.toolchain.debian_binary_in(*package, dirs).await?);
        }
        let (kubelet, registry, images) = tokio::try_join!(
            self.toolchain.kubelet(profile.kubernetes),
            self.toolchain.registry(),
            self.toolchain.images()
        )?;
        Ok(RealBinaries {
            kubelet,
            registry,
            images,
            tools: node::HostTools {
                containerd: found[0].clone(),
                runc: found[1].clone(),
                cni_bin_dir: found[2]
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| node::probe::CNI_BIN_DIR.into()),
            },
        })
    }

    /// The component specs a cluster would run (for `--dry-run`), with placeholder ports.
    pub fn plan(&self, name: &str, profile: &Profile, binaries: &Binaries) -> Vec<ComponentSpec> {
        let layout = Layout::new(self.options.clusters_root.join(name));
        let ports = Ports {
            etcd_client: 2379,
            etcd_peer: 2380,
            apiserver: self.options.apiserver_port.unwrap_or(6443),
            controller_manager: 10257,
            scheduler: 10259,
            kwok: 10247,
        };
        components::all(Inputs {
            layout: &layout,
            ports: &ports,
            profile,
            binaries,
        })
    }

    async fn start(&self, name: &str, profile: &Profile) -> Result<LocalCluster, LocalError> {
        let binaries = self.binaries(profile).await?;
        let dir = self.options.clusters_root.join(name);
        if dir.exists() {
            return Err(LocalError::Exists {
                name: name.into(),
                dir,
            });
        }
        let ports = allocate_ports(self.options.apiserver_port)?;
        std::fs::create_dir_all(&dir).map_err(|e| LocalError::io(&dir, e))?;
        let layout = Layout::new(&dir);
        let server = format!("https://127.0.0.1:{}", ports.apiserver);
        let mut cluster = LocalCluster {
            state: ClusterState {
                name: name.into(),
                profile: profile.clone(),
                owner: Some(ProcRecord::current("harness")),
                server: server.clone(),
                kubeconfig: layout.admin_kubeconfig(),
                processes: vec![],
                created: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                ready: false,
                real_nodes: vec![],
                registry_port: None,
            },
            layout: layout.clone(),
            procs: Arc::default(),
            replaced: Arc::default(),
            client: None,
            keep_dir: false,
            done: false,
            owned: true,
            apiserver: None,
        };
        // From here on, an error drops `cluster`, which tears everything down.
        cluster.save()?;
        let task = self.progress.task(&format!(
            "starting cluster `{name}` (Kubernetes {})",
            profile.kubernetes
        ));
        let started = Instant::now();
        let pki = pki::Pki::generate(&layout.pki())?;
        write_component_files(&layout, &pki, &server, &profile.pod_timing)?;
        let inputs = Inputs {
            layout: &layout,
            ports: &ports,
            profile,
            binaries: &binaries,
        };
        let bring_up = BringUp {
            inputs,
            ca: pki.ca_pem()?,
            timeout: self.options.ready_timeout,
            task: &task,
        };
        bring_up.run(&mut cluster).await?;
        cluster.state.ready = true;
        cluster.save()?;
        let real = match profile.real_nodes.len() {
            0 => String::new(),
            1 => " + 1 real node".into(),
            n => format!(" + {n} real nodes"),
        };
        task.finish(&format!(
            "cluster `{name}` ready in {:.1}s (Kubernetes {}, {} nodes{real}); KUBECONFIG={}",
            started.elapsed().as_secs_f64(),
            profile.kubernetes,
            profile.nodes.len(),
            layout.admin_kubeconfig().display()
        ));
        Ok(cluster)
    }

    /// Takes over a running cluster made by another harness process (e.g. `cluster up
    /// --detach`) to add components to it; call [`LocalCluster::detach`] to leave it running.
    pub async fn attach(&self, name: &str) -> Result<LocalCluster, LocalError> {
        let dir = self.options.clusters_root.join(name);
        let layout = Layout::new(&dir);
        let state = ClusterState::load(&layout.state())
            .map_err(|_| LocalError::NotFound { name: name.into() })?;
        if !state.ready || state.alive_processes().len() != state.processes.len() {
            return Err(LocalError::NotReady {
                what: format!("cluster `{name}`"),
                timeout: Duration::ZERO,
                last: format!(
                    "{} of {} processes alive",
                    state.alive_processes().len(),
                    state.processes.len()
                ),
            });
        }
        let client = admin_client(&layout.admin_kubeconfig()).await?;
        Ok(LocalCluster {
            state,
            layout,
            procs: Arc::default(),
            replaced: Arc::default(),
            client: Some(client),
            keep_dir: false,
            done: false,
            owned: false,
            apiserver: None,
        })
    }

    /// Every local cluster on disk, by name.
    pub fn list(&self) -> Vec<ClusterState> {
        let mut out = vec![];
        if let Ok(entries) = std::fs::read_dir(&self.options.clusters_root) {
            for e in entries.flatten() {
                if let Ok(s) = ClusterState::load(&e.path().join("cluster.json")) {
                    out.push(s);
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Ends the processes of cluster `name` and removes its directory.
    pub fn down(&self, name: &str) -> Result<(), LocalError> {
        let dir = self.options.clusters_root.join(name);
        if !dir.exists() {
            return Err(LocalError::NotFound { name: name.into() });
        }
        remove_recorded(name, &dir)
    }

    /// Removes what killed runs left: clusters whose owner is gone (or, when detached, whose
    /// processes are all gone), and directories without a readable state. Returns the names
    /// removed.
    pub fn gc(&self) -> Result<Vec<String>, LocalError> {
        let mut removed = vec![];
        let mut errors = vec![];
        let Ok(entries) = std::fs::read_dir(&self.options.clusters_root) else {
            return Ok(removed);
        };
        for e in entries.flatten() {
            let dir = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let stale = match ClusterState::load(&dir.join("cluster.json")) {
                Ok(s) if s.owner.is_some() => !s.owner_alive(),
                Ok(s) => s.alive_processes().is_empty(),
                Err(_) => true,
            };
            if stale {
                match remove_recorded(&name, &dir) {
                    Ok(()) => removed.push(name),
                    Err(e) => errors.push(e.to_string()),
                }
            }
        }
        if !errors.is_empty() {
            return Err(LocalError::Teardown {
                name: "gc".into(),
                errors,
            });
        }
        removed.sort();
        Ok(removed)
    }
}

fn remove_recorded(name: &str, dir: &Path) -> Result<(), LocalError> {
    let mut errors = vec![];
    if let Ok(s) = ClusterState::load(&dir.join("cluster.json")) {
        for p in s.processes.iter().rev() {
            p.terminate(Duration::from_secs(5));
        }
        for n in &s.real_nodes {
            errors.extend(n.cleanup());
        }
    }
    if let Err(e) = crate::toolchain::cache::make_writable_and_remove(dir) {
        errors.push(format!("remove {}: {e}", dir.display()));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(LocalError::Teardown {
            name: name.into(),
            errors,
        })
    }
}

impl ClusterProvider for LocalProvider {
    type Cluster = LocalCluster;
    type Error = LocalError;

    async fn create(&self, name: &str, profile: &Profile) -> Result<LocalCluster, LocalError> {
        use tracing::Instrument;
        let span = tracing::info_span!("cluster", cluster = name, kubernetes = %profile.kubernetes);
        self.start(name, profile).instrument(span).await
    }
}

/// Writes every component's kubeconfig (the admin's included), the kwok configuration and the
/// components' work directories.
fn write_component_files(
    layout: &Layout,
    pki: &pki::Pki,
    server: &str,
    timing: &crate::cluster::PodTiming,
) -> Result<(), LocalError> {
    std::fs::write(layout.admin_kubeconfig(), pki.kubeconfig(server, "admin")?)
        .map_err(|e| LocalError::io(&layout.admin_kubeconfig(), e))?;
    for stem in [
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "provisioner",
    ] {
        let path = layout.kubeconfig(stem);
        std::fs::create_dir_all(path.parent().expect("has parent"))
            .map_err(|e| LocalError::io(&path, e))?;
        std::fs::write(&path, pki.kubeconfig(server, stem)?)
            .map_err(|e| LocalError::io(&path, e))?;
    }
    std::fs::write(layout.kwok_config(), kwok::config(layout, timing))
        .map_err(|e| LocalError::io(&layout.kwok_config(), e))?;
    for c in ["kube-apiserver", "kwok"] {
        let w = layout.work(c);
        std::fs::create_dir_all(&w).map_err(|e| LocalError::io(&w, e))?;
    }
    let log = layout.kwok_pod_log();
    std::fs::write(&log, kwok::pod_log(time::OffsetDateTime::now_utc()))
        .map_err(|e| LocalError::io(&log, e))?;
    kwok_exec_dir(&layout.kwok_exec_dir())
}

/// Creates the scratch directory `kubectl exec` runs commands in on kwok nodes: owned by
/// `nobody` when the harness runs as root (so kwok can drop to it), closed to everyone else.
fn kwok_exec_dir(dir: &Path) -> Result<(), LocalError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| LocalError::io(dir, e))?;
    if nix::unistd::geteuid().is_root() {
        let id = kwok::EXEC_UID;
        nix::unistd::chown(
            dir,
            Some(nix::unistd::Uid::from_raw(id)),
            Some(nix::unistd::Gid::from_raw(id)),
        )
        .map_err(|e| LocalError::io(dir, e.into()))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| LocalError::io(dir, e))
}

/// The bring-up of a local cluster, in phases: etcd, the apiserver, the other components and
/// the nodes, then readiness. Each phase waits (bounded by `timeout`) before the next starts.
struct BringUp<'a> {
    inputs: Inputs<'a>,
    ca: String,
    timeout: Duration,
    task: &'a crate::progress::Task,
}

impl BringUp<'_> {
    async fn run(&self, cluster: &mut LocalCluster) -> Result<(), LocalError> {
        let client = self.control_plane(cluster).await?;
        self.components_and_nodes(cluster, &client).await?;
        self.real_nodes(cluster).await?;
        self.ready(cluster, &client).await
    }

    fn phase(&self, name: &str) {
        self.task.set(name);
        tracing::info!(phase = name, "cluster bring-up");
    }

    /// etcd, then kube-apiserver; returns the admin client once `/readyz` answers.
    async fn control_plane(&self, cluster: &mut LocalCluster) -> Result<kube::Client, LocalError> {
        let ports = self.inputs.ports;
        self.phase("etcd");
        cluster.spawn(&components::etcd(self.inputs))?;
        cluster
            .wait_until("etcd to accept connections", self.timeout, || async {
                std::net::TcpStream::connect(("127.0.0.1", ports.etcd_client))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .await?;
        self.phase("kube-apiserver");
        // Supervised, so that a perturbation can crash it and have it started again.
        cluster.apiserver =
            Some(cluster.spawn_supervised(&components::kube_apiserver(self.inputs))?);
        let client = admin_client(&self.inputs.layout.admin_kubeconfig()).await?;
        cluster.client = Some(client.clone());
        cluster
            .wait_until("kube-apiserver /readyz", self.timeout, || {
                let client = client.clone();
                async move { get_ok(&client, "/readyz").await }
            })
            .await?;
        Ok(client)
    }

    /// The controller manager, scheduler, kwok and the provisioner with its StorageClass; the
    /// profile's nodes.
    async fn components_and_nodes(
        &self,
        cluster: &mut LocalCluster,
        client: &kube::Client,
    ) -> Result<(), LocalError> {
        self.phase("controllers, scheduler, kwok, provisioner");
        for spec in [
            components::kube_controller_manager(self.inputs),
            components::kube_scheduler(self.inputs),
            components::kwok(self.inputs),
            components::provisioner(self.inputs),
        ] {
            cluster.spawn(&spec)?;
        }
        provisioner::create_default_storage_class(client)
            .await
            .map_err(LocalError::kube("create the default StorageClass"))?;
        let nodes: Api<Node> = Api::all(client.clone());
        for n in &self.inputs.profile.nodes {
            nodes
                .create(&PostParams::default(), &kwok::node(n))
                .await
                .map_err(LocalError::kube(format!("create node {}", n.name)))?;
        }
        Ok(())
    }

    /// Each real node: recorded first (so that teardown and `gc` find it), then its
    /// certificate and kubeconfig, directories, bridge and cgroups, its containerd (waited
    /// for) and its kubelet.
    async fn real_nodes(&self, cluster: &mut LocalCluster) -> Result<(), LocalError> {
        let Some(real) = &self.inputs.binaries.real else {
            return Ok(());
        };
        let layout = self.inputs.layout;
        let pki = pki::Pki::at(&layout.pki());
        self.phase("image registry");
        let port = free_port()?;
        let registry = registry::RegistryLayout::new(layout.dir.join("registry"));
        let tls = registry::RegistryTls::from_pki(&pki);
        std::fs::create_dir_all(registry.storage())
            .map_err(|e| LocalError::io(&registry.dir, e))?;
        std::fs::write(
            registry.config(),
            registry::config_yaml(&registry, port, &tls),
        )
        .map_err(|e| LocalError::io(&registry.config(), e))?;
        cluster.spawn(&registry::spec(&real.registry, &registry))?;
        let client = registry::RegistryClient::new(port, &self.ca)
            .map_err(|e| LocalError::Registry(e.to_string()))?;
        cluster
            .wait_until("the image registry", self.timeout, || {
                let client = client.clone();
                async move { client.ping().await.map_err(|e| e.to_string()) }
            })
            .await?;
        registry::push(&real.images, port, &self.ca)
            .await
            .map_err(|e| LocalError::Registry(format!("{e:#}")))?;
        cluster.state.registry_port = Some(port);
        cluster.save()?;
        let mirror = registry::Mirror {
            port,
            ca: pki.path("ca.crt"),
        };
        for spec in &self.inputs.profile.real_nodes {
            self.phase(&format!("real node {}", spec.name));
            let taken: Vec<[u8; 2]> = cluster.state.real_nodes.iter().map(|n| n.subnet).collect();
            let n = node::RealNode::plan(
                &layout.dir,
                spec,
                self.inputs.profile.real_node_taint,
                &taken,
                free_port()?,
            )?;
            cluster.state.real_nodes.push(n.clone());
            cluster.save()?;
            let stem = format!("node-{}", n.name);
            pki.issue_client(
                &stem,
                &format!("system:node:{}", n.name),
                Some("system:nodes"),
            )?;
            n.prepare(
                &real.tools,
                &pki.path("ca.crt"),
                &self.inputs.profile.kubernetes,
                &self.inputs.profile.feature_gates,
                &mirror,
            )?;
            let kc = n.dir.join("kubeconfig");
            std::fs::write(&kc, pki.kubeconfig(&cluster.state.server, &stem)?)
                .map_err(|e| LocalError::io(&kc, e))?;
            cluster.spawn(&n.containerd_spec(&real.tools))?;
            let socket = n.socket();
            cluster
                .wait_until(&format!("containerd of {}", n.name), self.timeout, || {
                    let socket = socket.clone();
                    async move {
                        std::os::unix::net::UnixStream::connect(&socket)
                            .map(|_| ())
                            .map_err(|e| format!("{}: {e}", socket.display()))
                    }
                })
                .await?;
            // Every kubelet of a host binds the same device-plugin socket, whatever its
            // `--root-dir` (kubelet's `pluginapi.KubeletSocket`): one that starts while another
            // removes the stale sockets there and binds fails with "address already in use".
            // So kubelets start one at a time host-wide, each holding the turn until it has
            // bound that socket (or exited: the readiness check below says so).
            let _turn = node::kubelet_turn().await?;
            let before = node::device_plugin_socket();
            cluster.spawn(&n.kubelet_spec(&real.kubelet))?;
            let _ = cluster
                .wait_until(
                    &format!("the kubelet of {} to bind its device-plugin socket", n.name),
                    Duration::from_secs(60),
                    || {
                        let now = node::device_plugin_socket();
                        async move {
                            match now.is_some() && now != before {
                                true => Ok(()),
                                false => Err("not bound yet".to_string()),
                            }
                        }
                    },
                )
                .await;
        }
        Ok(())
    }

    /// The components' health endpoints, every node Ready, the default service account.
    async fn ready(&self, cluster: &LocalCluster, client: &kube::Client) -> Result<(), LocalError> {
        let ports = self.inputs.ports;
        for (what, port) in [
            ("kube-controller-manager /healthz", ports.controller_manager),
            ("kube-scheduler /healthz", ports.scheduler),
        ] {
            let c = loopback_client(port, &self.ca)?;
            cluster
                .wait_until(what, self.timeout, || {
                    let c = c.clone();
                    async move { get_ok(&c, "/healthz").await }
                })
                .await?;
        }
        self.phase("nodes Ready");
        let nodes: Api<Node> = Api::all(client.clone());
        for n in self
            .inputs
            .profile
            .nodes
            .iter()
            .chain(&self.inputs.profile.real_nodes)
        {
            cluster
                .wait_node_ready(&nodes, &n.name, self.timeout)
                .await?;
        }
        self.phase("default service account");
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let what = "service account default/default";
        wait::until(
            &sas,
            "default",
            what,
            self.timeout,
            |sa: Option<ServiceAccount>| {
                Box::pin(std::future::ready(Check::when(sa.is_some(), || {
                    "absent".into()
                })))
            },
        )
        .await?;
        Ok(())
    }
}

fn node_ready(node: Option<&Node>) -> bool {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A free port on 127.0.0.1 (released before returning; bind it soon).
pub fn free_port() -> Result<u16, LocalError> {
    // Ports are picked below the kernel's ephemeral range, so that no outgoing connection
    // (of this or any process) can take one between now and the component binding it, and
    // never handed out twice by this process (clusters of parallel cells start at once).
    static HANDED_OUT: Mutex<std::collections::BTreeSet<u16>> =
        Mutex::new(std::collections::BTreeSet::new());
    static EPHEMERAL_LOW: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let ephemeral_low = *EPHEMERAL_LOW.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768)
    });
    let (low, high) = (10000u16, ephemeral_low.saturating_sub(1));
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    if high > low {
        for _ in 0..500 {
            let p = rand::random_range(low..=high);
            if handed.contains(&p) {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", p)).is_ok() {
                handed.insert(p);
                return Ok(p);
            }
        }
    }
    let l = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| LocalError::io(Path::new("127.0.0.1:0"), e))?;
    let p = l
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| LocalError::io(Path::new("127.0.0.1:0"), e))?;
    handed.insert(p);
    Ok(p)
}

fn allocate_ports(apiserver: Option<u16>) -> Result<Ports, LocalError> {
    // Below the ephemeral range and never handed out twice (see `free_port`): a port the
    // kernel picked (bind to port 0) is in the ephemeral range, where any outgoing connection
    // can take it before the component binds it (a scheduler once failed so).
    let free = free_port;
    let apiserver = match apiserver {
        Some(p) => {
            TcpListener::bind(("127.0.0.1", p)).map_err(|_| LocalError::PortInUse {
                port: p,
                what: "kube-apiserver".into(),
            })?;
            p
        }
        None => free()?,
    };
    Ok(Ports {
        etcd_client: free()?,
        etcd_peer: free()?,
        apiserver,
        controller_manager: free()?,
        scheduler: free()?,
        kwok: free()?,
    })
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .join("");
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap_or_default()
}

/// An unauthenticated client for a component's own loopback HTTPS port, trusting the
/// cluster CA.
fn loopback_client(port: u16, ca_pem: &str) -> Result<kube::Client, LocalError> {
    let url: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .expect("valid loopback uri");
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![pem_to_der(ca_pem)]);
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    kube::Client::try_from(config).map_err(|e| {
        LocalError::Kubeconfig(super::client::KubeconfigError {
            path: PathBuf::from(format!("127.0.0.1:{port}")),
            source: Box::new(e),
        })
    })
}

async fn get_ok(client: &kube::Client, path: &str) -> Result<(), String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .expect("valid request");
    client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl std::fmt::Debug for LocalCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCluster")
            .field("name", &self.state.name)
            .field("dir", &self.layout.dir)
            .finish_non_exhaustive()
    }
}

impl LocalCluster {
    fn save(&self) -> Result<(), LocalError> {
        let replaced = self.replaced.lock().expect("not poisoned");
        if replaced.is_empty() {
            return self.state.save(&self.layout.state());
        }
        let mut state = self.state.clone();
        for r in state.processes.iter_mut() {
            while let Some((_, new)) = replaced.iter().find(|(old, _)| old == r) {
                *r = new.clone();
            }
        }
        state.save(&self.layout.state())
    }

    fn spawn(&mut self, spec: &ComponentSpec) -> Result<(), LocalError> {
        self.spawn_component(spec).map(|_| ())
    }

    /// Starts one more process as part of the cluster (e.g. a controller manager): its log goes
    /// to `logs/<name>.log`, it is recorded in the cluster state, watched by
    /// [`check_alive`](Self::check_alive) and ended with the cluster.
    pub fn spawn_component(&mut self, spec: &ComponentSpec) -> Result<ProcRecord, LocalError> {
        let p = Process::spawn(spec, &self.layout.log(&spec.name))?;
        let record = p.record().clone();
        self.state.processes.push(record.clone());
        self.procs.lock().expect("not poisoned").push(p);
        self.save()?;
        Ok(record)
    }

    /// [`spawn_component`](Self::spawn_component), and a [`Supervisor`] that starts it
    /// again when it exits (as a kubelet restarts a pod's container).
    pub fn spawn_supervised(&mut self, spec: &ComponentSpec) -> Result<Supervisor, LocalError> {
        let record = self.spawn_component(spec)?;
        let replaced = self.replaced.clone();
        let state = self.layout.state();
        let on_replace: OnReplace = Arc::new(move |old, new| {
            replaced
                .lock()
                .expect("not poisoned")
                .push((old.clone(), new.clone()));
            if let Ok(mut s) = ClusterState::load(&state) {
                for r in s.processes.iter_mut().filter(|r| **r == *old) {
                    *r = new.clone();
                }
                s.save(&state).map_err(ProcessError::record)?;
            }
            Ok(())
        });
        Ok(Supervisor::new(
            spec.clone(),
            self.layout.log(&spec.name),
            self.procs.clone(),
            on_replace,
            record,
        ))
    }

    /// Ends one process started by [`spawn_component`](Self::spawn_component) and forgets it
    /// (for tests that stop a component on purpose, use [`ProcRecord::terminate`] instead).
    pub fn stop_component(&mut self, name: &str) -> Result<(), LocalError> {
        let mut procs = self.procs.lock().expect("not poisoned");
        for p in procs.iter_mut().filter(|p| p.name == name) {
            p.stop(Duration::from_secs(5));
        }
        procs.retain(|p| p.name != name);
        drop(procs);
        self.state.processes.retain(|p| p.name != name);
        self.save()
    }

    /// The apiserver URL.
    pub fn server(&self) -> &str {
        &self.state.server
    }

    /// The cluster CA certificate (PEM).
    pub fn ca_pem(&self) -> Result<String, LocalError> {
        pki::Pki::at(&self.layout.pki()).ca_pem()
    }

    /// The first component that has exited, as an error with its log tail.
    pub fn check_alive(&self) -> Result<(), LocalError> {
        let mut procs = self.procs.lock().expect("not poisoned");
        for p in procs.iter_mut() {
            if let Some(status) = p.exited() {
                return Err(LocalError::Exited {
                    component: p.name.clone(),
                    status,
                    log: p.log.clone(),
                    tail: p.log_tail(20),
                });
            }
        }
        Ok(())
    }

    /// Kills kube-apiserver at once (a crash) and starts it again with the same flags, etcd
    /// and certificates, as a static pod's restart would: every client's watches end and its
    /// requests fail until the new one serves. Returns once `/readyz` answers again, with how
    /// long it took; `None` for a cluster taken over with [`LocalProvider::attach`] (this
    /// handle did not start it, so nothing would start it again).
    pub async fn restart_apiserver(&self) -> Result<Option<Duration>, LocalError> {
        let Some(supervisor) = &self.apiserver else {
            return Ok(None);
        };
        let started = Instant::now();
        supervisor.current().kill();
        // A killed Go process is a zombie while its other threads exit: started again once
        // it has been reaped.
        let deadline = Instant::now() + Duration::from_secs(10);
        while supervisor.revive()?.is_none() {
            if Instant::now() > deadline {
                return Err(LocalError::NotReady {
                    what: "kube-apiserver to end after it was killed".into(),
                    timeout: Duration::from_secs(10),
                    last: format!("pid {} still running", supervisor.current().pid),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = self.client();
        self.wait_until(
            "kube-apiserver /readyz after its restart",
            Duration::from_secs(120),
            || {
                let client = client.clone();
                async move { get_ok(&client, "/readyz").await }
            },
        )
        .await?;
        Ok(Some(started.elapsed()))
    }

    /// Makes node `name`'s kubelet go silent, as a node that lost power or its network: kwok
    /// stops playing its kubelet (the node loses kwok's label), so its lease is no longer
    /// renewed and, once the grace period of the node controller of kube-controller-manager
    /// has passed (50 s by default), that controller marks it NotReady, taints it and marks
    /// its pods not ready. Returns once the node is NotReady, with how long that took; `None`
    /// when it is not a kwok node (a real node's kubelet is left alone).
    /// [`resume_node`](Self::resume_node) brings it back.
    pub async fn silence_node(&self, name: &str) -> Result<Option<Duration>, LocalError> {
        let nodes: Api<Node> = Api::all(self.client());
        let node = nodes
            .get(name)
            .await
            .map_err(LocalError::kube(format!("get node {name}")))?;
        let (key, value) = components::KWOK_NODE_LABEL;
        let labels = node.metadata.labels.unwrap_or_default();
        if labels.get(key).map(String::as_str) != Some(value) {
            return Ok(None);
        }
        let started = Instant::now();
        self.kwok_label(name, false).await?;
        let what = format!("node {name} NotReady once its kubelet went silent");
        let r = wait::until(
            &nodes,
            name,
            &what,
            Duration::from_secs(150),
            |node: Option<Node>| {
                Box::pin(std::future::ready(Check::when(
                    !node_ready(node.as_ref()),
                    || "still Ready".into(),
                )))
            },
        )
        .await;
        if let Err(e) = r {
            // Not left silent for the next one.
            let _ = self.resume_node(name).await;
            return Err(e.into());
        }
        Ok(Some(started.elapsed()))
    }

    /// Has kwok play node `name`'s kubelet again after [`silence_node`](Self::silence_node):
    /// returns once the node is Ready.
    pub async fn resume_node(&self, name: &str) -> Result<(), LocalError> {
        self.kwok_label(name, true).await?;
        let nodes: Api<Node> = Api::all(self.client());
        self.wait_node_ready(&nodes, name, Duration::from_secs(120))
            .await
    }

    /// Puts kwok's label on node `name` (kwok plays its kubelet), or takes it off.
    async fn kwok_label(&self, name: &str, on: bool) -> Result<(), LocalError> {
        let (key, value) = components::KWOK_NODE_LABEL;
        let patch = serde_json::json!({"metadata": {"labels": {key: on.then_some(value)}}});
        let nodes: Api<Node> = Api::all(self.client());
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(LocalError::kube(format!(
                "set kwok's label on node {name} to {on}"
            )))
    }

    /// Waits until `probe` succeeds (asked every 100 ms), failing at once when a component
    /// exits (with its log) and, on timeout, with the last error the probe saw.
    async fn wait_until<F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: F,
    ) -> Result<(), LocalError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        wait::poll(what, timeout, Duration::from_millis(100), || {
            let alive = self.check_alive();
            let probed = probe();
            async move {
                match alive {
                    Err(e) => Check::Failed(e.to_string()),
                    Ok(()) => Check::from_result(probed.await),
                }
            }
        })
        .await
        .map_err(LocalError::from)
    }

    /// Waits until node `name` is Ready (watched), failing at once when a component exits.
    async fn wait_node_ready(
        &self,
        nodes: &Api<Node>,
        name: &str,
        timeout: Duration,
    ) -> Result<(), LocalError> {
        let what = format!("node {name} Ready");
        wait::until(nodes, name, &what, timeout, |node: Option<Node>| {
            let alive = self.check_alive().map_err(|e| e.to_string());
            Box::pin(async move {
                if let Err(e) = alive {
                    return Check::Failed(e);
                }
                let conditions: Vec<String> = node
                    .as_ref()
                    .and_then(|n| n.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .map(|cs| {
                        cs.iter()
                            .map(|c| format!("{}={}", c.type_, c.status))
                            .collect()
                    })
                    .unwrap_or_default();
                Check::when(node_ready(node.as_ref()), || match node {
                    None => "no such node".into(),
                    Some(_) => format!("conditions {conditions:?}"),
                })
            })
        })
        .await
        .map(|_| ())
        .map_err(LocalError::from)
    }

    /// An admin client.
    pub fn client(&self) -> kube::Client {
        self.client.clone().expect("a started cluster has a client")
    }

    /// Pushes `images` to the image registry its real nodes pull from (by repository path and
    /// tag, which is how the nodes ask for any host's images); an error when it has no real
    /// node.
    pub async fn push_images(
        &self,
        images: &[crate::toolchain::BuiltImage],
    ) -> Result<(), LocalError> {
        let port = self.state.registry_port.ok_or_else(|| {
            LocalError::Registry(format!(
                "cluster {} has no image registry: only a cluster with real nodes has one",
                self.state.name
            ))
        })?;
        registry::push(images, port, &self.ca_pem()?)
            .await
            .map_err(|e| LocalError::Registry(format!("{e:#}")))
    }

    /// Its directory layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Its recorded state.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// Keep the directory (logs, certificates) after teardown.
    pub fn keep_dir(&mut self, keep: bool) {
        self.keep_dir = keep;
    }

    /// Leaves the cluster running after this process exits; `harness cluster down` ends it.
    pub fn detach(mut self) -> Result<ClusterState, LocalError> {
        if self.owned {
            self.state.owner = None;
        }
        self.save()?;
        self.done = true;
        Ok(self.state.clone())
    }

    fn teardown(&mut self) -> Result<(), LocalError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut errors = vec![];
        if !self.owned {
            let mut procs = match self.procs.lock() {
                Ok(p) => p,
                Err(poisoned) => poisoned.into_inner(),
            };
            let mine: Vec<ProcRecord> = procs.iter().map(|p| p.record().clone()).collect();
            for p in procs.iter_mut().rev() {
                p.stop(Duration::from_secs(5));
            }
            // No supervisor starts them again.
            procs.clear();
            drop(procs);
            if let Ok(mut on_disk) = ClusterState::load(&self.layout.state()) {
                on_disk.processes.retain(|p| !mine.contains(p));
                on_disk.save(&self.layout.state())?;
            }
            return Ok(());
        }
        {
            let mut procs = match self.procs.lock() {
                Ok(p) => p,
                Err(poisoned) => poisoned.into_inner(),
            };
            for p in procs.iter_mut().rev() {
                p.stop(Duration::from_secs(5));
                if p.record().alive() {
                    errors.push(format!(
                        "{} (pid {}) is still alive",
                        p.name,
                        p.record().pid
                    ));
                }
            }
            // No supervisor starts them again.
            procs.clear();
        }
        for n in &self.state.real_nodes {
            errors.extend(n.cleanup());
        }
        if !self.keep_dir {
            if let Err(e) = crate::toolchain::cache::make_writable_and_remove(&self.layout.dir) {
                errors.push(format!("remove {}: {e}", self.layout.dir.display()));
            }
        } else {
            self.state.owner = None;
            self.state.processes.clear();
            let _ = self.save();
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(LocalError::Teardown {
                name: self.state.name.clone(),
                errors,
            })
        }
    }
}

impl Cluster for LocalCluster {
    type Error = LocalError;

    fn name(&self) -> &str {
        &self.state.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.state.kubeconfig
    }

    fn export_logs(&self, dest: &Path) -> Result<(), LocalError> {
        std::fs::create_dir_all(dest).map_err(|e| LocalError::io(dest, e))?;
        let logs = self.layout.logs();
        let mut errors = vec![];
        if let Ok(entries) = std::fs::read_dir(&logs) {
            for e in entries.flatten() {
                let to = dest.join(e.file_name());
                if let Err(err) = std::fs::copy(e.path(), &to) {
                    errors.push(format!("copy {}: {err}", e.path().display()));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(LocalError::Teardown {
                name: self.state.name.clone(),
                errors,
            })
        }
    }

    fn destroy(mut self) -> Result<(), LocalError> {
        self.teardown()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("warning: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_ports_are_distinct_and_below_the_ephemeral_range() {
        let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..20 {
            let p = allocate_ports(None).unwrap();
            for port in [
                p.etcd_client,
                p.etcd_peer,
                p.apiserver,
                p.controller_manager,
                p.scheduler,
                p.kwok,
            ] {
                assert!(port < low, "{port} is in the ephemeral range from {low}");
                assert!(seen.insert(port), "{port} handed out twice");
            }
        }
    }
}
