//! A Docker daemon of the harness's own, for the providers that need Docker (kind). Start with
//! [`docker_host_or_private`]: the user's daemon when `DOCKER_HOST` names one, else a
//! [`PrivateDocker`] — Debian's `dockerd` (installed with `apt-get` when missing) on a
//! containerd of its own, everything under one directory, torn down without a trace.
//!
//! What makes it private: containerd runs with its own configuration, root, state and sockets
//! (CRI off), and `dockerd` with its own socket, data root, exec root, pid file and
//! configuration file (so `/etc/docker/daemon.json` is never read and the trust key is not
//! written to `/etc/docker`), pointed at that containerd (a containerd listening at the
//! default path is never adopted). It makes no `docker0` bridge and no iptables rule
//! (`--bridge none --iptables=false --ip-masq=false`); user-defined networks come from an
//! address pool of its own; containers' cgroups go under a parent of its own. Its default OCI
//! runtime is this harness ([`runtime`]): runc minus the capabilities runc cannot grant in a
//! sandbox whose bounding set lacks some, so that `docker run --privileged` and `docker exec
//! --privileged` (kind's nodes need both) work there.
//!
//! Its [`record`] (`docker.json` in the daemon's directory) is written before anything is
//! made, so that [`gc`] can tear down what a killed run left; [`teardown`] removes it all and
//! lists what is left.

pub mod record;
pub mod runtime;
pub mod teardown;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::process::{ComponentSpec, ProcRecord, Process, ProcessError};
use crate::toolchain::host::DebianPackage;
use crate::toolchain::{Toolchain, ToolchainError};
use crate::wait::{self, Check};

pub use record::{
    DockerRecord, HostFacts, LIB_MODULES, RECORD_FILE, RUN_DOCKER, RUNTIME_NAME,
    RUNTIME_SUBCOMMAND, SYSCTLS, free_pool, sysctl_path,
};

/// Debian's Docker engine (20.10 on Debian 12): `dockerd`, the `docker` command and
/// `docker-proxy`; it brings containerd and runc along.
pub const DOCKER_IO: DebianPackage = DebianPackage {
    package: "docker.io",
    binaries: &["dockerd"],
};

/// The `docker` command, from the same package (a newer one on `PATH` is preferred).
pub const DOCKER_CLI: DebianPackage = DebianPackage {
    package: "docker.io",
    binaries: &["docker"],
};

const CONTAINERD: DebianPackage = DebianPackage {
    package: "containerd",
    binaries: &["containerd"],
};

const RUNC: DebianPackage = DebianPackage {
    package: "runc",
    binaries: &["runc"],
};

/// Where Debian puts the daemons and runc, searched besides `PATH`.
const SBIN: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin"];

/// The longest path a unix socket can have (`sun_path` holds 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Errors of a private Docker daemon.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// A binary could not be found or installed.
    #[error("find Docker's binaries")]
    Toolchain(#[from] ToolchainError),
    /// This host or this harness cannot run a private daemon.
    #[error("start a private Docker daemon: {what}; {fix}")]
    Unsupported {
        /// What is missing.
        what: String,
        /// How to get it.
        fix: String,
    },
    /// A daemon was started in that directory already.
    #[error(
        "start a private Docker daemon in {}: one was started there already ({RECORD_FILE} \
         exists); stop it, or remove what a killed run left with `harness gc`",
        dir.display()
    )]
    Exists {
        /// The directory.
        dir: PathBuf,
    },
    /// The process backend failed.
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// A daemon exited while starting.
    #[error("{component} exited ({status}); last lines of {}:\n{tail}", log.display())]
    Exited {
        /// containerd or dockerd.
        component: String,
        /// How it ended.
        status: String,
        /// Its log.
        log: PathBuf,
        /// The log's tail.
        tail: String,
    },
    /// A daemon did not answer in time.
    #[error(
        "wait for {what}: no answer after {timeout:?}; last seen: {last}; last lines of {}:\n{tail}",
        log.display()
    )]
    NotReady {
        /// What was waited for.
        what: String,
        /// The bound.
        timeout: Duration,
        /// The last observation.
        last: String,
        /// The log to read.
        log: PathBuf,
        /// The log's tail.
        tail: String,
    },
    /// A file operation failed.
    #[error("access {}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A record is unreadable.
    #[error("read {}: {detail}", path.display())]
    BadRecord {
        /// Path.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Teardown steps failed.
    #[error("tear down private Docker daemon `{name}`: {}", errors.join("; "))]
    Teardown {
        /// The daemon's name (its directory's).
        name: String,
        /// Every failed step.
        errors: Vec<String>,
    },
}

