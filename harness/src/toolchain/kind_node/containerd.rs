//! Preloading without a build container: [`PrivateContainerd`] runs the root file system's own
//! containerd (the build the node runs, so its metadata database is the node's) on this host,
//! with every path in a temp dir and only the plugins that store images; [`preload`] imports
//! the image archives into a content store the node image then carries as
//! `/var/lib/containerd`.
//!
//! Nothing is mounted (the snapshotters that mount, the CRI and the task service are off, and
//! the images are imported without unpacking), no shim is started, and the process is stopped
//! on every way out: by [`PrivateContainerd::stop`], or by its `Drop`, which kills and reaps it
//! before its temp dir goes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::super::ToolchainError;
use super::rootfs_tar::RootfsTar;
use crate::process::{ComponentSpec, Process, ProcessError};
use crate::wait::{self, Check};

/// The containerd namespace of Kubernetes' images.
pub const NAMESPACE: &str = "k8s.io";

/// The label that keeps the CRI from collecting a preloaded image.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned=pinned";

/// How long containerd has to start answering.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long containerd has to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// The plugins a store-only containerd does without: the CRI, every snapshotter that mounts
/// or needs a special file system, tracing, and the runtime and task services.
pub const DISABLED_PLUGINS: &[&str] = &[
    "io.containerd.grpc.v1.cri",
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.overlayfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
    "io.containerd.runtime.v1.linux",
    "io.containerd.runtime.v2.task",
    "io.containerd.monitor.v1.cgroups",
    "io.containerd.grpc.v1.tasks",
    "io.containerd.service.v1.tasks-service",
];

/// The configuration of a containerd whose metadata and content go to `root` and everything
/// else (state, sockets, the `opt` plugin's directory) under `dir`.
pub fn config_toml(root: &Path, dir: &Path) -> String {
    let q = |p: PathBuf| serde_json::to_string(&p.display().to_string()).expect("a string");
    let disabled: Vec<String> = DISABLED_PLUGINS
        .iter()
        .map(|p| serde_json::to_string(p).expect("a string"))
        .collect();
    format!(
        "version = 2\nroot = {root}\nstate = {state}\noom_score = 0\n\
         disabled_plugins = [{disabled}]\n\n[grpc]\n  address = {socket}\n\n\
         [ttrpc]\n  address = {ttrpc}\n\n[debug]\n  address = \"\"\n\n[metrics]\n  address = \"\"\n\n\
         [plugins.\"io.containerd.internal.v1.opt\"]\n  path = {opt}\n",
        root = q(root.to_path_buf()),
        state = q(dir.join("state")),
        disabled = disabled.join(", "),
        socket = q(dir.join("containerd.sock")),
        ttrpc = q(dir.join("containerd.sock.ttrpc")),
        opt = q(dir.join("opt")),
    )
}

