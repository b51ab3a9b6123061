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
