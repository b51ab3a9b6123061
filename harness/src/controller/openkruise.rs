//! OpenKruise as it ships: the manager built from `github.com/openkruise/kruise@<tag>`, and that
//! release's own `config/default` (CRDs, namespace, RBAC, webhook configurations) rendered with
//! `kubectl kustomize`. Start with [`OpenKruise`], its [`Controller`] implementation.
//!
//! On the local provider the manager runs as a local process: `WEBHOOK_HOST=127.0.0.1`, a free
//! `WEBHOOK_PORT`, certificates in the cluster's directory, and a kubeconfig holding a token of
//! its own ServiceAccount, so the RBAC it ships is exactly what it gets; with
//! [`InstallOptions::proxy`] that kubeconfig names a [`crate::cluster::proxy`] in front of the
//! apiserver instead, for stale-view perturbations. When the cluster has
//! real nodes, the manager runs with `KruiseDaemon=true` and each real node gets the release's
//! node daemon ([`daemon`]).

pub mod daemon;
pub mod e2e;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, TryFutureExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use super::manifests::{apply_all, kind};
use super::{
    BuildExtras, Component, Controller, ControllerError, ControllerRef, E2eSuite, Family, Host,
    Installation, Manager, http_get_status,
};
use crate::cluster::local::components::ComponentSpec;
use crate::cluster::local::pki::{Credentials, render_kubeconfig};
use crate::cluster::local::{LocalCluster, free_port};
use crate::cluster::proxy::{self, ProxyHandle};
use crate::toolchain::{GoEnv, Toolchain, ToolchainError};
use crate::wait::{self, Check};

/// The Go module.
pub const MODULE: &str = "github.com/openkruise/kruise";
/// The default release.
pub const DEFAULT_VERSION: &str = "v1.9.0";
/// The binary name in the cache.
pub const BINARY: &str = "kruise-manager";
/// The namespace the release installs into.
pub const NAMESPACE: &str = "kruise-system";
/// The manager's ServiceAccount.
pub const SERVICE_ACCOUNT: &str = "kruise-manager";
/// The webhook configurations the release ships (and the manager patches).
pub const MUTATING_WEBHOOKS: &str = "kruise-mutating-webhook-configuration";
/// See [`MUTATING_WEBHOOKS`].
pub const VALIDATING_WEBHOOKS: &str = "kruise-validating-webhook-configuration";
/// Kinds of `config/default` that are not applied: the manager runs as a local process, and
/// so do the node daemons of real nodes (kwok nodes have none).
pub const SKIPPED_KINDS: &[&str] = &["Deployment", "DaemonSet"];

/// OpenKruise as a [`Family`]: `openkruise@<tag>` (or `kruise@<tag>`).
pub static FAMILY: OpenKruiseFamily = OpenKruiseFamily;

/// See [`FAMILY`].
#[derive(Debug)]
pub struct OpenKruiseFamily;

impl Family for OpenKruiseFamily {
    fn name(&self) -> &'static str {
        "openkruise"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["kruise"]
    }

    fn module(&self) -> &'static str {
        MODULE
    }

    fn default_version(&self) -> &'static str {
        DEFAULT_VERSION
    }

    fn note(&self, version: &str) -> Option<String> {
        tag_note(version)
    }

    fn releases<'a>(&'a self, go: &'a GoEnv) -> BoxFuture<'a, Result<Vec<String>, ToolchainError>> {
        Box::pin(releases(go))
    }

    fn known_gates<'a>(
        &'a self,
        go: &'a GoEnv,
        reference: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<Vec<String>, ControllerError>> {
        Box::pin(gates(go, reference))
    }

    fn controller(&self, reference: &ControllerRef, behind_proxy: bool) -> Box<dyn Controller> {
        let mut c = OpenKruise::new(reference.clone());
        c.proxy = behind_proxy;
        Box::new(c)
    }
}

/// What to tell a user who asks for `tag`.
pub fn tag_note(tag: &str) -> Option<String> {
    (tag == "v1.7.5").then(|| {
        "OpenKruise tag v1.7.5 points at the same commit as v1.8.3: it is a 1.8 release, not \
         a 1.7 one (v1.7.4 is the last real 1.7)"
            .to_string()
    })
}

/// Whether release `tag` has manager feature gate `gate` (passing an unknown gate makes the
/// manager exit at start).
pub fn has_gate(tag: &str, gate: &str) -> bool {
    if !super::is_release_tag(tag) {
        // A commit or a checkout: newer than every release the table knows.
        return true;
    }
    match gate {
        "RecreatePodWhenChangeVCTInCloneSetGate" => since(tag, "v1.7.0"),
        _ => true,
    }
}

