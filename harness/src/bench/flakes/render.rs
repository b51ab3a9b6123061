//! The flake count for people: the per-test table printed to the terminal ([`table`]), the
//! Markdown of `flakes.md` and of the CI job summary ([`markdown`]), and the line printed
//! after each run ([`progress_line`]). Pure functions of a [`Report`].

use super::tally::{Counts, Report, RunRecord, TestRow};

/// Which tests a Markdown table lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Every test (`flakes.md`).
    All,
    /// Only those that failed at least once (the CI job summary, which has a size limit).
    Failing,
}

/// The line printed when a run ends: `run 3/30 of upstream_e2e: 3 passed, 0 failed (41 s)`.
pub fn progress_line(run: &RunRecord) -> String {
    let Counts {
        passed,
        failed,
        ignored,
    } = run.counts;
    let mut line = format!("{}: {passed} passed, {failed} failed", run.label);
    if ignored > 0 {
        line.push_str(&format!(", {ignored} ignored"));
    }
    if run.outside_tests.is_some() {
        line.push_str(&format!(
            ", and cargo failed outside any test ({}; see {})",
            exit(run.exit_code),
            run.log
        ));
    }
    line.push_str(&format!(" ({:.0} s)", run.seconds));
    line
}

fn exit(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".into(), |c| format!("exit code {c}"))
}

