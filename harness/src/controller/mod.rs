//! Controllers under test. Start with the [`Controller`] trait: what a controller needs built,
//! how it installs into a cluster of any provider (a [`Host`]), and its feature gates per
//! version. An install yields an [`Installation`] of running [`Component`]s, each checked after
//! every scenario for exits, restarts and RBAC denials. A [`ControllerRef`]
//! (`openkruise@v1.9.0`) names one on the command line; [`ControllerRef::controller`] gives its
//! implementation. [`openkruise`] is the first: its manager, built and installed as it ships.

pub mod manifests;
pub mod openkruise;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use futures::future::BoxFuture;

use crate::cluster::any::AnyCluster;
use crate::cluster::local::{LocalCluster, LocalError};
use crate::cluster::proxy::{ProxyError, ProxyHandle};
use crate::process::{ProcRecord, Supervisor, log_tail};
use crate::toolchain::{GoEnv, Toolchain, ToolchainError};

/// Where a controller's components can run: what the cluster offers.
pub enum Host<'a> {
    /// Beside a local control plane, as local processes (the local provider).
    Processes(&'a mut LocalCluster),
    /// As pods of the cluster, from release images (kind, k3s).
    Pods(kube::Client),
    /// A cluster the harness did not make (existing): nothing is installed, the controller
    /// must already run there at the version asked for.
    Preinstalled(kube::Client),
}

impl<'a> Host<'a> {
    /// What `cluster` offers.
    pub async fn of(cluster: &'a mut AnyCluster) -> Result<Host<'a>, ControllerError> {
        let client = |e: anyhow::Error| ControllerError::NotInstalled {
            detail: format!("connect to the cluster: {e:#}"),
        };
        Ok(match cluster {
            AnyCluster::Local(c) => Host::Processes(c),
            AnyCluster::Existing(_) => Host::Preinstalled(cluster.client().await.map_err(client)?),
            other => Host::Pods(other.client().await.map_err(client)?),
        })
    }
}

/// A controller under test at one version. Implementations are cheap values; building and
/// installing happen in [`Controller::prepare`] and [`Controller::install`].
pub trait Controller: fmt::Debug + Send + Sync {
    /// What it is: name, version, checkout.
    fn reference(&self) -> &ControllerRef;

    /// Whether this version has controller feature gate `gate` (passing a gate a version does
    /// not know may stop it from starting, so the planner leaves such gates out).
    fn has_gate(&self, gate: &str) -> bool;

    /// The API groups of the resources it serves (its CRDs'), for field coverage.
    fn api_groups(&self) -> &'static [&'static str];

    /// Its CustomResourceDefinitions at this version, read from its sources (a download, no
    /// build), as JSON.
    fn crds<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, ControllerError>>;

    /// Builds (or finds in the cache) everything an install needs, so a matrix can build
    /// ahead of its cells.
    fn prepare<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<(), ControllerError>>;

    /// Installs into `host` with `gates` and waits until ready. Installing over an earlier
    /// install of the same controller replaces it: that is an upgrade (the caller stops the
    /// earlier components first).
    fn install<'a>(
        &'a self,
        host: Host<'a>,
        toolchain: &'a Toolchain,
        gates: &'a BTreeMap<String, bool>,
    ) -> BoxFuture<'a, Result<Installation, ControllerError>>;

    /// The images its in-cluster install runs, built here under the names its manifests give
    /// them, for nodes that pull only from the harness's registry
    /// ([`AnyCluster::pulls_only_from_harness`]: kind's). By default none: the install pulls
    /// what it names.
    fn images<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<Vec<crate::toolchain::BuiltImage>, ControllerError>> {
        let _ = toolchain;
        Box::pin(async { Ok(vec![]) })
    }

    /// The namespace its components run in (where it keeps what it owns cluster-wide, e.g.
    /// revisions of cluster-scoped objects).
    fn namespace(&self) -> &'static str;

    /// The Deployment its manager ships as (namespace, name), for reproduction scripts that
    /// restart it with `kubectl` on a cluster where it runs as pods; `None` if it ships none.
    fn deployment(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// The kinds only its node-level components serve (they act on the node: pull images,
    /// restart containers, probe): on a cell without real nodes, objects of these kinds are
    /// never served.
    fn node_kinds(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its own end-to-end suite, when it ships one the harness can run
    /// (`run --upstream-e2e`); `None` by default.
    fn e2e_suite(&self) -> Option<Box<dyn E2eSuite>> {
        None
    }

    /// The cached builds an install needs (`real_nodes`: with its node components), for the
    /// plan of cold builds a run says before it starts. By default it names none.
    fn builds(&self, real_nodes: bool) -> Vec<crate::toolchain::BuildKey> {
        let _ = real_nodes;
        vec![]
    }

    /// Builds (or finds cached) what `harness toolchain build` asks of it: its manager always,
    /// and the `extras` it has, handing `built` what each is and its path as soon as it is
    /// ready. By default: [`prepare`](Self::prepare), announced without a path.
    fn build_artifacts<'a>(
        &'a self,
        toolchain: &'a Toolchain,
        extras: BuildExtras,
        built: &'a (dyn Fn(String, &Path) + Sync),
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let _ = extras;
        Box::pin(async move {
            self.prepare(toolchain).await?;
            built(self.reference().to_string(), Path::new("-"));
            Ok(())
        })
    }
}

/// What is built of a release beside its manager (`harness toolchain build`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildExtras {
    /// Its node-level components (for real nodes).
    pub node: bool,
    /// Its own end-to-end suite.
    pub e2e: bool,
}

/// A controller's own end-to-end suite (a Ginkgo suite built from its module), run against a
/// cell as the controller's CI runs it. Everything is read from the suite's release: a
/// suite may be another release's than the controller under test's.
pub trait E2eSuite: Send + Sync {
    /// Whose suite it is.
    fn reference(&self) -> &ControllerRef;

