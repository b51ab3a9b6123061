//! Running scenarios: [`plan`] (in [`mod@plan`]) groups the selected scenarios by the cluster
//! profile they need (one cluster per distinct profile, reused by all its scenarios),
//! [`execute`] runs each group's scenarios concurrently in their own namespaces, checks the
//! invariants, classifies every result against the [`ledger::Ledger`] and emits [`Event`]s
//! (carrying [`crate::results`]) for the reporters.

pub mod costs;
pub mod drive;
pub mod existing;
pub mod ginkgo;
pub mod ledger;
pub mod plan;
pub mod preflight;
mod scenarios;
pub mod select;
pub mod upstream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;

use tracing::Instrument;

use crate::cluster::any::{AnyCluster, Provider};
use crate::controller::{ControllerRef, Host, Installation};
use crate::results::{Outcome, ScenarioResult};
use crate::scenario::coverage::ApiFields;
use crate::scenario::record::Sends;
use crate::scenario::{Scenario, Timeouts, Upgrade};
use crate::toolchain::Toolchain;

use self::ledger::Ledger;
pub use self::plan::{
    Filter, Plan, PlannedCluster, REAL_NODES_PROFILE, Skip, UnknownSuite, cluster_profiles,
    kind_configs, plan, plan_upgrade, scenario_profile,
};
use self::scenarios::{installed_api_fields, run_scenarios_on};

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Scenarios at once per cluster.
    pub parallel: usize,
    /// Clusters of the plan at once (each brought up, used and removed on its own).
    pub clusters_parallel: usize,
    /// Times each scenario runs.
    pub repeat: usize,
    /// Times a scenario whose result fails the run is run again, each time in a fresh
    /// namespace; a later pass makes the result [`Outcome::Flaky`].
    pub retries: usize,
    /// Failures injected to check retries and flake reporting end to end: the first N tries
    /// of each attempt of the named scenario fail after its body ran, with
    /// [`INJECTED_FAILURE`] (from `HARNESS_INJECT_FAILURES=<scenario>=<N>,...`).
    pub inject_failures: BTreeMap<String, usize>,
    /// Leave a cluster running (detached) if one of its scenarios failed.
    pub keep_cluster_on_failure: bool,
    /// Bounds.
    pub timeouts: Timeouts,
    /// Bound on one scenario body.
    pub scenario_timeout: Duration,
    /// Where a cluster's logs are exported when one of its scenarios fails or its controller
    /// does not start (`<logs_dir>/<cluster>/`); `None` keeps no logs.
    pub logs_dir: Option<PathBuf>,
    /// Expected times: clusters start, and each cluster's scenarios run, longest first (ties
    /// in plan order), so that the longest work does not start last.
    pub costs: costs::Costs,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            parallel: 4,
            clusters_parallel: 2,
            repeat: 1,
            retries: 0,
            inject_failures: BTreeMap::new(),
            keep_cluster_on_failure: false,
            timeouts: Timeouts::default(),
            scenario_timeout: Duration::from_secs(300),
            logs_dir: None,
            costs: costs::Costs::default(),
        }
    }
}

/// The failure text of a failure injected by [`RunOptions::inject_failures`].
pub const INJECTED_FAILURE: &str = "injected failure (HARNESS_INJECT_FAILURES)";

/// Parses `HARNESS_INJECT_FAILURES`: `<scenario>=<tries>` pairs, comma-separated.
pub fn parse_injected_failures(spec: &str) -> Result<BTreeMap<String, usize>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, n) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not <scenario>=<tries>"))?;
            let n: usize = n
                .parse()
                .map_err(|_| format!("`{n}` in `{pair}` is not a number of tries"))?;
            Ok((name.to_string(), n))
        })
        .collect()
}

/// A run id: `<prefix>-YYYYMMDD-HHMMSS-xxxx` (without the prefix when it is empty), UTC, with
/// four random hex digits so two runs started in the same second differ.
pub fn new_id(prefix: &str) -> String {
    let stamp = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]-[hour][minute][second]"
        ))
        .unwrap_or_default();
    let id = format!("{stamp}-{:04x}", rand::random::<u16>());
    if prefix.is_empty() {
        id
    } else {
        format!("{prefix}-{id}")
    }
}

