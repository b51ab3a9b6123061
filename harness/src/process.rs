//! The process backend: a [`ComponentSpec`] describes one process as data (binary, arguments,
//! environment, printable as a shell line for a dry run), [`Process`] runs it as a child with
//! its output in a log file and ends it (TERM, then KILL) on request, and a [`Supervisor`]
//! starts it again when it exits. [`ProcRecord`] names a process across harness runs.
//!
//! Nothing here knows about clusters: whoever records processes (the local provider's cluster
//! state) learns of a supervisor's replacements through the callback it gave the supervisor.

use std::fmt;
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

/// Errors of the process backend.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// A file operation failed.
    #[error("access {}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A process could not start.
    #[error("start {component} ({})", binary.display())]
    Spawn {
        /// Component.
        component: String,
        /// Binary.
        binary: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The owner's [`OnReplace`] could not record a replacement (its error, shown as it is).
    #[error(transparent)]
    Record(Box<dyn std::error::Error + Send + Sync>),
}

impl ProcessError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The error of a [`Supervisor`]'s callback that failed with `e`.
    pub fn record(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Record(e.into())
    }
}

/// One process: binary, arguments, environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentSpec {
    /// Component name (`etcd`, `kube-apiserver`, ...); also its log file stem.
    pub name: String,
    /// The binary.
    pub binary: PathBuf,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Start with an empty environment: the child sees only `env`.
    #[serde(default)]
    pub clear_env: bool,
    /// Working directory; the harness's own when `None`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

impl fmt::Display for ComponentSpec {
    /// A shell line, one argument per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# {}", self.name)?;
        if let Some(dir) = &self.dir {
            write!(f, "cd {} && ", shell_quote(&dir.display().to_string()))?;
        }
        if self.clear_env {
            write!(f, "env -i ")?;
        }
        for (k, v) in &self.env {
            write!(f, "{k}={} ", shell_quote(v))?;
        }
        write!(f, "{}", shell_quote(&self.binary.display().to_string()))?;
        for a in &self.args {
            write!(f, " \\\n  {}", shell_quote(a))?;
        }
        writeln!(f)
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

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

    /// Sends KILL at once, as a crash would end it, and waits (up to 5 s) until it is gone.
    pub fn kill(&self) {
        if !self.alive() {
            return;
        }
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// A `/proc/<pid>/stat` line, the fields the harness reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The command name (field 2; at most 15 bytes, may hold spaces and parentheses).
    pub comm: String,
    /// The state (field 3): `Z` a zombie, `X` dead.
    pub state: String,
    /// The parent's pid (field 4).
    pub ppid: u32,
    /// The process group (field 5).
    pub pgrp: u32,
    /// User and system CPU time, in clock ticks (fields 14 and 15).
    pub ticks: u64,
    /// Start time in clock ticks since boot (field 22).
    pub start_time: u64,
}

impl Stat {
    /// Parses a stat line: the name is what lies between the first `(` and the last `)`; the
    /// fields after it are plain.
    pub fn parse(line: &str) -> Option<Self> {
        let open = line.find('(')?;
        let close = line.rfind(')')?;
        let f: Vec<&str> = line.get(close + 2..)?.split_whitespace().collect();
        let num = |i: usize| f.get(i)?.parse::<u64>().ok();
        Some(Self {
            comm: line.get(open + 1..close)?.to_string(),
            state: f.first()?.to_string(),
            ppid: u32::try_from(num(1)?).ok()?,
            pgrp: u32::try_from(num(2)?).ok()?,
            ticks: num(11)? + num(12)?,
            start_time: num(19)?,
        })
    }

