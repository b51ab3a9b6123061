//! The files of a run: start with [`Files`], the reporter that writes `report.json` (a
//! [`JsonReport`]), `junit.xml` and `report.html` into `reports/<run-id>/`, each atomically
//! ([`atomic_write`]) after every finished scenario.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::terminal::counts;
use super::{Key, Terminal, class_of, coverage_of, html, junit, key, timeline};
use crate::results::ScenarioResult;
use crate::run::{Event, Plan, Reporter};
use crate::scenario::coverage::{ApiFields, Coverage};

/// The machine-readable report (`report.json`).
#[derive(Debug, Clone, Serialize)]
pub struct JsonReport {
    /// Run id.
    pub run_id: String,
    /// The plan.
    pub plan: Option<Plan>,
    /// Whether the run has finished.
    pub finished: bool,
    /// Seconds, once finished.
    pub seconds: Option<f64>,
    /// Counts by result.
    pub counts: BTreeMap<&'static str, usize>,
    /// Every result, ordered by suite, scenario, attempt.
    pub results: Vec<ScenarioResult>,
    /// Log files of clusters kept after a failure, by profile, relative to the run directory.
    pub cluster_logs: BTreeMap<String, Vec<String>>,
    /// Seconds each cluster took to come up with its controller, by profile (the costs a
    /// sharded matrix is split by).
    pub clusters: BTreeMap<String, f64>,
    /// API field coverage, once the controller's CRDs are known.
    pub coverage: Option<Coverage>,
    /// Where the time went: each cluster's bring-up and each scenario, by cluster.
    pub timeline: Vec<timeline::Bar>,
}

/// Writes `report.json`, `junit.xml` and `report.html` into a run directory.
#[derive(Debug)]
pub struct Files {
    dir: PathBuf,
    run_id: String,
    plan: Option<Plan>,
    results: BTreeMap<Key, ScenarioResult>,
    seconds: Option<f64>,
    cluster_logs: BTreeMap<String, Vec<String>>,
    clusters: BTreeMap<String, f64>,
    api_fields: Option<Vec<ApiFields>>,
    /// When the run started, as this reporter heard it.
    clock: Option<std::time::Instant>,
    /// When each cluster started coming up (seconds into the run).
    cluster_started: BTreeMap<String, f64>,
    timeline: Vec<timeline::Bar>,
}

/// The reporters of a run: the terminal, and the files of `run_id` under `root` (see
/// [`Files::new`]); with the run's directory.
pub fn standard(root: &Path, run_id: &str) -> anyhow::Result<(PathBuf, Vec<Box<dyn Reporter>>)> {
    let files = Files::new(root, run_id)
        .with_context(|| format!("create the report directory in {}", root.display()))?;
    let dir = files.dir().to_path_buf();
    Ok((dir, vec![Box::new(Terminal::default()), Box::new(files)]))
}