/// Everything reporters hear about.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// The run starts.
    RunStarted {
        /// Run id.
        run_id: String,
        /// The plan.
        plan: Plan,
    },
    /// A cluster is being made.
    ClusterStarting {
        /// Profile.
        profile: String,
    },
    /// A cluster and its bundle are ready.
    ClusterReady {
        /// Profile.
        profile: String,
        /// Seconds it took.
        seconds: f64,
    },
    /// The spec fields of every API the controller under test serves, read from the CRDs
    /// installed in the first cluster that came up (once per run).
    ApiFields(Vec<ApiFields>),
    /// A scenario starts.
    ScenarioStarted {
        /// Scenario.
        scenario: String,
        /// Attempt.
        attempt: usize,
    },
    /// A scenario's try failed the run and it runs again (`--retries`).
    ScenarioRetrying {
        /// Scenario.
        scenario: String,
        /// Attempt (`--repeat`).
        attempt: usize,
        /// The try that starts now (2 for the first retry).
        next_try: usize,
        /// The first line of the failed try's failure.
        reason: String,
    },
    /// A scenario is done (or skipped).
    ScenarioFinished(ScenarioResult),
    /// A cluster's logs were exported after a failure.
    ClusterLogs {
        /// Profile.
        profile: String,
        /// Where they are.
        dir: PathBuf,
    },
    /// An upstream suite's results on a cluster, by the suite's areas (a table).
    UpstreamAreas {
        /// Profile.
        profile: String,
        /// The table ([`upstream::area_table`]).
        table: String,
    },
    /// The run is done.
    RunFinished {
        /// Seconds.
        seconds: f64,
    },
}

/// Consumes events.
pub trait Reporter: Send {
    /// Handles one event.
    fn event(&mut self, e: &Event);
}

/// What a run works with.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    /// Every scenario (the plan names them).
    pub scenarios: &'a [Scenario],
    /// Known bugs.
    pub ledger: &'a Ledger,
    /// Makes clusters.
    pub provider: &'a Provider,
    /// Builds controllers.
    pub toolchain: &'a Toolchain,
    /// How to run.
    pub options: &'a RunOptions,
}

/// Runs a plan with the provider of `env`; returns every result.
pub async fn execute(
    plan: &Plan,
    env: Env<'_>,
    run_id: &str,
    reporters: &mut [Box<dyn Reporter>],
) -> Vec<ScenarioResult> {
    let span = tracing::info_span!("run", run = run_id, controller = %plan.controller, kubernetes = %plan.kubernetes);
    let _enter = span.enter();
    let started = Instant::now();
    // chainsaw is built beside the clusters' bring-up when a chainsaw test is selected.
    let needs_chainsaw = plan
        .clusters
        .iter()
        .any(|pc| pc.uses_label(env.scenarios, crate::chainsaw::LABEL));
    let (chainsaw_tx, chainsaw_rx) = tokio::sync::watch::channel(None);
    let build_chainsaw = async {
        if needs_chainsaw {
            let built = env.toolchain.chainsaw().await.map_err(|e| e.to_string());
            chainsaw_tx.send_replace(Some(built));
        }
    };
    let out = Emitter {
        state: std::sync::Mutex::new((reporters, vec![])),
        api_fields: std::sync::atomic::AtomicBool::new(false),
        chainsaw: chainsaw_rx,
    };
    out.emit(Event::RunStarted {
        run_id: run_id.into(),
        plan: plan.clone(),
    });
    for skip in &plan.skipped {
        let reason = skip.reason.clone();
        out.finish(unrun(
            &skip.scenario,
            &skip.suite,
            "-",
            Outcome::Skipped { reason },
        ));
    }
    let clusters = cluster_order(plan, env.options).into_iter().map(|i| {
        let pc = &plan.clusters[i];
        let name = format!("{run_id}-{i}");
        let span = tracing::info_span!("cluster", cluster = %name, profile = %pc.profile.name);
        let out = &out;
        async move { run_cluster(plan, pc, &name, env, out).await }.instrument(span)
    });
    let run_clusters = futures::stream::iter(clusters)
        .buffer_unordered(env.options.clusters_parallel.max(1))
        .collect::<Vec<()>>();
    // The controller's build (a release's manager, cached afterwards) starts with the
    // clusters' bring-up rather than after it: on a cold machine it overlaps the control
    // plane's build. An install waits for it on the cache's lock; a failure is the install's
    // to report.
    let prefetch = async {
        if plan.controller.checkout.is_none()
            && plan.upstream.is_none()
            && let Err(e) = plan.controller.controller().prepare(env.toolchain).await
        {
            tracing::debug!("prefetch of {}: {e}", plan.controller);
        }
    };
    futures::join!(build_chainsaw, prefetch, run_clusters);
    out.emit(Event::RunFinished {
        seconds: started.elapsed().as_secs_f64(),
    });
    // In the reports' order (suite, scenario, attempt), not the order they finished in.
    let mut results = out.state.into_inner().expect("not poisoned").1;
    results.sort_by(|a, b| {
        (&a.suite, &a.scenario, a.attempt).cmp(&(&b.suite, &b.scenario, b.attempt))
    });
    results
}

