//! A release candidate from a local checkout: `qualify --candidate openkruise@<path>` builds the
//! manager from the checkout's own tree and go.mod, takes the manifests from its
//! `config/default`, compares it with a release on the same cells and upgrades to it, leaving
//! the checkout untouched.

use std::process::Command;

use harness::toolchain::GoEnv;
use serde_json::Value;

/// A writable copy of the v1.9.0 source tree, standing in for a user's checkout.
async fn checkout() -> tempfile::TempDir {
    let go = GoEnv::detect().await.unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let files = go
        .download(
            scratch.path(),
            harness::controller::openkruise::MODULE,
            "v1.9.0",
            true,
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-R")
        .arg(format!("{}/.", files.dir.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let status = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

#[tokio::test]
async fn a_checkout_qualifies_against_a_release() {
    let src = checkout().await;
    let go_mod_before = std::fs::read(src.path().join("go.mod")).unwrap();
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["qualify", "--candidate"])
        .arg(format!("openkruise@{}", src.path().display()))
        .args([
            "--baseline",
            "v1.9.0",
            "--k8s",
            "1.32",
            "--focus",
            "native-deployment",
        ])
        .arg("--report-dir")
        .arg(reports.path())
        .env("HARNESS_STATE_DIR", state.path())
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = std::fs::canonicalize(reports.path().join("latest")).unwrap();
    let q: Value = serde_json::from_slice(&std::fs::read(dir.join("qualify.json")).unwrap())
        .unwrap_or_else(|e| panic!("qualify.json: {e}\n{stderr}"));
    let candidate = &q["upgrades"][0]["candidate"];
    assert_eq!(
        candidate["checkout"],
        Value::String(src.path().canonicalize().unwrap().display().to_string()),
        "{q}"
    );
    assert_eq!(q["regressions"].as_array().unwrap().len(), 0, "{q}");
    assert!(
        !q["unchanged"].as_array().unwrap().is_empty(),
        "the scenario ran on both: {q}"
    );
    for u in q["upgrades"].as_array().unwrap() {
        assert_eq!(u["problems"].as_array().unwrap().len(), 0, "{u}");
    }
    assert!(stderr.contains("building kruise-manager from"), "{stderr}");
    assert_eq!(
        std::fs::read(src.path().join("go.mod")).unwrap(),
        go_mod_before,
        "the checkout is left as it was"
    );
}

/// A commit goes to the Go module proxy as a version query, like a tag. The proxy of the
/// project's own machine refuses commits that are not releases (403), so there the run must end
/// with the proxy's refusal naming the commit; where the proxy serves commits, it builds.
#[test]
fn a_commit_is_fetched_as_a_version_query() {
    const COMMIT: &str = "4c2bbcec10dc2dd9f16b52e16d00ac908e8144ad"; // v1.9.0
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["toolchain", "build", "--controller"])
        .arg(format!("openkruise@{COMMIT}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(
            stderr.contains(&format!("github.com/openkruise/kruise@{COMMIT}"))
                && stderr.contains("not available"),
            "a failure must be the proxy refusing the commit:\n{stderr}"
        );
    }
}
