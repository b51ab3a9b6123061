//! `harness report explain`: what explains each finding of an exploration (beside the
//! rediscovery benchmark, whose list it reads). Start with [`explain`] and [`markdown`].
//!
//! A finding is explained by a **known bug** when an entry of the rediscovery list
//! (`suites/rediscovery.yaml`: each ledger entry that needs no real node, with the finding
//! that shows it) matches it ([`explains`]: on its subject or, for a policy, on its target,
//! served versions and claim templates aside) and the ledger puts the exploration's release
//! inside the bug's range; or by a **documented difference** when an entry of `suites/differences.yaml` matches
//! it (the controller differs from its native twin, or from what its API says, by design or by
//! a choice its documentation does not make, each with its words). Otherwise it is
//! **unexplained**: a new bug to ledger with a catalog scenario, a difference to write down, or
//! the harness's own mistake to mend. Neither file is read by the explorer: exploration knows
//! no bug and no difference.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::bench::rediscovery::{List, Wanted};
use crate::explore::Reported;
use crate::explore::Summary;
use crate::run::ledger::{Ledger, Range};

/// The checked-in differences, `suites/differences.yaml`.
pub const DIFFERENCES: &str = include_str!("../../../suites/differences.yaml");

/// The documented differences (`suites/differences.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Differences {
    /// The differences.
    pub differences: Vec<Difference>,
}

/// One documented difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    /// A short name.
    pub id: String,
    /// The finding it explains (oracle, kind, key, as the rediscovery list writes them).
    pub finding: Wanted,
    /// The controller's releases it holds on (any, without one).
    #[serde(default)]
    pub controller: Range,
    /// What differs and why.
    pub why: String,
}

impl Differences {
    /// Parses and checks `text` read from `path`.
    pub fn parse(text: &str, path: &str) -> anyhow::Result<Self> {
        let d: Differences = serde_saphyr::from_str(text)
            .map_err(|e| anyhow::anyhow!("{path} is not a list of differences: {e}"))?;
        let mut ids = std::collections::BTreeSet::new();
        for x in &d.differences {
            anyhow::ensure!(
                ids.insert(x.id.as_str()),
                "{path}: the difference `{}` is listed twice",
                x.id
            );
            anyhow::ensure!(
                !x.why.trim().is_empty(),
                "{path}: the difference `{}` says nothing of why (`why:`)",
                x.id
            );
        }
        Ok(d)
    }

    /// The checked-in differences.
    pub fn builtin() -> Self {
        Self::parse(DIFFERENCES, "suites/differences.yaml").expect("the checked-in differences")
    }
}

/// What explains a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "by", content = "id")]
pub enum Explanation {
    /// A ledgered bug, by id.
    Bug(String),
    /// A documented difference, by id.
    Difference(String),
    /// Nothing.
    Unexplained,
}

/// A finding and what explains it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explained {
    /// The finding's oracle, short (`O4`).
    pub oracle: String,
    /// Its subject.
    pub subject: String,
    /// Its key.
    pub key: String,
    /// Confirming runs that fired it, of `confirm_runs`.
    pub reproduced: usize,
    /// Confirming runs.
    pub confirm_runs: usize,
    /// Its directory.
    pub dir: String,
    /// What explains it.
    pub by: Explanation,
    /// The key of the finding its trial fired beside it that explains it ([`explain`]), when
    /// its own key explains nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beside: Option<String>,
}

impl Explained {
    /// Whether it was confirmed and reproduced every time.
    pub fn stable(&self) -> bool {
        self.confirm_runs > 0 && self.reproduced == self.confirm_runs
    }

    /// `3/3`, or `not confirmed`.
    fn confirmed(&self) -> String {
        match self.confirm_runs {
            0 => "not confirmed".into(),
            n => format!("{}/{n}", self.reproduced),
        }
    }
}

/// The release of `controller` (`openkruise@v1.9.0` is `v1.9.0`).
fn release(controller: &str) -> &str {
    controller.rsplit_once('@').map_or(controller, |(_, r)| r)
}

/// The subjects a finding on `subject` is a finding of, each without its served versions and
/// claim templates: the subject, and for a policy over a target its target (and the target's
/// own targets): `SidecarSet@v1beta1.UnitedDeployment.cloneSetTemplateWithClaims@v1beta1` is a
/// finding of `SidecarSet.UnitedDeployment.cloneSetTemplate` and of
/// `UnitedDeployment.cloneSetTemplate`, whose pods the policy's trial judged.
pub fn seen_on(subject: &str) -> Vec<String> {
    let segments: Vec<&str> = subject
        .split('.')
        .map(|s| s.split('@').next().unwrap_or(s))
        .map(|s| s.strip_suffix(crate::explore::subject::CLAIMS).unwrap_or(s))
        .collect();
    (0..segments.len())
        .map(|i| segments[i..].join("."))
        .collect()
}