/// A containerd of the root file system, running on this host with its content in `root` and
/// everything else in its own temp dir. Fields drop in order: the process is ended (its
/// `Drop`) before the directory is removed.
#[derive(Debug)]
pub struct PrivateContainerd {
    process: Process,
    ctr: PathBuf,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for PrivateContainerd {
    fn drop(&mut self) {
        self.process.stop(Duration::from_secs(2));
    }
}

fn failed(what: &str, detail: String) -> ToolchainError {
    ToolchainError::BuildFailed {
        what: what.into(),
        status: "an error".into(),
        tail: detail,
    }
}

impl PrivateContainerd {
    /// Takes `containerd` and `ctr` out of `rootfs`, starts containerd over `root` and waits
    /// (at most [`START_TIMEOUT`]) until it answers.
    pub async fn start(rootfs: &RootfsTar, root: &Path) -> Result<Self, ToolchainError> {
        let dir = tempfile::Builder::new()
            .prefix("harness-preload-")
            .tempdir()
            .map_err(|e| ToolchainError::io(&std::env::temp_dir(), e))?;
        let mut bins = vec![];
        for name in ["containerd", "ctr"] {
            let wanted = format!("/usr/bin/{name}");
            let (path, _) = rootfs.resolve(&wanted).ok_or_else(|| {
                failed(
                    "find containerd in the root file system",
                    format!("no {wanted}"),
                )
            })?;
            let (_, data) = rootfs
                .read(&path)
                .map_err(|e| ToolchainError::io(&rootfs.path, e))?;
            let out = dir.path().join(name);
            std::fs::write(&out, data).map_err(|e| ToolchainError::io(&out, e))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| ToolchainError::io(&out, e))?;
            bins.push(out);
        }
        std::fs::create_dir_all(root).map_err(|e| ToolchainError::io(root, e))?;
        let config = dir.path().join("config.toml");
        std::fs::write(&config, config_toml(root, dir.path()))
            .map_err(|e| ToolchainError::io(&config, e))?;
        let spec = ComponentSpec {
            name: "containerd".into(),
            binary: bins[0].clone(),
            args: vec![
                "--config".into(),
                config.display().to_string(),
                "--log-level".into(),
                "warn".into(),
            ],
            env: vec![],
            clear_env: false,
            dir: Some(dir.path().to_path_buf()),
        };
        let process = spawn(&spec, &dir.path().join("containerd.log")).await?;
        let mut me = Self {
            process,
            ctr: bins[1].clone(),
            socket: dir.path().join("containerd.sock"),
            dir,
        };
        let waited = {
            let me = &mut me;
            wait::poll(
                "the preload containerd to answer `ctr version`",
                START_TIMEOUT,
                Duration::from_millis(100),
                || {
                    let exited = me.process.exited();
                    let version = me.command(&["version"]);
                    async move {
                        if let Some(status) = exited {
                            return Check::Failed(format!("containerd exited ({status})"));
                        }
                        Check::from_result(run(version).await.map(|_| ()))
                    }
                },
            )
            .await
        };
        if let Err(e) = waited {
            return Err(failed(
                "start the preload containerd",
                format!("{e}\n{}", me.process.log_tail(20)),
            ));
        }
        Ok(me)
    }

    /// Its directory (state, sockets, configuration, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.ctr);
        cmd.arg("--address")
            .arg(&self.socket)
            .args(["--namespace", NAMESPACE])
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `ctr` against it in [`NAMESPACE`]; its standard output.
    pub async fn ctr(&self, args: &[&str]) -> Result<String, ToolchainError> {
        run(self.command(args))
            .await
            .map_err(|e| failed(&format!("ctr {}", args.join(" ")), e))
    }

    /// The images it has, by name, sorted.
    pub async fn images(&self) -> Result<Vec<String>, ToolchainError> {
        let out = self.ctr(&["images", "ls", "-q"]).await?;
        let mut names: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
        names.retain(|n| !n.is_empty());
        names.sort();
        Ok(names)
    }

