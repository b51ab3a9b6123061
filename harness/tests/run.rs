//! The main job end to end: `harness run` against real clusters and real OpenKruise releases,
//! classified against the ledger, with reports that parse back and render.

use std::path::Path;
use std::process::Command;

use harness::progress::Progress;
use harness::toolchain::{Cache, Toolchain, host};
use serde_json::Value;

struct Run {
    code: Option<i32>,
    stderr: String,
    report: Value,
    dir: std::path::PathBuf,
    _reports: tempfile::TempDir,
}

fn harness_run(args: &[&str]) -> Run {
    harness_run_with(args, &[])
}

fn harness_run_with(args: &[&str], env: &[(&str, &str)]) -> Run {
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("run")
        .args(args)
        .arg("--report-dir")
        .arg(reports.path())
        .env("HARNESS_STATE_DIR", state.path())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    let dir = reports.path().join("latest");
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert!(report["finished"].as_bool().unwrap());
    assert!(
        std::fs::read_dir(state.path().join("clusters"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "the run left clusters behind"
    );
    Run {
        code: out.status.code(),
        stderr,
        report,
        dir: std::fs::canonicalize(&dir).unwrap(),
        _reports: reports,
    }
}

/// Copies the run's reports (every failed try's diagnostics: the events, the manager's log
/// around the failure, the cluster's logs) out of the test's temporary directory, which goes
/// with the test, to the target directory, and says where: the evidence of a failure outlives
/// it.
fn keep(run: &Run, name: &str) -> String {
    let to = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kept-reports")
        .join(format!("{name}-{}", std::process::id()));
    fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                copy(&e.path(), &to.join(e.file_name()))?;
            } else {
                std::fs::copy(e.path(), to.join(e.file_name()))?;
            }
        }
        Ok(())
    }
    match copy(&run.dir, &to) {
        Ok(()) => format!("the run's reports are kept in {}", to.display()),
        Err(e) => format!(
            "the run's reports could not be kept in {}: {e}",
            to.display()
        ),
    }
}