/// The per-test table (binary, test, runs, failures, ignored), the tests that failed first,
/// then each failing test's first failure and each run that failed outside any test.
pub fn table(report: &Report) -> String {
    let headers = ["BINARY", "TEST", "RUNS", "FAILURES", "IGNORED"];
    let rows: Vec<[String; 5]> = report
        .tests
        .iter()
        .map(|t| {
            [
                t.binary.clone(),
                t.test.clone(),
                t.runs.to_string(),
                t.failures.to_string(),
                t.ignored.to_string(),
            ]
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([headers[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..headers.len()).map(width).collect();
    let line = |cells: [&str; 5]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(headers);
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
    }
    for t in report.failing() {
        out.push_str(&format!(
            "\n{} {}: failed in {} of {} runs ({})\n",
            t.binary,
            t.test,
            t.failures,
            t.runs,
            failed_in(t)
        ));
        if let Some(first) = t.failed_runs.first() {
            out.push_str(&format!("  first failure ({}):\n", first.run));
            out.push_str(&indent(&first.output));
        }
    }
    for r in report.failed_outside_tests() {
        out.push_str(&format!(
            "\n{}: cargo failed outside any test ({}); the end of {}:\n",
            r.label,
            exit(r.exit_code),
            r.log
        ));
        out.push_str(&indent(r.outside_tests.as_deref().unwrap_or("")));
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn failed_in(t: &TestRow) -> String {
    let runs: Vec<&str> = t.failed_runs.iter().map(|f| f.run.as_str()).collect();
    runs.join(", ")
}

/// Markdown: a title with the verdict, a header line (date, commit, machine, the command that
/// reproduces it), what each run ran, a summary strip, the table of `rows`, then each failing
/// test's first failure and each run that failed outside any test.
pub fn markdown(report: &Report, rows: Rows) -> String {
    let h = &report.header;
    let failing = report.failing().count();
    let outside = report.failed_outside_tests().count();
    let verdict = match (failing, outside) {
        (0, 0) => "no test failed".to_string(),
        (n, 0) => format!("{n} test(s) failed"),
        (0, m) => format!("{m} run(s) failed outside any test"),
        (n, m) => format!("{n} test(s) failed, {m} run(s) failed outside any test"),
    };
    let memory = h.machine.memory_kib.map_or_else(
        || "memory unknown".to_string(),
        |k| format!("{:.1} GiB memory", k as f64 / (1024.0 * 1024.0)),
    );
    let changes = if h.uncommitted_changes {
        " (with uncommitted changes)"
    } else {
        ""
    };
    let mut out = format!("## Flake count: {verdict}\n\n");
    out.push_str(&format!(
        "**Date** {} · **commit** `{}`{changes} · **machine** {} CPUs, {memory} · **command** {}\n\n",
        h.date,
        h.commit,
        h.machine.cpus,
        code(&h.command)
    ));
    let each: Vec<String> = h.each_run.iter().map(|c| code(c)).collect();
    out.push_str(&format!("Each run: {}.\n\n", each.join("; ")));
    out.push_str(&format!(
        "**{}** run(s) · **{}** test(s) · **{failing}** failed at least once · **{outside}** run(s) failed outside any test\n\n",
        report.runs.len(),
        report.tests.len()
    ));
    let listed: Vec<&TestRow> = match rows {
        Rows::All => report.tests.iter().collect(),
        Rows::Failing => report.failing().collect(),
    };
    if !listed.is_empty() {
        out.push_str("| binary | test | runs | failures | ignored |\n|---|---|--:|--:|--:|\n");
        for t in &listed {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                cell(&t.binary),
                cell(&code(&t.test)),
                t.runs,
                t.failures,
                t.ignored
            ));
        }
        out.push('\n');
    }
    if listed.len() < report.tests.len() {
        out.push_str(&format!(
            "{} more test(s) never failed; every test is in `flakes.md` and `flakes.json`.\n\n",
            report.tests.len() - listed.len()
        ));
    }
    for t in report.failing() {
        out.push_str(&format!(
            "### {} {}: failed in {} of {} runs\n\nFailed in {}.\n\n",
            t.binary,
            code(&t.test),
            t.failures,
            t.runs,
            failed_in(t)
        ));
        if let Some(first) = t.failed_runs.first() {
            out.push_str(&format!(
                "The first failure ({}):\n\n{}\n",
                first.run,
                fenced(&first.output)
            ));
        }
    }
    for r in report.failed_outside_tests() {
        out.push_str(&format!(
            "### {}: cargo failed outside any test\n\n{}; the end of `{}`:\n\n{}\n",
            r.label,
            exit(r.exit_code),
            r.log,
            fenced(r.outside_tests.as_deref().unwrap_or(""))
        ));
    }
    out
}

/// `text` as a Markdown code span (plain when it holds a backtick).
fn code(text: &str) -> String {
    if text.contains('`') {
        text.to_string()
    } else {
        format!("`{text}`")
    }
}

/// `text` fit for a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `text` in a fenced code block whose fence is longer than any backtick run inside it.
fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}text\n{text}\n{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::super::tally::tests::{header, three_runs};
    use super::*;

    #[test]
    fn the_markdown_has_the_header_the_table_and_the_failures() {
        let md = markdown(&three_runs().report(&header()), Rows::All);
        assert_eq!(
            md,
            "## Flake count: 1 test(s) failed, 1 run(s) failed outside any test

**Date** 2026-12-01T02:00:00Z · **commit** `0123456789abcdef0123456789abcdef01234567` · **machine** 2 CPUs, 7.7 GiB memory · **command** `cargo run --locked -p harness -- bench flakes --test e2e --runs 3 --test-threads 2`

Each run: `cargo test -p harness --test e2e -- --test-threads=2`.

**3** run(s) · **3** test(s) · **1** failed at least once · **1** run(s) failed outside any test

| binary | test | runs | failures | ignored |
|---|---|--:|--:|--:|
| e2e | `flaky` | 2 | 1 | 0 |
| e2e | `slow` | 2 | 0 | 2 |
| e2e | `steady` | 3 | 0 | 0 |

### e2e `flaky`: failed in 1 of 2 runs

Failed in run 2/3 of e2e.

The first failure (run 2/3 of e2e):

```text
flaky broke
```

### run 3/3 of e2e: cargo failed outside any test

exit code 101; the end of `logs/e2e-run-3.log`:

```text
running 3 tests
SIGSEGV
```

"
        );
    }

    #[test]
    fn the_summary_lists_only_the_failing_tests() {
        let md = markdown(&three_runs().report(&header()), Rows::Failing);
        assert!(md.contains("| e2e | `flaky` | 2 | 1 | 0 |\n\n2 more test(s) never failed"));
        assert!(!md.contains("`steady`"));
    }

    #[test]
    fn the_table_lists_failures_first_and_aligns_columns() {
        let text = table(&three_runs().report(&header()));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            &lines[..4],
            [
                "BINARY  TEST    RUNS  FAILURES  IGNORED",
                "e2e     flaky   2     1         0",
                "e2e     slow    2     0         2",
                "e2e     steady  3     0         0",
            ]
        );
        assert!(text.contains(
            "\ne2e flaky: failed in 1 of 2 runs (run 2/3 of e2e)\n  first failure (run 2/3 of e2e):\n    flaky broke\n"
        ));
        assert!(text.contains("\nrun 3/3 of e2e: cargo failed outside any test (exit code 101); the end of logs/e2e-run-3.log:\n    running 3 tests\n    SIGSEGV\n"));
    }

    #[test]
    fn progress_lines_give_counts_and_time() {
        let report = three_runs().report(&header());
        assert_eq!(
            progress_line(&report.runs[0]),
            "run 1/3 of e2e: 2 passed, 0 failed, 1 ignored (40 s)"
        );
        assert_eq!(
            progress_line(&report.runs[2]),
            "run 3/3 of e2e: 1 passed, 0 failed, and cargo failed outside any test (exit code 101; see logs/e2e-run-3.log) (42 s)"
        );
    }

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(fenced("a ```b``` c"), "````text\na ```b``` c\n````\n");
        assert_eq!(cell("a|b"), "a\\|b");
        assert_eq!(code("x`y"), "x`y");
    }
}
