//! What a private Docker daemon is, on disk: [`DockerRecord`] (`docker.json` in its
//! directory) names its paths, address pool, cgroup parent and processes, and renders its
//! configuration files and command lines (pure, checked by unit tests); [`HostFacts`] is what
//! it may change on the host outside its directory, read before it starts.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::DockerError;
use crate::process::{ComponentSpec, ProcRecord};

/// The daemon's record in its directory.
pub const RECORD_FILE: &str = "docker.json";

/// The name of the daemon's default runtime (this harness, see [`super::runtime`]).
pub const RUNTIME_NAME: &str = "harness";

/// The hidden `harness` subcommand the daemon runs as its OCI runtime.
pub const RUNTIME_SUBCOMMAND: &str = "oci-runtime";

/// dockerd's hard-coded directory for plugin sockets is under it.
pub const RUN_DOCKER: &str = "/run/docker";
/// The kernel modules directory kind's nodes mount.
pub const LIB_MODULES: &str = "/lib/modules";

/// What a private daemon changes on the host that is not its own: read before it starts,
/// put back by [`DockerRecord::teardown`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Whether `/run/docker` existed (dockerd 20.10 makes `/run/docker/plugins` whatever its
    /// exec root).
    pub run_docker: bool,
    /// Whether `/lib/modules` existed (docker makes a missing bind-mount source, and kind
    /// mounts `/lib/modules`).
    pub lib_modules: bool,
    /// The values of [`SYSCTLS`] this host has (the ones it lacks are absent).
    pub sysctls: BTreeMap<String, String>,
}

/// The sysctls dockerd may set: forwarding (IPv4 when a bridge network is made and forwarding
/// is off; IPv6 `all` and `default` by the first network with `--ipv6`, as kind's) and the
/// bridge netfilter switches.
pub const SYSCTLS: &[&str] = &[
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
    "net.ipv6.conf.default.forwarding",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
];

/// The file of sysctl `key` under `/proc/sys`.
pub fn sysctl_path(key: &str) -> PathBuf {
    Path::new("/proc/sys").join(key.replace('.', "/"))
}

impl HostFacts {
    /// Reads them from this host.
    pub fn read() -> Self {
        Self {
            run_docker: Path::new(RUN_DOCKER).exists(),
            lib_modules: Path::new(LIB_MODULES).exists(),
            sysctls: SYSCTLS
                .iter()
                .filter_map(|k| {
                    let v = fs::read_to_string(sysctl_path(k)).ok()?;
                    Some((k.to_string(), v.trim().to_string()))
                })
                .collect(),
        }
    }
}

/// The on-disk record of one private daemon, `docker.json` in its directory: enough for
/// [`DockerRecord::teardown`] to run from any process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerRecord {
    /// Its name: its directory's.
    pub name: String,
    /// Random id (8 hex digits) in its host-wide names (the cgroup parent).
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The harness process that started it.
    pub owner: ProcRecord,
    /// The address pool of its networks (a /20 in 172.16.0.0/12; each network gets a /24).
    pub pool: String,
    /// The `docker` command it is driven with.
    pub docker: PathBuf,
    /// containerd and dockerd, once started.
    pub processes: Vec<ProcRecord>,
    /// The host as it was before it started.
    pub host: HostFacts,
}

/// containerd's directory inside the daemon's.
const CONTAINERD_DIR: &str = "containerd";

impl DockerRecord {
    /// The cgroup every container's cgroup goes under, in every hierarchy.
    pub fn cgroup_parent(&self) -> String {
        format!("harness-docker-{}", self.id)
    }

