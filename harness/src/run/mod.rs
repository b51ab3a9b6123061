//! Running scenarios: [`plan`] groups the selected scenarios by the cluster profile they need
//! (one cluster per distinct profile, reused by all its scenarios), [`execute`] runs each
//! group's scenarios concurrently in their own namespaces, checks the invariants, classifies
//! every result against the [`ledger::Ledger`] and emits [`Event`]s for the reporters.

pub mod ledger;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use serde::{Deserialize, Serialize};

use self::ledger::{Ledger, Verdict};
use crate::bundle::ControllerRef;
use crate::bundle::openkruise::{self, InstallOptions};
use crate::cluster::any::Provider;
use crate::cluster::existing::OWNER_LABEL;
use crate::cluster::{Profile, ZONE_LABEL};
use crate::scenario::{Ctx, Facts, Scenario, Timeouts, invariants};
use crate::toolchain::{KubeVersion, Toolchain};

/// Which scenarios to run.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these suites.
    pub suites: Vec<String>,
    /// Only names containing one of these.
    pub focus: Vec<String>,
    /// Not names containing one of these.
    pub skip: Vec<String>,
    /// Only scenarios carrying one of these labels.
    pub labels: Vec<String>,
}

impl Filter {
    /// Whether `s` is selected.
    pub fn selects(&self, s: &Scenario) -> bool {
        (self.suites.is_empty() || self.suites.iter().any(|x| x == s.suite))
            && (self.focus.is_empty() || self.focus.iter().any(|f| s.name.contains(f.as_str())))
            && !self.skip.iter().any(|f| s.name.contains(f.as_str()))
            && (self.labels.is_empty()
                || self.labels.iter().any(|l| s.labels.contains(&l.as_str())))
    }
}

/// One cluster of the plan and the scenarios it serves.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedCluster {
    /// The profile (version, apiserver gates, nodes).
    pub profile: Profile,
    /// Controller gates the bundle is installed with.
    pub controller_gates: BTreeMap<String, bool>,
    /// Gates a scenario asked for that the release does not have (left out).
    pub dropped_gates: Vec<String>,
    /// Scenario names, in order.
    pub scenarios: Vec<String>,
}

/// A scenario that will not run, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skip {
    /// Scenario.
    pub scenario: String,
    /// Suite.
    pub suite: String,
    /// Reason.
    pub reason: String,
}

/// What a run will do.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Kubernetes version.
    pub kubernetes: KubeVersion,
    /// Controller under test.
    pub controller: ControllerRef,
    /// Clusters in start order.
    pub clusters: Vec<PlannedCluster>,
    /// Scenarios whose requirements the cell does not meet.
    pub skipped: Vec<Skip>,
}

/// The node layout every scenario cluster has: 4 nodes over zone-a/zone-b, two `node-type`s.
pub fn scenario_profile(kubernetes: KubeVersion) -> Profile {
    let mut p = Profile::new(kubernetes);
    p.set_nodes(4, &["zone-a", "zone-b"], &BTreeMap::new())
        .expect("valid layout");
    for (i, n) in p.nodes.iter_mut().enumerate() {
        let t = if i < 2 { "stable" } else { "elastic" };
        n.labels.insert("node-type".into(), t.into());
    }
    p
}

/// The cluster a scenario needs: the scenario layout with its apiserver gates.
fn cluster_profile(s: &Scenario, kubernetes: KubeVersion) -> Profile {
    let mut p = scenario_profile(kubernetes);
    p.feature_gates = s.requires.apiserver_gates.clone();
    p
}

/// The cluster profiles the scenarios need at `kubernetes` (one per set of apiserver gates),
/// named `default` or after their gates: what `kind-configs/` holds.
pub fn cluster_profiles(scenarios: &[Scenario], kubernetes: KubeVersion) -> Vec<Profile> {
    let mut by_gates: BTreeMap<String, Profile> = BTreeMap::new();
    for s in scenarios {
        if s.requires.unmet(kubernetes).is_some() {
            continue;
        }
        let mut p = cluster_profile(s, kubernetes);
        p.name = if p.feature_gates.is_empty() {
            "default".into()
        } else {
            p.feature_gates
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join("+")
        };
        by_gates.entry(p.name.clone()).or_insert(p);
    }
    by_gates.into_values().collect()
}

/// The files of `kind-configs/`: `<profile>.yaml` for every [`cluster_profiles`] entry at the
/// default Kubernetes version.
pub fn kind_configs(
    scenarios: &[Scenario],
) -> Result<Vec<(String, String)>, crate::cluster::kind::KindError> {
    cluster_profiles(scenarios, KubeVersion::default_version())
        .iter()
        .map(|p| {
            Ok((
                format!("{}.yaml", p.name),
                crate::cluster::kind::config_yaml(p)?,
            ))
        })
        .collect()
}