/// (scenario, outcome as JSON text, failure) for every result.
fn outcomes(r: &Value) -> Vec<(String, String, String)> {
    r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["scenario"].as_str().unwrap().to_string(),
                x["outcome"].to_string(),
                x["failure"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The results that did not pass: known bugs by name only, then each other result with the
/// head of its failure, last, where a truncated log still shows it.
fn not_passed(r: &Value) -> String {
    let (known, other): (Vec<_>, Vec<_>) = outcomes(r)
        .into_iter()
        .filter(|(_, verdict, _)| !verdict.contains("\"pass\""))
        .partition(|(_, verdict, _)| verdict.contains("expected-fail"));
    let known = known
        .into_iter()
        .map(|(name, _, _)| name)
        .collect::<Vec<_>>();
    let other = other
        .into_iter()
        .map(|(name, verdict, failure)| {
            let chars: Vec<char> = failure.chars().collect();
            let head: String = chars.iter().take(1200).collect();
            // The end too: a component's log tail ends with what it wrote last.
            let tail: String = match chars.len() {
                n if n > 1600 => format!(" … {}", chars[n - 400..].iter().collect::<String>()),
                n if n > 1200 => chars[1200..].iter().collect(),
                _ => String::new(),
            };
            format!("{name}: {verdict}: {head}{tail}")
        })
        .collect::<Vec<_>>();
    format!(
        "known bugs: {}\nnot passed:\n{}",
        known.join(", "),
        other.join("\n")
    )
}

fn seed(name: &str) -> &'static str {
    match name {
        "workloadspread/cloneset-volume-claim-templates" => "S1",
        "cloneset/recreate-pods-and-pvcs-on-image-and-template-change" => "S2",
        "sidecarset/in-place-update-with-injected-sidecar" => "S3",
        "workloadspread/deployment-priority-class-patch" => "S4",
        // S5 is written twice: in Rust and as a chainsaw test (suites/chainsaw/).
        "daemonset/advanced-daemonset-selector-is-immutable"
        | "daemonset/advanced-daemonset-selector-is-immutable-yaml" => "S5",
        _ => "",
    }
}

/// Runs the seed scenarios against `release` and checks each one's result: `bad` lists the
/// seeds expected to fail as known bugs, every other seed must pass.
fn check_release(release: &str, bad: &[&str]) -> Run {
    let run = harness_run(&[
        "--controller",
        &format!("openkruise@{release}"),
        "--labels",
        "seed",
    ]);
    assert_eq!(run.code, Some(0), "{}", not_passed(&run.report));
    let results = outcomes(&run.report);
    assert_eq!(results.len(), 6, "five seeds, S5 both ways: {results:?}");
    for (name, verdict, failure) in &results {
        let s = seed(name);
        if bad.contains(&s) {
            assert!(
                verdict.contains("expected-fail"),
                "{s} on {release}: {verdict} {failure}"
            );
        } else {
            assert!(
                verdict.contains("\"pass\""),
                "{s} on {release}: {verdict} {failure}"
            );
        }
    }
    run
}

#[test]
fn every_seed_scenario_passes_on_the_default_release() {
    // One retry: on a loaded machine a scenario's bound can be missed once (the soak measures
    // how often); a failure that repeats still fails the run, and a flaky pass is named here.
    let run = harness_run(&["--retries", "1"]);
    assert_eq!(
        run.code,
        Some(0),
        "{}\n{}",
        not_passed(&run.report),
        keep(&run, "every-seed")
    );
    for r in run.report["results"].as_array().unwrap() {
        if r["outcome"]["result"] == "flaky" {
            let first: String = r["failed_tries"][0]["failure"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(600)
                .collect();
            eprintln!("flaky: {}: {first}", r["scenario"]);
        }
    }
    for (name, verdict, failure) in outcomes(&run.report) {
        // The catalog finds known bugs of the default release too; the seeds all pass.
        let known = verdict.contains("expected-fail") && seed(&name).is_empty();
        assert!(
            verdict.contains("\"pass\"") || known,
            "{name}: {verdict} {failure}"
        );
    }
    // JUnit parses back with the right counts.
    let xml = std::fs::read_to_string(run.dir.join("junit.xml")).unwrap();
    let junit = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    assert_eq!(junit.tests, run.report["results"].as_array().unwrap().len());
    assert_eq!(junit.failures, 0);
    coverage_holds_its_floor(&run.report);
}

/// The ratchet: every kind of `suites/coverage-floor.yaml` keeps at least its floor.
fn coverage_holds_its_floor(report: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/coverage-floor.yaml");
    let floor: std::collections::BTreeMap<String, f64> =
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let kinds = report["coverage"]["kinds"]
        .as_array()
        .expect("a coverage section");
    for (name, min) in floor {
        let k = kinds
            .iter()
            .find(|k| {
                format!(
                    "{}/{}",
                    k["group"].as_str().unwrap(),
                    k["kind"].as_str().unwrap()
                ) == name
            })
            .unwrap_or_else(|| panic!("the floor names {name}, which the release does not serve"));
        let covered = k["covered"].as_array().unwrap().len() as f64;
        let total = covered + k["uncovered"].as_array().unwrap().len() as f64;
        let pct = 100.0 * covered / total;
        assert!(
            pct >= min,
            "field coverage of {name} fell to {pct:.0}% (floor {min}%); uncovered: {}",
            k["uncovered"]
        );
    }
}

#[test]
fn v1_7_0_shows_s1_and_s4_with_their_signatures() {
    let run = check_release("v1.7.0", &["S1", "S4"]);
    let results = outcomes(&run.report);
    let s1 = results.iter().find(|r| seed(&r.0) == "S1").unwrap();
    assert!(s1.2.contains("volumeMounts[0].name: Not found"), "{}", s1.2);
    // The failure names its step.
    assert!(
        s1.2.starts_with("step 2, 'a WorkloadSpread with a patched subset is admitted', after "),
        "{}",
        s1.2
    );
    let s4 = results.iter().find(|r| seed(&r.0) == "S4").unwrap();
    assert!(
        s4.2.contains("must not be provided in pod spec"),
        "{}",
        s4.2
    );
    assert!(
        s4.2.starts_with("step 2, 'the workload's pods are admitted', after "),
        "{}",
        s4.2
    );
}

#[test]
#[ignore = "nightly tier: builds OpenKruise v1.6.0"]
fn v1_6_0_also_shows_s2_and_s3() {
    let run = check_release("v1.6.0", &["S1", "S2", "S3", "S4"]);
    let s3 = outcomes(&run.report)
        .into_iter()
        .find(|r| seed(&r.0) == "S3")
        .unwrap();
    assert!(s3.2.contains("FailedUpdatePodInPlace"), "{}", s3.2);
    assert!(
        s3.2.contains("pod updates may not change fields other than"),
        "{}",
        s3.2
    );
}

#[test]
#[ignore = "nightly tier: builds OpenKruise v1.5.5"]
fn v1_5_5_shows_s5_with_the_orphaned_pods_named() {
    let run = check_release("v1.5.5", &["S1", "S2", "S3", "S4", "S5"]);
    let s5 = outcomes(&run.report)
        .into_iter()
        .find(|r| seed(&r.0) == "S5")
        .unwrap();
    assert!(s5.2.contains("selector update was accepted"), "{}", s5.2);
    assert!(
        s5.2.contains("orphaned pod sel-"),
        "the invariant names the orphans: {}",
        s5.2
    );
    assert!(s5.2.contains("app=sel"), "with their labels: {}", s5.2);
    // The chainsaw twin fails at its own step, named, and is judged by its own ledger entry.
    let yaml = outcomes(&run.report)
        .into_iter()
        .find(|r| r.0.ends_with("-yaml"))
        .unwrap();
    assert!(
        yaml.2.contains("the-selector-update-is-refused"),
        "{}",
        yaml.2
    );
}

fn ledger_without(id: &str, dir: &Path) -> std::path::PathBuf {
    let builtin: Value = serde_saphyr::from_str(harness::run::ledger::BUILTIN).unwrap();
    let mut edited = builtin.clone();
    edited["bugs"]
        .as_array_mut()
        .unwrap()
        .retain(|b| b["id"] != id);
    assert_ne!(builtin, edited, "{id} is in the ledger");
    let path = dir.join("ledger.yaml");
    std::fs::write(&path, serde_json::to_string(&edited).unwrap()).unwrap();
    path
}

#[test]
fn an_unknown_bad_combination_is_a_regression_and_its_diagnostics_render() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = ledger_without("kruise-workloadspread-vct-volumes", tmp.path());
    let run = harness_run(&[
        "--controller",
        "openkruise@v1.7.0",
        "--focus",
        "workloadspread/cloneset-volume-claim-templates",
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(1), "a regression fails the run");
    let results = outcomes(&run.report);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("\"fail\""), "{:?}", results[0]);
    // Its named steps, as they ran: the first passed, the second failed, no third began.
    let steps = run.report["results"][0]["steps"].as_array().unwrap();
    let seen: Vec<(&str, bool)> = steps
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["failed"] == true))
        .collect();
    assert_eq!(
        seen,
        [
            ("the workload runs with a data volume", false),
            ("a WorkloadSpread with a patched subset is admitted", true)
        ]
    );
    let diag = &run.report["results"][0]["diagnostics"];
    assert!(diag["objects"].as_str().unwrap().contains("kind: CloneSet"));
    assert!(!diag["manager_log"].as_str().unwrap().is_empty());

    // The HTML report renders in a real browser and shows the failure's diagnostics.
    let html = run.dir.join("report.html");
    let chromium = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(
            Toolchain::new(Cache::from_env(), Progress::plain()).debian_binary(host::CHROMIUM),
        )
        .expect("chromium is on PATH or installed with apt-get");
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("FAIL"), "{dom}");
    assert!(
        dom.contains("volumeMounts[0].name: Not found"),
        "the failure is shown"
    );
    assert!(
        dom.contains("Controller log (scenario window)"),
        "with its diagnostics"
    );
    assert!(dom.contains("href=\"#d0\""), "linked from the table");
    // The script ran: the filters are shown and counted the rows they show.
    let rows = run.report["results"].as_array().unwrap().len();
    assert!(
        dom.contains("<div id=\"filters\">")
            && dom.contains(&format!("<span id=\"shown\">{rows} of {rows} shown</span>")),
        "the filters run over every row: {dom}"
    );
    assert!(dom.contains("<svg id=\"timeline\""), "with the timeline");
    assert!(
        dom.contains("<li class=\"failed\">a WorkloadSpread with a patched subset is admitted"),
        "with its steps, the failed one marked"
    );
    // The failed cluster's component logs outlive it, linked from the failure.
    let logs = run.report["cluster_logs"].as_object().unwrap();
    let files: Vec<&str> = logs
        .values()
        .flat_map(|l| l.as_array().unwrap())
        .map(|f| f.as_str().unwrap())
        .collect();
    for component in ["kube-apiserver.log", "kruise-manager.log"] {
        let f = files
            .iter()
            .find(|f| f.ends_with(component))
            .unwrap_or_else(|| panic!("{component} kept: {files:?}"));
        assert!(run.dir.join(f).is_file(), "{f}");
        assert!(dom.contains(&format!("href=\"{f}\"")), "{f} linked");
    }
}

