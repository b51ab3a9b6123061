//! OpenKruise's node daemon (`kruise-daemon`) on the real nodes of a local cluster: built from
//! the same release module as the manager (`cmd/daemon`), one local process per real node,
//! pointed at that node's containerd. Start with [`start`] and [`wait_ready`], which
//! [`install_local`](super::install_local) calls when the cluster has real nodes; each running
//! daemon is a [`Daemon`], a [`Component`] of the installation.
//!
//! What the release's DaemonSet gives the daemon, and what it gets here instead:
//! - the host's `/var/run` mounted at `/hostvarrun`, where every release looks for the CRI
//!   socket (`--socket-file` is a name inside it): here `/hostvarrun` is a symlink to `/run`
//!   ([`link_var_run`]) and `--socket-file` names the node's socket below `/run`
//!   ([`socket_file`]);
//! - `NODE_NAME` from the pod's node: the real node's name;
//! - host networking with healthz/metrics on `:10221` and pprof on `:10222`: free ports on
//!   127.0.0.1, pprof off where the release can turn it off (`--enable-pprof`, not in v1.5);
//! - the `kruise-daemon` ServiceAccount: a kubeconfig holding a token of it, so the daemon runs
//!   with the RBAC the release ships (`kruise-daemon-role`).
//!
//! Ready means: `/healthz` answers 200 — the daemon's own report that its informers for its
//! node's NodeImage, ContainerRecreateRequests and NodePodProbes have synced. Settled
//! ([`Component::settled`]) means its node's NodeImage exists too: the manager makes one per
//! node with `KruiseDaemon=true`, but only `--nodeimage-creation-delay` (30 s by default) after
//! the node turned Ready, and only image pulls go through it, so installing does not wait for
//! it; what pulls images (the upstream suite, a user's `cluster up`) waits for it, and the
//! catalog's pull scenarios wait for their nodes' NodeImages themselves. The NodeImage's status
//! is no signal: a v1.9 daemon writes an empty one at start (`desired: 0`), a v1.5 daemon's
//! empty status is a no-op update, so the status stays absent until a pull.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use super::{MODULE, gate_arg, http_get_status};
use crate::cluster::local::node::RealNode;
use crate::cluster::local::pki::{Credentials, render_kubeconfig};
use crate::cluster::local::{LocalCluster, LocalError, free_port};
use crate::controller::{Component, ControllerError, ControllerRef, Window, check_local_process};
use crate::process::{ComponentSpec, ProcRecord};
use crate::toolchain::{Toolchain, ToolchainError};
use crate::wait::{self, Check};

/// The daemon's main package in the release module (the same path from v1.5.0 to v1.9.x).
pub const PACKAGE: &str = "github.com/openkruise/kruise/cmd/daemon";
/// The binary name in the cache, and the stem of each daemon's component name.
pub const BINARY: &str = "kruise-daemon";
/// The daemon's ServiceAccount (in [`NAMESPACE`]), as the release ships it.
pub const SERVICE_ACCOUNT: &str = "kruise-daemon";
/// Where every release looks for the container runtime's socket: the release's DaemonSet
/// mounts the host's `/var/run` there.
pub const VAR_RUN_MOUNT: &str = crate::cluster::local::node::RUNTIME_DIR_LINK;
/// What [`VAR_RUN_MOUNT`] stands for on the host (`/var/run` is a link to it).
pub const HOST_RUN: &str = "/run";
/// Flags of [`daemon_spec`] that not every release has; a daemon exits on an unknown flag.
/// Without `--enable-pprof` (v1.5) pprof is always on, on the loopback port given.
pub const OPTIONAL_FLAGS: &[&str] = &["--enable-pprof"];

/// Builds (or finds) the daemon at `tag`, from the same module and `go.mod` as the manager.
pub async fn build(toolchain: &Toolchain, tag: &str) -> Result<PathBuf, ToolchainError> {
    toolchain
        .module_package(MODULE, PACKAGE, tag, BINARY, true)
        .await
}

/// The daemon for `reference`: a release or commit from the module proxy, or a checkout.
pub async fn build_ref(
    toolchain: &Toolchain,
    reference: &ControllerRef,
) -> Result<PathBuf, ToolchainError> {
    match &reference.checkout {
        Some(dir) => toolchain.build_checkout(dir, "./cmd/daemon", BINARY).await,
        None => build(toolchain, &reference.version).await,
    }
}

