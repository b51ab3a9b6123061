//! A private Docker daemon: `docker run --privileged` and `docker exec --privileged` work with
//! kind's flags on a host whose capability bounding set lacks a capability, containers on a
//! user-defined network reach each other by name, and nothing of the daemon is left on the
//! host — after `stop()`, after a start that timed out, and after its owner, dockerd and
//! containerd were killed with SIGKILL (containers running) and `harness gc` ran. Needs root.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::cluster::docker::teardown::shim_socket;
use harness::cluster::docker::{DockerOptions, DockerRecord, HostFacts, PrivateDocker};
use harness::progress::Progress;
use harness::toolchain::host::{BUSYBOX_STATIC, DebianPackage};
use harness::toolchain::{Cache, Toolchain};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::sync::Mutex;

/// The tests compare host-wide state before and after (links, iptables, `/lib/modules`): one
/// at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// The image the containers run: Debian's static busybox and a few applet links.
const IMAGE: &str = "harness-test/busybox";

/// kind's flags for a node container (its docker provider's `docker run`), `--privileged`
/// included.
const KIND_FLAGS: &[&str] = &[
    "--privileged",
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "apparmor=unconfined",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    "/run",
    "--volume",
    "/var",
    "--volume",
    "/lib/modules:/lib/modules:ro",
    "--cgroupns=private",
];

/// The child process of [`gc_removes_a_daemon_whose_owner_and_daemons_were_killed`] reads its
/// daemon's directory from this variable.
const CHILD_DIR: &str = "HARNESS_TEST_DOCKER_CHILD_DIR";

fn toolchain() -> Toolchain {
    Toolchain::new(Cache::from_env(), Progress::plain())
}

/// Debian's `iptables-save`, which [`HostState`] reads the host's rules with: installed as
/// the harness installs what it runs when the host lacks it (a new machine has no iptables
/// until Debian's `docker.io`, which the daemon's start installs, brings it along).
fn iptables_save() -> &'static Path {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        const IPTABLES: DebianPackage = DebianPackage {
            package: "iptables",
            binaries: &["iptables-save"],
        };
        // Its own runtime on its own thread: called from async tests and from plain ones.
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(toolchain().debian_binary_in(IPTABLES, &["/usr/sbin", "/sbin"]))
        })
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the host's iptables rules cannot be read: {e}"))
    })
}

/// Whether the test can run here: root (the daemons mount, make bridges and cgroups).
fn prerequisites() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    common::missing_prerequisite(
        "root (a private Docker daemon mounts, makes network devices and cgroups)",
        "run the tests as root, e.g. `sudo -E cargo test -p harness --test docker`",
    );
    false
}

/// Runs `docker args` against `record`'s daemon; its standard output, or a panic with its
/// standard error.
fn docker(record: &DockerRecord, args: &[&str]) -> String {
    let out = record.command().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Imports [`IMAGE`]: a root file system of busybox and its applets, made here as a tar.
async fn import_busybox(record: &DockerRecord) {
    let busybox = toolchain().debian_binary(BUSYBOX_STATIC).await.unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    let body = std::fs::read(&busybox).unwrap();
    header.set_size(body.len() as u64);
    header.set_mode(0o755);
    header.set_cksum();
    tar.append_data(&mut header, "bin/busybox", &body[..])
        .unwrap();
    for applet in [
        "sh", "sleep", "grep", "mount", "mkdir", "ping", "cat", "echo", "true",
    ] {
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        link.set_mode(0o777);
        tar.append_link(&mut link, format!("bin/{applet}"), "busybox")
            .unwrap();
    }
    let archive = tar.into_inner().unwrap();
    let mut child = record
        .command()
        .args(["import", "-c", "ENV PATH=/bin", "-", IMAGE])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&archive).unwrap();
    assert!(child.wait().unwrap().success(), "docker import");
}