    /// Builds (or finds cached) the suite's test binary.
    fn build<'a>(&'a self, toolchain: &'a Toolchain) -> BoxFuture<'a, anyhow::Result<PathBuf>>;

    /// Builds (or finds cached) the `ginkgo` command at the version the suite is built with,
    /// which runs it in parallel processes.
    fn ginkgo<'a>(&'a self, toolchain: &'a Toolchain) -> BoxFuture<'a, anyhow::Result<PathBuf>>;

    /// The images its specs run, as far as its sources say (real nodes pull stand-ins).
    fn images(&self) -> BoxFuture<'_, anyhow::Result<Vec<crate::toolchain::images::Reference>>>;

    /// What its CI creates before the controller is installed (its e2e configuration, the
    /// StorageClasses its specs use): seeded into the cluster.
    fn seed_objects(&self) -> BoxFuture<'_, anyhow::Result<Vec<serde_json::Value>>>;

    /// What its CI applies after the controller is up and before the suite (from other
    /// projects), in order.
    fn before_suite(&self) -> BoxFuture<'_, anyhow::Result<Vec<serde_json::Value>>>;

    /// The feature gates its CI gives the controller under test `manager` and the cluster.
    fn ci_gates<'a>(&'a self, manager: &'a ControllerRef)
    -> BoxFuture<'a, anyhow::Result<CiGates>>;
}

/// The feature gates a controller's CI runs its suite with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiGates {
    /// The controller's (its manager's and its node components').
    pub controller: BTreeMap<String, bool>,
    /// The cluster's (its components' `--feature-gates`).
    pub cluster: BTreeMap<String, bool>,
}

/// One running part of an installed controller (OpenKruise: its manager, and on real nodes a
/// node daemon per node).
pub trait Component: fmt::Debug + Send + Sync {
    /// Its name (`kruise-manager`).
    fn name(&self) -> &str;

    /// Fails if it exited, restarted, or was denied by the RBAC it ships — within `window`
    /// (what its log says outside the window is left out).
    fn check<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, Result<(), ControllerError>>;

    /// Its log file, when it runs as a local process.
    fn log(&self) -> Option<&Path>;

    /// Starts it again if it exited and something restarts it (as a kubelet restarts a pod's
    /// container), waiting until it is ready: how it ended, or `None` when it was running.
    fn revive(&self) -> BoxFuture<'_, Result<Option<String>, ControllerError>> {
        Box::pin(async { Ok(None) })
    }

    /// Kills it at once (a crash) and has what restarts it start it again, waiting until it
    /// is ready: `false`, and it is left alone, when nothing would start it again.
    fn restart<'a>(
        &'a self,
        client: &'a kube::Client,
    ) -> BoxFuture<'a, Result<bool, ControllerError>> {
        let _ = client;
        Box::pin(async { Ok(false) })
    }

    /// Waits, up to `timeout`, until what the component acts through but does not make itself
    /// exists (OpenKruise's node daemon: its node's NodeImage, which the manager makes some
    /// time after the node turned Ready). Installing waits for readiness only; whatever needs
    /// more (a suite that pulls images at once, a cluster handed to a user) waits for this.
    fn settled<'a>(
        &'a self,
        client: &'a kube::Client,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), ControllerError>> {
        let _ = (client, timeout);
        Box::pin(async { Ok(()) })
    }
}

/// A controller installed into a cluster: its running components, and the apiserver proxy in
/// front of its manager when it was installed with one.
#[derive(Debug)]
pub struct Installation {
    /// What was installed.
    pub reference: ControllerRef,
    /// Its components.
    pub components: Vec<Box<dyn Component>>,
    proxy: Option<ProxyHandle>,
}

impl Installation {
    /// What installing `reference` started: its `components`, its manager talking to the
    /// apiserver directly.
    pub fn new(reference: ControllerRef, components: Vec<Box<dyn Component>>) -> Self {
        Self {
            reference,
            components,
            proxy: None,
        }
    }

    /// The apiserver proxy its manager talks through (see [`ControllerRef::controller_behind_proxy`]),
    /// for stale-view perturbations; `None` when it talks to the apiserver directly.
    pub fn proxy(&self) -> Option<&ProxyHandle> {
        self.proxy.as_ref()
    }

    /// Fails with the first component that exited, restarted or was denied by its RBAC within
    /// `window`.
    pub async fn check(&self, window: &Window) -> Result<(), ControllerError> {
        for c in &self.components {
            c.check(window).await?;
        }
        Ok(())
    }

    /// Starts again every component that exited and has a supervisor, each ready when this
    /// returns: the components started again, each with how it ended.
    pub async fn revive(&self) -> Result<Vec<String>, ControllerError> {
        let mut out = vec![];
        for c in &self.components {
            if let Some(status) = c.revive().await? {
                out.push(format!("{} ({status})", c.name()));
            }
        }
        Ok(out)
    }

    /// Crashes every component something restarts ([`Component::restart`]) and waits until
    /// each is ready again: their names.
    pub async fn restart(&self, client: &kube::Client) -> Result<Vec<String>, ControllerError> {
        let mut out = vec![];
        for c in &self.components {
            if c.restart(client).await? {
                out.push(c.name().to_string());
            }
        }
        Ok(out)
    }

    /// Waits until every component has settled ([`Component::settled`]).
    pub async fn settled(
        &self,
        client: &kube::Client,
        timeout: Duration,
    ) -> Result<(), ControllerError> {
        for c in &self.components {
            c.settled(client, timeout).await?;
        }
        Ok(())
    }

    /// A window opening now, for a scenario in `namespace`.
    pub fn window(&self, namespace: &str) -> Window {
        Window::opening(&self.logs(), Some(namespace))
    }

    /// The log files of the components that run as local processes.
    pub fn logs(&self) -> Vec<&Path> {
        self.components.iter().filter_map(|c| c.log()).collect()
    }

