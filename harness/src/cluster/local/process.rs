//! The process backend: [`Process`] runs one [`ComponentSpec`] as a child with its output in a
//! log file, and ends it (TERM, then KILL) on request.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::LocalError;
use super::components::ComponentSpec;
use super::state::ClusterState;

/// A started child process.
#[derive(Debug)]
pub struct Process {
    /// Component name.
    pub name: String,
    /// Its log file.
    pub log: PathBuf,
    child: Child,
    record: ProcRecord,
    exited: Option<ExitStatus>,
}

/// What identifies a process across harness runs: pid plus kernel start time, so a reused pid
/// is never mistaken for ours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcRecord {
    /// Component name.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

impl ProcRecord {
    /// The record of the current process.
    pub fn current(name: &str) -> Self {
        let pid = std::process::id();
        Self {
            name: name.into(),
            pid,
            start_time: start_time(pid).unwrap_or(0),
        }
    }

    /// Whether this very process is still alive (not a zombie, not a reused pid).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }

    /// Sends TERM, waits up to `grace`, then KILL. Used for processes that are not our children
    /// (detached clusters, leftovers of a killed run).
    pub fn terminate(&self, grace: Duration) {
        if !self.alive() {
            return;
        }
        let pid = Pid::from_raw(self.pid as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while self.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.alive() {
            let _ = kill(pid, Signal::SIGKILL);
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Kernel start time of `pid`, or `None` if it does not exist or is a zombie.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after the closing paren are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

impl Process {
    /// Starts `spec` with stdout and stderr appended to `log`, in its own process group (a
    /// terminal's Ctrl-C reaches the harness, which then ends its children in order).
    pub fn spawn(spec: &ComponentSpec, log: &Path) -> Result<Self, LocalError> {
        if let Some(dir) = log.parent() {
            fs::create_dir_all(dir).map_err(|e| LocalError::io(dir, e))?;
        }
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| LocalError::io(log, e))?;
        let err = out.try_clone().map_err(|e| LocalError::io(log, e))?;
        let mut cmd = Command::new(&spec.binary);
        if spec.clear_env {
            cmd.env_clear();
        }
        if let Some(dir) = &spec.dir {
            cmd.current_dir(dir);
        }
        let child = cmd
            .args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|source| LocalError::Spawn {
                component: spec.name.clone(),
                binary: spec.binary.clone(),
                source,
            })?;
        let pid = child.id();
        Ok(Self {
            name: spec.name.clone(),
            log: log.to_path_buf(),
            record: ProcRecord {
                name: spec.name.clone(),
                pid,
                start_time: start_time(pid).unwrap_or(0),
            },
            child,
            exited: None,
        })
    }

    /// Its identity.
    pub fn record(&self) -> &ProcRecord {
        &self.record
    }

    /// How it ended, if it has: its exit status, or "gone" when the status cannot be read
    /// (someone else reaped it) but the process no longer exists.
    pub fn exited(&mut self) -> Option<String> {
        if self.exited.is_none() {
            match self.child.try_wait() {
                Ok(Some(s)) => self.exited = Some(s),
                Ok(None) => return None,
                Err(_) if !self.record.alive() => return Some("gone".into()),
                Err(_) => return None,
            }
        }
        self.exited.map(|s| s.to_string())
    }

    /// Ends it: TERM, up to `grace` to exit, then KILL; always reaps it.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.exited = self.child.wait().ok();
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

/// What starts a component again when it exits, as a kubelet restarts the container of a
/// Deployment's pod: [`revive`](Self::revive) replaces an exited process with a new one of
/// the same spec, appending to the same log (after a line saying so) and recording it in the
/// cluster state, so that what ends the cluster ends it too. A process its cluster stopped (or
/// forgot, see `LocalCluster::stop_component`) is not started again.
#[derive(Debug, Clone)]
pub struct Supervisor {
    spec: ComponentSpec,
    log: PathBuf,
    procs: Arc<Mutex<Vec<Process>>>,
    replaced: Arc<Mutex<Vec<(ProcRecord, ProcRecord)>>>,
    state: PathBuf,
    current: Arc<Mutex<ProcRecord>>,
}

impl Supervisor {
    /// A supervisor of the running `current`, started from `spec` with its output in `log`,
    /// one of `procs`; `state` is the cluster state file its replacements are recorded in,
    /// and `replaced` where the cluster learns of them.
    pub(super) fn new(
        spec: ComponentSpec,
        log: PathBuf,
        procs: Arc<Mutex<Vec<Process>>>,
        replaced: Arc<Mutex<Vec<(ProcRecord, ProcRecord)>>>,
        state: PathBuf,
        current: ProcRecord,
    ) -> Self {
        Self {
            spec,
            log,
            procs,
            replaced,
            state,
            current: Arc::new(Mutex::new(current)),
        }
    }

    /// The process now running the component (or the last one, if it exited).
    pub fn current(&self) -> ProcRecord {
        self.current.lock().expect("not poisoned").clone()
    }

    /// Starts the component again if its process exited: how it ended, or `None` when it is
    /// running (or was stopped by its cluster).
    pub fn revive(&self) -> Result<Option<String>, LocalError> {
        let mut procs = self.procs.lock().expect("not poisoned");
        let mut current = self.current.lock().expect("not poisoned");
        let Some(i) = procs.iter().position(|p| p.record() == &*current) else {
            return Ok(None);
        };
        let Some(status) = procs[i].exited() else {
            return Ok(None);
        };
        {
            use std::io::Write;
            let mut f = File::options()
                .create(true)
                .append(true)
                .open(&self.log)
                .map_err(|e| LocalError::io(&self.log, e))?;
            writeln!(
                f,
                "harness: {} (pid {}) exited ({status}); starting it again",
                self.spec.name, current.pid
            )
            .map_err(|e| LocalError::io(&self.log, e))?;
        }
        let p = Process::spawn(&self.spec, &self.log)?;
        let new = p.record().clone();
        procs[i] = p;
        self.replaced
            .lock()
            .expect("not poisoned")
            .push((current.clone(), new.clone()));
        if let Ok(mut s) = ClusterState::load(&self.state) {
            for r in s.processes.iter_mut().filter(|r| **r == *current) {
                *r = new.clone();
            }
            s.save(&self.state)?;
        }
        *current = new;
        Ok(Some(status))
    }
}

/// The last `lines` lines of a file (reads at most the last 64 KiB).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::from("(no log)");
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let _ = f.seek(SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> ComponentSpec {
        ComponentSpec {
            name: "t".into(),
            binary: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![],
            clear_env: false,
            dir: None,
        }
    }

    #[test]
    fn stop_ends_a_process_that_ignores_term() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = Process::spawn(
            &sh("trap '' TERM; echo started; while true; do sleep 0.05; done"),
            &tmp.path().join("t.log"),
        )
        .unwrap();
        let rec = p.record().clone();
        assert!(rec.alive());
        p.stop(Duration::from_millis(200));
        assert!(!rec.alive());
        assert!(p.exited().is_some());
    }

    #[test]
    fn reports_exit_and_log_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = Process::spawn(
            &sh("echo one; echo two; echo three >&2; exit 3"),
            &tmp.path().join("t.log"),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(p.exited().unwrap(), "exit status: 3");
        assert_eq!(p.log_tail(2), "two\nthree");
    }

    #[test]
    fn a_missing_binary_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let mut spec = sh("");
        spec.binary = "/nonexistent/kube-apiserver".into();
        let e = Process::spawn(&spec, &tmp.path().join("x.log")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/kube-apiserver"), "{e}");
    }
}