/// A capability set from its `/proc/<pid>/status` line (`CapEff:\t...`).
fn caps(status: &str, field: &str) -> u64 {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} in {status:?}"));
    u64::from_str_radix(line.trim(), 16).unwrap()
}

/// The capabilities docker 20.10 grants `--privileged` processes: 0 (CAP_CHOWN) to 37
/// (CAP_AUDIT_READ).
const DOCKER_PRIVILEGED: u64 = (1 << 38) - 1;

/// A privileged process got every capability of this process's bounding set that docker asks
/// for, and nothing outside it.
fn assert_privileged(cap_eff: u64, what: &str) {
    let bounding = caps(
        &std::fs::read_to_string("/proc/self/status").unwrap(),
        "CapBnd",
    );
    eprintln!("{what}: CapEff {cap_eff:016x}, host CapBnd {bounding:016x}");
    assert_eq!(
        cap_eff & !bounding,
        0,
        "{what}: nothing outside the bounding set"
    );
    assert_eq!(
        cap_eff,
        bounding & DOCKER_PRIVILEGED,
        "{what}: every capability of the bounding set docker grants"
    );
}

/// What the tests compare before and after: what a daemon could change on the host outside
/// its directory. The links it made are checked by name ([`Ours`]), since other work on the
/// host (other daemons, real nodes) makes and removes links all the time; for the same reason
/// real nodes' CNI iptables rules, and rules naming a bridge that is not ours, are left out.
#[derive(Debug, PartialEq, Eq)]
struct HostState {
    iptables: BTreeSet<String>,
    sysctls: BTreeMap<String, String>,
    paths: BTreeMap<&'static str, bool>,
    mounts: BTreeSet<String>,
}

impl HostState {
    fn read(ours: &Ours) -> Self {
        let save = Command::new(iptables_save()).output().unwrap();
        let iptables = String::from_utf8_lossy(&save.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| !l.contains("CNI-") && !l.contains("harness-"))
            .filter(|l| {
                l.split_whitespace()
                    .filter(|w| w.starts_with("br-"))
                    .all(|b| ours.links.contains(b))
            })
            // Chain lines carry packet counters.
            .map(|l| l.split(" [").next().unwrap_or(l).to_string())
            .collect();
        let paths = [
            "/run/docker",
            "/lib/modules",
            "/etc/docker/key.json",
            "/var/lib/docker",
            "/sys/class/net/docker0",
        ]
        .into_iter()
        .map(|p| (p, Path::new(p).exists()))
        .collect();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with("/run/docker") || m.starts_with("/var/lib/docker"))
            .map(String::from)
            .collect();
        Self {
            iptables,
            sysctls: HostFacts::read().sysctls,
            paths,
            mounts,
        }
    }
}

/// What a daemon had on the host while it ran, seen from inside: its containers' full ids
/// (each has a shim socket) and its links (its networks' bridges, its containers' veths).
#[derive(Debug, Default)]
struct Ours {
    containers: Vec<String>,
    links: BTreeSet<String>,
}

impl Ours {
    /// Reads them from `record`'s running daemon.
    fn read(record: &DockerRecord) -> Self {
        let containers: Vec<String> = docker(record, &["ps", "-q", "--no-trunc"])
            .split_whitespace()
            .map(String::from)
            .collect();
        assert!(!containers.is_empty(), "containers run");
        let mut links = BTreeSet::new();
        let networks = docker(
            record,
            &[
                "network",
                "ls",
                "-q",
                "--no-trunc",
                "--filter",
                "driver=bridge",
            ],
        );
        for id in networks.split_whitespace() {
            links.insert(format!("br-{}", &id[..12]));
        }
        let by_index: BTreeMap<String, String> = std::fs::read_dir("/sys/class/net")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let index = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
                Some((
                    index.trim().to_string(),
                    e.file_name().to_string_lossy().into_owned(),
                ))
            })
            .collect();
        for id in &containers {
            let s = shim_socket(&record.containerd_socket(), "moby", id);
            assert!(
                s.exists(),
                "the shim socket {} while {id} runs",
                s.display()
            );
            // The host end of the container's veth: the index its eth0 is paired with.
            let peer = docker(record, &["exec", id, "cat", "/sys/class/net/eth0/iflink"]);
            let veth = by_index
                .get(peer.trim())
                .unwrap_or_else(|| panic!("a host link with index {peer}"));
            links.insert(veth.clone());
        }
        for l in &links {
            assert!(
                Path::new("/sys/class/net").join(l).exists(),
                "{l} exists while the daemon runs"
            );
        }
        Self { containers, links }
    }
}

