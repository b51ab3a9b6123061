//! Runs one chainsaw test with chainsaw itself ([`run_test`]): `chainsaw test` on the test's
//! directory, that one test selected by name, against the cell's kubeconfig, in the
//! scenario's namespace, with a JSON report; then [`judge`] maps the report to the
//! scenario's result — the step and operation that failed, with chainsaw's error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::test::{AskedNamespace, Source, Test};
use crate::scenario::{Ctx, StepRecord};

/// The report's file name (chainsaw adds `.json`).
const REPORT_NAME: &str = "chainsaw-report";

/// How many lines of chainsaw's output a failure carries (catch operations print there).
const OUTPUT_TAIL: usize = 60;

/// What the user gives chainsaw beyond the tests: its configuration file and values files,
/// as `--config` and `--values`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `--config`: a chainsaw `Configuration`.
    pub config: Option<PathBuf>,
    /// `--values`: values files (`$values` in tests).
    pub values: Vec<PathBuf>,
    /// More flags of `chainsaw test`, as given (e.g. `--remarshal`).
    pub flags: Vec<String>,
}

/// One `chainsaw test` command.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The test's directory (`--test-dir`).
    pub dir: PathBuf,
    /// The test file's name in it (`--test-file`).
    pub file: String,
    /// The test's name (selected with `--include-test-regex`).
    pub name: String,
    /// `--namespace`, unless the test asks for its own.
    pub namespace: Option<String>,
    /// Where the report goes (`--report-path`).
    pub report_dir: PathBuf,
    /// The user's settings.
    pub settings: Settings,
}

impl Invocation {
    /// The arguments of `chainsaw`.
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "test",
            "--no-color",
            "--test-dir",
            &self.dir.to_string_lossy(),
            "--test-file",
            &self.file,
            "--include-test-regex",
            &test_regex(&self.name),
            // The pattern matches the test's own name, not a configuration's full name
            // (`<path>[<name>]`).
            "--full-name=false",
            "--report-format",
            "JSON",
            "--report-path",
            &self.report_dir.to_string_lossy(),
            "--report-name",
            REPORT_NAME,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(ns) = &self.namespace {
            a.extend(["--namespace".into(), ns.clone()]);
        }
        if let Some(c) = &self.settings.config {
            a.extend(["--config".into(), c.to_string_lossy().into_owned()]);
        }
        for v in &self.settings.values {
            a.extend(["--values".into(), v.to_string_lossy().into_owned()]);
        }
        a.extend(self.settings.flags.iter().cloned());
        a
    }

    /// Where chainsaw writes its report.
    pub fn report(&self) -> PathBuf {
        self.report_dir.join(format!("{REPORT_NAME}.json"))
    }
}

/// The `go test -run` pattern chainsaw's `--include-test-regex` is: its tests are subtests of
/// one test named `chainsaw`, and a test run once per scenario (`spec.scenarios`) repeats its
/// name with `#01`, `#02`, ….
pub fn test_regex(name: &str) -> String {
    format!("^chainsaw$/^{}(#[0-9]+)?$", regex::escape(name))
}

/// The namespace the harness gives a test, and whether chainsaw or the runner makes it.
///
/// A test that asks for no namespace gets the scenario's own (`--namespace`); the runner has
/// not made it, so chainsaw makes it as it would its own (from the configuration's namespace
/// template) and deletes it at the end. A test that names its namespace, or templates one,
/// gets no `--namespace`: chainsaw makes that one, as it would on its own.
pub fn namespace_for(test: &Test, scenario_namespace: &str) -> Option<String> {
    match test.namespace {
        AskedNamespace::Given => Some(scenario_namespace.to_string()),
        AskedNamespace::Named(_) | AskedNamespace::Template(_) => None,
    }
}

/// chainsaw's JSON report (`--report-format JSON`).
#[derive(Debug, Deserialize)]
pub struct Report {
    /// The tests that ran.
    #[serde(default)]
    pub tests: Vec<TestReport>,
}