    /// A scenario's tripwire (`crate::scenario::steps::Tripwire`): asked, it says whether a
    /// component has logged, since this call, a recovered panic naming `namespace`
    /// ([`panic_in`]); none when no component logs to a local file.
    pub fn panic_tripwire(
        &self,
        namespace: &str,
    ) -> Option<std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>> {
        let logs = self.logs();
        if logs.is_empty() {
            return None;
        }
        let tails =
            std::sync::Mutex::new(logs.into_iter().map(LogTail::at_end).collect::<Vec<_>>());
        let namespace = namespace.to_string();
        Some(std::sync::Arc::new(move || {
            let mut tails = tails.lock().ok()?;
            tails
                .iter_mut()
                .find_map(|t| panic_in(&t.next_lines(), &namespace))
        }))
    }
}

/// The complete lines a log file gains, read from where the last read ended.
struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl LogTail {
    /// From the file's end now.
    fn at_end(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: std::fs::metadata(path).map_or(0, |m| m.len()),
            partial: vec![],
        }
    }

    /// The lines completed since the last call (a line still being written waits).
    fn next_lines(&mut self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return String::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return String::new();
        }
        let mut new = vec![];
        let Ok(n) = f.read_to_end(&mut new) else {
            return String::new();
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&new);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return String::new();
        };
        let lines: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&lines).into_owned()
    }
}

/// The first recovered panic (`Observed a panic`) of `lines` that names `namespace`, as a
/// step's error: the line, up to 1,000 characters. A panic naming another namespace is
/// another scenario's; one naming none (an unrecovered `panic:`) is left to the invariants.
pub fn panic_in(lines: &str, namespace: &str) -> Option<String> {
    lines
        .lines()
        .find(|l| {
            l.contains("Observed a panic") && named_namespace(l).as_deref() == Some(namespace)
        })
        .map(|l| {
            format!(
                "the controller panicked in this scenario's namespace: {}",
                l.chars().take(1000).collect::<String>()
            )
        })
}

/// A token of ServiceAccount `namespace/name` (a manager's, a node component's): its identity
/// when it runs as a local process, so it gets exactly the RBAC its release ships.
pub async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, ControllerError> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let sas: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(48 * 3600),
            ..Default::default()
        },
        ..Default::default()
    };
    let token = sas
        .create_token_request(name, &Default::default(), &request)
        .await
        .map_err(ControllerError::kube(format!(
            "request a token for {namespace}/{name}"
        )))?;
    Ok(token.status.map(|s| s.token).unwrap_or_default())
}

