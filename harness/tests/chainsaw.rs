//! chainsaw tests run as harness scenarios (`harness run --chainsaw`), and refused features.

use std::path::Path;

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
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(reports.path().join("latest/report.json")).unwrap(),
    )
    .unwrap();
    let result = |name: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["scenario"] == name)
            .unwrap_or_else(|| panic!("no result for {name}: {report}"))
            .clone()
    };
    let pass = result("chainsaw/configmap-round-trip");
    assert_eq!(pass["outcome"]["kind"], "pass", "{pass}");
    let fail = result("chainsaw/wrong-value");
    assert_eq!(fail["outcome"]["kind"], "fail", "{fail}");
    let why = fail["failure"].as_str().unwrap();
    // The step and operation, the path and the last value observed.
    assert!(why.contains("check-the-value try[1].assert"), "{why}");
    assert!(
        why.contains(r#"data.foo: expected "baz", got "bar""#),
        "{why}"
    );
}

#[test]
fn an_unsupported_feature_is_refused_by_name_before_anything_starts() {
    let tests = tempfile::tempdir().unwrap();
    write_test(
        tests.path(),
        "templated",
        "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  steps:\n  - use: {template: step.yaml}\n",
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
        stdout.contains("`use` is not supported by the harness"),
        "{stdout}"
    );
    assert!(stdout.contains("1 runnable, 1 refused"), "{stdout}");
    let reports = tempfile::tempdir().unwrap();
    let run = harness(
        state.path(),
        &[
            "run",
            "--chainsaw",
            tests.path().to_str().unwrap(),
            "--report-dir",
            reports.path().join("r").to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`use` is not supported"), "{stderr}");
    assert!(!reports.path().join("r").exists(), "nothing is written");
}