/// The command lines of the processes whose command line contains `text`.
fn processes_naming(text: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(text))
        .collect()
}

/// Nothing of `record`'s daemon is left, and the host is as `before`: no process of it (nor
/// any whose command line names its directory), none of `ours` (shim sockets, links), no
/// mount, cgroup or directory; iptables, sysctls and docker's host paths as they were.
fn assert_nothing_left(record: &DockerRecord, ours: &Ours, before: &HostState) {
    let left = record.leftovers();
    assert!(left.is_empty(), "left behind: {left:#?}");
    let procs = processes_naming(&record.dir.display().to_string());
    assert!(
        procs.is_empty(),
        "processes name the daemon's directory: {procs:#?}"
    );
    for id in &ours.containers {
        let s = shim_socket(&record.containerd_socket(), "moby", id);
        assert!(!s.exists(), "shim socket {} left", s.display());
    }
    for l in &ours.links {
        assert!(
            !Path::new("/sys/class/net").join(l).exists(),
            "link {l} left"
        );
    }
    assert_eq!(&HostState::read(ours), before, "the host as it was");
}

/// A random IPv6 ULA /64, for a network like kind's (`--ipv6`).
fn ula_subnet() -> String {
    let r: u64 = rand::random();
    format!(
        "fd{:02x}:{:04x}:{:04x}:1::/64",
        r & 0xff,
        (r >> 8) & 0xffff,
        (r >> 24) & 0xffff
    )
}