/// The plan's clusters (indexes), longest first by the expected costs (ties keep the plan's
/// order): with clusters run a few at a time, the longest must not start last.
pub fn cluster_order(plan: &Plan, options: &RunOptions) -> Vec<usize> {
    let cost = |pc: &PlannedCluster| {
        let one = Plan {
            clusters: vec![pc.clone()],
            skipped: vec![],
            ..plan.clone()
        };
        options.costs.plan(&one, options.parallel)
    };
    let mut order: Vec<usize> = (0..plan.clusters.len()).collect();
    order.sort_by(|a, b| cost(&plan.clusters[*b]).total_cmp(&cost(&plan.clusters[*a])));
    order
}

/// The reporters of a run, and its results so far.
type Sinks<'r> = (&'r mut [Box<dyn Reporter>], Vec<ScenarioResult>);

/// Sends events to the reporters and keeps the results; shared by the clusters of a run.
struct Emitter<'r> {
    /// The reporters, and the results so far.
    state: std::sync::Mutex<Sinks<'r>>,
    /// Whether a cluster has taken on sending [`Event::ApiFields`].
    api_fields: std::sync::atomic::AtomicBool,
    /// chainsaw, once built (or why it could not be), when a chainsaw test is selected.
    chainsaw: tokio::sync::watch::Receiver<Option<Result<PathBuf, String>>>,
}

