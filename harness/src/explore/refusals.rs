//! What an API's refusals say to the admission phase. A refused seed object: every trial
//! refused in its words owes it the refusal ([`owed_to_seed`], [`seed_refusal`]). And the
//! words a refusal names: [`learned`] makes the admission trials that try them, read by
//! [`named_words`]; a field whose schema lists no values (a string its description says
//! little of) still has the ones the API takes, and a refusal of a nonsense word often names
//! them (`must be 'A', B or 'C'`, `supported values: "A", "B"`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::exec;
use super::oracle::Answer;
use super::subject;
use super::trial::{self, Step, Trial};

/// What a subject's admission trials admitted: each value admitted alone, and of them those
/// a refusal named ([`named_words`]).
pub(super) struct Admitted {
    pub(super) values: Vec<(String, Value)>,
    pub(super) named: Vec<(String, Value)>,
}

/// The words refusals named for each subject's fields and then admitted, by subject name, as
/// the admission phase goes: a policy comes after the workloads it targets, and its target's
/// words are its own as [`subject::TARGET`] fields (the target is made by the same API).
#[derive(Debug, Default)]
pub(super) struct Named(BTreeMap<String, Vec<(String, Value)>>);

impl Named {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// `s` with seed variants for `named` (the words its own admission trials were named and
    /// admitted) and for those named earlier for its target's subject
    /// ([`subject::Subject::with_named`]); `named` is kept for the subjects after it.
    pub(super) fn apply(
        &mut self,
        s: &subject::Subject,
        named: Vec<(String, Value)>,
    ) -> subject::Subject {
        let mut all = named.clone();
        if let Some(t) = &s.target
            && let Some(words) = self.0.get(&t.name)
        {
            all.extend(
                words
                    .iter()
                    .map(|(k, w)| (format!("{}{k}", subject::TARGET), w.clone())),
            );
        }
        self.0.insert(s.name.clone(), named);
        s.with_named(&all)
    }
}

/// The single creates that try, for each string field a single create of `trials` set and
/// the API refused (its outcome in `results`), the words the refusal named as the field's
/// valid ones ([`named_words`]) that no single of that field tried yet: what the API says a
/// field takes, where its schema lists nothing.
pub(super) fn learned(trials: &[Trial], results: &[exec::Outcome]) -> Vec<trial::Fields> {
    let mut tried: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for t in trials {
        if let [Step::Create { set }] = t.steps.as_slice() {
            for (k, v) in set {
                tried.entry(k).or_default().push(v);
            }
        }
    }
    let mut out: Vec<trial::Fields> = vec![];
    for (t, o) in trials.iter().zip(results) {
        let ([Step::Create { set }], Some(m)) = (t.steps.as_slice(), first_refusal(o)) else {
            continue;
        };
        let [(k, Value::String(_))] = set.iter().collect::<Vec<_>>()[..] else {
            continue;
        };
        let field = k.strip_prefix(subject::TARGET).unwrap_or(k);
        for w in named_words(m, field) {
            let v = Value::String(w);
            let seen = tried.get(k.as_str()).is_some_and(|vs| vs.contains(&&v))
                || out.iter().any(|f| f.get(k) == Some(&v));
            if !seen {
                out.push(trial::Fields::from([(k.clone(), v)]));
            }
        }
    }
    out
}

/// The words a refusal (`message`) names as the valid values of `field`: in the part of the
/// message about the field (`<field>: ...`, up to the next field's), the list after the last
/// phrase that introduces valid values ("supported values:", "must be one of", "must be",
/// "one of", "should be"), when every item of it is one word (quoted or not) and it quotes one
/// or has two: `must be 'A', B or 'C'`, `supported values: "A", "B"`. Prose (`must be
/// greater than or equal to 0`, `must be a valid name`) names none.
pub(super) fn named_words(message: &str, field: &str) -> Vec<String> {
    static NEXT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(, |; )[a-z][A-Za-z0-9_.\[\]]*: |\]|\n").expect("a valid regex")
    });
    static WORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[A-Za-z][A-Za-z0-9._/-]{0,62}$").expect("a valid regex")
    });
    const PHRASES: [&str; 5] = [
        "supported values:",
        "must be one of",
        "must be",
        "one of",
        "should be",
    ];
    let needle = format!("{field}: ");
    let mut out: Vec<String> = vec![];
    for (at, _) in message.match_indices(&needle) {
        let before = message[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '_')) {
            continue;
        }
        let rest = &message[at + needle.len()..];
        let part = &rest[..NEXT.find(rest).map_or(rest.len(), |m| m.start())];
        let Some(list) = PHRASES
            .iter()
            .filter_map(|p| part.rfind(p).map(|i| &part[i + p.len()..]))
            .min_by_key(|l| l.len())
        else {
            continue;
        };
        let items: Vec<&str> = list
            .split(',')
            .flat_map(|i| i.split(" or "))
            .flat_map(|i| i.split(" and "))
            .map(|i| i.trim().trim_end_matches('.'))
            .filter(|i| !i.is_empty())
            .collect();
        let unquoted = |i: &str| i.trim_matches(['"', '\'', '`']).to_string();
        let quoted = items.iter().any(|i| unquoted(i).len() + 2 == i.len());
        let words: Vec<String> = items.iter().map(|i| unquoted(i)).collect();
        if words.is_empty()
            || !words.iter().all(|w| WORD.is_match(w))
            || !(quoted || words.len() > 1)
        {
            continue;
        }
        for w in words {
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    out
}