/// Whether `w` is `r` ([`Wanted::key_as`]) on a subject `r` is a finding of ([`seen_on`]).
pub fn explains(w: &Wanted, r: &Reported) -> bool {
    seen_on(&r.finding.subject)
        .iter()
        .any(|s| w.key_as(r, s).is_some())
}

/// What explains `r`, found on `release`: a bug of `list` the ledger puts `release` in the
/// range of (an entry without a ledger entry of its own: from its bad release up to its fixed
/// one), else a difference of `differences` whose range holds it.
pub fn explain_one(
    r: &Reported,
    release: &str,
    list: &List,
    ledger: &Ledger,
    differences: &Differences,
) -> Explanation {
    let in_range = |id: &str, bad: &str| match ledger.bugs.iter().find(|k| k.id == id) {
        Some(k) => k.controller.contains(release),
        None => Range {
            min: None,
            max: Some(bad.to_string()),
        }
        .contains(release),
    };
    if let Some(b) = list
        .bugs
        .iter()
        .find(|b| explains(&b.finding, r) && in_range(&b.id, &b.bad))
    {
        return Explanation::Bug(b.id.clone());
    }
    match differences
        .differences
        .iter()
        .find(|d| explains(&d.finding, r) && d.controller.contains(release))
    {
        Some(d) => Explanation::Difference(d.id.clone()),
        None => Explanation::Unexplained,
    }
}

/// Every finding of `summary`, in the order first seen, with what explains it: its own key
/// ([`explain_one`]), else what explains another finding of the same trial by its own key
/// (the first seen of them). One trial often fires several oracles for one cause (a refused pod, then too few
/// live pods and a generation never observed), and its first finding names the cause; the
/// row says which finding it stands beside.
pub fn explain(
    summary: &Summary,
    list: &List,
    ledger: &Ledger,
    differences: &Differences,
) -> Vec<Explained> {
    let release = release(&summary.controller);
    let mut rows: Vec<Explained> = summary
        .findings
        .iter()
        .map(|r| Explained {
            oracle: r.finding.oracle.short().to_string(),
            subject: r.finding.subject.clone(),
            key: r.finding.key.clone(),
            reproduced: r.reproduced,
            confirm_runs: r.confirm_runs,
            dir: r.dir.display().to_string(),
            by: explain_one(r, release, list, ledger, differences),
            beside: None,
        })
        .collect();
    let own: Vec<Explanation> = rows.iter().map(|e| e.by.clone()).collect();
    for (i, r) in summary.findings.iter().enumerate() {
        if own[i] != Explanation::Unexplained {
            continue;
        }
        if let Some(j) = summary.findings.iter().enumerate().position(|(j, o)| {
            j != i && o.original == r.original && own[j] != Explanation::Unexplained
        }) {
            rows[i].by = own[j].clone();
            rows[i].beside = Some(summary.findings[j].finding.key.clone());
        }
    }
    rows
}

/// Whether every finding is explained.
pub fn all_explained(rows: &[Explained]) -> bool {
    rows.iter().all(|e| e.by != Explanation::Unexplained)
}

