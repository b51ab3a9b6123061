//! Removing a private Docker daemon: [`DockerRecord::teardown`] removes everything it made,
//! whether it answers or was killed (the path `harness gc` takes); [`DockerRecord::leftovers`]
//! lists what of it is still on the host.
//!
//! The order matters:
//! 1. while dockerd answers: every container is removed (`rm -fv`, so SIGKILL and its
//!    anonymous volumes) and every network pruned; dockerd then deletes the bridges, veths
//!    and `docker-proxy` processes itself;
//! 2. dockerd ends (TERM, KILL after 30 s);
//! 3. what outlived it (a killed daemon leaves its containers running): the processes in its
//!    cgroups and containerd's shims are killed, and the shims' sockets in
//!    `/run/containerd/s` removed;
//! 4. containerd ends (TERM, KILL after 15 s);
//! 5. whatever is mounted under its directory is unmounted (overlay `merged` directories,
//!    network namespaces, the data root's own bind mount);
//! 6. the bridges it made (`br-<network id>`, or any bridge holding an address of its pool),
//!    the veths on them first (a killed daemon's containers' namespaces, and so their veths,
//!    would otherwise go only later, in the kernel's own time);
//! 7. its cgroups, deepest first, in every hierarchy;
//! 8. `/run/docker` and `/lib/modules` when they did not exist before and are empty;
//! 9. the sysctls it changed, back to what they were; its directory.
//!
//! It never touches iptables: the daemon runs with `--iptables=false` and makes no rule.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{DockerRecord, LIB_MODULES, RUN_DOCKER, sysctl_path};
use crate::cluster::local::node::teardown::{
    cleanup_hierarchies, kill_cgroup_tree, kill_shims, mounts_under, remove_cgroup_tree,
    unmount_under,
};
use crate::process::{ProcRecord, Process};

/// Where containerd 1.6's shims put their sockets, whatever containerd's own paths.
pub const SHIM_SOCKET_DIR: &str = "/run/containerd/s";

/// How long dockerd may take to exit on SIGTERM before it is killed.
const DOCKERD_GRACE: Duration = Duration::from_secs(30);
/// The same for containerd.
const CONTAINERD_GRACE: Duration = Duration::from_secs(15);
/// How long one `docker` command of the teardown may take.
const COMMAND_BOUND: Duration = Duration::from_secs(60);

/// The socket of the shim of task `id` in namespace `namespace` of the containerd at
/// `address`: `/run/containerd/s/<sha256 of "<address>/<namespace>/<id>">` (containerd 1.6's
/// `shim.SocketAddress`).
pub fn shim_socket(address: &Path, namespace: &str, id: &str) -> PathBuf {
    let key = address.join(namespace).join(id);
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_os_str().as_encoded_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Path::new(SHIM_SOCKET_DIR).join(hex)
}

