//! Expected costs: how long scenarios and cluster bring-ups take, from an earlier run's report
//! or estimates. Start with [`Costs`]; a run orders its clusters and scenarios longest first by
//! them, and a sharded matrix splits its cells by them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Plan;

/// Seconds a cluster takes to come up with its controller, when no report says.
pub const DEFAULT_BRING_UP: f64 = 30.0;
/// Seconds a scenario takes, when no report says.
pub const DEFAULT_SCENARIO: f64 = 5.0;
/// Seconds OpenKruise's own e2e suite takes on a cell, when no report times its specs (a
/// rough hour: a full v1.9.0 suite is some 300 specs of seconds to minutes each).
pub const DEFAULT_UPSTREAM: f64 = 3600.0;

/// Expected seconds of scenarios and cluster bring-ups: medians measured in an earlier run's
/// report, defaults ([`DEFAULT_SCENARIO`], [`DEFAULT_BRING_UP`]) for what it did not run.
#[derive(Debug, Clone, Default)]
pub struct Costs {
    scenarios: BTreeMap<String, f64>,
    bring_up: BTreeMap<String, f64>,
    /// Where the figures come from (`None`: defaults only).
    pub source: Option<PathBuf>,
}

/// A report that cannot give costs.
#[derive(Debug, thiserror::Error)]
#[error("read costs from {}: {detail}", path.display())]
pub struct CostsError {
    path: PathBuf,
    detail: String,
}

#[derive(Deserialize)]
struct TimedResult {
    scenario: String,
    seconds: f64,
    outcome: serde_json::Value,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Costs {
    /// Defaults only.
    pub fn estimate() -> Self {
        Self::default()
    }

    /// Medians from a run's `report.json` or a matrix's `matrix.json` (and the `report.json`
    /// of each of its cells, for bring-up times).
    pub fn load(path: &Path) -> Result<Self, CostsError> {
        let err = |detail: String| CostsError {
            path: path.into(),
            detail,
        };
        let read = |p: &Path| -> Result<serde_json::Value, String> {
            let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", p.display()))
        };
        let top = read(path).map_err(err)?;
        let mut reports = vec![];
        if let Some(cells) = top["cells"].as_array() {
            let dir = path.parent().unwrap_or(Path::new("."));
            for c in cells {
                let results = c["results"].clone();
                let cell_report = c["dir"]
                    .as_str()
                    .and_then(|d| read(&dir.join(d).join("report.json")).ok());
                let clusters = cell_report
                    .map(|r| r["clusters"].clone())
                    .unwrap_or_default();
                reports.push((results, clusters));
            }
        } else if top["results"].is_array() {
            reports.push((top["results"].clone(), top["clusters"].clone()));
        } else {
            return Err(err(
                "neither a run's report.json nor a matrix's matrix.json".into(),
            ));
        }
        let mut scenarios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut bring_up: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (results, clusters) in reports {
            let results: Vec<TimedResult> = serde_json::from_value(results)
                .map_err(|e| err(format!("its results do not parse: {e}")))?;
            for r in results {
                // Skipped and unrun results took no time worth counting.
                if r.outcome["result"] == "judged" || r.outcome["result"] == "flaky" {
                    scenarios.entry(r.scenario).or_default().push(r.seconds);
                }
            }
            for (profile, s) in clusters.as_object().into_iter().flatten() {
                if let Some(s) = s.as_f64() {
                    bring_up.entry(profile.clone()).or_default().push(s);
                }
            }
        }
        Ok(Self {
            scenarios: scenarios.into_iter().map(|(k, v)| (k, median(v))).collect(),
            bring_up: bring_up.into_iter().map(|(k, v)| (k, median(v))).collect(),
            source: Some(path.into()),
        })
    }

    /// Expected seconds of `scenario`.
    pub fn scenario(&self, scenario: &str) -> f64 {
        self.scenarios
            .get(scenario)
            .copied()
            .unwrap_or(DEFAULT_SCENARIO)
    }

    /// Expected seconds of bringing up a cluster of `profile` with its controller.
    pub fn bring_up(&self, profile: &str) -> f64 {
        self.bring_up
            .get(profile)
            .copied()
            .unwrap_or(DEFAULT_BRING_UP)
    }

    /// Expected seconds of an upstream suite run: the sum of the spec times a report gave
    /// (specs run one after another; a matrix's medians are per spec over its cells), else
    /// [`DEFAULT_UPSTREAM`].
    pub fn upstream(&self) -> f64 {
        let prefix = format!("{}/", super::upstream::SUITE);
        let known: Vec<f64> = self
            .scenarios
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, s)| *s)
            .collect();
        if known.is_empty() {
            DEFAULT_UPSTREAM
        } else {
            known.iter().sum()
        }
    }

    /// Expected wall seconds of `plan`, its clusters one after another, `parallel` scenarios
    /// at once in each: bring-up plus the longer of its longest scenario and its scenario time
    /// shared over `parallel`; and for an upstream suite run, [`Costs::upstream`] shared over
    /// its Ginkgo processes.
    pub fn plan(&self, plan: &Plan, parallel: usize) -> f64 {
        let suite = match &plan.upstream {
            // Parallel processes share the specs (Serial ones aside, which this ignores).
            Some(u) => self.upstream() / u.procs.max(1) as f64,
            None => 0.0,
        };
        suite
            + plan
                .clusters
                .iter()
                .map(|c| self.cluster(c, parallel))
                .sum::<f64>()
    }
}

