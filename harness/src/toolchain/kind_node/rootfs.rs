//! The node's root file system: what kind's base image holds, made from Debian packages with
//! mmdebstrap. Start with [`Toolchain::kind_rootfs`]; [`RootfsPlan`] is the build as data (the
//! package list, the mmdebstrap command line, kind's files) and its [`BuildKey`].
//!
//! The Debian mirror is read from the host's apt configuration when the build runs and given
//! to mmdebstrap on its command line ([`super::apt`]): it is written into no file, and the
//! image's own `sources.list` is left as a comment.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::super::cache::{BuildKey, Installed, Manifest};
use super::super::host::DebianPackage;
use super::super::{Toolchain, ToolchainError};
use super::apt::{host_sources, mirror_lines, relaxed_apt_options};
use super::{KindNodeError, hex_prefix, install_identity, sha256_file};

/// Debian's mmdebstrap, which builds the root file system.
pub const MMDEBSTRAP: DebianPackage = DebianPackage {
    package: "mmdebstrap",
    binaries: &["mmdebstrap"],
};

/// The Debian release of the root file system (kind v0.29.0's base image is bookworm).
pub const SUITE: &str = "bookworm";

/// Every timestamp in the root file system (2025-05-20): the same packages always give the
/// same bytes.
pub const SOURCE_DATE_EPOCH: u64 = 1_747_699_200;

/// The packages: kind's base-image list, systemd's init and D-Bus, the tools kube-proxy and
/// kubelet call, and the container runtime from Debian (containerd, runc, the CNI plugins).
pub const PACKAGES: &[&str] = &[
    // services
    "systemd",
    "systemd-sysv",
    "dbus",
    // Kubernetes components
    "conntrack",
    "iptables",
    "nftables",
    "ebtables",
    "iproute2",
    "ethtool",
    "socat",
    "util-linux",
    "mount",
    "kmod",
    // container runtime
    "libseccomp2",
    "pigz",
    "fuse-overlayfs",
    "containerd",
    "runc",
    "containernetworking-plugins",
    // networked storage
    "nfs-common",
    "open-iscsi",
    // what kind's scripts use
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
    "tzdata",
];

