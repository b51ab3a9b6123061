//! What the harness does with a controller's own Ginkgo suite, shown on a small fixture suite
//! (`fixtures/ginkgo-suite`) instead of a controller's, so that each path is seen every time
//! and none depends on how a real suite races its cluster: a suite that reports (in one
//! process and under the `ginkgo` command in several), one whose process crashes at start,
//! one stopped while a spec runs, and one that ignores the stop. Builds the fixture and the
//! `ginkgo` command with Go (Ginkgo from the Go module proxy); needs no cluster.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use harness::results::ScenarioResult;
use harness::results::{Outcome, Verdict};
use harness::run::ginkgo;
use harness::run::ginkgo::Spec;
use harness::run::upstream::{self, SuiteRun, UpstreamSuite};

/// The fixture's module directory.
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ginkgo-suite")
}

/// The fixture suite's test binary and the `ginkgo` command, built once per test process.
fn built() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ginkgo-fixture");
        std::fs::create_dir_all(&dir).unwrap();
        let (suite, ginkgo) = (dir.join("fixture.test"), dir.join("ginkgo"));
        for args in [
            vec!["test", "-c", "-o", suite.to_str().unwrap(), "."],
            vec![
                "build",
                "-o",
                ginkgo.to_str().unwrap(),
                "github.com/onsi/ginkgo/v2/ginkgo",
            ],
        ] {
            let out = std::process::Command::new("go")
                .args(&args)
                .current_dir(fixture())
                .output()
                .unwrap_or_else(|e| panic!("go is needed to build the fixture suite: {e}"));
            assert!(
                out.status.success(),
                "go {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        (suite, ginkgo)
    })
}

/// One fixture run: its work directory (the markers directory inside it), the run and the
/// specs the dry run planned.
struct Ran {
    work: tempfile::TempDir,
    run: SuiteRun,
    planned: Vec<Spec>,
}

impl Ran {
    /// The results the harness makes of it: from the report, or salvaged without one.
    fn results(&self) -> Vec<ScenarioResult> {
        let judge = |_: &str, failure: Option<&str>| {
            Outcome::Judged(if failure.is_some() {
                Verdict::Fail
            } else {
                Verdict::Pass
            })
        };
        match &self.run.report {
            Some(report) => upstream::results(report, "upstream", judge).unwrap(),
            None => upstream::salvaged(&self.run, &self.planned, "upstream", judge),
        }
    }

    /// Its output.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.run.log).unwrap_or_default()
    }
}

/// Runs the fixture in `procs` processes with `env`; with `stop_when`, the run is stopped (as
/// a user's Ctrl-C would) once that many specs that block (`passes`, `waits`) have started,
/// given `grace` to end.
fn run(procs: usize, env: &[(&str, &str)], stop_when: Option<usize>, grace: Duration) -> Ran {
    let (binary, ginkgo_cli) = built();
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let suite = UpstreamSuite {
        from: "openkruise@v1.9.0".parse().unwrap(),
        focus: vec![],
        skip: vec![],
        procs,
    };
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("FIXTURE_MARKERS".into(), markers.display().to_string()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (run, planned) = rt.block_on(async {
        let planned = upstream::planned(binary, &suite, work.path())
            .await
            .unwrap();
        let stop = async {
            match stop_when {
                Some(count) => loop {
                    if blocked(&markers).len() >= count {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                },
                None => std::future::pending().await,
            }
        };
        let run = upstream::run(
            binary,
            (procs > 1).then_some(ginkgo_cli.as_path()),
            &suite,
            Path::new("/nonexistent/kubeconfig"),
            Path::new("/nonexistent"),
            &env,
            work.path(),
            stop,
            grace,
        )
        .await
        .unwrap();
        (run, planned)
    });
    Ran { work, run, planned }
}

/// The specs that block until stopped and have started, by their markers (`passes.1`).
fn blocked(markers: &Path) -> Vec<String> {
    std::fs::read_dir(markers)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("passes.") || n.starts_with("waits."))
                .collect()
        })
        .unwrap_or_default()
}

