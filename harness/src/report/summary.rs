//! A GitHub Actions job summary: Markdown a CI job shows on its page ([`markdown`]), appended
//! to the file `$GITHUB_STEP_SUMMARY` names when it is set ([`append`]). `run`, `matrix`,
//! `qualify` and `report diff` write one.

use std::collections::BTreeMap;
use std::path::Path;

use crate::results::{Outcome, ScenarioResult, Status};

/// The variable GitHub Actions sets to the job summary's file.
pub const VAR: &str = "GITHUB_STEP_SUMMARY";

/// How many failures a summary lists before it says how many more there are.
const MAX_FAILURES: usize = 30;

/// A summary titled `title`, over `groups` of results (one per cell: its label and results):
/// the status, counts by result, a table of the groups when there are several, and each
/// result that fails the run with the first line of its failure; `reports` names where the
/// full reports are (the job's artifacts).
pub fn markdown(title: &str, groups: &[(String, &[ScenarioResult])], reports: &Path) -> String {
    let all = groups.iter().flat_map(|(_, r)| r.iter());
    let status = Status::of(all.clone());
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for r in all.clone() {
        *counts.entry(r.outcome.label()).or_default() += 1;
    }
    let mut out = format!(
        "## {title}: {}\n\n",
        match status {
            Status::Passed => "passed",
            Status::Failed => "FAILED",
            Status::InfraError => "infrastructure error",
        }
    );
    out.push_str(
        &counts
            .iter()
            .map(|(k, n)| format!("**{n}** {k}"))
            .collect::<Vec<_>>()
            .join(" · "),
    );
    out.push_str("\n\n");
    if groups.len() > 1 {
        out.push_str("| cell | results | fail the run |\n|---|---|---|\n");
        for (label, results) in groups {
            let failing = results.iter().filter(|r| fails(&r.outcome)).count();
            out.push_str(&format!("| {label} | {} | {failing} |\n", results.len()));
        }
        out.push('\n');
    }
    let failures: Vec<(&String, &ScenarioResult)> = groups
        .iter()
        .flat_map(|(label, rs)| rs.iter().map(move |r| (label, r)))
        .filter(|(_, r)| fails(&r.outcome))
        .collect();
    if !failures.is_empty() {
        out.push_str(&format!("### Failing the run ({})\n\n", failures.len()));
        for (label, r) in failures.iter().take(MAX_FAILURES) {
            let first = r
                .failure
                .as_deref()
                .and_then(|f| f.lines().next())
                .unwrap_or("");
            let cell = if groups.len() > 1 {
                format!(" ({label})")
            } else {
                String::new()
            };
            out.push_str(&format!(
                "- `{}`{cell} {}: {}\n",
                r.scenario,
                r.outcome.label(),
                first.replace('|', "\\|")
            ));
        }
        if failures.len() > MAX_FAILURES {
            out.push_str(&format!("- … and {} more\n", failures.len() - MAX_FAILURES));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "Reports (the job's artifacts): `{}` — `report.html`, `report.json`, `junit.xml`\n\n",
        reports.display()
    ));
    out
}

/// When `$GITHUB_STEP_SUMMARY` is set, appends the summary of the run whose reports are in
/// `dir` (its `report.json`).
pub fn append_run(dir: &Path) -> anyhow::Result<()> {
    if std::env::var_os(VAR).is_none() {
        return Ok(());
    }
    let run = super::diff::load(dir)?;
    let cell = run
        .results
        .first()
        .map(|r| r.profile.clone())
        .unwrap_or_default();
    append(&markdown(
        &format!("harness run {}", run.run_id),
        &[(cell, &run.results)],
        dir,
    ))?;
    Ok(())
}

fn fails(o: &Outcome) -> bool {
    o.fails_run(false) || matches!(o, Outcome::InfraError { .. })
}

/// Appends `text` to the job summary when `$GITHUB_STEP_SUMMARY` is set; whether it did.
pub fn append(text: &str) -> anyhow::Result<bool> {
    let Some(path) = std::env::var_os(VAR) else {
        return Ok(false);
    };
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| anyhow::anyhow!("append to {VAR} {}: {e}", Path::new(&path).display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Verdict;

    fn result(name: &str, outcome: Outcome, failure: Option<&str>) -> ScenarioResult {
        ScenarioResult::fixture(name, outcome, 1.0, failure)
    }

    #[test]
    fn a_run_with_a_failure_lists_it_with_its_first_line() {
        let rs = vec![
            result("s/a", Outcome::Judged(Verdict::Pass), None),
            result(
                "s/b",
                Outcome::Judged(Verdict::Fail),
                Some("step 1, 'x', after 2.0 s: a|b\nmore"),
            ),
            result(
                "s/c",
                Outcome::Judged(Verdict::ExpectedFail { bug: "k".into() }),
                Some("known"),
            ),
        ];
        let md = markdown(
            "harness run r1",
            &[("1.32 x v1.9.0".into(), &rs)],
            Path::new("reports/r1"),
        );
        assert!(md.starts_with("## harness run r1: FAILED\n\n"), "{md}");
        assert!(md.contains("**1** FAIL"), "{md}");
        assert!(md.contains("**1** pass"), "{md}");
        assert!(
            md.contains(
                "### Failing the run (1)\n\n- `s/b` FAIL: step 1, 'x', after 2.0 s: a\\|b\n"
            ),
            "{md}"
        );
        assert!(
            !md.contains("`s/c`"),
            "an expected failure does not fail the run: {md}"
        );
        assert!(!md.contains("| cell |"), "one cell, no table: {md}");
        assert!(md.contains("`reports/r1`"), "{md}");
    }

    #[test]
    fn cells_get_a_table_and_the_summary_is_appended_only_when_asked() {
        let ok = vec![result("s/a", Outcome::Judged(Verdict::Pass), None)];
        let bad = vec![result("s/a", Outcome::Judged(Verdict::Fail), Some("no"))];
        let md = markdown(
            "harness matrix m",
            &[
                ("1.32 x v1.7.0".into(), &bad),
                ("1.32 x v1.9.0".into(), &ok),
            ],
            Path::new("m"),
        );
        assert!(
            md.contains("| 1.32 x v1.7.0 | 1 | 1 |\n| 1.32 x v1.9.0 | 1 | 0 |"),
            "{md}"
        );
        assert!(md.contains("- `s/a` (1.32 x v1.7.0) FAIL: no"), "{md}");
    }
}