/// One test of the report.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestReport {
    /// The test's name.
    #[serde(default)]
    pub name: String,
    /// Whether chainsaw skipped it.
    #[serde(default)]
    pub skipped: bool,
    /// Its steps, in the order they ended (cleanup steps are named `cleanup (<step>)`).
    #[serde(default)]
    pub steps: Vec<StepReport>,
    /// When it started.
    pub start_time: Option<String>,
}

/// One step of a test.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// The step's name.
    #[serde(default)]
    pub name: String,
    /// Its operations (try, then catch and finally), in the order they ran.
    #[serde(default)]
    pub operations: Vec<OperationReport>,
    /// When it started.
    pub start_time: Option<String>,
    /// When it ended.
    pub end_time: Option<String>,
}

/// One operation of a step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationReport {
    /// `operation N`.
    #[serde(default)]
    pub name: String,
    /// `apply`, `assert`, `script`, ….
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Its failure, if it failed.
    pub failure: Option<Failure>,
}

/// An operation's failure.
#[derive(Debug, Deserialize)]
pub struct Failure {
    /// chainsaw's error.
    #[serde(default)]
    pub error: String,
}

/// Seconds between two RFC 3339 times.
fn seconds_between(a: Option<&str>, b: Option<&str>) -> Option<f64> {
    let parse = |s: &str| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    };
    let (a, b) = (parse(a?)?, parse(b?)?);
    Some((b - a).as_seconds_f64())
}

