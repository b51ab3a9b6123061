//! What an exploration reached of what the API offers, per subject: the fields and values its
//! schema offers ([`super::singles`]) and those a trial set; covering rows; the kinds of steps
//! tried; trials and distinct trials (a repeat is waste, counted). Start with [`Reach`]: the
//! exploration [`Reach::offer`]s each subject's single values, records each trial it runs
//! ([`Reach::tried`]) and its covering rows ([`Reach::rows`]); `explore.json` carries it and
//! `reach.md` ([`markdown`]) shows it beside the cell's gates.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::trial::{Fields, Mode, Step, Trial};

/// What the exploration reached, by subject.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reach {
    /// By subject name.
    pub subjects: BTreeMap<String, SubjectReach>,
}

/// What the exploration reached of one subject.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SubjectReach {
    /// Fields its schema offers, and of them those some trial set.
    pub fields: Counted,
    /// Values its schema offers (each field's, counted per field), and of them those some trial
    /// set.
    pub values: Counted,
    /// Fields and values trials set that the offer did not hold (pairs at create, the
    /// operations' own values).
    pub beyond: usize,
    /// Covering rows tried at create (admission), and behaviour creates that set two or more
    /// fields at once.
    pub rows: usize,
    /// Behaviour creates of two or more fields.
    pub row_creates: usize,
    /// Steps tried, by kind (`create`, `update`, `operate:rollout`, `perturb:delete-pod:newest`,
    /// `settle`, ...).
    pub steps: BTreeMap<String, usize>,
    /// Trials run, by mode.
    pub trials: BTreeMap<String, usize>,
    /// Distinct trials (the same steps twice count once), by mode.
    pub distinct: BTreeMap<String, usize>,
    /// The refusal of the subject's seed object (no field set) at create, when its API
    /// refuses it: every trial refused in the same words owes its refusal to the seed, not to
    /// its fields, and is judged once, as the seed object's trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_refused: Option<String>,
    /// Admission trials refused in the words the seed object is refused in.
    #[serde(default)]
    pub owed_to_seed: usize,
    #[serde(skip)]
    offered: BTreeSet<(String, String)>,
    #[serde(skip)]
    set: BTreeSet<(String, String)>,
    #[serde(skip)]
    seen: BTreeSet<String>,
}

/// A count of what was offered, and of it what was tried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// Offered.
    pub offered: usize,
    /// Of those, tried.
    pub tried: usize,
}

impl Counted {
    /// `tried/offered (p %)`, or `—` when nothing was offered.
    pub fn show(&self) -> String {
        match self.offered {
            0 => "—".to_string(),
            n => format!(
                "{}/{n} ({:.0} %)",
                self.tried,
                self.tried as f64 * 100.0 / n as f64
            ),
        }
    }
}

/// A field and its value, as the reach counts them.
fn pairs(set: &Fields) -> impl Iterator<Item = (String, String)> + '_ {
    set.iter().map(|(k, v)| (k.clone(), v.to_string()))
}

/// The kind of `step`.
fn kind(step: &Step) -> String {
    // A unit variant is its name; one with members, its name and its words
    // (`delete-pod:newest`, `hold-events:pods`).
    let named = |v: serde_json::Value| match v {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                let words = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(_, w)| w.as_str());
                std::iter::once(k.as_str())
                    .chain(words)
                    .collect::<Vec<_>>()
                    .join(":")
            })
            .collect(),
        v => v.as_str().unwrap_or_default().to_string(),
    };
    match step {
        Step::Create { .. } => "create".into(),
        Step::Update { .. } => "update".into(),
        Step::Operate { op } => format!("operate:{}", named(serde_json::json!(op))),
        Step::Perturb { perturbation } => {
            format!("perturb:{}", named(serde_json::json!(perturbation)))
        }
        Step::Settle => "settle".into(),
    }
}

