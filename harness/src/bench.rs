//! Benchmarks run by `harness bench`: each measures the harness against a peer in the same run,
//! interleaved run by run, and reports medians; [`flakes`] counts the test suite's flaky tests;
//! [`rediscovery`] explores releases with known bugs and says which it finds; [`explain`] says
//! what explains each finding of an exploration (`harness report explain`).

pub mod explain;
pub mod explore;
pub mod flakes;
pub mod rediscovery;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, ListParams};

use crate::cluster::admin_client;
use crate::cluster::local::{LocalOptions, LocalProvider};
use crate::cluster::{Cluster, ClusterProvider, Profile};
use crate::progress::Progress;
use crate::toolchain::{Cache, KubeVersion, Toolchain};
use crate::wait::{self, Check};

/// The commit this binary was built from (`build.rs` reads it), else that of the git checkout
/// it runs in, for a bench's report to name.
pub fn commit() -> String {
    if let Some(c) = option_env!("HARNESS_COMMIT") {
        return c.to_string();
    }
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown (not built or run in a git clone)".into())
}

/// How long a child harness a bench stops (an exploration) may take to tear its clusters down
/// after SIGINT before it is killed.
pub const CHILD_TEARDOWN: Duration = Duration::from_secs(120);

/// A harness a bench runs as a child (an exploration), stopped as a person would stop it when
/// the bench ends before it does (the bench interrupted, or its future dropped): SIGINT, then
/// up to [`CHILD_TEARDOWN`] to tear its clusters down, and SIGKILL only past that. (A child
/// killed at once leaves its cluster's processes running.)
pub struct ChildHarness {
    pid: Option<nix::unistd::Pid>,
}

impl ChildHarness {
    /// Watches `child` (spawned without `kill_on_drop`, which would kill it first).
    pub fn watch(child: &tokio::process::Child) -> Self {
        ChildHarness {
            pid: child.id().map(|p| nix::unistd::Pid::from_raw(p as i32)),
        }
    }

    /// The child ended (and was waited for): nothing to stop.
    pub fn ended(&mut self) {
        self.pid = None;
    }
}

impl Drop for ChildHarness {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        let Some(pid) = self.pid.take() else {
            return;
        };
        if kill(pid, Signal::SIGINT).is_err() {
            return;
        }
        let deadline = Instant::now() + CHILD_TEARDOWN;
        while Instant::now() < deadline {
            match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(100)),
                // Ended (and reaped here), or not this process's child any more.
                _ => return,
            }
        }
        let _ = kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
    }
}

/// Where benches keep their peers' work: `<state dir>/bench-work/`.
fn work_root() -> PathBuf {
    crate::cluster::local::state::state_root().join("bench-work")
}

/// The file in a bench's work directory that names the process owning it.
const OWNER: &str = "owner.json";

/// A work directory for bench `id` (`<state dir>/bench-work/<id>-<random>/`, removed when
/// dropped) that records this process as its owner, so that `harness gc` can remove it after
/// a bench killed too hard to remove it itself.
fn work_dir(id: &str) -> anyhow::Result<tempfile::TempDir> {
    let root = work_root();
    std::fs::create_dir_all(&root).with_context(|| format!("create {}", root.display()))?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{id}-"))
        .tempdir_in(&root)
        .with_context(|| format!("create a work directory in {}", root.display()))?;
    let owner = crate::process::ProcRecord::current("harness bench");
    let path = dir.path().join(OWNER);
    std::fs::write(&path, serde_json::to_vec(&owner)?)
        .with_context(|| format!("write {}", path.display()))?;
    Ok(dir)
}

/// Removes the work directories of benches whose process is gone (or that name none); returns
/// their names.
pub fn gc() -> anyhow::Result<Vec<String>> {
    use crate::process::ProcRecord;
    let mut removed = vec![];
    let Ok(entries) = std::fs::read_dir(work_root()) else {
        return Ok(removed);
    };
    for e in entries.flatten() {
        let owner: Option<ProcRecord> = std::fs::read(e.path().join(OWNER))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if owner.is_some_and(|o| o.alive()) {
            continue;
        }
        crate::toolchain::cache::make_writable_and_remove(&e.path())
            .with_context(|| format!("remove {}", e.path().display()))?;
        removed.push(e.file_name().to_string_lossy().into_owned());
    }
    removed.sort();
    Ok(removed)
}