/// The explanation as Markdown: a count, then a table of the findings, the unexplained first.
pub fn markdown(summary: &Summary, rows: &[Explained], differences: &Differences) -> String {
    let count = |f: fn(&Explanation) -> bool| rows.iter().filter(|e| f(&e.by)).count();
    let bugs = count(|b| matches!(b, Explanation::Bug(_)));
    let diffs = count(|b| matches!(b, Explanation::Difference(_)));
    let none = count(|b| *b == Explanation::Unexplained);
    let stable_none = rows
        .iter()
        .filter(|e| e.by == Explanation::Unexplained && e.stable())
        .count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## What explains the findings of {} on Kubernetes {}\n\n{} findings: {bugs} a known \
         bug, {diffs} a documented difference, **{none} unexplained** ({stable_none} of them \
         confirmed and reproduced every time).\n",
        summary.controller,
        summary.kubernetes,
        rows.len()
    );
    if rows.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "| oracle | subject | key | reproduced | explained by |"
    );
    let _ = writeln!(out, "|---|---|---|--:|---|");
    let mut sorted: Vec<&Explained> = rows.iter().collect();
    sorted.sort_by_key(|e| e.by != Explanation::Unexplained);
    for e in sorted {
        let by = match &e.by {
            Explanation::Bug(id) => format!("bug `{id}`"),
            Explanation::Difference(id) => {
                let why = differences
                    .differences
                    .iter()
                    .find(|d| &d.id == id)
                    .map_or("", |d| d.why.as_str());
                format!("difference `{id}`: {why}")
            }
            Explanation::Unexplained => "**unexplained**".into(),
        };
        let by = match &e.beside {
            Some(k) => format!("beside `{k}` in its trial: {by}"),
            None => by,
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} |",
            e.oracle,
            e.subject,
            e.key.replace('|', "\\|"),
            e.confirmed(),
            by.replace('|', "\\|")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rediscovery::fixtures;
    use crate::explore::oracle::Oracle;

    /// A stable finding `key` of `subject`, confirmed 3 of 3.
    fn reported(oracle: Oracle, subject: &str, key: &str) -> Reported {
        fixtures::reported(fixtures::finding(oracle, subject, key), 1.0, true)
    }

    fn differences() -> Differences {
        Differences::parse(
            "differences:\n\
             - id: mutable-history\n  finding: {oracle: O4, kind: AdvancedStatefulSet, key: \"admits on update of spec.revisionHistoryLimit\"}\n  why: its spec is mutable\n\
             - id: old-only\n  finding: {oracle: O4, kind: CloneSet, key: \"spec.old\"}\n  controller: {max: v1.6.0}\n  why: before v1.7.0\n",
            "t.yaml",
        )
        .unwrap()
    }

    /// What explains `r` on `release`, with the checked-in list and ledger and the test's
    /// differences.
    fn by(r: &Reported, release: &str) -> Explanation {
        explain_one(
            r,
            release,
            &List::builtin(),
            &Ledger::builtin(),
            &differences(),
        )
    }

    #[test]
    fn a_finding_is_a_bug_in_its_ledger_range_else_a_difference_else_unexplained() {
        let over = reported(
            Oracle::Native,
            "CloneSet",
            "admits on create of spec.updateStrategy.maxUnavailable as a percentage over 100 what Deployment does not",
        );
        assert_eq!(
            by(&over, "v1.9.0"),
            Explanation::Bug("kruise-cloneset-max-unavailable-over-100-percent".into())
        );
        // A bug fixed before the release does not explain it: the numeric string was fixed in
        // v1.9.0.
        let string = reported(
            Oracle::Native,
            "CloneSet",
            "admits on create of spec.updateStrategy.maxUnavailable as a numeric string what Deployment does not",
        );
        assert!(matches!(by(&string, "v1.8.3"), Explanation::Bug(_)));
        assert_eq!(by(&string, "v1.9.0"), Explanation::Unexplained);
        let history = reported(
            Oracle::Native,
            "AdvancedStatefulSet@v1alpha1",
            "admits on update of spec.revisionHistoryLimit as a positive number what StatefulSet does not",
        );
        assert_eq!(
            by(&history, "v1.9.0"),
            Explanation::Difference("mutable-history".into())
        );
        // A difference outside its range, or another oracle: unexplained.
        let old = reported(Oracle::Native, "CloneSet", "admits on create of spec.old");
        assert_eq!(by(&old, "v1.9.0"), Explanation::Unexplained);
        assert_eq!(
            by(&old, "v1.5.5"),
            Explanation::Difference("old-only".into())
        );
        let mut other = history.clone();
        other.finding.oracle = Oracle::Realizable;
        assert_eq!(by(&other, "v1.9.0"), Explanation::Unexplained);
    }

    #[test]
    fn a_finding_through_a_policy_or_with_claims_is_one_of_its_target_s_kind() {
        assert_eq!(
            seen_on("SidecarSet@v1beta1.UnitedDeployment.cloneSetTemplateWithClaims@v1beta1"),
            [
                "SidecarSet.UnitedDeployment.cloneSetTemplate",
                "UnitedDeployment.cloneSetTemplate",
                "cloneSetTemplate"
            ]
        );
        assert_eq!(seen_on("CloneSet"), ["CloneSet"]);
        let revisions = |subject: &str| {
            reported(
                Oracle::Convergence,
                subject,
                "does not converge: revision numbers: 2 revisions share number 1",
            )
        };
        let bug = Explanation::Bug(
            "kruise-uniteddeployment-cloneset-template-revisions-unlabelled".into(),
        );
        for s in [
            "UnitedDeployment.cloneSetTemplate",
            "UnitedDeployment.cloneSetTemplateWithClaims@v1beta1",
            "PodUnavailableBudget@v1beta1.UnitedDeployment.cloneSetTemplate",
        ] {
            assert_eq!(by(&revisions(s), "v1.9.0"), bug, "{s}");
        }
        // Another member, or a policy over another kind: not that bug.
        for s in [
            "UnitedDeployment.statefulSetTemplate",
            "SidecarSet.CloneSet",
        ] {
            assert_eq!(by(&revisions(s), "v1.9.0"), Explanation::Unexplained, "{s}");
        }
    }

    #[test]
    fn the_report_counts_and_lists_the_unexplained_first() {
        let list = List::builtin();
        let ledger = Ledger::builtin();
        let d = differences();
        let mut flaky = reported(Oracle::Health, "BroadcastJob", "controller panicked");
        flaky.reproduced = 1;
        let mut unconfirmed = reported(Oracle::Health, "CloneSet", "controller panicked");
        unconfirmed.reproduced = 0;
        unconfirmed.confirm_runs = 0;
        let summary = Summary {
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32.5".into(),
            seed: 1,
            trials: Default::default(),
            findings: vec![
                reported(
                    Oracle::Native,
                    "AdvancedStatefulSet",
                    "admits on update of spec.revisionHistoryLimit as zero what StatefulSet does not",
                ),
                flaky,
                unconfirmed,
            ],
            seconds: 1.0,
            baseline: None,
            gates: Default::default(),
            pace: Default::default(),
            reach: Default::default(),
        };
        let rows = explain(&summary, &list, &ledger, &d);
        assert!(!all_explained(&rows));
        let md = markdown(&summary, &rows, &d);
        assert!(
            md.contains("3 findings: 0 a known bug, 1 a documented difference, **2 unexplained** (0 of them confirmed and reproduced every time)"),
            "{md}"
        );
        assert!(
            md.contains(
                "| O6 | `CloneSet` | controller panicked | not confirmed | **unexplained** |"
            ),
            "{md}"
        );
        assert!(md.contains("| 1/3 |"), "{md}");
        let unexplained = md.find("**unexplained**").unwrap();
        let difference = md
            .find("difference `mutable-history`: its spec is mutable")
            .unwrap();
        assert!(unexplained < difference, "{md}");
        assert!(all_explained(&rows[..1]));
    }

    #[test]
    fn the_checked_in_differences_parse_and_a_bad_file_is_refused_with_the_reason() {
        let d = Differences::builtin();
        assert!(!d.differences.is_empty());
        let twice = "differences:\n- {id: a, finding: {oracle: O4, kind: K, key: k}, why: w}\n- {id: a, finding: {oracle: O4, kind: K, key: k}, why: w}\n";
        let e = Differences::parse(twice, "d.yaml").unwrap_err().to_string();
        assert!(e.contains("`a` is listed twice"), "{e}");
        let mute = "differences:\n- {id: a, finding: {oracle: O4, kind: K, key: k}, why: ' '}\n";
        let e = Differences::parse(mute, "d.yaml").unwrap_err().to_string();
        assert!(e.contains("says nothing of why"), "{e}");
        let e = Differences::parse("differences: 3", "d.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("d.yaml is not a list of differences"), "{e}");
    }

    #[test]
    fn a_finding_is_explained_by_what_explains_a_finding_of_the_same_trial() {
        let list = List::builtin();
        let ledger = Ledger::builtin();
        let d = differences();
        let cause = reported(
            Oracle::Native,
            "AdvancedStatefulSet",
            "admits on update of spec.revisionHistoryLimit as zero what StatefulSet does not",
        );
        let mut beside = reported(
            Oracle::Convergence,
            "AdvancedStatefulSet",
            "does not converge: live pods",
        );
        // Another trial of the same subject: unexplained.
        let mut alone = beside.clone();
        alone.original.index = 3;
        beside.original = cause.original.clone();
        let summary = Summary {
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32.5".into(),
            findings: vec![beside, cause, alone],
            ..Summary::default()
        };
        let rows = explain(&summary, &list, &ledger, &d);
        assert_eq!(
            rows[0].by,
            Explanation::Difference("mutable-history".into())
        );
        assert_eq!(
            rows[0].beside.as_deref(),
            Some(summary.findings[1].finding.key.as_str())
        );
        assert_eq!(rows[1].beside, None);
        assert_eq!(rows[2].by, Explanation::Unexplained);
        let md = markdown(&summary, &rows, &d);
        assert!(
            md.contains("| beside `admits on update of spec.revisionHistoryLimit as zero what StatefulSet does not` in its trial: difference `mutable-history`"),
            "{md}"
        );
    }
}
