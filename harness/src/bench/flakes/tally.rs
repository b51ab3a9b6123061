//! The flake count as data: each run's record and each test's counts across the runs
//! ([`Tally`]), and the [`Report`] written as `flakes.json` (rendered by
//! [`super::render`]). No I/O here.

use std::collections::BTreeMap;

use serde::Serialize;

use super::libtest::{Outcome, TestResult};

/// What a report says of where it was measured and how to measure it again.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Header {
    /// When the bench started (RFC 3339, UTC).
    pub date: String,
    /// `git rev-parse HEAD` of the workspace.
    pub commit: String,
    /// Whether the work tree had uncommitted changes (the `--test` runs include them, the
    /// fresh clones do not).
    pub uncommitted_changes: bool,
    /// The machine.
    pub machine: Machine,
    /// The command line that reproduces the report.
    pub command: String,
    /// What each run ran.
    pub each_run: Vec<String>,
}

/// The machine a report was measured on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// CPUs this process may use (what `nproc` counts).
    pub cpus: usize,
    /// `MemTotal` of /proc/meminfo, in KiB.
    pub memory_kib: Option<u64>,
}

impl Machine {
    /// A benchmark report's provenance line: `**Date** ... · **commit** ... · **machine** N
    /// CPUs, M GiB memory · **command** ...`, then a blank line.
    pub fn provenance(&self, date: &str, commit: &str, command: &str) -> String {
        format!(
            "**Date** {date} · **commit** `{commit}` · **machine** {} CPUs, {:.1} GiB memory · \
             **command** `{command}`\n\n",
            self.cpus,
            self.memory_kib.unwrap_or(0) as f64 / 1024.0 / 1024.0,
        )
    }
}

/// `MemTotal` of a /proc/meminfo text, in KiB.
pub fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?.trim();
        rest.strip_suffix("kB")?.trim().parse().ok()
    })
}

/// How many results of each kind a run had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed.
    pub failed: usize,
    /// Tests ignored.
    pub ignored: usize,
}

/// One run: a `cargo test` of a target, or the test command in a fresh clone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// `run 3/30 of upstream_e2e`, `fresh clone 2/3`.
    pub label: String,
    /// Its log (Cargo's and the tests' output), relative to the report's directory.
    pub log: String,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Cargo's exit code (`None`: ended by a signal).
    pub exit_code: Option<i32>,
    /// Its results.
    #[serde(flatten)]
    pub counts: Counts,
    /// When Cargo failed but no test did (a build error, a test binary that crashed or was
    /// killed): the last lines of its log.
    pub outside_tests: Option<String>,
}

/// What explains a run that failed with no failing test: the end of its log; `None` when the
/// run passed or a failing test explains it.
pub fn outside_tests(success: bool, counts: &Counts, log: &str) -> Option<String> {
    (!success && counts.failed == 0).then(|| super::libtest::tail(log))
}

/// A failure of a test in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedRun {
    /// The run's label.
    pub run: String,
    /// The first lines of the test's output in that run.
    pub output: String,
}

/// One test's counts across the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestRow {
    /// Its binary (see [`TestResult::binary`]).
    pub binary: String,
    /// Its name.
    pub test: String,
    /// Runs that reported a result for it.
    pub runs: usize,
    /// Runs it failed in.
    pub failures: usize,
    /// Runs it was ignored in.
    pub ignored: usize,
    /// Each failure, in run order.
    pub failed_runs: Vec<FailedRun>,
}

/// The counts so far. Rows are kept in (binary, test) order.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    runs: Vec<RunRecord>,
    tests: BTreeMap<(String, String), TestRow>,
}

impl Tally {
    /// Counts the results of the run labelled `run`; returns the run's counts.
    pub fn add(&mut self, run: &str, results: &[TestResult]) -> Counts {
        let mut counts = Counts::default();
        for r in results {
            let row = self
                .tests
                .entry((r.binary.clone(), r.name.clone()))
                .or_insert_with(|| TestRow {
                    binary: r.binary.clone(),
                    test: r.name.clone(),
                    runs: 0,
                    failures: 0,
                    ignored: 0,
                    failed_runs: vec![],
                });
            row.runs += 1;
            match r.outcome {
                Outcome::Passed => counts.passed += 1,
                Outcome::Failed => {
                    counts.failed += 1;
                    row.failures += 1;
                    row.failed_runs.push(FailedRun {
                        run: run.to_string(),
                        output: r.failure.clone().unwrap_or_default(),
                    });
                }
                Outcome::Ignored => {
                    counts.ignored += 1;
                    row.ignored += 1;
                }
            }
        }
        counts
    }

    /// Records a run (after [`Tally::add`] of its results).
    pub fn record(&mut self, run: RunRecord) {
        self.runs.push(run);
    }

    /// Whether any test failed in any run, or any run failed outside its tests.
    pub fn failed(&self) -> bool {
        self.tests.values().any(|t| t.failures > 0)
            || self.runs.iter().any(|r| r.outside_tests.is_some())
    }

    /// The report: the runs in order, the tests that failed first (most failures first), then
    /// the rest, each group in (binary, test) order.
    pub fn report(&self, header: &Header) -> Report {
        let mut tests: Vec<TestRow> = self.tests.values().cloned().collect();
        // Stable: equal failure counts keep the map's (binary, test) order.
        tests.sort_by_key(|t| std::cmp::Reverse(t.failures));
        Report {
            header: header.clone(),
            runs: self.runs.clone(),
            tests,
        }
    }
}