/// A refusal's words with the names the exploration gave its objects (`t<index>`, alone or
/// within a longer name) made alike: two trials refused for the same reason read the same.
fn refusal_words(message: &str) -> String {
    static NAMES: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\bt[0-9]+\b").expect("a valid regex"));
    NAMES.replace_all(message, "t#").into_owned()
}

/// Whether a subject's admission trials stop after its seed object's, which ended as `out`:
/// when the API refused it. Each trial that sets a field on it is then refused for the seed's
/// reason ([`owed_to_seed`]) or, rarely, for a field's first; in the explorations on record
/// (v1.5.5 to v1.9.1, up to 60 such subjects a run, some hundred trials each) every finding
/// of such a subject was its seed object's own, judged once. Stopping gives their share of the
/// phase to the subjects the API admits.
pub(super) fn stops_after(out: &anyhow::Result<exec::Outcome>) -> bool {
    out.as_ref().is_ok_and(|o| first_refusal(o).is_some())
}

/// What the first answer of `out` was refused with, if it was refused.
fn first_refusal(out: &exec::Outcome) -> Option<&str> {
    match out.answers.first()? {
        Answer::Refused(m) => Some(m),
        _ => None,
    }
}

/// The words the seed object's create was refused in, if it was: the outcome of the first
/// trial (the seed object alone, see [`Explorer::admission`](super::admission::Explorer::admission)).
pub(super) fn seed_refusal(results: &[exec::Outcome]) -> Option<String> {
    first_refusal(results.first()?).map(refusal_words)
}