/// Errors of installing or watching a controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Building the manager failed.
    #[error("build the controller")]
    Toolchain(#[from] ToolchainError),
    /// The cluster could not do something asked of it.
    #[error("use the cluster")]
    Cluster(#[from] LocalError),
    /// A version's sources could not be had.
    #[error("fetch the sources of {reference}")]
    Sources {
        /// The controller and version.
        reference: String,
        /// Cause.
        #[source]
        source: ToolchainError,
    },
    /// A release's feature gates could not be read from its sources.
    #[error("read the feature gates of {}: it registers none the harness can read", file.display())]
    NoGates {
        /// The file that should declare them.
        file: PathBuf,
    },
    /// The release's manifests did not render.
    #[error("render {}: {detail}", dir.display())]
    Render {
        /// The kustomization.
        dir: PathBuf,
        /// kubectl's message.
        detail: String,
    },
    /// An API call failed.
    #[error("{action}")]
    Kube {
        /// What was being done.
        action: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A wait did not end well.
    #[error(transparent)]
    Wait(#[from] crate::wait::WaitError),
    /// Not ready in time.
    #[error("wait for {what}: not ready after {timeout:?}; last seen: {last}")]
    NotReady {
        /// What.
        what: String,
        /// Bound.
        timeout: Duration,
        /// Last observation.
        last: String,
    },
    /// The manager (or another component running as a local process, e.g. a node daemon)
    /// exited.
    #[error("{name} {version} exited; last lines of {}:\n{tail}", log.display())]
    ManagerExited {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// Its log.
        log: PathBuf,
        /// The log's tail.
        tail: String,
    },
    /// The manager (or another component) was denied by the RBAC it ships.
    #[error("{name} {version} is denied by its RBAC ({count} times); first: {first}")]
    ManagerForbidden {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// How many denials its log shows.
        count: usize,
        /// The first denial.
        first: String,
    },
    /// A component's log shows a panic (recovered or not) and its goroutine stack.
    #[error("{name} {version} panicked ({count} times); first:\n{first}")]
    ManagerPanicked {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// How many panics its log shows.
        count: usize,
        /// The first panic, with the lines that follow it.
        first: String,
    },
    /// The controller is not installed as the run needs (existing provider).
    #[error("use the installed controller: {detail}")]
    NotInstalled {
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// The in-cluster manager restarted or its pod is gone.
    #[error("{name} {version}: {detail}")]
    ManagerRestarted {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// Which pod, how often, and the last termination.
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
    /// The apiserver proxy in front of the manager did not start.
    #[error("start the apiserver proxy for the manager")]
    Proxy(#[from] ProxyError),
}

impl ControllerError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

/// The part of a component's life a check looks at: all of it ([`Window::all`]), or a
/// scenario's time and namespace ([`Window::opening`]).
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Where local log files stood when the window opened (bytes; absent: from the start).
    offsets: BTreeMap<PathBuf, u64>,
    /// When it opened (for logs read from the cluster; None: the whole log).
    opened: Option<std::time::Instant>,
    /// A log line naming another namespace than this one belongs to another scenario.
    namespace: Option<String>,
}

impl Window {
    /// The whole life of a component.
    pub fn all() -> Self {
        Self::default()
    }

    /// A window opening now: the log files as long as they are, lines naming a namespace
    /// other than `namespace` left out.
    pub fn opening(logs: &[&Path], namespace: Option<&str>) -> Self {
        Self {
            offsets: logs
                .iter()
                .map(|l| (l.to_path_buf(), std::fs::metadata(l).map_or(0, |m| m.len())))
                .collect(),
            opened: Some(std::time::Instant::now()),
            namespace: namespace.map(String::from),
        }
    }

    /// The part of log file `path` inside the window.
    pub fn read(&self, path: &Path) -> String {
        let bytes = std::fs::read(path).unwrap_or_default();
        let start = self
            .offsets
            .get(path)
            .map_or(0, |o| (*o as usize).min(bytes.len()));
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// How many seconds back a log read from the cluster should reach.
    fn since_seconds(&self) -> Option<i64> {
        self.opened.map(|t| t.elapsed().as_secs() as i64 + 1)
    }

    /// Whether a log line belongs to the window's namespace (a line naming no namespace does).
    pub fn keeps(&self, line: &str) -> bool {
        let (Some(ns), Some(named)) = (&self.namespace, named_namespace(line)) else {
            return true;
        };
        *ns == named
    }
}

/// The namespace an API error in a log line names (`... in the namespace "x"`, quotes possibly
/// escaped).
fn named_namespace(line: &str) -> Option<String> {
    // An API error's words, then controller-runtime's structured key and klog's key=value.
    let start = ["in the namespace ", "\"namespace\"=", " namespace="]
        .iter()
        .find_map(|key| line.find(key).map(|at| at + key.len()))?;
    let rest = line[start..].trim_start_matches(['\\', '"']);
    let end = rest.find(['\\', '"', ' ']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// The status code of `GET http://127.0.0.1:<port><path>` (a health endpoint), over one
/// HTTP/1.1 connection of hyper's; the error says what failed, with its cause.
pub async fn http_get_status(port: u16, path: &str) -> Result<u16, String> {
    use hyper_util::rt::TokioIo;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
    let http = |e: hyper::Error| match std::error::Error::source(&e) {
        Some(cause) => format!("GET {path}: {e}: {cause}"),
        None => format!("GET {path}: {e}"),
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(http)?;
    let driver = tokio::spawn(conn);
    let request = http::Request::get(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = sender
        .send_request(request)
        .await
        .map(|r| r.status().as_u16())
        .map_err(http);
    drop(sender);
    driver.abort();
    status
}

/// Deletes leader-election Lease `namespace/name`, if there is one: the next manager leads at
/// once instead of waiting for the one a stopped or killed leader held to expire.
pub async fn delete_lease(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), ControllerError> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), namespace);
    match leases.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(ControllerError::Kube {
            action: format!("delete the lease {namespace}/{name}"),
            source: e,
        }),
    }
}

/// A running controller manager installed into a cluster.
#[derive(Debug, Clone)]
pub struct Manager {
    /// Process name (`kruise-manager`).
    pub name: String,
    /// Release tag.
    pub version: String,
    /// The process.
    pub record: ProcRecord,
    /// Its log file.
    pub log: PathBuf,
    /// Its webhook port (0: it serves no webhooks).
    pub webhook_port: u16,
    /// Its health-probe port.
    pub health_port: u16,
    /// Its feature gates.
    pub gates: BTreeMap<String, bool>,
    /// What starts it again when it exits, if anything does.
    pub supervisor: Option<Supervisor>,
    /// Its leader-election Lease (namespace, name), if it elects a leader: a restart
    /// ([`Component::restart`]) deletes it, so that the manager started again leads at once
    /// instead of waiting for the lease its killed predecessor held to expire.
    pub lease: Option<(String, String)>,
}

impl Component for Manager {
    fn name(&self) -> &str {
        &self.name
    }

    fn check<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(async move {
            // An exit is reported once, with the manager started again and ready.
            if let Some(status) = self.revive().await? {
                return Err(self.exited(&status));
            }
            self.check_process(window)
        })
    }

    fn log(&self) -> Option<&Path> {
        Some(&self.log)
    }

    fn restart<'a>(
        &'a self,
        client: &'a kube::Client,
    ) -> BoxFuture<'a, Result<bool, ControllerError>> {
        Box::pin(self.crash_and_restart(client))
    }

    fn revive(&self) -> BoxFuture<'_, Result<Option<String>, ControllerError>> {
        Box::pin(async move {
            let Some(s) = &self.supervisor else {
                return Ok(None);
            };
            let Some(status) = s.revive().map_err(LocalError::from)? else {
                return Ok(None);
            };
            // Ready again: the same certificates and ports, so the webhooks answer once
            // /readyz does.
            let what = format!("{} started again after it exited ({status})", self.name);
            self.wait_ready(&what, Duration::from_secs(120)).await?;
            Ok(Some(status))
        })
    }
}

impl Manager {
    /// [`Component::restart`]: a supervised manager killed, started again and ready.
    async fn crash_and_restart(&self, client: &kube::Client) -> Result<bool, ControllerError> {
        let Some(s) = &self.supervisor else {
            return Ok(false);
        };
        s.current().kill();
        if let Some((namespace, name)) = &self.lease {
            delete_lease(client, namespace, name).await?;
        }
        // A killed Go process is a zombie (not alive) while its other threads still exit, and
        // cannot be reaped, so started again, until they have.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if self.revive().await?.is_some() {
                return Ok(true);
            }
            if std::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(ControllerError::ManagerExited {
            name: self.name.clone(),
            version: self.version.clone(),
            log: self.log.clone(),
            tail: format!(
                "{}\n(killed to restart it, it was not started again within 10 s)",
                log_tail(&self.log, 20)
            ),
        })
    }

    /// Waits up to `timeout` until its `/readyz` on the health port answers 200 (`what` names
    /// the wait in its error).
    pub async fn wait_ready(&self, what: &str, timeout: Duration) -> Result<(), ControllerError> {
        let port = self.health_port;
        crate::wait::poll(
            what,
            timeout,
            Duration::from_millis(200),
            move || async move {
                match http_get_status(port, "/readyz").await {
                    Ok(200) => crate::wait::Check::Met,
                    Ok(code) => crate::wait::Check::Pending(format!("HTTP {code}")),
                    Err(e) => crate::wait::Check::Pending(e),
                }
            },
        )
        .await?;
        Ok(())
    }

    /// Fails if the manager exited (with its log tail; a supervised one is started again) or
    /// its log shows RBAC denials of its own ServiceAccount or a panic, within `window`.
    pub fn check_process(&self, window: &Window) -> Result<(), ControllerError> {
        let record = match &self.supervisor {
            Some(s) => {
                if let Some(status) = s.revive().map_err(LocalError::from)? {
                    return Err(self.exited(&status));
                }
                s.current()
            }
            None => self.record.clone(),
        };
        check_local_process(&self.name, &self.version, &record, &self.log, window)
    }

    /// The error of an exit its supervisor answered by starting it again.
    fn exited(&self, status: &str) -> ControllerError {
        ControllerError::ManagerExited {
            name: self.name.clone(),
            version: self.version.clone(),
            log: self.log.clone(),
            tail: format!(
                "{}\n(it exited: {status}; started again)",
                log_tail(&self.log, 20)
            ),
        }
    }
}

/// Fails if the local process `record` (component `name` at `version`) exited, with the tail
/// of its `log`, or its log shows RBAC denials of its own ServiceAccount or a panic, within
/// `window`. Shared by every component that runs as a local process.
pub(crate) fn check_local_process(
    name: &str,
    version: &str,
    record: &ProcRecord,
    log: &Path,
    window: &Window,
) -> Result<(), ControllerError> {
    if !record.alive() {
        return Err(ControllerError::ManagerExited {
            name: name.into(),
            version: version.into(),
            log: log.to_path_buf(),
            tail: log_tail(log, 20),
        });
    }
    log_findings(name, version, &window.read(log), window)
}

/// The denials and panics a manager's log shows, the first as the error.
fn log_findings(
    name: &str,
    version: &str,
    log: &str,
    window: &Window,
) -> Result<(), ControllerError> {
    let denials = forbidden_lines(log, window);
    if let Some(first) = denials.first() {
        return Err(ControllerError::ManagerForbidden {
            name: name.into(),
            version: version.into(),
            count: denials.len(),
            first: first.clone(),
        });
    }
    let panics: Vec<String> = panics(log)
        .into_iter()
        .filter(|p| window.keeps(p.lines().next().unwrap_or_default()))
        .collect();
    if let Some(first) = panics.first() {
        return Err(ControllerError::ManagerPanicked {
            name: name.into(),
            version: version.into(),
            count: panics.len(),
            first: first.clone(),
        });
    }
    Ok(())
}

/// Panics in a Go program's log: controller-runtime's and apimachinery's "Observed a panic"
/// (recovered), and an unrecovered `panic:` followed by a `goroutine N [...]` stack; each with
/// up to 8 lines after it.
pub fn panics(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let goroutine = |l: &str| l.starts_with("goroutine ") && l.trim_end().ends_with("]:");
    lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            l.contains("Observed a panic")
                || (l.starts_with("panic: ") && lines[*i..].iter().take(40).any(|l| goroutine(l)))
        })
        .map(|(i, _)| {
            lines[i..(i + 9).min(lines.len())]
                .iter()
                .map(|l| l.chars().take(300).collect::<String>())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

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

/// Log lines where the API server refused the manager's ServiceAccount, of `window`'s
/// namespace.
pub fn forbidden_lines(log: &str, window: &Window) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("forbidden") && l.contains("system:serviceaccount:"))
        .filter(|l| window.keeps(l))
        .map(|l| l.chars().take(400).collect())
        .collect()
}

