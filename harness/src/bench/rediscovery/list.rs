//! The benchmark's list of known bugs: [`List`] is where to start, read from
//! `suites/rediscovery.yaml` ([`BUILTIN`]) or another file, with its [`Bug`]s and the finding
//! that counts for each ([`Wanted`], matched by oracle, [`kind_names`] and [`key_matches`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::RediscoveryError;
use crate::explore::Reported;
use crate::explore::oracle::Finding;
use crate::toolchain::versions::Version;

/// The checked-in list, `suites/rediscovery.yaml`.
pub const BUILTIN: &str = include_str!("../../../../suites/rediscovery.yaml");

/// Where the checked-in list lives in the workspace.
pub const BUILTIN_PATH: &str = "suites/rediscovery.yaml";

/// The list of known bugs (`suites/rediscovery.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct List {
    /// The controller's name in `--controller NAME@TAG` (`openkruise`).
    pub controller: String,
    /// The releases that can be explored (those the Go module proxy serves), oldest first: the
    /// ground a bug's bad and fixed releases are chosen on.
    pub releases: Vec<String>,
    /// The bugs.
    pub bugs: Vec<Bug>,
}

/// One known bug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bug {
    /// Its ledger id (or a name of its own where `ledger` is false).
    pub id: String,
    /// Whether `id` is an entry of `suites/ledger.yaml`.
    #[serde(default = "yes")]
    pub ledger: bool,
    /// The row of the benchmark's table it belongs to (its 14 known bugs), if any.
    #[serde(default)]
    pub benchmark: Option<String>,
    /// The release to find it on: the newest explorable one that has it.
    pub bad: String,
    /// The first explorable release that no longer has it (none: unfixed, or none after).
    #[serde(default)]
    pub fixed: Option<String>,
    /// The finding that counts.
    pub finding: Wanted,
    /// Said with its row.
    #[serde(default)]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

/// The finding that counts for a bug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wanted {
    /// The oracle's short name (`O4`, see [`crate::explore::oracle::Oracle::short`]).
    pub oracle: String,
    /// The subject as `--kinds` names it: a subject (`WorkloadSpread.CloneSet`), or a kind
    /// that names all its subjects (`UnitedDeployment`); several, each as one of these, split
    /// by `|` (`AdvancedDaemonSet|DaemonSet`), for a bug that shows on any of them.
    pub kind: String,
    /// Text the finding's key must contain; `*` stands for any text between two parts.
    pub key: String,
    /// Text the finding's trial must hold (its shrunk or its first trial, as `trial.yaml`
    /// writes it): what the bug needs, for a key that does not name it (a panic, pods that
    /// never come), so that the same symptom from another cause does not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Feature gates the finding's cell must have set so (the controller's or the control
    /// plane's): `true`, turned on by the cell; `false`, not turned on. For a behaviour that
    /// differs by gate, so that the same finding from a cell on the other side of it does not
    /// count. A release without the gate (one that came later) cannot set it: any of its cells
    /// counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, bool>,
}

impl Wanted {
    /// Whether `f` is this finding: its oracle, a subject `kind` names, and a key
    /// [`key_matches`] the pattern.
    pub fn matches(&self, f: &Finding) -> bool {
        f.oracle.short() == self.oracle
            && kind_names(&self.kind, &f.subject)
            && key_matches(&self.key, &f.key)
    }