/// The bridges in the text of `ip -o -4 addr show` that docker makes (`br-*`, `docker0`) and
/// that hold an address of `pool` (`a.b.c.d/n`).
pub fn pool_bridges(ip_addr: &str, pool: &str) -> Vec<String> {
    let Some((base, bits)) = pool.split_once('/') else {
        return vec![];
    };
    let (Ok(base), Ok(bits)) = (base.parse::<std::net::Ipv4Addr>(), bits.parse::<u32>()) else {
        return vec![];
    };
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    let mut out: Vec<String> = ip_addr
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f.get(1)?.trim_end_matches(':');
            let addr: std::net::Ipv4Addr = f.get(3)?.split('/').next()?.parse().ok()?;
            let ours = (name.starts_with("br-") || name == "docker0")
                && u32::from(addr) & mask == u32::from(base) & mask;
            ours.then(|| name.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl DockerRecord {
    /// Removes everything the daemon made, in the order of the module documentation, whatever
    /// state it is in; `procs` are its processes when they are this process's children (they
    /// are reaped), else empty. Returns every error met; never stops at the first.
    pub fn teardown(&self, procs: &mut [Process]) -> Vec<String> {
        let mut errors = vec![];
        let mut bridges = vec![];
        let dockerd = self.process("dockerd");
        if dockerd.is_some_and(ProcRecord::alive) {
            match self.remove_containers_and_networks() {
                Ok(named) => bridges = named,
                Err(e) => errors.push(e),
            }
        }
        if let Some(p) = dockerd {
            end(p, procs, DOCKERD_GRACE);
        }
        for h in cleanup_hierarchies() {
            kill_cgroup_tree(&h.join(self.cgroup_parent()));
        }
        kill_shims(&self.containerd_socket());
        errors.extend(self.remove_shim_sockets());
        if let Some(p) = self.process("containerd") {
            end(p, procs, CONTAINERD_GRACE);
        }
        errors.extend(unmount_under(&self.dir));
        if let Ok(text) = ip(&["-o", "-4", "addr", "show"]) {
            bridges.extend(pool_bridges(&text, &self.pool));
        }
        bridges.sort();
        bridges.dedup();
        // The host ends of the containers' veths, deleted before their bridges (which would
        // only release them): the kernel deletes a veth with its namespace, but a killed
        // daemon's namespaces go in the background, after `gc` has returned.
        for port in bridges.iter().flat_map(|b| bridge_ports(b)) {
            if let Err(e) = ip(&["link", "delete", &port])
                && Path::new("/sys/class/net").join(&port).exists()
            {
                errors.push(e);
            }
        }
        for b in bridges {
            if Path::new("/sys/class/net").join(&b).exists()
                && let Err(e) = ip(&["link", "delete", &b])
            {
                errors.push(e);
            }
        }
        for h in cleanup_hierarchies() {
            errors.extend(remove_cgroup_tree(&h.join(self.cgroup_parent())));
        }
        // Shared with whatever else uses them: removed only when they were not there before
        // and nothing is in them now.
        if !self.host.run_docker {
            let _ = fs::remove_dir(Path::new(RUN_DOCKER).join("plugins"));
            let _ = fs::remove_dir(RUN_DOCKER);
        }
        if !self.host.lib_modules {
            let _ = fs::remove_dir(LIB_MODULES);
        }
        for (key, before) in &self.host.sysctls {
            let path = sysctl_path(key);
            let now = fs::read_to_string(&path).unwrap_or_default();
            if now.trim() != before
                && let Err(e) = fs::write(&path, before)
            {
                errors.push(format!("restore {key}={before}: {e}"));
            }
        }
        if self.dir.exists()
            && let Err(e) = crate::toolchain::cache::make_writable_and_remove(&self.dir)
        {
            errors.push(format!("remove {}: {e}", self.dir.display()));
        }
        errors
    }

    /// What of the daemon is still on the host: its processes, its containerd's shims, mounts
    /// under its directory, bridges of its pool, its cgroups (its containers' processes are in
    /// them) and its directory. Empty once [`DockerRecord::teardown`] has run.
    pub fn leftovers(&self) -> Vec<String> {
        let mut out = vec![];
        for p in &self.processes {
            if p.alive() {
                out.push(format!("{} (pid {})", p.name, p.pid));
            }
        }
        let sock = self.containerd_socket().display().to_string();
        out.extend(crate::cluster::local::node::teardown::shims_of(&sock));
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        out.extend(
            mounts_under(&info, &self.dir)
                .into_iter()
                .map(|m| format!("mount {}", m.display())),
        );
        if let Ok(text) = ip(&["-o", "-4", "addr", "show"]) {
            out.extend(
                pool_bridges(&text, &self.pool)
                    .into_iter()
                    .map(|b| format!("bridge {b}")),
            );
        }
        for h in cleanup_hierarchies() {
            let d = h.join(self.cgroup_parent());
            if d.exists() {
                out.push(format!("cgroup {}", d.display()));
            }
        }
        if self.dir.exists() {
            out.push(format!("directory {}", self.dir.display()));
        }
        out
    }

    /// Its recorded process `name`.
    fn process(&self, name: &str) -> Option<&ProcRecord> {
        self.processes.iter().rev().find(|p| p.name == name)
    }

    /// Removes every container (with its anonymous volumes) and every network through the
    /// daemon's API; the bridges of the networks it had.
    fn remove_containers_and_networks(&self) -> Result<Vec<String>, String> {
        let ids = self.docker(&["ps", "-aq", "--no-trunc"])?;
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-fv"];
            args.extend(&ids);
            self.docker(&args)?;
        }
        let networks = self.docker(&[
            "network",
            "ls",
            "-q",
            "--no-trunc",
            "--filter",
            "driver=bridge",
        ])?;
        let bridges = networks
            .split_whitespace()
            .filter_map(|id| id.get(..12))
            .map(|id| format!("br-{id}"))
            .collect();
        self.docker(&["network", "prune", "-f"])?;
        self.docker(&["volume", "prune", "-f"])?;
        Ok(bridges)
    }

    /// Runs `docker args` against the daemon (bounded): its standard output.
    fn docker(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = self.command();
        cmd.args(args);
        run_bounded(cmd, COMMAND_BOUND).map_err(|e| format!("`docker {}`: {e}", args.join(" ")))
    }

    /// Removes the sockets in [`SHIM_SOCKET_DIR`] of the tasks containerd has state for (a
    /// shim removes its own when its task is deleted; a killed one does not).
    fn remove_shim_sockets(&self) -> Vec<String> {
        let mut errors = vec![];
        let tasks = self
            .containerd_state()
            .join("io.containerd.runtime.v2.task");
        for ns in fs::read_dir(&tasks).into_iter().flatten().flatten() {
            for task in fs::read_dir(ns.path()).into_iter().flatten().flatten() {
                let socket = shim_socket(
                    &self.containerd_socket(),
                    &ns.file_name().to_string_lossy(),
                    &task.file_name().to_string_lossy(),
                );
                match fs::remove_file(&socket) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        errors.push(format!("remove {}: {e}", socket.display()));
                    }
                    _ => {}
                }
            }
        }
        errors
    }
}

