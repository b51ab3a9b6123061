//! What the host offers real nodes, read from it: the Debian packages a node needs
//! ([`PACKAGES`]), whether the kernel has what no package brings ([`check_kernel`], decided by
//! the pure [`kernel_problem`] over a [`Host`]), the cgroup hierarchies a kubelet uses
//! ([`cgroup_hierarchies`]), and the limits the host's cgroups put on a real node's pods
//! ([`cgroup_limits`]).

use std::fs;
use std::path::{Path, PathBuf};

use crate::cluster::local::LocalError;
use crate::toolchain::host::DebianPackage;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