/// `flakes.json`: where and how it was measured, every run, every test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Date, commit, machine, command.
    pub header: Header,
    /// The runs, in the order they ran.
    pub runs: Vec<RunRecord>,
    /// The tests, those that failed first.
    pub tests: Vec<TestRow>,
}

impl Report {
    /// The tests that failed at least once.
    pub fn failing(&self) -> impl Iterator<Item = &TestRow> {
        self.tests.iter().filter(|t| t.failures > 0)
    }

    /// The runs that failed outside any test.
    pub fn failed_outside_tests(&self) -> impl Iterator<Item = &RunRecord> {
        self.runs.iter().filter(|r| r.outside_tests.is_some())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn result(binary: &str, name: &str, outcome: Outcome) -> TestResult {
        TestResult {
            binary: binary.into(),
            name: name.into(),
            outcome,
            failure: (outcome == Outcome::Failed).then(|| format!("{name} broke")),
        }
    }

    pub fn header() -> Header {
        Header {
            date: "2026-12-01T02:00:00Z".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            uncommitted_changes: false,
            machine: Machine {
                cpus: 2,
                memory_kib: Some(8_052_736),
            },
            command:
                "cargo run --locked -p harness -- bench flakes --test e2e --runs 3 --test-threads 2"
                    .into(),
            each_run: vec!["cargo test -p harness --test e2e -- --test-threads=2".into()],
        }
    }

    /// Three runs of `e2e`: `steady` passes in each, `flaky` fails in the second, `slow` is
    /// ignored, and the third run's binary crashed after `steady` (a failure outside tests).
    pub fn three_runs() -> Tally {
        use Outcome::{Failed, Ignored, Passed};
        let mut tally = Tally::default();
        let runs = [
            vec![(Passed, "steady"), (Passed, "flaky"), (Ignored, "slow")],
            vec![(Passed, "steady"), (Failed, "flaky"), (Ignored, "slow")],
            vec![(Passed, "steady")],
        ];
        for (i, run) in runs.iter().enumerate() {
            let label = format!("run {}/3 of e2e", i + 1);
            let results: Vec<TestResult> = run.iter().map(|(o, n)| result("e2e", n, *o)).collect();
            let counts = tally.add(&label, &results);
            let success = i == 0;
            tally.record(RunRecord {
                label,
                log: format!("logs/e2e-run-{}.log", i + 1),
                seconds: 40.0 + i as f64,
                exit_code: Some(if success { 0 } else { 101 }),
                counts,
                outside_tests: outside_tests(success, &counts, "running 3 tests\nSIGSEGV"),
            });
        }
        tally
    }

    #[test]
    fn runs_add_up_per_test_and_failures_come_first() {
        let tally = three_runs();
        assert!(tally.failed());
        let report = tally.report(&header());
        let rows: Vec<(&str, usize, usize, usize)> = report
            .tests
            .iter()
            .map(|t| (t.test.as_str(), t.runs, t.failures, t.ignored))
            .collect();
        assert_eq!(
            rows,
            [("flaky", 2, 1, 0), ("slow", 2, 0, 2), ("steady", 3, 0, 0)]
        );
        assert_eq!(
            report.tests[0].failed_runs,
            [FailedRun {
                run: "run 2/3 of e2e".into(),
                output: "flaky broke".into()
            }]
        );
        let counts: Vec<Counts> = report.runs.iter().map(|r| r.counts).collect();
        assert_eq!(
            counts,
            [
                Counts {
                    passed: 2,
                    failed: 0,
                    ignored: 1
                },
                Counts {
                    passed: 1,
                    failed: 1,
                    ignored: 1
                },
                Counts {
                    passed: 1,
                    failed: 0,
                    ignored: 0
                },
            ]
        );
        // The second run's failure is explained by its failing test; the third's is not.
        let outside: Vec<&str> = report
            .failed_outside_tests()
            .map(|r| r.label.as_str())
            .collect();
        assert_eq!(outside, ["run 3/3 of e2e"]);
    }

    #[test]
    fn runs_that_all_pass_fail_nothing() {
        let mut tally = Tally::default();
        let counts = tally.add("run 1/1 of e2e", &[result("e2e", "a", Outcome::Passed)]);
        tally.record(RunRecord {
            label: "run 1/1 of e2e".into(),
            log: "logs/e2e-run-1.log".into(),
            seconds: 1.0,
            exit_code: Some(0),
            counts,
            outside_tests: outside_tests(true, &counts, ""),
        });
        assert!(!tally.failed());
    }

    #[test]
    fn the_json_names_every_field() {
        let json = serde_json::to_value(three_runs().report(&header())).unwrap();
        assert_eq!(json["header"]["machine"]["cpus"], 2);
        assert_eq!(json["runs"][1]["failed"], 1);
        assert_eq!(json["runs"][2]["outside_tests"], "running 3 tests\nSIGSEGV");
        assert_eq!(json["tests"][0]["failed_runs"][0]["run"], "run 2/3 of e2e");
    }

    #[test]
    fn memory_is_read_from_meminfo() {
        let meminfo = "MemTotal:        8052736 kB\nMemFree:         1234567 kB\n";
        assert_eq!(mem_total_kib(meminfo), Some(8_052_736));
        assert_eq!(mem_total_kib("MemFree: 1 kB\n"), None);
    }
}