/// Each result's name and outcome label, sorted.
fn labels(results: &[ScenarioResult]) -> Vec<(String, &'static str)> {
    let mut l: Vec<(String, &'static str)> = results
        .iter()
        .map(|r| (r.scenario.clone(), r.outcome.label()))
        .collect();
    l.sort();
    l
}

/// The processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(dir.as_ref()))
        .collect()
}

#[test]
fn a_suite_that_reports_is_read_from_its_report_in_one_process_and_in_several() {
    for procs in [1, 2] {
        let ran = run(procs, &[], None, upstream::STOP_GRACE);
        assert!(ran.run.report.is_some(), "{procs}: {}", ran.log());
        assert_eq!(
            labels(&ran.results()),
            [
                ("upstream/Fixture fails".to_string(), "FAIL"),
                ("upstream/Fixture passes".to_string(), "pass"),
                ("upstream/Fixture waits until stopped".to_string(), "pass"),
            ],
            "{procs}"
        );
        // Nothing nested under the work directory but the report, the log, the command's
        // link and the markers.
        for e in std::fs::read_dir(ran.work.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                [
                    "ginkgo-report.json",
                    "ginkgo-dry-run.json",
                    "upstream-e2e.log",
                    "fixture.test",
                    "markers"
                ]
                .contains(&name.as_str()),
                "{procs}: {name} left in the work directory"
            );
        }
        assert_eq!(ran.planned.len(), 3);
    }
}

