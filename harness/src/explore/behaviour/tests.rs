//! The behaviour phase's tests: what trials are made from, turns put back and carried, settles.

use super::*;
use crate::explore::select;
use crate::explore::trial::Step;
use serde_json::json;

/// Every subject the fixture cell serves ([`crate::explore::subject::derive::served`]).
fn fixture_subjects() -> Vec<Subject> {
    let (crds, doc) = crate::explore::subject::derive::tests::cell();
    crate::explore::subject::derive::served(&crds, &doc)
}

/// The subject named `name` among `served`.
fn named_in(served: &[Subject], name: &str) -> Subject {
    served.iter().find(|s| s.name == name).expect(name).clone()
}

#[test]
fn a_trial_put_back_waits_whatever_its_subject_holds_a_carried_one_until_it_holds_all() {
    let t = Trial {
        subject: "s".into(),
        mode: trial::Mode::Behaviour,
        seed: 1,
        index: 3,
        steps: vec![],
    };
    let f = |key: &str| Finding {
        oracle: super::super::oracle::Oracle::Convergence,
        subject: "s".into(),
        key: key.into(),
        observed: String::new(),
        expected: String::new(),
    };
    let back = Waiting {
        trial: t.clone(),
        findings: vec![],
        carried: false,
    };
    assert!(still_waits(&back, |_| true));
    let carried = Waiting {
        trial: t,
        findings: vec![f("a"), f("b")],
        carried: true,
    };
    assert!(still_waits(&carried, |x| x.key == "a"));
    assert!(!still_waits(&carried, |_| true));
}

#[test]
fn a_trial_that_ended_its_settle_early_is_planned_for_at_the_bound() {
    let s = Duration::from_secs;
    let phases = vec![("steps", s(4)), ("settle", s(6)), ("judge", s(1))];
    let mut out = exec::Outcome {
        phases,
        ..Default::default()
    };
    assert_eq!(
        bound_run(&out, 11.0, s(60)),
        s(11),
        "it waited as shrinking does"
    );
    out.ended_early = true;
    assert_eq!(
        bound_run(&out, 11.0, s(60)),
        s(65),
        "its steps and judging, and the whole bound for its settle"
    );
}

#[test]
fn a_policys_subjects_walk_the_own_values_any_of_them_admitted_and_create_with_their_own() {
    let served = fixture_subjects();
    let named = |n: &str| named_in(&served, n);
    let (a, b) = (
        named("WorkloadSpread.CloneSet"),
        named("WorkloadSpread.Deployment"),
    );
    let other = select(&["CloneSet".to_string()]).unwrap().remove(0);
    let target = format!("{}spec.replicas", crate::explore::subject::TARGET);
    // Each admitted a part of the policy's own values, and a target's value of its own.
    let materials = vec![
        (
            a.clone(),
            vec![
                ("spec.subsets".to_string(), json!([])),
                (target.clone(), json!(1)),
            ],
        ),
        (b.clone(), vec![("spec.subsets".to_string(), json!(null))]),
        (
            other.clone(),
            vec![("spec.minReadySeconds".to_string(), json!(1))],
        ),
    ];
    let pools = pools(&materials);
    let want = vec![
        ("spec.subsets".to_string(), json!([])),
        ("spec.subsets".to_string(), json!(null)),
    ];
    assert_eq!(
        pools[0], want,
        "the policy's own values, each once, not the target's"
    );
    assert_eq!(pools[1], want, "the same for each of its targets");
    assert!(
        pools[2].is_empty(),
        "a workload walks its own admitted values"
    );
    let prepared: Vec<Prepared> = materials
        .into_iter()
        .zip(&pools)
        .map(|((s, admitted), pool)| prepare(s, admitted, pool, 1))
        .collect();
    let own = |p: &Prepared| p.2[..p.3].to_vec();
    assert_eq!(own(&prepared[0]).len(), 2);
    assert_eq!(
        own(&prepared[0]),
        own(&prepared[1]),
        "one list, in one order: the walk they share takes each step once"
    );
    assert!(
        prepared[0].2[prepared[0].3..].contains(&(target, json!(1))),
        "its target's values stay its own"
    );
    let creates = |p: &Prepared| p.1.iter().any(|c| c.contains_key("spec.subsets"));
    assert!(
        creates(&prepared[0]) && !creates(&prepared[1]),
        "each creates with what its own admission admitted"
    );
}

