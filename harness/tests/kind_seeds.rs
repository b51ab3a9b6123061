//! The seed scenarios on kind and on the local provider, in the same test: `harness run
//! --provider kind --kind-offline --labels seed` classifies each seed as the local provider
//! does, and leaves no cluster, private Docker daemon or process behind. The nightly tier
//! (`--ignored`): kind clusters on the offline node image take minutes on two cores.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `harness run <args> --labels seed` with its own state directory; the outcome of each
/// scenario (`pass`, `expected-fail`, ...), the exit code, and what is left after it: the
/// state directory's clusters and private daemons, and processes started from it.
fn seeds(args: &[&str]) -> (BTreeMap<String, String>, Option<i32>, Vec<String>) {
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("run")
        .args(args)
        .args(["--labels", "seed", "--report-dir"])
        .arg(reports.path())
        .env("HARNESS_STATE_DIR", state.path())
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(
        &std::fs::read(reports.path().join("latest").join("report.json")).unwrap(),
    )
    .unwrap();
    let outcomes = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["scenario"].as_str().unwrap().to_string(),
                format!(
                    "{} {}",
                    r["outcome"]["result"].as_str().unwrap_or_default(),
                    r["failure"].as_str().unwrap_or_default()
                )
                .trim()
                .to_string(),
            )
        })
        .collect();
    let mut left: Vec<String> = ["clusters", "providers/docker"]
        .iter()
        .flat_map(|d| entries(&state.path().join(d)))
        .collect();
    left.extend(common::processes_with(&state.path().display().to_string()));
    (outcomes, out.status.code(), left)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "nightly tier: kind clusters on the offline node image, minutes on two cores"]
fn the_seeds_classify_on_kind_as_on_the_local_provider_and_kind_leaves_nothing() {
    if !nix::unistd::geteuid().is_root() {
        common::missing_prerequisite("root", "run the test as root (a private Docker daemon)");
        return;
    }
    if std::env::var_os("DOCKER_HOST").is_some() {
        common::missing_prerequisite(
            "no DOCKER_HOST",
            "unset DOCKER_HOST: this test checks the private daemon's teardown",
        );
        return;
    }
    let (local, local_code, _) = seeds(&[]);
    let (kind, kind_code, left) = seeds(&[
        "--provider",
        "kind",
        "--kind-offline",
        "--clusters-parallel",
        "1",
    ]);
    assert!(local.len() >= 5, "the five seeds ran on local: {local:#?}");
    let verdict = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .map(|(k, v)| (k.clone(), v.split(' ').next().unwrap_or_default().into()))
            .collect()
    };
    assert_eq!(
        verdict(&kind),
        verdict(&local),
        "kind classifies every seed as local does; kind: {kind:#?} local: {local:#?}"
    );
    assert_eq!((kind_code, local_code), (Some(0), Some(0)));
    assert!(left.is_empty(), "left behind: {left:#?}");
}
