//! Shared helpers for tests against real local clusters.
#![allow(dead_code, missing_docs)]

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use harness::cluster::Profile;
use harness::cluster::local::{LocalCluster, LocalOptions, LocalProvider};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};

/// A provider whose clusters live under a fresh temp dir, using the shared binary cache.
pub fn provider() -> (LocalProvider, tempfile::TempDir) {
    let root = tempfile::Builder::new()
        .prefix("harness-test-")
        .tempdir()
        .expect("temp dir");
    let provider = LocalProvider::new(
        Toolchain::new(Cache::from_env(), Progress::plain()),
        LocalOptions {
            clusters_root: root.path().to_path_buf(),
            harness_binary: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
            ..LocalOptions::default()
        },
        Progress::plain(),
    );
    (provider, root)
}

/// Starts a cluster for `profile`.
pub async fn cluster(profile: &Profile) -> (LocalCluster, tempfile::TempDir) {
    use harness::cluster::ClusterProvider;
    let (p, root) = provider();
    let c = p.create("t", profile).await.expect("cluster starts");
    (c, root)
}

/// The processes cluster directory `dir` records.
pub fn processes(dir: &std::path::Path) -> Vec<harness::process::ProcRecord> {
    harness::cluster::local::state::ClusterState::load(&dir.join("cluster.json"))
        .unwrap()
        .processes
}

/// Every process of `procs` has ended and the cluster directory `dir` is gone.
pub fn assert_nothing_left(procs: &[harness::process::ProcRecord], dir: &std::path::Path) {
    for p in procs {
        assert!(!p.alive(), "{} (pid {}) is still alive", p.name, p.pid);
    }
    assert!(!dir.exists(), "{} still exists", dir.display());
}

/// The default profile.
pub fn default_profile() -> Profile {
    Profile::new(KubeVersion::default_version())
}

/// Bounded wait on a future; on timeout, panics with `describe()`'s view of the last state.
pub async fn within<T, F, D, DF>(what: &str, timeout: Duration, fut: F, describe: D) -> T
where
    F: Future<Output = T>,
    D: FnOnce() -> DF,
    DF: Future<Output = String>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(v) => v,
        Err(_) => panic!(
            "timed out after {timeout:?} waiting for {what}; last seen: {}",
            describe().await
        ),
    }
}

/// A cluster with OpenKruise `version` installed (manager gates `gates`).
pub async fn kruise_cluster(
    version: &str,
    options: harness::controller::openkruise::InstallOptions,
) -> (
    LocalCluster,
    harness::controller::Manager,
    tempfile::TempDir,
) {
    let (mut c, root) = cluster(&default_profile()).await;
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let options = harness::controller::openkruise::InstallOptions {
        version: Some(version.to_string()),
        ..options
    };
    let m = harness::controller::openkruise::install(&mut c, &toolchain, &options)
        .await
        .unwrap_or_else(|e| panic!("install openkruise {version}: {e}"));
    (c, m, root)
}

/// An API for a kind served by the cluster, in the default namespace.
pub async fn dyn_api(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> kube::Api<kube::api::DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .expect("kind is served");
    match caps.scope {
        kube::discovery::Scope::Namespaced => {
            kube::Api::default_namespaced_with(client.clone(), &ar)
        }
        kube::discovery::Scope::Cluster => kube::Api::all_with(client.clone(), &ar),
    }
}

/// Creates an object from JSON.
pub async fn create(
    api: &kube::Api<kube::api::DynamicObject>,
    obj: serde_json::Value,
) -> kube::api::DynamicObject {
    let o: kube::api::DynamicObject = serde_json::from_value(obj).expect("valid object");
    api.create(&kube::api::PostParams::default(), &o)
        .await
        .expect("created")
}

/// Waits (watch-based, bounded) until `pred` holds for object `name`; on timeout, panics with
/// the object's last status.
pub async fn wait_dyn(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    what: &str,
    pred: impl Fn(&kube::api::DynamicObject) -> bool,
) {
    let cond = kube::runtime::wait::await_condition(
        api.clone(),
        name,
        move |o: Option<&kube::api::DynamicObject>| o.is_some_and(&pred),
    );
    within(what, Duration::from_secs(90), cond, || async {
        format!(
            "{:?}",
            api.get(name).await.map(|o| o.data.get("status").cloned())
        )
    })
    .await
    .expect("watch works");
}

/// The `harness` binary with a state directory of its own (its clusters live there).
pub struct Cli {
    pub state: tempfile::TempDir,
}

impl Cli {
    /// A fresh state directory.
    pub fn new() -> Self {
        Self {
            state: tempfile::Builder::new()
                .prefix("harness-cli-")
                .tempdir()
                .unwrap(),
        }
    }

    /// A command of the binary over that state directory.
    pub fn cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_harness"));
        c.env("HARNESS_STATE_DIR", self.state.path());
        c
    }

    /// The directory of cluster `name`.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.state.path().join("clusters").join(name)
    }

    /// Starts `cluster up --name <name> <extra>` attached and returns it once it printed the
    /// kubeconfig path.
    pub fn up_attached(&self, name: &str, extra: &[&str]) -> std::process::Child {
        self.up_attached_with(name, extra, std::process::Stdio::inherit())
    }

    /// As [`Cli::up_attached`], its stderr going to `stderr` (piped: the child keeps its
    /// reader in `stderr`).
    pub fn up_attached_with(
        &self,
        name: &str,
        extra: &[&str],
        stderr: std::process::Stdio,
    ) -> std::process::Child {
        use std::io::BufRead;
        let mut child = self
            .cmd()
            .args(["cluster", "up", "--name", name])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.trim().ends_with("kubeconfig"), "{line:?}");
        child
    }
}