impl Files {
    /// Reports for `run_id` under `root/<run_id>/`, and `root/latest` pointing at it.
    pub fn new(root: &Path, run_id: &str) -> std::io::Result<Self> {
        let dir = root.join(run_id);
        std::fs::create_dir_all(&dir)?;
        let latest = root.join("latest");
        let tmp = root.join(format!(".latest-{run_id}"));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(run_id, &tmp)?;
        std::fs::rename(&tmp, &latest)?;
        Ok(Self {
            dir,
            run_id: run_id.into(),
            plan: None,
            results: BTreeMap::new(),
            seconds: None,
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            api_fields: None,
            clock: None,
            cluster_started: BTreeMap::new(),
            timeline: vec![],
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The JSON report as it stands.
    pub fn json(&self) -> JsonReport {
        JsonReport {
            run_id: self.run_id.clone(),
            plan: self.plan.clone(),
            finished: self.seconds.is_some(),
            seconds: self.seconds,
            counts: counts(self.results.values()),
            results: self.results.values().cloned().collect(),
            cluster_logs: self.cluster_logs.clone(),
            clusters: self.clusters.clone(),
            coverage: self
                .api_fields
                .as_ref()
                .map(|f| coverage_of(f, self.results.values())),
            timeline: self.timeline.clone(),
        }
    }

    /// Seconds since the run started (0 before).
    fn now(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.elapsed().as_secs_f64())
    }

    /// Records the log files under `dir` (relative to the run directory when inside it).
    fn add_cluster_logs(&mut self, profile: &str, dir: &Path) {
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| {
                        let p = e.path();
                        p.strip_prefix(&self.dir)
                            .unwrap_or(&p)
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        self.cluster_logs
            .entry(profile.to_string())
            .or_default()
            .extend(files);
    }

    fn write_all(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(&self.json()).expect("report serializes");
        atomic_write(&self.dir.join("report.json"), &json)?;
        atomic_write(
            &self.dir.join("junit.xml"),
            junit(&self.run_id, self.results.values()).as_bytes(),
        )?;
        atomic_write(&self.dir.join("report.html"), html(&self.json()).as_bytes())
    }
}

impl Reporter for Files {
    fn event(&mut self, e: &Event) {
        match e {
            Event::RunStarted { plan, .. } => {
                self.plan = Some(plan.clone());
                self.clock = Some(std::time::Instant::now());
            }
            Event::ScenarioFinished(r) => {
                if r.seconds > 0.0 {
                    self.timeline.push(timeline::Bar {
                        lane: r.profile.clone(),
                        label: r.scenario.clone(),
                        start: (self.now() - r.seconds).max(0.0),
                        seconds: r.seconds,
                        class: class_of(&r.outcome).into(),
                    });
                }
                self.results.insert(key(r), r.clone());
            }
            Event::RunFinished { seconds } => self.seconds = Some(*seconds),
            Event::ClusterLogs { profile, dir } => self.add_cluster_logs(profile, dir),
            Event::ApiFields(fields) => self.api_fields = Some(fields.clone()),
            Event::ClusterReady { profile, seconds } => {
                self.clusters.insert(profile.clone(), *seconds);
                let start = self
                    .cluster_started
                    .get(profile)
                    .copied()
                    .unwrap_or_else(|| (self.now() - seconds).max(0.0));
                self.timeline.push(timeline::Bar {
                    lane: profile.clone(),
                    label: "bring-up".into(),
                    start,
                    seconds: *seconds,
                    class: timeline::BRING_UP.into(),
                });
            }
            Event::ClusterStarting { profile } => {
                let now = self.now();
                self.cluster_started.insert(profile.clone(), now);
                return;
            }
            Event::ScenarioStarted { .. }
            | Event::ScenarioRetrying { .. }
            | Event::UpstreamAreas { .. } => return,
        }
        if let Err(err) = self.write_all() {
            eprintln!("warning: write reports in {}: {err}", self.dir.display());
        }
    }
}

/// Writes `body` to `path` through a temporary file renamed into place, so a reader (or a
/// crash) never sees half a file.
pub fn atomic_write(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::coverage_table;
    use crate::report::fixtures::result;
    use crate::results::{Outcome, Verdict};
    use crate::scenario::record::Sends;

    #[test]
    fn coverage_is_computed_from_the_api_fields_and_what_every_result_sent() {
        use crate::scenario::record::{Sent, Verb};
        let crd = serde_json::json!({"spec": {"group": "apps.kruise.io",
            "names": {"kind": "CloneSet"}, "versions": [{"name": "v1alpha1", "served": true,
            "storage": true, "schema": {"openAPIV3Schema": {"properties": {"spec": {
                "type": "object", "properties": {"replicas": {"type": "integer"},
                "paused": {"type": "boolean"}, "minReadySeconds": {"type": "integer"},
                "template": {"x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
        let sent = |paths: serde_json::Value| {
            let body = serde_json::json!({"spec": paths});
            Sends::of(&[Sent::of_object(
                "apps.kruise.io/v1alpha1",
                "CloneSet",
                Verb::Create,
                &body,
            )])
        };
        let mut a = result("a", Outcome::Judged(Verdict::Pass), None);
        a.sent = sent(serde_json::json!({"replicas": 1, "template": {"spec": {"x": 1}}}));
        let mut b = result("b", Outcome::Judged(Verdict::Pass), None);
        b.sent = sent(serde_json::json!({"paused": true}));
        let root = tempfile::tempdir().unwrap();
        let mut files = Files::new(root.path(), "r").unwrap();
        files.event(&Event::ApiFields(ApiFields::of_crd(&crd)));
        files.event(&Event::ScenarioFinished(a));
        files.event(&Event::ScenarioFinished(b));
        let c = files.json().coverage.unwrap();
        let k = c.kind("CloneSet").unwrap();
        assert_eq!(k.covered.len(), 3);
        assert_eq!(
            k.uncovered.iter().collect::<Vec<_>>(),
            ["spec.minReadySeconds"]
        );
        assert_eq!(k.writes, 2);
        let page = std::fs::read_to_string(files.dir().join("report.html")).unwrap();
        assert!(page.contains("<table id=\"coverage\">"), "{page}");
        assert!(
            page.contains("<td>3/4</td><td><span class=\"cbar\"><span style=\"width:75%\"></span></span> 75%</td>"),
            "{page}"
        );
        assert!(page.contains("<li><code>spec.minReadySeconds</code></li>"));
        assert!(
            page.contains("<li><code>spec.x</code></li>"),
            "template internals listed"
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(files.dir().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(json["coverage"]["kinds"][0]["kind"], "CloneSet");
        assert_eq!(
            json["results"][0]["sent"]["apps.kruise.io/v1alpha1/CloneSet"]["writes"],
            1
        );
        let table = coverage_table(&c);
        assert!(table.contains("apps.kruise.io/CloneSet"), "{table}");
        assert!(table.contains("3/4"), "{table}");
    }

    #[test]
    fn the_page_leads_with_a_summary_strip_what_needs_a_look_and_a_timeline() {
        let root = tempfile::tempdir().unwrap();
        let mut files = Files::new(root.path(), "r").unwrap();
        let plan = crate::run::plan::plan(
            &[],
            &Default::default(),
            crate::toolchain::KubeVersion::default_version(),
            &crate::controller::ControllerRef::default_ref(),
        );
        files.event(&Event::RunStarted {
            run_id: "r".into(),
            plan,
        });
        files.event(&Event::ClusterStarting {
            profile: "default".into(),
        });
        files.event(&Event::ClusterReady {
            profile: "default".into(),
            seconds: 0.0,
        });
        let mut other = result("c", Outcome::Judged(Verdict::Pass), None);
        other.suite = "t".into();
        for r in [
            result("a", Outcome::Judged(Verdict::Pass), None),
            result(
                "b",
                Outcome::Judged(Verdict::Fail),
                Some("boom\nsecond line"),
            ),
            other,
        ] {
            files.event(&Event::ScenarioFinished(r));
        }
        files.event(&Event::RunFinished { seconds: 3.0 });
        let page = std::fs::read_to_string(files.dir().join("report.html")).unwrap();
        // The strip: a segment per class present, what needs a look first.
        assert!(
            page.contains("title=\"1 failed\">1 failed</span>"),
            "{page}"
        );
        assert!(
            page.contains("title=\"2 passed\">2 passed</span>"),
            "{page}"
        );
        assert!(
            !page.contains("1 flaky"),
            "no segment for a class with no result"
        );
        let look = &page[page.find("id=\"attention\"").unwrap()..];
        assert!(
            look.starts_with("id=\"attention\"><li class=\"fail\"><a href=\"#d1\">b</a> <span class=\"res\">FAIL</span> boom</li></ul>"),
            "{look}"
        );
        assert!(page.find("id=\"attention\"") < page.find("id=\"results\""));
        // Filters: a suite option per suite, rows tagged for them.
        assert!(
            page.contains("<option>s</option><option>t</option>"),
            "{page}"
        );
        assert!(page.contains("<tr class=\"fail\" data-result=\"fail\" data-suite=\"s\">"));
        assert!(page.contains("<div id=\"filters\" hidden>"));
        // The timeline: the bring-up and the three scenarios on the cluster's lane.
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(files.dir().join("report.json")).unwrap())
                .unwrap();
        let bars = json["timeline"].as_array().unwrap();
        assert_eq!(bars.len(), 4, "{bars:?}");
        assert_eq!(bars[0]["label"], "bring-up");
        assert_eq!(bars[2]["class"], "fail");
        assert!(bars.iter().all(|b| b["lane"] == "default"));
        assert_eq!(page.matches("<rect ").count(), 4);
        assert!(page.contains("<title>b — default — 1.5 s from"), "{page}");
        // The failure says how to run it alone again.
        let again = format!(
            "<h4>Run it again</h4><pre class=\"again\">harness run --k8s {} --controller {} --focus b</pre>",
            crate::toolchain::KubeVersion::default_version(),
            crate::controller::ControllerRef::default_ref()
        );
        assert!(page.contains(&again), "{page}");
    }

    #[test]
    fn exported_cluster_logs_are_linked_from_the_failures_of_their_profile() {
        let root = tempfile::tempdir().unwrap();
        let mut files = Files::new(root.path(), "r").unwrap();
        let logs = files.dir().join("cluster-logs").join("r-0");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("kube-apiserver.log"), "started").unwrap();
        let failed = result("b", Outcome::Judged(Verdict::Fail), Some("boom"));
        files.event(&Event::ScenarioFinished(failed.clone()));
        files.event(&Event::ClusterLogs {
            profile: failed.profile.clone(),
            dir: logs,
        });
        let dir = files.dir().to_path_buf();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        assert_eq!(
            json["cluster_logs"][&failed.profile][0],
            "cluster-logs/r-0/kube-apiserver.log"
        );
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(
            html.contains("<a href=\"cluster-logs/r-0/kube-apiserver.log\">kube-apiserver.log</a>"),
            "{html}"
        );
    }
}