/// The median of some durations (zero for none).
pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    let n = xs.len();
    match n {
        0 => Duration::ZERO,
        _ if n % 2 == 1 => xs[n / 2],
        _ => (xs[n / 2 - 1] + xs[n / 2]) / 2,
    }
}

/// What every benchmark starts from: a toolchain over the shared cache, a provider whose
/// clusters live beside the user's (named after the bench's id, so that `harness cluster list`
/// shows them and `harness gc` removes what a killed bench left) and a temporary directory for
/// the peers' work (removed when dropped).
struct Setup {
    progress: Progress,
    toolchain: Toolchain,
    /// Prefix of the bench's cluster and run names (`bench-<time>-<random>`).
    id: String,
    state: tempfile::TempDir,
    provider: LocalProvider,
}

impl Setup {
    fn new(runs: usize) -> anyhow::Result<Self> {
        if runs == 0 {
            bail!("use --runs 1 or more");
        }
        let progress = Progress::stderr();
        let toolchain = Toolchain::new(Cache::from_env(), progress.clone());
        let id = crate::run::new_id("bench");
        let state = work_dir(&id)?;
        let provider = LocalProvider::new(
            toolchain.clone(),
            LocalOptions::default(),
            Progress::silent(),
        );
        Ok(Self {
            progress,
            toolchain,
            id,
            state,
            provider,
        })
    }
}

