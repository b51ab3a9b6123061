//! Sensitivity, side by side: which of the reference binary's stable findings each other
//! binary found again. Start with [`compare`].
//!
//! A wanted finding (stable in one of the first binary's runs) is found again by another
//! binary when one of that binary's findings, confirmed or not, has its oracle and subject and
//! - **the same key**: its key, or a key it stood for (`also`), is the wanted one; or
//! - **the same field**: a field path named by its keys is one the wanted key names, or inside
//!   it (list indices aside; a wanted path ending in `*` stands for every path below it), the
//!   value's form or the verb being another.
//!
//! Failing both, a finding with its oracle and key on another subject of the same kind
//! ([`kind`]: another served version, with or without claim templates, a policy over another
//! target) finds it too: an exploration reports a cause once per kind where its subjects share
//! it (a refusal naming no field), on the subject that met it first.
//!
//! Otherwise it is not found, and the report lists it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::explore::subject::derive::family_of;

/// A finding as a run's `explore.json` has it: enough to match it with another run's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Seen {
    /// The oracle's name as written (`O4-native-differential`).
    pub oracle: String,
    /// The subject.
    pub subject: String,
    /// The key.
    pub key: String,
    /// The keys it stood for besides its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
    /// Whether it reproduced every time it was confirmed.
    pub stable: bool,
}

impl Seen {
    /// The findings of a run's `explore.json` (`findings`, each with `finding` and `stable`),
    /// in the shape every release of the harness writes; an entry without them is skipped.
    pub fn read(findings: &[Value]) -> Vec<Seen> {
        findings
            .iter()
            .filter_map(|r| {
                let f = &r["finding"];
                Some(Seen {
                    oracle: f["oracle"].as_str()?.to_string(),
                    subject: f["subject"].as_str()?.to_string(),
                    key: f["key"].as_str()?.to_string(),
                    also: r["also"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect(),
                    stable: r["stable"] == true,
                })
            })
            .collect()
    }

    /// Its oracle's short name (`O4`).
    pub fn short(&self) -> &str {
        self.oracle.split('-').next().unwrap_or(&self.oracle)
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.key.as_str()).chain(self.also.iter().map(String::as_str))
    }
}

/// How a wanted finding was found again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// With its key.
    Key,
    /// On a field its key names, with another key.
    Field,
    /// With its key, on another subject of its kind.
    Kind,
    /// Not at all.
    Missing,
}

/// The field paths a key names: its words that begin with `spec`, `metadata` or `status` and
/// go on with `.` or `[`, backquotes and trailing punctuation trimmed, list indices written
/// `[]`.
pub fn fields(key: &str) -> Vec<String> {
    key.split_whitespace()
        .map(|w| w.trim_matches(|c: char| matches!(c, '`' | ',' | ';' | ':' | '(' | ')' | '"')))
        .map(|w| w.trim_start_matches('…'))
        .filter(|w| {
            ["spec", "metadata", "status"].iter().any(|root| {
                w.strip_prefix(root)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
            })
        })
        .map(without_indices)
        .collect()
}

/// The kind a subject explores: its family ([`family_of`]: with or without claim templates,
/// any served version, a policy over any target, a union's any member), else its name.
pub fn kind(subject: &str) -> &str {
    family_of(subject).unwrap_or(subject)
}

/// `p` with every `[n]` written `[]`.
fn without_indices(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut in_index = false;
    for c in p.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// Whether wanted path `w` names `p`: the same path, a path inside it (a key that named an
/// object field and one that names a leaf of it), or `w` ends in `*` and `p` is below what
/// comes before it.
fn names(w: &str, p: &str) -> bool {
    match w.strip_suffix('*') {
        Some(prefix) => p.starts_with(prefix),
        None => p
            .strip_prefix(w)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '['])),
    }
}

/// How `wanted` is found among `found`.
pub fn find(wanted: &Seen, found: &[Seen]) -> Match {
    let alike = || {
        found
            .iter()
            .filter(|f| f.oracle == wanted.oracle && f.subject == wanted.subject)
    };
    if alike().any(|f| f.keys().any(|k| k == wanted.key)) {
        return Match::Key;
    }
    let paths = fields(&wanted.key);
    let on_field = alike().any(|f| {
        f.keys()
            .flat_map(fields)
            .any(|p| paths.iter().any(|w| names(w, &p)))
    });
    let in_kind = || {
        found.iter().any(|f| {
            f.oracle == wanted.oracle
                && kind(&f.subject) == kind(&wanted.subject)
                && f.keys().any(|k| k == wanted.key)
        })
    };
    match (on_field, in_kind()) {
        (true, _) => Match::Field,
        (false, true) => Match::Kind,
        (false, false) => Match::Missing,
    }
}

/// One binary's findings against the reference's stable ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The binary.
    pub binary: String,
    /// Wanted findings found with their key.
    pub same_key: usize,
    /// Wanted findings found on the same field with another key.
    pub same_field: usize,
    /// Wanted findings found with their key on another subject of their kind.
    pub same_kind: usize,
    /// Wanted findings not found.
    pub missing: Vec<Seen>,
}

