//! chainsaw tests run by chainsaw as harness scenarios (`harness run --chainsaw`): judged by
//! their failed step; checked before anything starts; and chainsaw's own examples give
//! through the harness what chainsaw gives on its own.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness::progress::Progress;
use harness::toolchain::go::GoEnv;
use harness::toolchain::{CHAINSAW_VERSION, Cache, Toolchain};

fn harness(state: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .env("HARNESS_STATE_DIR", state)
        .output()
        .unwrap()
}

fn write_test(dir: &Path, name: &str, text: &str) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("chainsaw-test.yaml"), text).unwrap();
}

const PASSES: &str = r#"
apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata:
  name: configmap-round-trip
spec:
  bindings:
  - name: greeting
    value: hello
  steps:
  - name: create
    try:
    - apply:
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: greeting
          data:
            text: ($greeting)
            namespace: ($namespace)
    - assert:
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: greeting
          data:
            text: hello
            (length(namespace) > `0`): true
  - name: read-with-kubectl
    try:
    - script:
        timeout: 30s
        content: kubectl get configmap greeting -n $NAMESPACE -o jsonpath='{.data.text}'
        check:
          ($error == null): true
          ($stdout): hello
    - delete:
        ref:
          apiVersion: v1
          kind: ConfigMap
          name: greeting
    - error:
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: greeting
"#;

const FAILS: &str = r#"
apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata:
  name: wrong-value
spec:
  steps:
  - name: check-the-value
    try:
    - apply:
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: cm
          data:
            foo: bar
    - assert:
        timeout: 2s
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: cm
          data:
            foo: baz
    catch:
    - events: {}
"#;

#[test]
fn a_passing_and_a_failing_chainsaw_test_are_judged_on_the_default_cell() {
    let tests = tempfile::tempdir().unwrap();
    write_test(tests.path(), "passes", PASSES);
    write_test(tests.path(), "fails", FAILS);
    let state = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = harness(
        state.path(),
        &[
            "run",
            "--chainsaw",
            tests.path().to_str().unwrap(),
            "--report-dir",
            reports.path().to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the failing test fails the run: {stderr}"
    );
    let report = read_report(&reports.path().join("latest/report.json"));
    let pass = &report["chainsaw/configmap-round-trip"];
    assert_eq!(pass["outcome"]["kind"], "pass", "{pass}");
    let fail = &report["chainsaw/wrong-value"];
    assert_eq!(fail["outcome"]["kind"], "fail", "{fail}");
    let why = fail["failure"].as_str().unwrap();
    // The step (by number and name) and operation, and chainsaw's own error.
    assert!(
        why.starts_with("step 1 of 1, 'check-the-value', after "),
        "{why}"
    );
    assert!(why.contains("operation 2 (assert): "), "{why}");
    assert!(why.contains("data.foo"), "{why}");
    // chainsaw's steps are the scenario's, the failed one marked.
    let steps: Vec<(&str, bool)> = fail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["failed"] == true))
        .collect();
    assert_eq!(steps.first(), Some(&("check-the-value", true)), "{steps:?}");
    // What the catch operation collected is in chainsaw's output, which the failure ends with.
    assert!(why.contains("chainsaw's output ends:"), "{why}");
}

#[test]
fn a_malformed_test_is_refused_by_chainsaw_check_and_a_bad_harness_section_before_the_run() {
    let tests = tempfile::tempdir().unwrap();
    write_test(
        tests.path(),
        "misspelt",
        "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  stepz: []\n",
    );
    write_test(tests.path(), "fine", FAILS);
    let state = tempfile::tempdir().unwrap();
    let check = harness(
        state.path(),
        &["chainsaw", "check", tests.path().to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("ok       wrong-value"), "{stdout}");
    assert!(
        stdout.contains("refused  ") && stdout.contains("stepz"),
        "{stdout}"
    );
    assert!(stdout.contains("1 runnable, 1 refused"), "{stdout}");

    let bad = tempfile::tempdir().unwrap();
    write_test(
        bad.path(),
        "annotated",
        "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata:\n  name: t\n  annotations: {harness.io/kubernetes: soon}\nspec:\n  steps: []\n",
    );
    let reports = tempfile::tempdir().unwrap();
    let run = harness(
        state.path(),
        &[
            "run",
            "--chainsaw",
            bad.path().to_str().unwrap(),
            "--report-dir",
            reports.path().join("r").to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`soon` is not a Kubernetes minor"),
        "{stderr}"
    );
    assert!(!reports.path().join("r").exists(), "nothing is written");
}

/// A run's results by scenario.
fn read_report(path: &Path) -> BTreeMap<String, serde_json::Value> {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["scenario"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

/// `pass` or `fail` for each test of a chainsaw JSON report, by name (a name that
/// runs twice is listed twice).
/// The folder each test of chainsaw's JSON `report` was read from (its `basePath`), by test
/// name: a test's name need not be its folder's (the `orphan` example is `delete-test`).
fn chainsaw_folders(report: &serde_json::Value) -> BTreeMap<String, PathBuf> {
    report["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| {
            Some((
                t["name"].as_str()?.to_string(),
                t["basePath"].as_str()?.into(),
            ))
        })
        .collect()
}

fn chainsaw_results(report: &serde_json::Value) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = report["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let failed = t["steps"].as_array().into_iter().flatten().any(|s| {
                s["operations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|o| o.get("failure").is_some())
            });
            // chainsaw's report leaves out the tests it skipped.
            let result = if failed { "fail" } else { "pass" };
            (t["name"].as_str().unwrap().to_string(), result)
        })
        .collect();
    out.sort();
    out
}