impl Emitter<'_> {
    fn emit(&self, e: Event) {
        let mut state = self.state.lock().expect("not poisoned");
        for r in state.0.iter_mut() {
            r.event(&e);
        }
    }

    fn finish(&self, r: ScenarioResult) {
        self.emit(Event::ScenarioFinished(r.clone()));
        self.state.lock().expect("not poisoned").1.push(r);
    }

    /// Whether this caller is the one to send [`Event::ApiFields`] (the first to ask, until
    /// it gives the task back with [`Emitter::release_api_fields`]).
    fn take_api_fields(&self) -> bool {
        !self
            .api_fields
            .swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    fn release_api_fields(&self) {
        self.api_fields
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A result for a scenario that did not run.
fn unrun(scenario: &str, suite: &str, profile: &str, outcome: Outcome) -> ScenarioResult {
    let failure = match &outcome {
        Outcome::InfraError { reason } => Some(reason.clone()),
        _ => None,
    };
    ScenarioResult {
        scenario: scenario.into(),
        suite: suite.into(),
        attempt: 1,
        profile: profile.into(),
        outcome,
        failure,
        seconds: 0.0,
        diagnostics: None,
        sent: Sends::default(),
        failed_tries: vec![],
        steps: vec![],
    }
}

/// A cluster with the controller installed, ready for scenarios. Both are shared with the
/// upgrade handle of upgrade scenarios, which replaces the installation.
struct Cell {
    name: String,
    cluster: Arc<tokio::sync::Mutex<AnyCluster>>,
    installation: Arc<tokio::sync::RwLock<Installation>>,
    client: kube::Client,
}

impl Cell {
    /// The handle that replaces the installed controller with `to`, for upgrade scenarios:
    /// local components are stopped first, then `to` installs over the same cluster.
    fn upgrade_to(
        &self,
        to: &ControllerRef,
        toolchain: &Toolchain,
        gates: &BTreeMap<String, bool>,
    ) -> Upgrade {
        let (cluster, installation) = (self.cluster.clone(), self.installation.clone());
        let (to, toolchain, gates) = (to.clone(), toolchain.clone(), gates.clone());
        Upgrade(Arc::new(move || {
            let (cluster, installation) = (cluster.clone(), installation.clone());
            let (to, toolchain, gates) = (to.clone(), toolchain.clone(), gates.clone());
            Box::pin(async move {
                let mut cluster = cluster.lock().await;
                let mut installation = installation.write().await;
                if let AnyCluster::Local(c) = &mut *cluster {
                    for component in &installation.components {
                        c.stop_component(component.name())?;
                    }
                }
                let controller = to.controller();
                if cluster.pulls_only_from_harness() {
                    cluster
                        .push_images(&controller.images(&toolchain).await?)
                        .await?;
                }
                let host = Host::of(&mut cluster).await?;
                *installation = controller.install(host, &toolchain, &gates).await?;
                tracing::info!(to = %to, "controller upgraded");
                Ok(())
            })
        }))
    }
}

/// Makes the cluster and installs the controller. If the install fails, the cluster's logs
/// are exported (when the run keeps logs) before it is destroyed.
async fn bring_up(
    plan: &Plan,
    pc: &PlannedCluster,
    name: &str,
    env: Env<'_>,
) -> anyhow::Result<Cell> {
    let mut cluster = env.provider.create(name, &pc.profile).await?;
    let controller = plan.controller.controller();
    if !pc.profile.objects.is_empty() {
        let client = cluster.client().await?;
        if let Err(e) = crate::cluster::seed::create(&client, &pc.profile.objects).await {
            export_logs(&cluster, env.options, &pc.profile.name);
            return Err(e.into());
        }
    }
    let installed = async {
        if cluster.pulls_only_from_harness() {
            push_run_images(&cluster, controller.as_ref(), env.toolchain).await?;
        }
        let host = Host::of(&mut cluster).await?;
        anyhow::Ok(
            controller
                .install(host, env.toolchain, &pc.controller_gates)
                .await?,
        )
    }
    .await;
    let installation = match installed {
        Ok(i) => i,
        Err(e) => {
            export_logs(&cluster, env.options, &pc.profile.name);
            return Err(e);
        }
    };
    let client = cluster.client().await?;
    Ok(Cell {
        name: name.to_string(),
        cluster: Arc::new(tokio::sync::Mutex::new(cluster)),
        installation: Arc::new(tokio::sync::RwLock::new(installation)),
        client,
    })
}

/// Pushes what runs on a cluster whose nodes pull only from the harness's registry (kind's):
/// the harness's own images, a stand-in for every image the catalog names
/// ([`crate::scenario::workload::CATALOG_IMAGES`]), and the controller's release images.
pub(crate) async fn push_run_images(
    cluster: &AnyCluster,
    controller: &dyn crate::controller::Controller,
    toolchain: &Toolchain,
) -> anyhow::Result<()> {
    use crate::toolchain::images::Reference;
    let references: Vec<Reference> = crate::scenario::workload::CATALOG_IMAGES
        .iter()
        .filter_map(|r| Reference::parse(r))
        .collect();
    let mut images = toolchain.images().await?;
    images.extend(toolchain.stand_ins(&references).await?);
    images.extend(controller.images(toolchain).await?);
    let started = Instant::now();
    cluster.push_images(&images).await?;
    tracing::info!(
        cluster = cluster.name(),
        images = images.len(),
        seconds = started.elapsed().as_secs_f64(),
        "images pushed to the nodes' registry"
    );
    Ok(())
}

/// Copies the cluster's logs into `<logs_dir>/<cluster>/`, if the run keeps logs.
fn export_logs(cluster: &AnyCluster, options: &RunOptions, profile: &str) -> Option<PathBuf> {
    let dir = options.logs_dir.as_ref()?.join(cluster.name());
    match cluster.export_logs(&dir) {
        Ok(()) => {
            tracing::info!(profile, dir = %dir.display(), "cluster logs exported");
            Some(dir)
        }
        Err(e) => {
            eprintln!(
                "warning: export the logs of cluster {}: {e:#}",
                cluster.name()
            );
            None
        }
    }
}

/// Runs the scenarios of one planned cluster on a cluster of their own, then ends it.
async fn run_cluster(
    plan: &Plan,
    pc: &PlannedCluster,
    name: &str,
    env: Env<'_>,
    out: &Emitter<'_>,
) {
    let profile = pc.profile.name.clone();
    out.emit(Event::ClusterStarting {
        profile: profile.clone(),
    });
    let t = Instant::now();
    let mut selected: Vec<&Scenario> = pc
        .scenarios
        .iter()
        .filter_map(|n| env.scenarios.iter().find(|s| s.name == n.as_str()))
        .collect();
    // The longest scenarios first, so that none starts last and runs alone.
    let costs = &env.options.costs;
    selected.sort_by(|a, b| costs.scenario(&b.name).total_cmp(&costs.scenario(&a.name)));
    if let Some(reason) = (!pc.profile.real_nodes.is_empty())
        .then(|| env.provider.no_real_nodes())
        .flatten()
    {
        for s in &selected {
            let skipped = Outcome::Skipped {
                reason: reason.clone(),
            };
            out.finish(unrun(&s.name, s.suite(), &profile, skipped));
        }
        if plan.upstream.is_some() {
            let skipped = Outcome::Skipped { reason };
            let suite = format!("{}/suite", upstream::SUITE);
            out.finish(unrun(&suite, upstream::SUITE, &profile, skipped));
        }
        return;
    }
    let cell = match bring_up(plan, pc, name, env).await {
        Ok(cell) => cell,
        Err(e) => {
            let reason = format!("{e:#}");
            for s in &selected {
                let infra = Outcome::InfraError {
                    reason: reason.clone(),
                };
                out.finish(unrun(&s.name, s.suite(), &profile, infra));
            }
            // An upstream suite has no scenarios to carry the error: the suite does.
            if plan.upstream.is_some() {
                out.finish(upstream::suite_error(&reason, &profile));
            }
            return;
        }
    };
    out.emit(Event::ClusterReady {
        profile: profile.clone(),
        seconds: t.elapsed().as_secs_f64(),
    });
    // An existing cluster is used as it is: what its profile asks and it lacks skips the
    // scenarios, with what is missing.
    if matches!(&*cell.cluster.lock().await, AnyCluster::Existing(_)) {
        let deployment = plan.controller.controller().deployment();
        if let Some(reason) = existing::shortfall(&cell.client, pc, deployment).await {
            for s in selected.drain(..) {
                let skipped = Outcome::Skipped {
                    reason: reason.clone(),
                };
                out.finish(unrun(&s.name, s.suite(), &profile, skipped));
            }
        }
    }
    // Field coverage counts what the catalog's scenarios send; an upstream suite's requests
    // are not recorded, so its run has no coverage table.
    if plan.upstream.is_none() && out.take_api_fields() {
        match installed_api_fields(&cell.client, &plan.controller).await {
            Ok(fields) => out.emit(Event::ApiFields(fields)),
            Err(e) => {
                out.release_api_fields();
                tracing::warn!("read the installed CRDs for field coverage: {e}");
            }
        }
    }
    let failed = match &plan.upstream {
        Some(suite) => run_upstream_on(&cell, plan, pc, suite, env, out).await,
        None => run_scenarios_on(&cell, plan, pc, &selected, env, out).await,
    };
    let Ok(cluster) = Arc::try_unwrap(cell.cluster) else {
        // Still shared: the last handle's drop tears the cluster down.
        eprintln!(
            "warning: cluster {} is still in use; it ends when released",
            cell.name
        );
        return;
    };
    let cluster = cluster.into_inner();
    if failed && let Some(dir) = export_logs(&cluster, env.options, &profile) {
        out.emit(Event::ClusterLogs { profile, dir });
    }
    if failed && env.options.keep_cluster_on_failure {
        match cluster.keep_for_inspection() {
            Ok(msg) => eprintln!("{msg}"),
            Err(e) => eprintln!("warning: {e:#}"),
        }
    } else if let Err(e) = cluster.destroy() {
        eprintln!("warning: {e:#}");
    }
}

/// Runs the controller's own suite on a ready cell: one result per spec that ran (or skipped
/// itself), judged by the ledger; an infrastructure error if the suite cannot be built or
/// writes no report. Returns whether any result fails the run.
async fn run_upstream_on(
    cell: &Cell,
    plan: &Plan,
    pc: &PlannedCluster,
    suite: &upstream::UpstreamSuite,
    env: Env<'_>,
    out: &Emitter<'_>,
) -> bool {
    let profile = pc.profile.name.as_str();
    // Held from the suite's start until its results are reported (this function's end): a
    // stopped run keeps them.
    let mut salvage = None;
    let report = async {
        let work = upstream::work_dir(env.options.logs_dir.as_deref())?;
        let e2e = upstream::e2e_suite(&suite.from)?;
        let binary = e2e.build(env.toolchain).await?;
        let kubectl = env
            .toolchain
            .kubernetes(plan.kubernetes)
            .await?
            .path("kubectl");
        let kubectl_dir = kubectl.parent().unwrap_or(Path::new("/")).to_path_buf();
        let (kubeconfig, docker_env) = {
            let cluster = cell.cluster.lock().await;
            (cluster.kubeconfig().to_path_buf(), cluster.docker_env())
        };
        // The suite's specs pull images onto the nodes as soon as they start.
        cell.installation
            .read()
            .await
            .settled(&cell.client, crate::controller::SETTLE_TIMEOUT)
            .await?;
        if !pc.profile.real_nodes.is_empty() || cell.cluster.lock().await.pulls_only_from_harness()
        {
            // Real nodes pull every image from the cluster's registry: stand-ins for the ones
            // the suite names.
            let refs = e2e.images().await?;
            let images = env.toolchain.stand_ins(&refs).await?;
            cell.cluster.lock().await.push_images(&images).await?;
        }
        // What upstream's e2e script applies from other projects after the manager is up and
        // before the suite (kubeflow's TFJob CRD in v1.9.0), in the same order: a CRD there
        // before the manager would have it watch kinds its e2e configuration lets it only get.
        let foreign = e2e.before_suite().await?;
        if !foreign.is_empty() {
            let client = cell.cluster.lock().await.client().await?;
            crate::cluster::seed::create(&client, &foreign).await?;
        }
        // Specs that need what the cell lacks are skipped, with the reason, decided from
        // each spec's own source and the cell's capabilities.
        let caps = upstream::Capabilities {
            node_daemon: !pc.profile.real_nodes.is_empty(),
            node_containers: matches!(env.provider, crate::cluster::any::Provider::Kind(_)),
        };
        let node_kinds = plan.controller.controller().node_kinds();
        // What every spec waits for when it starts is served before the first one does.
        upstream::await_suite_needs(&binary, &cell.client, crate::controller::SETTLE_TIMEOUT)
            .await?;
        let planned = upstream::planned(&binary, suite, &work).await?;
        let modcache = upstream::module_cache();
        let checked = upstream::unservable(&planned, caps, node_kinds, &modcache);
        if let Some(w) = checked.warning(&modcache) {
            tracing::warn!("{w}");
        }
        let unservable = checked.unservable;
        let runnable = upstream::skipping(suite, &unservable);
        let skipped: std::collections::BTreeSet<&str> =
            unservable.iter().map(|u| u.name.as_str()).collect();
        let planned: Vec<_> = planned
            .iter()
            .filter(|s| !skipped.contains(s.name.as_str()))
            .cloned()
            .collect();
        let ginkgo = match suite.procs {
            0 | 1 => None,
            _ => Some(e2e.ginkgo(env.toolchain).await?),
        };
        if crate::stop::is_requested() {
            anyhow::bail!("the run was stopped before the suite started");
        }
        salvage = Some(crate::stop::Salvage::begin());
        let run = upstream::run(
            &binary,
            ginkgo.as_deref(),
            &runnable,
            &kubeconfig,
            &kubectl_dir,
            &docker_env,
            &work,
            crate::stop::requested(),
            upstream::STOP_GRACE,
        )
        .await?;
        anyhow::Ok((run, planned, unservable, work))
    }
    .await;
    let mut areas = None;
    let judge = |name: &str, failure: Option<&str>| {
        Outcome::Judged(env.ledger.classify(
            name,
            &plan.controller.version,
            plan.kubernetes,
            failure,
        ))
    };
    let judged =
        report
            .map_err(|e| format!("{e:#}"))
            .and_then(|(run, planned, unservable, work)| {
                let mut r = match &run.report {
                    Some(report) => {
                        areas = upstream::areas(report).ok().map(|a| (a, work));
                        upstream::results(report, profile, judge)?
                    }
                    // What the suite's output showed of its specs, and how it ended.
                    None => upstream::salvaged(&run, &planned, profile, judge),
                };
                // A spec that ran anyway stands as it ran.
                let ran: std::collections::BTreeSet<String> =
                    r.iter().map(|x| x.scenario.clone()).collect();
                r.extend(
                    upstream::skipped(&unservable, profile)
                        .into_iter()
                        .filter(|x| !ran.contains(&x.scenario)),
                );
                Ok(r)
            });
    match judged {
        Ok(results) => {
            if let Some((areas, work)) = areas {
                let table = upstream::area_table(&results, &areas);
                let file = work.join(upstream::AREAS_FILE);
                if let Err(e) = std::fs::write(&file, &table) {
                    eprintln!("warning: write {}: {e}", file.display());
                }
                out.emit(Event::UpstreamAreas {
                    profile: profile.into(),
                    table,
                });
            }
            let mut failed = false;
            for r in results {
                failed |= r.outcome.fails_run(false);
                out.finish(r);
            }
            failed
        }
        Err(reason) => {
            out.finish(upstream::suite_error(&reason, profile));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_with_the_most_work_starts_first() {
        let all = crate::suites::all();
        let p = plan(
            &all,
            &Filter::default(),
            "1.32".parse().unwrap(),
            &"openkruise@v1.9.0".parse().unwrap(),
        );
        let order = cluster_order(&p, &RunOptions::default());
        assert_eq!(p.clusters[order[0]].profile.name, "default");
        assert_eq!(order.len(), p.clusters.len());
    }

    #[test]
    fn injected_failures_parse_or_say_what_is_wrong() {
        assert_eq!(
            parse_injected_failures("a/b=1, c/d=2").unwrap(),
            BTreeMap::from([("a/b".to_string(), 1), ("c/d".to_string(), 2)])
        );
        assert!(
            parse_injected_failures("a/b")
                .unwrap_err()
                .contains("<scenario>=<tries>")
        );
        assert!(
            parse_injected_failures("a/b=x")
                .unwrap_err()
                .contains("not a number")
        );
    }

    #[test]
    fn every_scenario_is_named_suite_slash_behaviour_and_names_are_unique() {
        let all = crate::suites::all();
        let mut names = std::collections::BTreeSet::new();
        for s in &all {
            let (suite, behaviour) = s.name.split_once('/').unwrap_or_default();
            assert!(
                !suite.is_empty() && !behaviour.is_empty() && suite == s.suite(),
                "{}",
                s.name
            );
            assert!(names.insert(s.name.clone()), "{} twice", s.name);
        }
    }
}