/// Waits (polling, bounded by `within`) for `child` to exit.
pub fn wait_exit(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "harness did not exit in {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the tests run in CI: `CI` is set (CI services set `CI=true`), and not to `false`
/// or `0`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether a test that starts real nodes can run: as root (a real node mounts, makes network
/// devices and cgroups); otherwise says so ([`missing_prerequisite`]: a skip here, a failure in
/// CI).
pub fn real_nodes_possible() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    missing_prerequisite(
        "root (a real node mounts, makes network devices and cgroups)",
        "run the tests as root, as CI does",
    );
    false
}

/// Whether a test of the harness's private Docker daemon can run: as root, and with no
/// `DOCKER_HOST` (the test checks that daemon's teardown); otherwise says what is missing
/// ([`missing_prerequisite`]).
pub fn private_docker_possible() -> bool {
    if !nix::unistd::geteuid().is_root() {
        missing_prerequisite("root", "run the test as root (a private Docker daemon)");
        return false;
    }
    if std::env::var_os("DOCKER_HOST").is_some() {
        missing_prerequisite(
            "no DOCKER_HOST",
            "unset DOCKER_HOST: this test checks the private daemon's teardown",
        );
        return false;
    }
    true
}

/// A prerequisite this machine lacks. In CI ([`in_ci`]) the test fails, naming the
/// prerequisite and its fix: a CI job must not pass a test that did not test. Elsewhere the
/// test is skipped, saying why; the caller returns after this.
#[track_caller]
pub fn missing_prerequisite(prerequisite: &str, fix: &str) {
    if in_ci() {
        panic!(
            "missing prerequisite: {prerequisite}; {fix} (CI is set, so a missing prerequisite \
             fails the test instead of skipping it)"
        );
    }
    eprintln!(
        "skipped: missing prerequisite: {prerequisite}; {fix} (with CI set, this test fails \
         instead)"
    );
}

/// Command lines of the processes that mention `needle`, this test binary's own aside.
pub fn processes_with(needle: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy() == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                out.push(cmd);
            }
        }
    }
    out
}

/// The name of the test [`root_tests_skip_without_root`] is called from in each binary; the
/// re-run leaves it out.
pub const WITHOUT_ROOT_TEST: &str = "without_root_every_test_skips_saying_so_and_fails_in_ci";

/// Runs this test binary's other tests as a user that is not root (`nobody`, through
/// `setpriv`, when the caller is root; as itself otherwise), twice: without `CI` every test
/// passes by skipping and says which prerequisite it lacks, as the README says; with `CI=true`
/// every test fails, naming it. Each test of the binary must need root.
pub fn root_tests_skip_without_root() {
    use std::os::unix::fs::PermissionsExt;
    // A copy anyone may run: the build's own directory may sit where `nobody` cannot reach.
    let dir = tempfile::Builder::new()
        .prefix("harness-without-root-")
        .tempdir()
        .expect("temp dir");
    let me = dir.path().join("tests");
    std::fs::copy(
        std::env::current_exe().expect("the test binary's path"),
        &me,
    )
    .expect("copy the test binary");
    for (path, mode) in [(dir.path(), 0o755), (me.as_path(), 0o755)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let run = |ci: bool| {
        let mut cmd = if nix::unistd::geteuid().is_root() {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(&me);
            c
        } else {
            std::process::Command::new(&me)
        };
        cmd.args([
            "--skip",
            WITHOUT_ROOT_TEST,
            "--test-threads=1",
            "--show-output",
        ])
        .env_remove("CI")
        .current_dir("/");
        if ci {
            cmd.env("CI", "true");
        }
        let out = cmd.output().expect("run the test binary");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status, text)
    };
    let count = |text: &str, what: &str| text.lines().filter(|l| l.contains(what)).count();

    let (status, text) = run(false);
    let ran = count(&text, "... ok");
    assert!(status.success(), "without root and CI: {status}\n{text}");
    assert!(ran > 0, "no test ran:\n{text}");
    assert_eq!(
        count(&text, "skipped: missing prerequisite: root"),
        ran,
        "every test says it skipped for lack of root:\n{text}"
    );

    let (status, text) = run(true);
    assert!(
        !status.success(),
        "with CI set, the skips fail: {status}\n{text}"
    );
    assert_eq!(
        count(&text, "... FAILED"),
        ran,
        "with CI set, every test fails:\n{text}"
    );
    assert_eq!(
        count(&text, "missing prerequisite: root"),
        ran,
        "each failure names the prerequisite:\n{text}"
    );
}

/// Runs `scenarios` on `controller` through the planner and the runner, as `harness run` does,
/// on a local cluster of their own (one cluster: the test says so), and checks that the run
/// removed it.
pub async fn run_scenarios(
    scenarios: Vec<harness::scenario::Scenario>,
    controller: &harness::controller::ControllerRef,
    run_id: &str,
) -> Vec<harness::results::ScenarioResult> {
    use harness::run::plan::{Filter, plan};
    let plan = plan(
        &scenarios,
        &Filter::default(),
        KubeVersion::default_version(),
        controller,
    );
    assert_eq!(plan.clusters.len(), 1, "{plan:?}");
    let (provider, root) = provider();
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let provider = harness::cluster::any::Provider::Local(provider);
    let ledger = harness::run::ledger::Ledger::builtin();
    let options = harness::run::RunOptions::default();
    let env = harness::run::Env {
        scenarios: &scenarios,
        ledger: &ledger,
        provider: &provider,
        toolchain: &toolchain,
        options: &options,
    };
    let results = harness::run::execute(&plan, env, run_id, &mut []).await;
    // The run removed its cluster, and with it the controller's processes.
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    results
}