/// A kind of controller the harness can build and install, by the name a [`ControllerRef`]
/// gives it (`openkruise` in `openkruise@v1.9.0`): what is known of it before a version is
/// chosen, and how to make the [`Controller`] of one version. [`register`] adds one.
pub trait Family: Send + Sync {
    /// Its name on the command line.
    fn name(&self) -> &'static str;

    /// Other names it answers to.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// The Go module a checkout of it must declare.
    fn module(&self) -> &'static str;

    /// The version a run uses when none is named.
    fn default_version(&self) -> &'static str;

    /// A note for the user about version `version`, if any (e.g. a tag that aliases another).
    fn note(&self, version: &str) -> Option<String> {
        let _ = version;
        None
    }

    /// Its releases: the versions of its module the module proxy lists.
    fn releases<'a>(&'a self, go: &'a GoEnv) -> BoxFuture<'a, Result<Vec<String>, ToolchainError>>;

    /// The feature gates `reference` knows, read from its sources (sorted).
    fn known_gates<'a>(
        &'a self,
        go: &'a GoEnv,
        reference: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<Vec<String>, ControllerError>>;

    /// The feature gates `reference` registers, each with its default, read from its sources
    /// (the umbrella gates `AllAlpha` and `AllBeta` left out). A family that does not say has
    /// none that can be varied.
    fn gate_defaults<'a>(
        &'a self,
        go: &'a GoEnv,
        reference: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<BTreeMap<String, bool>, ControllerError>> {
        let _ = (go, reference);
        Box::pin(async { Ok(BTreeMap::new()) })
    }

    /// The implementation of `reference`; with `behind_proxy`, its manager talks to the
    /// apiserver through a proxy ([`crate::cluster::proxy`], exposed by
    /// [`Installation::proxy`]) when installed on the local provider.
    fn controller(&self, reference: &ControllerRef, behind_proxy: bool) -> Box<dyn Controller>;
}

/// The registered families, the default first.
static FAMILIES: std::sync::LazyLock<std::sync::RwLock<Vec<&'static dyn Family>>> =
    std::sync::LazyLock::new(|| std::sync::RwLock::new(vec![&openkruise::FAMILY]));

/// Makes `family` known by its name (and aliases) to every [`ControllerRef`] parsed from now
/// on: how a controller the harness does not bundle is brought under test. A name already
/// known is refused.
pub fn register(family: &'static dyn Family) -> Result<(), RefError> {
    let mut all = FAMILIES.write().expect("not poisoned");
    let names = |f: &dyn Family| {
        std::iter::once(f.name())
            .chain(f.aliases().iter().copied())
            .collect::<Vec<_>>()
    };
    for f in all.iter() {
        if let Some(n) = names(family).into_iter().find(|n| names(*f).contains(n)) {
            return Err(RefError::Taken { name: n.into() });
        }
    }
    all.push(family);
    Ok(())
}

