//! Every process the harness starts is ended by it, and its directory removed: on success,
//! on error, on panic, on Ctrl-C; `gc` cleans up after SIGKILL.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Cli, default_profile, provider, wait_exit};
use harness::cluster::local::state::ClusterState;
use harness::cluster::{Cluster, ClusterProvider};
use harness::process::ProcRecord;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn records(dir: &Path) -> Vec<ProcRecord> {
    common::processes(dir)
}

/// A cluster under the state directory `state` with a component alive: its directory and
/// recorded processes.
fn running_cluster(state: &Path) -> Option<(std::path::PathBuf, Vec<ProcRecord>)> {
    std::fs::read_dir(state.join("clusters"))
        .into_iter()
        .flatten()
        .flatten()
        .find_map(|e| {
            let state = ClusterState::load(&e.path().join("cluster.json")).ok()?;
            state
                .processes
                .iter()
                .any(ProcRecord::alive)
                .then(|| (e.path(), state.processes))
        })
}

fn assert_all_gone(procs: &[ProcRecord], dir: &Path) {
    assert_eq!(procs.len(), 6, "every component was recorded: {procs:?}");
    common::assert_nothing_left(procs, dir);
}

#[tokio::test]
async fn destroy_ends_every_process_and_removes_the_dir() {
    let (p, _root) = provider();
    let c = p.create("t", &default_profile()).await.unwrap();
    let dir = c.layout().dir.clone();
    let procs = records(&dir);
    assert!(procs.iter().all(ProcRecord::alive));
    c.destroy().unwrap();
    assert_all_gone(&procs, &dir);
}

#[tokio::test]
async fn a_panic_in_the_test_body_still_tears_down() {
    let (p, _root) = provider();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let c = p.create("t", &default_profile()).await.unwrap();
        let dir = c.layout().dir.clone();
        tx.send((records(&dir), dir)).unwrap();
        panic!("the test body fails");
    });
    let err = task.await.unwrap_err();
    assert!(err.is_panic());
    let (procs, dir) = rx.await.unwrap();
    assert_all_gone(&procs, &dir);
}

#[tokio::test]
async fn a_component_that_fails_to_start_is_reported_with_its_log_and_nothing_is_left() {
    let (p, root) = provider();
    let mut profile = default_profile();
    profile.add_gates(&["NoSuchGate=true"]).unwrap();
    let err = p.create("t", &profile).await.unwrap_err();
    let full = format!("{err:#}");
    assert!(full.contains("kube-apiserver exited"), "{full}");
    assert!(
        full.contains("NoSuchGate"),
        "the log tail names the cause: {full}"
    );
    assert!(!root.path().join("t").exists());
}

#[tokio::test]
async fn a_port_in_use_is_named_and_nothing_is_left() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (mut p, root) = provider();
    p = harness::cluster::local::LocalProvider::new(
        harness::toolchain::Toolchain::new(
            harness::toolchain::Cache::from_env(),
            harness::progress::Progress::plain(),
        ),
        harness::cluster::local::LocalOptions {
            apiserver_port: Some(port),
            ..p.options().clone()
        },
        harness::progress::Progress::plain(),
    );
    let msg = p
        .create("t", &default_profile())
        .await
        .unwrap_err()
        .to_string();
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(msg.contains("in use"), "{msg}");
    assert!(!root.path().join("t").exists());
}

#[test]
fn ctrl_c_ends_the_cluster() {
    let cli = Cli::new();
    let mut child = cli.up_attached("c", &[]);
    let dir = cli.dir("c");
    let procs = records(&dir);
    assert!(procs.iter().all(ProcRecord::alive));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    assert_all_gone(&procs, &dir);
}

/// A harness whose reader is gone (its output piped to a test that was killed, or to `head`)
/// still tears down on a stop: its last lines go nowhere instead of panicking on the broken
/// pipe.
#[test]
fn a_stop_after_the_output_s_reader_is_gone_still_ends_the_cluster() {
    let cli = Cli::new();
    // Its stdout's reader is gone once the kubeconfig line is read; its stderr's too, here:
    // what it prints from now on has nowhere to go.
    let mut child = cli.up_attached_with("r", &[], std::process::Stdio::piped());
    drop(child.stderr.take());
    let dir = cli.dir("r");
    let procs = records(&dir);
    assert!(procs.iter().all(ProcRecord::alive));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_all_gone(&procs, &dir);
}

