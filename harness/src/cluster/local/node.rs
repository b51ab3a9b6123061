//! Real nodes of a local cluster: a kubelet from the cluster's own Kubernetes build beside a
//! containerd of its own (Debian's containerd, runc and CNI plugins), on a bridge of its own.
//! Start with [`RealNode`]: [`RealNode::plan`] picks its names and addresses, the `*_config`
//! functions render its files (pure, checked by unit tests), [`RealNode::prepare`] makes its
//! directories, certificates, bridge and cgroups, the `*_spec` functions describe its two
//! processes, and [`RealNode::cleanup`] removes everything it made — also from a record left by
//! a killed run (`harness gc`).
//!
//! What a node makes outside its directory, all named after its random id:
//! - `/run/harness/<id>`: containerd's state (sockets, runc state, network namespaces) and
//!   the kubelet's root directory (pod volumes, its sockets), short enough for unix sockets;
//! - the bridge `hb<id>` with the node's address (the node's InternalIP; the kubelet listens
//!   there), and a veth per pod;
//! - the cgroup `harness-<id>` in every cgroup hierarchy (the kubelet's `cgroupRoot`);
//! - the CNI network `harness-<id>`'s iptables rules (hostPort DNAT), tagged with its name.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::LocalError;
use super::components::ComponentSpec;
use crate::cluster::NodeSpec;
use crate::cluster::registry::Mirror;
use crate::toolchain::host::DebianPackage;
use crate::toolchain::versions::KubeVersion;

/// The label that marks real nodes (kwok's are `type=kwok`).
pub const REAL_NODE_LABEL: (&str, &str) = ("harness.io/node", "real");

/// The taint every real node registers with, so that only pods that ask for a real node (by
/// tolerating it) land there; the other scenarios of a cluster keep to the kwok nodes.
pub const REAL_NODE_TAINT: &str = "harness.io/real-node=true:NoSchedule";

/// The sandbox (pod infra) image every real node's containerd uses.
pub const SANDBOX_IMAGE: &str = "harness.local/pause:3.10";

/// Where the CNI plugins of Debian's `containernetworking-plugins` live.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// Debian packages a real node needs, with the binary that stands for each and the
/// directories searched besides `PATH`.
pub const PACKAGES: &[(DebianPackage, &[&str])] = &[
    (
        DebianPackage {
            package: "containerd",
            binaries: &["containerd"],
        },
        &[],
    ),
    (
        DebianPackage {
            package: "runc",
            binaries: &["runc"],
        },
        &[],
    ),
    (
        DebianPackage {
            package: "containernetworking-plugins",
            // Not `bridge`: iproute2 has a command of that name.
            binaries: &["host-local"],
        },
        &[CNI_BIN_DIR],
    ),
    (
        DebianPackage {
            package: "iptables",
            binaries: &["iptables"],
        },
        &["/usr/sbin", "/sbin"],
    ),
    (
        DebianPackage {
            package: "iproute2",
            binaries: &["ip"],
        },
        &["/usr/sbin", "/sbin", "/bin"],
    ),
];

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