/// Ends recorded process `p`: through its [`Process`] when it is our child (so it is
/// reaped), else by its record.
fn end(p: &ProcRecord, procs: &mut [Process], grace: Duration) {
    match procs.iter_mut().find(|c| c.record() == p) {
        Some(child) => child.stop(grace),
        None => p.terminate(grace),
    }
}

/// Runs `ip` with `args`: its standard output.
/// The links enslaved to bridge `bridge` (`/sys/class/net/<bridge>/brif`).
fn bridge_ports(bridge: &str) -> Vec<String> {
    fs::read_dir(Path::new("/sys/class/net").join(bridge).join("brif"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn ip(args: &[&str]) -> Result<String, String> {
    crate::cluster::local::node::run_host("ip", args).map_err(|e| e.to_string())
}

/// Runs `cmd` and returns its standard output, or its standard error when it fails; killed
/// after `bound`.
fn run_bounded(mut cmd: std::process::Command, bound: Duration) -> Result<String, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + bound;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer in {bound:?}"));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(format!("{status}: {}", err.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shim_socket_is_named_after_containerd_s_socket_and_the_task() {
        // printf '%s' /d/containerd/containerd.sock/moby/abc | sha256sum
        assert_eq!(
            shim_socket(Path::new("/d/containerd/containerd.sock"), "moby", "abc"),
            Path::new(
                "/run/containerd/s/dcb7ff745742ab789e2bb5ac42074dcdbacadfd43d79ff9086dd5234c7ca98ac"
            )
        );
    }

    #[test]
    fn only_docker_s_bridges_in_the_pool_are_ours() {
        let ip = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
                  2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\n\
                  7: br-0123456789ab    inet 172.30.16.1/24 brd 172.30.16.255 scope global br-0123456789ab\n\
                  8: br-ba9876543210    inet 172.30.48.1/24 brd 172.30.48.255 scope global br-ba9876543210\n\
                  9: docker0    inet 172.30.17.1/24 scope global docker0\n\
                  10: hb0a1b2c3d    inet 172.30.18.1/24 scope global hb0a1b2c3d\n";
        assert_eq!(
            pool_bridges(ip, "172.30.16.0/20"),
            ["br-0123456789ab", "docker0"]
        );
        assert!(pool_bridges(ip, "not a pool").is_empty());
    }

    #[test]
    fn a_bounded_command_returns_its_output_or_its_error_or_gives_up() {
        let mut ok = std::process::Command::new("sh");
        ok.args(["-c", "echo out; echo err >&2"]);
        assert_eq!(run_bounded(ok, Duration::from_secs(10)).unwrap(), "out\n");
        let mut bad = std::process::Command::new("sh");
        bad.args(["-c", "echo nope >&2; exit 3"]);
        let e = run_bounded(bad, Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("exit status: 3") && e.ends_with("nope"), "{e}");
        let mut slow = std::process::Command::new("sleep");
        slow.arg("30");
        let started = Instant::now();
        let e = run_bounded(slow, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("no answer"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn teardown_of_a_daemon_that_never_started_removes_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        fs::create_dir_all(dir.join("containerd/state")).unwrap();
        let r = DockerRecord {
            name: "d".into(),
            id: format!("{:08x}", rand::random::<u32>()),
            dir: dir.clone(),
            owner: ProcRecord::current("harness"),
            pool: "172.31.240.0/20".into(),
            docker: "docker".into(),
            processes: vec![],
            host: super::super::HostFacts {
                run_docker: true,
                lib_modules: true,
                sysctls: Default::default(),
            },
        };
        r.save().unwrap();
        assert!(r.leftovers().iter().any(|l| l.starts_with("directory")));
        assert_eq!(r.teardown(&mut []), Vec::<String>::new());
        assert!(r.leftovers().is_empty(), "{:?}", r.leftovers());
    }
}