/// The releases of OpenKruise: the versions of [`MODULE`] the Go module proxy lists.
pub async fn releases(go: &GoEnv) -> Result<Vec<String>, ToolchainError> {
    let scratch = tempfile::tempdir().map_err(|source| ToolchainError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    go.module_versions(scratch.path(), MODULE).await
}

/// Where a release declares the manager's feature gates.
pub const FEATURES: &str = "pkg/features/kruise_features.go";

/// The manager feature gates `reference` knows, read from [`FEATURES`] of its checkout or its
/// module (downloaded into the Go module cache if needed) by [`gates_in`]; `AllAlpha` and
/// `AllBeta`, which every Kubernetes feature gate set knows, included. Sorted.
pub async fn gates(go: &GoEnv, reference: &ControllerRef) -> Result<Vec<String>, ControllerError> {
    let root = match &reference.checkout {
        Some(dir) => dir.clone(),
        None => {
            let scratch =
                tempfile::tempdir().map_err(|e| ControllerError::io(Path::new("tmp"), e))?;
            go.download(scratch.path(), MODULE, &reference.version, true)
                .await
                .map_err(|source| ControllerError::Sources {
                    reference: reference.to_string(),
                    source,
                })?
                .dir
        }
    };
    let file = root.join(FEATURES);
    let source = std::fs::read_to_string(&file).map_err(|e| ControllerError::io(&file, e))?;
    let mut gates = gates_in(&source);
    if gates.is_empty() {
        return Err(ControllerError::NoGates { file });
    }
    gates.extend(["AllAlpha".to_string(), "AllBeta".to_string()]);
    gates.sort();
    Ok(gates)
}

/// The gates a `kruise_features.go` registers: the keys of its `defaultFeatureGates` map,
/// each the string of the constant it names (`EnhancedLivenessProbeGate` is
/// `"EnhancedLivenessProbe"`). Sorted.
pub fn gates_in(source: &str) -> Vec<String> {
    use std::sync::LazyLock;
    static CONSTANT: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"(?m)^\s*(\w+)\s+(?:featuregate\.Feature\s*)?=\s*"([^"]+)""#)
            .expect("valid")
    });
    static KEY: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"(?m)^\s*(\w+)\s*:\s*\{").expect("valid"));
    let constants: BTreeMap<&str, &str> = CONSTANT
        .captures_iter(source)
        .map(|c| {
            let (_, [name, value]) = c.extract();
            (name, value)
        })
        .collect();
    let defaults = source
        .split_once("defaultFeatureGates")
        .map(|(_, rest)| rest.split_once("\n}").map_or(rest, |(map, _)| map))
        .unwrap_or_default();
    let mut gates: Vec<String> = KEY
        .captures_iter(defaults)
        .map(|c| {
            let name = c.get(1).expect("a group").as_str();
            constants.get(name).copied().unwrap_or(name).to_string()
        })
        .collect();
    gates.sort();
    gates.dedup();
    gates
}

/// Whether release `tag` is `first` or a later one (a pre-release of `first` is earlier).
fn since(tag: &str, first: &str) -> bool {
    use crate::toolchain::versions::Version;
    match (tag.parse::<Version>(), first.parse::<Version>()) {
        (Ok(tag), Ok(first)) => tag >= first,
        _ => false,
    }
}

/// Builds (or finds) the manager at `tag`.
pub async fn build(toolchain: &Toolchain, tag: &str) -> Result<PathBuf, ToolchainError> {
    toolchain.module_main(MODULE, tag, BINARY, true).await
}

/// Builds the manager from a local checkout, with the checkout's own `go.mod` (read-only: the
/// checkout is not modified), into `<cache>/checkouts/<hash>/kruise-manager`. It is rebuilt
/// every time (Go's build cache makes that cheap), so the binary always matches the tree.
pub async fn build_checkout(toolchain: &Toolchain, dir: &Path) -> Result<PathBuf, ToolchainError> {
    toolchain.build_checkout(dir, ".", BINARY).await
}

/// The manager for `reference`: a release or commit from the module proxy, or a checkout.
pub async fn build_ref(
    toolchain: &Toolchain,
    reference: &super::ControllerRef,
) -> Result<PathBuf, ToolchainError> {
    match &reference.checkout {
        Some(dir) => build_checkout(toolchain, dir).await,
        None => build(toolchain, &reference.version).await,
    }
}

/// Builds (or finds cached) the manager of `reference` and the `extras`, handing `built` what
/// each is and its path as soon as it is ready.
pub async fn build_release(
    toolchain: &Toolchain,
    reference: &super::ControllerRef,
    extras: BuildExtras,
    built: &(dyn Fn(String, &Path) + Sync),
) -> anyhow::Result<()> {
    let c = reference;
    built(c.to_string(), &build_ref(toolchain, c).await?);
    if extras.node {
        built(
            format!("{c} daemon"),
            &daemon::build_ref(toolchain, c).await?,
        );
    }
    if extras.e2e {
        built(
            format!("{c} upstream e2e"),
            &e2e::build_ref(toolchain, c).await?,
        );
    }
    Ok(())
}

/// OpenKruise at one version, as a [`Controller`]: on the local provider its manager (and on
/// real nodes its node daemons) run as local processes ([`install_local`]), on kind and k3s as the release's Deployment
/// ([`install_in_cluster`]), and on an existing cluster it must already run
/// ([`verify_installed`]).
#[derive(Debug, Clone)]
pub struct OpenKruise {
    reference: ControllerRef,
    /// Edits the rendered manifests before they are applied.
    pub transform: Option<fn(&mut Vec<Value>)>,
    /// Bound for readiness (default: 120 s local, 300 s in-cluster).
    pub timeout: Option<Duration>,
    /// On the local provider, routes the manager through an apiserver proxy
    /// ([`InstallOptions::proxy`]); other hosts ignore it.
    pub proxy: bool,
}

impl OpenKruise {
    /// OpenKruise as `reference` names it.
    pub fn new(reference: ControllerRef) -> Self {
        Self {
            reference,
            transform: None,
            timeout: None,
            proxy: false,
        }
    }

    fn options(&self, gates: &BTreeMap<String, bool>) -> InstallOptions {
        InstallOptions {
            version: Some(self.reference.version.clone()),
            checkout: self.reference.checkout.clone(),
            gates: gates.clone(),
            transform: self.transform,
            timeout: self.timeout,
            proxy: self.proxy,
        }
    }
}

impl Controller for OpenKruise {
    fn reference(&self) -> &ControllerRef {
        &self.reference
    }

    fn has_gate(&self, gate: &str) -> bool {
        self.reference.checkout.is_some() || has_gate(&self.reference.version, gate)
    }