impl DockerError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where to start a private daemon.
#[derive(Debug, Clone)]
pub struct DockerOptions {
    /// Its directory, made by [`PrivateDocker::start`]; [`gc`] looks for records in its
    /// parent. Unix sockets live in it, so it must be short (about 60 bytes at most).
    pub dir: PathBuf,
    /// The harness executable the daemon runs as its OCI runtime (`harness oci-runtime`).
    pub harness_binary: PathBuf,
    /// How long containerd and dockerd may take to answer.
    pub ready_timeout: Duration,
    /// Where the daemons' logs are copied before they are torn down, also after a failed
    /// start (whose error shows their last lines either way); not kept when `None`.
    pub logs: Option<PathBuf>,
}

impl DockerOptions {
    /// A daemon in `dir`, run by this executable, ready within a minute, its logs not kept.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            harness_binary: std::env::current_exe().unwrap_or_else(|_| "harness".into()),
            ready_timeout: Duration::from_secs(60),
            logs: None,
        }
    }
}

/// Where the harness keeps its private daemons (and where [`gc`] looks by default).
pub fn default_root() -> PathBuf {
    super::local::state::providers_root().join("docker")
}

/// A running private Docker daemon (see the module documentation). [`PrivateDocker::stop`]
/// tears it down and says what it could not remove; dropping it tears it down too.
#[derive(Debug)]
pub struct PrivateDocker {
    record: DockerRecord,
    procs: Vec<Process>,
    logs: Option<PathBuf>,
    done: bool,
}