/// Groups the selected scenarios by the profile they need.
pub fn plan(
    scenarios: &[Scenario],
    filter: &Filter,
    kubernetes: KubeVersion,
    controller: &ControllerRef,
) -> Plan {
    let mut groups: BTreeMap<(String, String), PlannedCluster> = BTreeMap::new();
    let mut skipped = vec![];
    for s in scenarios.iter().filter(|s| filter.selects(s)) {
        if let Some(reason) = s.requires.unmet(kubernetes) {
            skipped.push(Skip {
                scenario: s.name.into(),
                suite: s.suite.into(),
                reason,
            });
            continue;
        }
        let mut gates = BTreeMap::new();
        let mut dropped = vec![];
        for (g, v) in &s.requires.controller_gates {
            if openkruise::has_gate(&controller.version, g) {
                gates.insert(g.clone(), *v);
            } else {
                dropped.push(format!("{g} (not in {controller})"));
            }
        }
        let profile = cluster_profile(s, kubernetes);
        let key = (
            serde_json::to_string(&profile.feature_gates).expect("serializes"),
            serde_json::to_string(&gates).expect("serializes"),
        );
        let entry = groups.entry(key).or_insert_with(|| PlannedCluster {
            profile: profile.clone(),
            controller_gates: gates.clone(),
            dropped_gates: vec![],
            scenarios: vec![],
        });
        entry.scenarios.push(s.name.into());
        for d in dropped {
            if !entry.dropped_gates.contains(&d) {
                entry.dropped_gates.push(d);
            }
        }
    }
    for g in groups.values_mut() {
        let gates: Vec<&str> = g
            .profile
            .feature_gates
            .keys()
            .chain(g.controller_gates.keys())
            .map(String::as_str)
            .collect();
        g.profile.name = if gates.is_empty() {
            "default".into()
        } else {
            gates.join("+")
        };
    }
    Plan {
        kubernetes,
        controller: controller.clone(),
        clusters: groups.into_values().collect(),
        skipped,
    }
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Scenarios at once per cluster.
    pub parallel: usize,
    /// Times each scenario runs.
    pub repeat: usize,
    /// Leave a cluster running (detached) if one of its scenarios failed.
    pub keep_cluster_on_failure: bool,
    /// Bounds.
    pub timeouts: Timeouts,
    /// Bound on one scenario body.
    pub scenario_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            parallel: 2,
            repeat: 1,
            keep_cluster_on_failure: false,
            timeouts: Timeouts::default(),
            scenario_timeout: Duration::from_secs(300),
        }
    }
}

/// What failed, collected before cleanup.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Events in the namespace.
    pub events: Vec<String>,
    /// The namespace's objects, as YAML.
    pub objects: String,
    /// Controller manager log lines of the scenario's window.
    pub manager_log: String,
}

/// The result of one scenario run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Scenario.
    pub scenario: String,
    /// Suite.
    pub suite: String,
    /// Attempt (1-based; `--repeat`).
    pub attempt: usize,
    /// Profile of its cluster.
    pub profile: String,
    /// Verdict.
    pub outcome: Outcome,
    /// The failure text, if it failed.
    pub failure: Option<String>,
    /// Seconds.
    pub seconds: f64,
    /// Collected on failure.
    pub diagnostics: Option<Diagnostics>,
}

/// A result's classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// Ran and was judged.
    Judged(Verdict),
    /// Did not run: requirements not met.
    Skipped {
        /// Why.
        reason: String,
    },
    /// Its cluster or bundle did not start.
    InfraError {
        /// Why.
        reason: String,
    },
}