/// `harness bench cluster-up`: bring-up to "nodes Ready and the default service account
/// present", the local provider against `kwokctl create cluster --runtime binary` given the
/// same binaries, `runs` times each, interleaved; with `real_nodes`, also the local provider
/// with that many real nodes added (their registry, containerds and kubelets Ready); with
/// `kind`, also the kind provider on the offline node image, same profile.
pub async fn cluster_up(
    runs: usize,
    version: KubeVersion,
    nodes: usize,
    real_nodes: usize,
    kind: bool,
) -> anyhow::Result<ExitCode> {
    let Setup {
        progress,
        toolchain,
        id,
        state,
        provider,
    } = Setup::new(runs)?;
    let mut profile = Profile::new(version);
    profile.set_nodes(nodes, &["zone-a", "zone-b"], &Default::default())?;
    let mut with_real = profile.clone();
    with_real.set_real_nodes(real_nodes, &["zone-a", "zone-b"], &Default::default())?;
    // Warm binaries first: the benchmark measures bring-up, not builds.
    provider.binaries(&with_real).await?;
    let kube = toolchain.kubernetes(version).await?;
    let kwok = toolchain.kwok().await?;
    let kwokctl = toolchain.kwokctl().await?;
    let kind_provider = match kind {
        false => None,
        true => {
            use crate::cluster::any::{Provider, ProviderConfig, ProviderKind};
            let config = ProviderConfig {
                kind: ProviderKind::Kind,
                kind_offline: true,
                ..Default::default()
            };
            match config.build(provider.clone(), &toolchain, state.path().join("kind"))? {
                Provider::Kind(k) => Some(k),
                _ => unreachable!("a kind config builds a kind provider"),
            }
        }
    };

    let mut ours = vec![];
    let mut real = vec![];
    let mut peer = vec![];
    let mut kinds = vec![];
    for i in 0..runs {
        let t = Instant::now();
        let c = provider.create(&format!("{id}-{i}"), &profile).await?;
        let d = t.elapsed();
        c.destroy()?;
        progress.line(&format!(
            "run {}: harness local {:.2}s",
            i + 1,
            d.as_secs_f64()
        ));
        ours.push(d);

        if real_nodes > 0 {
            let t = Instant::now();
            let c = provider
                .create(&format!("{id}-real-{i}"), &with_real)
                .await?;
            let d = t.elapsed();
            c.destroy()?;
            progress.line(&format!(
                "run {}: harness local + {real_nodes} real node(s) {:.2}s",
                i + 1,
                d.as_secs_f64()
            ));
            real.push(d);
        }

        if let Some(k) = &kind_provider {
            use crate::cluster::{Cluster, ClusterProvider};
            let t = Instant::now();
            let c = k.create(&format!("{id}-kind-{i}"), &profile).await?;
            let d = t.elapsed();
            c.destroy()?;
            progress.line(&format!(
                "run {}: harness kind (offline image) {:.2}s",
                i + 1,
                d.as_secs_f64()
            ));
            kinds.push(d);
        }

        let work = state.path().join(format!("kwokctl-{i}"));
        let d = kwokctl_up(&kwokctl, &kube, &kwok, &work, nodes).await?;
        progress.line(&format!(
            "run {}: kwokctl binary {:.2}s",
            i + 1,
            d.as_secs_f64()
        ));
        peer.push(d);
    }
    let (m_ours, m_peer) = (median(ours.clone()), median(peer.clone()));
    println!(
        "cluster bring-up, Kubernetes {version}, {nodes} nodes, {runs} runs each (start -> nodes Ready + default service account)"
    );
    println!(
        "  harness local          median {:>6.2}s  runs {}",
        m_ours.as_secs_f64(),
        fmt_runs(&ours)
    );
    println!(
        "  kwokctl --runtime binary median {:>6.2}s  runs {}",
        m_peer.as_secs_f64(),
        fmt_runs(&peer)
    );
    println!(
        "  ratio kwokctl / harness: {:.2}x",
        m_peer.as_secs_f64() / m_ours.as_secs_f64()
    );
    if kind {
        let m_kind = median(kinds.clone());
        println!(
            "  harness kind (offline) median {:>6.2}s  runs {}",
            m_kind.as_secs_f64(),
            fmt_runs(&kinds)
        );
        println!(
            "  ratio kind / local: {:.2}x",
            m_kind.as_secs_f64() / m_ours.as_secs_f64()
        );
    }
    if real_nodes > 0 {
        let m_real = median(real.clone());
        println!(
            "  harness local + {real_nodes} real median {:>6.2}s  runs {}",
            m_real.as_secs_f64(),
            fmt_runs(&real)
        );
        println!(
            "  ratio with real nodes / kwok only: {:.2}x",
            m_real.as_secs_f64() / m_ours.as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `harness bench bundle`: time from a ready cluster to a ready controller bundle.
pub async fn bundle(
    runs: usize,
    reference: crate::controller::ControllerRef,
) -> anyhow::Result<ExitCode> {
    let Setup {
        progress,
        toolchain,
        id,
        state: _state,
        provider,
    } = Setup::new(runs)?;
    let profile = Profile::new(KubeVersion::default_version());
    provider.binaries(&profile).await?;
    let controller = reference.controller();
    controller.prepare(&toolchain).await?;
    let no_gates = Default::default();
    let mut times = vec![];
    for i in 0..runs {
        let mut c = provider.create(&format!("{id}-{i}"), &profile).await?;
        let t = Instant::now();
        let host = crate::controller::Host::Processes(&mut c);
        controller.install(host, &toolchain, &no_gates).await?;
        let d = t.elapsed();
        c.destroy()?;
        progress.line(&format!(
            "run {}: {reference} ready in {:.2}s",
            i + 1,
            d.as_secs_f64()
        ));
        times.push(d);
    }
    println!(
        "ready cluster -> ready {reference} (CRDs, webhooks, smoke CloneSet), {runs} runs: median {:.2}s  runs {}",
        median(times.clone()).as_secs_f64(),
        fmt_runs(&times)
    );
    Ok(ExitCode::SUCCESS)
}

/// What the benches of the default run share: its plan (every suite on the default cell), the
/// binaries built, and the options `harness run` would use (the newest report's times order
/// the work).
struct DefaultRun {
    setup: Setup,
    kubernetes: KubeVersion,
    controller: crate::controller::ControllerRef,
    all: Vec<crate::scenario::Scenario>,
    plan: crate::run::Plan,
    ledger: crate::run::ledger::Ledger,
    options: crate::run::RunOptions,
    any: crate::cluster::any::Provider,
}

impl DefaultRun {
    async fn prepare(runs: usize) -> anyhow::Result<Self> {
        use crate::run::{Filter, RunOptions, ledger::Ledger};
        let setup = Setup::new(runs)?;
        let kubernetes = KubeVersion::default_version();
        let controller = crate::controller::ControllerRef::default_ref();
        setup.provider.binaries(&Profile::new(kubernetes)).await?;
        controller.controller().prepare(&setup.toolchain).await?;
        let all = crate::suites::all();
        let plan = crate::run::plan(&all, &Filter::default(), kubernetes, &controller);
        let options = RunOptions {
            costs: crate::run::costs::Costs::load(Path::new("reports/latest/report.json"))
                .unwrap_or_default(),
            ..RunOptions::default()
        };
        // As `harness run` plans it: a cluster holding most of the work split by the costs.
        let plan = options
            .costs
            .balance(&plan, options.parallel, options.clusters_parallel);
        let any = crate::cluster::any::Provider::Local(setup.provider.clone());
        Ok(Self {
            setup,
            kubernetes,
            controller,
            all,
            plan,
            ledger: Ledger::builtin(),
            options,
            any,
        })
    }
}

/// `harness bench run`: wall time of the default run (clusters, bundle, all suites) with warm
/// binaries, and the share of scenario time spent waiting on the controller.
pub async fn run(runs: usize) -> anyhow::Result<ExitCode> {
    use crate::run::Env;
    let DefaultRun {
        setup:
            Setup {
                progress,
                toolchain,
                id,
                state: _state,
                ..
            },
        kubernetes,
        controller,
        all,
        plan,
        ledger,
        options,
        any,
    } = DefaultRun::prepare(runs).await?;
    let (mut walls, mut shares) = (vec![], vec![]);
    for i in 0..runs {
        let mut reporters: Vec<Box<dyn crate::run::Reporter>> = vec![];
        let waited_before = crate::scenario::wait::waited();
        let t = Instant::now();
        let env = Env {
            scenarios: &all,
            ledger: &ledger,
            provider: &any,
            toolchain: &toolchain,
            options: &options,
        };
        let results = crate::run::execute(&plan, env, &format!("{id}-{i}"), &mut reporters).await;
        let wall = t.elapsed();
        let waited = (crate::scenario::wait::waited() - waited_before).as_secs_f64();
        let scenario_secs: f64 = results.iter().map(|r| r.seconds).sum();
        let failed = results
            .iter()
            .filter(|r| matches!(&r.outcome, crate::results::Outcome::Judged(v) if v.fails_run()))
            .count();
        if failed > 0 {
            bail!(
                "run {} had {failed} failing scenario(s); fix them before benchmarking",
                i + 1
            );
        }
        let share = waited / scenario_secs.max(f64::EPSILON);
        progress.line(&format!(
            "run {}: wall {:.1}s, scenarios {:.1}s (summed), waiting on the controller {:.1}s ({:.0}%)",
            i + 1,
            wall.as_secs_f64(),
            scenario_secs,
            waited,
            share * 100.0
        ));
        walls.push(wall);
        shares.push(Duration::from_secs_f64(share));
    }
    println!(
        "default run (Kubernetes {kubernetes}, {controller}, {} scenarios, {} clusters), {runs} runs: wall median {:.1}s (runs {}); waiting on the controller: median {:.0}% of scenario time",
        plan.clusters
            .iter()
            .map(|c| c.scenarios.len())
            .sum::<usize>(),
        plan.clusters.len(),
        median(walls.clone()).as_secs_f64(),
        fmt_runs(&walls),
        median(shares).as_secs_f64() * 100.0
    );
    Ok(ExitCode::SUCCESS)
}

/// `harness bench soak`: the default run repeated `runs` times, each with its own reports
/// under `<report_dir>/<soak id>/run-<n>/`; prints each scenario that failed in any run (its
/// failure rate across runs, the first line of each failure) and the wall times. Exit 1 when a
/// scenario failed.
pub async fn soak(runs: usize, report_dir: &Path) -> anyhow::Result<ExitCode> {
    use crate::run::Env;
    let DefaultRun {
        setup:
            Setup {
                progress,
                toolchain,
                state: _state,
                ..
            },
        kubernetes,
        controller,
        all,
        plan,
        ledger,
        options,
        any,
    } = DefaultRun::prepare(runs).await?;
    let id = crate::run::new_id("soak");
    let root = report_dir.join(&id);
    let mut walls = vec![];
    // Scenario -> (runs it failed, the first line of each failure).
    let mut failed: std::collections::BTreeMap<String, Vec<(usize, String)>> = Default::default();
    let mut ran: std::collections::BTreeMap<String, usize> = Default::default();
    for i in 1..=runs {
        let files = crate::report::Files::new(&root, &format!("run-{i}"))
            .with_context(|| format!("create reports in {}", root.display()))?;
        let mut reporters: Vec<Box<dyn crate::run::Reporter>> = vec![Box::new(files)];
        let t = Instant::now();
        let env = Env {
            scenarios: &all,
            ledger: &ledger,
            provider: &any,
            toolchain: &toolchain,
            options: &options,
        };
        let results = crate::run::execute(&plan, env, &format!("{id}-{i}"), &mut reporters).await;
        let wall = t.elapsed();
        let mut bad = 0;
        for r in &results {
            *ran.entry(r.scenario.clone()).or_default() += 1;
            if r.outcome.fails_run(true)
                || matches!(r.outcome, crate::results::Outcome::InfraError { .. })
            {
                bad += 1;
                let why = r
                    .failure
                    .as_deref()
                    .and_then(|f| f.lines().next())
                    .unwrap_or(r.outcome.label())
                    .to_string();
                failed.entry(r.scenario.clone()).or_default().push((i, why));
            }
        }
        progress.line(&format!(
            "run {i}/{runs}: wall {:.1}s, {} scenario(s), {bad} failed",
            wall.as_secs_f64(),
            results.len()
        ));
        walls.push(wall);
    }
    let _ = std::fs::remove_file(root.join("latest"));
    let scenarios = ran.len();
    let flaky_runs: usize = failed.values().map(Vec::len).sum();
    let total: usize = ran.values().sum();
    println!(
        "soak {id}: the default run (Kubernetes {kubernetes}, {controller}, {scenarios} scenarios) {runs} times: wall median {:.1}s, min {:.1}s, max {:.1}s (runs {})",
        median(walls.clone()).as_secs_f64(),
        walls
            .iter()
            .min()
            .copied()
            .unwrap_or_default()
            .as_secs_f64(),
        walls
            .iter()
            .max()
            .copied()
            .unwrap_or_default()
            .as_secs_f64(),
        fmt_runs(&walls)
    );
    println!(
        "{flaky_runs} failed result(s) of {total} ({:.2}%); {} scenario(s) failed at least once",
        100.0 * flaky_runs as f64 / total.max(1) as f64,
        failed.len()
    );
    for (scenario, fails) in &failed {
        let of = ran.get(scenario).copied().unwrap_or(runs);
        println!(
            "  {scenario}: failed {} of {of} runs ({:.0}%)",
            fails.len(),
            100.0 * fails.len() as f64 / of.max(1) as f64
        );
        for (run, why) in fails {
            println!("      run {run}: {why}");
        }
    }
    println!("reports: {}", root.display());
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn fmt_runs(xs: &[Duration]) -> String {
    xs.iter()
        .map(|d| format!("{:.2}", d.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs kwokctl (the peer) with its work dir and kubectl set.
struct Kwokctl<'a> {
    binary: &'a Path,
    kubectl: PathBuf,
    work: &'a Path,
}

impl Kwokctl<'_> {
    const NAME: &'static str = "bench";

    async fn run(&self, args: &[String]) -> anyhow::Result<()> {
        let out = tokio::process::Command::new(self.binary)
            .env("KWOK_WORKDIR", self.work)
            .env("KWOK_KUBECTL_BINARY", &self.kubectl)
            .args(["--name", Self::NAME])
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("run kwokctl {}", args[..2].join(" ")))?;
        if !out.status.success() {
            bail!(
                "kwokctl {} failed: {}",
                args[..2].join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

/// Brings up the peer's cluster with the same binaries and `nodes` nodes; returns the time
/// until its nodes are Ready and the default service account exists, after deleting it.
async fn kwokctl_up(
    kwokctl: &Path,
    kube: &crate::toolchain::KubeBinaries,
    kwok: &Path,
    work: &Path,
    nodes: usize,
) -> anyhow::Result<Duration> {
    std::fs::create_dir_all(work)?;
    let config = work.join("loopback.yaml");
    std::fs::write(
        &config,
        "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokctlConfiguration\noptions:\n  bindAddress: 127.0.0.1\n",
    )?;
    // kwokctl adds a context to this file; keep it away from the user's ~/.kube/config.
    let user_kubeconfig = work.join("user-kubeconfig").display().to_string();
    let peer = Kwokctl {
        binary: kwokctl,
        kubectl: kube.path("kubectl"),
        work,
    };
    let p = |x: PathBuf| x.display().to_string();
    let mut create: Vec<String> = ["-c", &p(config), "create", "cluster", "--runtime", "binary"]
        .map(String::from)
        .to_vec();
    for (flag, binary) in [
        ("--kube-apiserver-binary", kube.path("kube-apiserver")),
        (
            "--kube-controller-manager-binary",
            kube.path("kube-controller-manager"),
        ),
        ("--kube-scheduler-binary", kube.path("kube-scheduler")),
        ("--etcd-binary", kube.path("etcd")),
        ("--kwok-controller-binary", kwok.to_path_buf()),
    ] {
        create.extend([flag.to_string(), p(binary)]);
    }
    create.extend(
        [
            "--extra-args",
            "kube-apiserver=advertise-address=127.0.0.1",
            "--kubeconfig",
            &user_kubeconfig,
        ]
        .map(String::from),
    );
    let t = Instant::now();
    let result = async {
        peer.run(&create).await?;
        let scale = ["scale", "node", "--replicas", &nodes.to_string()].map(String::from);
        peer.run(&scale).await?;
        let kubeconfig = work
            .join("clusters")
            .join(Kwokctl::NAME)
            .join("kubeconfig.yaml");
        peer_ready(&admin_client(&kubeconfig).await?, nodes).await?;
        Ok(t.elapsed())
    }
    .await;
    let delete = ["delete", "cluster", "--kubeconfig", &user_kubeconfig].map(String::from);
    peer.run(&delete).await?;
    let left = processes_under(work);
    if !left.is_empty() {
        bail!("kwokctl delete cluster left processes running: {left:?}");
    }
    result
}

/// The peer's readiness, judged as the harness judges its own: `nodes` nodes Ready (listed
/// every 100 ms, as node names are the peer's) and the default service account present.
async fn peer_ready(client: &kube::Client, nodes: usize) -> anyhow::Result<()> {
    let bound = Duration::from_secs(180);
    let api: Api<Node> = Api::all(client.clone());
    let what = format!("{nodes} kwokctl nodes Ready");
    wait::poll(&what, bound, Duration::from_millis(100), || async {
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(e) => return Check::Failed(format!("list nodes: {e}")),
        };
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        Check::when(ready >= nodes, || format!("{ready} of {nodes} Ready"))
    })
    .await?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    wait::until(
        &sas,
        "default",
        "service account default/default",
        bound,
        |sa| {
            Box::pin(std::future::ready(Check::when(sa.is_some(), || {
                "absent".into()
            })))
        },
    )
    .await?;
    Ok(())
}

/// Pids whose command line mentions `dir` (to prove a peer cleaned up after itself).
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.display().to_string();
    let mut out = vec![];
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if crate::process::start_time(pid).is_none() {
                continue;
            }
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
                && String::from_utf8_lossy(&cmd).contains(&needle)
            {
                out.push(pid);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_the_commit_the_binary_was_built_from() {
        // Built in a git checkout (as the tests are), the build names its commit, and a
        // report names it whatever the directory it runs in.
        let Some(built) = option_env!("HARNESS_COMMIT") else {
            panic!("build.rs names the commit of a build in a git checkout")
        };
        assert_eq!(built.len(), 40, "{built}");
        assert!(built.chars().all(|c| c.is_ascii_hexdigit()), "{built}");
        assert_eq!(commit(), built);
        // Built again when the checkout's commit changes (a commit made since the last build
        // has the script run again before these tests run).
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&head.stdout).trim(), built);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Duration::from_secs;
        assert_eq!(median(vec![s(3), s(1), s(2)]), s(2));
        assert_eq!(
            median(vec![s(4), s(1), s(2), s(3)]),
            Duration::from_millis(2500)
        );
        assert_eq!(median(vec![]), Duration::ZERO);
    }
}