/// Whether `path` is a symlink to `/run`.
fn links_to_run(path: &Path) -> bool {
    fs::read_link(path).is_ok_and(|t| t == Path::new("/run"))
}

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
        for h in cgroup_hierarchies() {
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

    /// Removes everything the node made outside the cluster directory, whatever state it is
    /// in: the processes in its cgroups and containerd's shims are killed, mounts under its
    /// directories unmounted, its iptables rules, bridge, cgroups and `/run` directory
    /// removed. Its kubelet and containerd must be stopped first. Returns every error met.
    pub fn cleanup(&self) -> Vec<String> {
        let mut errors = vec![];
        kill_shims(&self.socket());
        for h in cleanup_hierarchies() {
            kill_cgroup_tree(&h.join(self.cgroup()));
        }
        for root in [&self.run_dir, &self.dir] {
            errors.extend(unmount_under(root));
        }
        errors.extend(remove_iptables_rules(&self.network()));
        if Path::new("/sys/class/net").join(self.bridge()).exists()
            && let Err(e) = ip(&["link", "delete", &self.bridge()])
        {
            errors.push(e.to_string());
        }
        for h in cleanup_hierarchies() {
            errors.extend(remove_cgroup_tree(&h.join(self.cgroup())));
        }
        errors.extend(remove_container_log_links(&self.dir));
        if self.run_dir.exists()
            && let Err(e) = crate::toolchain::cache::make_writable_and_remove(&self.run_dir)
        {
            errors.push(format!("remove {}: {e}", self.run_dir.display()));
        }
        // The shared parent and link go with the host's last real node.
        let _ = fs::remove_dir(RUN_ROOT);
        let link = Path::new(RUNTIME_DIR_LINK);
        if !Path::new(RUN_ROOT).exists()
            && links_to_run(link)
            && let Err(e) = fs::remove_file(link)
        {
            errors.push(format!("remove {}: {e}", link.display()));
        }
        errors
    }
}

impl RealNode {
    /// What of this node is still on the host: processes in its cgroups, its containerd's
    /// shims, mounts under its directories, its bridge, iptables rules and cgroups, its `/run`
    /// directory and container log links. Empty once [`RealNode::cleanup`] has run.
    pub fn leftovers(&self) -> Vec<String> {
        let mut out = vec![];
        let sock = self.socket().display().to_string();
        for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains("containerd-shim") && text.contains(&sock) {
                out.push(format!("shim process {}", e.file_name().to_string_lossy()));
            }
        }
        for h in cleanup_hierarchies() {
            let d = h.join(self.cgroup());
            if d.exists() {
                out.push(format!("cgroup {}", d.display()));
            }
        }
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for root in [&self.run_dir, &self.dir] {
            out.extend(
                mounts_under(&info, root)
                    .into_iter()
                    .map(|m| format!("mount {}", m.display())),
            );
        }
        if Path::new("/sys/class/net").join(self.bridge()).exists() {
            out.push(format!("bridge {}", self.bridge()));
        }
        if let Ok(save) = run_host("iptables-save", &["-t", "nat"]) {
            out.extend(
                save.lines()
                    .filter(|l| l.contains(&self.network()))
                    .map(|l| format!("iptables rule {l}")),
            );
        }
        if self.run_dir.exists() {
            out.push(format!("directory {}", self.run_dir.display()));
        }
        if !Path::new(RUN_ROOT).exists() && links_to_run(Path::new(RUNTIME_DIR_LINK)) {
            out.push(format!("symlink {RUNTIME_DIR_LINK}"));
        }
        for e in fs::read_dir(CONTAINER_LOG_LINKS)
            .into_iter()
            .flatten()
            .flatten()
        {
            if fs::read_link(e.path()).is_ok_and(|t| t.starts_with(&self.dir)) {
                out.push(format!("log link {}", e.path().display()));
            }
        }
        out
    }
}

/// Checks what real nodes need of the host that no package brings: root, the overlay
/// filesystem, cgroups and the cgroup controllers a kubelet sets limits with.
pub fn check_kernel() -> Result<(), LocalError> {
    kernel_problem(&Host {
        root: nix::unistd::geteuid().is_root(),
        filesystems: fs::read_to_string("/proc/filesystems").unwrap_or_default(),
        cgroups: fs::read_to_string("/proc/cgroups").unwrap_or_default(),
        hierarchies: cgroup_hierarchies().len(),
    })
    .map_or(Ok(()), Err)
}

/// What [`kernel_problem`] looks at.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// Whether the harness runs as root.
    pub root: bool,
    /// `/proc/filesystems`.
    pub filesystems: String,
    /// `/proc/cgroups` (the controllers the kernel has, and whether each is enabled).
    pub cgroups: String,
    /// How many cgroup hierarchies are mounted under `/sys/fs/cgroup`.
    pub hierarchies: usize,
}

/// The cgroup controllers a kubelet needs (it refuses to start without them).
pub const CGROUP_CONTROLLERS: &[&str] = &["cpu", "cpuacct", "cpuset", "memory", "pids"];