    fn api_groups(&self) -> &'static [&'static str] {
        &["apps.kruise.io", "policy.kruise.io"]
    }

    fn crds<'a>(&'a self) -> BoxFuture<'a, Result<Vec<Value>, ControllerError>> {
        Box::pin(async move {
            match &self.reference.checkout {
                Some(dir) => crds_in(dir),
                None => {
                    let go = GoEnv::detect().await?;
                    let scratch = tempfile::tempdir()
                        .map_err(|e| ControllerError::io(Path::new("tmp"), e))?;
                    let files = go
                        .download(scratch.path(), MODULE, &self.reference.version, true)
                        .await?;
                    crds_in(&files.dir)
                }
            }
        })
    }

    fn prepare<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(async move {
            build_ref(toolchain, &self.reference).await?;
            Ok(())
        })
    }

    fn install<'a>(
        &'a self,
        host: Host<'a>,
        toolchain: &'a Toolchain,
        gates: &'a BTreeMap<String, bool>,
    ) -> BoxFuture<'a, Result<Installation, ControllerError>> {
        Box::pin(async move {
            let options = self.options(gates);
            let mut proxy = None;
            let components: Vec<Box<dyn Component>> = match host {
                Host::Processes(cluster) => {
                    let local = install_local(cluster, toolchain, &options).await?;
                    proxy = local.proxy;
                    std::iter::once(Box::new(local.manager) as Box<dyn Component>)
                        .chain(
                            local
                                .daemons
                                .into_iter()
                                .map(|d| Box::new(d) as Box<dyn Component>),
                        )
                        .collect()
                }
                Host::Pods(client) => {
                    vec![Box::new(
                        install_in_cluster(&client, toolchain, &options).await?,
                    )]
                }
                Host::Preinstalled(client) => {
                    vec![Box::new(verify_installed(&client, &options).await?)]
                }
            };
            Ok(Installation {
                reference: self.reference.clone(),
                components,
                proxy,
            })
        })
    }

    fn namespace(&self) -> &'static str {
        NAMESPACE
    }

    fn deployment(&self) -> Option<(&'static str, &'static str)> {
        Some((NAMESPACE, "kruise-controller-manager"))
    }

    fn node_kinds(&self) -> &'static [&'static str] {
        daemon::DAEMON_KINDS
    }

    fn e2e_suite(&self) -> Option<Box<dyn E2eSuite>> {
        Some(Box::new(e2e::Suite::of(&self.reference)))
    }

    fn build_artifacts<'a>(
        &'a self,
        toolchain: &'a Toolchain,
        extras: BuildExtras,
        built: &'a (dyn Fn(String, &Path) + Sync),
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(build_release(toolchain, &self.reference, extras, built))
    }
}

/// How to install.
#[derive(Clone, Default)]
pub struct InstallOptions {
    /// Release tag or commit (default [`DEFAULT_VERSION`]).
    pub version: Option<String>,
    /// A local checkout to build and take the manifests from instead of the module proxy.
    pub checkout: Option<PathBuf>,
    /// Manager (and daemon) feature gates in addition to `KruiseDaemon`, which the harness
    /// sets: true when the cluster has real nodes, false otherwise.
    pub gates: BTreeMap<String, bool>,
    /// Edits the rendered manifests before they are applied (tests use it to take a permission
    /// away from the manager).
    pub transform: Option<fn(&mut Vec<Value>)>,
    /// Bound for readiness (default 120 s).
    pub timeout: Option<Duration>,
    /// Local provider: the manager talks to the apiserver through a proxy
    /// ([`crate::cluster::proxy`]) started for it, whose handle the install returns
    /// ([`LocalInstall::proxy`]); its kubeconfig names the proxy, with the same token. Off by
    /// default.
    pub proxy: bool,
}

impl InstallOptions {
    /// The release tag or commit to install ([`DEFAULT_VERSION`] unless given).
    pub fn tag(&self) -> String {
        self.version
            .clone()
            .unwrap_or_else(|| DEFAULT_VERSION.into())
    }
}

impl std::fmt::Debug for InstallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallOptions")
            .field("version", &self.version)
            .field("gates", &self.gates)
            .field("transform", &self.transform.is_some())
            .field("proxy", &self.proxy)
            .finish()
    }
}

/// Renders the release's `config/default` (from the module cache) with `kubectl kustomize`.
pub async fn render(kubectl: &Path, tag: &str) -> Result<Vec<Value>, ControllerError> {
    let go = GoEnv::detect().await?;
    let scratch = tempfile::tempdir().map_err(|e| ControllerError::io(Path::new("tmp"), e))?;
    let files = go.download(scratch.path(), MODULE, tag, true).await?;
    render_dir(kubectl, &files.dir).await
}

/// [`render`] for what `options` names: a checkout's own `config/default`, or the release's.
pub async fn render_for(
    kubectl: &Path,
    tag: &str,
    options: &InstallOptions,
) -> Result<Vec<Value>, ControllerError> {
    match &options.checkout {
        Some(dir) => render_dir(kubectl, dir).await,
        None => render(kubectl, tag).await,
    }
}

/// The CRDs of a source tree: every document of `<root>/config/crd/bases/*.yaml`, by file
/// name.
pub fn crds_in(root: &Path) -> Result<Vec<Value>, ControllerError> {
    let dir = root.join("config/crd/bases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| ControllerError::io(&dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| ControllerError::io(&f, e))?;
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).map_err(|e| ControllerError::Render {
                dir: f.clone(),
                detail: e.to_string(),
            })?;
        out.extend(
            docs.into_iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition"),
        );
    }
    Ok(out)
}