#[tokio::test]
async fn privileged_kind_like_containers_run_and_stop_leaves_nothing() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let test = Instant::now();
    let root = tempfile::Builder::new()
        .prefix("harness-docker-")
        .tempdir()
        .unwrap();
    let before = HostState::read(&Ours::default());
    let options = DockerOptions {
        harness_binary: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
        ..DockerOptions::new(root.path().join("d"))
    };
    let started = Instant::now();
    let d = PrivateDocker::start(&toolchain(), &options).await.unwrap();
    eprintln!("private Docker daemon ready in {:?}", started.elapsed());
    let r = d.record().clone();
    assert!(d.host().starts_with("unix://") && d.host().ends_with("/d/docker.sock"));
    assert_eq!(
        docker(&r, &["info", "--format", "{{.DefaultRuntime}}"]).trim(),
        "harness"
    );
    import_busybox(&r).await;

    // kind's flags, privileged: a tmpfs mounts inside, with every capability runc can grant.
    let mut run = vec!["run", "--rm"];
    run.extend(KIND_FLAGS);
    run.extend([
        IMAGE,
        "sh",
        "-c",
        "mkdir -p /mnt/t && mount -t tmpfs t /mnt/t && grep -q ' /mnt/t tmpfs' /proc/mounts \
         && echo mounted; grep CapEff /proc/self/status",
    ]);
    let out = docker(&r, &run);
    assert!(out.contains("mounted"), "{out}");
    assert_privileged(caps(&out, "CapEff"), "docker run --privileged");

    // Without the wrapper, runc cannot grant what the bounding set lacks (when it lacks one).
    let bounding = caps(
        &std::fs::read_to_string("/proc/self/status").unwrap(),
        "CapBnd",
    );
    if bounding & DOCKER_PRIVILEGED != DOCKER_PRIVILEGED {
        let plain = r
            .command()
            .args([
                "run",
                "--rm",
                "--runtime",
                "runc",
                "--privileged",
                IMAGE,
                "true",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&plain.stderr);
        assert!(
            !plain.status.success() && err.contains("apply caps"),
            "plain runc fails: {err}"
        );
    }
    // The wrapper hands runc the signal state the shim gave it (nothing ignored).
    let ignored = |runtime: &str| {
        docker(
            &r,
            &[
                "run",
                "--rm",
                "--runtime",
                runtime,
                IMAGE,
                "grep",
                "SigIgn",
                "/proc/self/status",
            ],
        )
    };
    assert_eq!(ignored("harness"), ignored("runc"));

    // A network like kind's; a privileged node on it, exec'd into with --privileged.
    let subnet = ula_subnet();
    docker(
        &r,
        &[
            "network", "create", "--ipv6", "--subnet", &subnet, "kindlike",
        ],
    );
    let mut node = vec!["run", "-d", "--name", "node-1", "--net", "kindlike"];
    node.extend(KIND_FLAGS);
    node.extend([IMAGE, "sleep", "1000"]);
    docker(&r, &node);
    let out = docker(
        &r,
        &[
            "exec",
            "--privileged",
            "node-1",
            "sh",
            "-c",
            "mkdir -p /m && mount -t tmpfs m /m && grep CapEff /proc/self/status",
        ],
    );
    assert_privileged(caps(&out, "CapEff"), "docker exec --privileged");
    docker(
        &r,
        &[
            "run", "-d", "--name", "node-2", "--net", "kindlike", IMAGE, "sleep", "1000",
        ],
    );
    docker(
        &r,
        &["exec", "node-2", "ping", "-c", "1", "-W", "5", "node-1"],
    );
    let ours = Ours::read(&r);
    assert!(!r.leftovers().is_empty(), "the daemon is up");

    let stopping = Instant::now();
    let errors = d.stop();
    eprintln!("stopped in {:?}", stopping.elapsed());
    assert!(errors.is_empty(), "{errors:#?}");
    assert_nothing_left(&r, &ours, &before);
    eprintln!("test took {:?}", test.elapsed());
}

#[tokio::test]
async fn a_daemon_that_does_not_answer_in_time_is_torn_down_and_its_log_kept() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let root = tempfile::Builder::new()
        .prefix("harness-docker-")
        .tempdir()
        .unwrap();
    let before = HostState::read(&Ours::default());
    let logs = root.path().join("logs");
    let options = DockerOptions {
        harness_binary: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
        ready_timeout: Duration::from_millis(1),
        logs: Some(logs.clone()),
        ..DockerOptions::new(root.path().join("d"))
    };
    let e = PrivateDocker::start(&toolchain(), &options)
        .await
        .unwrap_err()
        .to_string();
    let log = logs.join("containerd.log");
    assert!(
        e.starts_with("wait for containerd's socket: no answer after 1ms")
            && e.contains(&format!("last lines of {}", log.display())),
        "{e}"
    );
    assert!(log.exists(), "the log was kept");
    let record = DockerRecord::load(&root.path().join("d"));
    assert!(record.is_err(), "the directory went with the daemon");
    assert_eq!(HostState::read(&Ours::default()), before);
    let dir = root.path().join("d").display().to_string();
    assert_eq!(
        processes_naming(&dir),
        Vec::<String>::new(),
        "containerd ended"
    );
}

