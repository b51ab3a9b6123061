//! Planning a run: [`plan`] groups the scenarios a [`Filter`] selects by the cluster profile
//! they need (one cluster per distinct profile, reused by all its scenarios) into a [`Plan`];
//! [`plan_upgrade`] plans qualification's upgrade check. No I/O: the executor
//! ([`super::execute`]) runs a plan.

use std::collections::BTreeMap;

use serde::Serialize;

use super::upstream;
use crate::cluster::Profile;
use crate::controller::ControllerRef;
use crate::scenario::Scenario;
use crate::toolchain::KubeVersion;

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
        (self.suites.is_empty() || self.suites.iter().any(|x| x == s.suite()))
            && (self.focus.is_empty() || self.focus.iter().any(|f| s.name.contains(f.as_str())))
            && !self.skip.iter().any(|f| s.name.contains(f.as_str()))
            && (self.labels.is_empty() || self.labels.iter().any(|l| s.has_label(l)))
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

impl PlannedCluster {
    /// Whether a scenario of `scenarios` it runs carries `label`.
    pub fn uses_label(&self, scenarios: &[Scenario], label: &str) -> bool {
        self.scenarios.iter().any(|name| {
            scenarios
                .iter()
                .any(|s| s.name == name.as_str() && s.has_label(label))
        })
    }
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
    /// For qualification: the controller upgrade scenarios replace it with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_to: Option<ControllerRef>,
    /// Clusters in start order.
    pub clusters: Vec<PlannedCluster>,
    /// Scenarios whose requirements the cell does not meet.
    pub skipped: Vec<Skip>,
    /// The controller's own end-to-end suite, run instead of scenarios (`--upstream-e2e`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<upstream::UpstreamSuite>,
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

/// The cluster a scenario needs: the scenario layout with its apiserver gates and the real
/// nodes it asks for (in `zone-a`).
fn cluster_profile(s: &Scenario, kubernetes: KubeVersion) -> Profile {
    let mut p = scenario_profile(kubernetes);
    p.feature_gates = s.requires.apiserver_gates.clone();
    p.set_real_nodes(s.requires.real_nodes, &["zone-a"], &BTreeMap::new())
        .expect("valid layout");
    p
}

/// The suffix of a profile's name that says it has real nodes.
pub const REAL_NODES_PROFILE: &str = "real-nodes";

/// The cluster profiles the scenarios need at `kubernetes` (one per set of apiserver gates),
/// named `default` or after their gates: what `kind-configs/` holds.
pub fn cluster_profiles(scenarios: &[Scenario], kubernetes: KubeVersion) -> Vec<Profile> {
    let mut by_gates: BTreeMap<String, Profile> = BTreeMap::new();
    for s in scenarios {
        // kind's nodes are all real; its configs describe the gates only.
        if s.requires.unmet(kubernetes).is_some() || s.requires.real_nodes > 0 {
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

impl Plan {
    /// The plan as `--dry-run` prints it: the cell and provider, each cluster with its gates
    /// and scenarios, then the skipped scenarios with their reasons.
    pub fn describe(&self, provider: &str) -> String {
        let mut f = String::new();
        let _ = self.write_to(&mut f, provider);
        f
    }

    fn write_to(&self, f: &mut String, provider: &str) -> std::fmt::Result {
        use std::fmt::Write;
        write!(
            f,
            "Kubernetes {}, {}, provider {provider}",
            self.kubernetes, self.controller
        )?;
        for c in &self.clusters {
            write!(
                f,
                "\ncluster {}: apiserver gates {:?}, controller gates {:?}, {} nodes",
                c.profile.name,
                c.profile.feature_gates,
                c.controller_gates,
                c.profile.nodes.len()
            )?;
            for d in &c.dropped_gates {
                write!(f, "\n  note: gate {d} left out")?;
            }
            for o in &c.profile.objects {
                write!(
                    f,
                    "\n  seeded before the controller: {} {}/{}",
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["namespace"].as_str().unwrap_or("-"),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                )?;
            }
            for s in &c.scenarios {
                write!(f, "\n  {s}")?;
            }
            if let Some(u) = &self.upstream {
                write!(
                    f,
                    "\n  the upstream e2e suite of {} (focus {:?}, skip {:?}, {} Ginkgo process{})",
                    u.from,
                    u.focus,
                    u.skip,
                    u.procs,
                    if u.procs == 1 { "" } else { "es" }
                )?;
            }
        }
        for s in &self.skipped {
            write!(f, "\nskip {}: {}", s.scenario, s.reason)?;
        }
        Ok(())
    }
}

impl Filter {
    /// Fails naming the known suites if a suite asked for does not exist.
    pub fn check_suites(&self, scenarios: &[Scenario]) -> Result<(), UnknownSuite> {
        // Each suite once, in catalog order (a suite's scenarios need not be adjacent).
        let mut known: Vec<&str> = vec![];
        for s in scenarios {
            if !known.contains(&s.suite()) {
                known.push(s.suite());
            }
        }
        match self.suites.iter().find(|s| !known.contains(&s.as_str())) {
            None => Ok(()),
            Some(s) => Err(UnknownSuite {
                suite: s.clone(),
                known: known.join(", "),
            }),
        }
    }
}

/// A suite asked for that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("use suite `{suite}`: there is no such suite; known: {known}")]
pub struct UnknownSuite {
    /// The suite asked for.
    pub suite: String,
    /// The suites there are.
    pub known: String,
}

/// Groups the selected scenarios by the profile they need.
pub fn plan(
    scenarios: &[Scenario],
    filter: &Filter,
    kubernetes: KubeVersion,
    controller: &ControllerRef,
) -> Plan {
    plan_with(scenarios, filter, kubernetes, controller, None)
}

/// The plan of qualification's upgrade check: only the scenarios that run across an upgrade,
/// each on a cluster of its own installed at `baseline`, upgraded to `candidate` by its body.
pub fn plan_upgrade(
    scenarios: &[Scenario],
    filter: &Filter,
    kubernetes: KubeVersion,
    baseline: &ControllerRef,
    candidate: &ControllerRef,
) -> Plan {
    plan_with(scenarios, filter, kubernetes, baseline, Some(candidate))
}

/// The controller gates `s` asks for that the controller has, and the ones it lacks (named).
fn controller_gates(
    s: &Scenario,
    controller: &dyn crate::controller::Controller,
) -> (BTreeMap<String, bool>, Vec<String>) {
    let mut gates = BTreeMap::new();
    let mut dropped = vec![];
    for (g, v) in &s.requires.controller_gates {
        if controller.has_gate(g) {
            gates.insert(g.clone(), *v);
        } else {
            dropped.push(format!("{g} (not in {})", controller.reference()));
        }
    }
    (gates, dropped)
}

fn plan_with(
    scenarios: &[Scenario],
    filter: &Filter,
    kubernetes: KubeVersion,
    controller: &ControllerRef,
    upgrade_to: Option<&ControllerRef>,
) -> Plan {
    let mut groups: Groups = BTreeMap::new();
    let mut skipped = vec![];
    let implementation = controller.controller();
    for s in scenarios.iter().filter(|s| filter.selects(s)) {
        match (s.requires.upgrade, upgrade_to.is_some()) {
            (false, true) => continue,
            // Upgrade scenarios are not part of a plain run; asked for by name, they say why.
            (true, false) if filter.suites.is_empty() && filter.focus.is_empty() => continue,
            (true, false) => {
                skipped.push(Skip {
                    scenario: s.name.to_string(),
                    suite: s.suite().into(),
                    reason: "runs across a controller upgrade: `harness qualify` runs it".into(),
                });
                continue;
            }
            _ => {}
        }
        if let Some(reason) = s
            .requires
            .unmet(kubernetes)
            .or_else(|| s.requires.unmet_controller(controller))
        {
            skipped.push(Skip {
                scenario: s.name.to_string(),
                suite: s.suite().into(),
                reason,
            });
            continue;
        }
        let (gates, dropped) = controller_gates(s, implementation.as_ref());
        let profile = cluster_profile(s, kubernetes);
        // An upgrade replaces the controller of the whole cluster: one cluster each.
        let own = if s.requires.upgrade { &s.name } else { "" };
        let key = (
            serde_json::to_string(&profile.feature_gates).expect("serializes"),
            serde_json::to_string(&gates).expect("serializes"),
            s.requires.real_nodes,
            own.to_string(),
        );
        let entry = groups.entry(key).or_insert_with(|| PlannedCluster {
            profile: profile.clone(),
            controller_gates: gates.clone(),
            dropped_gates: vec![],
            scenarios: vec![],
        });
        entry.scenarios.push(s.name.to_string());
        for d in dropped {
            if !entry.dropped_gates.contains(&d) {
                entry.dropped_gates.push(d);
            }
        }
    }
    let mut clusters = merge_gated(groups);
    for g in clusters.iter_mut() {
        let gates: Vec<&str> = g
            .profile
            .feature_gates
            .keys()
            .chain(g.controller_gates.keys())
            .map(String::as_str)
            .chain((!g.profile.real_nodes.is_empty()).then_some(REAL_NODES_PROFILE))
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
        upgrade_to: upgrade_to.cloned(),
        clusters,
        skipped,
        upstream: None,
    }
}

/// The planned clusters, keyed by (apiserver gates, controller gates, real nodes, own
/// cluster of an upgrade scenario).
type Groups = BTreeMap<(String, String, usize, String), PlannedCluster>;

/// Merges the clusters that ask for more than the default — controller gates turned on, real
/// nodes — but share their apiserver gates into one cluster each, with the union of those
/// controller gates and the most real nodes any of them asks for: every cluster costs a
/// bring-up (real nodes about 45 s), and a gate a scenario asks for is one it needs on, not
/// one the others need off. The default cluster (no gate, no real node) stays as it is, the
/// baseline a release ships; clusters whose gates disagree on a value, and an upgrade
/// scenario's own cluster, stay apart.
fn merge_gated(groups: Groups) -> Vec<PlannedCluster> {
    let mut out: Vec<(String, PlannedCluster)> = vec![];
    for ((apiserver, _, _, own), c) in groups {
        let baseline = c.profile.feature_gates.is_empty()
            && c.controller_gates.is_empty()
            && c.profile.real_nodes.is_empty();
        let into = (!baseline && own.is_empty())
            .then(|| {
                out.iter_mut().find(|(k, m)| {
                    *k == apiserver
                        && c.controller_gates
                            .iter()
                            .all(|(g, v)| m.controller_gates.get(g).is_none_or(|w| w == v))
                })
            })
            .flatten();
        match into {
            Some((_, m)) => {
                m.controller_gates.extend(c.controller_gates);
                for d in c.dropped_gates {
                    if !m.dropped_gates.contains(&d) {
                        m.dropped_gates.push(d);
                    }
                }
                if c.profile.real_nodes.len() > m.profile.real_nodes.len() {
                    m.profile.real_nodes = c.profile.real_nodes;
                }
                m.scenarios.extend(c.scenarios);
            }
            // A cluster that takes no other keeps a key no other matches.
            None if baseline || !own.is_empty() => out.push((format!("\0{}", out.len()), c)),
            None => out.push((apiserver, c)),
        }
    }
    out.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_suite_lists_each_suite_once() {
        let all = crate::suites::all();
        let filter = Filter {
            suites: vec!["clonest".into()],
            ..Filter::default()
        };
        let err = filter.check_suites(&all).unwrap_err();
        let known: Vec<&str> = err.known.split(", ").collect();
        let mut unique = known.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(known.len(), unique.len(), "{}", err.known);
        assert!(known.contains(&"cloneset") && known.contains(&"uniteddeployment"));
    }

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
        // The default cluster, and one cluster per set of apiserver gates for everything that
        // asks for more: controller gates (recreate-VCT, SidecarSet pod metadata,
        // PodUnavailableBudget, ResourceDistribution, ImagePullJob, PodProbeMarker), real nodes,
        // and in-place resize (its apiserver gate, with and without the controller's gate).
        let names: Vec<&str> = p.clusters.iter().map(|c| c.profile.name.as_str()).collect();
        assert_eq!(p.clusters.len(), 3, "{names:#?}");
        assert!(names.contains(&"default"), "{names:?}");
        let default = p
            .clusters
            .iter()
            .find(|c| c.profile.name == "default")
            .unwrap();
        assert!(default.controller_gates.is_empty() && default.profile.real_nodes.is_empty());
        for c in p.clusters.iter().filter(|c| c.profile.name != "default") {
            assert!(
                c.profile.name.ends_with(REAL_NODES_PROFILE),
                "{}",
                c.profile.name
            );
            assert_eq!(c.profile.real_nodes.len(), 1);
            // Each scenario has what it asked for: its gates on, and a real node if it needs one.
            for name in &c.scenarios {
                let s = all.iter().find(|a| a.name == name.as_str()).unwrap();
                assert_eq!(
                    s.requires.apiserver_gates, c.profile.feature_gates,
                    "{name}"
                );
                for (g, v) in &s.requires.controller_gates {
                    assert_eq!(c.controller_gates.get(g), Some(v), "{name}: {g}");
                }
            }
        }
        let gated = p
            .clusters
            .iter()
            .find(|c| c.profile.feature_gates.is_empty() && c.profile.name != "default")
            .unwrap();
        assert!(gated.controller_gates.contains_key("ImagePullJobGate"));
        assert!(
            gated
                .controller_gates
                .contains_key("ResourceDistributionGate")
        );
        let total: usize = p.clusters.iter().map(|c| c.scenarios.len()).sum();
        let upgrades = all.iter().filter(|s| s.requires.upgrade).count();
        assert!(upgrades >= 1);
        assert_eq!(
            total,
            all.len() - upgrades,
            "upgrade scenarios are qualify's"
        );
        assert!(p.skipped.is_empty());
        let old = plan(
            &all,
            &Filter::default(),
            k,
            &"openkruise@v1.5.5".parse().unwrap(),
        );
        assert_eq!(
            old.clusters.len(),
            3,
            "the same three clusters, less the gates the release lacks"
        );
        assert!(old.clusters.iter().any(|c| !c.dropped_gates.is_empty()));
    }

    #[test]
    fn upgrade_plans_hold_only_upgrade_scenarios_each_on_its_own_cluster() {
        let all = crate::suites::all();
        let k: KubeVersion = "1.32".parse().unwrap();
        let (from, to) = (
            "openkruise@v1.7.0".parse().unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
        );
        let p = plan_upgrade(&all, &Filter::default(), k, &from, &to);
        assert_eq!(p.upgrade_to, Some(to.clone()));
        let upgrades: Vec<&str> = all
            .iter()
            .filter(|s| s.requires.upgrade)
            .map(|s| s.name.as_ref())
            .collect();
        assert_eq!(p.clusters.len(), upgrades.len());
        for c in &p.clusters {
            assert_eq!(c.scenarios.len(), 1);
            assert!(upgrades.contains(&c.scenarios[0].as_str()));
        }
        // Asked for by suite in a plain run, they are skipped with the reason.
        let f = Filter {
            suites: vec!["upgrade".into()],
            ..Default::default()
        };
        let plain = plan(&all, &f, k, &from);
        assert!(plain.clusters.is_empty());
        assert!(plain.skipped[0].reason.contains("harness qualify"));
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
            .map(|s| s.name.as_ref())
            .collect();
        // S5 exists twice: as Rust and as the declarative (chainsaw) test.
        assert_eq!(
            picked,
            [
                "daemonset/advanced-daemonset-selector-is-immutable",
                "daemonset/advanced-daemonset-selector-is-immutable-yaml"
            ]
        );
        let f = Filter {
            suites: vec!["cloneset".into()],
            skip: vec!["in-place".into()],
            ..Default::default()
        };
        let cloneset = all.iter().filter(|s| s.suite() == "cloneset");
        let in_place = all
            .iter()
            .filter(|s| s.suite() == "cloneset" && s.name.contains("in-place"));
        assert!(in_place.clone().count() >= 1);
        assert_eq!(
            all.iter().filter(|s| f.selects(s)).count(),
            cloneset.count() - in_place.count()
        );
    }
}
