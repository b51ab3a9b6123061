//! Ginkgo's JSON report (`--ginkgo.json-report`), read into one [`Spec`] per spec that ran or
//! was skipped: how a Go end-to-end suite (OpenKruise's own) becomes harness results. Start
//! with [`parse`].

use std::collections::BTreeMap;

use serde::Deserialize;

/// What became of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecState {
    /// It passed.
    Passed,
    /// It failed: an assertion, a panic, a timeout or an abort.
    Failed,
    /// A signal interrupted it (the run was stopped while it ran): neither passed nor failed.
    Interrupted,
    /// Not run: filtered out, skipped by the spec itself, or pending.
    Skipped,
}

/// One spec of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Its name in the harness: its [`Spec::text`], and when another spec of the report has
    /// the same text (OpenKruise's v1alpha1 and v1beta1 suites share many), the file it is
    /// written in after it, from the suite's directory on: `SidecarSet ... metadata
    /// [apps/v1beta1/sidecarset.go]`.
    pub name: String,
    /// Its full text: the container texts and the spec's own, joined by spaces (what
    /// `--ginkgo.focus` matches).
    pub text: String,
    /// The outermost container's text (the suite's area, e.g. `[apps] CloneSet`).
    pub area: String,
    /// What became of it.
    pub state: SpecState,
    /// Its run time.
    pub seconds: f64,
    /// The failure message (and where), for a failed spec; the skip message for a spec that
    /// skipped itself.
    pub message: Option<String>,
    /// Where the spec's own node (`It`) is written: source file and line.
    pub location: Option<(String, u64)>,
}

#[derive(Deserialize)]
struct Report {
    #[serde(rename = "SpecReports", default)]
    spec_reports: Vec<SpecReport>,
}

#[derive(Deserialize)]
struct SpecReport {
    #[serde(rename = "ContainerHierarchyTexts", default)]
    containers: Vec<String>,
    #[serde(rename = "LeafNodeType", default)]
    leaf_type: String,
    #[serde(rename = "LeafNodeText", default)]
    leaf_text: String,
    #[serde(rename = "State", default)]
    state: String,
    #[serde(rename = "RunTime", default)]
    run_time_ns: i64,
    #[serde(rename = "Failure", default)]
    failure: Option<Failure>,
    #[serde(rename = "LeafNodeLocation", default)]
    leaf_location: Option<Location>,
}

#[derive(Deserialize)]
struct Failure {
    #[serde(rename = "Message", default)]
    message: String,
    #[serde(rename = "Location", default)]
    location: Option<Location>,
}

#[derive(Deserialize)]
struct Location {
    #[serde(rename = "FileName", default)]
    file: String,
    #[serde(rename = "LineNumber", default)]
    line: u64,
}

/// How Ginkgo's failure message of a spec a signal interrupted starts.
const INTERRUPTED_BY_SIGNAL: &str = "Interrupted by User";

/// The specs of a Ginkgo JSON report (an array of suite reports), in report order. Suite-level
/// nodes (`BeforeSuite` and the like) appear only when they failed, named after their type.
pub fn parse(json: &str) -> Result<Vec<Spec>, String> {
    let reports: Vec<Report> =
        serde_json::from_str(json).map_err(|e| format!("read the Ginkgo JSON report: {e}"))?;
    let mut out = vec![];
    for r in reports {
        for s in r.spec_reports {
            let by_signal = s
                .failure
                .as_ref()
                .is_some_and(|f| f.message.starts_with(INTERRUPTED_BY_SIGNAL));
            let state = match s.state.as_str() {
                "passed" => SpecState::Passed,
                "skipped" | "pending" => SpecState::Skipped,
                "interrupted" if by_signal => SpecState::Interrupted,
                // failed, panicked, timedout, aborted, interrupted by another process
                _ => SpecState::Failed,
            };
            let is_spec = s.leaf_type == "It";
            if !is_spec && state != SpecState::Failed {
                continue;
            }
            let mut parts = s.containers.clone();
            parts.push(if is_spec {
                s.leaf_text.clone()
            } else {
                format!("[{}]", s.leaf_type)
            });
            let message = s
                .failure
                .as_ref()
                .filter(|f| !f.message.is_empty())
                .map(|f| match &f.location {
                    Some(l) if !l.file.is_empty() => {
                        format!("{} ({}:{})", f.message.trim_end(), l.file, l.line)
                    }
                    _ => f.message.trim_end().to_string(),
                });
            out.push(Spec {
                name: parts.join(" "),
                text: parts.join(" "),
                area: s.containers.first().cloned().unwrap_or_default(),
                state,
                seconds: s.run_time_ns as f64 / 1e9,
                message,
                location: s
                    .leaf_location
                    .as_ref()
                    .filter(|l| !l.file.is_empty())
                    .map(|l| (l.file.clone(), l.line)),
            });
        }
    }
    disambiguate(&mut out);
    Ok(out)
}

