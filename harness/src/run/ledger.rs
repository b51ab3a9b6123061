//! The expectations ledger: known bugs as (scenario, controller release range, Kubernetes
//! range) -> expected failure with its signature. Start with [`Ledger::classify`].
//!
//! A table-driven scenario reports each disagreement on a line of its own starting with
//! [`FINDING`]. Such a failure is judged line by line: it is an expected failure only when
//! every one of its lines carries the signature of a known bug predicted for the cell, and an
//! unexpected pass when a predicted bug did not show; one unexplained line makes it a
//! regression, so a known finding never hides a new one.

use serde::{Deserialize, Serialize};

use crate::results::Verdict;
use crate::toolchain::KubeVersion;
use crate::toolchain::versions::Version;

/// One known bug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownBug {
    /// Short id.
    pub id: String,
    /// Scenario name.
    pub scenario: String,
    /// Controller releases that have the bug, inclusive (`v1.5.0`..`v1.7.4`).
    pub controller: Range,
    /// Kubernetes minors it shows on, inclusive (`1.27`..`1.32`).
    pub kubernetes: Range,
    /// Text the failure must contain for the bug to be recognised.
    pub signature: String,
    /// What it is.
    pub summary: String,
}

/// The suffix of a scenario that repeats another on a real node.
pub const REAL_NODE_VARIANT: &str = "-on-a-real-node";

/// The scenario whose ledger entries also judge `scenario`: for a real-node variant its base,
/// otherwise itself.
pub fn base_scenario(scenario: &str) -> &str {
    scenario.strip_suffix(REAL_NODE_VARIANT).unwrap_or(scenario)
}

/// Whether a ledger entry for `entry` judges `scenario`: its own entries, and for a real-node
/// variant its base's.
fn judges(entry: &str, scenario: &str) -> bool {
    entry == scenario || entry == base_scenario(scenario)
}

/// An inclusive version range; either end may be open.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    /// Lowest, inclusive.
    #[serde(default)]
    pub min: Option<String>,
    /// Highest, inclusive.
    #[serde(default)]
    pub max: Option<String>,
}

impl Range {
    /// Whether `v` is inside (comparing only as many numbers as the bound gives, see
    /// [`Version::cmp_within`]: `1.32.5` is within a max of `1.32`, `v1.9.0-rc.1` is below a
    /// min of `v1.9.0`). Something that is not a version (a commit such as `4c2bbcec`) lies
    /// inside no bounded range: where it stands among the releases is unknown, so no known bug
    /// is predicted for it. A bound that is not a version excludes everything.
    pub fn contains(&self, v: &str) -> bool {
        let Some(v) = v.parse::<Version>().ok().filter(|v| v.parts() >= 2) else {
            return self.min.is_none() && self.max.is_none();
        };
        let within = |bound: &str, ok: fn(std::cmp::Ordering) -> bool| {
            bound.parse::<Version>().is_ok_and(|b| ok(v.cmp_within(&b)))
        };
        let above = self.min.as_deref().is_none_or(|m| within(m, |o| o.is_ge()));
        let below = self.max.as_deref().is_none_or(|m| within(m, |o| o.is_le()));
        above && below
    }
}

/// The ledger file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Known bugs.
    pub bugs: Vec<KnownBug>,
}

/// A ledger that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("read the ledger {path}: {detail}")]
pub struct LedgerError {
    path: String,
    detail: String,
}

/// The ledger checked in at `suites/ledger.yaml`.
pub const BUILTIN: &str = include_str!("../../../suites/ledger.yaml");

impl Ledger {
    /// Parses a ledger.
    pub fn parse(text: &str, path: &str) -> Result<Self, LedgerError> {
        let error = |detail: String| LedgerError {
            path: path.into(),
            detail,
        };
        let ledger: Self = serde_saphyr::from_str(text).map_err(|e| error(e.to_string()))?;
        for b in &ledger.bugs {
            let bounds = [&b.controller, &b.kubernetes]
                .into_iter()
                .flat_map(|r| [&r.min, &r.max])
                .flatten();
            for bound in bounds {
                if let Err(e) = bound.parse::<Version>() {
                    return Err(error(format!("bug `{}`: {e}", b.id)));
                }
            }
        }
        Ok(ledger)
    }

