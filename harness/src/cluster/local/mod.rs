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

mod bring_up;
pub mod components;
pub mod kwok;
pub mod node;
pub mod pki;
mod ports;
pub mod provisioner;
pub mod registry;
mod running;
pub mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Node;

use self::bring_up::BringUp;
use self::components::{Binaries, Inputs, Layout, Ports, RealBinaries};
use self::ports::allocate_ports;
pub use self::ports::free_port;
use self::state::ClusterState;
use super::{ClusterProvider, Profile, admin_client};
use crate::process::{ComponentSpec, ProcRecord, Process, ProcessError, Supervisor};
use crate::progress::Progress;
use crate::toolchain::{Toolchain, ToolchainError};

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

pub(super) fn node_ready(node: Option<&Node>) -> bool {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(super) async fn get_ok(client: &kube::Client, path: &str) -> Result<(), String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .expect("valid request");
    client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}
