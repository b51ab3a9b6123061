//! `harness coverage`: field coverage computed from a run's recorded writes and the CRDs of a
//! real OpenKruise release (downloaded from its module, nothing built), with selection and
//! bad input.

use std::process::{Command, Output};

use serde_json::{Value, json};

fn coverage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("coverage")
        .args(args)
        .output()
        .unwrap()
}

/// A report of two scenarios: one set two CloneSet fields and a pod template field, the other
/// one BroadcastJob field.
fn report(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("report.json");
    let r = json!({
        "plan": {"controller": {"controller": "OpenKruise", "version": "v1.9.0"}},
        "results": [
            {"scenario": "cloneset/template-only-change-touches-no-pod", "sent": {
                "apps.kruise.io/v1alpha1/CloneSet": {"writes": 2, "paths": [
                    "spec.replicas",
                    "spec.updateStrategy.partition",
                    "spec.template.spec.containers[].image"
                ]}}},
            {"scenario": "daemonset/cloneset-selector-is-immutable", "sent": {
                "apps.kruise.io/v1alpha1/BroadcastJob": {"writes": 1, "paths": [
                    "spec.parallelism"
                ]}}}
        ]
    });
    std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
    path
}

fn kind<'a>(c: &'a Value, kind: &str) -> &'a Value {
    c["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {c}"))
}

#[test]
fn coverage_counts_the_fields_a_report_recorded_against_the_release_crds() {
    let dir = tempfile::tempdir().unwrap();
    let path = report(dir.path());
    let out = coverage(&["--from", path.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    // v1.9.0 serves 18 CRDs; every one of them has an entry, sent or not.
    assert_eq!(c["kinds"].as_array().unwrap().len(), 18, "{c}");
    let cs = kind(&c, "CloneSet");
    assert_eq!(cs["version"], "v1alpha1");
    assert_eq!(
        cs["covered"],
        json!([
            "spec.replicas",
            "spec.template",
            "spec.updateStrategy.partition"
        ])
    );
    assert_eq!(
        cs["template_fields"]["spec.template"],
        json!(["spec.containers[].image"])
    );
    assert!(
        cs["uncovered"]
            .as_array()
            .unwrap()
            .contains(&json!("spec.updateStrategy.paused"))
    );
    assert_eq!(
        kind(&c, "BroadcastJob")["covered"],
        json!(["spec.parallelism"])
    );
    // An API no scenario sent is counted on its storage version, all uncovered.
    let pub_ = kind(&c, "PodUnavailableBudget");
    assert_eq!(pub_["covered"], json!([]));
    assert!(!pub_["uncovered"].as_array().unwrap().is_empty());

    // Selection: only the daemonset suite's scenario counts.
    let out = coverage(&[
        "--from",
        path.to_str().unwrap(),
        "--json",
        "--suite",
        "daemonset",
    ]);
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(kind(&c, "CloneSet")["covered"], json!([]));
    assert_eq!(
        kind(&c, "BroadcastJob")["covered"],
        json!(["spec.parallelism"])
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("daemonset/advanced-daemonset-selector-is-immutable"),
        "selected scenarios without a result are named: {stderr}"
    );

    // The table names each kind with its count, and lists what is uncovered.
    let out = coverage(&["--from", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("apps.kruise.io/CloneSet"), "{text}");
    assert!(text.contains("3/"), "{text}");
    assert!(text.contains("  spec.updateStrategy.paused"), "{text}");
}

#[test]
fn coverage_without_a_report_or_with_a_bad_one_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = coverage(&["--report-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run the scenarios first"), "{err}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = coverage(&["--from", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a harness report.json"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = coverage(&["--suite", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such suite"));
}