/// The wanted findings (those stable in any run of the first binary, once each by oracle,
/// subject and key) and, for each other binary, how its runs' findings (all of them, across
/// its runs) meet them. `runs` is each run's binary and findings, in the order run.
pub fn compare(runs: &[(String, Vec<Seen>)]) -> (Vec<Seen>, Vec<Row>) {
    let Some((reference, _)) = runs.first() else {
        return (vec![], vec![]);
    };
    let mut seen = BTreeSet::new();
    let wanted: Vec<Seen> = runs
        .iter()
        .filter(|(b, _)| b == reference)
        .flat_map(|(_, f)| f.iter().filter(|f| f.stable))
        .filter(|f| seen.insert((f.oracle.clone(), f.subject.clone(), f.key.clone())))
        .cloned()
        .collect();
    let mut binaries: Vec<&String> = vec![];
    for (b, _) in runs {
        if b != reference && !binaries.contains(&b) {
            binaries.push(b);
        }
    }
    let rows = binaries
        .into_iter()
        .map(|b| {
            let found: Vec<Seen> = runs
                .iter()
                .filter(|(x, _)| x == b)
                .flat_map(|(_, f)| f.iter().cloned())
                .collect();
            let mut row = Row {
                binary: b.clone(),
                same_key: 0,
                same_field: 0,
                same_kind: 0,
                missing: vec![],
            };
            for w in &wanted {
                match find(w, &found) {
                    Match::Key => row.same_key += 1,
                    Match::Field => row.same_field += 1,
                    Match::Kind => row.same_kind += 1,
                    Match::Missing => row.missing.push(w.clone()),
                }
            }
            row
        })
        .collect();
    (wanted, rows)
}