/// Names specs that share their text after their file (and line, when one file has both),
/// from the suite's directory (`test/e2e/`) on.
fn disambiguate(specs: &mut [Spec]) {
    fn counts<'a>(names: impl Iterator<Item = &'a String>) -> BTreeMap<String, usize> {
        let mut c = BTreeMap::new();
        for n in names {
            *c.entry(n.clone()).or_default() += 1;
        }
        c
    }
    let short = |file: &str| -> String {
        file.split_once("/test/e2e/")
            .map_or(file, |x| x.1)
            .to_string()
    };
    let texts = counts(specs.iter().map(|s| &s.text));
    for s in specs.iter_mut().filter(|s| texts[&s.text] > 1) {
        if let Some((file, _)) = &s.location {
            s.name = format!("{} [{}]", s.text, short(file));
        }
    }
    let names = counts(specs.iter().map(|s| &s.name));
    for s in specs.iter_mut().filter(|s| names[&s.name] > 1) {
        if let Some((file, line)) = &s.location {
            s.name = format!("{} [{}:{line}]", s.text, short(file));
        }
    }
}

/// Whether `json` is a Ginkgo JSON report of at least one suite (the `ginkgo` command writes
/// `[]` when the process that reports died before it could).
pub fn has_suite(json: &str) -> bool {
    serde_json::from_str::<Vec<serde_json::Value>>(json).is_ok_and(|r| !r.is_empty())
}

/// A planned spec as a suite's output stream showed it, for a suite that wrote no report.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Its index in the planned specs given to [`streamed`].
    pub index: usize,
    /// How it ended, as its result block says; `None` when it was seen to start and never
    /// seen to end (the suite ran it when it died or was stopped).
    pub ended: Option<SpecState>,
    /// Its run time, as the result block says.
    pub seconds: f64,
}

/// Ginkgo's delimiter line between spec blocks.
const DELIMITER: &str = "------------------------------";

