//! Running one cluster's scenarios: [`run_scenarios_on`] is where to start. It runs the
//! selected scenarios (each `repeat` times, `parallel` at once) on a ready cell, each in a
//! namespace of its own with retries ([`run_one`] for one try), checks the invariants after
//! each body and collects a failed try's diagnostics.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use tracing::Instrument;

use super::{Cell, Emitter, Env, Event, INJECTED_FAILURE, Plan, PlannedCluster};
use crate::cluster::{OWNER_LABEL, ZONE_LABEL};
use crate::controller::{ControllerRef, Installation};
use crate::results::{Diagnostics, FailedTry, Outcome, ScenarioResult};
use crate::scenario::coverage::ApiFields;
use crate::scenario::record::Sends;
use crate::scenario::{Ctx, Facts, NamespaceMaker, Scenario, Upgrade, invariants, monitor};

/// The spec fields of the controller's APIs, from the CRDs installed in a cluster.
pub(super) async fn installed_api_fields(
    client: &kube::Client,
    controller: &ControllerRef,
) -> Result<Vec<ApiFields>, kube::Error> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let groups = controller.controller().api_groups();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds: Vec<serde_json::Value> = crds
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|c| groups.contains(&c.spec.group.as_str()))
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    Ok(crds.iter().flat_map(ApiFields::of_crd).collect())
}

/// The cluster's nodes as scenarios know them: worker nodes by zone (those with a zone label
/// and without the real-node label) and the real nodes (with it), each list by name.
async fn nodes_by_label(
    client: &kube::Client,
) -> Result<(BTreeMap<String, Vec<String>>, Vec<String>), kube::Error> {
    use crate::cluster::local::node::REAL_NODE_LABEL;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let mut list = nodes.list(&Default::default()).await?.items;
    list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let (mut zones, mut real) = (BTreeMap::<String, Vec<String>>::new(), vec![]);
    for n in list {
        let labels = n.metadata.labels.unwrap_or_default();
        let name = n.metadata.name.unwrap_or_default();
        if labels.get(REAL_NODE_LABEL.0).map(String::as_str) == Some(REAL_NODE_LABEL.1) {
            real.push(name);
        } else if let Some(zone) = labels.get(ZONE_LABEL) {
            zones.entry(zone.clone()).or_default().push(name);
        }
    }
    Ok((zones, real))
}

/// Runs `selected` (each `repeat` times, `parallel` at once) on a ready cell; returns whether
/// any result fails the run.
pub(super) async fn run_scenarios_on(
    cell: &Cell,
    plan: &Plan,
    pc: &PlannedCluster,
    selected: &[&Scenario],
    env: Env<'_>,
    out: &Emitter<'_>,
) -> bool {
    // The zones and the real nodes as the nodes' labels say, on every provider (kind names
    // its nodes itself, an existing cluster has its own).
    let (zones, real_nodes) = nodes_by_label(&cell.client).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "list the cluster's nodes");
        Default::default()
    });
    let mut facts = Facts {
        kubernetes: plan.kubernetes,
        controller: plan.controller.clone(),
        zones,
        real_nodes,
        kubeconfig: Some(cell.cluster.lock().await.kubeconfig().to_path_buf()),
        kubectl: None,
        chainsaw: None,
    };
    // Declarative tests with scripts run the toolchain's kubectl (cached with the control plane).
    if selected
        .iter()
        .any(|s| s.has_label(crate::chainsaw::KUBECTL_LABEL))
    {
        match env.toolchain.kubernetes(plan.kubernetes).await {
            Ok(k) => facts.kubectl = Some(k.path("kubectl")),
            Err(e) => tracing::warn!("kubectl for scripts: {e}"),
        }
    }
    if selected.iter().any(|s| s.has_label(crate::chainsaw::LABEL)) {
        let mut rx = out.chainsaw.clone();
        let built = rx.wait_for(Option::is_some).await.map(|v| v.clone());
        match built {
            Ok(Some(Ok(path))) => facts.chainsaw = Some(path),
            Ok(Some(Err(e))) => tracing::warn!("chainsaw: {e}"),
            _ => tracing::warn!("chainsaw: its build did not finish"),
        }
    }
    let jobs: Vec<(&Scenario, usize)> = selected
        .iter()
        .flat_map(|s| (1..=env.options.repeat.max(1)).map(move |a| (*s, a)))
        .collect();
    for (s, a) in &jobs {
        out.emit(Event::ScenarioStarted {
            scenario: s.name.to_string(),
            attempt: *a,
        });
    }
    let upgrade = plan
        .upgrade_to
        .as_ref()
        .map(|to| cell.upgrade_to(to, env.toolchain, &pc.controller_gates));
    let unit = Unit {
        profile: &pc.profile.name,
        owner: &cell.name,
        client: &cell.client,
        installation: &cell.installation,
        upgrade: upgrade.as_ref(),
        plan,
        env,
    };
    // The attempts of one scenario run one after another, as in a single run no scenario
    // overlaps itself (its cluster-scoped objects and node-level work would collide).
    // A scenario that runs alone waits for the others, then runs with none beside it.
    let repeat = env.options.repeat.max(1);
    let (alone, shared): (Vec<&Scenario>, Vec<&Scenario>) =
        selected.iter().partition(|s| s.requires.alone);
    let attempts = |s| attempts(s, repeat, &facts, unit, out);
    let mut stream = futures::stream::iter(shared.into_iter().map(attempts))
        .flatten_unordered(env.options.parallel.max(1))
        .chain(futures::stream::iter(alone.into_iter().map(attempts)).flatten());
    let mut failed = false;
    while let Some(r) = stream.next().await {
        failed |= r.outcome.fails_run(false);
        out.finish(r);
    }
    failed
}