impl Costs {
    /// Expected seconds of one cluster: its bring-up, then its scenarios `parallel` at a time
    /// (no less than its longest scenario).
    pub fn cluster(&self, c: &super::PlannedCluster, parallel: usize) -> f64 {
        let times: Vec<f64> = c.scenarios.iter().map(|s| self.scenario(s)).collect();
        let longest = times.iter().copied().fold(0.0, f64::max);
        let shared = times.iter().sum::<f64>() / parallel.max(1) as f64;
        self.bring_up(&c.profile.name) + longest.max(shared)
    }

    /// `plan` balanced for `lanes` clusters at a time: a cluster expected to take longer than
    /// a lane's share of the whole (the total over `lanes`) is split into as many clusters of
    /// its profile as bring each near that share (at most `lanes`), its scenarios dealt
    /// longest first to the part expected to finish first; the parts are named
    /// `<profile>-2`, `<profile>-3`, ... A cluster that holds most of the work then no longer
    /// runs alone while the other lanes idle. An upstream suite's plan is left as it is.
    pub fn balance(&self, plan: &Plan, parallel: usize, lanes: usize) -> Plan {
        if plan.upstream.is_some() || lanes < 2 {
            return plan.clone();
        }
        let total: f64 = plan
            .clusters
            .iter()
            .map(|c| self.cluster(c, parallel))
            .sum();
        let share = total / lanes as f64;
        let mut clusters = vec![];
        for c in &plan.clusters {
            let cost = self.cluster(c, parallel);
            let parts = ((cost / share).ceil() as usize)
                .clamp(1, lanes)
                .min(c.scenarios.len().max(1));
            if parts < 2 {
                clusters.push(c.clone());
                continue;
            }
            let mut order = c.scenarios.clone();
            order.sort_by(|a, b| self.scenario(b).total_cmp(&self.scenario(a)));
            let mut dealt: Vec<(f64, Vec<String>)> = vec![(0.0, vec![]); parts];
            for s in order {
                let least = (0..parts)
                    .min_by(|a, b| dealt[*a].0.total_cmp(&dealt[*b].0))
                    .expect("at least two parts");
                dealt[least].0 += self.scenario(&s);
                dealt[least].1.push(s);
            }
            for (i, (_, scenarios)) in dealt.into_iter().enumerate() {
                let mut part = c.clone();
                part.scenarios = scenarios;
                if i > 0 {
                    part.profile.name = format!("{}-{}", c.profile.name, i + 1);
                }
                clusters.push(part);
            }
        }
        Plan {
            clusters,
            ..plan.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_with_most_of_the_work_is_split_to_keep_every_lane_busy() {
        let all = crate::suites::all();
        let k = crate::toolchain::KubeVersion::default_version();
        let controller: crate::controller::ControllerRef = "openkruise@v1.9.0".parse().unwrap();
        let plan = super::super::plan::plan(&all, &Default::default(), k, &controller);
        let costs = Costs::estimate();
        let default = |p: &Plan| -> usize {
            p.clusters
                .iter()
                .filter(|c| c.profile.name.starts_with("default"))
                .count()
        };
        assert_eq!(default(&plan), 1);
        let two = costs.balance(&plan, 4, 2);
        assert_eq!(
            default(&two),
            2,
            "the default cluster holds most of the catalog"
        );
        let names: Vec<&str> = two
            .clusters
            .iter()
            .map(|c| c.profile.name.as_str())
            .collect();
        assert!(names.contains(&"default-2"), "{names:?}");
        // Every scenario still runs, once, on a cluster of its profile.
        let count = |p: &Plan| p.clusters.iter().map(|c| c.scenarios.len()).sum::<usize>();
        assert_eq!(count(&two), count(&plan));
        let halves: Vec<f64> = two
            .clusters
            .iter()
            .filter(|c| c.profile.name.starts_with("default"))
            .map(|c| costs.cluster(c, 4))
            .collect();
        assert!(
            (halves[0] - halves[1]).abs() <= DEFAULT_SCENARIO,
            "{halves:?}"
        );
        // One lane: nothing to balance.
        assert_eq!(
            costs.balance(&plan, 4, 1).clusters.len(),
            plan.clusters.len()
        );
    }

    #[test]
    fn costs_fall_back_to_defaults_and_take_medians_from_a_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(
            &path,
            serde_json::json!({
                "results": [
                    {"scenario": "a/x", "seconds": 2.0, "outcome": {"result": "judged", "kind": "pass"}},
                    {"scenario": "a/x", "seconds": 4.0, "outcome": {"result": "judged", "kind": "pass"}},
                    {"scenario": "a/x", "seconds": 9.0, "outcome": {"result": "judged", "kind": "fail"}},
                    {"scenario": "a/y", "seconds": 0.0, "outcome": {"result": "skipped", "reason": "r"}},
                ],
                "clusters": {"default": 12.5}
            })
            .to_string(),
        )
        .unwrap();
        let c = Costs::load(&path).unwrap();
        assert_eq!(c.scenario("a/x"), 4.0);
        assert_eq!(c.scenario("a/y"), DEFAULT_SCENARIO, "skips do not count");
        assert_eq!(c.bring_up("default"), 12.5);
        assert_eq!(c.bring_up("other"), DEFAULT_BRING_UP);
        assert_eq!(c.upstream(), DEFAULT_UPSTREAM, "no spec was timed");
        std::fs::write(&path, "{}").unwrap();
        let e = Costs::load(&path).unwrap_err().to_string();
        assert!(e.contains("neither a run's report.json"), "{e}");
    }

    #[test]
    fn an_upstream_run_costs_its_cluster_and_its_timed_specs_shared_by_its_processes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let pass = serde_json::json!({"result": "judged", "kind": "pass"});
        std::fs::write(
            &path,
            serde_json::json!({
                "results": [
                    {"scenario": "upstream/A spec", "seconds": 10.0, "outcome": pass},
                    {"scenario": "upstream/B spec", "seconds": 20.0, "outcome": pass},
                    {"scenario": "upstream/C spec", "seconds": 0.0,
                     "outcome": {"result": "skipped", "reason": "needs the node daemon"}},
                    {"scenario": "cloneset/x", "seconds": 99.0, "outcome": pass},
                ],
                "clusters": {"upstream": 12.5}
            })
            .to_string(),
        )
        .unwrap();
        let c = Costs::load(&path).unwrap();
        assert_eq!(c.upstream(), 30.0);
        let controller: crate::controller::ControllerRef = "openkruise@v1.9.0".parse().unwrap();
        let suite = crate::run::upstream::Choice::default().suite(&controller);
        let plan = crate::run::upstream::plan(
            crate::toolchain::versions::KubeVersion::default_version(),
            &controller,
            suite,
            vec![],
        );
        assert_eq!(c.plan(&plan, 4), 12.5 + 30.0);
        assert_eq!(
            Costs::estimate().plan(&plan, 4),
            DEFAULT_BRING_UP + DEFAULT_UPSTREAM
        );
        // Parallel Ginkgo processes share the specs.
        let mut parallel = plan.clone();
        parallel.upstream.as_mut().unwrap().procs = 3;
        assert_eq!(c.plan(&parallel, 4), 12.5 + 10.0);
    }
}