impl PrivateDocker {
    /// Starts containerd and dockerd in `options.dir` (installing Debian's `docker.io` without
    /// its recommendations when `dockerd` is missing) and waits until `docker version`
    /// answers. Needs root. On failure, whatever was started is torn down.
    pub async fn start(
        toolchain: &Toolchain,
        options: &DockerOptions,
    ) -> Result<Self, DockerError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(DockerError::Unsupported {
                what: "it needs root (dockerd mounts, makes network devices and cgroups)".into(),
                fix: "run the harness as root, or set DOCKER_HOST to a Docker daemon of yours"
                    .into(),
            });
        }
        let dockerd = toolchain
            .debian_binary_without_recommends(DOCKER_IO, SBIN)
            .await?;
        let docker = toolchain.debian_binary_in(DOCKER_CLI, &[]).await?;
        let containerd = toolchain.debian_binary_in(CONTAINERD, SBIN).await?;
        let runc = toolchain.debian_binary_in(RUNC, SBIN).await?;
        if !options.harness_binary.is_file() {
            return Err(DockerError::Unsupported {
                what: format!(
                    "its OCI runtime, the harness executable {}, does not exist",
                    options.harness_binary.display()
                ),
                fix: "name the harness executable in DockerOptions::harness_binary".into(),
            });
        }
        check_runtime_paths(&[&options.harness_binary, &runc])?;
        let started = Instant::now();
        let docker = Self::launch(options, &docker, &dockerd, &containerd, &runc).await?;
        tracing::info!(
            dir = %options.dir.display(),
            "private Docker daemon ready in {:?}",
            started.elapsed()
        );
        Ok(docker)
    }

    async fn launch(
        options: &DockerOptions,
        docker: &Path,
        dockerd: &Path,
        containerd: &Path,
        runc: &Path,
    ) -> Result<Self, DockerError> {
        // Sockets and records name absolute paths.
        let dir =
            std::path::absolute(&options.dir).map_err(|e| DockerError::io(&options.dir, e))?;
        if dir.join(RECORD_FILE).exists() {
            return Err(DockerError::Exists { dir });
        }
        // runc's arguments name bundles in it, and pass through the same shell line.
        check_runtime_paths(&[&dir])?;
        let routes = fs::read_to_string("/proc/net/route").unwrap_or_default();
        let taken = dir.parent().map(live_pools).unwrap_or_default();
        let pool = free_pool(&routes, &taken, rand::random::<u16>()).ok_or_else(|| {
            DockerError::Unsupported {
                what: "every /20 of 172.16.0.0/12 overlaps a route of this host or another \
                       private daemon's pool"
                    .into(),
                fix: "remove routes of 172.16.0.0/12 or leftover daemons (`harness gc`)".into(),
            }
        })?;
        let record = DockerRecord {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            id: format!("{:08x}", rand::random::<u32>()),
            dir: dir.clone(),
            owner: ProcRecord::current("harness"),
            pool,
            docker: docker.to_path_buf(),
            processes: vec![],
            host: HostFacts::read(),
        };
        check_socket_paths(&record)?;
        fs::create_dir_all(&dir).map_err(|e| DockerError::io(&dir, e))?;
        // Recorded before anything of it exists outside its directory.
        record.save()?;
        let mut me = Self {
            record,
            procs: vec![],
            logs: options.logs.clone(),
            done: false,
        };
        me.write_files(&options.harness_binary, runc)?;
        let timeout = options.ready_timeout;
        me.spawn(&me.record.containerd_spec(containerd))?;
        let socket = me.record.containerd_socket();
        me.wait_until("containerd's socket", "containerd", timeout, || {
            let check = Check::when(socket.exists(), || {
                format!("{} does not exist yet", socket.display())
            });
            async move { check }
        })
        .await?;
        me.spawn(&me.record.dockerd_spec(dockerd))?;
        let record = me.record.clone();
        me.wait_until(
            "dockerd to answer `docker version`",
            "dockerd",
            timeout,
            || {
                let mut version = tokio::process::Command::from(record.command());
                version
                    .args(["version", "--format", "{{.Server.Version}}"])
                    .kill_on_drop(true);
                async move {
                    match tokio::time::timeout(Duration::from_secs(10), version.output()).await {
                        Err(_) => Check::Pending("`docker version` took over 10 s".into()),
                        Ok(Err(e)) => Check::Failed(format!("run `docker version`: {e}")),
                        Ok(Ok(out)) if out.status.success() => Check::Met,
                        Ok(Ok(out)) => Check::Pending(
                            String::from_utf8_lossy(&out.stderr)
                                .lines()
                                .last()
                                .unwrap_or("no output")
                                .to_string(),
                        ),
                    }
                }
            },
        )
        .await?;
        Ok(me)
    }

    fn write_files(&self, harness: &Path, runc: &Path) -> Result<(), DockerError> {
        let r = &self.record;
        for d in [r.containerd_dir(), r.dir.join("cli")] {
            fs::create_dir_all(&d).map_err(|e| DockerError::io(&d, e))?;
        }
        for (path, body) in [
            (r.containerd_config_path(), r.containerd_config()),
            (r.daemon_json_path(), r.daemon_json(harness, runc)),
        ] {
            fs::write(&path, body).map_err(|e| DockerError::io(&path, e))?;
        }
        Ok(())
    }

    /// Starts `spec` and records it before anything else happens.
    fn spawn(&mut self, spec: &ComponentSpec) -> Result<(), DockerError> {
        let p = Process::spawn(spec, &self.record.log(&spec.name))?;
        self.record.processes.push(p.record().clone());
        self.procs.push(p);
        self.record.save()
    }

    /// Where the log of `component` is once a failed start has torn the daemon down: its
    /// exported copy, when [`DockerOptions::logs`] asks for one.
    fn kept_log(&self, component: &str) -> PathBuf {
        match &self.logs {
            Some(dest) => dest.join(format!("{component}.log")),
            None => self.record.log(component),
        }
    }

    /// The first of its processes that has exited, as an error with its log's tail.
    fn check_alive(&mut self) -> Result<(), DockerError> {
        let exited = self
            .procs
            .iter_mut()
            .find_map(|p| Some((p.name.clone(), p.exited()?, p.log_tail(20))));
        match exited {
            None => Ok(()),
            Some((component, status, tail)) => Err(DockerError::Exited {
                log: self.kept_log(&component),
                component,
                status,
                tail,
            }),
        }
    }

    /// Polls `check` every 100 ms until it is met, failing at once when a process exits
    /// and, after `timeout`, with the last observation and `component`'s log.
    async fn wait_until<F, Fut>(
        &mut self,
        what: &str,
        component: &str,
        timeout: Duration,
        mut check: F,
    ) -> Result<(), DockerError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Check>,
    {
        let mut exited = None;
        let result = wait::poll(what, timeout, Duration::from_millis(100), || {
            let alive = self.check_alive();
            let probe = check();
            let failed = alive.is_err();
            if let Err(e) = alive {
                exited = Some(e);
            }
            async move {
                if failed {
                    Check::Failed("a daemon exited".into())
                } else {
                    probe.await
                }
            }
        })
        .await;
        if let Some(e) = exited {
            return Err(e);
        }
        result.map_err(|e| DockerError::NotReady {
            what: what.into(),
            timeout,
            last: match e {
                wait::WaitError::Timeout { last, .. } => last,
                other => other.to_string(),
            },
            tail: crate::process::log_tail(&self.record.log(component), 20),
            log: self.kept_log(component),
        })
    }

    /// Its record.
    pub fn record(&self) -> &DockerRecord {
        &self.record
    }

    /// The `DOCKER_HOST` value, `unix://<dir>/docker.sock`.
    pub fn host(&self) -> String {
        self.record.host()
    }

    /// The environment of a `docker` command for this daemon (see [`DockerRecord::env`]).
    pub fn env(&self) -> Vec<(String, String)> {
        self.record.env()
    }

    /// A `docker` command for this daemon.
    pub fn command(&self) -> std::process::Command {
        self.record.command()
    }

    /// Copies containerd's and dockerd's logs into `dest`.
    pub fn export_logs(&self, dest: &Path) -> Result<(), DockerError> {
        export_logs(&self.record, dest)
    }

    /// Tears the daemon down (see [`teardown`]): its logs exported first when
    /// [`DockerOptions::logs`] says where; returns what could not be removed. Blocks for up
    /// to a minute (dockerd and containerd get time to exit).
    pub fn stop(mut self) -> Vec<String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Vec<String> {
        if self.done {
            return vec![];
        }
        self.done = true;
        let mut errors = vec![];
        if let Some(dest) = &self.logs
            && let Err(e) = export_logs(&self.record, dest)
        {
            errors.push(e.to_string());
        }
        errors.extend(self.record.teardown(&mut self.procs));
        errors
    }
}

