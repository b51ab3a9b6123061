//! Reading what `cargo test` prints: libtest's plain ("pretty") output, with Cargo's
//! `Running ...` lines naming the binary each block of results comes from. Start with
//! [`parse`].
//!
//! Hand-written: libtest's machine-readable output (`--format json`) needs a nightly
//! toolchain, and no maintained crate reads the plain one. Only what is needed is read: a
//! test's result line, the binary it belongs to, and a failed test's `---- <name> stdout ----`
//! section.

use serde::Serialize;

/// How many lines of a failed test's output are kept.
pub const FAILURE_LINES: usize = 40;

/// A test's result in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// `test <name> ... ok`.
    Passed,
    /// `test <name> ... FAILED`.
    Failed,
    /// `test <name> ... ignored` (with or without a reason).
    Ignored,
}

/// One result line, with the binary it came from and, for a failure, the start of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// The test binary: an integration test target's name (`upstream_e2e` for
    /// `tests/upstream_e2e.rs`), `<crate> (<source>)` for unit tests (`harness (src/lib.rs)`),
    /// `<crate> (doc)` for doc tests, `(unknown)` before any `Running` line.
    pub binary: String,
    /// The test's name as libtest prints it (`module::test_name`).
    pub name: String,
    /// Its result.
    pub outcome: Outcome,
    /// For a failure, the first [`FAILURE_LINES`] lines of its `---- <name> stdout ----`
    /// section (empty when the output has none).
    pub failure: Option<String>,
}

/// The binary of results printed before any `Running` line.
const UNKNOWN_BINARY: &str = "(unknown)";

/// Every result line of `output` (Cargo's and the test binaries' output, interleaved as
/// printed), in order, each failure with the start of its output.
pub fn parse(output: &str) -> Vec<TestResult> {
    let mut results: Vec<TestResult> = vec![];
    // (binary, test) -> its output section's lines.
    let mut sections: Vec<(String, String, Vec<&str>)> = vec![];
    let mut binary = UNKNOWN_BINARY.to_string();
    let mut in_section = false;
    for line in output.lines() {
        if let Some(b) = binary_of(line) {
            binary = b;
            in_section = false;
        } else if let Some(name) = section_header(line) {
            sections.push((binary.clone(), name.to_string(), vec![]));
            in_section = true;
        } else if line == "failures:" || line.starts_with("test result: ") {
            in_section = false;
        } else if in_section {
            if let Some((_, _, lines)) = sections.last_mut() {
                lines.push(line);
            }
        } else if let Some((name, outcome)) = result_line(line) {
            results.push(TestResult {
                binary: binary.clone(),
                name: name.to_string(),
                outcome,
                failure: None,
            });
        }
    }
    for r in results.iter_mut().filter(|r| r.outcome == Outcome::Failed) {
        let section = sections
            .iter()
            .find(|(b, n, _)| *b == r.binary && *n == r.name);
        r.failure = Some(section.map_or_else(String::new, |(_, _, lines)| head(lines)));
    }
    results
}

/// The first [`FAILURE_LINES`] of `lines`, blank lines at either end left out, with a note of
/// how many more there were.
fn head(lines: &[&str]) -> String {
    let blank = |l: &&str| l.trim().is_empty();
    let start = lines.iter().position(|l| !blank(l)).unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !blank(l))
        .map_or(start, |i| i + 1);
    let lines = &lines[start..end];
    let mut out = lines[..lines.len().min(FAILURE_LINES)].join("\n");
    if lines.len() > FAILURE_LINES {
        out.push_str(&format!(
            "\n… ({} more lines in the run's log)",
            lines.len() - FAILURE_LINES
        ));
    }
    out
}

/// The last [`FAILURE_LINES`] lines of `text` (what a run that failed outside any test
/// printed last).
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(FAILURE_LINES);
    lines[start..].join("\n")
}

/// `test <name> ... <result>`: the name and the result, for the three results counted.
fn result_line(line: &str) -> Option<(&str, Outcome)> {
    let (name, result) = line.strip_prefix("test ")?.rsplit_once(" ... ")?;
    let outcome = if result == "ok" {
        Outcome::Passed
    } else if result.starts_with("FAILED") {
        Outcome::Failed
    } else if result.starts_with("ignored") {
        Outcome::Ignored
    } else {
        return None;
    };
    Some((name, outcome))
}

/// `---- <name> stdout ----`: the name.
fn section_header(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("---- ")?;
    rest.strip_suffix(" stdout ----")
        .or_else(|| rest.strip_suffix(" stderr ----"))
}