/// The family named `name` (or one of its aliases), ignoring case.
pub fn family(name: &str) -> Option<&'static dyn Family> {
    FAMILIES
        .read()
        .expect("not poisoned")
        .iter()
        .copied()
        .find(|f| {
            f.name().eq_ignore_ascii_case(name)
                || f.aliases().iter().any(|a| a.eq_ignore_ascii_case(name))
        })
}

/// The names of the registered families, the default first.
pub fn families() -> Vec<&'static str> {
    FAMILIES
        .read()
        .expect("not poisoned")
        .iter()
        .map(|f| f.name())
        .collect()
}

/// Which controller a [`ControllerRef`] names: a registered [`Family`]'s name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ControllerKind(String);

impl ControllerKind {
    /// Its name on the command line.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// Its family. Every kind is made from a registered one, so this does not fail.
    pub fn family(&self) -> &'static dyn Family {
        family(&self.0).unwrap_or_else(|| panic!("controller `{}` is registered", self.0))
    }
}

impl Serialize for ControllerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ControllerKind {
    /// A registered name, in any case (reports of earlier versions wrote `OpenKruise`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        match family(&name) {
            Some(f) => Ok(Self(f.name().into())),
            None => Err(serde::de::Error::custom(format!(
                "unknown controller `{name}`; known: {}",
                families().join(", ")
            ))),
        }
    }
}

/// A controller at a release tag (`openkruise@v1.9.0`), a commit (`openkruise@4c2bbcec`) or a
/// local checkout (`openkruise@./kruise`, `openkruise@/src/kruise`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ControllerRef {
    /// Which controller.
    #[serde(rename = "controller")]
    pub kind: ControllerKind,
    /// Release tag (`v1.9.0`) or commit; for a checkout, what `git describe` says of it (or
    /// `checkout`).
    pub version: String,
    /// The local checkout the controller is built from, if it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<PathBuf>,
}

/// A controller reference that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    /// Not `name@tag`.
    #[error("parse controller `{given}`: expected NAME@TAG, e.g. openkruise@v1.9.0")]
    Malformed {
        /// Input.
        given: String,
    },
    /// Unknown controller name.
    #[error("parse controller `{given}`: unknown controller `{name}`; known: {known}")]
    Unknown {
        /// Input.
        given: String,
        /// Name part.
        name: String,
        /// The registered names.
        known: String,
    },
    /// A family registered under a name already taken.
    #[error("register controller `{name}`: the name is taken")]
    Taken {
        /// The name.
        name: String,
    },
    /// A path that is not a checkout of the controller's module.
    #[error(
        "parse controller `{given}`: {} is not a checkout of {module} ({why})",
        path.display()
    )]
    NotACheckout {
        /// Input.
        given: String,
        /// The path.
        path: PathBuf,
        /// The module expected.
        module: String,
        /// What is wrong.
        why: String,
    },
    /// A tag that is not a release tag.
    #[error(
        "parse controller `{given}`: `{tag}` is not a release tag like v1.9.0, a commit (7 to 40 \
         hex digits) or a checkout path (starting with `/` or `.`)"
    )]
    BadTag {
        /// Input.
        given: String,
        /// Tag part.
        tag: String,
    },
}

impl ControllerRef {
    /// The default controller under test: the first registered family (OpenKruise) at its
    /// default version.
    pub fn default_ref() -> Self {
        let f = FAMILIES.read().expect("not poisoned")[0];
        Self {
            kind: ControllerKind(f.name().into()),
            version: f.default_version().into(),
            checkout: None,
        }
    }

    /// Its family.
    pub fn family(&self) -> &'static dyn Family {
        self.kind.family()
    }

    /// A name safe in file and cluster names: the version, or `checkout-<describe>`.
    pub fn slug(&self) -> String {
        let raw = match &self.checkout {
            Some(_) => format!("checkout-{}", self.version),
            None => self.version.clone(),
        };
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }

    /// Whether it names a release tag (not a commit or a checkout).
    pub fn is_release(&self) -> bool {
        self.checkout.is_none() && is_release_tag(&self.version)
    }

    /// A note for the user about this release, if any (e.g. a tag that aliases another).
    pub fn note(&self) -> Option<String> {
        self.family().note(&self.version)
    }

    /// The releases of this controller: the versions of its Go module the module proxy lists.
    pub async fn releases(&self, go: &GoEnv) -> Result<Vec<String>, ToolchainError> {
        self.family().releases(go).await
    }

    /// The feature gates this version knows, read from its sources (sorted).
    pub async fn known_gates(&self, go: &GoEnv) -> Result<Vec<String>, ControllerError> {
        self.family().known_gates(go, self).await
    }

    /// The feature gates this version registers, each with its default, read from its sources.
    pub async fn gate_defaults(
        &self,
        go: &GoEnv,
    ) -> Result<BTreeMap<String, bool>, ControllerError> {
        self.family().gate_defaults(go, self).await
    }

    /// Its implementation.
    pub fn controller(&self) -> Box<dyn Controller> {
        self.family().controller(self, false)
    }

    /// Its implementation, whose manager talks to the apiserver through a proxy
    /// ([`crate::cluster::proxy`], exposed by [`Installation::proxy`]) when installed on the
    /// local provider; on other hosts the same as [`ControllerRef::controller`].
    pub fn controller_behind_proxy(&self) -> Box<dyn Controller> {
        self.family().controller(self, true)
    }

    /// The same controller at `version` (a release tag or commit).
    pub fn at(&self, version: &str) -> Result<Self, RefError> {
        format!("{}@{version}", self.kind.name()).parse()
    }
}