/// A daemon's loopback ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaemonPorts {
    /// `/healthz` and `/metrics` (`--addr`).
    pub health: u16,
    /// pprof (`--pprof-addr`; off where the release has `--enable-pprof`).
    pub pprof: u16,
}

/// The component name of the daemon on node `node` (also its log file's stem).
pub fn component_name(node: &str) -> String {
    format!("{BINARY}-{node}")
}

/// `--socket-file` for a containerd socket: its path below [`HOST_RUN`], which the daemon
/// reaches through [`VAR_RUN_MOUNT`].
pub fn socket_file(socket: &Path) -> Result<String, LocalError> {
    socket
        .strip_prefix(HOST_RUN)
        .ok()
        .filter(|rest| !rest.as_os_str().is_empty())
        .map(|rest| rest.display().to_string())
        .ok_or_else(|| LocalError::Host {
            what: format!(
                "point kruise-daemon at the CRI socket {}: it is not below {HOST_RUN}",
                socket.display()
            ),
            fix: format!(
                "every kruise-daemon release finds its runtime under {VAR_RUN_MOUNT} (the \
                 host's /var/run); keep real nodes' sockets below {HOST_RUN}"
            ),
        })
}

/// The daemon of node `node` as data: kubeconfig and node name from the environment as the
/// release's DaemonSet sets them, the node's CRI socket, loopback-only listeners, and the same
/// feature gates as the manager.
pub fn daemon_spec(
    binary: &Path,
    node: &str,
    kubeconfig: &Path,
    socket_file: &str,
    ports: &DaemonPorts,
    gates: &BTreeMap<String, bool>,
) -> ComponentSpec {
    ComponentSpec {
        name: component_name(node),
        binary: binary.to_path_buf(),
        args: vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--socket-file={socket_file}"),
            format!("--addr=127.0.0.1:{}", ports.health),
            "--enable-pprof=false".into(),
            format!("--pprof-addr=127.0.0.1:{}", ports.pprof),
            gate_arg(gates),
        ],
        env: vec![
            ("KUBECONFIG".into(), kubeconfig.display().to_string()),
            ("NODE_NAME".into(), node.into()),
        ],
        clear_env: false,
        dir: None,
    }
}

/// Makes `at` (normally [`VAR_RUN_MOUNT`]) a symlink to `target` ([`HOST_RUN`]) unless it
/// already leads there. It is shared by every daemon of every cluster on the host; the last
/// real node's cleanup removes it ([`crate::cluster::local::node::RealNode::cleanup`]).
pub fn link_var_run(at: &Path, target: &Path) -> Result<(), LocalError> {
    let leads_there = |at: &Path| match (std::fs::canonicalize(at), std::fs::canonicalize(target)) {
        (Ok(a), Ok(t)) => a == t,
        _ => false,
    };
    if leads_there(at) {
        return Ok(());
    }
    let conflict = |detail: String| LocalError::Host {
        what: format!(
            "give kruise-daemon its runtime directory {}: {detail}",
            at.display()
        ),
        fix: format!(
            "remove {} or make it a symlink to {} (the daemon finds the CRI socket there, as \
             the release's DaemonSet mounts the host's /var/run)",
            at.display(),
            target.display()
        ),
    };
    match std::os::unix::fs::symlink(target, at) {
        Ok(()) => Ok(()),
        // Another cluster made it meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && leads_there(at) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let what = std::fs::read_link(at)
                .map(|l| format!("it is a symlink to {}", l.display()))
                .unwrap_or_else(|_| "it exists and is not a symlink".into());
            Err(conflict(what))
        }
        Err(e) => Err(conflict(e.to_string())),
    }
}

/// A running daemon on one real node.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// Component name ([`component_name`]).
    pub name: String,
    /// The real node it serves.
    pub node: String,
    /// Release tag.
    pub version: String,
    /// The process.
    pub record: ProcRecord,
    /// Its log file.
    pub log: PathBuf,
    /// Its `/healthz` port.
    pub health_port: u16,
}

impl Component for Daemon {
    fn name(&self) -> &str {
        &self.name
    }