/// The `repeat` attempts of `s`, one after another.
fn attempts<'a, 'e: 'a>(
    s: &'a Scenario,
    repeat: usize,
    facts: &Facts,
    unit: Unit<'a>,
    out: &'a Emitter<'e>,
) -> futures::stream::BoxStream<'a, ScenarioResult> {
    let facts = facts.clone();
    futures::stream::iter(1..=repeat)
        .then(move |attempt| {
            let span = tracing::info_span!("scenario", scenario = %s.name, attempt);
            run_with_retries(s, attempt, facts.clone(), unit, out).instrument(span)
        })
        .boxed()
}

/// Runs one scenario, and again (each time in a fresh namespace) while its result fails the
/// run and `retries` are left: a try that does not fail the run after one that did makes the
/// result flaky; the failed tries are kept in it.
async fn run_with_retries(
    s: &Scenario,
    attempt: usize,
    facts: Facts,
    unit: Unit<'_>,
    out: &Emitter<'_>,
) -> ScenarioResult {
    let mut failed_tries = vec![];
    loop {
        let try_no = failed_tries.len() + 1;
        let mut r = run_one(s, attempt, try_no, facts.clone(), unit).await;
        let Outcome::Judged(verdict) = &r.outcome else {
            r.failed_tries = failed_tries;
            return r;
        };
        if !verdict.fails_run() {
            if !failed_tries.is_empty() {
                r.outcome = Outcome::Flaky {
                    verdict: verdict.clone(),
                };
            }
            r.failed_tries = failed_tries;
            return r;
        }
        if failed_tries.len() >= unit.env.options.retries {
            r.failed_tries = failed_tries;
            return r;
        }
        let reason = r
            .failure
            .as_deref()
            .and_then(|f| f.lines().next())
            .unwrap_or(r.outcome.label())
            .to_string();
        failed_tries.push(FailedTry {
            verdict: verdict.clone(),
            failure: r.failure,
            seconds: r.seconds,
            diagnostics: r.diagnostics,
        });
        out.emit(Event::ScenarioRetrying {
            scenario: s.name.to_string(),
            attempt,
            next_try: failed_tries.len() + 1,
            reason,
        });
    }
}

/// What every scenario of one cell shares.
#[derive(Clone, Copy)]
struct Unit<'a> {
    profile: &'a str,
    owner: &'a str,
    client: &'a kube::Client,
    installation: &'a tokio::sync::RwLock<Installation>,
    upgrade: Option<&'a Upgrade>,
    plan: &'a Plan,
    env: Env<'a>,
}