impl FromStr for ControllerRef {
    type Err = RefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, tag) = s
            .split_once('@')
            .ok_or_else(|| RefError::Malformed { given: s.into() })?;
        let Some(family) = family(name) else {
            return Err(RefError::Unknown {
                given: s.into(),
                name: name.into(),
                known: families().join(", "),
            });
        };
        let kind = ControllerKind(family.name().into());
        if tag.starts_with('/') || tag.starts_with('.') {
            let module = family.module();
            let not = |why: String| RefError::NotACheckout {
                given: s.into(),
                path: PathBuf::from(tag),
                module: module.into(),
                why,
            };
            let dir = std::fs::canonicalize(tag).map_err(|e| not(e.to_string()))?;
            let go_mod = std::fs::read_to_string(dir.join("go.mod"))
                .map_err(|e| not(format!("read go.mod: {e}")))?;
            let declared = go_mod
                .lines()
                .find_map(|l| l.trim().strip_prefix("module "))
                .map(str::trim)
                .unwrap_or_default();
            if declared != module {
                return Err(not(format!("its go.mod declares `{declared}`")));
            }
            return Ok(Self {
                kind,
                version: describe(&dir),
                checkout: Some(dir),
            });
        }
        let commit = (7..=40).contains(&tag.len())
            && tag
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !is_release_tag(tag) && !commit {
            return Err(RefError::BadTag {
                given: s.into(),
                tag: tag.into(),
            });
        }
        Ok(Self {
            kind,
            version: tag.into(),
            checkout: None,
        })
    }
}

/// `v1.9.0`, `v1.9.0-rc.1`: a release tag (`v` and a semver version).
pub fn is_release_tag(tag: &str) -> bool {
    tag.strip_prefix('v')
        .is_some_and(|rest| semver::Version::parse(rest).is_ok())
}

/// What `git describe --tags --always --dirty` says of a checkout, or `checkout`.
fn describe(dir: &Path) -> String {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["describe", "--tags", "--always", "--dirty"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "checkout".into())
}

impl fmt::Display for ControllerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.checkout {
            Some(dir) => write!(
                f,
                "{}@{} ({})",
                self.kind.name(),
                dir.display(),
                self.version
            ),
            None => write!(f, "{}@{}", self.kind.name(), self.version),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_keeps_its_own_namespace_and_its_own_time() {
        let line = |ns: &str| {
            format!(
                "E1123 x.go:1] \"Failed\" err=\"daemonsets.apps \\\"a\\\" is forbidden: User \\\"system:serviceaccount:kruise-system:m\\\" cannot get resource \\\"daemonsets\\\" in API group \\\"apps\\\" in the namespace \\\"{ns}\\\"\""
            )
        };
        assert_eq!(named_namespace(&line("h-one")).as_deref(), Some("h-one"));
        assert_eq!(
            named_namespace("is forbidden ... in the namespace \"plain\"").as_deref(),
            Some("plain")
        );
        let structured = "E1126 x.go:434] \"msg\"=\"Observed a panic\" \"controller\"=\"c\" \"name\"=\"x\" \"namespace\"=\"h-two\" \"panic\"=\"p\"";
        assert_eq!(named_namespace(structured).as_deref(), Some("h-two"));
        assert_eq!(
            named_namespace("I1126 x.go:1] \"Sync\" namespace=\"h-three\" name=\"x\"").as_deref(),
            Some("h-three")
        );
        let w = Window {
            namespace: Some("h-one".into()),
            ..Window::all()
        };
        assert!(
            log_findings("m", "v", structured, &w).is_ok(),
            "another namespace's panic is not this window's"
        );
        assert!(log_findings("m", "v", structured, &Window::all()).is_err());
        let cluster = "E1123 forbidden: User \"system:serviceaccount:k:m\" cannot list resource \"nodes\" at the cluster scope";
        assert_eq!(named_namespace(cluster), None);
        let log = format!("{}\n{}\n{cluster}\n", line("h-one"), line("h-two"));
        let w = Window {
            namespace: Some("h-one".into()),
            ..Window::all()
        };
        let kept = forbidden_lines(&log, &w);
        assert_eq!(
            kept.len(),
            2,
            "its own namespace and the cluster scope: {kept:?}"
        );
        assert!(kept[0].contains("h-one") && kept[1].contains("cluster scope"));
        assert_eq!(forbidden_lines(&log, &Window::all()).len(), 3);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.log");
        std::fs::write(&file, format!("{}\n", line("h-one"))).unwrap();
        let w = Window::opening(&[file.as_path()], Some("h-one"));
        assert!(
            forbidden_lines(&w.read(&file), &w).is_empty(),
            "written before it opened"
        );
        std::fs::write(&file, format!("{}\n{}\n", line("h-one"), line("h-one"))).unwrap();
        assert_eq!(forbidden_lines(&w.read(&file), &w).len(), 1);
    }