/// Renders `<root>/config/default` with `kubectl kustomize`.
pub async fn render_dir(kubectl: &Path, root: &Path) -> Result<Vec<Value>, ControllerError> {
    let config = root.join("config/default");
    let out = tokio::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(&config)
        .output()
        .await
        .map_err(|e| ControllerError::io(kubectl, e))?;
    if !out.status.success() {
        return Err(ControllerError::Render {
            dir: config,
            detail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| ControllerError::Render {
            dir: config.clone(),
            detail: e.to_string(),
        })?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

/// What [`install_local`] started: the manager, a node daemon per real node, and the proxy in
/// front of the manager when [`InstallOptions::proxy`] asked for one.
#[derive(Debug)]
pub struct LocalInstall {
    /// The manager.
    pub manager: Manager,
    /// The node daemons, one per real node (none without real nodes).
    pub daemons: Vec<daemon::Daemon>,
    /// The proxy the manager talks to the apiserver through; the manager loses the apiserver
    /// when it is dropped.
    pub proxy: Option<ProxyHandle>,
}

/// Installs OpenKruise into `cluster` and waits until it is ready: CRDs established, webhook
/// configurations carrying the manager's URL and CA, the manager's readiness endpoint up, and a
/// smoke CloneSet admitted and reconciled; with real nodes, also every node daemon
/// ([`daemon::wait_ready`]). The manager only: see [`install_local`] for the daemons' handles
/// (the daemons run either way, as components of the cluster) and the proxy's (with
/// [`InstallOptions::proxy`], use [`install_local`]: this drops the proxy, and with it the
/// manager's way to the apiserver).
pub async fn install(
    cluster: &mut LocalCluster,
    toolchain: &Toolchain,
    options: &InstallOptions,
) -> Result<Manager, ControllerError> {
    Ok(install_local(cluster, toolchain, options).await?.manager)
}

/// [`install`], returning every component: the manager, and with real nodes
/// (`ClusterState::real_nodes`) the manager runs with `KruiseDaemon=true` and each real node
/// gets a daemon ([`daemon::start`]); the daemons share the manager's bound for readiness.
pub async fn install_local(
    cluster: &mut LocalCluster,
    toolchain: &Toolchain,
    options: &InstallOptions,
) -> Result<LocalInstall, ControllerError> {
    let tag = options.tag();
    let timeout = options.timeout.unwrap_or(Duration::from_secs(120));
    let started = Instant::now();
    let with_daemon = !cluster.state().real_nodes.is_empty();
    let kube_bins = toolchain
        .kubernetes(cluster.state().profile.kubernetes)
        .await?;
    let kubectl = kube_bins.path("kubectl");
    let reference = ControllerRef {
        kind: super::ControllerKind(FAMILY.name().into()),
        version: tag.clone(),
        checkout: options.checkout.clone(),
    };
    let (binary, daemon_binary, mut docs) = tokio::try_join!(
        async {
            match &options.checkout {
                Some(dir) => build_checkout(toolchain, dir).await,
                None => build(toolchain, &tag).await,
            }
            .map_err(ControllerError::from)
        },
        async {
            match with_daemon {
                true => daemon::build_ref(toolchain, &reference).await.map(Some),
                false => Ok(None),
            }
            .map_err(ControllerError::from)
        },
        render_for(&kubectl, &tag, options)
    )?;
    docs.retain(|d| !SKIPPED_KINDS.contains(&kind(d)));
    if let Some(t) = options.transform {
        t(&mut docs);
    }
    let client = cluster.client();
    apply_all(&client, &docs, timeout).await?;
    let token = super::service_account_token(&client, NAMESPACE, SERVICE_ACCOUNT).await?;
    let layout = cluster.layout().clone();
    let work = layout.work("kruise-manager");
    let (certs, log_dir) = (work.join("certs"), work.join("log"));
    for d in [&certs, &log_dir] {
        std::fs::create_dir_all(d).map_err(|e| ControllerError::io(d, e))?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&log_dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| ControllerError::io(&log_dir, e))?;
    }
    let kubeconfig = layout.kubeconfig("kruise-manager");
    let credentials = Credentials::Token(token);
    let proxy = match options.proxy {
        true => Some(proxy::start_local(cluster).await?),
        false => None,
    };
    let server = proxy
        .as_ref()
        .map_or_else(|| cluster.server().to_string(), ProxyHandle::url);
    let text = render_kubeconfig(&server, &cluster.ca_pem()?, &credentials, BINARY);
    std::fs::write(&kubeconfig, text).map_err(|e| ControllerError::io(&kubeconfig, e))?;
    let ports = Ports {
        webhook: free_port()?,
        metrics: free_port()?,
        health: free_port()?,
        pprof: free_port()?,
    };
    let gates = manager_gates_for(&options.gates, with_daemon);
    let mut spec = manager_spec(&binary, &kubeconfig, &certs, &log_dir, &ports, &gates);
    drop_unknown_flags(&mut spec, &binary, OPTIONAL_FLAGS).await;
    // A manager stopped for an upgrade leaves its lease held; the next one would wait for it
    // to expire.
    release_lease(&client).await?;
    // As its Deployment's pod would be, it is started again when it exits.
    let supervisor = cluster.spawn_supervised(&spec)?;
    let manager = Manager {
        name: spec.name.clone(),
        version: tag.clone(),
        record: supervisor.current(),
        log: layout.log(&spec.name),
        webhook_port: ports.webhook,
        health_port: ports.health,
        gates: gates.clone(),
        supervisor: Some(supervisor),
    };
    let daemons = match &daemon_binary {
        Some(binary) => daemon::start(cluster, binary, &tag, &gates).await?,
        None => vec![],
    };
    wait_ready(cluster, &manager, timeout).await?;
    let manager_ready = started.elapsed();
    daemon::wait_ready(&client, &daemons, timeout).await?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        manager_ms = manager_ready.as_millis() as u64,
        daemons = daemons.len(),
        version = tag,
        "openkruise ready"
    );
    Ok(LocalInstall {
        manager,
        daemons,
        proxy,
    })
}

/// The release's manager image (kind and k3s nodes pull it).
pub fn manager_image(tag: &str) -> String {
    format!("openkruise/kruise-manager:{tag}")
}

/// The feature gates the manager gets on a cluster without real nodes (every in-cluster
/// install too): `KruiseDaemon=false` plus `gates`.
pub fn manager_gates(gates: &BTreeMap<String, bool>) -> BTreeMap<String, bool> {
    manager_gates_for(gates, false)
}

/// The feature gates of the manager (and its node daemons): `KruiseDaemon=<with_daemon>` —
/// true only where real nodes run a daemon, since kwok nodes have none — plus `gates`.
pub fn manager_gates_for(
    gates: &BTreeMap<String, bool>,
    with_daemon: bool,
) -> BTreeMap<String, bool> {
    let mut all = gates.clone();
    all.insert("KruiseDaemon".to_string(), with_daemon);
    all
}

/// `--feature-gates=A=true,B=false`, the same on every provider.
pub fn gate_arg(gates: &BTreeMap<String, bool>) -> String {
    format!(
        "--feature-gates={}",
        gates
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// The release's manifests for a cluster with real nodes (kind, k3s): the manager Deployment
/// on the release image with the same gates as on the local provider (its own
/// `--feature-gates` replaced), and no kruise-daemon DaemonSet (`KruiseDaemon=false`).
pub fn in_cluster_manifests(
    mut docs: Vec<Value>,
    tag: &str,
    gates: &BTreeMap<String, bool>,
) -> Vec<Value> {
    docs.retain(|d| kind(d) != "DaemonSet");
    for d in docs.iter_mut().filter(|d| kind(d) == "Deployment") {
        if let Some(containers) = d["spec"]["template"]["spec"]["containers"].as_array_mut() {
            for c in containers.iter_mut().filter(|c| c["name"] == "manager") {
                c["image"] = json!(manager_image(tag));
                c["imagePullPolicy"] = json!("IfNotPresent");
                let mut args: Vec<Value> = c["args"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| {
                        !a.as_str()
                            .unwrap_or_default()
                            .starts_with("--feature-gates")
                    })
                    .collect();
                args.push(json!(gate_arg(gates)));
                c["args"] = json!(args);
            }
        }
    }
    docs
}

/// Installs OpenKruise into a cluster with real nodes (kind, k3s) as the release ships it: its
/// manifests with the manager Deployment on the release image ([`in_cluster_manifests`]),
/// then waits for the rollout, webhook CA bundles, and a smoke CloneSet.
pub async fn install_in_cluster(
    client: &kube::Client,
    toolchain: &Toolchain,
    options: &InstallOptions,
) -> Result<super::InClusterManager, ControllerError> {
    let tag = options.tag();
    let timeout = options.timeout.unwrap_or(Duration::from_secs(300));
    if let Some(dir) = &options.checkout {
        return Err(ControllerError::NotInstalled {
            detail: format!(
                "a checkout ({}) runs on the local provider only: on kind and k3s the manager \
                 runs from the release image",
                dir.display()
            ),
        });
    }
    let kubectl = toolchain
        .kubernetes(crate::toolchain::KubeVersion::default_version())
        .await?
        .path("kubectl");
    let gates = manager_gates(&options.gates);
    let mut docs = in_cluster_manifests(render_for(&kubectl, &tag, options).await?, &tag, &gates);
    if let Some(t) = options.transform {
        t(&mut docs);
    }
    apply_all(client, &docs, timeout).await?;
    let manager = super::InClusterManager {
        name: BINARY.into(),
        version: tag,
        namespace: NAMESPACE.into(),
        selector: "control-plane=controller-manager".into(),
        gates,
        client: client.clone(),
    };
    wait_in_cluster(client, &manager, timeout).await?;
    Ok(manager)
}

/// Uses the OpenKruise already installed in an existing cluster: its manager Deployment must
/// run the release the run asked for (`options.version`); nothing is installed or changed.
pub async fn verify_installed(
    client: &kube::Client,
    options: &InstallOptions,
) -> Result<super::InClusterManager, ControllerError> {
    let tag = options.tag();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), NAMESPACE);
    let d = deployments
        .get_opt("kruise-controller-manager")
        .await
        .map_err(ControllerError::kube(
            "read kruise-system/kruise-controller-manager",
        ))?
        .ok_or_else(|| ControllerError::NotInstalled {
            detail: "there is no Deployment kruise-system/kruise-controller-manager; install the \
                     release first (the existing provider never installs into a cluster it did \
                     not create)"
                .into(),
        })?;
    let image = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.iter().find(|c| c.name == "manager"))
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let running = image.rsplit(':').next().unwrap_or_default();
    if running != tag {
        return Err(ControllerError::NotInstalled {
            detail: format!(
                "the cluster runs {image}, not {tag}; pass --controller openkruise@{running} or \
                 install {tag}"
            ),
        });
    }
    let manager = super::InClusterManager {
        name: BINARY.into(),
        version: tag,
        namespace: NAMESPACE.into(),
        selector: "control-plane=controller-manager".into(),
        gates: BTreeMap::new(),
        client: client.clone(),
    };
    wait_in_cluster(
        client,
        &manager,
        options.timeout.unwrap_or(Duration::from_secs(120)),
    )
    .await?;
    Ok(manager)
}