    /// The stat of `pid` now, if it exists.
    pub fn of(pid: u32) -> Option<Self> {
        Self::parse(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether it is alive: neither a zombie nor dead.
    pub fn alive(&self) -> bool {
        self.state != "Z" && self.state != "X"
    }
}

/// Kernel start time of `pid`, or `None` if it does not exist or is a zombie.
pub fn start_time(pid: u32) -> Option<u64> {
    Stat::of(pid).filter(Stat::alive).map(|s| s.start_time)
}

impl Process {
    /// Starts `spec` with stdout and stderr appended to `log`, in its own process group (a
    /// terminal's Ctrl-C reaches the harness, which then ends its children in order).
    pub fn spawn(spec: &ComponentSpec, log: &Path) -> Result<Self, ProcessError> {
        if let Some(dir) = log.parent() {
            fs::create_dir_all(dir).map_err(|e| ProcessError::io(dir, e))?;
        }
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| ProcessError::io(log, e))?;
        let err = out.try_clone().map_err(|e| ProcessError::io(log, e))?;
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
            .map_err(|source| ProcessError::Spawn {
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

/// What a [`Supervisor`] calls when it has replaced an exited process, with the record of the
/// one that exited and of its replacement. Its owner records the replacement there (the local
/// provider in its cluster state), so that what ends the owner's processes ends it too. Its
/// error (the owner's own, wrapped with [`ProcessError::record`]) is what
/// [`Supervisor::revive`] returns.
pub type OnReplace =
    Arc<dyn Fn(&ProcRecord, &ProcRecord) -> Result<(), ProcessError> + Send + Sync>;

/// What starts a component again when it exits, as a kubelet restarts the container of a
/// Deployment's pod: [`revive`](Self::revive) replaces an exited process with a new one of
/// the same spec, appending to the same log (after a line saying so) and telling its owner
/// ([`OnReplace`]), so that what ends the owner's processes ends it too. A process its owner
/// stopped (or forgot, see `LocalCluster::stop_component`) is not started again.
#[derive(Clone)]
pub struct Supervisor {
    spec: ComponentSpec,
    log: PathBuf,
    procs: Arc<Mutex<Vec<Process>>>,
    on_replace: OnReplace,
    current: Arc<Mutex<ProcRecord>>,
    reviving: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor")
            .field("spec", &self.spec)
            .field("log", &self.log)
            .field("procs", &self.procs)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// A supervisor of the running `current`, started from `spec` with its output in `log`,
    /// one of `procs`; `on_replace` is told of every replacement.
    pub(crate) fn new(
        spec: ComponentSpec,
        log: PathBuf,
        procs: Arc<Mutex<Vec<Process>>>,
        on_replace: OnReplace,
        current: ProcRecord,
    ) -> Self {
        Self {
            spec,
            log,
            procs,
            on_replace,
            current: Arc::new(Mutex::new(current)),
            reviving: Default::default(),
        }
    }

    /// What its owner holds while it starts the component again and waits until it is ready
    /// (a [`revive`](Self::revive) does not wait for readiness, which only the owner knows how
    /// to tell), so that whoever asks meanwhile waits for that too.
    pub fn reviving(&self) -> &tokio::sync::Mutex<()> {
        &self.reviving
    }

    /// The process now running the component (or the last one, if it exited).
    pub fn current(&self) -> ProcRecord {
        self.current.lock().expect("not poisoned").clone()
    }

    /// Starts the component again if its process exited: how it ended, or `None` when it is
    /// running (or was stopped by its owner).
    pub fn revive(&self) -> Result<Option<String>, ProcessError> {
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
                .map_err(|e| ProcessError::io(&self.log, e))?;
            writeln!(
                f,
                "{RESTART_MARK}{} (pid {}) exited ({status}){RESTART_END}",
                self.spec.name, current.pid
            )
            .map_err(|e| ProcessError::io(&self.log, e))?;
        }
        let p = Process::spawn(&self.spec, &self.log)?;
        let new = p.record().clone();
        procs[i] = p;
        (self.on_replace)(&current, &new)?;
        *current = new;
        Ok(Some(status))
    }
}

/// How the line a [`Supervisor`] writes into a log when it starts a process again begins
/// ([`RESTART_END`] ends it).
const RESTART_MARK: &str = "harness: ";
/// How that line ends.
const RESTART_END: &str = "; starting it again";

/// The text of the last `max` bytes of a file.
fn read_end(path: &Path, max: u64) -> Option<String> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The last `lines` lines of a file (reads at most the last 64 KiB).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Some(text) = read_end(path, 64 * 1024) else {
        return String::from("(no log)");
    };
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last `lines` lines a supervised process wrote before it exited: those before the line
/// its [`Supervisor`] wrote when it started it again (that line included), not the start-up
/// lines of the process after it. The plain [`log_tail`] when the log holds no such line in
/// its last MiB.
pub fn log_tail_before_restart(path: &Path, lines: usize) -> String {
    let Some(text) = read_end(path, 1024 * 1024) else {
        return String::from("(no log)");
    };
    let all: Vec<&str> = text.lines().collect();
    match all
        .iter()
        .rposition(|l| l.starts_with(RESTART_MARK) && l.ends_with(RESTART_END))
    {
        Some(at) => all[(at + 1).saturating_sub(lines + 1)..=at].join("\n"),
        None => log_tail(path, lines),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_before_a_restart_is_what_the_exited_process_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("m.log");
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&format!("old {i}\n"));
        }
        text.push_str("E lost\n");
        text.push_str(&format!(
            "{RESTART_MARK}m (pid 7) exited (exit status: 1){RESTART_END}\n"
        ));
        for i in 0..40 {
            text.push_str(&format!("new {i}\n"));
        }
        std::fs::write(&log, &text).unwrap();
        let tail = log_tail_before_restart(&log, 3);
        assert_eq!(
            tail.lines().collect::<Vec<_>>(),
            [
                "old 28",
                "old 29",
                "E lost",
                "harness: m (pid 7) exited (exit status: 1); starting it again"
            ]
        );
        assert!(log_tail(&log, 3).contains("new 39"));
        std::fs::write(&log, "a\nb\nc\n").unwrap();
        assert_eq!(log_tail_before_restart(&log, 2), "b\nc");
    }

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

    /// Revives `s` until its process has exited and been started again: how it ended.
    fn revive_once(s: &Supervisor) -> Result<String, ProcessError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = s.revive()? {
                return Ok(status);
            }
            assert!(Instant::now() < deadline, "the process did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_supervisor_starts_an_exited_process_again_and_tells_its_owner() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("t.log");
        let spec = sh("exit 3");
        let p = Process::spawn(&spec, &log).unwrap();
        let first = p.record().clone();
        let procs = Arc::new(Mutex::new(vec![p]));
        let told = Arc::new(Mutex::new(vec![]));
        let on_replace: OnReplace = {
            let told = told.clone();
            Arc::new(move |old, new| {
                told.lock().unwrap().push((old.clone(), new.clone()));
                Ok(())
            })
        };
        let s = Supervisor::new(spec, log.clone(), procs.clone(), on_replace, first.clone());
        assert_eq!(revive_once(&s).unwrap(), "exit status: 3");
        let second = s.current();
        assert_ne!(second, first);
        assert_eq!(*told.lock().unwrap(), [(first, second)]);
        let text = fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("exited (exit status: 3); starting it again"),
            "{text}"
        );
        // A process its owner forgot is not started again.
        procs.lock().unwrap().clear();
        assert_eq!(s.revive().unwrap(), None);
    }

    #[test]
    fn an_owner_that_cannot_record_a_replacement_fails_the_revive_with_its_error() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("t.log");
        let spec = sh("exit 0");
        let p = Process::spawn(&spec, &log).unwrap();
        let first = p.record().clone();
        let procs = Arc::new(Mutex::new(vec![p]));
        let on_replace: OnReplace =
            Arc::new(|_, _| Err(ProcessError::record("access /c/cluster.json")));
        let s = Supervisor::new(spec, log, procs, on_replace, first);
        let e = revive_once(&s).unwrap_err();
        assert_eq!(e.to_string(), "access /c/cluster.json");
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