    #[test]
    fn a_tripwire_trips_on_a_panic_naming_its_namespace_logged_after_it_was_set() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("manager.log");
        let panic = |ns: &str| {
            format!(
                "E1127 1 controller.go:1] \"Observed a panic\" controller=\"c\" namespace=\"{ns}\" panic=\"runtime error: index out of range\"\n"
            )
        };
        // Before the scenario: not its business.
        std::fs::write(&log, panic("h-one")).unwrap();
        let mut tail = LogTail::at_end(&log);
        assert_eq!(tail.next_lines(), "");
        let append = |text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        append(&panic("h-two"));
        append("I1127 reconcile, no newline yet");
        let lines = tail.next_lines();
        assert!(panic_in(&lines, "h-one").is_none(), "another namespace's");
        let tripped = panic_in(&lines, "h-two").unwrap();
        assert!(tripped.contains("index out of range"), "{tripped}");
        // The unfinished line waits for its end.
        append(" ... done\n");
        assert_eq!(
            tail.next_lines(),
            "I1127 reconcile, no newline yet ... done\n"
        );
    }

    #[test]
    fn panics_are_found_recovered_or_not_and_quiet_logs_pass() {
        let recovered = "I1122 reconcile\nE1122 12:00:00 runtime.go:79] Observed a panic: \"invalid memory address\" (runtime error)\ngoroutine 412 [running]:\nk8s.io/apimachinery/pkg/util/runtime.logPanic(...)\n";
        let found = panics(recovered);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("Observed a panic") && found[0].contains("goroutine 412"));
        let fatal = "I1122 started\npanic: assignment to entry in nil map\n\ngoroutine 1 [running]:\nmain.main()\n";
        assert_eq!(panics(fatal).len(), 1);
        let err = log_findings("kruise-manager", "v1.9.0", fatal, &Window::all()).unwrap_err();
        assert!(
            err.to_string()
                .contains("kruise-manager v1.9.0 panicked (1 times)"),
            "{err}"
        );
        let quiet =
            "I1122 reconcile CloneSet\nI1122 panic: mentioned in a message without a stack\n";
        assert!(panics(quiet).is_empty());
        assert!(log_findings("kruise-manager", "v1.9.0", quiet, &Window::all()).is_ok());
    }

    #[test]
    fn parses_refs_and_refuses_bad_ones() {
        let r: ControllerRef = "openkruise@v1.9.0".parse().unwrap();
        assert_eq!(r.to_string(), "openkruise@v1.9.0");
        assert!(
            "openkruise"
                .parse::<ControllerRef>()
                .unwrap_err()
                .to_string()
                .contains("NAME@TAG")
        );
        assert!(
            "argo@v1.0.0"
                .parse::<ControllerRef>()
                .unwrap_err()
                .to_string()
                .contains("unknown controller `argo`")
        );
        assert!(
            "openkruise@main"
                .parse::<ControllerRef>()
                .unwrap_err()
                .to_string()
                .contains("not a release tag")
        );
        let commit: ControllerRef = "openkruise@4c2bbcec".parse().unwrap();
        assert!(!commit.is_release());
        assert!(r.is_release());
    }

    #[test]
    fn a_checkout_must_be_the_controllers_module() {
        let tmp = tempfile::tempdir().unwrap();
        let given = format!("openkruise@{}", tmp.path().display());
        let e = given.parse::<ControllerRef>().unwrap_err().to_string();
        assert!(e.contains("read go.mod"), "{e}");
        std::fs::write(tmp.path().join("go.mod"), "module example.com/other\n").unwrap();
        let e = given.parse::<ControllerRef>().unwrap_err().to_string();
        assert!(e.contains("declares `example.com/other`"), "{e}");
        std::fs::write(
            tmp.path().join("go.mod"),
            "module github.com/openkruise/kruise\n\ngo 1.23\n",
        )
        .unwrap();
        let r: ControllerRef = given.parse().unwrap();
        assert_eq!(
            r.checkout.as_deref(),
            Some(tmp.path().canonicalize().unwrap().as_path())
        );
        assert_eq!(r.version, "checkout");
        assert_eq!(r.slug(), "checkout-checkout");
        assert!(!r.is_release());
    }

    #[test]
    fn the_aliased_tag_is_called_out() {
        let r: ControllerRef = "openkruise@v1.7.5".parse().unwrap();
        assert!(r.note().unwrap().contains("v1.8.3"));
        assert!(ControllerRef::default_ref().note().is_none());
    }

    /// A family that only answers to its name (no builds, no releases).
    #[derive(Debug)]
    struct Stand(&'static str, &'static [&'static str]);

    impl Family for Stand {
        fn name(&self) -> &'static str {
            self.0
        }
        fn aliases(&self) -> &'static [&'static str] {
            self.1
        }
        fn module(&self) -> &'static str {
            "example.com/stand"
        }
        fn default_version(&self) -> &'static str {
            "v0.1.0"
        }
        fn releases<'a>(
            &'a self,
            _: &'a GoEnv,
        ) -> BoxFuture<'a, Result<Vec<String>, ToolchainError>> {
            Box::pin(async { Ok(vec!["v0.1.0".into()]) })
        }
        fn known_gates<'a>(
            &'a self,
            _: &'a GoEnv,
            _: &'a ControllerRef,
        ) -> BoxFuture<'a, Result<Vec<String>, ControllerError>> {
            Box::pin(async { Ok(vec![]) })
        }
        fn controller(&self, _: &ControllerRef, _: bool) -> Box<dyn Controller> {
            unimplemented!("not installed in unit tests")
        }
    }

    #[test]
    fn a_registered_family_is_parsed_and_read_back_and_its_names_are_its_own() {
        static STAND: Stand = Stand("stand-a", &["stand-alias"]);
        register(&STAND).unwrap();
        let r: ControllerRef = "stand-alias@v0.1.0".parse().unwrap();
        assert_eq!(r.to_string(), "stand-a@v0.1.0");
        assert_eq!(r.family().module(), "example.com/stand");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["controller"], "stand-a");
        let back: ControllerRef = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.at("v0.2.0").unwrap().to_string(), "stand-a@v0.2.0");
        // The default stays the first family; a taken name is refused.
        assert_eq!(ControllerRef::default_ref().kind.name(), "openkruise");
        static CLASH: Stand = Stand("stand-b", &["kruise"]);
        let e = register(&CLASH).unwrap_err().to_string();
        assert!(e.contains("`kruise`") && e.contains("taken"), "{e}");
        assert!(family("stand-b").is_none());
        let e = "nope@v1.0.0"
            .parse::<ControllerRef>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("known: openkruise, stand-a"), "{e}");
    }

    #[test]
    fn reports_of_earlier_versions_name_the_controller_in_any_case() {
        let json = serde_json::json!({"controller": "OpenKruise", "version": "v1.9.0"});
        let r: ControllerRef = serde_json::from_value(json).unwrap();
        assert_eq!(r, ControllerRef::default_ref());
        let json = serde_json::json!({"controller": "argo", "version": "v1.0.0"});
        let e = serde_json::from_value::<ControllerRef>(json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown controller `argo`"), "{e}");
    }
}