    fn check<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(async move { self.check_process(window) })
    }

    fn log(&self) -> Option<&Path> {
        Some(&self.log)
    }

    fn settled<'a>(
        &'a self,
        client: &'a kube::Client,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(async move {
            let images = node_images(client);
            let what = format!("{}'s NodeImage {}", self.name, self.node);
            self.wait_for(&what, timeout, || node_image_check(&images, self))
                .await
        })
    }
}

impl Daemon {
    /// Polls `check` up to `timeout`; a daemon that died meanwhile fails with its own error
    /// (log tail, denial, panic) rather than the wait's.
    async fn wait_for<F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        check: F,
    ) -> Result<(), ControllerError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Check>,
    {
        if let Err(e) = wait::poll(what, timeout, Duration::from_millis(200), check).await {
            self.check_process(&Window::all())?;
            return Err(e.into());
        }
        Ok(())
    }

    /// Fails if the daemon exited (with its log tail) or its log shows RBAC denials of its
    /// ServiceAccount or a panic, within `window`.
    pub fn check_process(&self, window: &Window) -> Result<(), ControllerError> {
        check_local_process(&self.name, &self.version, &self.record, &self.log, window)
    }
}

/// Starts a daemon on every real node of `cluster`: makes the `/hostvarrun` link, writes a
/// kubeconfig holding a token of [`SERVICE_ACCOUNT`] (applied with the release's manifests
/// before), and spawns each daemon as a component of the cluster.
pub async fn start(
    cluster: &mut LocalCluster,
    binary: &Path,
    version: &str,
    gates: &BTreeMap<String, bool>,
) -> Result<Vec<Daemon>, ControllerError> {
    let nodes: Vec<RealNode> = cluster.state().real_nodes.clone();
    if nodes.is_empty() {
        return Ok(vec![]);
    }
    link_var_run(Path::new(VAR_RUN_MOUNT), Path::new(HOST_RUN))?;
    let token = crate::controller::service_account_token(
        &cluster.client(),
        super::NAMESPACE,
        SERVICE_ACCOUNT,
    )
    .await?;
    let layout = cluster.layout().clone();
    let kubeconfig = layout.kubeconfig(BINARY);
    let text = render_kubeconfig(
        cluster.server(),
        &cluster.ca_pem()?,
        &Credentials::Token(token),
        BINARY,
    );
    std::fs::write(&kubeconfig, text).map_err(|e| ControllerError::io(&kubeconfig, e))?;
    let mut daemons = vec![];
    for node in &nodes {
        let ports = DaemonPorts {
            health: free_port()?,
            pprof: free_port()?,
        };
        let socket = socket_file(&node.socket())?;
        let mut spec = daemon_spec(binary, &node.name, &kubeconfig, &socket, &ports, gates);
        super::drop_unknown_flags(&mut spec, binary, OPTIONAL_FLAGS).await;
        let record = cluster.spawn_component(&spec)?;
        daemons.push(Daemon {
            log: layout.log(&spec.name),
            name: spec.name,
            node: node.name.clone(),
            version: version.into(),
            record,
            health_port: ports.health,
        });
    }
    Ok(daemons)
}

/// The NodeImage kind (v1alpha1 is served by every release from v1.5 on).
fn node_images(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "NodeImage");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// What one daemon shows: alive and `/healthz` 200.
async fn daemon_check(d: &Daemon) -> Check {
    if let Err(e) = d.check_process(&Window::all()) {
        return Check::Failed(e.to_string());
    }
    match http_get_status(d.health_port, "/healthz").await {
        Ok(200) => Check::Met,
        Ok(code) => Check::Pending(format!("{}: /healthz HTTP {code}", d.name)),
        Err(e) => Check::Pending(format!("{}: /healthz {e}", d.name)),
    }
}

/// Whether the daemon's node has its NodeImage (and the daemon is still alive).
async fn node_image_check(images: &Api<DynamicObject>, d: &Daemon) -> Check {
    if let Err(e) = d.check_process(&Window::all()) {
        return Check::Failed(e.to_string());
    }
    match images.get_opt(&d.node).await {
        Ok(Some(_)) => Check::Met,
        Ok(None) => Check::Pending(format!(
            "{}: no NodeImage {} yet (the manager makes it with KruiseDaemon=true, \
             --nodeimage-creation-delay after the node turned Ready)",
            d.name, d.node
        )),
        Err(e) => Check::Pending(format!("{}: read NodeImage {}: {e}", d.name, d.node)),
    }
}