#[test]
fn gc_removes_a_daemon_whose_owner_and_daemons_were_killed() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL.blocking_lock();
    let test = Instant::now();
    let state = tempfile::Builder::new()
        .prefix("harness-docker-")
        .tempdir()
        .unwrap();
    let root = state.path().join("providers/docker");
    // Whatever happens below, the daemon goes with the test.
    struct Gc(PathBuf);
    impl Drop for Gc {
        fn drop(&mut self) {
            let _ = harness::cluster::docker::gc(&self.0);
        }
    }
    let _gc = Gc(root.clone());
    let before = HostState::read(&Ours::default());
    let dir = root.join("d");
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "owner_of_a_daemon_killed_with_its_daemons",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_DIR, &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(owner.stdout.take().unwrap()).lines();
    loop {
        let line = lines
            .next()
            .expect("the owner says when its containers run")
            .unwrap();
        if line == "READY" {
            break;
        }
    }
    let r = DockerRecord::load(&dir).unwrap();
    assert_eq!(r.owner.pid, owner.id());
    let ours = Ours::read(&r);
    let proxy_ip = docker(
        &r,
        &[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            "node-1",
        ],
    );
    let proxy = format!("-container-ip {}", proxy_ip.trim());

    // SIGKILL: the owner, then dockerd and containerd, with the containers running.
    owner.kill().unwrap();
    owner.wait().unwrap();
    for p in &r.processes {
        kill(Pid::from_raw(p.pid as i32), Signal::SIGKILL).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while r.processes.iter().any(|p| p.alive()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = r.leftovers();
    assert!(
        left.iter().any(|l| l.starts_with("shim process")),
        "the containers outlived their daemons: {left:#?}"
    );

    let gc = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_STATE_DIR", state.path())
        .arg("gc")
        .output()
        .unwrap();
    eprintln!("gc took {:?}", gc.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("removed private Docker daemon `d`"),
        "{stdout}"
    );
    assert_nothing_left(&r, &ours, &before);
    let proxies = processes_naming(&proxy);
    assert!(proxies.is_empty(), "docker-proxy left: {proxies:#?}");
    eprintln!("test took {:?}", test.elapsed());
}

/// Run by [`gc_removes_a_daemon_whose_owner_and_daemons_were_killed`] as a process of its own:
/// starts a daemon in `$HARNESS_TEST_DOCKER_CHILD_DIR` with a privileged node on a network and
/// a published port, says `READY`, and waits to be killed.
#[tokio::test]
#[ignore = "run by gc_removes_a_daemon_whose_owner_and_daemons_were_killed as its own process"]
async fn owner_of_a_daemon_killed_with_its_daemons() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        // Not a test of its own (the nightly tier's `--ignored` runs it too): the child
        // process of the gc test, which sets the variable.
        eprintln!(
            "nothing to do: {CHILD_DIR} is unset; this is the child process of \
             gc_removes_a_daemon_whose_owner_and_daemons_were_killed, which tests it"
        );
        return;
    };
    let options = DockerOptions {
        harness_binary: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
        ..DockerOptions::new(PathBuf::from(dir))
    };
    let d = PrivateDocker::start(&toolchain(), &options).await.unwrap();
    let r = d.record().clone();
    import_busybox(&r).await;
    docker(
        &r,
        &[
            "network",
            "create",
            "--ipv6",
            "--subnet",
            &ula_subnet(),
            "kindlike",
        ],
    );
    let mut node = vec![
        "run",
        "-d",
        "--name",
        "node-1",
        "--net",
        "kindlike",
        "--publish",
        "127.0.0.1::6443",
    ];
    node.extend(KIND_FLAGS);
    node.extend([
        IMAGE,
        "sh",
        "-c",
        "mkdir /sys/fs/cgroup/memory/kubepods; sleep 1000",
    ]);
    docker(&r, &node);
    docker(
        &r,
        &[
            "run", "-d", "--name", "node-2", "--net", "kindlike", IMAGE, "sleep", "1000",
        ],
    );
    println!("READY");
    std::io::stdout().flush().unwrap();
    // Killed here: the daemon is never stopped by this process.
    std::mem::forget(d);
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// As a user that is not root, every other test of this binary skips, saying so (and fails
/// with `CI` set): what the README says of `cargo test` without root.
#[test]
fn without_root_every_test_skips_saying_so_and_fails_in_ci() {
    common::root_tests_skip_without_root();
}