/// The first thing `host` lacks for real nodes, named with the way to get it.
pub fn kernel_problem(host: &Host) -> Option<LocalError> {
    let problem = |what: &str, fix: &str| {
        Some(LocalError::Host {
            what: what.into(),
            fix: fix.into(),
        })
    };
    if !host.root {
        return problem(
            "real nodes need root (a kubelet and containerd manage cgroups, mounts and network \
             devices)",
            "run the harness as root, or drop --real-nodes",
        );
    }
    if !host
        .filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"))
    {
        return problem(
            "the kernel has no overlay filesystem (containerd's snapshotter needs it)",
            "load it with `modprobe overlay`",
        );
    }
    if host.hierarchies == 0 {
        return problem(
            "no cgroup hierarchy is mounted under /sys/fs/cgroup",
            "mount cgroups (v1 controllers or v2) under /sys/fs/cgroup",
        );
    }
    // `/proc/cgroups`: subsys_name hierarchy num_cgroups enabled (cgroup v1 and v2 alike;
    // on v2 `cpuacct` is part of `cpu` and absent).
    let enabled: Vec<&str> = host
        .cgroups
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == "1").then_some(f[0])
        })
        .collect();
    let v2 = !host.cgroups.lines().any(|l| l.starts_with("cpuacct"));
    let missing: Vec<&str> = CGROUP_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !(enabled.contains(c) || (v2 && *c == "cpuacct")))
        .collect();
    if !missing.is_empty() {
        return problem(
            &format!(
                "the kernel's cgroup controllers {} are missing or disabled (a kubelet sets \
                 pod limits with them)",
                missing.join(", ")
            ),
            "boot with them enabled (`cgroup_enable=` on the kernel command line, no \
             `cgroup_disable=`), or run on a host that has them",
        );
    }
    None
}

/// The limits the host's cgroups put on a pod, or on one of its containers, on a real node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory limit in bytes (None: unlimited).
    pub memory: Option<u64>,
    /// CPU quota in microseconds per period (None: unlimited).
    pub cpu_quota: Option<u64>,
    /// CPU period in microseconds.
    pub cpu_period: u64,
}

impl CgroupLimits {
    /// The CPU limit in millicores (None: unlimited).
    pub fn cpu_millis(&self) -> Option<u64> {
        self.cpu_quota.map(|q| q * 1000 / self.cpu_period.max(1))
    }
}