/// Whether trial `t`, which ended as `out`, owes its refusal to the seed object: it sets a
/// field, and its first create was refused in the words the seed object's was (`seed`).
pub(super) fn owed_to_seed(t: &Trial, out: &exec::Outcome, seed: Option<&str>) -> bool {
    let sets = t.steps.iter().any(|step| match step {
        Step::Create { set } | Step::Update { set } => !set.is_empty(),
        _ => false,
    });
    match (seed, first_refusal(out)) {
        (Some(words), Some(m)) => sets && refusal_words(m) == words,
        _ => false,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::explore::trial::Mode;

    /// Admission trial `index` of subject `S`, of `steps`.
    pub(in crate::explore) fn trial(index: u64, steps: Vec<Step>) -> Trial {
        Trial {
            subject: "S".into(),
            mode: Mode::Admission,
            seed: 1,
            index,
            steps,
        }
    }

    #[test]
    fn a_refusal_names_the_valid_words_of_a_field_and_prose_names_none() {
        // A webhook's words, one of them unquoted, among another field's error.
        let m = "admission webhook \"v.kb.io\" denied the request: [spec.updateStrategy.type: \
                 Invalid value: \"x\": must be 'Re', InPlaceA or 'InPlaceB', \
                 spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0]";
        assert_eq!(
            named_words(m, "spec.updateStrategy.type"),
            ["Re", "InPlaceA", "InPlaceB"]
        );
        assert!(named_words(m, "spec.minReadySeconds").is_empty());
        // The API's own "supported values", quoted.
        let m = "Pod \"p\" is invalid: spec.restartPolicy: Unsupported value: \"x\": \
                 supported values: \"Always\", \"OnFailure\", \"Never\"";
        assert_eq!(
            named_words(m, "spec.restartPolicy"),
            ["Always", "OnFailure", "Never"]
        );
        // One unquoted word is prose; a field whose path only ends alike is another's.
        assert!(named_words("a.b: Invalid value: \"x\": must be empty", "a.b").is_empty());
        assert!(named_words("x.a.b: Invalid value: \"x\": must be 'A'", "a.b").is_empty());
        assert_eq!(
            named_words("a.b: Invalid value: \"x\": must be 'A'", "a.b"),
            ["A"]
        );
    }

    #[test]
    fn the_words_a_refusal_names_are_tried_alone_once_each() {
        let single = |index: u64, k: &str, v: &str| {
            trial(
                index,
                vec![Step::Create {
                    set: trial::Fields::from([(k.to_string(), serde_json::json!(v))]),
                }],
            )
        };
        let said = |a: Answer| exec::Outcome {
            answers: vec![a],
            ..Default::default()
        };
        let refused = "spec.t: Unsupported value: \"x\": supported values: \"A\", \"B\"";
        let trials = [
            single(1, "spec.t", "x"),
            single(2, "spec.t", ""),
            single(3, "spec.t", "A"),
            single(4, "target:spec.u", "x"),
        ];
        let results = [
            said(Answer::Refused(refused.into())),
            said(Answer::Refused(refused.into())),
            said(Answer::Admitted),
            said(Answer::Refused(
                "spec.u: Invalid value: \"x\": one of 'C', 'D'".into(),
            )),
        ];
        let got: Vec<(String, Value)> = learned(&trials, &results)
            .into_iter()
            .flat_map(|f| f.into_iter())
            .collect();
        // "A" was tried already; "B" once though two refusals name it; a target's field by
        // its path in the target.
        let v = |k: &str, w: &str| (k.to_string(), serde_json::json!(w));
        assert_eq!(
            got,
            [
                v("spec.t", "B"),
                v("target:spec.u", "C"),
                v("target:spec.u", "D")
            ]
        );
    }

    #[test]
    fn a_policy_gets_the_words_named_for_its_targets_subject_as_target_fields() {
        let (crds, doc) = crate::explore::subject::derive::tests::cell();
        let all = crate::explore::subject::derive::served(&crds, &doc);
        let by = |n: &str| all.iter().find(|s| s.name == n).unwrap().clone();
        let mut cs = by("CloneSet");
        cs.variants = vec![Default::default()];
        let mut p = all
            .iter()
            .find(|s| s.target.as_ref().is_some_and(|t| t.name == "CloneSet"))
            .expect("a policy over the CloneSet")
            .clone();
        p.variants = vec![Default::default()];
        let word = |k: &str| (k.to_string(), serde_json::json!("W"));
        let mut named = Named::new();
        let got = named.apply(&cs, vec![word("spec.s.t")]);
        assert_eq!(
            got.variants[0].get("spec.s.t"),
            Some(&serde_json::json!("W"))
        );
        // The policy after it: the target's word as a target field, beside its own.
        let got = named.apply(&p, vec![word("spec.own")]);
        let target = format!("{}spec.s.t", subject::TARGET);
        assert_eq!(got.variants[0].get(&target), Some(&serde_json::json!("W")));
        assert_eq!(
            got.variants[0].get("spec.own"),
            Some(&serde_json::json!("W"))
        );
        // Before its target's subject was admitted: its own words only.
        let got = Named::new().apply(&p, vec![]);
        assert_eq!(got.variants, p.variants);
    }

    #[test]
    fn a_trial_refused_in_the_seed_objects_words_owes_it_the_refusal() {
        let said = |m: &str| exec::Outcome {
            answers: vec![Answer::Refused(m.into())],
            ..Default::default()
        };
        let trial = |steps: Vec<Step>| Trial {
            subject: "P.T".into(),
            mode: Mode::Admission,
            seed: 1,
            index: 0,
            steps,
        };
        let seed = said(r#"spec.ref: Invalid value: {Name:"t0-target"}: not permitted"#);
        let words = seed_refusal(std::slice::from_ref(&seed));
        assert_eq!(
            words.as_deref(),
            Some(r#"spec.ref: Invalid value: {Name:"t#-target"}: not permitted"#)
        );
        let create = |f: &str| Step::Create {
            set: [(f.to_string(), serde_json::json!(1))].into(),
        };
        let alike = said(r#"spec.ref: Invalid value: {Name:"t36-target"}: not permitted"#);
        assert!(owed_to_seed(
            &trial(vec![create("spec.a")]),
            &alike,
            words.as_deref()
        ));
        // Other words, an admitted trial, or no seed refused: judged on its own.
        let other = said(r#"spec.a: Invalid value: 1 (t36)"#);
        assert!(!owed_to_seed(
            &trial(vec![create("spec.a")]),
            &other,
            words.as_deref()
        ));
        let admitted = exec::Outcome {
            answers: vec![Answer::Admitted],
            ..Default::default()
        };
        assert!(!owed_to_seed(
            &trial(vec![create("spec.a")]),
            &admitted,
            words.as_deref()
        ));
        assert!(!owed_to_seed(&trial(vec![create("spec.a")]), &alike, None));
        // The seed object's own trial is judged: it sets nothing.
        let bare = trial(vec![Step::Create {
            set: Default::default(),
        }]);
        assert!(!owed_to_seed(&bare, &seed, words.as_deref()));
        // A refused seed object stops the subject's admission trials; an admitted one, or
        // one that did not run, does not.
        assert!(stops_after(&Ok(seed.clone())));
        assert!(!stops_after(&Ok(admitted.clone())));
        assert!(!stops_after(&Err(anyhow::anyhow!(
            "the apiserver did not answer"
        ))));
        assert_eq!(seed_refusal(&[admitted]), None);
        // A word that only starts like a name is left alone.
        assert_eq!(refusal_words("tests t12 at12 t3x"), "tests t# at12 t3x");
    }
}