#[test]
fn a_policys_behaviour_trials_leave_how_it_names_its_target_as_the_seed_has_it() {
    let served = fixture_subjects();
    let policies: Vec<&Subject> = served.iter().filter(|s| s.target.is_some()).collect();
    assert!(!policies.is_empty());
    let target = crate::explore::subject::target_name("x");
    for s in policies {
        let seed = s.seed.make("x");
        let naming = naming_target(s, &seed);
        assert!(!naming.is_empty(), "{} names its target", s.name);
        for n in &naming {
            assert_eq!(crate::explore::path::get(&seed, n), &json!(target), "{n}");
        }
        // Every admitted value of the naming fields, of what holds them and of what they
        // hold is left out; a sibling stays.
        let mut admitted: Vec<(String, Value)> = vec![];
        for n in &naming {
            admitted.push((n.clone(), json!("y")));
            admitted.push((crate::explore::path::parent(n).to_string(), json!({})));
        }
        let other = ("metadata.labels.other".to_string(), json!("y"));
        admitted.push(other.clone());
        let (_, creates, updates, _) = prepare(s.clone(), admitted.clone(), &admitted, 1);
        let set: Vec<&String> = creates
            .iter()
            .flat_map(|c| c.keys())
            .chain(updates.iter().map(|(k, _)| k))
            .collect();
        assert!(
            set.iter()
                .all(|k| !naming.iter().any(|n| trial::meets(n, k))),
            "{}: {set:?}",
            s.name
        );
        assert!(set.contains(&&other.0), "{}: {set:?}", s.name);
    }
    let workload = select(&["CloneSet".to_string()]).unwrap().remove(0);
    assert!(naming_target(&workload, &workload.seed.make("x")).is_empty());
}

#[test]
fn a_subject_whose_seed_object_is_refused_takes_turns_only_with_a_value_admitted_alone() {
    let served = fixture_subjects();
    let s = served
        .iter()
        .find(|s| s.name == "WorkloadSpread.CloneSet")
        .expect("a policy subject");
    let some = [("spec.subsets".to_string(), json!([]))];
    let removed = [("spec.subsets".to_string(), json!(null))];
    let mut reach = crate::explore::reach::Reach::default();
    assert!(
        takes_turns(s, &[], &reach),
        "nothing refused: it takes turns"
    );
    reach.seed_refused("another", "denied", 1);
    assert!(
        takes_turns(s, &[], &reach),
        "another subject's refusal is not its"
    );
    reach.seed_refused(&s.name, "denied: targetRef", 3);
    assert!(!takes_turns(s, &[], &reach), "refused, nothing admitted");
    assert!(
        !takes_turns(s, &removed, &reach),
        "refused, only a removal admitted (the seed object again)"
    );
    assert!(
        takes_turns(s, &some, &reach),
        "refused, a value admitted alone"
    );
}

#[test]
fn updates_are_prepared_with_the_subjects_own_fields_first_and_counted() {
    let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
    let t = &cloneset.template;
    let admitted = vec![
        (format!("{t}.spec.hostname"), json!("x")),
        ("spec.minReadySeconds".to_string(), json!(1)),
        (format!("{t}.metadata.labels"), json!({"k": "v"})),
        ("spec.paused".to_string(), json!(true)),
        // Too big for a behaviour trial: left out.
        ("spec.replicas".to_string(), json!(2_000_000_000)),
    ];
    let (_, _, updates, own) = prepare(cloneset.clone(), admitted, &[], 1);
    let keys: Vec<&str> = updates.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(own, 2);
    // Its own first, in the order its trials walk them; the template's after.
    let walk = trial::own_order(updates[..own].to_vec(), 1, cloneset.family);
    assert_eq!(updates[..own], walk[..]);
    let mut first = keys[..own].to_vec();
    first.sort();
    assert_eq!(first, ["spec.minReadySeconds", "spec.paused"]);
    assert_eq!(
        keys[own..],
        [
            &format!("{t}.spec.hostname"),
            &format!("{t}.metadata.labels")
        ]
    );
}

#[test]
fn a_subject_with_claim_templates_walks_them_first_each_after_a_settle() {
    let served = fixture_subjects();
    let named = |n: &str| named_in(&served, n);
    let (plain, claims) = (
        named("CloneSet"),
        named(&format!("CloneSet{}", crate::explore::subject::CLAIMS)),
    );
    let vct = "spec.volumeClaimTemplates";
    let admitted: Vec<(String, Value)> = [
        ("spec.minReadySeconds".to_string(), json!(1)),
        ("spec.paused".to_string(), json!(true)),
        (format!("{vct}[0].spec.storageClassName"), json!("x")),
        (
            format!("{vct}[0].spec.resources.requests"),
            json!({"s": "2"}),
        ),
        (vct.to_string(), json!([])),
    ]
    .into();
    let under = |k: &str| trial::meets(vct, k);
    for seed in 1..12 {
        let (s, creates, updates, own) = prepare(claims.clone(), admitted.clone(), &[], seed);
        assert_eq!(own, 5);
        assert!(updates[..3].iter().all(|(k, _)| under(k)), "{updates:?}");
        assert_eq!(settled_first(&s, &updates, own), 3);
        let m = Material {
            subject: &s.name,
            creates: &creates,
            updates: &updates,
            own_updates: own,
            settled_first: settled_first(&s, &updates, own),
            walk: trial::Walk::ALONE,
            ops: &[],
            perturbations: &[],
        };
        // Trial i walks own update i (alone in its kind): the first three after a settle.
        for (i, u) in updates[..3].iter().enumerate() {
            let w = Step::Update {
                set: Fields::from([u.clone()]),
            };
            let t = trial::behaviour(&m, seed, i as u64);
            assert!(
                t.steps
                    .windows(2)
                    .any(|p| p[0] == Step::Settle && p[1] == w),
                "{t:?}"
            );
        }
        // A subject without claim templates walks them among the rest, none settled first.
        let (s, _, updates, own) = prepare(plain.clone(), admitted.clone(), &[], seed);
        assert_eq!(settled_first(&s, &updates, own), 0);
        let walk = trial::own_order(updates[..own].to_vec(), seed, s.family);
        assert_eq!(updates[..own], walk[..]);
    }
}