/// Whether every webhook of both configurations has a CA bundle (the in-cluster manager
/// writes them itself).
pub async fn webhooks_have_ca(client: &kube::Client) -> Result<(), String> {
    for (name, cc) in webhook_client_configs(client).await? {
        if cc.ca_bundle.as_ref().is_none_or(|b| b.0.is_empty()) {
            return Err(format!("webhook {name} has no caBundle yet"));
        }
    }
    Ok(())
}

/// Every webhook of the release's two webhook configurations, with its client config.
async fn webhook_client_configs(
    client: &kube::Client,
) -> Result<Vec<(String, WebhookClientConfig)>, String> {
    let mwc: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let vwc: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let m = mwc
        .get(MUTATING_WEBHOOKS)
        .await
        .map_err(|e| e.to_string())?;
    let v = vwc
        .get(VALIDATING_WEBHOOKS)
        .await
        .map_err(|e| e.to_string())?;
    Ok(m.webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| (w.name, w.client_config))
        .chain(
            v.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config)),
        )
        .collect())
}

async fn wait_in_cluster(
    client: &kube::Client,
    manager: &super::InClusterManager,
    timeout: Duration,
) -> Result<(), ControllerError> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), NAMESPACE);
    let deployments = &deployments;
    let steps: Vec<Step<'_>> = vec![
        (
            "manager rollout",
            Box::new(move || {
                async move {
                    let d = deployments
                        .get("kruise-controller-manager")
                        .await
                        .map_err(|e| e.to_string())?;
                    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    let s = d.status.unwrap_or_default();
                    if s.observed_generation >= d.metadata.generation
                        && s.updated_replicas == Some(want)
                        && s.available_replicas == Some(want)
                    {
                        Ok(true)
                    } else {
                        Err(format!(
                            "updated {:?} available {:?} of {want}",
                            s.updated_replicas, s.available_replicas
                        ))
                    }
                }
                .boxed()
            }),
        ),
        (
            "webhook configurations",
            Box::new(move || webhooks_have_ca(client).map_ok(|_| true).boxed()),
        ),
    ];
    let ready = Readiness {
        client,
        version: &manager.version,
        timeout,
        interval: Duration::from_millis(500),
        smoke_image: SMOKE_IMAGE,
    };
    let whole = super::Window::all();
    ready.wait(steps, || manager.check(&whole).boxed()).await
}

