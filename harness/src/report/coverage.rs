//! API field coverage in reports: start with [`coverage_of`], the coverage of a run's results;
//! [`run_coverage`] reads it back from a recorded `report.json` ([`Recorded`]) for `harness
//! coverage`, and [`coverage_table`] and [`uncovered_list`] print it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::results::ScenarioResult;
use crate::scenario::coverage::{ApiFields, Coverage};
use crate::scenario::record::Sends;

/// The field coverage of `fields` by what `results` sent (every attempt counts).
pub fn coverage_of<'a>(
    fields: &[ApiFields],
    results: impl Iterator<Item = &'a ScenarioResult>,
) -> Coverage {
    let mut sent = Sends::default();
    for r in results {
        sent.merge(&r.sent);
    }
    Coverage::compute(fields, &sent)
}

/// The writes recorded in a run's `report.json`, for `harness coverage`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Recorded {
    /// The run's plan: its controller (`openkruise@v1.9.0`).
    #[serde(default)]
    plan: Option<RecordedPlan>,
    /// Scenario names and what they sent.
    results: Vec<RecordedResult>,
}

#[derive(Debug, Clone, serde::Deserialize)]
struct RecordedPlan {
    controller: crate::controller::ControllerRef,
}

#[derive(Debug, Clone, serde::Deserialize)]
struct RecordedResult {
    scenario: String,
    #[serde(default)]
    sent: Sends,
}

/// A `report.json` that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No such file.
    #[error(
        "read {}: there is no report there; run the scenarios first (`harness run` with the \
         same selection) or name a run's report.json with --from",
        path.display()
    )]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// Unreadable or not a report.
    #[error("read {}: not a harness report.json", path.display())]
    Invalid {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Recorded {
    /// Reads `report.json` at `path`.
    pub fn load(path: &Path) -> Result<Self, ReadError> {
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::Missing { path: path.into() },
            _ => ReadError::Invalid {
                path: path.into(),
                source: Box::new(e),
            },
        })?;
        serde_json::from_slice(&bytes).map_err(|e| ReadError::Invalid {
            path: path.into(),
            source: Box::new(e),
        })
    }

    /// The controller the run tested.
    pub fn controller(&self) -> Option<&crate::controller::ControllerRef> {
        self.plan.as_ref().map(|p| &p.controller)
    }

    /// The scenarios that have a result.
    pub fn scenarios(&self) -> BTreeSet<&str> {
        self.results.iter().map(|r| r.scenario.as_str()).collect()
    }

    /// What the scenarios `keep` selects sent.
    pub fn sends(&self, keep: impl Fn(&str) -> bool) -> Sends {
        let mut out = Sends::default();
        for r in self.results.iter().filter(|r| keep(&r.scenario)) {
            out.merge(&r.sent);
        }
        out
    }
}

/// The field coverage of the scenarios a filter selects, read from a recorded run.
pub struct RunCoverage {
    /// Own spec fields set against the controller's CRDs.
    pub coverage: Coverage,
    /// Selected scenarios (upgrade ones aside) with no result in the report: they count for
    /// nothing.
    pub missing: Vec<String>,
}

/// Computes the coverage of the scenarios `filter` selects from the `report.json` at `path`,
/// against the CRDs of `controller` (or of the controller the run tested, or the default).
pub async fn run_coverage(
    filter: &crate::run::plan::Filter,
    path: &Path,
    controller: Option<crate::controller::ControllerRef>,
) -> anyhow::Result<RunCoverage> {
    let all = crate::suites::all();
    filter.check_suites(&all)?;
    let selected: Vec<&str> = all
        .iter()
        .filter(|s| filter.selects(s))
        .map(|s| s.name.as_ref())
        .collect();
    anyhow::ensure!(
        !selected.is_empty(),
        "select scenarios: the filters match none (see `harness run --list`)"
    );
    let recorded = Recorded::load(path)?;
    let controller = controller
        .or_else(|| recorded.controller().cloned())
        .unwrap_or_else(crate::controller::ControllerRef::default_ref)
        .controller();
    let groups = controller.api_groups();
    let fields: Vec<ApiFields> = controller
        .crds()
        .await?
        .iter()
        .filter(|c| groups.contains(&c["spec"]["group"].as_str().unwrap_or_default()))
        .flat_map(ApiFields::of_crd)
        .collect();
    let coverage = Coverage::compute(&fields, &recorded.sends(|s| selected.contains(&s)));
    let ran = recorded.scenarios();
    let missing = selected
        .iter()
        .filter(|s| !ran.contains(**s))
        .filter(|s| all.iter().any(|x| x.name == **s && !x.requires.upgrade))
        .map(|s| s.to_string())
        .collect();
    Ok(RunCoverage { coverage, missing })
}

/// The uncovered own fields of every kind, one kind per paragraph.
pub fn uncovered_list(c: &Coverage) -> String {
    let mut out = String::new();
    for k in c.kinds.iter().filter(|k| !k.uncovered.is_empty()) {
        out.push_str(&format!(
            "{}/{} {} — {} of {} uncovered:\n",
            k.group,
            k.kind,
            k.version,
            k.uncovered.len(),
            k.total()
        ));
        for f in &k.uncovered {
            out.push_str(&format!("  {f}\n"));
        }
    }
    out
}

/// The coverage table for a terminal: one line per kind, then the total.
pub fn coverage_table(c: &Coverage) -> String {
    let mut out = format!(
        "{:<44} {:<9} {:>9} {:>8}  {}\n",
        "API FIELD COVERAGE (own spec fields)",
        "VERSION",
        "FIELDS",
        "PERCENT",
        "TEMPLATE FIELDS SET"
    );
    let (mut covered, mut total) = (0, 0);
    for k in &c.kinds {
        covered += k.covered.len();
        total += k.total();
        let inner: usize = k.template_fields.values().map(|f| f.len()).sum();
        out.push_str(&format!(
            "{:<44} {:<9} {:>9} {:>7.0}%  {inner}\n",
            format!("{}/{}", k.group, k.kind),
            k.version,
            format!("{}/{}", k.covered.len(), k.total()),
            k.percent()
        ));
    }
    let pct = if total == 0 {
        0.0
    } else {
        100.0 * covered as f64 / total as f64
    };
    out.push_str(&format!(
        "{:<44} {:<9} {:>9} {:>7.0}%\n",
        "all kinds",
        "",
        format!("{covered}/{total}"),
        pct
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn run_coverage_names_an_empty_selection_and_a_missing_report() {
        let none = crate::run::plan::Filter {
            focus: vec!["no-scenario-has-this-name".into()],
            ..Default::default()
        };
        let e = run_coverage(&none, Path::new("/nonexistent/report.json"), None)
            .await
            .err()
            .expect("an empty selection is an error");
        assert!(e.to_string().contains("match none"), "{e}");
        let all = crate::run::plan::Filter::default();
        let e = run_coverage(&all, Path::new("/nonexistent/report.json"), None)
            .await
            .err()
            .expect("a missing report is an error");
        assert!(e.to_string().contains("/nonexistent/report.json"), "{e}");
    }
}