/// The specs among `planned` (a dry run's, with their locations) that a suite's output `log`
/// shows, in the order first seen. Ginkgo's default reporter (`-v`, no colour) writes a block
/// per spec: in one process, the spec's texts and location when it starts and a header
/// (`•`, `• [FAILED] [1.2 seconds]`, ...) when it ends; under the `ginkgo` command with several
/// processes, one block when it ends: the header, then texts and location. A spec is known by
/// its location (`file.go:line` of its `It`), which the dry run's report also gives.
pub fn streamed(log: &str, planned: &[Spec]) -> Vec<Seen> {
    use std::sync::LazyLock;
    static HEADER: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"^(?:•|\+|S|P)(?: \[([A-Z]+)\])?(?: \[([0-9.]+) seconds\])?$")
            .expect("valid")
    });
    static LOCATION: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"^\s*(?:\[It\] )?(\S+\.go):(\d+)$").expect("valid"));
    let by_location: BTreeMap<(String, u64), usize> = planned
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.location.clone().map(|l| (l, i)))
        .collect();
    let clean = without_colour(log);
    let mut seen: Vec<Seen> = vec![];
    // A header whose spec's location comes after it (several processes), the spec whose start
    // was seen last (one process), and the spec a header just ended (its failure block may
    // name its location again).
    let (mut pending, mut current, mut ended): (
        Option<(SpecState, f64)>,
        Option<usize>,
        Option<usize>,
    ) = (None, None, None);
    let end = |seen: &mut Vec<Seen>, index: usize, state: SpecState, seconds: f64| match seen
        .iter_mut()
        .find(|s| s.index == index)
    {
        Some(s) => {
            s.ended = Some(state);
            s.seconds = seconds;
        }
        None => seen.push(Seen {
            index,
            ended: Some(state),
            seconds,
        }),
    };
    for line in clean.lines().map(str::trim_end) {
        if line == DELIMITER {
            ended = None;
            continue;
        }
        if let Some(c) = HEADER.captures(line) {
            let state = match c.get(1).map(|m| m.as_str()) {
                None if line.starts_with('S') || line.starts_with('P') => SpecState::Skipped,
                None => SpecState::Passed,
                Some("SKIPPED" | "PENDING") => SpecState::Skipped,
                Some("INTERRUPTED") => SpecState::Interrupted,
                Some(_) => SpecState::Failed,
            };
            let seconds = c
                .get(2)
                .and_then(|m| m.as_str().parse().ok())
                .unwrap_or_default();
            match current.take() {
                Some(index) => {
                    end(&mut seen, index, state, seconds);
                    ended = Some(index);
                }
                None => pending = Some((state, seconds)),
            }
            continue;
        }
        let Some(c) = LOCATION.captures(line) else {
            continue;
        };
        let Some(&index) = c[2]
            .parse()
            .ok()
            .and_then(|l: u64| by_location.get(&(c[1].to_string(), l)))
        else {
            continue;
        };
        if let Some((state, seconds)) = pending.take() {
            end(&mut seen, index, state, seconds);
            ended = Some(index);
        } else if ended != Some(index) && !seen.iter().any(|s| s.index == index) {
            seen.push(Seen {
                index,
                ended: None,
                seconds: 0.0,
            });
            current = Some(index);
        }
    }
    seen
}

/// `text` without its terminal colour codes (Ginkgo colours some lines even with `--no-color`).
fn without_colour(text: &str) -> std::borrow::Cow<'_, str> {
    static ANSI: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\x1b\[[0-9;]*m").expect("valid"));
    ANSI.replace_all(text, "")
}