impl SubjectReach {
    /// The steps tried, by kind: `create 3, operate:rollout 2`.
    pub fn steps_text(&self) -> String {
        self.steps
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The trials by mode, each with its distinct ones: `admission 4 (4), behaviour 2 (1)`.
    pub fn trials_text(&self) -> String {
        self.trials
            .iter()
            .map(|(m, n)| format!("{m} {n} ({})", self.distinct.get(m).copied().unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn recount(&mut self) {
        let fields = |s: &BTreeSet<(String, String)>| -> BTreeSet<String> {
            s.iter().map(|(k, _)| k.clone()).collect()
        };
        let (offered, set) = (fields(&self.offered), fields(&self.set));
        self.fields = Counted {
            offered: offered.len(),
            tried: offered.intersection(&set).count(),
        };
        self.values = Counted {
            offered: self.offered.len(),
            tried: self.offered.intersection(&self.set).count(),
        };
        self.beyond = self.set.difference(&self.offered).count();
    }
}

impl Reach {
    /// Records what the schema offers `subject`: its single values (each a set of fields).
    pub fn offer(&mut self, subject: &str, singles: &[Fields]) {
        let r = self.subjects.entry(subject.to_string()).or_default();
        for set in singles {
            r.offered.extend(pairs(set));
        }
        r.recount();
    }

    /// The fields the schema offers `subject` ([`Reach::offer`]).
    pub fn offered_fields(&self, subject: &str) -> BTreeSet<String> {
        self.subjects
            .get(subject)
            .map(|r| r.offered.iter().map(|(k, _)| k.clone()).collect())
            .unwrap_or_default()
    }

    /// Records that `subject`'s seed object is refused with `refusal`, and `owed` more trials
    /// in the same words.
    pub fn seed_refused(&mut self, subject: &str, refusal: &str, owed: usize) {
        let r = self.subjects.entry(subject.to_string()).or_default();
        r.seed_refused = Some(refusal.to_string());
        r.owed_to_seed += owed;
    }

    /// Records `n` covering rows tried at create for `subject`.
    pub fn rows(&mut self, subject: &str, n: usize) {
        self.subjects.entry(subject.to_string()).or_default().rows += n;
    }

    /// Records a trial that ran.
    pub fn tried(&mut self, trial: &Trial) {
        let mode = match trial.mode {
            Mode::Admission => "admission",
            Mode::Behaviour => "behaviour",
        };
        let r = self.subjects.entry(trial.subject.clone()).or_default();
        *r.trials.entry(mode.into()).or_default() += 1;
        let key = serde_json::to_string(&(mode, &trial.steps)).unwrap_or_default();
        if r.seen.insert(key) {
            *r.distinct.entry(mode.into()).or_default() += 1;
        }
        for step in &trial.steps {
            *r.steps.entry(kind(step)).or_default() += 1;
            if let Step::Create { set } | Step::Update { set } = step {
                r.set.extend(pairs(set));
            }
        }
        if trial.mode == Mode::Behaviour
            && matches!(trial.steps.first(), Some(Step::Create { set }) if set.len() > 1)
        {
            r.row_creates += 1;
        }
        r.recount();
    }
}

/// The reach as Markdown: a row per subject, with `gates` (the cell's, as
/// [`super::Gates`] shows them) in the heading.
pub fn markdown(reach: &Reach, gates: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Reach ({gates})\n");
    let _ = writeln!(
        out,
        "Of what each subject's schema offers, what some trial set; rows tried at create; steps \
         by kind; trials and distinct trials by mode.\n"
    );
    let _ = writeln!(
        out,
        "| subject | fields | values | beyond | rows (behaviour creates) | steps | trials \
         (distinct) |\n|---|---|---|--:|---|---|---|"
    );
    for (name, r) in &reach.subjects {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} ({}) | {} | {} |",
            r.fields.show(),
            r.values.show(),
            r.beyond,
            r.rows,
            r.row_creates,
            r.steps_text(),
            r.trials_text(),
        );
    }
    let refused: Vec<(&String, &SubjectReach)> = reach
        .subjects
        .iter()
        .filter(|(_, r)| r.seed_refused.is_some())
        .collect();
    if !refused.is_empty() {
        let _ = writeln!(
            out,
            "\n## Seed objects refused\n\nThe API refuses these subjects' seed object (no field \
             set): every trial refused in the same words owes its refusal to the seed, not to its \
             fields, and is judged once, as the seed object's trial.\n\n| subject | refusal | \
             trials refused alike |\n|---|---|--:|"
        );
        for (name, r) in refused {
            let words = r.seed_refused.as_deref().unwrap_or_default();
            let _ = writeln!(
                out,
                "| {name} | {} | {} |",
                words.replace('|', "\\|").replace('\n', " "),
                r.owed_to_seed
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::trial::{Op, Perturbation};
    use serde_json::json;

    fn trial(mode: Mode, steps: Vec<Step>) -> Trial {
        Trial {
            subject: "CloneSet".into(),
            mode,
            seed: 1,
            index: 0,
            steps,
        }
    }

    fn set(pairs: &[(&str, serde_json::Value)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn what_was_offered_and_what_was_tried_are_counted_per_field_and_value() {
        let mut reach = Reach::default();
        reach.offer(
            "CloneSet",
            &[
                set(&[("spec.replicas", json!(0))]),
                set(&[("spec.replicas", json!(-1))]),
                set(&[("spec.minReadySeconds", json!(1))]),
            ],
        );
        let create = |s: Fields| Step::Create { set: s };
        reach.tried(&trial(
            Mode::Admission,
            vec![create(set(&[("spec.replicas", json!(0))]))],
        ));
        reach.rows("CloneSet", 1);
        let behaviour = trial(
            Mode::Behaviour,
            vec![
                create(set(&[
                    ("spec.replicas", json!(-1)),
                    ("spec.paused", json!(true)),
                ])),
                Step::Operate { op: Op::Rollout },
                Step::Perturb {
                    perturbation: Perturbation::DeleteCopy,
                },
            ],
        );
        reach.tried(&behaviour);
        reach.tried(&behaviour);
        let r = &reach.subjects["CloneSet"];
        assert_eq!(
            r.fields,
            Counted {
                offered: 2,
                tried: 1
            }
        );
        assert_eq!(
            r.values,
            Counted {
                offered: 3,
                tried: 2
            }
        );
        assert_eq!(r.beyond, 1, "spec.paused was not offered");
        assert_eq!((r.rows, r.row_creates), (1, 2));
        assert_eq!(r.trials["behaviour"], 2);
        assert_eq!(r.distinct["behaviour"], 1, "a repeat is not distinct");
        assert_eq!(r.steps["create"], 3);
        assert_eq!(r.steps["operate:rollout"], 2);
        assert_eq!(r.steps["perturb:delete-copy"], 2);
        let aimed = Step::Perturb {
            perturbation: crate::explore::trial::Perturbation::DeletePod {
                which: crate::explore::trial::Which::Newest,
            },
        };
        assert_eq!(kind(&aimed), "perturb:delete-pod:newest");
        let held = Step::Perturb {
            perturbation: crate::explore::trial::Perturbation::HoldEvents {
                of: crate::explore::trial::Watched::Pods,
                seconds: 10,
            },
        };
        assert_eq!(kind(&held), "perturb:hold-events:pods");
        assert_eq!(kind(&Step::Settle), "settle");
        let md = markdown(&reach, "controller A=true");
        assert!(md.contains("# Reach (controller A=true)"), "{md}");
        assert!(
            md.contains("| CloneSet | 1/2 (50 %) | 2/3 (67 %) | 1 | 1 (2) |"),
            "{md}"
        );
        assert!(md.contains("behaviour 2 (1)"), "{md}");
        assert!(!md.contains("Seed objects refused"), "{md}");
        // A subject whose seed object is refused is listed with the refusal, escaped.
        reach.seed_refused("P.T", "kind | not permitted", 12);
        let md = markdown(&reach, "default gates");
        assert!(md.contains("## Seed objects refused"), "{md}");
        assert!(md.contains("| P.T | kind \\| not permitted | 12 |"), "{md}");
    }

    #[test]
    fn the_reach_is_kept_in_explore_json_without_its_working_sets() {
        let mut reach = Reach::default();
        reach.offer("CloneSet", &[set(&[("spec.replicas", json!(0))])]);
        assert_eq!(
            reach.offered_fields("CloneSet"),
            BTreeSet::from(["spec.replicas".to_string()])
        );
        assert!(reach.offered_fields("Another").is_empty());
        let text = serde_json::to_string(&reach).unwrap();
        assert!(
            !text.contains("offered\":[") && text.contains("\"offered\":1"),
            "{text}"
        );
        let back: Reach = serde_json::from_str(&text).unwrap();
        assert_eq!(back.subjects["CloneSet"].values.offered, 1);
    }
}