    /// dockerd's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("docker.sock")
    }

    /// The `DOCKER_HOST` value of the daemon.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// containerd's gRPC socket.
    pub fn containerd_socket(&self) -> PathBuf {
        self.containerd_dir().join("containerd.sock")
    }

    /// containerd's directory: its configuration, root, state and sockets.
    pub fn containerd_dir(&self) -> PathBuf {
        self.dir.join(CONTAINERD_DIR)
    }

    /// containerd's configuration file.
    pub fn containerd_config_path(&self) -> PathBuf {
        self.containerd_dir().join("config.toml")
    }

    /// containerd's ttrpc socket (the longest socket path of a daemon).
    pub fn ttrpc_socket(&self) -> PathBuf {
        self.containerd_dir().join("containerd.sock.ttrpc")
    }

    /// dockerd's configuration file.
    pub fn daemon_json_path(&self) -> PathBuf {
        self.dir.join("daemon.json")
    }

    /// containerd's state directory (its tasks' bundles are under it).
    pub fn containerd_state(&self) -> PathBuf {
        self.containerd_dir().join("state")
    }

    /// dockerd's exec root (runc's state, network namespaces).
    pub fn exec_root(&self) -> PathBuf {
        self.dir.join("exec")
    }

    /// The log of component `name` (`containerd`, `dockerd`).
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// The environment a `docker` command needs to talk to the daemon: `DOCKER_HOST`, and a
    /// `DOCKER_CONFIG` of its own (the user's `~/.docker` is neither read nor written).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DOCKER_HOST".into(), self.host()),
            (
                "DOCKER_CONFIG".into(),
                self.dir.join("cli").display().to_string(),
            ),
        ]
    }

    /// A `docker` command for the daemon (the user's Docker context and TLS settings do not
    /// apply to it).
    pub fn command(&self) -> std::process::Command {
        let mut c = std::process::Command::new(&self.docker);
        for k in ["DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"] {
            c.env_remove(k);
        }
        c.envs(self.env()).stdin(std::process::Stdio::null());
        c
    }

    /// containerd's configuration: root, state, sockets and its `opt` directory under the
    /// daemon's directory, CRI off (dockerd does not use it). Shim sockets still go to
    /// `/run/containerd/s`, named after a hash of this socket's path, so no other containerd's
    /// clash with them ([`super::teardown::shim_socket`]).
    pub fn containerd_config(&self) -> String {
        let d = self.containerd_dir();
        let q = |p: PathBuf| toml_str(&p.display().to_string());
        format!(
            r#"version = 2
root = {root}
state = {state}
oom_score = 0
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}
"#,
            root = q(d.join("root")),
            state = q(self.containerd_state()),
            socket = q(self.containerd_socket()),
            ttrpc = q(self.ttrpc_socket()),
            opt = q(d.join("opt")),
        )
    }

    /// dockerd's configuration file: the trust key inside the directory (20.10 has no flag for
    /// it), the address pool, and this harness as the default runtime — `harness oci-runtime
    /// --runc <runc> -- <runc's arguments>` ([`super::runtime::exec_runc`]).
    pub fn daemon_json(&self, harness: &Path, runc: &Path) -> String {
        let config = serde_json::json!({
            "deprecated-key-path": self.dir.join("key.json"),
            "default-address-pools": [{"base": self.pool, "size": 24}],
            "runtimes": {
                RUNTIME_NAME: {
                    "path": harness,
                    "runtimeArgs": [RUNTIME_SUBCOMMAND, "--runc", runc, "--"],
                }
            },
            "default-runtime": RUNTIME_NAME,
        });
        serde_json::to_string_pretty(&config).expect("serializes")
    }

    /// containerd's process.
    pub fn containerd_spec(&self, containerd: &Path) -> ComponentSpec {
        ComponentSpec {
            name: "containerd".into(),
            binary: containerd.to_path_buf(),
            args: vec![
                "--config".into(),
                self.containerd_config_path().display().to_string(),
            ],
            env: vec![("PATH".into(), crate::cluster::local::node::host_path())],
            clear_env: false,
            dir: None,
        }
    }

    /// dockerd's process: its own socket, data root, exec root, pid file and configuration
    /// file, on the private containerd, no bridge of its own and no iptables rules, and the
    /// containers' cgroups under [`DockerRecord::cgroup_parent`].
    pub fn dockerd_spec(&self, dockerd: &Path) -> ComponentSpec {
        let p = |name: &str| self.dir.join(name).display().to_string();
        ComponentSpec {
            name: "dockerd".into(),
            binary: dockerd.to_path_buf(),
            args: vec![
                format!("--host={}", self.host()),
                format!("--data-root={}", p("data")),
                format!("--exec-root={}", self.exec_root().display()),
                format!("--pidfile={}", p("docker.pid")),
                format!("--config-file={}", self.daemon_json_path().display()),
                format!("--containerd={}", self.containerd_socket().display()),
                "--storage-driver=overlay2".into(),
                format!("--cgroup-parent=/{}", self.cgroup_parent()),
                "--bridge=none".into(),
                "--iptables=false".into(),
                "--ip-masq=false".into(),
            ],
            env: vec![("PATH".into(), crate::cluster::local::node::host_path())],
            clear_env: false,
            dir: None,
        }
    }

    /// Writes the record atomically (temp file + rename).
    pub fn save(&self) -> Result<(), DockerError> {
        let path = self.dir.join(RECORD_FILE);
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(self).expect("record serializes");
        fs::write(&tmp, body).map_err(|e| DockerError::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| DockerError::io(&path, e))
    }

    /// Reads the record in `dir`.
    pub fn load(dir: &Path) -> Result<Self, DockerError> {
        let path = dir.join(RECORD_FILE);
        let bytes = fs::read(&path).map_err(|e| DockerError::io(&path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| DockerError::BadRecord {
            path,
            detail: e.to_string(),
        })
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A /20 in 172.16.0.0/12 (not docker's usual 172.17.0.0/16) that no route in `routes` (the
/// text of `/proc/net/route`) overlaps and `taken` does not hold, searching from `start`.
pub fn free_pool(routes: &str, taken: &[String], start: u16) -> Option<String> {
    let used = crate::cluster::local::node::routed(routes);
    const BLOCK: u32 = 0xffff_f000;
    (0..256u16)
        .map(|i| start.wrapping_add(i) % 256)
        .map(|i| u32::from_be_bytes([172, 16, 0, 0]) + (u32::from(i) << 12))
        .filter(|net| net >> 16 != u32::from_be_bytes([0, 0, 172, 17]))
        .map(|net| (net, format!("{}/20", std::net::Ipv4Addr::from(net))))
        .find(|(net, cidr)| {
            !taken.contains(cidr)
                && !used.iter().any(|(dest, mask)| {
                    let overlap = mask & BLOCK;
                    net & overlap == dest & overlap
                })
        })
        .map(|(_, cidr)| cidr)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A record for unit tests.
    pub(in crate::cluster::docker) fn record() -> DockerRecord {
        DockerRecord {
            name: "d".into(),
            id: "0a1b2c3d".into(),
            dir: "/s/docker/d".into(),
            owner: ProcRecord {
                name: "harness".into(),
                pid: 1,
                start_time: 1,
            },
            pool: "172.30.16.0/20".into(),
            docker: "/usr/bin/docker".into(),
            processes: vec![],
            host: HostFacts::default(),
        }
    }

    #[test]
    fn containerd_keeps_to_the_daemon_s_directory() {
        let c = record().containerd_config();
        for line in [
            "root = \"/s/docker/d/containerd/root\"",
            "state = \"/s/docker/d/containerd/state\"",
            "address = \"/s/docker/d/containerd/containerd.sock\"",
            "address = \"/s/docker/d/containerd/containerd.sock.ttrpc\"",
            "path = \"/s/docker/d/containerd/opt\"",
        ] {
            assert!(c.lines().any(|l| l.trim() == line), "{line} in\n{c}");
        }
        assert!(
            c.contains("\"io.containerd.grpc.v1.cri\""),
            "CRI is off: {c}"
        );
    }

    #[test]
    fn dockerd_runs_on_its_own_containerd_with_its_own_paths_and_no_host_networking() {
        let r = record();
        let spec = r.dockerd_spec(Path::new("/usr/sbin/dockerd"));
        for arg in [
            "--host=unix:///s/docker/d/docker.sock",
            "--data-root=/s/docker/d/data",
            "--exec-root=/s/docker/d/exec",
            "--pidfile=/s/docker/d/docker.pid",
            "--config-file=/s/docker/d/daemon.json",
            "--containerd=/s/docker/d/containerd/containerd.sock",
            "--cgroup-parent=/harness-docker-0a1b2c3d",
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
        ] {
            assert!(
                spec.args.iter().any(|a| a == arg),
                "{arg} in {:?}",
                spec.args
            );
        }
        let c = r.containerd_spec(Path::new("/usr/bin/containerd"));
        assert_eq!(c.args, ["--config", "/s/docker/d/containerd/config.toml"]);
        assert_eq!(
            r.env(),
            [
                (
                    "DOCKER_HOST".into(),
                    "unix:///s/docker/d/docker.sock".into()
                ),
                ("DOCKER_CONFIG".into(), "/s/docker/d/cli".into()),
            ]
        );
    }

    #[test]
    fn the_harness_is_the_default_runtime_with_runc_named_before_its_arguments() {
        let v: serde_json::Value = serde_json::from_str(
            &record().daemon_json(Path::new("/bin/harness"), Path::new("/usr/sbin/runc")),
        )
        .unwrap();
        assert_eq!(v["default-runtime"], "harness");
        assert_eq!(v["runtimes"]["harness"]["path"], "/bin/harness");
        assert_eq!(
            v["runtimes"]["harness"]["runtimeArgs"],
            serde_json::json!(["oci-runtime", "--runc", "/usr/sbin/runc", "--"])
        );
        assert_eq!(v["deprecated-key-path"], "/s/docker/d/key.json");
        assert_eq!(
            v["default-address-pools"],
            serde_json::json!([{"base": "172.30.16.0/20", "size": 24}])
        );
    }

    #[test]
    fn a_pool_avoids_routes_docker_s_default_and_other_daemons() {
        // 172.16.0.0/16 routed (little-endian hex as /proc/net/route prints it).
        let routes = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
                      eth0\t000010AC\t00000000\t0001\t0\t0\t0\t0000FFFF\n\
                      eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n";
        // 172.16.x is routed, 172.17.x is docker's: the first free /20 is 172.18.0.0.
        assert_eq!(free_pool(routes, &[], 0).as_deref(), Some("172.18.0.0/20"));
        assert_eq!(
            free_pool(routes, &["172.18.0.0/20".into()], 0).as_deref(),
            Some("172.18.16.0/20")
        );
        // A /24 route (172.18.0.0/24) inside a block takes the whole block.
        let narrow = "h\nbr0\t000012AC\t00000000\t0001\t0\t0\t0\t00FFFFFF\n";
        assert_eq!(
            free_pool(narrow, &[], 32).as_deref(),
            Some("172.18.16.0/20")
        );
        // The search wraps around; a route over all of 172.16.0.0/12 leaves nothing.
        assert_eq!(
            free_pool("h\n", &[], 255).as_deref(),
            Some("172.31.240.0/20")
        );
        let all = "h\neth0\t000010AC\t00000000\t0001\t0\t0\t0\t0000F0FF\n";
        assert_eq!(free_pool(all, &[], 7), None);
    }
}