#[test]
fn a_kinds_walk_starts_with_what_takes_away_what_its_seed_declares_the_largest_first() {
    let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
    let seed = cloneset.seed.make("x");
    let declared = |k: &str| !crate::explore::path::get(&seed, k).is_null();
    assert!(declared("spec.replicas") && declared("spec.selector.matchLabels"));
    assert!(!declared("spec.minReadySeconds") && !declared("spec.paused"));
    let admitted = vec![
        ("spec.minReadySeconds".to_string(), json!(1)),
        ("spec.minReadySeconds".to_string(), Value::Null),
        ("spec.paused".to_string(), json!(true)),
        ("spec.replicas".to_string(), json!(3)),
        ("spec.replicas".to_string(), Value::Null),
        ("spec.selector.matchLabels".to_string(), json!({})),
        ("spec.selector.matchLabels".to_string(), json!({"k": "v"})),
    ];
    for seed in 1..20 {
        let (_, _, updates, own) = prepare(cloneset.clone(), admitted.clone(), &[], seed);
        assert_eq!(own, 7);
        // The two that take away a declared field, the shallower first; then the rest
        // (a removal of what the seed does not declare, and every other value) in rounds.
        assert_eq!(
            updates[..2],
            [
                ("spec.replicas".to_string(), Value::Null),
                ("spec.selector.matchLabels".to_string(), json!({})),
            ],
            "seed {seed}"
        );
        let rest = trial::own_order(updates[2..].to_vec(), seed, cloneset.family);
        assert_eq!(updates[2..], rest[..], "seed {seed}");
    }
    // Nothing taken away where the seed holds nothing, or the value is not empty.
    assert!(!takes_away(&seed, "spec.minReadySeconds", &Value::Null));
    assert!(!takes_away(&seed, "spec.replicas", &json!(0)));
    assert!(takes_away(&seed, "spec.selector", &Value::Null));
}

#[test]
fn creates_reach_fields_from_across_the_schema_in_an_order_drawn_from_the_seed() {
    let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
    let schema: Vec<String> = (0..20).map(|f| format!("spec.f{f:02}")).collect();
    // What admission admitted, in schema order: a few values of each field, and absent.
    let admitted: Vec<(String, Value)> = schema
        .iter()
        .flat_map(|f| [json!(0), json!(1), json!(true), Value::Null].map(|v| (f.clone(), v)))
        .collect();
    let budget = 8;
    let in_schema_order: Vec<&str> = admitted
        .iter()
        .filter(|(_, v)| !v.is_null())
        .take(budget)
        .map(|(k, _)| k.as_str())
        .collect();
    let tried = |seed: u64| -> Vec<Fields> {
        let (s, creates, updates, own) = prepare(cloneset.clone(), admitted.clone(), &[], seed);
        let m = Material {
            subject: &s.name,
            creates: &creates,
            updates: &updates,
            own_updates: own,
            settled_first: 0,
            walk: trial::Walk::ALONE,
            ops: &[],
            perturbations: &[],
        };
        // The trials that take the creates in order: two of every three (the third sets
        // several together, `trial::create_of`).
        (0..)
            .filter(|i| i % 3 != 2)
            .take(budget)
            .map(|i| match &trial::behaviour(&m, seed, i).steps[0] {
                Step::Create { set } => set.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let a = tried(7);
    let fields: Vec<&str> = a
        .iter()
        .flat_map(|set| set.keys().map(String::as_str))
        .collect();
    assert_ne!(fields, in_schema_order);
    let mut distinct = fields.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), budget, "a field each: {fields:?}");
    assert!(
        fields
            .iter()
            .any(|f| !schema[..budget].contains(&f.to_string())),
        "past the schema's first fields: {fields:?}"
    );
    assert_eq!(tried(7), a, "the same seed, the same creates");
    assert_ne!(tried(8), a, "another seed, other creates");
    // Every admitted create is kept, each once.
    let (_, mut creates, _, _) = prepare(cloneset.clone(), admitted.clone(), &[], 7);
    let mut all: Vec<Fields> = admitted
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| Fields::from([(k.clone(), v.clone())]))
        .collect();
    let key = |f: &Fields| serde_json::to_string(f).unwrap();
    creates.sort_by_key(key);
    all.sort_by_key(key);
    assert_eq!(creates, all);
}
