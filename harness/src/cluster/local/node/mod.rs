//! Real nodes of a local cluster: a kubelet from the cluster's own Kubernetes build beside a
//! containerd of its own (Debian's containerd, runc and CNI plugins), on a bridge of its own.
//! Start with [`RealNode`]: [`RealNode::plan`] picks its names and addresses, the `*_config`
//! functions render its files (pure, checked by unit tests), [`RealNode::prepare`] makes its
//! directories, certificates, bridge and cgroups, and the `*_spec` functions describe its two
//! processes. What the host must offer real nodes (and what its cgroups say of their pods) is
//! read in [`probe`]; [`RealNode::cleanup`] in [`teardown`] removes everything a node made —
//! also from a record left by a killed run (`harness gc`).
//!
//! What a node makes outside its directory, all named after its random id:
//! - `/run/harness/<id>`: containerd's state (sockets, runc state, network namespaces) and
//!   the kubelet's root directory (pod volumes, its sockets), short enough for unix sockets;
//! - the bridge `hb<id>` with the node's address (the node's InternalIP; the kubelet listens
//!   there), and a veth per pod;
//! - the cgroup `harness-<id>` in every cgroup hierarchy (the kubelet's `cgroupRoot`);
//! - the CNI network `harness-<id>`'s iptables rules (hostPort DNAT), tagged with its name.

pub mod probe;
pub mod teardown;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::LocalError;
use super::registry::Mirror;
use crate::cluster::NodeSpec;
use crate::process::ComponentSpec;
use crate::toolchain::versions::KubeVersion;

/// The label that marks real nodes (kwok's are `type=kwok`).
pub const REAL_NODE_LABEL: (&str, &str) = ("harness.io/node", "real");

/// The taint every real node registers with, so that only pods that ask for a real node (by
/// tolerating it) land there; the other scenarios of a cluster keep to the kwok nodes.
pub const REAL_NODE_TAINT: &str = "harness.io/real-node=true:NoSchedule";

/// The sandbox (pod infra) image every real node's containerd uses.
pub const SANDBOX_IMAGE: &str = "harness.local/pause:3.10";

/// The host programs a real node runs or calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTools {
    /// containerd.
    pub containerd: PathBuf,
    /// runc.
    pub runc: PathBuf,
    /// The CNI plugins' directory.
    pub cni_bin_dir: PathBuf,
}

/// One real node: its names, addresses and directories. Recorded in the cluster state so that
/// [`RealNode::cleanup`] can run from any process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealNode {
    /// Node name.
    pub name: String,
    /// Node labels (zone, ...), the real-node label included.
    pub labels: BTreeMap<String, String>,
    /// Random id (8 hex digits) in every host-wide name.
    pub id: String,
    /// Its directory inside the cluster's.
    pub dir: PathBuf,
    /// containerd's state directory (`/run/harness/<id>`).
    pub run_dir: PathBuf,
    /// The second and third octet of its pod subnet `10.a.b.0/24`; the node is `10.a.b.1`.
    pub subnet: [u8; 2],
    /// The kubelet's port on the node address.
    pub kubelet_port: u16,
    /// Whether it registers with [`REAL_NODE_TAINT`].
    #[serde(default = "tainted")]
    pub tainted: bool,
}

fn tainted() -> bool {
    true
}

/// Where the `/run` directories of real nodes live.
pub const RUN_ROOT: &str = "/run/harness";

/// A symlink to `/run` that node agents find the runtime socket under (OpenKruise's daemon
/// looks in `/hostvarrun`, where its DaemonSet mounts the host's `/var/run`). Made by the
/// controller that needs it; removed with the host's last real node.
pub const RUNTIME_DIR_LINK: &str = "/hostvarrun";

impl RealNode {
    /// Plans node `spec` of the cluster in `cluster_dir`: a fresh id, a /24 that no route of
    /// this host and no node in `taken` uses, and the kubelet's port.
    pub fn plan(
        cluster_dir: &Path,
        spec: &NodeSpec,
        tainted: bool,
        taken: &[[u8; 2]],
        kubelet_port: u16,
    ) -> Result<Self, LocalError> {
        let routes = fs::read_to_string("/proc/net/route").unwrap_or_default();
        let subnet =
            free_subnet(&routes, taken, rand::random::<u16>()).ok_or_else(|| LocalError::Host {
                what: "find a free /24 for a real node's pods in 10.200.0.0/14".into(),
                fix: "remove routes of 10.200.0.0/14 or leftover bridges (`harness gc`)".into(),
            })?;
        let id = format!("{:08x}", rand::random::<u32>());
        let mut labels = spec.labels.clone();
        labels.insert(REAL_NODE_LABEL.0.into(), REAL_NODE_LABEL.1.into());
        Ok(Self {
            name: spec.name.clone(),
            labels,
            dir: cluster_dir.join("nodes").join(&spec.name),
            run_dir: Path::new(RUN_ROOT).join(&id),
            id,
            subnet,
            kubelet_port,
            tainted,
        })
    }