/// The lines of a suite's output that say how a process died: a Go panic or fatal error with
/// the lines after it, Ginkgo's word that a process never reported back, a test binary's
/// `--- FAIL`; at most `max` lines, colour codes removed. Empty when the output shows none.
pub fn crash_excerpt(log: &str, max: usize) -> String {
    const MARKS: [&str; 6] = [
        "panic:",
        "Observed a panic",
        "fatal error:",
        "Ginkgo timed out waiting for all parallel procs",
        "--- FAIL:",
        "signal: killed",
    ];
    let clean = without_colour(log);
    let lines: Vec<&str> = clean.lines().collect();
    let mut keep = std::collections::BTreeSet::new();
    for (i, l) in lines.iter().enumerate() {
        if MARKS.iter().any(|m| l.contains(m)) {
            keep.extend(i..(i + 12).min(lines.len()));
        }
    }
    keep.into_iter()
        .take(max)
        .map(|i| lines[i])
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"[{
      "SuitePath": "/e2e", "SuiteDescription": "Kruise e2e suite", "SuiteSucceeded": false,
      "SpecReports": [
        {"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed", "RunTime": 1000},
        {"ContainerHierarchyTexts": ["[apps] CloneSet", "CloneSet Scaling"],
         "LeafNodeType": "It", "LeafNodeText": "scales in normal cases", "State": "passed",
         "RunTime": 2500000000},
        {"ContainerHierarchyTexts": ["[apps] CloneSet", "CloneSet Updating"],
         "LeafNodeType": "It", "LeafNodeText": "in-place update images", "State": "failed",
         "RunTime": 61000000000,
         "Failure": {"Message": "Timed out after 60.001s.\nExpected\n    <int>: 1\nto equal\n    <int>: 2\n",
                     "Location": {"FileName": "/src/test/e2e/apps/cloneset.go", "LineNumber": 412}}},
        {"ContainerHierarchyTexts": ["[apps] StatefulSet"], "LeafNodeType": "It",
         "LeafNodeText": "should be filtered out", "State": "skipped", "RunTime": 0},
        {"LeafNodeType": "AfterSuite", "State": "panicked", "RunTime": 10,
         "Failure": {"Message": "boom"}},
        {"ContainerHierarchyTexts": ["SidecarSet"], "LeafNodeType": "It", "LeafNodeText": "twin",
         "State": "passed", "LeafNodeLocation": {"FileName": "k/test/e2e/apps/v1alpha1/s.go", "LineNumber": 9}},
        {"ContainerHierarchyTexts": ["SidecarSet"], "LeafNodeType": "It", "LeafNodeText": "twin",
         "State": "failed", "LeafNodeLocation": {"FileName": "k/test/e2e/apps/v1beta1/s.go", "LineNumber": 9}},
        {"ContainerHierarchyTexts": ["SidecarSet"], "LeafNodeType": "It", "LeafNodeText": "triplet",
         "State": "passed", "LeafNodeLocation": {"FileName": "k/test/e2e/apps/s.go", "LineNumber": 1}},
        {"ContainerHierarchyTexts": ["SidecarSet"], "LeafNodeType": "It", "LeafNodeText": "triplet",
         "State": "passed", "LeafNodeLocation": {"FileName": "k/test/e2e/apps/s.go", "LineNumber": 2}},
        {"ContainerHierarchyTexts": ["SidecarSet"], "LeafNodeType": "It", "LeafNodeText": "triplet",
         "State": "passed", "LeafNodeLocation": {"FileName": "k/test/e2e/apps/t.go", "LineNumber": 3}}
      ]
    }]"#;

    /// Specs as a dry run gives them: three under `Fixture`, at lines 61, 65 and 70.
    fn planned() -> Vec<Spec> {
        [("passes", 61), ("fails", 65), ("waits until stopped", 70)]
            .into_iter()
            .map(|(leaf, line)| Spec {
                name: format!("Fixture {leaf}"),
                text: format!("Fixture {leaf}"),
                area: "Fixture".into(),
                state: SpecState::Passed,
                seconds: 0.0,
                message: None,
                location: Some(("/f/suite_test.go".into(), line)),
            })
            .collect()
    }

    /// Each seen spec's index and end.
    fn ends(seen: &[Seen]) -> Vec<(usize, Option<SpecState>)> {
        seen.iter().map(|s| (s.index, s.ended)).collect()
    }

    #[test]
    fn one_process_streams_each_spec_s_start_and_its_end() {
        // `-v` in one process, stopped while the third spec ran (as Ginkgo wrote it).
        let log = "Will run 3 of 3 specs\n------------------------------\nFixture passes\n\
            /f/suite_test.go:61\n• [0.000 seconds]\n------------------------------\n\
            Fixture fails\n/f/suite_test.go:65\n  [FAILED] in [It] - /f/suite_test.go:67 @ x\n\
            • [FAILED] [0.000 seconds]\nFixture [It] fails\n/f/suite_test.go:65\n\n  \
            [FAILED] the fixture fails here\n------------------------------\n\
            Fixture waits until stopped\n/f/suite_test.go:70\n  [INTERRUPTED] in [It] - x\n  \
            ------------------------------\n  Interrupted by User\n    Fixture waits until \
            stopped (Spec Runtime: 101ms)\n      /f/suite_test.go:70\n";
        let seen = streamed(log, &planned());
        assert_eq!(
            ends(&seen),
            [
                (0, Some(SpecState::Passed)),
                (1, Some(SpecState::Failed)),
                (2, None)
            ]
        );
        // Its end, once written, ends it.
        let whole = format!(
            "{log}• [INTERRUPTED] [0.101 seconds]\nFixture [It] waits until stopped\n\
             /f/suite_test.go:70\n------------------------------\n\nSummarizing 2 Failures:\n  \
             [FAIL] Fixture [It] fails\n  /f/suite_test.go:67\n"
        );
        let seen = streamed(&whole, &planned());
        assert_eq!(seen[2].ended, Some(SpecState::Interrupted));
        assert_eq!(seen[2].seconds, 0.101);
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn several_processes_stream_each_spec_when_it_ends_and_a_crash_is_excerpted() {
        // The `ginkgo` command, process 1 dead in its first spec (colour codes and all).
        let log = "Running in parallel across 2 processes\n------------------------------\n\
            • [FAILED] [0.010 seconds]\nFixture [It] fails\n/f/suite_test.go:65\n\n  [FAILED] \
            the fixture fails here\n  In [It] at: /f/suite_test.go:67 @ x\n\
            ------------------------------\n• [0.009 seconds]\nFixture waits until stopped\n\
            /f/suite_test.go:70\n------------------------------\n\n\x1b[1m\x1b[38;5;9mGinkgo \
            timed out waiting for all parallel procs to report back\x1b[0m\nOutput from proc 1:\n  \
            panic: runtime error: invalid memory address or nil pointer dereference\n  \
            goroutine 7 [running]:\nOutput from proc 2:\n  --- FAIL: TestFixture (0.10s)\n";
        let seen = streamed(log, &planned());
        assert_eq!(
            ends(&seen),
            [(1, Some(SpecState::Failed)), (2, Some(SpecState::Passed))]
        );
        assert_eq!(seen[0].seconds, 0.01);
        let crash = crash_excerpt(log, 60);
        assert!(
            crash.starts_with("Ginkgo timed out waiting for all parallel procs"),
            "{crash}"
        );
        assert!(crash.contains("panic: runtime error"), "{crash}");
        assert!(!crash.contains('\x1b'), "{crash}");
        assert_eq!(crash_excerpt(log, 2).lines().count(), 2);
        assert_eq!(crash_excerpt("Ran 3 of 3 Specs\nok\n", 60), "");
        // A failure in a setup node names both locations; the spec's is the `It`'s.
        let setup = "------------------------------\n• [FAILED] [1.000 seconds]\n\
            Fixture [BeforeEach] passes\n  [BeforeEach] /f/suite_test.go:40\n  \
            [It] /f/suite_test.go:61\n";
        assert_eq!(
            ends(&streamed(setup, &planned())),
            [(0, Some(SpecState::Failed))]
        );
        assert!(has_suite(r#"[{"SpecReports": []}]"#));
        assert!(!has_suite("[]") && !has_suite("{"));
    }

    #[test]
    fn specs_are_named_by_their_containers_twins_by_their_files_and_suite_nodes_only_when_they_fail()
     {
        let specs = parse(REPORT).unwrap();
        let names: Vec<(&str, SpecState)> =
            specs.iter().map(|s| (s.name.as_str(), s.state)).collect();
        assert_eq!(
            names,
            [
                (
                    "[apps] CloneSet CloneSet Scaling scales in normal cases",
                    SpecState::Passed
                ),
                (
                    "[apps] CloneSet CloneSet Updating in-place update images",
                    SpecState::Failed
                ),
                (
                    "[apps] StatefulSet should be filtered out",
                    SpecState::Skipped
                ),
                ("[AfterSuite]", SpecState::Failed),
                ("SidecarSet twin [apps/v1alpha1/s.go]", SpecState::Passed),
                ("SidecarSet twin [apps/v1beta1/s.go]", SpecState::Failed),
                ("SidecarSet triplet [apps/s.go:1]", SpecState::Passed),
                ("SidecarSet triplet [apps/s.go:2]", SpecState::Passed),
                ("SidecarSet triplet [apps/t.go]", SpecState::Passed),
            ]
        );
        // Ginkgo's regexes match the text, not the name.
        assert_eq!(specs[4].text, "SidecarSet twin");
        assert_eq!(specs[0].area, "[apps] CloneSet");
        assert_eq!(specs[0].seconds, 2.5);
        let failure = specs[1].message.as_deref().unwrap();
        assert!(failure.starts_with("Timed out after 60.001s."), "{failure}");
        assert!(
            failure.ends_with("(/src/test/e2e/apps/cloneset.go:412)"),
            "{failure}"
        );
        assert_eq!(specs[3].message.as_deref(), Some("boom"));
        assert!(
            parse("{")
                .unwrap_err()
                .starts_with("read the Ginkgo JSON report")
        );
    }
}