/// Waits until every daemon is ready (see the module docs), failing at once with a daemon's
/// own error when it exits, is denied by its RBAC or panics.
pub async fn wait_ready(daemons: &[Daemon], timeout: Duration) -> Result<(), ControllerError> {
    for d in daemons {
        let what = format!("{} {} ready", d.name, d.version);
        d.wait_for(&what, timeout, || daemon_check(d)).await?;
    }
    Ok(())
}

/// The APIs kruise-daemon acts for on its node (pulling images, recreating containers,
/// probing): without the daemon (no real node), objects of these kinds are never served.
pub const DAEMON_KINDS: &[&str] = &[
    "ContainerRecreateRequest",
    "ImagePullJob",
    "ImageListPullJob",
    "NodeImage",
    "NodePodProbe",
    "PodProbeMarker",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ComponentSpec {
        daemon_spec(
            Path::new("/BIN/kruise-daemon"),
            "real-0",
            Path::new("/C/kubeconfigs/kruise-daemon.kubeconfig"),
            "harness/0123abcd/containerd.sock",
            &DaemonPorts {
                health: 1,
                pprof: 2,
            },
            &BTreeMap::from([
                ("KruiseDaemon".to_string(), true),
                ("ImagePullJobGate".to_string(), true),
            ]),
        )
    }

    #[test]
    fn the_daemon_listens_on_loopback_only_and_serves_its_node() {
        let s = spec();
        assert_eq!(s.name, "kruise-daemon-real-0");
        let addrs: Vec<&String> = s.args.iter().filter(|a| a.contains("addr=")).collect();
        assert_eq!(
            addrs,
            ["--addr=127.0.0.1:1", "--pprof-addr=127.0.0.1:2"],
            "healthz/metrics and pprof, both on loopback"
        );
        assert!(s.args.contains(&"--enable-pprof=false".to_string()));
        assert!(
            s.args
                .contains(&"--socket-file=harness/0123abcd/containerd.sock".to_string())
        );
        assert!(
            s.args
                .contains(&"--feature-gates=ImagePullJobGate=true,KruiseDaemon=true".to_string())
        );
        assert!(s.env.contains(&("NODE_NAME".into(), "real-0".into())));
        assert!(s.env.contains(&(
            "KUBECONFIG".into(),
            "/C/kubeconfigs/kruise-daemon.kubeconfig".into()
        )));
    }

    #[test]
    fn the_socket_is_named_below_the_run_directory() {
        assert_eq!(
            socket_file(Path::new("/run/harness/0123abcd/containerd.sock")).unwrap(),
            "harness/0123abcd/containerd.sock"
        );
        let e = socket_file(Path::new("/var/lib/x/containerd.sock")).unwrap_err();
        assert!(e.to_string().contains("not below /run"), "{e}");
        assert!(socket_file(Path::new("/run")).is_err());
    }

    #[tokio::test]
    async fn flags_an_older_daemon_lacks_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let old = crate::testing::script(
            dir.path(),
            "kruise-daemon",
            "echo '      --pprof-addr string   The address the pprof binds to.'\n",
        );
        let mut s = spec();
        super::super::drop_unknown_flags(&mut s, &old, OPTIONAL_FLAGS).await;
        assert!(!s.args.iter().any(|a| a.starts_with("--enable-pprof")));
        assert!(s.args.contains(&"--pprof-addr=127.0.0.1:2".to_string()));
        assert!(s.args.iter().any(|a| a.starts_with("--socket-file=")));
    }

    #[test]
    fn the_runtime_directory_is_linked_once_and_a_stranger_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run");
        std::fs::create_dir(&target).unwrap();
        let at = dir.path().join("hostvarrun");
        link_var_run(&at, &target).unwrap();
        assert_eq!(std::fs::read_link(&at).unwrap(), target);
        link_var_run(&at, &target).unwrap();
        let stranger = dir.path().join("stranger");
        std::fs::create_dir(&stranger).unwrap();
        let e = link_var_run(&stranger, &target).unwrap_err().to_string();
        assert!(e.contains("exists and is not a symlink"), "{e}");
        assert!(e.contains("remove"), "{e}");
    }
}