/// The comparison as Markdown: a table by binary, then what each did not find.
pub fn markdown(wanted: &[Seen], rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n### Sensitivity\n\nThe first binary's stable findings ({}, once each by oracle, \
         subject and key over its runs), found again by each other binary's findings (any, \
         over its runs) with the same oracle: on the same subject with the same key (or a key \
         it stood for), on the same subject on a field the key names with another key, with \
         the same key on another subject of the same kind (a cause reported once per kind), or \
         not found.\n",
        wanted.len()
    );
    let _ = writeln!(
        out,
        "| binary | same key | same field | same key, another subject of the kind | not found |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|");
    for r in rows {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            r.binary,
            r.same_key,
            r.same_field,
            r.same_kind,
            r.missing.len()
        );
    }
    for r in rows.iter().filter(|r| !r.missing.is_empty()) {
        let _ = writeln!(out, "\nNot found by `{}`:\n", r.binary);
        for m in &r.missing {
            let _ = writeln!(out, "- {} `{}`: {}", m.short(), m.subject, m.key);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen(oracle: &str, subject: &str, key: &str, stable: bool) -> Seen {
        Seen {
            oracle: oracle.into(),
            subject: subject.into(),
            key: key.into(),
            also: vec![],
            stable,
        }
    }

    #[test]
    fn findings_are_read_from_what_any_release_of_the_harness_writes() {
        let findings = vec![
            // The shape of every release: finding, stable; no `also` in the old ones.
            json!({"finding": {"oracle": "O4-native-differential", "subject": "CloneSet",
                   "key": "admits on create of spec.x as a negative number what Deployment does not",
                   "observed": "o", "expected": "e"}, "stable": true}),
            json!({"finding": {"oracle": "O2-convergence", "subject": "CloneSet",
                   "key": "live pods"}, "stable": false, "also": ["updated pods"]}),
            // Not a finding: skipped.
            json!({"stable": true}),
        ];
        let s = Seen::read(&findings);
        assert_eq!(s.len(), 2);
        assert!(s[0].stable && s[0].also.is_empty());
        assert_eq!(s[0].short(), "O4");
        assert_eq!(s[1].also, ["updated pods"]);
        assert!(!s[1].stable);
    }

    #[test]
    fn a_key_names_its_field_paths_without_their_indices() {
        assert_eq!(
            fields(
                "refuses on create of `spec.subsets[1].patch` as an object, metadata.labels as empty what WorkloadSpread does not"
            ),
            ["spec.subsets[].patch", "metadata.labels"]
        );
        assert_eq!(
            fields(
                "drops …spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds admitted on create"
            ),
            ["spec.template.spec.containers[].lifecycle.preStop.sleep.seconds"]
        );
        assert!(fields("controller panicked").is_empty());
        // A word that only begins like a root is not a path.
        assert!(fields("specified status").is_empty());
    }

    #[test]
    fn a_wanted_finding_is_found_by_key_then_by_field_and_only_with_its_oracle_and_subject() {
        let key = "admits on create of spec.minReadySeconds as a negative number what Deployment does not";
        let w = seen("O4-native-differential", "CloneSet", key, true);
        let found = |o: &str, s: &str, k: &str| vec![seen(o, s, k, false)];
        // The same key, confirmed or not.
        assert_eq!(
            find(&w, &found("O4-native-differential", "CloneSet", key)),
            Match::Key
        );
        // A key it stood for.
        let mut stood = seen("O4-native-differential", "CloneSet", "other", false);
        stood.also = vec![key.into()];
        assert_eq!(find(&w, &[stood]), Match::Key);
        // The same field, another form and verb.
        let other = "refuses on update of spec.minReadySeconds as zero what Deployment does not";
        assert_eq!(
            find(&w, &found("O4-native-differential", "CloneSet", other)),
            Match::Field
        );
        // The same key on another subject of its kind.
        assert_eq!(
            find(
                &w,
                &found("O4-native-differential", "CloneSet@v1beta1", key)
            ),
            Match::Kind
        );
        // Another oracle, another kind, another field: not found.
        for (o, s, k) in [
            ("O1-admitted-means-realizable", "CloneSet", key),
            ("O4-native-differential", "AdvancedStatefulSet", key),
            (
                "O4-native-differential",
                "CloneSet",
                "admits on create of spec.revisionHistoryLimit as a negative number what Deployment does not",
            ),
        ] {
            assert_eq!(find(&w, &found(o, s, k)), Match::Missing, "{o} {s} {k}");
        }
        // A leaf inside the wanted object field: the same field.
        let object = seen(
            "O1-admitted-means-realizable",
            "AdvancedStatefulSet",
            "drops spec.template.spec.containers[0].lifecycle.preStop admitted on create",
            true,
        );
        let leaf = "drops spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds admitted on create";
        let sibling =
            "drops spec.template.spec.containers[0].lifecycle.preStopX admitted on create";
        let o1 = |k| found("O1-admitted-means-realizable", "AdvancedStatefulSet", k);
        assert_eq!(find(&object, &o1(leaf)), Match::Field);
        assert_eq!(find(&object, &o1(sibling)), Match::Missing);
        // A wanted path ending in `*` stands for the paths below it.
        let wild = seen(
            "O4-native-differential",
            "BroadcastJob",
            "admits on update of spec.template.* what Job does not",
            true,
        );
        let below = "admits on update of spec.template.spec.hostNetwork as true what Job does not";
        assert_eq!(
            find(
                &wild,
                &found("O4-native-differential", "BroadcastJob", below)
            ),
            Match::Field
        );
        assert_eq!(
            find(
                &wild,
                &found(
                    "O4-native-differential",
                    "BroadcastJob",
                    "admits on update of spec.parallelism as zero what Job does not"
                )
            ),
            Match::Missing
        );
    }

    #[test]
    fn a_subjects_kind_is_its_name_before_a_target_member_or_version_without_claims() {
        assert_eq!(kind("CloneSet"), "CloneSet");
        assert_eq!(kind("CloneSetWithClaims@v1beta1"), "CloneSet");
        assert_eq!(kind("WorkloadSpread@v1beta1.CloneSet"), "WorkloadSpread");
        assert_eq!(
            kind("UnitedDeployment.cloneSetTemplate"),
            "UnitedDeployment"
        );
        assert_eq!(kind("AdvancedStatefulSet"), "AdvancedStatefulSet");
    }

    #[test]
    fn only_the_first_binarys_stable_findings_are_wanted_and_each_other_binary_gets_a_row() {
        let runs = vec![
            (
                "old".to_string(),
                vec![
                    seen("O2-convergence", "CloneSet", "live pods", true),
                    seen("O2-convergence", "CloneSet", "flaky", false),
                    seen("O6-controller-health", "UnitedDeployment", "panicked", true),
                ],
            ),
            (
                "new".to_string(),
                vec![seen("O2-convergence", "CloneSet", "live pods", false)],
            ),
            (
                "old".to_string(),
                vec![seen("O2-convergence", "CloneSet", "live pods", true)],
            ),
            (
                "new".to_string(),
                vec![seen("O1-admitted-means-realizable", "CloneSet", "x", true)],
            ),
        ];
        let (wanted, rows) = compare(&runs);
        // Once each, the unstable one left out.
        assert_eq!(wanted.len(), 2);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].binary, "new");
        assert_eq!(rows[0].same_key, 1);
        assert_eq!(rows[0].same_field, 0);
        assert_eq!(rows[0].missing.len(), 1);
        assert_eq!(rows[0].missing[0].subject, "UnitedDeployment");
        let md = markdown(&wanted, &rows);
        assert!(md.contains("| `new` | 1 | 0 | 0 | 1 |"), "{md}");
        assert!(md.contains("- O6 `UnitedDeployment`: panicked"), "{md}");
        // One binary alone: nothing to compare.
        assert!(markdown(&wanted, &[]).is_empty());
        assert!(compare(&runs[..1]).1.is_empty());
    }
}