#[test]
fn a_process_that_crashes_at_start_is_a_result_with_its_log_and_loses_no_spec_seen() {
    // In one process the spec is seen to start: it is the crash's, with the crash's log.
    let ran = run(
        1,
        &[("FIXTURE_MODE", "crash-at-start")],
        None,
        upstream::STOP_GRACE,
    );
    assert!(ran.run.report.is_none(), "{}", ran.log());
    let results = ran.results();
    let suite = results
        .iter()
        .find(|r| r.scenario == "upstream/suite")
        .unwrap_or_else(|| panic!("no suite result: {results:?}"));
    assert!(matches!(suite.outcome, Outcome::InfraError { .. }));
    let log = suite.failure.as_deref().unwrap_or_default();
    assert!(log.contains("nil pointer dereference"), "{log}");
    let crashed: Vec<&ScenarioResult> = results
        .iter()
        .filter(|r| r.scenario != "upstream/suite")
        .collect();
    assert_eq!(crashed.len(), 1, "{results:?}");
    match &crashed[0].outcome {
        Outcome::InfraError { reason } => {
            assert!(reason.contains("ended while the spec ran"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        crashed[0]
            .failure
            .as_deref()
            .is_some_and(|f| f.contains("nil pointer dereference")),
        "{:?}",
        crashed[0].failure
    );

    // Under the `ginkgo` command, process 1 dies unseen; what process 2 ran is kept, each spec
    // once, and the suite's result says what became of the rest.
    let ran = run(
        2,
        &[("FIXTURE_MODE", "crash-at-start")],
        None,
        upstream::STOP_GRACE,
    );
    assert!(ran.run.report.is_none(), "{}", ran.log());
    let results = ran.results();
    let labels = labels(&results);
    assert!(
        labels.contains(&("upstream/suite".to_string(), "INFRA-ERROR")),
        "{labels:?}"
    );
    let specs: Vec<&(String, &str)> = labels.iter().filter(|l| l.0 != "upstream/suite").collect();
    assert!(
        !specs.is_empty(),
        "process 2's specs are kept: {}",
        ran.log()
    );
    let mut names: Vec<&String> = specs.iter().map(|l| &l.0).collect();
    names.dedup();
    assert_eq!(names.len(), specs.len(), "{labels:?}");
    let suite = results
        .iter()
        .find(|r| r.scenario == "upstream/suite")
        .unwrap();
    assert!(
        suite
            .failure
            .as_deref()
            .is_some_and(|f| f.contains("Ginkgo timed out waiting for all parallel procs")),
        "{:?}",
        suite.failure
    );
    assert!(processes_naming(ran.work.path()).is_empty());
}

#[test]
fn a_stopped_suite_keeps_its_running_specs_as_interrupted() {
    // The stop comes when every process is inside a spec, as in the upstream suite's own stop
    // test (what Ginkgo's processes do with a stop between specs is upstream's matter).
    for procs in [1, 2] {
        let ran = run(
            procs,
            &[("FIXTURE_WAIT", "1")],
            Some(procs),
            upstream::STOP_GRACE,
        );
        assert!(ran.run.stopped && !ran.run.killed, "{procs}: {}", ran.log());
        assert!(ran.run.report.is_some(), "{procs}: {}", ran.log());
        let results = ran.results();
        let running = blocked(&ran.work.path().join("markers"));
        assert_eq!(running.len(), procs, "{running:?}");
        for marker in running {
            let spec = match marker.split('.').next() {
                Some("passes") => "upstream/Fixture passes",
                _ => "upstream/Fixture waits until stopped",
            };
            let r = results
                .iter()
                .find(|r| r.scenario == spec)
                .unwrap_or_else(|| panic!("{procs}: {spec} in {results:?}"));
            assert!(
                matches!(&r.outcome, Outcome::Skipped { reason } if reason == upstream::INTERRUPTED),
                "{procs}: {spec}: {:?}",
                r.outcome
            );
        }
        assert!(processes_naming(ran.work.path()).is_empty(), "{procs}");
    }
}

#[test]
fn a_suite_that_ignores_the_stop_is_killed_after_the_grace_keeping_what_was_seen() {
    for procs in [1, 2] {
        let ran = run(
            procs,
            &[("FIXTURE_WAIT", "1"), ("FIXTURE_MODE", "ignore-stop")],
            Some(procs),
            Duration::from_secs(3),
        );
        assert!(ran.run.stopped && ran.run.killed, "{procs}: {:?}", ran.run);
        assert!(ran.run.report.is_none(), "{procs}");
        let results = ran.results();
        let suite = results
            .iter()
            .find(|r| r.scenario == "upstream/suite")
            .unwrap_or_else(|| panic!("{procs}: {results:?}"));
        match &suite.outcome {
            Outcome::InfraError { reason } => {
                assert!(reason.contains("did not end within"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        if procs == 1 {
            // One process streams each spec's start: the one it ran (the first, `passes`,
            // which blocks) is kept, interrupted.
            assert_eq!(blocked(&ran.work.path().join("markers")), ["passes.1"]);
            let passes = results
                .iter()
                .find(|r| r.scenario == "upstream/Fixture passes")
                .unwrap_or_else(|| panic!("{results:?}\n{}", ran.log()));
            assert!(
                matches!(&passes.outcome, Outcome::Skipped { reason } if reason == upstream::INTERRUPTED),
                "{:?}",
                passes.outcome
            );
        }
        assert!(
            processes_naming(ran.work.path()).is_empty(),
            "{procs}: {:?}",
            processes_naming(ran.work.path())
        );
    }
}

/// The dry run gives each spec's location, by which a suite's output names it.
#[test]
fn the_dry_run_plans_every_spec_with_its_location() {
    let (binary, _) = built();
    let work = tempfile::tempdir().unwrap();
    let suite = UpstreamSuite {
        from: "openkruise@v1.9.0".parse().unwrap(),
        focus: vec!["passes|fails".into()],
        skip: vec![],
        procs: 1,
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let planned = rt
        .block_on(upstream::planned(binary, &suite, work.path()))
        .unwrap();
    let names: Vec<&str> = planned.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Fixture passes", "Fixture fails"]);
    assert!(planned.iter().all(|s| {
        s.location
            .as_ref()
            .is_some_and(|(file, line)| file.ends_with("suite_test.go") && *line > 0)
    }));
    assert!(planned.iter().all(|s| s.state == ginkgo::SpecState::Passed));
}