#[test]
fn a_known_bug_that_does_not_show_is_an_unexpected_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.yaml");
    std::fs::write(
        &path,
        "bugs:\n- id: imagined\n  scenario: daemonset/native-deployment-selector-is-immutable\n  controller: {min: v1.9.0}\n  kubernetes: {}\n  signature: never\n  summary: a bug that is not there\n",
    )
    .unwrap();
    // With a GitHub Actions job summary to write.
    let summary = tmp.path().join("summary.md");
    let run = harness_run_with(
        &[
            "--focus",
            "native-deployment",
            "--ledger",
            path.to_str().unwrap(),
        ],
        &[("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())],
    );
    assert_eq!(run.code, Some(1));
    assert!(outcomes(&run.report)[0].1.contains("unexpected-pass"));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains(": FAILED\n"), "{md}");
    assert!(
        md.contains("- `daemonset/native-deployment-selector-is-immutable` UNEXPECTED-PASS"),
        "{md}"
    );

    // The same run compared with itself, and with a copy whose result was a pass.
    let report = run.dir.join("report.json");
    let diff = |before: &Path| {
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["report", "diff"])
            .arg(before)
            .arg(&run.dir)
            .output()
            .unwrap()
    };
    let same = diff(&report);
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).contains("No change."));
    let mut passed: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    passed["results"][0]["outcome"] = serde_json::json!({"result": "judged", "kind": "pass"});
    let earlier = tmp.path().join("earlier.json");
    std::fs::write(&earlier, passed.to_string()).unwrap();
    let worse = diff(&earlier);
    let text = String::from_utf8_lossy(&worse.stdout);
    assert_eq!(worse.status.code(), Some(1), "{text}");
    assert!(text.contains("### New failures (1)"), "{text}");
}