/// Runs one scenario in a namespace of its own: its body, then the invariants; classifies the
/// result and collects diagnostics before cleanup.
async fn run_one(
    s: &Scenario,
    attempt: usize,
    try_no: usize,
    facts: Facts,
    unit: Unit<'_>,
) -> ScenarioResult {
    let t = Instant::now();
    let namespace = match &s.requires.namespace {
        NamespaceMaker::Body { name: Some(name) } => name.clone(),
        _ => namespace_name(&s.name),
    };
    let log = unit
        .installation
        .read()
        .await
        .logs()
        .first()
        .map(|p| p.to_path_buf());
    let log_offset = log
        .as_deref()
        .and_then(|l| std::fs::metadata(l).ok())
        .map(|m| m.len())
        .unwrap_or(0);
    let nss: Api<Namespace> = Api::all(unit.client.clone());
    let ns = serde_json::from_value(serde_json::json!({"metadata": {
        "name": namespace,
        "labels": {OWNER_LABEL: unit.owner},
    }}))
    .expect("a valid namespace");
    let mut steps = None;
    let mut plots = vec![];
    let made = match s.requires.namespace {
        NamespaceMaker::Runner => nss.create(&PostParams::default(), &ns).await.map(|_| ()),
        NamespaceMaker::Body { .. } => Ok(()),
    };
    let (failures, cleanup, recorder) = match made {
        Err(e) => (
            vec![format!("create namespace {namespace}: {e}")],
            None,
            None,
        ),
        Ok(_) => {
            let mut ctx = Ctx::new(
                &namespace,
                unit.client.clone(),
                facts,
                unit.env.options.timeouts,
            );
            ctx.upgrade = unit.upgrade.cloned();
            // A wait for what the controller should do ends when it panics over this
            // scenario's objects, with the panic, not at its timeout.
            if let Some(t) = unit.installation.read().await.panic_tripwire(&namespace) {
                ctx.steps = ctx.steps.with_tripwire(t);
            }
            let (cleanup, recorder) = (ctx.cleanup.clone(), ctx.recorder.clone());
            steps = Some(ctx.steps.clone());
            let (mut failures, found_plots) = body_and_invariants(s, ctx, unit).await;
            plots = found_plots;
            let injected = unit.env.options.inject_failures.get(s.name.as_ref());
            if injected.is_some_and(|n| try_no <= *n) {
                failures.push(format!("{INJECTED_FAILURE} (try {try_no})"));
            }
            (failures, Some(cleanup), Some(recorder))
        }
    };
    let failure = (!failures.is_empty()).then(|| failures.join("\n"));
    let verdict = unit.env.ledger.classify(
        &s.name,
        &unit.plan.controller.version,
        unit.plan.kubernetes,
        failure.as_deref(),
    );
    let diagnostics = if failure.is_some() || verdict.fails_run() {
        let mut d = collect(unit.client, &namespace, log.as_deref(), log_offset).await;
        d.plots = plots;
        Some(d)
    } else {
        None
    };
    let mut cleanup_errors = match cleanup {
        Some(c) => c.unwind().await,
        None => vec![],
    };
    match nss.delete(&namespace, &DeleteParams::background()).await {
        Ok(_) => {}
        // A body that makes its namespace may have deleted it (or never made it).
        Err(kube::Error::Api(e))
            if e.code == 404 && matches!(s.requires.namespace, NamespaceMaker::Body { .. }) => {}
        Err(e) => cleanup_errors.push(format!("delete namespace {namespace}: {e}")),
    }
    for e in cleanup_errors {
        tracing::warn!("cleanup: {e}");
    }
    ScenarioResult {
        scenario: s.name.to_string(),
        suite: s.suite().into(),
        attempt,
        profile: unit.profile.into(),
        outcome: Outcome::Judged(verdict),
        failure,
        seconds: t.elapsed().as_secs_f64(),
        diagnostics,
        sent: recorder.map(|r| Sends::of(&r.sent())).unwrap_or_default(),
        failed_tries: vec![],
        steps: steps.map(|s| s.list()).unwrap_or_default(),
    }
}

/// How long the garbage collector gets to delete the dependents of a deleted owner before
/// what is left is called orphaned.
const ORPHAN_GRACE: Duration = Duration::from_secs(15);

/// `h-<scenario's last part, at most 40 characters>-<5 random hex digits>`.
fn namespace_name(scenario: &str) -> String {
    let short: String = scenario
        .rsplit('/')
        .next()
        .unwrap_or(scenario)
        .chars()
        .take(40)
        .collect();
    format!("h-{short}-{:05x}", rand::random::<u32>() & 0xfffff)
}