/// The manager's loopback ports.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// Webhook server (HTTPS).
    pub webhook: u16,
    /// Metrics.
    pub metrics: u16,
    /// Health and readiness probes.
    pub health: u16,
    /// pprof.
    pub pprof: u16,
}

/// The manager's leader-election lease (`--leader-election-id`, in [`NAMESPACE`]).
pub const LEASE: &str = "kruise-manager";

/// Deletes the manager's lease, if there is one.
async fn release_lease(client: &kube::Client) -> Result<(), ControllerError> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    match leases.delete(LEASE, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(ControllerError::Kube {
            action: format!("delete the lease {NAMESPACE}/{LEASE}"),
            source: e,
        }),
    }
}

/// Flags of [`manager_spec`] that not every release has (v1.5.0 lacks
/// `--protection-log-path`); a manager exits on an unknown flag.
const OPTIONAL_FLAGS: &[&str] = &["--protection-log-path"];

/// Leaves out of `spec` the flags of `optional` that `binary`'s `--help` does not list.
async fn drop_unknown_flags(spec: &mut ComponentSpec, binary: &Path, optional: &[&str]) {
    let help = crate::toolchain::help_text(binary)
        .await
        .unwrap_or_default();
    if help.is_empty() {
        return;
    }
    spec.args.retain(|a| {
        let flag = a.split('=').next().unwrap_or(a);
        !optional.contains(&flag) || help.contains(&format!("{flag} "))
    });
}

/// The manager process as data. Leader election is on, as the release ships it, with a renew
/// deadline that survives a loaded machine (the release's 10 s made a manager on a busy
/// 2-core host exit with "leader election lost" mid-run).
pub fn manager_spec(
    binary: &Path,
    kubeconfig: &Path,
    certs: &Path,
    log_dir: &Path,
    ports: &Ports,
    gates: &BTreeMap<String, bool>,
) -> ComponentSpec {
    ComponentSpec {
        name: "kruise-manager".into(),
        binary: binary.to_path_buf(),
        args: vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-addr=127.0.0.1:{}", ports.metrics),
            format!("--health-probe-addr=127.0.0.1:{}", ports.health),
            "--enable-pprof=true".into(),
            format!("--pprof-addr=127.0.0.1:{}", ports.pprof),
            "--enable-leader-election=true".into(),
            format!("--leader-election-namespace={NAMESPACE}"),
            "--leader-election-lease-duration=60s".into(),
            "--leader-election-renew-deadline=45s".into(),
            "--leader-election-retry-period=5s".into(),
            format!("--protection-log-path={}", log_dir.display()),
            gate_arg(gates),
        ],
        env: vec![
            ("KUBECONFIG".into(), kubeconfig.display().to_string()),
            ("POD_NAMESPACE".into(), NAMESPACE.into()),
            ("WEBHOOK_HOST".into(), "127.0.0.1".into()),
            ("WEBHOOK_PORT".into(), ports.webhook.to_string()),
            ("WEBHOOK_CERT_DIR".into(), certs.display().to_string()),
        ],
        clear_env: false,
        dir: None,
    }
}

/// Whether every webhook of both configurations points at the manager's URL with a CA.
pub async fn webhooks_patched(client: &kube::Client, port: u16) -> Result<(), String> {
    let prefix = format!("https://127.0.0.1:{port}/");
    for (name, cc) in webhook_client_configs(client).await? {
        let url = cc.url.unwrap_or_default();
        if !url.starts_with(&prefix) {
            return Err(format!("webhook {name} has url {url:?}, want {prefix}..."));
        }
        if cc.ca_bundle.as_ref().is_none_or(|b| b.0.is_empty()) {
            return Err(format!("webhook {name} has no caBundle"));
        }
    }
    Ok(())
}

