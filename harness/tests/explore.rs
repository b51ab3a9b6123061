//! Exploration end to end on a real cell (Kubernetes 1.32, the default OpenKruise release):
//! generated trials fire oracles, a finding is shrunk, confirmed and written, and its
//! reproduction fires the same oracle again when replayed on a new cell; nothing is left.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn harness(args: &[&str], state: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .env("HARNESS_STATE_DIR", state)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        std::fs::read_dir(state.join("clusters"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "`harness {}` left clusters behind",
        args.join(" ")
    );
    out
}

fn only_dir(p: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.into_iter().next().unwrap()
}

#[test]
fn a_finding_is_shrunk_written_and_fires_again_when_replayed() {
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let r = reports.path().to_str().unwrap();
    let out = harness(
        &[
            "explore",
            "--kinds",
            "CloneSet",
            "--budget",
            "60s",
            "--modes",
            "admission",
            "--seed",
            "7",
            "--fail-on-findings",
            "--report-dir",
            r,
        ],
        state.path(),
    );
    let run = only_dir(reports.path());
    let summary: Value =
        serde_json::from_slice(&std::fs::read(run.join("explore.json")).unwrap()).unwrap();
    let findings = summary["findings"].as_array().unwrap();
    assert!(
        summary["trials"]["admission CloneSet"].as_u64().unwrap() > 100,
        "every leaf's values were tried: {}",
        summary["trials"]
    );
    let stable: Vec<&Value> = findings.iter().filter(|f| f["stable"] == true).collect();
    assert!(!stable.is_empty(), "no stable finding: {findings:#?}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "stable findings fail the command"
    );
    let md = std::fs::read_to_string(run.join("findings.md")).unwrap();
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    for f in &stable {
        let dir = PathBuf::from(f["dir"].as_str().unwrap());
        for file in [
            "trial.yaml",
            "original.yaml",
            "finding.json",
            "chainsaw-test.yaml",
            "ledger.yaml",
        ] {
            assert!(dir.join(file).is_file(), "{} has no {file}", dir.display());
        }
        // Its reproduction is a test chainsaw itself accepts.
        let check = harness(
            &[
                "chainsaw",
                "check",
                dir.join("chainsaw-test.yaml").to_str().unwrap(),
            ],
            state.path(),
        );
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stdout)
        );
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(md.contains(name), "findings.md lists {name}");
        assert!(
            page.contains(&format!("href=\"findings/{name}/chainsaw-test.yaml\"")),
            "report.html links {name}'s reproduction"
        );
        // The shrunk trial sets no more than the original did.
        let fields = |t: &Value| -> usize {
            t["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["set"].as_object().map_or(0, |m| m.len()))
                .sum()
        };
        assert!(fields(&f["trial"]) <= fields(&f["original"]), "{f:#}");
        assert_eq!(f["reproduced"], f["confirm_runs"]);
    }
    // The first stable finding, replayed on a new cell from its directory.
    let dir = stable[0]["dir"].as_str().unwrap();
    let again = harness(&["explore", "--replay", dir], state.path());
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("fires again"), "{stdout}");
    assert_eq!(again.status.code(), Some(1));
}

#[test]
fn an_unknown_kind_is_refused_naming_the_known_ones() {
    let state = tempfile::tempdir().unwrap();
    let out = harness(&["explore", "--kinds", "NoSuchKind"], state.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("no kind `NoSuchKind`") && stderr.contains("CloneSet"),
        "{stderr}"
    );
}