    /// Ends it: SIGTERM, up to [`STOP_GRACE`] to exit, then SIGKILL. A containerd that had to
    /// be killed may have left its database half written, so that is an error.
    pub async fn stop(mut self) -> Result<(), ToolchainError> {
        let pid = nix::unistd::Pid::from_raw(self.process.record().pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while tokio::time::Instant::now() < deadline {
            if self.process.exited().is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let tail = self.process.log_tail(20);
        self.process.stop(Duration::ZERO);
        Err(failed(
            "stop the preload containerd",
            format!("it did not exit within {STOP_GRACE:?} of SIGTERM and was killed\n{tail}"),
        ))
    }
}

/// Starts `spec`, again when the binary just written is still open in a child another thread
/// forked meanwhile ("text file busy" until that child executes).
async fn spawn(spec: &ComponentSpec, log: &Path) -> Result<Process, ToolchainError> {
    let mut attempts = 0;
    loop {
        match Process::spawn(spec, log) {
            Ok(p) => return Ok(p),
            Err(ProcessError::Spawn { source, .. })
                if source.raw_os_error() == Some(nix::libc::ETXTBSY) && attempts < 20 =>
            {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(ProcessError::Spawn { source, .. }) => {
                return Err(ToolchainError::Spawn {
                    what: format!("the preload containerd ({})", spec.binary.display()),
                    source,
                });
            }
            Err(e) => return Err(failed("start the preload containerd", e.to_string())),
        }
    }
}

async fn run(mut cmd: Command) -> Result<String, String> {
    let out = cmd.output().await.map_err(|e| format!("run ctr: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Imports `archives` (`(name, OCI archive)`) into a content store at `root` with the
/// root file system's containerd, without unpacking, each image pinned as kind pins its
/// preloaded images; returns the names the store then holds. containerd is stopped before
/// this returns, on every way out.
pub async fn preload(
    rootfs: &RootfsTar,
    root: &Path,
    archives: &[(String, PathBuf)],
) -> Result<Vec<String>, ToolchainError> {
    let containerd = PrivateContainerd::start(rootfs, root).await?;
    for (name, archive) in archives {
        let path = archive.display().to_string();
        containerd
            .ctr(&["images", "import", "--all-platforms", "--no-unpack", &path])
            .await?;
        // ctr 1.6 has no `import --label`.
        containerd
            .ctr(&["images", "label", name, PINNED_LABEL])
            .await?;
    }
    let names = containerd.images().await?;
    containerd.stop().await?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::oci::{Entry, layer_tar};

    /// A root file system whose `containerd` records its pid and directory in `record` and
    /// sleeps, and whose `ctr` answers `version` and `images ls -q` (with `names`) and refuses
    /// imports of archives named `bad*`.
    fn fake_rootfs(tmp: &Path, record: &Path, names: &str) -> RootfsTar {
        let containerd = format!(
            "#!/bin/sh\necho \"$$ $PWD\" > {}\nexec sleep 600\n",
            record.display()
        );
        let ctr = format!(
            "#!/bin/sh\ncase \"$*\" in\n*import*/bad*) echo 'import refused' >&2; exit 1;;\n\
             *'ls -q'*) printf '{names}';;\nesac\nexit 0\n"
        );
        let entries = vec![
            Entry::Dir {
                path: "/usr".into(),
                mode: 0o755,
            },
            Entry::Dir {
                path: "/usr/bin".into(),
                mode: 0o755,
            },
            Entry::File {
                path: "/usr/bin/containerd".into(),
                mode: 0o755,
                data: containerd.into_bytes(),
            },
            Entry::File {
                path: "/usr/bin/ctr".into(),
                mode: 0o755,
                data: ctr.into_bytes(),
            },
        ];
        let tar = tmp.join("rootfs.tar");
        std::fs::write(&tar, layer_tar(&entries).unwrap()).unwrap();
        RootfsTar::open(&tar).unwrap()
    }

    /// The pid and directory the fake containerd recorded.
    fn recorded(record: &Path) -> (u32, PathBuf) {
        let text = std::fs::read_to_string(record).unwrap();
        let (pid, dir) = text.trim().split_once(' ').unwrap();
        (pid.parse().unwrap(), PathBuf::from(dir))
    }

    #[tokio::test]
    async fn a_preload_stops_containerd_and_removes_its_dir_whether_it_fails_or_not() {
        let tmp = tempfile::tempdir().unwrap();
        let record = tmp.path().join("record");
        let rootfs = fake_rootfs(tmp.path(), &record, "harness.local/a:v1\\n");
        let good = vec![("harness.local/a:v1".to_string(), tmp.path().join("a.tar"))];
        let names = preload(&rootfs, &tmp.path().join("root"), &good)
            .await
            .unwrap();
        assert_eq!(names, ["harness.local/a:v1"]);
        let (pid, dir) = recorded(&record);
        assert_eq!(crate::process::start_time(pid), None, "containerd ended");
        assert!(!dir.exists(), "its dir is removed");

        let bad = vec![("harness.local/b:v1".to_string(), tmp.path().join("bad.tar"))];
        let err = preload(&rootfs, &tmp.path().join("root"), &bad)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("import refused"), "{err}");
        let (pid2, dir2) = recorded(&record);
        assert_ne!(pid2, pid);
        assert_eq!(crate::process::start_time(pid2), None, "containerd ended");
        assert!(!dir2.exists(), "its dir is removed");
    }

    #[test]
    fn the_config_keeps_every_path_in_its_own_dirs() {
        let text = config_toml(Path::new("/b/root"), Path::new("/t/dir"));
        for line in text.lines().filter(|l| l.contains('/')) {
            assert!(
                line.contains("\"/b/root\"") || line.contains("\"/t/dir/"),
                "a path outside its dirs: {line}"
            );
        }
        assert!(text.contains("address = \"/t/dir/containerd.sock\""));
        assert!(text.contains("path = \"/t/dir/opt\""));
        assert!(!text.contains("/run/containerd"));
        for p in [
            "io.containerd.grpc.v1.cri",
            "io.containerd.snapshotter.v1.overlayfs",
            "io.containerd.runtime.v2.task",
        ] {
            assert!(text.contains(&format!("\"{p}\"")), "{p} disabled");
        }
    }
}