#[test]
fn retries_make_a_pass_after_a_failure_flaky_and_keep_every_failed_try() {
    const A: &str = "daemonset/native-deployment-selector-is-immutable";
    const B: &str = "daemonset/cloneset-selector-is-immutable";
    let result = |run: &Run, name: &str, attempt: u64| -> Value {
        run.report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["scenario"] == name && r["attempt"] == attempt)
            .unwrap_or_else(|| panic!("{name}#{attempt} ran"))
            .clone()
    };
    // A fails its first try of each attempt, B its first two: with one retry A is flaky and B
    // fails, each keeping its failed try.
    let inject = format!("{A}=1,{B}=2");
    let run = harness_run_with(
        &[
            "--focus",
            A,
            "--focus",
            B,
            "--retries",
            "1",
            "--repeat",
            "2",
        ],
        &[("HARNESS_INJECT_FAILURES", &inject)],
    );
    assert_eq!(run.code, Some(1), "B's failure fails the run");
    for attempt in [1, 2] {
        let a = result(&run, A, attempt);
        assert_eq!(a["outcome"]["result"], "flaky", "{a}");
        assert_eq!(a["outcome"]["verdict"]["kind"], "pass", "{a}");
        assert_eq!(a["failed_tries"].as_array().unwrap().len(), 1, "{a}");
        assert!(a["failure"].is_null(), "the last try passed: {a}");
        let b = result(&run, B, attempt);
        assert_eq!(b["outcome"]["kind"], "fail", "{b}");
        assert_eq!(b["failed_tries"].as_array().unwrap().len(), 1, "{b}");
        for text in [&b["failure"], &b["failed_tries"][0]["failure"]] {
            assert!(text.as_str().unwrap().contains("injected failure"), "{b}");
        }
    }
    assert_eq!(run.report["counts"]["FLAKY"], 2);
    // JUnit: flaky runs of a pass, reruns of a failure.
    let xml = std::fs::read_to_string(run.dir.join("junit.xml")).unwrap();
    let junit = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    assert_eq!((junit.tests, junit.failures), (4, 2));
    assert_eq!(xml.matches("<flakyFailure").count(), 2, "{xml}");
    assert_eq!(xml.matches("<rerunFailure").count(), 2, "{xml}");
    // --repeat prints each scenario's failure rate per try: A 2 of 4, B 4 of 4.
    let rate = |name: &str| {
        run.stderr
            .lines()
            .find(|l| l.starts_with(name) && l.trim_end().ends_with('%'))
            .unwrap_or_else(|| panic!("a failure rate for {name}: {}", run.stderr))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(rate(A), "4 2 2 50%");
    assert_eq!(rate(B), "4 4 0 100%");

    // --fail-on-flaky makes a flaky result fail the run.
    let inject = format!("{A}=1");
    let run = harness_run_with(
        &["--focus", A, "--retries", "1", "--fail-on-flaky"],
        &[("HARNESS_INJECT_FAILURES", &inject)],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(result(&run, A, 1)["outcome"]["result"], "flaky");
}

#[test]
fn list_dry_run_and_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--dry-run", "--controller", "openkruise@v1.5.5"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains("RecreatePodWhenChangeVCTInCloneSetGate (not in openkruise@v1.5.5)"),
        "{text}"
    );
    assert!(text.contains("InPlacePodVerticalScaling"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--suite", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such suite"));
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--list", "--labels", "seed"])
        .output()
        .unwrap();
    // The five seeds, S5 both ways.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 6);
    // Injected failures must name scenarios that exist, in the documented form.
    for (spec, error) in [
        (
            "daemonset/nosuch=1",
            "there is no scenario `daemonset/nosuch`",
        ),
        (
            "daemonset/native-deployment-selector-is-immutable",
            "is not <scenario>=<tries>",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["run", "--list"])
            .env("HARNESS_INJECT_FAILURES", spec)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(error), "{stderr}");
    }
    // --fail-on-flaky needs --retries.
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--fail-on-flaky"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