/// The binary a `Running` (or `Doc-tests`) line of Cargo's starts:
/// `Running tests/upstream_e2e.rs (target/debug/deps/upstream_e2e-1a2b)` is `upstream_e2e`,
/// `Running unittests src/lib.rs (target/debug/deps/harness-1a2b)` is `harness (src/lib.rs)`,
/// `Doc-tests harness` is `harness (doc)`.
fn binary_of(line: &str) -> Option<String> {
    let line = line.trim_start();
    if let Some(krate) = line.strip_prefix("Doc-tests ") {
        return Some(format!("{} (doc)", krate.trim()));
    }
    let rest = line.strip_prefix("Running ")?.trim_end();
    let (what, path) = match rest.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
        Some((what, path)) => (what, path),
        // Older Cargo: `Running target/debug/deps/<crate>-<hash>`.
        None => ("", rest),
    };
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let krate = file.rsplit_once('-').map_or(file, |(k, _)| k);
    if let Some(source) = what.strip_prefix("unittests ") {
        return Some(format!("{krate} ({source})"));
    }
    let target = what
        .strip_prefix("tests/")
        .and_then(|t| t.strip_suffix(".rs"))
        .filter(|t| !t.contains('/'));
    Some(target.unwrap_or(krate).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `cargo test` printed for two binaries: one of each result, a failure with its
    /// output section, and the compiler's lines around them.
    const SAMPLE: &str = "\
   Compiling harness v0.1.0 (/work/main/harness)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.01s
     Running unittests src/lib.rs (target/debug/deps/harness-0f1e2d3c4b5a6978)

running 2 tests
test bench::tests::median_of_odd_and_even_counts ... ok
test run::tests::slow ... ignored, nightly tier: more releases

test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/upstream_e2e.rs (target/debug/deps/upstream_e2e-9a8b7c6d5e4f3a2b)

running 3 tests
test a_focused_upstream_spec_set_runs ... ok
test the_daemon_s_specs_run_on_real_nodes ... ignored
test a_stopped_run_keeps_its_specs_results ... FAILED

failures:

---- a_stopped_run_keeps_its_specs_results stdout ----

thread 'a_stopped_run_keeps_its_specs_results' panicked at harness/tests/upstream_e2e.rs:250:5:
the suite's processes are gone: [(4242, \"e2e.test\")]
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    a_stopped_run_keeps_its_specs_results

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 61.20s

error: test failed, to rerun pass `-p harness --test upstream_e2e`
";

    fn result(binary: &str, name: &str, outcome: Outcome, failure: Option<&str>) -> TestResult {
        TestResult {
            binary: binary.into(),
            name: name.into(),
            outcome,
            failure: failure.map(String::from),
        }
    }

    #[test]
    fn a_sample_output_gives_each_result_its_binary_and_the_failure_its_output() {
        let lib = "harness (src/lib.rs)";
        assert_eq!(
            parse(SAMPLE),
            [
                result(
                    lib,
                    "bench::tests::median_of_odd_and_even_counts",
                    Outcome::Passed,
                    None
                ),
                result(lib, "run::tests::slow", Outcome::Ignored, None),
                result(
                    "upstream_e2e",
                    "a_focused_upstream_spec_set_runs",
                    Outcome::Passed,
                    None
                ),
                result(
                    "upstream_e2e",
                    "the_daemon_s_specs_run_on_real_nodes",
                    Outcome::Ignored,
                    None
                ),
                result(
                    "upstream_e2e",
                    "a_stopped_run_keeps_its_specs_results",
                    Outcome::Failed,
                    Some(
                        "thread 'a_stopped_run_keeps_its_specs_results' panicked at harness/tests/upstream_e2e.rs:250:5:\n\
                         the suite's processes are gone: [(4242, \"e2e.test\")]\n\
                         note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
                    )
                ),
            ]
        );
    }

    #[test]
    fn running_lines_name_the_binary() {
        for (line, binary) in [
            (
                "     Running tests/ginkgo_fixture.rs (target/debug/deps/ginkgo_fixture-0123abcd)",
                "ginkgo_fixture",
            ),
            (
                "     Running unittests src/main.rs (/tmp/t/debug/deps/harness-0123abcd)",
                "harness (src/main.rs)",
            ),
            ("   Doc-tests harness", "harness (doc)"),
            (
                "     Running target/debug/deps/upstream_e2e-0123abcd",
                "upstream_e2e",
            ),
        ] {
            assert_eq!(binary_of(line).as_deref(), Some(binary), "{line}");
        }
        assert_eq!(binary_of("test result: ok. 1 passed"), None);
    }

    #[test]
    fn a_failure_keeps_its_first_lines_and_says_how_many_more() {
        let body: Vec<String> = (1..=45).map(|i| format!("line {i}")).collect();
        let output = format!(
            "test t ... FAILED\n\nfailures:\n\n---- t stdout ----\n{}\n\n\nfailures:\n    t\n",
            body.join("\n")
        );
        let failure = parse(&output)[0].failure.clone().unwrap();
        assert_eq!(failure.lines().count(), FAILURE_LINES + 1);
        assert!(failure.starts_with("line 1\n"));
        assert!(failure.ends_with("line 40\n… (5 more lines in the run's log)"));
    }

    #[test]
    fn lines_that_are_not_results_are_skipped() {
        let output = "\
test slow_one has been running for over 60 seconds
test result: FAILED. 0 passed; 1 failed
test odd ... bench:         120 ns/iter (+/- 3)
test src/lib.rs - wait (line 12) ... ok
";
        assert_eq!(
            parse(output),
            [result(
                UNKNOWN_BINARY,
                "src/lib.rs - wait (line 12)",
                Outcome::Passed,
                None
            )]
        );
    }

    #[test]
    fn the_tail_is_the_last_lines() {
        let text: Vec<String> = (1..=50).map(|i| i.to_string()).collect();
        let t = tail(&text.join("\n"));
        assert_eq!(t.lines().count(), FAILURE_LINES);
        assert!(t.starts_with("11\n") && t.ends_with("\n50"));
    }
}