impl Drop for PrivateDocker {
    fn drop(&mut self) {
        let errors = self.teardown();
        if !errors.is_empty() {
            eprintln!(
                "warning: {}",
                DockerError::Teardown {
                    name: self.record.name.clone(),
                    errors,
                }
            );
        }
    }
}

fn export_logs(record: &DockerRecord, dest: &Path) -> Result<(), DockerError> {
    fs::create_dir_all(dest).map_err(|e| DockerError::io(dest, e))?;
    for name in ["containerd", "dockerd"] {
        let from = record.log(name);
        if from.exists() {
            let to = dest.join(format!("{name}.log"));
            fs::copy(&from, &to).map_err(|e| DockerError::io(&to, e))?;
        }
    }
    Ok(())
}

/// dockerd runs a runtime that has arguments through a shell script it writes into its data
/// root (`<path> <args> $@`, unquoted): a path the shell would split or expand can be neither
/// the runtime, nor runc, nor in runc's arguments.
fn check_runtime_paths(paths: &[&Path]) -> Result<(), DockerError> {
    for p in paths {
        let s = p.display().to_string();
        if s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/-_.+,:@%".contains(c))
        {
            return Err(DockerError::Unsupported {
                what: format!(
                    "dockerd runs its OCI runtime through a shell line, which cannot hold the \
                     path `{s}`"
                ),
                fix: "use paths of letters, digits and `/-_.+,:@%` only".into(),
            });
        }
    }
    Ok(())
}

/// Refuses a directory whose unix sockets would not fit `sun_path`.
fn check_socket_paths(record: &DockerRecord) -> Result<(), DockerError> {
    let longest = record.ttrpc_socket();
    let len = longest.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(DockerError::Unsupported {
            what: format!(
                "its socket {} would be {len} bytes, more than a unix socket's {MAX_SOCKET_PATH}",
                longest.display()
            ),
            fix: "choose a shorter directory".into(),
        });
    }
    Ok(())
}

/// The pools of the daemons recorded in `root` whose owner is alive.
fn live_pools(root: &Path) -> Vec<String> {
    fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| DockerRecord::load(&e.path()).ok())
        .filter(|r| r.owner.alive())
        .map(|r| r.pool)
        .collect()
}