impl Outcome {
    /// A short label for tables.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Judged(Verdict::Pass) => "pass",
            Outcome::Judged(Verdict::Fail) => "FAIL",
            Outcome::Judged(Verdict::ExpectedFail { .. }) => "expected-fail",
            Outcome::Judged(Verdict::UnexpectedPass { .. }) => "UNEXPECTED-PASS",
            Outcome::Skipped { .. } => "skipped",
            Outcome::InfraError { .. } => "INFRA-ERROR",
        }
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
    /// A scenario starts.
    ScenarioStarted {
        /// Scenario.
        scenario: String,
        /// Attempt.
        attempt: usize,
    },
    /// A scenario is done (or skipped).
    ScenarioFinished(ScenarioResult),
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
    let Env {
        scenarios,
        ledger,
        provider,
        toolchain,
        options,
    } = env;
    let started = Instant::now();
    let emit = |reporters: &mut [Box<dyn Reporter>], e: Event| {
        for r in reporters.iter_mut() {
            r.event(&e);
        }
    };
    emit(
        reporters,
        Event::RunStarted {
            run_id: run_id.into(),
            plan: plan.clone(),
        },
    );
    let mut results = vec![];
    for skip in &plan.skipped {
        let r = ScenarioResult {
            scenario: skip.scenario.clone(),
            suite: skip.suite.clone(),
            attempt: 1,
            profile: "-".into(),
            outcome: Outcome::Skipped {
                reason: skip.reason.clone(),
            },
            failure: None,
            seconds: 0.0,
            diagnostics: None,
        };
        emit(reporters, Event::ScenarioFinished(r.clone()));
        results.push(r);
    }
    for (i, pc) in plan.clusters.iter().enumerate() {
        emit(
            reporters,
            Event::ClusterStarting {
                profile: pc.profile.name.clone(),
            },
        );
        let t = Instant::now();
        let name = format!("{run_id}-{i}");
        let setup = async {
            let mut c = provider.create(&name, &pc.profile).await?;
            let m = c
                .install_controller(
                    toolchain,
                    &InstallOptions {
                        version: Some(plan.controller.version.clone()),
                        checkout: plan.controller.checkout.clone(),
                        gates: pc.controller_gates.clone(),
                        ..Default::default()
                    },
                )
                .await?;
            let client = c.client().await?;
            anyhow::Ok((c, m, client))
        }
        .await;
        let selected: Vec<&Scenario> = pc
            .scenarios
            .iter()
            .filter_map(|n| scenarios.iter().find(|s| s.name == n))
            .collect();
        let (cluster, manager, client) = match setup {
            Ok(x) => x,
            Err(e) => {
                let reason = format!("{e:#}");
                for s in &selected {
                    let r = ScenarioResult {
                        scenario: s.name.into(),
                        suite: s.suite.into(),
                        attempt: 1,
                        profile: pc.profile.name.clone(),
                        outcome: Outcome::InfraError {
                            reason: reason.clone(),
                        },
                        failure: Some(reason.clone()),
                        seconds: 0.0,
                        diagnostics: None,
                    };
                    emit(reporters, Event::ScenarioFinished(r.clone()));
                    results.push(r);
                }
                continue;
            }
        };
        emit(
            reporters,
            Event::ClusterReady {
                profile: pc.profile.name.clone(),
                seconds: t.elapsed().as_secs_f64(),
            },
        );
        let facts = Facts {
            kubernetes: plan.kubernetes,
            controller: plan.controller.clone(),
            zones: pc.profile.nodes.iter().fold(BTreeMap::new(), |mut m, n| {
                m.entry(n.labels.get(ZONE_LABEL).cloned().unwrap_or_default())
                    .or_insert_with(Vec::new)
                    .push(n.name.clone());
                m
            }),
        };
        let jobs: Vec<(&Scenario, usize)> = selected
            .iter()
            .flat_map(|s| (1..=options.repeat.max(1)).map(move |a| (*s, a)))
            .collect();
        for (s, a) in &jobs {
            emit(
                reporters,
                Event::ScenarioStarted {
                    scenario: s.name.into(),
                    attempt: *a,
                },
            );
        }
        let mut stream = futures::stream::iter(jobs.into_iter().map(|(s, attempt)| {
            let facts = facts.clone();
            let owner = cluster.name().to_string();
            let client = client.clone();
            let manager = &manager;
            let profile = pc.profile.name.clone();
            async move {
                run_one(
                    s, attempt, &profile, &owner, client, manager, facts, ledger, plan, options,
                )
                .await
            }
        }))
        .buffer_unordered(options.parallel.max(1));
        let mut failed = false;
        while let Some(r) = stream.next().await {
            failed |= matches!(&r.outcome, Outcome::Judged(v) if v.fails_run());
            emit(reporters, Event::ScenarioFinished(r.clone()));
            results.push(r);
        }
        drop(stream);
        if failed && options.keep_cluster_on_failure {
            match cluster.keep_for_inspection() {
                Ok(msg) => eprintln!("{msg}"),
                Err(e) => eprintln!("warning: {e:#}"),
            }
        } else if let Err(e) = cluster.destroy() {
            eprintln!("warning: {e:#}");
        }
    }
    emit(
        reporters,
        Event::RunFinished {
            seconds: started.elapsed().as_secs_f64(),
        },
    );
    results
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site, all inputs distinct"
)]
async fn run_one(
    s: &Scenario,
    attempt: usize,
    profile: &str,
    owner: &str,
    client: kube::Client,
    manager: &crate::bundle::Deployed,
    facts: Facts,
    ledger: &Ledger,
    plan: &Plan,
    options: &RunOptions,
) -> ScenarioResult {
    let t = Instant::now();
    let short: String = s
        .name
        .rsplit('/')
        .next()
        .unwrap_or(s.name)
        .chars()
        .take(40)
        .collect();
    let namespace = format!("h-{short}-{:05x}", rand::random::<u32>() & 0xfffff);
    let log_offset = manager
        .log()
        .and_then(|l| std::fs::metadata(l).ok())
        .map(|m| m.len())
        .unwrap_or(0);
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut failures: Vec<String> = vec![];
    let mut cleanup: Option<crate::scenario::Cleanup> = None;
    let created = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {
                "name": namespace,
                "labels": {OWNER_LABEL: owner},
            }}))
            .expect("valid"),
        )
        .await;
    if let Err(e) = created {
        failures.push(format!("create namespace {namespace}: {e}"));
    } else {
        let ctx = Ctx {
            namespace: namespace.clone(),
            client: client.clone(),
            facts,
            timeouts: options.timeouts,
            cleanup: Default::default(),
        };
        cleanup = Some(ctx.cleanup.clone());
        match tokio::time::timeout(options.scenario_timeout, (s.body)(ctx)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{e:#}")),
            Err(_) => failures.push(format!(
                "scenario did not finish within {:?}",
                options.scenario_timeout
            )),
        }
        // Invariants, whatever the body asked.
        match invariants::orphans(&client, &namespace).await {
            Ok(o) if !o.is_empty() => failures.push(format!("invariant: {}", o.join("; "))),
            Ok(_) => {}
            Err(e) => failures.push(format!("invariant check: list pods and PVCs: {e}")),
        }
        match invariants::unexpected_warnings(&client, &namespace, s.allowed_warnings).await {
            Ok(w) if !w.is_empty() => failures.push(format!("invariant: {}", w.join("; "))),
            Ok(_) => {}
            Err(e) => failures.push(format!("invariant check: list events: {e}")),
        }
        if let Err(e) = manager.check().await {
            failures.push(format!("invariant: {e}"));
        }
    }
    let failure = (!failures.is_empty()).then(|| failures.join("\n"));
    let verdict = ledger.classify(
        s.name,
        &plan.controller.version,
        plan.kubernetes,
        failure.as_deref(),
    );
    let diagnostics = if failure.is_some() || verdict.fails_run() {
        Some(collect(&client, &namespace, manager.log(), log_offset).await)
    } else {
        None
    };
    let mut cleanup_errors = match cleanup {
        Some(c) => c.unwind().await,
        None => vec![],
    };
    if let Err(e) = nss.delete(&namespace, &DeleteParams::background()).await {
        cleanup_errors.push(format!("delete namespace {namespace}: {e}"));
    }
    for e in cleanup_errors {
        tracing::warn!(scenario = s.name, "cleanup: {e}");
    }
    ScenarioResult {
        scenario: s.name.into(),
        suite: s.suite.into(),
        attempt,
        profile: profile.into(),
        outcome: Outcome::Judged(verdict),
        failure,
        seconds: t.elapsed().as_secs_f64(),
        diagnostics,
    }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planner_makes_one_cluster_per_profile_and_drops_gates_a_release_lacks() {
        let all = crate::suites::all();
        let k: KubeVersion = "1.32".parse().unwrap();
        let p = plan(
            &all,
            &Filter::default(),
            k,
            &"openkruise@v1.9.0".parse().unwrap(),
        );
        // default, in-place vertical scaling, recreate-VCT gate.
        assert_eq!(p.clusters.len(), 3, "{:#?}", p.clusters);
        let total: usize = p.clusters.iter().map(|c| c.scenarios.len()).sum();
        assert_eq!(total, all.len());
        let old = plan(
            &all,
            &Filter::default(),
            k,
            &"openkruise@v1.5.5".parse().unwrap(),
        );
        assert_eq!(
            old.clusters.len(),
            2,
            "without the gate the VCT scenarios share the default cluster"
        );
        assert!(old.clusters.iter().any(|c| !c.dropped_gates.is_empty()));
    }

    #[test]
    fn filters_select_by_suite_name_and_label() {
        let all = crate::suites::all();
        let f = Filter {
            labels: vec!["s5".into()],
            ..Default::default()
        };
        let picked: Vec<_> = all
            .iter()
            .filter(|s| f.selects(s))
            .map(|s| s.name)
            .collect();
        assert_eq!(
            picked,
            ["daemonset/advanced-daemonset-selector-is-immutable"]
        );
        let f = Filter {
            suites: vec!["cloneset".into()],
            skip: vec!["in-place".into()],
            ..Default::default()
        };
        assert_eq!(all.iter().filter(|s| f.selects(s)).count(), 2);
    }
}