/// The cgroup limits of pod `uid` — or, with `container` (its ID, with or without the
/// `containerd://` prefix), of that container — on whichever real node of this host runs it
/// (each node's cgroups sit under a root of their own, and pod UIDs are unique). cgroup v1
/// and v2.
pub fn cgroup_limits(uid: &str, container: Option<&str>) -> Result<CgroupLimits, String> {
    let root = Path::new("/sys/fs/cgroup");
    let v2 = root.join("cgroup.controllers").exists();
    let memory_root = if v2 {
        root.to_path_buf()
    } else {
        root.join("memory")
    };
    let mut rel = None;
    for e in fs::read_dir(&memory_root).into_iter().flatten().flatten() {
        if !e.file_name().to_string_lossy().starts_with("harness-") {
            continue;
        }
        for qos in ["", "burstable", "besteffort"] {
            let mut d = Path::new(&e.file_name())
                .join("kubepods")
                .join(qos)
                .join(format!("pod{uid}"));
            if let Some(c) = container {
                d = d.join(c.rsplit("://").next().unwrap_or(c));
            }
            if memory_root.join(&d).is_dir() {
                rel = Some(d);
            }
        }
    }
    let rel = rel.ok_or_else(|| {
        format!(
            "no cgroup of pod {uid}{} under {}",
            container
                .map(|c| format!(" container {c}"))
                .unwrap_or_default(),
            memory_root.join("harness-*").display()
        )
    })?;
    let read = |p: PathBuf| {
        fs::read_to_string(&p)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let number = |s: &str, p: &str| s.parse::<i64>().map_err(|e| format!("{p}: {s:?}: {e}"));
    if v2 {
        let d = root.join(&rel);
        let memory = read(d.join("memory.max"))?;
        let cpu = read(d.join("cpu.max"))?;
        let (quota, period) = cpu.split_once(' ').unwrap_or((&cpu, "100000"));
        return Ok(CgroupLimits {
            memory: (memory != "max")
                .then(|| number(&memory, "memory.max"))
                .transpose()?
                .map(|m| m as u64),
            cpu_quota: (quota != "max")
                .then(|| number(quota, "cpu.max"))
                .transpose()?
                .map(|q| q as u64),
            cpu_period: number(period, "cpu.max")? as u64,
        });
    }
    let memory = number(
        &read(memory_root.join(&rel).join("memory.limit_in_bytes"))?,
        "memory.limit_in_bytes",
    )?;
    let cpu = root.join("cpu").join(&rel);
    let quota = number(&read(cpu.join("cpu.cfs_quota_us"))?, "cpu.cfs_quota_us")?;
    let period = number(&read(cpu.join("cpu.cfs_period_us"))?, "cpu.cfs_period_us")?;
    Ok(CgroupLimits {
        // v1 says "unlimited" with the largest page-aligned value.
        memory: (memory < 1 << 62).then_some(memory as u64),
        cpu_quota: (quota > 0).then_some(quota as u64),
        cpu_period: period as u64,
    })
}

/// Where every kubelet links its containers' logs (a path it does not let one configure).
pub const CONTAINER_LOG_LINKS: &str = "/var/log/containers";

/// Removes the links in [`CONTAINER_LOG_LINKS`] that point into `node_dir`, and the directory
/// itself once it is empty.
fn remove_container_log_links(node_dir: &Path) -> Vec<String> {
    let dir = Path::new(CONTAINER_LOG_LINKS);
    let mut errors = vec![];
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if fs::read_link(e.path()).is_ok_and(|t| t.starts_with(node_dir))
            && let Err(err) = fs::remove_file(e.path())
        {
            errors.push(format!("remove {}: {err}", e.path().display()));
        }
    }
    let _ = fs::remove_dir(dir);
    errors
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A /24 `10.a.b.0` in 10.200.0.0/14 that no route in `routes` (the text of
/// `/proc/net/route`) overlaps and `taken` does not hold, starting the search at `start`.
pub fn free_subnet(routes: &str, taken: &[[u8; 2]], start: u16) -> Option<[u8; 2]> {
    let used: Vec<(u32, u32)> = routes
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
        .collect();
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

fn run_host(program: &str, args: &[&str]) -> Result<String, LocalError> {
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
            fix: "real nodes need root with CAP_NET_ADMIN; see the README's real-nodes section"
                .into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn host_path() -> String {
    let mut p = std::env::var("PATH").unwrap_or_default();
    for d in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        if !p.split(':').any(|x| x == d) {
            p.push(':');
            p.push_str(d);
        }
    }
    p
}

/// The cgroup hierarchies a kubelet on this host uses: each v1 controller mount under
/// `/sys/fs/cgroup` (the hybrid `unified` mount aside), or `/sys/fs/cgroup` itself on v2.
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        return vec![root.to_path_buf()];
    }
    let mut out: Vec<PathBuf> = fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.join("cgroup.procs").exists()
                && !p.ends_with("unified")
                // Controllers mounted together appear once per name (cpu,cpuacct); keep the
                // real directory only.
                && !p.is_symlink()
        })
        .collect();
    out.sort();
    out
}

/// Where a node's cgroups may be: [`cgroup_hierarchies`] plus the hybrid `unified` mount,
/// under which containerd also files its tasks.
fn cleanup_hierarchies() -> Vec<PathBuf> {
    let mut out = cgroup_hierarchies();
    out.push("/sys/fs/cgroup/unified".into());
    out
}

/// Every cgroup directory under `dir`, deepest first.
fn cgroup_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if !d.is_dir() {
            continue;
        }
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
        out.push(d);
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

