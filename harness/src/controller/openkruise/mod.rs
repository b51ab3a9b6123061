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
//!
//! Here: the release's facts (module, gates, names) and the [`Controller`] implementation; beside
//! it, `build.rs` (the manager's build), `manifests.rs` (rendering), `local.rs` (the local
//! install), `in_cluster.rs` (kind, k3s, existing), `ready.rs` (readiness and the smoke
//! CloneSet), [`daemon`] (the node daemon) and [`e2e`] (the release's own suite).

mod build;
pub mod daemon;
pub mod e2e;
mod in_cluster;
mod local;
mod manifests;
mod ready;

pub use build::*;
pub use in_cluster::*;
pub use local::*;
pub use manifests::*;
pub use ready::*;

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
use crate::cluster::local::pki::{Credentials, render_kubeconfig};
use crate::cluster::local::{LocalCluster, free_port};
use crate::cluster::proxy::{self, ProxyHandle};
use crate::process::ComponentSpec;
use crate::toolchain::images::{ImageName, ImageRecipe};
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

    fn gate_defaults<'a>(
        &'a self,
        go: &'a GoEnv,
        reference: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<BTreeMap<String, bool>, ControllerError>> {
        Box::pin(gate_defaults(go, reference))
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
    let (file, source) = features(go, reference).await?;
    let mut gates = gates_in(&source);
    if gates.is_empty() {
        return Err(ControllerError::NoGates { file });
    }
    gates.extend(["AllAlpha".to_string(), "AllBeta".to_string()]);
    gates.sort();
    Ok(gates)
}

/// The manager feature gates `reference` knows, each with its default, read from [`FEATURES`]
/// as [`gates`] reads them (by [`gate_defaults_in`]; `AllAlpha` and `AllBeta` left out).
pub async fn gate_defaults(
    go: &GoEnv,
    reference: &ControllerRef,
) -> Result<BTreeMap<String, bool>, ControllerError> {
    let (file, source) = features(go, reference).await?;
    let defaults = gate_defaults_in(&source);
    if defaults.is_empty() {
        return Err(ControllerError::NoGates { file });
    }
    Ok(defaults)
}

/// [`FEATURES`] of `reference`'s checkout or module: its path and text.
async fn features(
    go: &GoEnv,
    reference: &ControllerRef,
) -> Result<(PathBuf, String), ControllerError> {
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
    Ok((file, source))
}

/// The gates a `kruise_features.go` registers with their defaults: each key of its
/// `defaultFeatureGates` map (named as [`gates_in`] names it) with the `Default:` of its spec.
/// A gate whose default the source does not spell as `true` or `false` is left out.
pub fn gate_defaults_in(source: &str) -> BTreeMap<String, bool> {
    use std::sync::LazyLock;
    static ENTRY: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?m)^\s*(\w+)\s*:\s*\{\s*Default:\s*(true|false)\b").expect("valid")
    });
    let names = gates_in(source);
    let defaults = source
        .split_once("defaultFeatureGates")
        .map(|(_, rest)| rest.split_once("\n}").map_or(rest, |(map, _)| map))
        .unwrap_or_default();
    let constants = gates_in_constants(source);
    ENTRY
        .captures_iter(defaults)
        .filter_map(|c| {
            let (_, [key, default]) = c.extract();
            let name = constants.get(key).copied().unwrap_or(key).to_string();
            names.contains(&name).then(|| (name, default == "true"))
        })
        .collect()
}

/// The gates a `kruise_features.go` registers: the keys of its `defaultFeatureGates` map,
/// each the string of the constant it names (`EnhancedLivenessProbeGate` is
/// `"EnhancedLivenessProbe"`). Sorted.
pub fn gates_in(source: &str) -> Vec<String> {
    use std::sync::LazyLock;
    static KEY: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"(?m)^\s*(\w+)\s*:\s*\{").expect("valid"));
    let constants = gates_in_constants(source);
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

/// The string constants a Go source declares (`EnhancedLivenessProbeGate featuregate.Feature =
/// "EnhancedLivenessProbe"`): name to value.
fn gates_in_constants(source: &str) -> BTreeMap<&str, &str> {
    use std::sync::LazyLock;
    static CONSTANT: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"(?m)^\s*(\w+)\s+(?:featuregate\.Feature\s*)?=\s*"([^"]+)""#)
            .expect("valid")
    });
    CONSTANT
        .captures_iter(source)
        .map(|c| {
            let (_, [name, value]) = c.extract();
            (name, value)
        })
        .collect()
}

/// Whether release `tag` is `first` or a later one (a pre-release of `first` is earlier).
fn since(tag: &str, first: &str) -> bool {
    use crate::toolchain::versions::Version;
    match (tag.parse::<Version>(), first.parse::<Version>()) {
        (Ok(tag), Ok(first)) => tag >= first,
        _ => false,
    }
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

    fn builds(&self, real_nodes: bool) -> Vec<crate::toolchain::BuildKey> {
        use crate::toolchain::BuildKey;
        // A checkout is rebuilt every time, with Go's build cache: nothing to name.
        if self.reference.checkout.is_some() {
            return vec![];
        }
        let version = &self.reference.version;
        let mut out = vec![BuildKey::new(BINARY, version)];
        if real_nodes {
            out.push(BuildKey::new(daemon::BINARY, version));
        }
        out
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

    fn images<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<Vec<crate::toolchain::BuiltImage>, ControllerError>> {
        Box::pin(async move {
            let (manager, daemon) = tokio::try_join!(
                build_ref(toolchain, &self.reference),
                daemon::build_ref(toolchain, &self.reference),
            )?;
            let read = |p: &Path| std::fs::read(p).map_err(|e| ControllerError::io(p, e));
            let recipe = release_image(&self.reference.version, read(&manager)?, read(&daemon)?);
            Ok(vec![toolchain.image(recipe).await?])
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
        let defaults = gate_defaults_in(source);
        assert_eq!(
            defaults.into_iter().collect::<Vec<_>>(),
            [
                ("EnhancedLivenessProbe".to_string(), false),
                ("ForceDeleteTimeoutExpectationGate".to_string(), false),
                ("KruiseDaemon".to_string(), true)
            ]
        );
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