/// The result of test `name` in `report`: `Ok` when each of its runs passed; otherwise each
/// failed operation, named by its step (`step 2 of 3, 'name', after 1.2 s`), its operation
/// and chainsaw's error. A test the report does not hold did not run, which is an error too.
pub fn judge(report: &Report, name: &str) -> Result<(), String> {
    let runs: Vec<&TestReport> = report.tests.iter().filter(|t| t.name == name).collect();
    if runs.is_empty() {
        let ran: Vec<&str> = report.tests.iter().map(|t| t.name.as_str()).collect();
        return Err(format!(
            "chainsaw ran no test named `{name}` (its report holds {})",
            if ran.is_empty() {
                "none".to_string()
            } else {
                ran.join(", ")
            }
        ));
    }
    let mut failures = vec![];
    for t in runs {
        if t.skipped {
            continue;
        }
        let main: Vec<&StepReport> = t
            .steps
            .iter()
            .filter(|s| !s.name.starts_with("cleanup ("))
            .collect();
        for s in &t.steps {
            let failed: Vec<&OperationReport> = s
                .operations
                .iter()
                .filter(|o| o.failure.is_some())
                .collect();
            if failed.is_empty() {
                continue;
            }
            let at = match main.iter().position(|m| std::ptr::eq(*m, s)) {
                Some(i) => format!("step {} of {}, '{}'", i + 1, main.len(), s.name),
                None => format!("'{}'", s.name),
            };
            let after = seconds_between(s.start_time.as_deref(), s.end_time.as_deref())
                .map(|x| format!(", after {x:.1} s"))
                .unwrap_or_default();
            for o in failed {
                failures.push(format!(
                    "{at}{after}: {} ({}): {}",
                    o.name,
                    o.kind,
                    o.failure
                        .as_ref()
                        .map(|f| f.error.trim())
                        .unwrap_or_default()
                ));
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The steps of test `name` in `report` as the scenario's steps, `offset` seconds into the
/// scenario when chainsaw started (cleanup steps included, as chainsaw reports them).
pub fn steps_of(report: &Report, name: &str, offset: f64) -> Vec<StepRecord> {
    let mut out = vec![];
    for t in report.tests.iter().filter(|t| t.name == name) {
        for s in &t.steps {
            let start = seconds_between(t.start_time.as_deref(), s.start_time.as_deref());
            out.push(StepRecord {
                name: s.name.clone(),
                start: offset + start.unwrap_or(0.0),
                seconds: seconds_between(s.start_time.as_deref(), s.end_time.as_deref()),
                failed: s.operations.iter().any(|o| o.failure.is_some()),
                way: None,
            });
        }
    }
    out
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Writes an embedded test's files into `dir`.
fn materialize(files: &[(String, &'static [u8])], dir: &Path) -> anyhow::Result<()> {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// Runs `test` with chainsaw in `ctx` (the cell's kubeconfig, the toolchain's chainsaw and
/// kubectl from its facts); the error names the failed steps and carries the end of
/// chainsaw's output.
pub async fn run_test(test: &Test, settings: &Settings, ctx: &Ctx) -> anyhow::Result<()> {
    let chainsaw = ctx.facts.chainsaw.as_ref().context(
        "chainsaw is not built for this run (the run builds it when a chainsaw test is selected)",
    )?;
    let kubeconfig = ctx
        .facts
        .kubeconfig
        .as_ref()
        .context("the cell has no kubeconfig for chainsaw")?;
    let work = tempfile::Builder::new()
        .prefix("harness-chainsaw-")
        .tempdir()?;
    let (dir, file) = match &test.source {
        Source::Disk { dir, file } => (dir.clone(), file.clone()),
        Source::Embedded { file, files } => {
            let dir = work.path().join("test");
            materialize(files, &dir)?;
            (dir, file.clone())
        }
    };
    let invocation = Invocation {
        dir,
        file,
        name: test.name.clone(),
        namespace: namespace_for(test, &ctx.namespace),
        report_dir: work.path().to_path_buf(),
        settings: settings.clone(),
    };
    let offset = ctx.steps.elapsed();
    let log = work.path().join("chainsaw.log");
    let log_file = std::fs::File::create(&log)?;
    let mut path = std::env::var("PATH").unwrap_or_default();
    if let Some(kubectl) = ctx.facts.kubectl.as_ref().and_then(|k| k.parent()) {
        path = format!("{}:{path}", kubectl.display());
    }
    // Scripts' processes share chainsaw's group and end with it, however the scenario ends.
    let (mut child, _group) = crate::stop::spawn_group(
        tokio::process::Command::new(chainsaw)
            .args(invocation.args())
            .env("KUBECONFIG", kubeconfig)
            .env("PATH", path)
            .current_dir(work.path()),
        log_file,
    )
    .with_context(|| format!("run {}", chainsaw.display()))?;
    let status = child.wait().await?;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let report = match std::fs::read_to_string(invocation.report()) {
        Ok(text) => serde_json::from_str::<Report>(&text)
            .with_context(|| format!("read chainsaw's report {}", invocation.report().display()))?,
        Err(_) => bail!(
            "chainsaw ({status}) wrote no report; its output ends:\n{}",
            tail(&output, OUTPUT_TAIL)
        ),
    };
    ctx.steps.extend(steps_of(&report, &test.name, offset));
    match judge(&report, &test.name) {
        Ok(()) if status.success() => Ok(()),
        Ok(()) => bail!(
            "chainsaw exited with {status} though no operation failed; its output ends:\n{}",
            tail(&output, OUTPUT_TAIL)
        ),
        Err(failure) => bail!(
            "{failure}\nchainsaw's output ends:\n{}",
            tail(&output, OUTPUT_TAIL)
        ),
    }
}

/// Waits this long at most for `chainsaw lint` of one file.
pub const LINT_TIMEOUT: Duration = Duration::from_secs(60);

/// Validates a test file against chainsaw's schema (`chainsaw lint test`): `Ok` or what
/// chainsaw says is wrong.
pub async fn lint(chainsaw: &Path, file: &Path) -> anyhow::Result<Result<(), String>> {
    let out = tokio::time::timeout(
        LINT_TIMEOUT,
        tokio::process::Command::new(chainsaw)
            .args(["lint", "test", "-f"])
            .arg(file)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("chainsaw lint {} timed out", file.display()))?
    .with_context(|| format!("run {}", chainsaw.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(if out.status.success() {
        Ok(())
    } else {
        Err(text.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_selects_one_test_by_name_in_its_directory() {
        let i = Invocation {
            dir: "/t/dir".into(),
            file: "chainsaw-test.yaml".into(),
            name: "a.b".into(),
            namespace: Some("h-x".into()),
            report_dir: "/w".into(),
            settings: Settings {
                config: Some("/c.yaml".into()),
                values: vec!["/v.yaml".into()],
                flags: vec!["--remarshal".into()],
            },
        };
        let a = i.args();
        let after = |flag: &str| a[a.iter().position(|x| x == flag).unwrap() + 1].clone();
        assert_eq!(after("--test-dir"), "/t/dir");
        assert_eq!(after("--test-file"), "chainsaw-test.yaml");
        assert_eq!(
            after("--include-test-regex"),
            r"^chainsaw$/^a\.b(#[0-9]+)?$"
        );
        assert_eq!(after("--namespace"), "h-x");
        assert_eq!(after("--config"), "/c.yaml");
        assert_eq!(after("--values"), "/v.yaml");
        assert_eq!(after("--report-format"), "JSON");
        assert_eq!(a.last().map(String::as_str), Some("--remarshal"));
        assert_eq!(i.report(), Path::new("/w/chainsaw-report.json"));
        let none = Invocation {
            namespace: None,
            settings: Settings::default(),
            ..i
        };
        let a = none.args();
        assert!(!a.iter().any(|x| x == "--namespace" || x == "--config"));
    }

    #[test]
    fn the_pattern_matches_the_test_and_its_scenario_runs_only() {
        let re = test_regex("quick-start");
        let (top, sub) = re.split_once('/').unwrap();
        let sub = regex::Regex::new(sub).unwrap();
        assert!(regex::Regex::new(top).unwrap().is_match("chainsaw"));
        assert!(sub.is_match("quick-start") && sub.is_match("quick-start#01"));
        assert!(!sub.is_match("quick-start-2") && !sub.is_match("my-quick-start"));
    }

    const REPORT: &str = r#"{
      "name": "chainsaw-report",
      "tests": [
        {"name": "other", "startTime": "2026-11-27T00:00:00Z", "steps": []},
        {"name": "t", "startTime": "2026-11-27T00:00:00Z", "steps": [
          {"name": "make-it", "startTime": "2026-11-27T00:00:00Z",
           "endTime": "2026-11-27T00:00:01.5Z",
           "operations": [{"name": "operation 1", "type": "apply"}]},
          {"name": "refuse-it", "startTime": "2026-11-27T00:00:01.5Z",
           "endTime": "2026-11-27T00:00:12.4Z", "operations": [
            {"name": "operation 1", "type": "patch",
             "failure": {"error": "($error != null): Invalid value: false: Expected value: true"}},
            {"name": "operation 2", "type": "script"}]},
          {"name": "cleanup (make-it)", "endTime": "2026-11-27T00:00:14Z",
           "operations": [{"name": "operation 1", "type": "delete"}]}
        ]}
      ]
    }"#;

    #[test]
    fn a_failed_operation_is_named_by_its_step_and_time() {
        let report: Report = serde_json::from_str(REPORT).unwrap();
        assert_eq!(judge(&report, "other"), Ok(()));
        let e = judge(&report, "t").unwrap_err();
        assert_eq!(
            e,
            "step 2 of 2, 'refuse-it', after 10.9 s: operation 1 (patch): ($error != null): \
             Invalid value: false: Expected value: true"
        );
        let steps = steps_of(&report, "t", 2.0);
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["make-it", "refuse-it", "cleanup (make-it)"]);
        assert_eq!((steps[1].start, steps[1].failed), (3.5, true));
        assert!((steps[1].seconds.unwrap() - 10.9).abs() < 1e-9);
        let e = judge(&report, "missing").unwrap_err();
        assert!(
            e.contains("no test named `missing`") && e.contains("other, t"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_cleanup_and_a_failed_scenario_run_are_failures() {
        let report: Report = serde_json::from_str(
            r#"{"tests": [
              {"name": "t", "steps": [{"name": "cleanup (s)", "operations": [
                {"name": "operation 1", "type": "delete", "failure": {"error": "gone wrong"}}]}]},
              {"name": "t", "skipped": true}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            judge(&report, "t").unwrap_err(),
            "'cleanup (s)': operation 1 (delete): gone wrong"
        );
    }
}