/// dpkg's path filters: the slim image's (no documentation but the copyright files, no
/// manual pages, no translations) and containerd's legacy shims, which kind does not ship.
pub const DPKG_OPTIONS: &[&str] = &[
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/groff/*",
    "path-exclude=/usr/share/lintian/*",
    "path-exclude=/usr/share/linda/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/bin/containerd-shim",
    "path-exclude=/usr/bin/containerd-shim-runc-v1",
];

/// mmdebstrap's hook directories: merged `/usr` the debootstrap way (without it apt pulls in
/// `usrmerge` and a whole Perl), and eatmydata (no fsync while installing; same output).
pub const HOOK_DIRS: &[&str] = &[
    "/usr/share/mmdebstrap/hooks/merged-usr",
    "/usr/share/mmdebstrap/hooks/eatmydata",
];

/// What runs in the new root after the packages are installed ([`post.sh`](post.sh)).
pub const POST_SCRIPT: &str = include_str!("post.sh");

/// The pause image kind's containerd configuration names for its sandboxes.
pub const SANDBOX_IMAGE: &str = super::super::images::PAUSE_IMAGE;

/// The image configuration kind's base image sets (a root file system cannot carry it).
pub const IMAGE_ENV: &[&str] = &[
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "container=docker",
];
/// The entrypoint of kind's base image.
pub const IMAGE_ENTRYPOINT: &[&str] = &["/usr/local/bin/entrypoint", "/sbin/init"];
/// systemd ends on SIGRTMIN+3; SIGTERM would make it re-execute itself.
pub const IMAGE_STOP_SIGNAL: &str = "SIGRTMIN+3";

/// Bumped whenever the way the root file system is made changes.
const FORMAT: &str = "1";

/// The files of the build's output.
pub const ROOTFS_TAR: &str = "rootfs.tar";
/// The `sha256:<hex>` of [`ROOTFS_TAR`] (the image layer's diff id), written by the build.
pub const ROOTFS_DIGEST: &str = "rootfs.tar.sha256";
/// The installed packages, `name version KiB` a line.
pub const PACKAGE_LIST: &str = "packages.txt";

/// One file of kind's base image (`images/base/files/` of the kind module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindFile {
    /// Its path in the image, relative (`etc/containerd/config.toml`).
    pub path: String,
    /// Its mode: 0755 for scripts, 0644 for the rest, as kind's Dockerfile copies them.
    pub mode: u32,
    /// Its contents.
    pub data: Vec<u8>,
}

/// The mode kind's Dockerfile gives a file of `images/base/files/` (its `COPY --chmod`s).
pub fn kind_file_mode(path: &str) -> u32 {
    if path.starts_with("usr/local/bin/") || path.starts_with("kind/bin/") {
        0o755
    } else {
        0o644
    }
}

/// kind's containerd configuration with the harness's sandbox image and
/// `restrict_oom_score_adj = true` (a node container here may not lower OOM scores).
pub fn containerd_config(kind: &str) -> String {
    let mut out = String::with_capacity(kind.len());
    for line in kind.lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let key = line
            .trim_start()
            .split([' ', '='])
            .next()
            .unwrap_or_default();
        match key {
            "sandbox_image" => {
                out.push_str(&format!("{indent}sandbox_image = \"{SANDBOX_IMAGE}\""))
            }
            "restrict_oom_score_adj" => {
                out.push_str(&format!("{indent}restrict_oom_score_adj = true"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Reads kind's base-image files from `dir` (the kind module's `images/base/files`), sorted,
/// with kind's modes and [`containerd_config`] applied.
pub fn read_kind_files(dir: &Path) -> std::io::Result<Vec<KindFile>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<KindFile>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                walk(root, &path, out)?;
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .expect("walked under root")
                .display()
                .to_string();
            let mut data = std::fs::read(&path)?;
            if rel == "etc/containerd/config.toml" {
                data = containerd_config(&String::from_utf8_lossy(&data)).into_bytes();
            }
            out.push(KindFile {
                mode: kind_file_mode(&rel),
                path: rel,
                data,
            });
        }
        Ok(())
    }
    let mut out = vec![];
    walk(dir, dir, &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The root file system's build as data.
#[derive(Debug, Clone)]
pub struct RootfsPlan {
    /// kind's base-image files, as installed.
    pub kind_files: Vec<KindFile>,
    /// The crictl build installed as `/usr/local/bin/crictl` (Debian has no crictl).
    pub crictl: Installed,
}

impl RootfsPlan {
    /// The cache key: `kind-rootfs` at `<suite>-<hash>`, the hash over everything that makes
    /// the file system (the package list, mmdebstrap's options, the script, kind's files and the
    /// crictl build), the mirror aside.
    pub fn key(&self) -> BuildKey {
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        let mut part = |b: &[u8]| {
            h.update(&(b.len() as u64).to_le_bytes());
            h.update(b);
        };
        part(FORMAT.as_bytes());
        part(SUITE.as_bytes());
        part(SOURCE_DATE_EPOCH.to_string().as_bytes());
        for list in [PACKAGES, DPKG_OPTIONS, HOOK_DIRS] {
            part(list.join(",").as_bytes());
        }
        part(POST_SCRIPT.as_bytes());
        for f in &self.kind_files {
            part(f.path.as_bytes());
            part(&f.mode.to_le_bytes());
            part(&f.data);
        }
        install_identity(&mut h, &self.crictl);
        BuildKey::new("kind-rootfs", format!("{SUITE}-{}", hex_prefix(h.finish())))
    }

    /// mmdebstrap's arguments: build [`SUITE`] into `out/`[`ROOTFS_TAR`] from the `mirrors`
    /// lines, with kind's files from `kind_files`, the script at `post`, and the package list
    /// written to `out/`[`PACKAGE_LIST`].
    pub fn mmdebstrap_args(
        &self,
        kind_files: &Path,
        post: &Path,
        out: &Path,
        apt_options: &[String],
        mirrors: &[String],
    ) -> Vec<String> {
        let mut args: Vec<String> = [
            "--mode=unshare",
            "--variant=minbase",
            "--format=tar",
            "--aptopt=APT::Install-Recommends \"false\"",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--include={}", PACKAGES.join(",")));
        args.extend(apt_options.iter().map(|o| format!("--aptopt={o}")));
        args.extend(DPKG_OPTIONS.iter().map(|o| format!("--dpkgopt={o}")));
        args.extend(HOOK_DIRS.iter().map(|d| format!("--hook-dir={d}")));
        let q = |p: &Path| {
            shlex::try_quote(&p.display().to_string())
                .expect("no NUL")
                .into_owned()
        };
        args.push(format!(
            "--customize-hook=cd {} && find . -type f | while read -r f; do install -D -o 0 -g 0 -m \"$(stat -c %a \"$f\")\" \"$f\" \"$1/$f\"; done",
            q(kind_files)
        ));
        args.push(format!(
            "--customize-hook=install -o 0 -g 0 -m 0755 {} \"$1/usr/local/bin/crictl\"",
            q(&self.crictl.binary("crictl"))
        ));
        args.push(format!(
            "--customize-hook=cp {} \"$1/tmp/kind-post.sh\" && chroot \"$1\" /bin/bash /tmp/kind-post.sh",
            q(post)
        ));
        args.push(format!(
            "--customize-hook=chroot \"$1\" dpkg-query -W -f='${{Package}}\\t${{Version}}\\t${{Installed-Size}}\\n' | sort > {}",
            q(&out.join(PACKAGE_LIST))
        ));
        args.push(SUITE.into());
        args.push(out.join(ROOTFS_TAR).display().to_string());
        args.extend(mirrors.iter().cloned());
        args
    }
}

/// A built root file system.
#[derive(Debug, Clone)]
pub struct Rootfs {
    /// The install: [`ROOTFS_TAR`], [`ROOTFS_DIGEST`], [`PACKAGE_LIST`].
    pub install: Installed,
    /// `sha256:<hex>` of the tar.
    pub digest: String,
}

impl Rootfs {
    /// The tar.
    pub fn tar(&self) -> PathBuf {
        self.install.binary(ROOTFS_TAR)
    }

    /// The root file system of an install of it.
    pub fn open(install: Installed) -> Result<Self, ToolchainError> {
        let path = install.binary(ROOTFS_DIGEST);
        let digest = std::fs::read_to_string(&path).map_err(|e| ToolchainError::io(&path, e))?;
        Ok(Self {
            digest: digest.trim().to_string(),
            install,
        })
    }
}

impl Toolchain {
    /// The build key of the root file system over `crictl`, reading kind's files from the kind
    /// module of `kind_release`.
    pub(super) async fn rootfs_plan(
        &self,
        kind_release: &str,
        crictl: Installed,
    ) -> Result<RootfsPlan, KindNodeError> {
        let dir = super::kind_module(kind_release)
            .await?
            .join("images/base/files");
        let kind_files = read_kind_files(&dir).map_err(|e| ToolchainError::io(&dir, e))?;
        Ok(RootfsPlan { kind_files, crictl })
    }

    /// The root file system `plan` describes, from the cache or built with mmdebstrap (as
    /// root: mmdebstrap's unshare mode needs no user namespace then, and its mounts end with
    /// its own namespace even when it is killed).
    pub async fn kind_rootfs(&self, plan: &RootfsPlan) -> Result<Rootfs, KindNodeError> {
        let key = plan.key();
        let key = &key;
        if let Some(i) = self.cache().lookup(key) {
            return Ok(Rootfs::open(i)?);
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(KindNodeError::NeedsRoot {
                step: format!("build {key} with mmdebstrap"),
            });
        }
        let host = std::fs::read_to_string("/etc/os-release")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix("VERSION_CODENAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_default();
        let mirrors =
            mirror_lines(&host_sources(), SUITE, &host).ok_or(KindNodeError::NoMirror {
                suite: SUITE.into(),
            })?;
        let dump = Command::new("apt-config")
            .arg("dump")
            .stdin(Stdio::null())
            .output()
            .await
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let apt_options = relaxed_apt_options(&dump);
        let mmdebstrap = self.debian_binary(MMDEBSTRAP).await?;
        let install = self
            .ensure_built(key, |staging| async move {
                let started = Instant::now();
                let src = staging.join("src");
                let files = src.join("kind-files");
                for f in &plan.kind_files {
                    write_mode(&files.join(&f.path), &f.data, f.mode)?;
                }
                let post = src.join("post.sh");
                write_mode(&post, POST_SCRIPT.as_bytes(), 0o755)?;
                let out = staging.join("bin");
                let task = self.progress.timed(
                    &format!("building {key} with mmdebstrap"),
                    self.estimate(key).time,
                );
                let mut cmd = Command::new(&mmdebstrap);
                cmd.args(plan.mmdebstrap_args(&files, &post, &out, &apt_options, &mirrors))
                    .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH.to_string());
                run_group(cmd, &format!("mmdebstrap of {key}"), |line| task.set(line)).await?;
                let tar = out.join(ROOTFS_TAR);
                let digest = tokio::task::spawn_blocking({
                    let tar = tar.clone();
                    move || sha256_file(&tar)
                })
                .await
                .expect("hashing does not panic")
                .map_err(|e| ToolchainError::io(&tar, e))?;
                let digest_file = out.join(ROOTFS_DIGEST);
                std::fs::write(&digest_file, format!("{digest}\n"))
                    .map_err(|e| ToolchainError::io(&digest_file, e))?;
                task.finish(&format!(
                    "built {key} in {:.0?}",
                    Duration::from_secs(started.elapsed().as_secs())
                ));
                Ok(Manifest {
                    key: key.clone(),
                    binaries: vec![ROOTFS_TAR.into(), ROOTFS_DIGEST.into(), PACKAGE_LIST.into()],
                    built_with: "mmdebstrap".into(),
                    build_seconds: started.elapsed().as_secs(),
                })
            })
            .await?;
        Ok(Rootfs::open(install)?)
    }
}

/// A process group, killed when dropped unless [`disarm`](Self::disarm)ed: a cancelled or
/// failed build ends mmdebstrap together with the helpers it forks (and the pid namespace
/// whose first process is one of them).
struct GroupGuard(Option<nix::unistd::Pid>);

impl GroupGuard {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Runs `cmd` in a process group of its own, every line of its output to `on_line`; the group
/// is killed if this is dropped or fails before the command exits. Fails with the last lines
/// when it exits non-zero.
async fn run_group(
    mut cmd: Command,
    what: &str,
    mut on_line: impl FnMut(&str),
) -> Result<(), ToolchainError> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let spawn_err = |source| ToolchainError::Spawn {
        what: what.to_string(),
        source,
    };
    cmd.process_group(0)
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(spawn_err)?;
    let mut group = GroupGuard(child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32)));
    let mut out = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut err = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut tail: std::collections::VecDeque<String> = Default::default();
    let (mut out_open, mut err_open) = (true, true);
    while out_open || err_open {
        let (line, from_out) = tokio::select! {
            l = out.next_line(), if out_open => (l.map_err(spawn_err)?, true),
            l = err.next_line(), if err_open => (l.map_err(spawn_err)?, false),
        };
        let Some(line) = line else {
            // That stream ended.
            if from_out {
                out_open = false;
            } else {
                err_open = false;
            }
            continue;
        };
        on_line(&line);
        if tail.len() == 40 {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    let status = child.wait().await.map_err(spawn_err)?;
    group.disarm();
    if !status.success() {
        return Err(ToolchainError::BuildFailed {
            what: what.to_string(),
            status: status.to_string(),
            tail: Vec::from(tail).join("\n"),
        });
    }
    Ok(())
}

fn write_mode(path: &Path, data: &[u8], mode: u32) -> Result<(), ToolchainError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ToolchainError::io(dir, e))?;
    }
    std::fs::write(path, data).map_err(|e| ToolchainError::io(path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| ToolchainError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RootfsPlan {
        RootfsPlan {
            kind_files: vec![KindFile {
                path: "usr/local/bin/entrypoint".into(),
                mode: 0o755,
                data: b"#!/bin/bash\n".to_vec(),
            }],
            crictl: Installed {
                dir: PathBuf::from("/cache/builds/crictl-v1.34.0"),
                manifest: Manifest {
                    key: BuildKey::new("crictl", "v1.34.0"),
                    binaries: vec![],
                    built_with: "Go 1.26.8".into(),
                    build_seconds: 60,
                },
            },
        }
    }

    #[test]
    fn the_key_changes_with_kind_s_files_and_crictl_but_not_by_itself() {
        let a = plan();
        assert_eq!(a.key(), plan().key());
        assert_eq!(a.key().component, "kind-rootfs");
        assert!(a.key().version.starts_with("bookworm-"), "{}", a.key());
        let mut b = plan();
        b.kind_files[0].data.push(b'\n');
        assert_ne!(a.key(), b.key());
        let mut c = plan();
        c.kind_files[0].mode = 0o644;
        assert_ne!(a.key(), c.key());
        let mut d = plan();
        d.crictl.manifest.key = BuildKey::new("crictl", "v1.35.0");
        assert_ne!(a.key(), d.key());
    }

    #[test]
    fn the_package_list_is_kind_s_plus_the_runtime() {
        for p in [
            "systemd",
            "conntrack",
            "iptables",
            "nftables",
            "iproute2",
            "ethtool",
            "util-linux",
            "mount",
            "kmod",
            "libseccomp2",
            "pigz",
            "fuse-overlayfs",
            "nfs-common",
            "open-iscsi",
            "bash",
            "ca-certificates",
            "curl",
            "jq",
            "procps",
        ] {
            assert!(PACKAGES.contains(&p), "kind's base image has {p}");
        }
        for p in [
            "containerd",
            "runc",
            "containernetworking-plugins",
            "systemd-sysv",
        ] {
            assert!(PACKAGES.contains(&p), "{p}");
        }
        let mut sorted = PACKAGES.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), PACKAGES.len(), "no package twice");
    }

    #[test]
    fn mmdebstrap_gets_the_mirror_only_as_its_last_arguments() {
        let mirrors = vec!["deb http://mirror.example/debian bookworm main".to_string()];
        let args = plan().mmdebstrap_args(
            Path::new("/s/kind-files"),
            Path::new("/s/post.sh"),
            Path::new("/s/out"),
            &["Acquire::Check-Valid-Until \"false\"".into()],
            &mirrors,
        );
        let at = args.iter().position(|a| a == SUITE).unwrap();
        assert_eq!(args[at + 1], "/s/out/rootfs.tar");
        assert_eq!(&args[at + 2..], mirrors.as_slice());
        assert!(args[..at].iter().all(|a| !a.contains("mirror.example")));
        assert!(args.contains(&format!("--include={}", PACKAGES.join(","))));
        assert!(args.contains(&"--aptopt=Acquire::Check-Valid-Until \"false\"".to_string()));
        assert!(args.contains(&"--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr".to_string()));
        assert!(
            args.iter()
                .any(|a| a.contains("/cache/builds/crictl-v1.34.0/crictl"))
        );
        assert!(
            args.iter()
                .any(|a| a.contains("chroot \"$1\" /bin/bash /tmp/kind-post.sh"))
        );
    }

    #[tokio::test]
    async fn a_dropped_build_command_takes_its_whole_process_group_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let pids = tmp.path().join("pids");
        // A parent that forks a helper and reports both, then waits for it.
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "sleep 600 & echo $! > {p}; echo $$ >> {p}; echo started; wait",
            p = pids.display()
        ));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut tx = Some(tx);
        let run = run_group(cmd, "a test", move |_| {
            if let Some(tx) = tx.take() {
                let _ = tx.send(());
            }
        });
        tokio::select! {
            _ = run => panic!("it runs until dropped"),
            _ = rx => {}
        }
        let text = std::fs::read_to_string(&pids).unwrap();
        for pid in text.lines().map(|l| l.trim().parse::<i32>().unwrap()) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let mut gone = false;
            for _ in 0..100 {
                if crate::process::start_time(pid.as_raw() as u32).is_none() {
                    gone = true;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert!(gone, "{pid} still runs");
        }
        let failed = run_group(
            {
                let mut c = Command::new("sh");
                c.arg("-c").arg("echo one; echo two >&2; exit 3");
                c
            },
            "a failing command",
            |_| {},
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            failed.contains("exit status: 3") && failed.contains("two"),
            "{failed}"
        );
    }

    #[test]
    fn the_post_script_never_empties_tmp_and_leaves_no_mirror() {
        assert!(!POST_SCRIPT.contains("rm -rf /tmp"));
        assert!(POST_SCRIPT.contains("> /etc/apt/sources.list"));
        assert!(POST_SCRIPT.contains("systemctl enable kubelet.service containerd.service"));
    }

    #[test]
    fn containerd_s_config_gets_the_sandbox_image_and_the_oom_clamp() {
        let kind = "[plugins.\"io.containerd.grpc.v1.cri\"]\n  # the pause image\n  sandbox_image = \"somewhere/pause:3.10\"\n  restrict_oom_score_adj = false\n  tolerate = 1\n";
        let ours = containerd_config(kind);
        assert_eq!(
            ours,
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  # the pause image\n  sandbox_image = \"harness.local/pause:3.10\"\n  restrict_oom_score_adj = true\n  tolerate = 1\n"
        );
        assert_eq!(kind_file_mode("usr/local/bin/entrypoint"), 0o755);
        assert_eq!(kind_file_mode("kind/bin/undo-mount-hacks.sh"), 0o755);
        assert_eq!(kind_file_mode("kind/README.txt"), 0o644);
        assert_eq!(kind_file_mode("etc/containerd/config.toml"), 0o644);
    }
}