/// SIGKILLs every process in the cgroup tree at `dir` until none is left (bounded).
fn kill_cgroup_tree(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<i32> = cgroup_dirs(dir)
            .iter()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Removes the cgroup tree at `dir`, deepest first.
fn remove_cgroup_tree(dir: &Path) -> Vec<String> {
    let mut errors = vec![];
    for d in cgroup_dirs(dir) {
        // A cgroup whose last process just died may be busy for a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match fs::remove_dir(&d) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) if Instant::now() > deadline => {
                    errors.push(format!("remove cgroup {}: {e}", d.display()));
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    errors
}

/// SIGKILLs the containerd shims serving the containerd at `socket`.
fn kill_shims(socket: &Path) {
    let sock = socket.display().to_string();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_shim = args.first().is_some_and(|a| a.contains("containerd-shim"));
        if is_shim && args.windows(2).any(|w| w[0] == "-address" && w[1] == sock) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The mount points at or under `root`, deepest first, from `/proc/self/mountinfo` text.
pub fn mounts_under(mountinfo: &str, root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .map(PathBuf::from)
        .filter(|p| p.starts_with(root))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

fn unescape_mount_path(s: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v as char);
            i += 4;
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// Unmounts (lazily) every mount at or under `root`.
fn unmount_under(root: &Path) -> Vec<String> {
    let mut errors = vec![];
    // A mount may hide others; go round until none is left.
    for _ in 0..5 {
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = mounts_under(&info, root);
        if mounts.is_empty() {
            return errors;
        }
        errors.clear();
        for m in mounts {
            if let Err(e) = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH)
                && e != nix::errno::Errno::EINVAL
                && e != nix::errno::Errno::ENOENT
            {
                errors.push(format!("unmount {}: {e}", m.display()));
            }
        }
    }
    errors
}

/// The iptables commands that remove the rules tagged with CNI network `network` (portmap's
/// DNAT jumps), the per-container chains they jump to, and portmap's shared chains once no
/// rule is left in them. `save` is the text of `iptables-save -t nat`.
pub fn iptables_cleanup(save: &str, network: &str) -> Vec<Vec<String>> {
    let tag = format!("name: \\\"{network}\\\"");
    let mut cmds = vec![];
    let mut chains = vec![];
    let rules: Vec<&str> = save.lines().filter(|l| l.starts_with("-A ")).collect();
    for r in &rules {
        if r.contains(&tag) {
            cmds.push(delete_rule(r));
            if let Some(target) = r.split(" -j ").nth(1) {
                let target = target.split_whitespace().next().unwrap_or_default();
                if target.starts_with("CNI-DN-") {
                    chains.push(target.to_string());
                }
            }
        }
    }
    for c in &chains {
        cmds.push(vec!["-t".into(), "nat".into(), "-F".into(), c.clone()]);
        cmds.push(vec!["-t".into(), "nat".into(), "-X".into(), c.clone()]);
    }
    // portmap's shared chains, when nothing else uses them.
    let rules_left = |chain: &str| {
        rules.iter().any(|r| {
            r.starts_with(&format!("-A {chain} "))
                && !r.contains(&tag)
                && !chains.iter().any(|c| r.starts_with(&format!("-A {c} ")))
        })
    };
    if !rules.is_empty() && !rules_left("CNI-HOSTPORT-DNAT") {
        for r in &rules {
            if r.contains("-j CNI-HOSTPORT-DNAT") || r.contains("-j CNI-HOSTPORT-MASQ") {
                cmds.push(delete_rule(r));
            }
        }
        for c in [
            "CNI-HOSTPORT-DNAT",
            "CNI-HOSTPORT-MASQ",
            "CNI-HOSTPORT-SETMARK",
        ] {
            if save.lines().any(|l| l.starts_with(&format!(":{c} "))) {
                cmds.push(vec!["-t".into(), "nat".into(), "-F".into(), c.into()]);
                cmds.push(vec!["-t".into(), "nat".into(), "-X".into(), c.into()]);
            }
        }
    }
    cmds
}

/// `-A CHAIN rest...` as the arguments of `iptables -t nat -D CHAIN rest...`. iptables-save
/// quotes a rule's arguments as a POSIX shell reads them (`--comment "name: \"x\""`), so they
/// are split as a shell splits them; a rule that does not split (never seen) keeps its words
/// as they are, and the delete fails saying so.
fn delete_rule(rule: &str) -> Vec<String> {
    let rest = rule.trim_start_matches("-A ");
    let mut args = vec!["-t".to_string(), "nat".to_string(), "-D".to_string()];
    args.extend(
        shlex::split(rest).unwrap_or_else(|| rest.split_whitespace().map(String::from).collect()),
    );
    args
}

fn remove_iptables_rules(network: &str) -> Vec<String> {
    let Ok(save) = run_host("iptables-save", &["-t", "nat"]) else {
        // No iptables: nothing of ours can be there.
        return vec![];
    };
    let mut errors = vec![];
    for cmd in iptables_cleanup(&save, network) {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        // Nodes of clusters ending at the same time share portmap's chains: what another
        // cleanup removed since `save` was read is gone, which is what was wanted.
        let shared = cmd.iter().any(|a| a.starts_with("CNI-HOSTPORT-"));
        match run_host("iptables", &args) {
            Err(e) if shared && already_gone(&e.to_string()) => {}
            Err(e) => errors.push(e.to_string()),
            Ok(_) => {}
        }
    }
    errors
}

/// Whether an iptables error says the rule or chain is not there (any more).
fn already_gone(message: &str) -> bool {
    message.contains("No chain/target/match by that name")
        || message.contains("does a matching rule exist in that chain")
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
            cni_bin_dir: CNI_BIN_DIR.into(),
        }
    }

    /// `/proc/cgroups` of a cgroup v1 host with every controller.
    const CGROUPS_V1: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled
cpuset\t3\t1\t1
cpu\t4\t50\t1
cpuacct\t4\t50\t1
memory\t5\t60\t1
pids\t6\t50\t1
";

    fn host() -> Host {
        Host {
            root: true,
            filesystems: "nodev\tsysfs\nnodev\toverlay\n\text4\n".into(),
            cgroups: CGROUPS_V1.into(),
            hierarchies: 5,
        }
    }

    #[test]
    fn a_host_that_lacks_a_kernel_feature_is_told_what_and_how() {
        assert!(kernel_problem(&host()).is_none());
        // cgroup v2 has no cpuacct line; that is not a lack.
        let v2 = Host {
            cgroups: "cpuset 0 1 1\ncpu 0 1 1\nmemory 0 1 1\npids 0 1 1\n".into(),
            hierarchies: 1,
            ..host()
        };
        assert!(kernel_problem(&v2).is_none());
        let cases = [
            (
                Host {
                    root: false,
                    ..host()
                },
                "need root",
                "run the harness as root",
            ),
            (
                Host {
                    filesystems: "nodev\tsysfs\n\text4\n".into(),
                    ..host()
                },
                "no overlay filesystem",
                "modprobe overlay",
            ),
            (
                Host {
                    hierarchies: 0,
                    ..host()
                },
                "no cgroup hierarchy",
                "mount cgroups",
            ),
            (
                Host {
                    cgroups: CGROUPS_V1.replace("memory\t5\t60\t1", "memory\t0\t1\t0"),
                    ..host()
                },
                "controllers memory are missing or disabled",
                "cgroup_enable=",
            ),
            (
                Host {
                    cgroups: CGROUPS_V1.replace("pids\t6\t50\t1\n", ""),
                    ..host()
                },
                "controllers pids are missing",
                "cgroup_enable=",
            ),
        ];
        for (h, what, fix) in cases {
            let Some(LocalError::Host { what: w, fix: f }) = kernel_problem(&h) else {
                panic!("{h:?} passed");
            };
            assert!(w.contains(what), "{w}");
            assert!(f.contains(fix), "{f}");
        }
    }

    #[test]
    fn a_missing_package_is_named_with_the_install_line() {
        use crate::toolchain::host::PackagePlan;
        let empty = tempfile::tempdir().unwrap();
        for (package, _) in PACKAGES {
            let PackagePlan::Refuse(fix) = package.plan(Some(empty.path().as_os_str()), false)
            else {
                panic!("{} refused when missing and not root", package.package);
            };
            assert!(
                fix.contains(&format!("apt-get install -y {}", package.package)),
                "{fix}"
            );
        }
        // The CNI plugins are found by a name no other package has (iproute2 has `bridge`).
        let cni = PACKAGES
            .iter()
            .find(|(p, _)| p.package == "containernetworking-plugins")
            .unwrap();
        assert_eq!(cni.0.binaries, ["host-local"]);
        assert_eq!(cni.1, [CNI_BIN_DIR]);
    }

    #[test]
    fn a_shared_chain_another_cleanup_removed_is_not_an_error() {
        assert!(already_gone(
            "`iptables -t nat -X CNI-HOSTPORT-DNAT` failed: iptables: No chain/target/match by that name."
        ));
        assert!(already_gone(
            "iptables: Bad rule (does a matching rule exist in that chain?)."
        ));
        assert!(!already_gone(
            "iptables: Permission denied (you must be root)."
        ));
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

    #[test]
    fn mounts_under_a_root_come_deepest_first() {
        let info = "36 35 98:0 / /c/nodes/n/kubelet rw - ext4 /dev/vda rw\n\
                    37 36 0:5 / /c/nodes/n/kubelet/pods/x/volumes/a\\040b rw - tmpfs tmpfs rw\n\
                    38 35 0:6 / /other rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mounts_under(info, Path::new("/c/nodes/n")),
            [
                PathBuf::from("/c/nodes/n/kubelet/pods/x/volumes/a b"),
                PathBuf::from("/c/nodes/n/kubelet"),
            ]
        );
    }

    #[test]
    fn iptables_cleanup_removes_the_networks_rules_and_idle_shared_chains() {
        let save = r#"*nat
:PREROUTING ACCEPT [0:0]
:CNI-DN-71632fb5294fc93522689 - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-MASQ - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A CNI-DN-71632fb5294fc93522689 -p tcp -m tcp --dport 18080 -j DNAT --to-destination 10.201.7.2:80
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"harness-0a1b2c3d\" id: \"dc58\"" -m multiport --dports 18080 -j CNI-DN-71632fb5294fc93522689
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
COMMIT
"#;
        let cmds = iptables_cleanup(save, "harness-0a1b2c3d");
        let flat: Vec<String> = cmds.iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            flat[0],
            "-t nat -D CNI-HOSTPORT-DNAT -p tcp -m comment --comment dnat name: \"harness-0a1b2c3d\" id: \"dc58\" -m multiport --dports 18080 -j CNI-DN-71632fb5294fc93522689"
        );
        assert!(
            cmds[0].contains(&"dnat name: \"harness-0a1b2c3d\" id: \"dc58\"".to_string()),
            "the comment is one argument: {:?}",
            cmds[0]
        );
        assert!(flat.contains(&"-t nat -X CNI-DN-71632fb5294fc93522689".to_string()));
        assert!(flat.contains(&"-t nat -X CNI-HOSTPORT-DNAT".to_string()));
        assert!(flat.contains(
            &"-t nat -D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT".to_string()
        ));
        // Another network's rule keeps the shared chains.
        let other = save.replace(
            "COMMIT",
            "-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"other\\\" id: \\\"x\\\"\" -j CNI-DN-1\nCOMMIT",
        );
        let flat: Vec<String> = iptables_cleanup(&other, "harness-0a1b2c3d")
            .iter()
            .map(|c| c.join(" "))
            .collect();
        assert!(
            !flat.iter().any(|c| c.contains("-X CNI-HOSTPORT-DNAT")),
            "{flat:#?}"
        );
        assert!(iptables_cleanup(&other, "nobody").is_empty());
    }
}