    /// The key of `r` that is this finding: its own, or one of the findings counted as its
    /// repeats ([`Reported::also`]: the same cause seen on another field or at the other verb,
    /// each a trial the exploration ran).
    pub fn key_of<'a>(&self, r: &'a Reported) -> Option<&'a str> {
        self.key_as(r, &r.finding.subject)
    }

    /// [`Self::key_of`], `r` taken as a finding of `subject` (its own, or the target of the
    /// policy it is a finding of). Its trials are read last, only for a finding that matches
    /// otherwise.
    pub fn key_as<'a>(&self, r: &'a Reported, subject: &str) -> Option<&'a str> {
        if r.finding.oracle.short() != self.oracle || !kind_names(&self.kind, subject) {
            return None;
        }
        std::iter::once(&r.finding.key)
            .chain(&r.also)
            .find(|k| key_matches(&self.key, k))
            .map(String::as_str)
            .filter(|_| self.gated(r) && self.caused(r))
    }

    /// Whether the cell `r` was found on sets [`Self::gates`] so.
    pub fn gated(&self, r: &Reported) -> bool {
        let controller = r
            .controller
            .parse::<crate::controller::ControllerRef>()
            .ok()
            .map(|c| c.controller());
        self.gates.iter().all(|(gate, want)| {
            let on = r.gates.controller.get(gate).or(r.gates.cluster.get(gate)) == Some(&true);
            on == *want || controller.as_ref().is_some_and(|c| !c.has_gate(gate))
        })
    }

    /// Whether `r`'s trials hold [`Self::cause`] (always, without one).
    pub fn caused(&self, r: &Reported) -> bool {
        self.cause
            .as_deref()
            .is_none_or(|c| r.trial.to_yaml().contains(c) || r.original.to_yaml().contains(c))
    }

    /// The earliest finding of `findings` that is this one, with the key that is; a finding
    /// its confirming runs never fired again ([`Reported::refuted`]) is none.
    pub fn first<'a>(&self, findings: &'a [Reported]) -> Option<(&'a Reported, &'a str)> {
        findings
            .iter()
            .filter(|r| !r.refuted())
            .filter_map(|r| self.key_of(r).map(|k| (r, k)))
            .min_by(|a, b| a.0.first_seen.total_cmp(&b.0.first_seen))
    }

    /// `O4 CloneSet "admits * ..."`, and `(trial holds `…`)` with a cause.
    pub(super) fn describe(&self) -> String {
        let mut base = format!("{} {} `{}`", self.oracle, self.kind, self.key);
        if let Some(c) = &self.cause {
            base.push_str(&format!(" (trial holds `{c}`)"));
        }
        if !self.gates.is_empty() {
            let gates: Vec<String> = self.gates.iter().map(|(g, v)| format!("{g}={v}")).collect();
            base.push_str(&format!(" (cell with {})", gates.join(",")));
        }
        base
    }
}

/// Whether `kind` names `subject` as `--kinds` does ([`crate::explore::subject::Subject::selected_by`]),
/// in any case: the subject's name, the start of it up to a `.` or `@`
/// (`UnitedDeployment.cloneSetTemplate` names `UnitedDeployment.cloneSetTemplate@v1beta1`), or
/// its family (`CloneSet` names `CloneSetWithClaims`, `UnitedDeployment` each member).
pub fn kind_names(kind: &str, subject: &str) -> bool {
    kind.split('|').any(|one| names(one.trim(), subject))
}

/// [`kind_names`] for one kind.
fn names(kind: &str, subject: &str) -> bool {
    let (k, s) = (kind.to_ascii_lowercase(), subject.to_ascii_lowercase());
    s.strip_prefix(&k)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '@']))
        || crate::explore::subject::derive::family_of(subject)
            .is_some_and(|f| f.eq_ignore_ascii_case(kind))
}