/// Tears down the daemons recorded in `root` whose owner is gone (a run killed with
/// SIGKILL, say) and returns their names. Directories without a record are left alone.
pub fn gc(root: &Path) -> Result<Vec<String>, DockerError> {
    let mut removed = vec![];
    let mut errors = vec![];
    let Ok(entries) = fs::read_dir(root) else {
        return Ok(removed);
    };
    for e in entries.flatten() {
        let Ok(record) = DockerRecord::load(&e.path()) else {
            continue;
        };
        if record.owner.alive() {
            continue;
        }
        let failed = record.teardown(&mut []);
        if failed.is_empty() {
            removed.push(record.name);
        } else {
            errors.extend(failed);
        }
    }
    if !errors.is_empty() {
        return Err(DockerError::Teardown {
            name: "gc".into(),
            errors,
        });
    }
    removed.sort();
    Ok(removed)
}

/// The Docker daemon a provider uses: the user's (`DOCKER_HOST`), or a private one.
#[derive(Debug)]
pub enum DockerHost {
    /// The daemon `DOCKER_HOST` names, used as it is: nothing to tear down.
    User(String),
    /// A private daemon this process started; torn down with it.
    Private(Box<PrivateDocker>),
}

impl DockerHost {
    /// The `DOCKER_HOST` value.
    pub fn host(&self) -> String {
        match self {
            Self::User(host) => host.clone(),
            Self::Private(d) => d.host(),
        }
    }

    /// The environment of a `docker` command (or kind) for this daemon.
    pub fn env(&self) -> Vec<(String, String)> {
        match self {
            Self::User(host) => vec![("DOCKER_HOST".into(), host.clone())],
            Self::Private(d) => d.env(),
        }
    }

    /// Tears down a private daemon (nothing for the user's); what could not be removed.
    pub fn stop(self) -> Vec<String> {
        match self {
            Self::User(_) => vec![],
            Self::Private(d) => d.stop(),
        }
    }
}

/// The user's daemon when `DOCKER_HOST` is set (and not empty), else `None`.
pub fn user_docker_host(value: Option<OsString>) -> Option<String> {
    value
        .map(|v| v.to_string_lossy().trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The daemon `DOCKER_HOST` names if it is set; otherwise a [`PrivateDocker`] started as
/// `options` say.
pub async fn docker_host_or_private(
    toolchain: &Toolchain,
    options: &DockerOptions,
) -> Result<DockerHost, DockerError> {
    match user_docker_host(std::env::var_os("DOCKER_HOST")) {
        Some(host) => Ok(DockerHost::User(host)),
        None => Ok(DockerHost::Private(Box::new(
            PrivateDocker::start(toolchain, options).await?,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::record::tests::record;

    #[test]
    fn only_a_non_empty_docker_host_is_the_user_s() {
        assert_eq!(user_docker_host(None), None);
        assert_eq!(user_docker_host(Some("".into())), None);
        assert_eq!(
            user_docker_host(Some("unix:///run/user/1000/docker.sock".into())).as_deref(),
            Some("unix:///run/user/1000/docker.sock")
        );
    }

    #[test]
    fn runtime_paths_must_survive_an_unquoted_shell_line() {
        assert!(check_runtime_paths(&[Path::new("/work/target/debug/harness")]).is_ok());
        let e = check_runtime_paths(&[Path::new("/home/a b/harness")]).unwrap_err();
        assert!(e.to_string().contains("`/home/a b/harness`"), "{e}");
    }

    #[test]
    fn a_directory_too_long_for_its_sockets_is_refused() {
        let long = DockerRecord {
            dir: PathBuf::from("/").join("x".repeat(80)),
            ..record()
        };
        let e = check_socket_paths(&long).unwrap_err().to_string();
        assert!(e.contains("choose a shorter directory"), "{e}");
        assert!(check_socket_paths(&record()).is_ok());
    }

    #[test]
    fn a_record_round_trips_and_gc_leaves_a_live_owner_s_daemon_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        fs::create_dir(&dir).unwrap();
        let live = DockerRecord {
            dir: dir.clone(),
            owner: ProcRecord::current("harness"),
            ..record()
        };
        live.save().unwrap();
        assert_eq!(DockerRecord::load(&dir).unwrap(), live);
        assert_eq!(live_pools(root.path()), ["172.30.16.0/20"]);
        assert!(gc(root.path()).unwrap().is_empty());
        assert!(dir.join(RECORD_FILE).exists());
        // A directory without a record is not one of ours to remove.
        fs::create_dir(root.path().join("other")).unwrap();
        assert!(gc(root.path()).unwrap().is_empty());
        assert!(root.path().join("other").exists());
    }
}