async fn wait_ready(
    cluster: &LocalCluster,
    manager: &Manager,
    timeout: Duration,
) -> Result<(), ControllerError> {
    let client = &cluster.client();
    let steps: Vec<Step<'_>> = vec![
        (
            "manager /readyz",
            Box::new(move || {
                async move {
                    match http_get_status(manager.health_port, "/readyz").await? {
                        200 => Ok(true),
                        code => Err(format!("HTTP {code}")),
                    }
                }
                .boxed()
            }),
        ),
        (
            "webhook configurations",
            Box::new(move || {
                webhooks_patched(client, manager.webhook_port)
                    .map_ok(|_| true)
                    .boxed()
            }),
        ),
    ];
    // A cluster of real nodes only pulls from its own registry: the harness's busybox.
    let real_only = cluster.state().profile.nodes.is_empty();
    let ready = Readiness {
        client,
        version: &manager.version,
        timeout,
        interval: Duration::from_millis(200),
        smoke_image: if real_only {
            crate::toolchain::images::BUSYBOX_V1_IMAGE
        } else {
            SMOKE_IMAGE
        },
    };
    ready
        .wait(steps, || {
            futures::future::ready(manager.check_process(&super::Window::all())).boxed()
        })
        .await
}

/// A named readiness probe: `Ok(true)` when the step is done, `Err` with what it saw.
type Step<'a> = (
    &'static str,
    Box<dyn Fn() -> BoxFuture<'a, Result<bool, String>> + Send + Sync + 'a>,
);

/// How a manager is waited on, wherever it runs.
struct Readiness<'a> {
    client: &'a kube::Client,
    version: &'a str,
    timeout: Duration,
    interval: Duration,
    /// The smoke CloneSet's image.
    smoke_image: &'a str,
}

/// The smoke CloneSet's image where nodes pull from public registries or do not pull.
const SMOKE_IMAGE: &str = "nginx:1.25";

impl Readiness<'_> {
    /// Runs `steps` in order, then a smoke CloneSet, each a [`wait::poll`] within one overall
    /// bound; `alive` is asked on every evaluation, so a manager that exited, restarted or was
    /// denied by its RBAC is reported as such (its own error), not as a timeout.
    async fn wait<'b>(
        &self,
        steps: Vec<Step<'b>>,
        alive: impl Fn() -> BoxFuture<'b, Result<(), ControllerError>>,
    ) -> Result<(), ControllerError> {
        let deadline = Instant::now() + self.timeout;
        let smoke_ns = tokio::sync::Mutex::new(None::<String>);
        let dead = std::sync::Mutex::new(None::<ControllerError>);
        let names = steps.iter().map(|(n, _)| *n).chain(["smoke CloneSet"]);
        let mut result = Ok(());
        for (i, name) in names.enumerate() {
            let what = format!("openkruise {} ({name})", self.version);
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = wait::poll(&what, left, self.interval, || async {
                if let Err(e) = alive().await {
                    let text = e.to_string();
                    *dead.lock().expect("not poisoned") = Some(e);
                    return Check::Failed(text);
                }
                let outcome = match steps.get(i) {
                    Some((_, probe)) => probe().await,
                    None => smoke(self.client, self.smoke_image, &mut *smoke_ns.lock().await).await,
                };
                match outcome {
                    Ok(true) => Check::Met,
                    Ok(false) => Check::Pending("not yet".into()),
                    Err(e) => Check::Pending(e),
                }
            })
            .await;
            if let Err(e) = waited {
                result = Err(match dead.lock().expect("not poisoned").take() {
                    Some(typed) => typed,
                    None => ControllerError::Wait(e),
                });
                break;
            }
        }
        if let Some(ns) = smoke_ns.into_inner() {
            let nss: Api<Namespace> = Api::all(self.client.clone());
            let _ = nss.delete(&ns, &DeleteParams::background()).await;
        }
        result
    }
}

/// Creates (once) and checks a one-replica CloneSet: `Ok(true)` once it is admitted and ready.
async fn smoke(
    client: &kube::Client,
    image: &str,
    ns: &mut Option<String>,
) -> Result<bool, String> {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "CloneSet");
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| e.to_string())?;
    let name = match ns {
        Some(n) => n.clone(),
        None => {
            let n = format!("harness-smoke-{:06x}", rand::random::<u32>() & 0xffffff);
            let nss: Api<Namespace> = Api::all(client.clone());
            nss.create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": n}})).expect("valid"),
            )
            .await
            .map_err(|e| e.to_string())?;
            *ns = Some(n.clone());
            n
        }
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &name, &ar);
    // Created (again) until it is admitted: a webhook that is not serving yet refuses it.
    let cs = match api.get("smoke").await {
        Ok(cs) => cs,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            api.create(&PostParams::default(), &smoke_cloneset(image))
                .await
                .map_err(|e| format!("smoke CloneSet refused: {e}"))?;
            return Err("smoke CloneSet created".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    let status = &cs.data["status"];
    let ready = status["readyReplicas"].as_i64() == Some(1)
        && status["observedGeneration"].as_i64() == cs.metadata.generation;
    if ready {
        Ok(true)
    } else {
        Err(format!("smoke CloneSet status {status}"))
    }
}

/// The CloneSet readiness creates: one replica of `image`.
fn smoke_cloneset(image: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "smoke"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "smoke"}},
            "template": {
                "metadata": {"labels": {"app": "smoke"}},
                "spec": {"containers": [{
                    "name": "main",
                    "image": image,
                }]}
            }
        }
    }))
    .expect("valid")
}

#[cfg(test)]
mod tests {