#[test]
fn gc_cleans_up_after_a_killed_run() {
    let cli = Cli::new();
    let mut child = cli.up_attached("k", &[]);
    let dir = cli.dir("k");
    let procs = records(&dir);
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(
        procs.iter().any(ProcRecord::alive),
        "the killed run left its components behind"
    );
    let out = cli.cmd().arg("gc").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed cluster `k`"));
    assert_all_gone(&procs, &dir);
}

#[test]
fn gc_cleans_up_after_a_killed_bench() {
    let cli = Cli::new();
    let mut child = cli
        .cmd()
        .args(["bench", "cluster-up", "--runs", "5"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // SIGKILL the bench while one of its clusters has components running.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let (dir, procs) = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no bench cluster came up"
        );
        assert!(child.try_wait().unwrap().is_none(), "the bench ended early");
        let running = running_cluster(cli.state.path());
        if let Some(found) = running {
            child.kill().unwrap();
            child.wait().unwrap();
            break found;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    assert!(name.starts_with("bench-"), "{name}");
    // The bench's own work directory outlives the SIGKILL too.
    let work = |root: &Path| -> Vec<String> {
        std::fs::read_dir(root.join("bench-work"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let left = work(cli.state.path());
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with("bench-"), "{left:?}");
    let out = cli.cmd().arg("gc").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("removed cluster `{name}`")),
        "{out:?}"
    );
    for p in &procs {
        assert!(!p.alive(), "{} (pid {}) is still alive", p.name, p.pid);
    }
    assert!(!dir.exists(), "{} still exists", dir.display());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("removed bench work directory `{}`", left[0])),
        "{out:?}"
    );
    assert_eq!(work(cli.state.path()), Vec::<String>::new());
}

/// A bench stopped while its exploration runs stops the exploration as a person would (SIGINT,
/// and time to tear down), so the exploration's cell leaves nothing behind.
#[test]
fn a_stopped_bench_lets_its_exploration_tear_its_cell_down() {
    let cli = Cli::new();
    let out = tempfile::tempdir().unwrap();
    let mut child = cli
        .cmd()
        .args(["bench", "explore", "--budget", "5m", "--seed", "1", "--out"])
        .arg(out.path())
        .args(["--", "--kinds", "CloneSet", "--modes", "admission"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Stop the bench once the exploration's cell runs its trials (the controller is up).
    let trying = || {
        std::fs::read_dir(out.path().join("logs"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|l| l.contains("admission trials"))
            })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(900);
    let (dir, procs) = loop {
        assert!(std::time::Instant::now() < deadline, "no cell came up");
        assert!(child.try_wait().unwrap().is_none(), "the bench ended early");
        if !trying() {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let running = running_cluster(cli.state.path());
        if let Some(found) = running {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    assert!(name.starts_with("explore-"), "{name}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(300));
    assert_eq!(status.code(), Some(130));
    common::assert_nothing_left(&procs, &dir);
    let left = common::processes_with(&dir.to_string_lossy());
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn detached_clusters_are_listed_left_alone_by_gc_and_ended_by_down() {
    let cli = Cli::new();
    let out = cli
        .cmd()
        .args(["cluster", "up", "--name", "d", "--detach"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dir = cli.dir("d");
    let procs = records(&dir);
    assert!(procs.iter().all(ProcRecord::alive));
    let list = cli.cmd().args(["cluster", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.contains("d\tKubernetes 1.32.5\trunning\tdetached"),
        "{list}"
    );
    let gc = cli.cmd().arg("gc").output().unwrap();
    assert!(String::from_utf8_lossy(&gc.stdout).contains("nothing to remove"));
    assert!(procs.iter().all(ProcRecord::alive));
    let down = cli.cmd().args(["cluster", "down", "d"]).output().unwrap();
    assert!(down.status.success(), "{down:?}");
    assert_all_gone(&procs, &dir);
    let again = cli.cmd().args(["cluster", "down", "d"]).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("there is none"));
}

#[test]
fn missing_go_is_a_clear_error() {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["toolchain", "build"])
        .env("HARNESS_CACHE_DIR", cache.path())
        .env("HARNESS_GO", "/nonexistent/go")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Go is needed"), "{err}");
    assert!(err.contains("HARNESS_GO"), "{err}");
}

#[test]
fn unknown_versions_and_malformed_gates_are_refused_before_anything_starts() {
    let cli = Cli::new();
    let out = cli
        .cmd()
        .args(["cluster", "up", "--k8s", "1.19"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown Kubernetes version `1.19`"), "{err}");
    assert!(err.contains("1.32 (v1.32.5)"), "{err}");
    let out = cli
        .cmd()
        .args(["cluster", "up", "--feature-gates", "Foo"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected KEY=VALUE"));
    assert!(!cli.state.path().join("clusters").exists());
}