    /// The node's address (the bridge's, the pods' gateway).
    pub fn ip(&self) -> String {
        format!("10.{}.{}.1", self.subnet[0], self.subnet[1])
    }

    /// Its pod subnet.
    pub fn cidr(&self) -> String {
        format!("10.{}.{}.0/24", self.subnet[0], self.subnet[1])
    }

    /// The bridge's name (at most 15 characters).
    pub fn bridge(&self) -> String {
        format!("hb{}", self.id)
    }

    /// The CNI network's name (also in the comments of its iptables rules).
    pub fn network(&self) -> String {
        format!("harness-{}", self.id)
    }

    /// The kubelet's cgroup root.
    pub fn cgroup(&self) -> String {
        format!("harness-{}", self.id)
    }

    /// containerd's socket.
    pub fn socket(&self) -> PathBuf {
        self.run_dir.join("containerd.sock")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// containerd's configuration: root under the node directory, state, sockets, runc's
    /// state and network namespaces under [`RealNode::run_dir`], the CNI configuration of
    /// this node only, every image pulled from the cluster's registry (`mirror`), and
    /// `restrict_oom_score_adj` (the host may lack CAP_SYS_RESOURCE).
    pub fn containerd_config(&self, tools: &HostTools, mirror: &Mirror) -> String {
        let q = |p: &Path| toml_str(&p.display().to_string());
        let run = &self.run_dir;
        format!(
            r#"version = 2
root = {root}
state = {state}
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = {socket}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  sandbox_image = {sandbox}
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {cni_bin}
    conf_dir = {cni_conf}
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      BinaryName = {runc}
      Root = {runc_root}
{registry}"#,
            root = q(&self.file("containerd")),
            state = q(run),
            socket = q(&self.socket()),
            opt = q(&self.file("containerd-opt")),
            sandbox = toml_str(SANDBOX_IMAGE),
            cni_bin = q(&tools.cni_bin_dir),
            cni_conf = q(&self.file("cni")),
            runc = q(&tools.runc),
            runc_root = q(&run.join("runc")),
            registry = mirror.cri_registry_toml(),
        )
    }

    /// The CNI network: a bridge with the node as gateway, host-local addresses from the
    /// node's /24 (state in the node directory), and portmap for hostPorts.
    pub fn cni_conflist(&self) -> String {
        serde_json::to_string_pretty(&serde_json::json!({
            "cniVersion": "1.0.0",
            "name": self.network(),
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge(),
                    "isGateway": true,
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.cidr(), "gateway": self.ip()}]],
                        "dataDir": self.file("cni-ipam").display().to_string(),
                    }
                },
                {"type": "portmap", "capabilities": {"portMappings": true}}
            ]
        }))
        .expect("serializes")
    }

    /// The kubelet's configuration: listening on the node address only, client-certificate and
    /// webhook authentication (anonymous off), webhook authorization, the cgroupfs driver under
    /// the node's own cgroup root, its own log and plugin directories, no iptables chains of
    /// its own, no disk-pressure evictions, and the cluster's feature `gates` (a kubelet
    /// takes part in most of them, InPlacePodVerticalScaling for one).
    pub fn kubelet_config(
        &self,
        ca: &Path,
        version: &KubeVersion,
        gates: &BTreeMap<String, bool>,
    ) -> String {
        let mut config = serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.ip(),
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 0,
            "authentication": {
                "anonymous": {"enabled": false},
                "webhook": {"enabled": true},
                "x509": {"clientCAFile": ca.display().to_string()},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": format!("/{}", self.cgroup()),
            "failSwapOn": false,
            "oomScoreAdj": 0,
            "containerRuntimeEndpoint": format!("unix://{}", self.socket().display()),
            "podLogsDir": self.file("pod-logs").display().to_string(),
            "volumePluginDir": self.file("volume-plugins").display().to_string(),
            "makeIPTablesUtilChains": false,
            "resolvConf": "",
            // The service address a cluster DNS would have; none runs, but pods get the
            // resolv.conf of a real cluster and no MissingClusterDNS warning.
            "clusterDNS": ["10.96.0.10"],
            "clusterDomain": "cluster.local",
            // No disk-pressure evictions (as kind does): the host's disk is shared with
            // everything else on it, and a full disk is not what a scenario tests.
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "0%",
                "nodefs.inodesFree": "0%",
                "imagefs.available": "0%",
                "imagefs.inodesFree": "0%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": false,
            // No pull rate limit: every pull is served by the cluster's own registry, and the
            // default (5 a second, bursts of 10) refused pulls with "pull QPS exceeded" when
            // several scenarios started pods on the node at once.
            "registryPullQPS": 0,
            "registerNode": true,
        });
        if self.tainted {
            config["registerWithTaints"] = serde_json::json!([{
                "key": "harness.io/real-node",
                "value": "true",
                "effect": "NoSchedule",
            }]);
        }
        if !gates.is_empty() {
            config["featureGates"] = serde_json::json!(gates);
        }
        // From 1.31 a kubelet refuses cgroup v1 unless told otherwise.
        if version.minor >= 31 {
            config["failCgroupV1"] = serde_json::json!(false);
        }
        serde_json::to_string_pretty(&config).expect("serializes")
    }

    /// containerd, as `containerd-<node>`.
    pub fn containerd_spec(&self, tools: &HostTools) -> ComponentSpec {
        ComponentSpec {
            name: format!("containerd-{}", self.name),
            binary: tools.containerd.clone(),
            args: vec![format!(
                "--config={}",
                self.file("containerd.toml").display()
            )],
            env: vec![],
            clear_env: false,
            dir: None,
        }
    }

    /// The kubelet, as `kubelet-<node>`, registering with the node's labels.
    pub fn kubelet_spec(&self, kubelet: &Path) -> ComponentSpec {
        let labels = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        ComponentSpec {
            name: format!("kubelet-{}", self.name),
            binary: kubelet.to_path_buf(),
            args: vec![
                format!("--config={}", self.file("kubelet.json").display()),
                format!("--kubeconfig={}", self.file("kubeconfig").display()),
                // Its sockets (pod resources, plugin registration) need a short path.
                format!("--root-dir={}", self.run_dir.join("kubelet").display()),
                format!("--cert-dir={}", self.file("kubelet-pki").display()),
                format!("--hostname-override={}", self.name),
                format!("--node-ip={}", self.ip()),
                format!("--node-labels={labels}"),
                "--v=1".into(),
            ],
            env: vec![],
            clear_env: false,
            dir: None,
        }
    }

    /// Makes the node's directories and files (`kubeconfig` is written by the caller), its
    /// bridge (with the node address) and its cgroup root.
    pub fn prepare(
        &self,
        tools: &HostTools,
        ca: &Path,
        version: &KubeVersion,
        gates: &BTreeMap<String, bool>,
        mirror: &Mirror,
    ) -> Result<(), LocalError> {
        for d in [
            self.dir.clone(),
            self.file("cni"),
            self.file("cni-ipam"),
            self.run_dir.clone(),
        ] {
            fs::create_dir_all(&d).map_err(|e| LocalError::io(&d, e))?;
        }
        for (name, body) in [
            ("containerd.toml", self.containerd_config(tools, mirror)),
            ("kubelet.json", self.kubelet_config(ca, version, gates)),
            ("cni/10-harness.conflist", self.cni_conflist()),
        ] {
            let p = self.file(name);
            fs::write(&p, body).map_err(|e| LocalError::io(&p, e))?;
        }
        let bridge = self.bridge();
        ip(&["link", "add", "name", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{}/24", self.ip()), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for h in probe::cgroup_hierarchies() {
            let d = h.join(self.cgroup());
            fs::create_dir_all(&d).map_err(|e| LocalError::io(&d, e))?;
            if h.ends_with("cpuset") {
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let v =
                        fs::read_to_string(h.join(f)).map_err(|e| LocalError::io(&h.join(f), e))?;
                    fs::write(d.join(f), v).map_err(|e| LocalError::io(&d.join(f), e))?;
                }
            }
        }
        Ok(())
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The (destination, mask) of every route in `routes` (the text of `/proc/net/route`) but the
/// default, as host-order numbers.
pub(crate) fn routed(routes: &str) -> Vec<(u32, u32)> {
    routes
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dest = u32::from_str_radix(f.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(f.get(7)?, 16).ok()?;
            // /proc/net/route prints addresses in host (little-endian) byte order.
            Some((u32::from_be(dest.to_le()), u32::from_be(mask.to_le())))
        })
        .filter(|(_, mask)| *mask != 0)
        .collect()
}