    #[tokio::test]
    async fn a_health_endpoint_answers_with_its_status_code() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut requests = vec![];
            for reply in ["200 OK", "503 Service Unavailable"] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 1024];
                let n = s.read(&mut buf).await.unwrap();
                requests.push(String::from_utf8_lossy(&buf[..n]).to_string());
                let body = "ok";
                s.write_all(
                    format!(
                        "HTTP/1.1 {reply}\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            }
            requests
        });
        assert_eq!(http_get_status(port, "/readyz").await, Ok(200));
        assert_eq!(http_get_status(port, "/healthz").await, Ok(503));
        let requests = server.await.unwrap();
        assert!(
            requests[0].starts_with("GET /readyz HTTP/1.1\r\n"),
            "{requests:?}"
        );
        assert!(requests[1].contains("host: 127.0.0.1:"), "{requests:?}");
        // Nothing listening: the error names where.
        drop(requests);
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let err = http_get_status(port, "/readyz").await.unwrap_err();
        assert!(
            err.contains(&format!("connect to 127.0.0.1:{port}")),
            "{err}"
        );
    }

    #[test]
    fn gates_are_the_registered_ones_by_their_strings() {
        let source = "const (\n\t// KruiseDaemon enables ...\n\tKruiseDaemon featuregate.Feature = \"KruiseDaemon\"\n\
            \tEnhancedLivenessProbeGate featuregate.Feature = \"EnhancedLivenessProbe\"\n\
            \tForceDeleteTimeoutExpectationFeatureGate = \"ForceDeleteTimeoutExpectationGate\"\n\
            \tDeclaredOnly featuregate.Feature = \"DeclaredOnly\"\n)\n\n\
            var defaultFeatureGates = map[featuregate.Feature]featuregate.FeatureSpec{\n\
            \tKruiseDaemon:      {Default: true, PreRelease: featuregate.Beta},\n\n\
            \tEnhancedLivenessProbeGate:                {Default: false, PreRelease: featuregate.Alpha},\n\
            \tForceDeleteTimeoutExpectationFeatureGate: {Default: false, PreRelease: featuregate.Alpha},\n}\n\n\
            func init() {\n\tx := map[string]int{\n\tNotAGate: {1},\n}\n}\n";
        assert_eq!(
            gates_in(source),
            [
                "EnhancedLivenessProbe",
                "ForceDeleteTimeoutExpectationGate",
                "KruiseDaemon"
            ]
        );
        assert!(gates_in("package features\n").is_empty());
    }

    #[test]
    fn a_pre_release_lacks_the_gates_its_release_brings() {
        let gate = "RecreatePodWhenChangeVCTInCloneSetGate";
        assert!(!has_gate("v1.7.0-rc.1", gate));
        assert!(!has_gate("v1.6.3", gate));
        assert!(has_gate("v1.7.0", gate));
        assert!(has_gate("v1.10.0", gate));
        assert!(
            has_gate("4c2bbcec", gate),
            "a commit is newer than the table"
        );
    }

    #[tokio::test]
    async fn flags_a_release_lacks_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let old = crate::testing::script(
            dir.path(),
            "kruise-manager",
            "echo '      --metrics-addr string   The address.'\n",
        );
        let ports = Ports {
            webhook: 1,
            metrics: 2,
            health: 3,
            pprof: 4,
        };
        let p = Path::new("/x");
        let mut spec = manager_spec(&old, p, p, p, &ports, &BTreeMap::new());
        assert!(
            spec.args
                .iter()
                .any(|a| a.starts_with("--protection-log-path="))
        );
        drop_unknown_flags(&mut spec, &old, OPTIONAL_FLAGS).await;
        assert!(
            !spec
                .args
                .iter()
                .any(|a| a.starts_with("--protection-log-path="))
        );
        assert!(spec.args.iter().any(|a| a.starts_with("--metrics-addr=")));
    }

    use super::*;

    #[test]
    fn the_daemon_gate_follows_the_real_nodes() {
        let asked = BTreeMap::from([
            ("ImagePullJobGate".to_string(), true),
            ("KruiseDaemon".to_string(), true),
        ]);
        let kwok_only = manager_gates_for(&asked, false);
        assert_eq!(
            kwok_only.get("KruiseDaemon"),
            Some(&false),
            "no daemon on kwok nodes"
        );
        assert_eq!(kwok_only.get("ImagePullJobGate"), Some(&true));
        assert_eq!(manager_gates(&asked), kwok_only);
        let real = manager_gates_for(&BTreeMap::new(), true);
        assert_eq!(gate_arg(&real), "--feature-gates=KruiseDaemon=true");
    }

    #[test]
    fn manager_runs_on_loopback_with_the_daemon_off() {
        let spec = manager_spec(
            Path::new("/BIN/kruise-manager"),
            Path::new("/C/kubeconfigs/kruise-manager.kubeconfig"),
            Path::new("/C/certs"),
            Path::new("/C/log"),
            &Ports {
                webhook: 1,
                metrics: 2,
                health: 3,
                pprof: 4,
            },
            &BTreeMap::from([
                ("KruiseDaemon".to_string(), false),
                ("RecreatePodWhenChangeVCTInCloneSetGate".to_string(), true),
            ]),
        );
        assert!(
            spec.args.contains(
                &"--feature-gates=KruiseDaemon=false,RecreatePodWhenChangeVCTInCloneSetGate=true"
                    .to_string()
            )
        );
        for a in &spec.args {
            if a.contains("-addr=") {
                assert!(a.contains("=127.0.0.1:"), "{a}");
            }
        }
        assert!(
            spec.env
                .contains(&("WEBHOOK_HOST".into(), "127.0.0.1".into()))
        );
        assert!(spec.env.contains(&("WEBHOOK_PORT".into(), "1".into())));
    }
}