    /// Reads and parses a ledger file.
    pub fn load(path: &std::path::Path) -> Result<Self, LedgerError> {
        let text = std::fs::read_to_string(path).map_err(|e| LedgerError {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The checked-in ledger.
    pub fn builtin() -> Self {
        Self::parse(BUILTIN, "suites/ledger.yaml").expect("the checked-in ledger parses")
    }

    /// The known bug predicted for this cell, if any.
    ///
    /// A scenario's real-node variant (its name plus [`REAL_NODE_VARIANT`]) is judged by its
    /// base scenario's entries: the same behaviour on a real kubelet.
    pub fn expected(
        &self,
        scenario: &str,
        controller: &str,
        kubernetes: KubeVersion,
    ) -> Option<&KnownBug> {
        let k = kubernetes.minor_string();
        self.bugs.iter().find(|b| {
            judges(&b.scenario, scenario)
                && b.controller.contains(controller)
                && b.kubernetes.contains(&k)
        })
    }

    /// Every known bug predicted for this cell.
    pub fn predicted(
        &self,
        scenario: &str,
        controller: &str,
        kubernetes: KubeVersion,
    ) -> Vec<&KnownBug> {
        let k = kubernetes.minor_string();
        self.bugs
            .iter()
            .filter(|b| {
                judges(&b.scenario, scenario)
                    && b.controller.contains(controller)
                    && b.kubernetes.contains(&k)
            })
            .collect()
    }

    /// Judges a result: `failure` is the failure text, or None for a pass.
    pub fn classify(
        &self,
        scenario: &str,
        controller: &str,
        kubernetes: KubeVersion,
        failure: Option<&str>,
    ) -> Verdict {
        if let Some(text) = failure
            && text.lines().any(|l| l.starts_with(FINDING))
        {
            return findings(&self.predicted(scenario, controller, kubernetes), text);
        }
        match (self.expected(scenario, controller, kubernetes), failure) {
            (None, None) => Verdict::Pass,
            (None, Some(_)) => Verdict::Fail,
            (Some(bug), None) => Verdict::UnexpectedPass {
                bug: bug.id.clone(),
            },
            (Some(bug), Some(text)) if text.contains(&bug.signature) => Verdict::ExpectedFail {
                bug: bug.id.clone(),
            },
            (Some(_), Some(_)) => Verdict::Fail,
        }
    }
}

pub use crate::scenario::FINDING;

/// Judges a failure made of findings: every line must be explained by a predicted bug, and
/// every predicted bug must show.
fn findings(predicted: &[&KnownBug], text: &str) -> Verdict {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines
        .iter()
        .any(|l| !predicted.iter().any(|b| l.contains(&b.signature)))
    {
        return Verdict::Fail;
    }
    if let Some(missing) = predicted.iter().find(|b| !text.contains(&b.signature)) {
        return Verdict::UnexpectedPass {
            bug: missing.id.clone(),
        };
    }
    Verdict::ExpectedFail {
        bug: predicted
            .iter()
            .map(|b| b.id.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_real_node_variant_is_judged_by_its_base_scenario() {
        let l = Ledger::builtin();
        let k: KubeVersion = "1.32".parse().unwrap();
        let base = "sidecarset/in-place-update-with-injected-sidecar";
        let real = format!("{base}{REAL_NODE_VARIANT}");
        assert_eq!(
            l.expected(&real, "v1.6.0", k).map(|b| &b.id),
            l.expected(base, "v1.6.0", k).map(|b| &b.id)
        );
        assert!(l.expected(&real, "v1.6.0", k).is_some());
        assert!(l.expected(&real, "v1.9.0", k).is_none());
        assert_eq!(base_scenario("a/b"), "a/b");
        // A real-node scenario with no base has entries of its own.
        let own = "cloneset/in-place-resize-changes-the-host-cgroup-limits-on-a-real-node";
        assert!(l.expected(own, "v1.8.3", k).is_some());
        assert!(l.expected(own, "v1.8.3", "1.29".parse().unwrap()).is_none());
        assert!(l.expected(own, "v1.9.0", k).is_none());
    }
    use super::*;

    #[test]
    fn findings_are_expected_only_when_every_line_is_a_known_bug() {
        let l = Ledger::parse(
            "bugs:\n- {id: a, scenario: p, controller: {}, kubernetes: {}, signature: 'case-a:', summary: x}\n- {id: b, scenario: p, controller: {max: v1.7.4}, kubernetes: {}, signature: 'case-b:', summary: x}\n",
            "t",
        )
        .unwrap();
        let k: KubeVersion = "1.32".parse().unwrap();
        let both = "finding: case-a: x\nfinding: case-b: y";
        assert_eq!(
            l.classify("p", "v1.7.0", k, Some(both)),
            Verdict::ExpectedFail { bug: "a, b".into() }
        );
        assert_eq!(
            l.classify(
                "p",
                "v1.7.0",
                k,
                Some("finding: case-a: x\nfinding: case-c: new")
            ),
            Verdict::Fail,
            "a new finding beside known ones is a regression"
        );
        assert_eq!(
            l.classify(
                "p",
                "v1.7.0",
                k,
                Some("finding: case-a: x\ninvariant: boom")
            ),
            Verdict::Fail,
            "so is any other unexplained line"
        );
        assert_eq!(
            l.classify("p", "v1.7.0", k, Some("finding: case-a: x")),
            Verdict::UnexpectedPass { bug: "b".into() }
        );
        assert_eq!(
            l.classify("p", "v1.9.0", k, Some("finding: case-a: x")),
            Verdict::ExpectedFail { bug: "a".into() },
            "b is not predicted past its range"
        );
        assert_eq!(
            l.classify("p", "v1.9.0", k, Some("finding: case-b: y")),
            Verdict::Fail
        );
    }

    fn ledger() -> Ledger {
        Ledger::parse(
            "bugs:\n- id: b1\n  scenario: s\n  controller: {min: v1.5.0, max: v1.7.4}\n  kubernetes: {min: '1.27', max: '1.32'}\n  signature: 'Not found'\n  summary: x\n",
            "t",
        )
        .unwrap()
    }

    #[test]
    fn ranges_compare_by_the_bounds_precision() {
        let r = Range {
            min: Some("1.27".into()),
            max: Some("1.32".into()),
        };
        assert!(r.contains("1.32"));
        assert!(r.contains("1.32.5"));
        assert!(!r.contains("1.33"));
        assert!(!r.contains("1.26"));
        let c = Range {
            min: None,
            max: Some("v1.7.4".into()),
        };
        assert!(c.contains("v1.7.0"));
        assert!(!c.contains("v1.8.0"));
    }

    #[test]
    fn a_pre_release_lies_below_its_release() {
        let since = Range {
            min: Some("v1.9.0".into()),
            max: None,
        };
        assert!(!since.contains("v1.9.0-rc.1"));
        assert!(since.contains("v1.9.0"));
        let until = Range {
            min: None,
            max: Some("v1.8.3".into()),
        };
        assert!(!until.contains("v1.9.0-rc.1"));
        let before = Range {
            min: None,
            max: Some("v1.9.0-rc.2".into()),
        };
        assert!(before.contains("v1.9.0-rc.1"));
        assert!(!before.contains("v1.9.0"));
        let minor = Range {
            min: Some("v1.9".into()),
            max: Some("v1.9".into()),
        };
        assert!(minor.contains("v1.9.0-rc.1"), "a 1.9 pre-release is a 1.9");
        assert!(
            !since.contains("4c2bbcec"),
            "a commit lies in no bounded range"
        );
    }

    #[test]
    fn a_bound_that_is_not_a_version_is_refused() {
        let err = Ledger::parse(
            "bugs:\n- {id: a, scenario: p, controller: {max: latest}, kubernetes: {}, signature: x, summary: x}\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("bug `a`") && err.contains("`latest` is not a version"),
            "{err}"
        );
    }

    #[test]
    fn a_commit_lies_inside_no_bounded_range() {
        let old = Range {
            min: None,
            max: Some("v1.7.4".into()),
        };
        let new = Range {
            min: Some("v1.8.0".into()),
            max: None,
        };
        for commit in ["4c2bbcec", "4c2bbcec10dc", "1234567"] {
            assert!(!old.contains(commit), "{commit}");
            assert!(!new.contains(commit), "{commit}");
            assert!(Range::default().contains(commit), "{commit}");
        }
        let k132: KubeVersion = "1.32".parse().unwrap();
        assert_eq!(ledger().expected("s", "4c2bbcec", k132), None);
        assert_eq!(
            ledger().classify("s", "4c2bbcec", k132, None),
            Verdict::Pass
        );
    }

    #[test]
    fn classification_covers_every_case() {
        let l = ledger();
        let k132: KubeVersion = "1.32".parse().unwrap();
        let k137: KubeVersion = "1.37".parse().unwrap();
        assert_eq!(l.classify("s", "v1.9.0", k132, None), Verdict::Pass);
        assert_eq!(l.classify("s", "v1.9.0", k132, Some("boom")), Verdict::Fail);
        assert_eq!(
            l.classify("s", "v1.7.0", k132, Some("x: Not found: y")),
            Verdict::ExpectedFail { bug: "b1".into() }
        );
        assert_eq!(
            l.classify("s", "v1.7.0", k132, Some("other")),
            Verdict::Fail
        );
        assert_eq!(
            l.classify("s", "v1.7.0", k132, None),
            Verdict::UnexpectedPass { bug: "b1".into() }
        );
        assert_eq!(
            l.classify("s", "v1.7.0", k137, Some("x: Not found")),
            Verdict::Fail
        );
        assert!(Verdict::Fail.fails_run());
        assert!(!Verdict::ExpectedFail { bug: "b".into() }.fails_run());
    }

    #[test]
    fn the_checked_in_ledger_parses_and_names_real_scenarios() {
        let all = crate::suites::all();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_ref()).collect();
        for b in Ledger::builtin().bugs {
            assert!(
                names.contains(&b.scenario.as_str()),
                "{} names no scenario",
                b.id
            );
            assert!(!b.signature.is_empty());
        }
    }
}