/// Runs the body (bounded by the scenario timeout), then the invariants whatever the body
/// did; returns every failure, and the plots of the monitor's failing violations.
async fn body_and_invariants(
    s: &Scenario,
    ctx: Ctx,
    unit: Unit<'_>,
) -> (Vec<String>, Vec<monitor::Plot>) {
    let mut failures = vec![];
    let mut plots = vec![];
    let (client, namespace) = (ctx.client.clone(), ctx.namespace.clone());
    let window = unit.installation.read().await.window(&namespace);
    let bound = unit.env.options.scenario_timeout;
    let settings = monitor::Settings::with_liveness(ctx.timeouts.converge);
    let watching = monitor::Monitor::start(&client, &namespace, settings);
    let steps = ctx.steps.clone();
    match tokio::time::timeout(bound, crate::wait::measured((s.body)(ctx))).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => failures.push(format!("{e:#}")),
        Err(_) => failures.push(match steps.current() {
            Some((n, step)) => format!(
                "scenario did not finish within {bound:?}: step {n}, '{}', ran from {:.1} s on",
                step.name, step.start
            ),
            None => format!("scenario did not finish within {bound:?}"),
        }),
    }
    match watching.stop().await {
        Ok(found) => {
            for v in monitor::unexpected(&found, &s.expected_violations) {
                failures.push(format!("invariant: {v}"));
                plots.extend(v.plot.clone());
            }
        }
        Err(e) => failures.push(format!("invariant check: list events: {e}")),
    }
    match invariants::lasting_orphans(&client, &namespace, ORPHAN_GRACE).await {
        // A scenario that creates bare pods or PVCs itself (declarative tests) expects those
        // to have no owner; objects whose owner is gone still count.
        Ok(o)
            if s.expected_violations
                .iter()
                .any(|v| v == invariants::BARE_OBJECTS) =>
        {
            let o: Vec<String> = o
                .into_iter()
                .filter(|o| !o.ends_with(invariants::NO_OWNER))
                .collect();
            if !o.is_empty() {
                failures.push(format!("invariant: {}", o.join("; ")));
            }
        }
        Ok(o) if !o.is_empty() => failures.push(format!("invariant: {}", o.join("; "))),
        Ok(_) => {}
        Err(e) => failures.push(format!("invariant check: list pods and PVCs: {e}")),
    }
    match invariants::unexpected_warnings(&client, &namespace, &s.allowed_warnings).await {
        Ok(w) if !w.is_empty() => failures.push(format!("invariant: {}", w.join("; "))),
        Ok(_) => {}
        Err(e) => failures.push(format!("invariant check: list events: {e}")),
    }
    if let Err(e) = unit.installation.read().await.check(&window).await {
        failures.push(format!("invariant: {e}"));
    }
    (failures, plots)
}

/// Events, objects and the manager's log lines since `offset`.
async fn collect(
    client: &kube::Client,
    namespace: &str,
    log: Option<&Path>,
    offset: u64,
) -> Diagnostics {
    use k8s_openapi::api::core::v1::Event as KEvent;
    let events: Api<KEvent> = Api::namespaced(client.clone(), namespace);
    let events = events
        .list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|e| {
                    format!(
                        "{} {} {} {}: {}",
                        e.type_.unwrap_or_default(),
                        e.reason.unwrap_or_default(),
                        e.involved_object.kind.unwrap_or_default(),
                        e.involved_object.name.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_else(|e| vec![format!("list events: {e}")]);
    let mut objects = String::new();
    for (av, kind) in [
        ("v1", "Pod"),
        ("v1", "PersistentVolumeClaim"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps.kruise.io/v1alpha1", "CloneSet"),
        ("apps.kruise.io/v1alpha1", "DaemonSet"),
        ("apps.kruise.io/v1alpha1", "WorkloadSpread"),
    ] {
        let (g, v) = av.split_once('/').unwrap_or(("", av));
        let gvk = kube::api::GroupVersionKind::gvk(g, v, kind);
        let Ok((ar, _)) = kube::discovery::pinned_kind(client, &gvk).await else {
            continue;
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &ar);
        if let Ok(list) = api.list(&Default::default()).await {
            for mut o in list.items {
                o.metadata.managed_fields = None;
                o.types = Some(kube::api::TypeMeta {
                    api_version: av.into(),
                    kind: kind.into(),
                });
                objects.push_str("---\n");
                objects.push_str(&serde_saphyr::to_string(&o).unwrap_or_default());
            }
        }
    }
    let manager_log = log
        .and_then(|l| std::fs::read(l).ok())
        .map(|b| {
            let start = (offset as usize).min(b.len());
            let text = String::from_utf8_lossy(&b[start..]).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(400)..].join("\n")
        })
        .unwrap_or_default();
    Diagnostics {
        events,
        objects,
        manager_log,
        plots: vec![],
    }
}