/// chainsaw's example corpus (`testdata/e2e` of its module at the pinned release), run as
/// chainsaw's own CI runs it (`--remarshal`, its configuration and values): once by chainsaw
/// alone on a cluster of the harness, once through the harness (`run --chainsaw`, one
/// scenario per test). Every test gives the same result both ways; those that fail, fail
/// both ways for what this cell is not (one node, a `kube-dns` Deployment, `kind` on the
/// PATH).
#[tokio::test]
async fn chainsaws_own_examples_give_through_the_harness_what_chainsaw_gives_alone() {
    let tc = Toolchain::new(Cache::from_env(), Progress::plain());
    let chainsaw = tc.chainsaw().await.unwrap();
    let go = GoEnv::detect().await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let module = go
        .download(
            work.path(),
            "github.com/kyverno/chainsaw",
            CHAINSAW_VERSION,
            false,
        )
        .await
        .unwrap();
    let e2e = module.dir.join("testdata/e2e");
    let (config, values) = (e2e.join("config.yaml"), e2e.join("values.yaml"));
    let examples = e2e.join("examples");

    // chainsaw alone over `test_dir` on the cluster of `kubeconfig`, every test even after a
    // failure (the configuration says fail fast): its results.
    let run_alone = |kubeconfig: PathBuf, test_dir: PathBuf, name: &'static str| {
        let (chainsaw, config, values) = (chainsaw.clone(), config.clone(), values.clone());
        let report_dir = work.path().join(name);
        let cwd = work.path().to_path_buf();
        async move {
            std::fs::create_dir_all(&report_dir).unwrap();
            let out = tokio::process::Command::new(&chainsaw)
                .args(["test", "--no-color", "--remarshal", "--fail-fast=false"])
                .args([
                    "--parallel",
                    "4",
                    "--report-format",
                    "JSON",
                    "--report-name",
                    "r",
                ])
                .arg("--report-path")
                .arg(&report_dir)
                .arg("--config")
                .arg(&config)
                .arg("--values")
                .arg(&values)
                .arg("--test-dir")
                .arg(&test_dir)
                .env("KUBECONFIG", &kubeconfig)
                .current_dir(&cwd)
                .output()
                .await
                .unwrap();
            let text = std::fs::read_to_string(report_dir.join("r.json")).unwrap_or_else(|e| {
                panic!(
                    "chainsaw wrote no report ({e}): {}",
                    String::from_utf8_lossy(&out.stdout)
                )
            });
            let report: serde_json::Value = serde_json::from_str(&text).unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            (
                chainsaw_results(&report),
                stdout.into_owned(),
                chainsaw_folders(&report),
            )
        }
    };
    // The whole corpus alone, on a cluster kept until the comparison is made.
    let (c, _root) = common::cluster(&common::default_profile()).await;
    let kubeconfig = harness::cluster::Cluster::kubeconfig(&c).to_path_buf();
    let alone = async {
        let (results, stdout, folders) =
            run_alone(kubeconfig.clone(), examples.clone(), "alone").await;
        // A test that says `skip: true` is counted in the summary, not in the report.
        assert!(stdout.contains("- Skipped tests 1\n"), "{stdout}");
        // Each test's folder, which a second run alone of it reads, is one of the corpus.
        for (name, _) in &results {
            let folder = folders.get(name).map(PathBuf::as_path);
            assert!(
                folder.is_some_and(|f| f.starts_with(&examples) && f.is_dir()),
                "{name}: {folder:?}"
            );
        }
        (results, stdout, folders)
    };

    // The same tests through the harness, at the same time on a cell of its own.
    let state = tempfile::tempdir().unwrap();
    let reports = work.path().join("reports");
    // `harness run` over the corpus as chainsaw's CI runs it, writing to `report_dir`.
    let corpus = |report_dir: &PathBuf, focus: Option<&str>| -> Vec<String> {
        let arg = |p: &PathBuf| p.to_str().unwrap().to_string();
        let mut args: Vec<String> = ["run", "--chainsaw"].map(String::from).into();
        args.extend([arg(&examples), "--chainsaw-config".into(), arg(&config)]);
        args.extend(["--chainsaw-values".into(), arg(&values)]);
        args.push("--chainsaw-flag=--remarshal".into());
        if let Some(f) = focus {
            args.extend(["--focus".into(), f.to_string()]);
        }
        args.extend(["--report-dir".into(), arg(report_dir)]);
        args
    };
    let args = corpus(&reports, None);
    let state_dir = state.path().to_path_buf();
    let through = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        harness(&state_dir, &args)
    });
    let ((mut alone, alone_stdout, folders), out) = tokio::join!(alone, through);
    let out = out.unwrap();
    let mut results = read_report(&reports.join("latest/report.json"));
    let skipped: Vec<String> = results
        .iter()
        .filter(|(_, r)| r["outcome"]["result"] == "skipped")
        .map(|(n, r)| format!("{n}: {}", r["outcome"]["reason"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(skipped, ["chainsaw/proxy: the test says skip: true"]);
    results.retain(|_, r| r["outcome"]["result"] != "skipped");
    let mut through: Vec<(String, &'static str)> = vec![];
    for (name, r) in &results {
        let test = name.rsplit('/').next().unwrap().to_string();
        let result = if r["outcome"]["kind"] == "pass" {
            "pass"
        } else {
            "fail"
        };
        // A file with two tests of one name is one scenario that judges both.
        let runs = alone.iter().filter(|(n, _)| *n == test).count().max(1);
        let scenarios_of_name = results
            .keys()
            .filter(|k| k.rsplit('/').next() == Some(&test))
            .count();
        for _ in 0..runs / scenarios_of_name.max(1) {
            through.push((test.clone(), result));
        }
    }
    through.sort();
    // A test that passed alone and failed through the harness, at the same time on a loaded
    // machine (a CRD applied and then used at once races discovery), runs through the harness
    // once more, alone; its second result stands.
    let retry: Vec<String> = through
        .iter()
        .filter(|(n, r)| *r == "fail" && alone.iter().any(|(a, ar)| a == n && *ar == "pass"))
        .map(|(n, _)| n.clone())
        .collect();
    for name in retry {
        let again = work.path().join(format!("again-{name}"));
        let args = corpus(&again, Some(&format!("chainsaw/{name}")));
        let state_dir = state.path().to_path_buf();
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            harness(&state_dir, &args)
        })
        .await
        .unwrap();
        let results = read_report(&again.join("latest/report.json"));
        let passed = results
            .iter()
            .filter(|(n, _)| n.rsplit('/').next() == Some(name.as_str()))
            .all(|(_, r)| r["outcome"]["kind"] == "pass");
        eprintln!(
            "{name}: failed through the harness beside chainsaw alone, then {} alone: {}",
            if passed { "passed" } else { "failed" },
            String::from_utf8_lossy(&out.stderr)
        );
        if passed {
            for t in through.iter_mut().filter(|(n, _)| *n == name) {
                t.1 = "pass";
            }
        }
    }
    // The other way round: a test that failed alone and passed through the harness (chainsaw
    // races discovery the same way) runs once more alone, on the same cluster; its second
    // result stands.
    let again_alone: Vec<String> = alone
        .iter()
        .filter(|(n, r)| *r == "fail" && through.iter().any(|(t, tr)| t == n && *tr == "pass"))
        .map(|(n, _)| n.clone())
        .collect();
    if !again_alone.is_empty() {
        eprintln!("chainsaw alone beside the harness said:\n{alone_stdout}");
    }
    for name in again_alone {
        let folder = folders
            .get(&name)
            .unwrap_or_else(|| panic!("chainsaw's report names no folder for {name}"));
        let (results, _, _) = run_alone(kubeconfig.clone(), folder.clone(), "alone-again").await;
        let passed = results.iter().all(|(_, r)| *r == "pass");
        eprintln!(
            "{name}: failed alone beside the harness, then {} alone",
            if passed { "passed" } else { "failed" }
        );
        if passed {
            for t in alone.iter_mut().filter(|(n, _)| *n == name) {
                t.1 = "pass";
            }
        }
    }
    assert_eq!(
        through,
        alone,
        "through the harness (left) and chainsaw alone (right) differ; the harness said: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failed: Vec<&str> = alone
        .iter()
        .filter(|(_, r)| *r == "fail")
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "assertion-tree",
            "dynamic-clusters",
            "non-resource-assertion"
        ],
        "only what assumes another cluster fails"
    );
    assert!(
        alone.iter().filter(|(_, r)| *r == "pass").count() >= 38,
        "{alone:?}"
    );
}