/// Whether `key` holds the parts of `pattern` between its `*`s, in order.
pub fn key_matches(pattern: &str, key: &str) -> bool {
    let mut rest = key;
    for part in pattern.split('*').filter(|p| !p.is_empty()) {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

impl List {
    /// Parses and checks a list read from `path`.
    pub fn parse(text: &str, path: &str) -> Result<Self, RediscoveryError> {
        let error = |detail: String| RediscoveryError::List {
            path: path.into(),
            detail,
        };
        let list: Self = serde_saphyr::from_str(text).map_err(|e| error(e.to_string()))?;
        list.check().map_err(error)?;
        Ok(list)
    }

    /// Reads `path`, or the checked-in list when none.
    pub fn load(path: Option<&Path>) -> Result<Self, RediscoveryError> {
        match path {
            None => Self::parse(BUILTIN, BUILTIN_PATH),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| RediscoveryError::Read {
                    path: p.display().to_string(),
                    source,
                })?;
                Self::parse(&text, &p.display().to_string())
            }
        }
    }

    /// The checked-in list.
    pub fn builtin() -> Self {
        Self::load(None).expect("the checked-in rediscovery list parses")
    }

    /// What is wrong with it, if anything: ids twice, releases not among `releases` (or not
    /// a fixed release after the bad one), oracles and kinds the explorer does not have.
    fn check(&self) -> Result<(), String> {
        let mut ids = BTreeSet::new();
        let oracles: Vec<&str> = crate::explore::oracles().map(|o| o.short()).to_vec();
        let release = |r: &str| -> Result<Version, String> {
            if !self.releases.iter().any(|x| x == r) {
                return Err(format!("{r} is not among `releases`"));
            }
            let v: Version = r.parse().map_err(|e| format!("{r}: {e}"))?;
            format!("{}@{r}", self.controller)
                .parse::<crate::controller::ControllerRef>()
                .map_err(|e| e.to_string())?;
            Ok(v)
        };
        for b in &self.bugs {
            let at = |e: String| format!("bug `{}`: {e}", b.id);
            if !ids.insert(b.id.as_str()) {
                return Err(at("listed twice".into()));
            }
            let bad = release(&b.bad).map_err(at)?;
            if let Some(fixed) = &b.fixed
                && release(fixed).map_err(at)? <= bad
            {
                return Err(at(format!("fixed {fixed} is not after bad {}", b.bad)));
            }
            let w = &b.finding;
            if !oracles.contains(&w.oracle.as_str()) {
                return Err(at(format!(
                    "oracle `{}`: the oracles are {}",
                    w.oracle,
                    oracles.join(", ")
                )));
            }
            for kind in w.kind.split('|') {
                crate::explore::select(&[kind.trim().to_string()])
                    .map_err(|e| at(format!("{e:#}")))?;
            }
            if w.key.replace('*', "").trim().is_empty() {
                return Err(at("an empty key".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rediscovery::fixtures::*;
    use crate::explore::oracle::Oracle;
    use std::path::PathBuf;

    fn wanted(oracle: &str, kind: &str, key: &str) -> Wanted {
        Wanted {
            oracle: oracle.into(),
            kind: kind.into(),
            key: key.into(),
            cause: None,
            gates: Default::default(),
        }
    }

    #[test]
    fn a_finding_counts_only_with_its_oracle_kind_and_key() {
        let w = wanted(
            "O4",
            "CloneSet",
            "admits * spec.minReadySeconds as a negative number",
        );
        let key = "admits on create of spec.minReadySeconds as a negative number what Deployment does not";
        assert!(w.matches(&finding(Oracle::Native, "CloneSet", key)));
        // Paired with another field, at update: still the same field's form.
        assert!(w.matches(&finding(
            Oracle::Native,
            "CloneSet",
            "admits on update of spec.replicas as zero, spec.minReadySeconds as a negative number what Deployment does not"
        )));
        // Another oracle.
        assert!(!w.matches(&finding(Oracle::Realizable, "CloneSet", key)));
        // Another kind.
        assert!(!w.matches(&finding(Oracle::Native, "AdvancedStatefulSet", key)));
        // Another key: another form, another field, the other verdict.
        for other in [
            "admits on create of spec.minReadySeconds as a positive number what Deployment does not",
            "admits on create of spec.revisionHistoryLimit as a negative number what Deployment does not",
            "refuses on create of spec.minReadySeconds as a negative number what Deployment does not",
        ] {
            assert!(
                !w.matches(&finding(Oracle::Native, "CloneSet", other)),
                "{other}"
            );
        }
    }

    #[test]
    fn a_kind_names_its_subjects_as_kinds_does() {
        let names = |k: &str, s: &str| kind_names(k, s);
        assert!(names(
            "UnitedDeployment",
            "UnitedDeployment.cloneSetTemplate"
        ));
        assert!(names(
            "uniteddeployment",
            "UnitedDeployment.cloneSetTemplate"
        ));
        assert!(names("WorkloadSpread.CloneSet", "WorkloadSpread.CloneSet"));
        assert!(names("CloneSet", "CloneSetWithClaims@v1beta1"));
        assert!(names("CloneSet", "CloneSet@v1beta1"));
        assert!(!names(
            "WorkloadSpread.CloneSet",
            "WorkloadSpread.CloneSetWithClaims"
        ));
        assert!(!names("CloneSet", "WorkloadSpread.CloneSet"));
        assert!(!names("CloneSet", "CloneSetX"));
        assert!(!names(
            "AdvancedCronJob.broadcastJobTemplate",
            "AdvancedCronJob"
        ));
        // Several kinds: any of them.
        assert!(names("AdvancedDaemonSet|DaemonSet", "DaemonSet"));
        assert!(names(
            "AdvancedDaemonSet | DaemonSet",
            "AdvancedDaemonSet@v1beta1"
        ));
        assert!(!names("AdvancedDaemonSet|DaemonSet", "CloneSet"));
    }

    #[test]
    fn a_key_pattern_is_its_parts_in_order() {
        let key = "refuses on create of spec.subsets[1].patch as an object what WorkloadSpread over a Deployment does not";
        assert!(key_matches("refuses * spec.subsets*.patch", key));
        assert!(key_matches("spec.subsets", key));
        assert!(!key_matches("admits * spec.subsets*.patch", key));
        // In order: the parts may not be found backwards.
        assert!(!key_matches(".patch*spec.subsets", key));
        assert!(key_matches("*", key));
    }

    #[test]
    fn the_earliest_finding_that_counts_is_the_one_reported() {
        let w = wanted("O6", "WorkloadSpread", "controller panicked");
        let findings = vec![
            reported(
                finding(Oracle::Health, "CloneSet", "controller panicked"),
                5.0,
                true,
            ),
            reported(
                finding(
                    Oracle::Health,
                    "WorkloadSpread.Deployment",
                    "controller panicked",
                ),
                90.0,
                true,
            ),
            reported(
                finding(
                    Oracle::Health,
                    "WorkloadSpread.CloneSet",
                    "controller panicked",
                ),
                40.0,
                false,
            ),
        ];
        let (first, key) = w.first(&findings).unwrap();
        assert_eq!(first.finding.subject, "WorkloadSpread.CloneSet");
        assert_eq!(first.first_seen, 40.0);
        assert_eq!(key, "controller panicked");
        assert!(w.first(&findings[..1]).is_none());
    }

    #[test]
    fn a_key_a_finding_stood_for_counts_as_its_own() {
        let w = wanted("O4", "Thing", "refuses on create of *spec.b");
        let mut r = reported(
            finding(Oracle::Native, "Thing", "refuses on update of spec.a"),
            5.0,
            true,
        );
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        r.also = vec!["refuses on create of spec.c".into()];
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        r.also.push("refuses on create of spec.b".into());
        let (_, key) = w.first(std::slice::from_ref(&r)).unwrap();
        assert_eq!(key, "refuses on create of spec.b");
        // Another oracle's finding does not count through the keys it stood for.
        r.finding.oracle = Oracle::Realizable;
        assert!(w.first(std::slice::from_ref(&r)).is_none());
    }

    #[test]
    fn a_cause_counts_a_symptom_only_from_a_trial_that_holds_it() {
        use crate::explore::trial::Step;
        let mut w = wanted("O2", "Thing", "does not converge: live pods");
        w.cause = Some("spec.scale.limit".into());
        let mut r = reported(
            finding(Oracle::Convergence, "Thing", "does not converge: live pods"),
            5.0,
            true,
        );
        // The same symptom from a trial without the cause: not this bug.
        let update = |field: &str| Step::Update {
            set: [(field.to_string(), serde_json::json!(0))].into(),
        };
        r.trial.steps = vec![update("spec.other")];
        r.original.steps = vec![update("spec.other")];
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        // Its first trial held the cause (shrinking dropped it): counted.
        r.original.steps.push(update("spec.scale.limit"));
        assert!(w.first(std::slice::from_ref(&r)).is_some());
        // Its shrunk trial holds it: counted.
        r.original.steps.clear();
        r.trial.steps = vec![update("spec.scale.limit")];
        assert!(w.first(std::slice::from_ref(&r)).is_some());
        // Through a key it stood for, the trial is still the one that must hold it.
        r.finding.key = "does not converge: image".into();
        r.also = vec!["does not converge: live pods".into()];
        assert!(w.first(std::slice::from_ref(&r)).is_some());
        r.trial.steps.clear();
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        assert!(w.describe().ends_with("(trial holds `spec.scale.limit`)"));
    }

    #[test]
    fn a_gated_finding_counts_only_from_a_cell_with_its_gates_so() {
        let mut w = wanted("O2", "Thing", "does not converge: claims");
        w.gates = [("G".to_string(), true)].into();
        let mut r = reported(
            finding(Oracle::Convergence, "Thing", "does not converge: claims"),
            5.0,
            true,
        );
        // The default cell: the gate is not on.
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        r.gates.controller.insert("G".into(), false);
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        r.gates.controller.insert("G".into(), true);
        assert!(w.first(std::slice::from_ref(&r)).is_some());
        assert!(w.describe().ends_with("(cell with G=true)"));
        // Wanted off: any cell that does not turn it on.
        w.gates = [("G".to_string(), false)].into();
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        r.gates.controller.clear();
        assert!(w.first(std::slice::from_ref(&r)).is_some());
        // A release that does not have the gate yet: any cell counts.
        let gate = "RecreatePodWhenChangeVCTInCloneSetGate";
        w.gates = [(gate.to_string(), true)].into();
        assert!(w.first(std::slice::from_ref(&r)).is_none());
        r.controller = "openkruise@v1.6.0".into();
        assert!(w.first(std::slice::from_ref(&r)).is_some());
    }

    #[test]
    fn the_checked_in_list_parses_and_names_the_benchmarks_14_rows() {
        let list = List::builtin();
        let rows: BTreeSet<&str> = list
            .bugs
            .iter()
            .filter_map(|b| b.benchmark.as_deref())
            .collect();
        assert_eq!(rows.len(), 14, "{rows:?}");
        assert_eq!(list.controller, "openkruise");
    }

    #[test]
    fn the_list_has_every_ledger_entry_that_needs_no_real_node_at_the_releases_of_its_range() {
        let list = List::builtin();
        let ledger = crate::run::ledger::Ledger::builtin();
        let scenarios = crate::suites::all();
        let real = |name: &str| {
            let s = scenarios
                .iter()
                .find(|s| *s.name == *name)
                .unwrap_or_else(|| panic!("ledger scenario {name} is in the catalog"));
            s.requires.real_nodes > 0
        };
        let served: Vec<Version> = list.releases.iter().map(|r| r.parse().unwrap()).collect();
        for k in &ledger.bugs {
            let listed = list.bugs.iter().find(|b| b.id == k.id);
            if real(&k.scenario) {
                assert!(listed.is_none(), "{} needs a real node", k.id);
                continue;
            }
            let b = listed.unwrap_or_else(|| panic!("{} is in the list", k.id));
            assert!(b.ledger, "{}", k.id);
            // The newest served release inside the range, and the first after it.
            let inside: Vec<&String> = list
                .releases
                .iter()
                .filter(|r| k.controller.contains(r))
                .collect();
            assert_eq!(Some(&&b.bad), inside.last(), "{}: bad release", k.id);
            let after = k.controller.max.as_ref().and_then(|max| {
                let max: Version = max.parse().unwrap();
                served
                    .iter()
                    .position(|v| v.cmp_within(&max).is_gt())
                    .map(|i| list.releases[i].clone())
            });
            assert_eq!(b.fixed, after, "{}: fixed release", k.id);
        }
        for b in list.bugs.iter().filter(|b| b.ledger) {
            assert!(
                ledger.bugs.iter().any(|k| k.id == b.id),
                "{} is a ledger id (or says `ledger: false`)",
                b.id
            );
        }
    }

    #[test]
    fn nothing_the_explorer_runs_names_a_listed_bug() {
        fn files(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/explore");
        let mut all = vec![root.with_extension("rs")];
        files(&root, &mut all);
        let list = List::builtin();
        for f in all.iter().filter(|f| f.is_file()) {
            let text = std::fs::read_to_string(f).unwrap();
            for b in &list.bugs {
                assert!(!text.contains(&b.id), "{} names {}", f.display(), b.id);
            }
        }
    }

    #[test]
    fn a_list_that_says_something_impossible_is_refused_with_the_reason() {
        let head = "controller: openkruise\nreleases: [v1.7.0, v1.8.0]\nbugs:\n";
        let bug = |bad: &str, fixed: &str, oracle: &str, kind: &str| {
            format!(
                "{head}- id: x\n  bad: {bad}\n  fixed: {fixed}\n  finding: {{oracle: {oracle}, kind: {kind}, key: k}}\n"
            )
        };
        assert!(List::parse(&bug("v1.7.0", "v1.8.0", "O4", "CloneSet"), "l").is_ok());
        for (text, says) in [
            (
                bug("v1.7.1", "v1.8.0", "O4", "CloneSet"),
                "v1.7.1 is not among",
            ),
            (
                bug("v1.8.0", "v1.7.0", "O4", "CloneSet"),
                "is not after bad",
            ),
            (bug("v1.7.0", "v1.8.0", "O9", "CloneSet"), "oracle `O9`"),
            (bug("v1.7.0", "v1.8.0", "O4", "Widget"), "kind `Widget`"),
            (
                bug("v1.7.0", "v1.8.0", "O4", "\"CloneSet|Widget\""),
                "kind `Widget`",
            ),
            (format!("{head}- id: x\n  bad: v1.7.0\n  typo: 1\n"), "typo"),
        ] {
            let e = List::parse(&text, "l").unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
