//! A stop the user asked for (Ctrl-C, SIGTERM), and work that keeps its results through it.
//!
//! A stopped command is dropped: its clusters and processes go with it (their guards). Work
//! whose results exist only once it ends (an upstream suite writes its report when its
//! specs end) holds a [`Salvage`] while it runs; the command is then dropped only once no
//! salvage is left, a second signal comes, or [`GRACE`] has passed. Such work watches
//! [`requested`] and ends early, keeping what it has.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;

/// How long a stopped command waits for its salvages before it is dropped anyway.
pub const GRACE: Duration = Duration::from_secs(90);

#[derive(Debug, Default, Clone, Copy)]
struct State {
    requested: bool,
    salvaging: usize,
}

static STATE: LazyLock<watch::Sender<State>> =
    LazyLock::new(|| watch::Sender::new(State::default()));

/// Asks every [`Salvage`] holder to end early.
pub fn request() {
    STATE.send_modify(|s| s.requested = true);
}

/// Whether a stop was asked for.
pub fn is_requested() -> bool {
    STATE.borrow().requested
}

/// Resolves once a stop is asked for.
pub async fn requested() {
    let mut rx = STATE.subscribe();
    let _ = rx.wait_for(|s| s.requested).await;
}

/// Whether any work holds a [`Salvage`].
pub fn salvaging() -> bool {
    STATE.borrow().salvaging > 0
}

/// Resolves once no work holds a [`Salvage`].
pub async fn salvaged() {
    let mut rx = STATE.subscribe();
    let _ = rx.wait_for(|s| s.salvaging == 0).await;
}

/// Held by work whose results a stop should not lose; released when they are reported.
#[derive(Debug)]
pub struct Salvage(());

impl Salvage {
    /// Starts holding.
    pub fn begin() -> Self {
        STATE.send_modify(|s| s.salvaging += 1);
        Self(())
    }
}

impl Drop for Salvage {
    fn drop(&mut self) {
        STATE.send_modify(|s| s.salvaging -= 1);
    }
}

/// Spawns `command` as the leader of a process group of its own, stdin closed, stdout and
/// stderr to `log`; the [`GroupKill`] it returns ends the group (the command and every process
/// it started) when dropped, and the child is killed if dropped first.
pub fn spawn_group(
    command: &mut tokio::process::Command,
    log: std::fs::File,
) -> std::io::Result<(tokio::process::Child, Option<GroupKill>)> {
    let child = command
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let group = child.id().map(GroupKill);
    Ok((child, group))
}

/// Kills a process group (SIGKILL) when dropped: a child started with `process_group(0)` and
/// every process it started end with the work that holds it, however that work ends (a
/// stopped command is dropped).
pub struct GroupKill(pub u32);

impl Drop for GroupKill {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0 as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Points a gone stream at `/dev/null`: once the reader of the harness's stdout or stderr is
/// gone (a test that started it killed, a pipe to `head` closed), that stream goes to
/// `/dev/null`, so that a process the harness starts afterwards with its output (a Go program
/// dies of `SIGPIPE` on a write to a broken pipe) does not inherit the broken one. The
/// harness's own lines never panic on it either way (the print macros of the crate's root
/// ignore a failed write; this is no race with them). A thread waits in `poll(2)` for the streams' error
/// or hang-up (a pipe's writer end reports one when its last reader closes; a terminal when
/// it hangs up; files never), so it costs nothing until then. Started once, by `cli::main`.
pub fn guard_output() {
    let spawned = std::thread::Builder::new()
        .name("output-guard".into())
        .spawn(|| {
            if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
                guard(&null);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("start the output guard: {e}");
    }
}

/// [`guard_output`]'s thread: waits until stdout or stderr reports an error or a hang-up and
/// points it at `null`, until both did.
fn guard(null: &std::fs::File) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let (out, err) = (std::io::stdout(), std::io::stderr());
    let mut open = [true, true];
    while open.contains(&true) {
        let streams = [out.as_fd(), err.as_fd()];
        let watched: Vec<usize> = (0..2).filter(|i| open[*i]).collect();
        let mut fds: Vec<PollFd> = watched
            .iter()
            .map(|i| PollFd::new(streams[*i], PollFlags::empty()))
            .collect();
        // An error is a signal interrupting the wait: wait again.
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            continue;
        }
        for (f, i) in fds.iter().zip(&watched) {
            let gone = f.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL)
            });
            if gone {
                let _ = match i {
                    0 => nix::unistd::dup2_stdout(null),
                    _ => nix::unistd::dup2_stderr(null),
                };
                open[*i] = false;
            }
        }
    }
}

/// The live (not zombie) processes of process group `group`, read from `/proc`.
pub fn group_members(group: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            in_group(&stat, group).then_some(pid)
        })
        .collect()
}

/// Whether a `/proc/<pid>/stat` line is of a live process of group `group` (its name may hold
/// spaces and parentheses: the fields after the last `)` are state, parent, group).
fn in_group(stat: &str, group: u32) -> bool {
    crate::process::Stat::parse(stat).is_some_and(|s| s.state != "Z" && s.pgrp == group)
}

/// Kills what is left of process group `group` and waits, up to `timeout`, until none of its
/// processes lives: a signal is delivered when the process next runs, so a killed group's
/// members may outlive the kill by a moment on a loaded machine. Returns those still alive.
pub async fn end_group(group: u32, timeout: Duration) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = group_members(group);
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        let pgid = nix::unistd::Pid::from_raw(group as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_tells_a_live_member_of_a_group() {
        let line =
            "4242 (fixture.test (x) y) S 1 4200 4200 0 -1 4194560 0 0 0 0 7 3 0 0 20 0 1 0 555 0 0";
        assert!(in_group(line, 4200));
        assert!(!in_group(line, 4201));
        assert!(!in_group(&line.replace(") S ", ") Z "), 4200));
        assert!(!in_group("garbage", 4200));
    }

    #[tokio::test]
    async fn a_group_ends_with_every_process_in_it() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & wait"])
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let group = child.id().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while group_members(group).len() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                group_members(group)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = end_group(group, Duration::from_secs(10)).await;
        assert!(left.is_empty(), "{left:?}");
        let _ = child.wait().await;
        assert!(group_members(group).is_empty());
    }

    /// One test: the state is the process's.
    #[tokio::test]
    async fn a_stop_waits_for_the_salvages_it_asked_to_end() {
        assert!(!salvaging());
        salvaged().await;
        let first = Salvage::begin();
        let second = Salvage::begin();
        assert!(salvaging());
        let worker = tokio::spawn(async move {
            requested().await;
            drop(first);
        });
        assert!(!is_requested());
        request();
        assert!(is_requested());
        worker.await.unwrap();
        assert!(salvaging(), "one is still held");
        let waiting = tokio::spawn(salvaged());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("salvaged once none is held")
            .unwrap();
        requested().await;
    }
}