/// A /24 `10.a.b.0` in 10.200.0.0/14 that no route in `routes` (the text of
/// `/proc/net/route`) overlaps and `taken` does not hold, starting the search at `start`.
pub fn free_subnet(routes: &str, taken: &[[u8; 2]], start: u16) -> Option<[u8; 2]> {
    let used = routed(routes);
    (0..1024u16)
        .map(|i| (start.wrapping_add(i)) % 1024)
        .map(|i| [200 + (i / 256) as u8, (i % 256) as u8])
        .find(|s| {
            let net = u32::from_be_bytes([10, s[0], s[1], 0]);
            !taken.contains(s)
                && !used
                    .iter()
                    .any(|(dest, mask)| net & mask == *dest || dest & 0xffff_ff00 == net)
        })
}

/// Runs `ip` with `args`.
fn ip(args: &[&str]) -> Result<(), LocalError> {
    run_host("ip", args).map(|_| ())
}

pub(crate) fn run_host(program: &str, args: &[&str]) -> Result<String, LocalError> {
    let out = std::process::Command::new(program)
        .args(args)
        .env("PATH", host_path())
        .output()
        .map_err(|e| LocalError::Host {
            what: format!("run `{program} {}`: {e}", args.join(" ")),
            fix: "install it (see `harness cluster up --help` for real nodes' packages)".into(),
        })?;
    if !out.status.success() {
        return Err(LocalError::Host {
            what: format!(
                "`{program} {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            fix: "real nodes need root with CAP_NET_ADMIN; see docs/providers/real-nodes.md".into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn host_path() -> String {
    let mut p = std::env::var("PATH").unwrap_or_default();
    for d in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        if !p.split(':').any(|x| x == d) {
            p.push(':');
            p.push_str(d);
        }
    }
    p
}

/// Where every kubelet of a host binds its device-plugin registration socket, whatever its
/// `--root-dir` (kubelet's `pluginapi.KubeletSocket`).
pub const DEVICE_PLUGIN_SOCKET: &str = "/var/lib/kubelet/device-plugins/kubelet.sock";

/// Which socket file [`DEVICE_PLUGIN_SOCKET`] is now (inode and change time), if any: a
/// kubelet that bound it anew makes another.
pub fn device_plugin_socket() -> Option<(u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(DEVICE_PLUGIN_SOCKET)
        .ok()
        .map(|m| (m.ino(), m.ctime(), m.ctime_nsec()))
}

/// The file under [`RUN_ROOT`] whose lock is the turn to start a kubelet ([`kubelet_turn`]),
/// removed with the host's last real node.
pub const KUBELET_TURN: &str = "kubelet-start.lock";

/// The host-wide turn to start a kubelet (an exclusive lock on a file under [`RUN_ROOT`],
/// waited for), released when dropped: kubelets that start at once race for
/// [`DEVICE_PLUGIN_SOCKET`].
pub async fn kubelet_turn() -> Result<std::fs::File, LocalError> {
    let dir = Path::new(RUN_ROOT);
    std::fs::create_dir_all(dir).map_err(|e| LocalError::io(dir, e))?;
    let path = dir.join(KUBELET_TURN);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| LocalError::io(&path, e))?;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(LocalError::io(&path, e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> RealNode {
        RealNode {
            name: "real-node-0".into(),
            labels: BTreeMap::from([
                ("topology.kubernetes.io/zone".into(), "zone-a".into()),
                (REAL_NODE_LABEL.0.into(), REAL_NODE_LABEL.1.into()),
            ]),
            id: "0a1b2c3d".into(),
            dir: "/c/nodes/real-node-0".into(),
            run_dir: "/run/harness/0a1b2c3d".into(),
            subnet: [201, 7],
            kubelet_port: 10250,
            tainted: true,
        }
    }

    fn tools() -> HostTools {
        HostTools {
            containerd: "/usr/bin/containerd".into(),
            runc: "/usr/sbin/runc".into(),
            cni_bin_dir: probe::CNI_BIN_DIR.into(),
        }
    }

    #[test]
    fn names_fit_the_kernel_limits() {
        let n = node();
        assert!(n.bridge().len() <= 15, "{}", n.bridge());
        // sun_path holds 108 bytes.
        assert!(n.socket().as_os_str().len() < 108);
        assert_eq!(n.ip(), "10.201.7.1");
        assert_eq!(n.cidr(), "10.201.7.0/24");
    }

    #[test]
    fn containerd_keeps_its_state_and_networks_to_the_node() {
        let mirror = Mirror {
            port: 5443,
            ca: "/c/pki/ca.crt".into(),
        };
        let c = node().containerd_config(&tools(), &mirror);
        for line in [
            "root = \"/c/nodes/real-node-0/containerd\"",
            "state = \"/run/harness/0a1b2c3d\"",
            "address = \"/run/harness/0a1b2c3d/containerd.sock\"",
            "restrict_oom_score_adj = true",
            "netns_mounts_under_state_dir = true",
            "sandbox_image = \"harness.local/pause:3.10\"",
            "conf_dir = \"/c/nodes/real-node-0/cni\"",
            "Root = \"/run/harness/0a1b2c3d/runc\"",
            "endpoint = [\"https://127.0.0.1:5443\"]",
            "ca_file = \"/c/pki/ca.crt\"",
        ] {
            assert!(c.lines().any(|l| l.trim() == line), "{line} in\n{c}");
        }
    }

    #[test]
    fn the_kubelet_listens_on_the_node_address_and_refuses_anonymous_users() {
        let v: serde_json::Value = serde_json::from_str(&node().kubelet_config(
            Path::new("/c/pki/ca.crt"),
            &"1.32".parse().unwrap(),
            &BTreeMap::from([("InPlacePodVerticalScaling".into(), true)]),
        ))
        .unwrap();
        assert_eq!(v["address"], "10.201.7.1");
        assert_eq!(v["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(v["authorization"]["mode"], "Webhook");
        assert_eq!(v["cgroupRoot"], "/harness-0a1b2c3d");
        assert_eq!(v["failCgroupV1"], false);
        assert_eq!(v["healthzBindAddress"], "127.0.0.1");
        assert_eq!(v["featureGates"]["InPlacePodVerticalScaling"], true);
        let old: serde_json::Value = serde_json::from_str(&node().kubelet_config(
            Path::new("/ca"),
            &"1.29".parse().unwrap(),
            &BTreeMap::new(),
        ))
        .unwrap();
        assert!(old.get("failCgroupV1").is_none());
        assert!(old.get("featureGates").is_none());
        // Tainted unless it is one of the cluster's only nodes.
        assert_eq!(v["registerWithTaints"][0]["key"], "harness.io/real-node");
        let untainted = RealNode {
            tainted: false,
            ..node()
        };
        let u: serde_json::Value = serde_json::from_str(&untainted.kubelet_config(
            Path::new("/ca"),
            &"1.32".parse().unwrap(),
            &BTreeMap::new(),
        ))
        .unwrap();
        assert!(u.get("registerWithTaints").is_none(), "{u}");
    }

    #[test]
    fn the_cni_network_is_named_after_the_node_and_maps_host_ports() {
        let v: serde_json::Value = serde_json::from_str(&node().cni_conflist()).unwrap();
        assert_eq!(v["name"], "harness-0a1b2c3d");
        assert_eq!(v["plugins"][0]["bridge"], "hb0a1b2c3d");
        assert_eq!(
            v["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.201.7.0/24"
        );
        assert_eq!(v["plugins"][1]["type"], "portmap");
    }

    #[test]
    fn a_free_subnet_avoids_routes_and_taken_ones() {
        // 10.200.0.0/24 routed (little-endian hex as /proc/net/route prints it).
        let routes = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
                      eth0\t0000C80A\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
                      eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n";
        assert_eq!(free_subnet(routes, &[], 0), Some([200, 1]));
        assert_eq!(free_subnet(routes, &[[200, 1]], 0), Some([200, 2]));
        // A /8 over all of 10/8 leaves nothing.
        let all = "h\neth0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\n";
        assert_eq!(free_subnet(all, &[], 5), None);
    }
}
