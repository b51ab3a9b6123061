//! The trials' tests: covering rows, behaviour trials drawn from their material, perturbation classes.

use super::*;
use serde_json::json;

fn fields(n: usize, values: usize) -> Vec<(String, Vec<Value>)> {
    (0..n)
        .map(|f| {
            (
                format!("spec.f{f}"),
                (0..values).map(|v| json!(v)).collect(),
            )
        })
        .collect()
}

#[test]
fn every_pair_of_values_is_in_some_row_and_rows_replay_from_the_seed() {
    let f = fields(6, 3);
    let rows = covering_rows(&f, &mut Rng::new(7, 0));
    for a in 0..6 {
        for b in a + 1..6 {
            for i in 0..3 {
                for j in 0..3 {
                    let (fa, fb) = (&f[a].0, &f[b].0);
                    assert!(
                        rows.iter().any(|r| r[fa] == json!(i) && r[fb] == json!(j)),
                        "{fa}={i} with {fb}={j} in no row"
                    );
                }
            }
        }
    }
    assert!(
        rows.len() < 3 * 3 * 3,
        "far fewer rows than all pairs: {}",
        rows.len()
    );
    assert_eq!(rows, covering_rows(&f, &mut Rng::new(7, 0)));
    assert_ne!(rows, covering_rows(&f, &mut Rng::new(8, 0)));
}

/// The operations of a replicated workload kind.
const POD_OPS: &[Op] = &[
    Op::Rollout,
    Op::Recreate,
    Op::ChangeSelector,
    Op::ScaleUp,
    Op::ScaleDown,
];

#[test]
fn a_trial_is_the_same_for_the_same_seed_and_index_and_survives_yaml() {
    let creates = vec![Fields::from([("spec.paused".to_string(), json!(true))])];
    let updates = vec![("spec.minReadySeconds".to_string(), json!(-1))];
    let m = Material {
        subject: "CloneSet",
        creates: &creates,
        own_updates: 0,
        settled_first: 0,
        walk: Walk::ALONE,
        updates: &updates,
        ops: POD_OPS,
        perturbations: &[Perturbation::DeletePod { which: Which::Old }],
    };
    let a = behaviour(&m, 42, 3);
    assert_eq!(a, behaviour(&m, 42, 3));
    assert!(matches!(a.steps[0], Step::Create { .. }));
    assert!((3..=5).contains(&a.steps.len()));
    let others: Vec<Trial> = (0..20).map(|i| behaviour(&m, 43, i)).collect();
    assert!(others.iter().any(|t| t.steps[1..] != a.steps[1..]));
    assert_eq!(Trial::from_yaml(&a.to_yaml()).unwrap(), a);
    // Another subject with the same material draws other steps at the same numbers.
    let other = Material {
        subject: "SidecarSet.CloneSet",
        ..m
    };
    let differ = (0..20)
        .filter(|&i| behaviour(&m, 42, i).steps[1..] != behaviour(&other, 42, i).steps[1..])
        .count();
    assert!(differ > 0, "the same steps for every number");
}

#[test]
fn creates_take_each_set_once_and_every_third_trial_sets_fields_apart_together() {
    let creates: Vec<Fields> = (0..10)
        .map(|i| Fields::from([(format!("spec.f{i}"), json!(i))]))
        .chain([Fields::from([("spec.f0.inner".to_string(), json!(1))])])
        .collect();
    let m = Material {
        subject: "CloneSet",
        creates: &creates,
        own_updates: 0,
        settled_first: 0,
        walk: Walk::ALONE,
        updates: &[],
        ops: POD_OPS,
        perturbations: &[],
    };
    let created = |i: u64| match &behaviour(&m, 3, i).steps[0] {
        Step::Create { set } => set.clone(),
        other => panic!("{other:?}"),
    };
    let trials: Vec<Fields> = (0..40).map(created).collect();
    // Two of every three take the sets in order, each once.
    let singles: Vec<&Fields> = (0..40)
        .filter(|i| i % 3 != 2)
        .map(|i| &trials[i])
        .take(creates.len())
        .collect();
    assert_eq!(singles, creates.iter().collect::<Vec<_>>());
    // The others (and all past the sets) set two or three fields apart together.
    let mut combined = 0;
    for (i, t) in trials.iter().enumerate() {
        if i % 3 != 2 && i / 3 * 2 + i % 3 < creates.len() {
            continue;
        }
        combined += 1;
        assert!((2..=3).contains(&t.len()), "{i}: {t:?}");
        for a in t.keys() {
            for b in t.keys().filter(|b| *b != a) {
                assert!(!meets(a, b), "{i}: {a} and {b} meet: {t:?}");
            }
        }
    }
    assert!(combined >= 20, "{combined}");
    assert_ne!(trials[2], trials[5], "drawn at random");
    assert_eq!(created(2), trials[2], "the same seed, the same draw");
    assert!(meets("spec.a", "spec.a.b") && meets("spec.a[0].b", "spec.a"));
    assert!(!meets("spec.ab", "spec.a") && !meets("spec.b", "spec.a"));
    assert!(combination(&[], &mut Rng::new(1, 1)).is_empty());
}

#[test]
fn a_drawn_update_sets_the_subjects_own_fields_half_the_time_however_many_the_template_has() {
    let creates = vec![Fields::new()];
    // Two fields of its own, a hundred of its template's.
    let mut updates = vec![
        ("spec.minReadySeconds".to_string(), json!(1)),
        ("spec.paused".to_string(), json!(true)),
    ];
    updates.extend((0..100).map(|i| (format!("spec.template.spec.f{i}"), json!(i))));
    let draws = |own_updates| {
        let m = Material {
            subject: "CloneSet",
            creates: &creates,
            updates: &updates,
            own_updates,
            settled_first: 0,
            walk: Walk::ALONE,
            ops: &[],
            perturbations: &[],
        };
        let (mut own, mut all) = (0, 0);
        for i in 0..400 {
            let mut steps = behaviour(&m, 3, i).steps;
            // The walked own update aside: every trial has one (the test below).
            if let Some((k, v)) = walked(&m, i) {
                let at = steps
                    .iter()
                    .position(|s| {
                        *s == Step::Update {
                            set: Fields::from([(k.clone(), v.clone())]),
                        }
                    })
                    .expect("the walked update is among the steps");
                steps.remove(at);
            }
            for step in steps {
                if let Step::Update { set } = step {
                    all += 1;
                    own += usize::from(!set.keys().any(|k| k.starts_with("spec.template")));
                }
            }
        }
        (own, all)
    };
    let (own, all) = draws(2);
    assert!(all > 100, "{all} updates");
    let half = own as f64 / all as f64;
    assert!(
        (0.4..0.6).contains(&half),
        "{own} of {all} set an own field"
    );
    // Not told which are its own: each update as likely as another.
    let (own, all) = draws(0);
    assert!((own as f64 / all as f64) < 0.1, "{own} of {all}");
}

#[test]
fn a_settle_waits_between_steps_never_last_nor_twice_in_a_row() {
    let creates = vec![Fields::new()];
    let updates = vec![("spec.minReadySeconds".to_string(), json!(1))];
    let m = Material {
        subject: "CloneSet",
        creates: &creates,
        own_updates: 0,
        settled_first: 0,
        walk: Walk::ALONE,
        updates: &updates,
        ops: POD_OPS,
        perturbations: &[Perturbation::DeletePod {
            which: Which::Newest,
        }],
    };
    let trials: Vec<Trial> = (0..200).map(|i| behaviour(&m, 11, i)).collect();
    let settles = trials
        .iter()
        .filter(|t| t.steps.contains(&Step::Settle))
        .count();
    assert!(settles > 20, "{settles} of 200 trials settle between steps");
    for t in &trials {
        assert_ne!(t.steps.last(), Some(&Step::Settle), "{t:?}");
        assert!(
            t.steps
                .windows(2)
                .all(|w| w != [Step::Settle, Step::Settle]),
            "{t:?}"
        );
    }
    let t = trials
        .iter()
        .find(|t| t.steps.contains(&Step::Settle))
        .unwrap();
    let text = t.to_yaml();
    assert!(text.contains("step: settle"), "{text}");
    assert_eq!(&Trial::from_yaml(&text).unwrap(), t);
}

#[test]
fn perturbation_classes_read_from_the_command_line_and_name_what_runs_alone() {
    assert_eq!(Class::parse_list("true").unwrap(), Class::DEFAULT);
    assert_eq!(Class::parse_list("default").unwrap(), Class::DEFAULT);
    assert!(Class::parse_list("false").unwrap().is_empty());
    assert_eq!(Class::parse_list("all").unwrap(), Class::ALL);
    assert_eq!(
        Class::parse_list("watches,pods,watches").unwrap(),
        [Class::Pods, Class::Watches]
    );
    let e = Class::parse_list("pods,clocks").unwrap_err();
    assert!(e.contains("`clocks`") && e.contains("watches"), "{e}");
    assert_eq!(
        Class::parse_list("apiserver,node-down").unwrap(),
        [Class::NodeDown, Class::Apiserver]
    );
    for c in Class::ALL {
        for p in c.perturbations() {
            assert_eq!(p.class(), c);
            assert_eq!(p.global(), !Class::DEFAULT.contains(&c), "{p:?}");
        }
        // Only what acts on the manager's traffic needs it behind the proxy.
        assert_eq!(
            c.needs_proxy(),
            [Class::Manager, Class::Watches].contains(&c),
            "{c:?}"
        );
    }
}

#[test]
fn a_trial_with_a_stale_view_replays_from_its_yaml_and_runs_alone() {
    let creates = vec![Fields::new()];
    let all: Vec<Perturbation> = Class::ALL
        .into_iter()
        .flat_map(Class::perturbations)
        .collect();
    let m = Material {
        subject: "CloneSet",
        creates: &creates,
        own_updates: 0,
        settled_first: 0,
        walk: Walk::ALONE,
        updates: &[],
        ops: POD_OPS,
        perturbations: &all,
    };
    let trials: Vec<Trial> = (0..40).map(|i| behaviour(&m, 9, i)).collect();
    let stale = trials
        .iter()
        .find(|t| {
            t.perturbations()
                .any(|p| matches!(p, Perturbation::HoldEvents { .. }))
        })
        .expect("some trial holds events");
    assert!(stale.global());
    let text = stale.to_yaml();
    assert!(text.contains("hold-events"), "{text}");
    assert_eq!(&Trial::from_yaml(&text).unwrap(), stale);
    assert!(trials.iter().any(|t| !t.global()));
}

#[test]
fn an_objects_values_count_in_the_walks_rounds_as_the_fields_they_set() {
    // Three fields with three values each, and a free-form object whose six values each set
    // another leaf (and an empty one).
    let mut own: Vec<(String, Value)> = (0..3)
        .flat_map(|f| (0..3).map(move |v| (format!("spec.own{f}"), json!(v))))
        .collect();
    let patch = "spec.subsets[0].patch";
    own.push((patch.into(), json!({})));
    for leaf in ["a", "b", "c", "d", "e"] {
        own.push((patch.into(), json!({"spec": {leaf: "x"}})));
    }
    own.push((
        patch.into(),
        json!({"spec": {"list": [{"name": "m", "f": 1}]}}),
    ));
    for seed in 1..10 {
        let order = own_order(own.clone(), seed, "WorkloadSpread");
        assert_eq!(order.len(), own.len());
        // The first round: a value of each of the three fields, and every patch (the empty
        // object one of them): ten updates; the second and third rounds the others' values.
        let patches = order[..10].iter().filter(|(k, _)| k == patch).count();
        assert_eq!(patches, 7, "seed {seed}: {order:?}");
        assert!(order[10..].iter().all(|(k, _)| k != patch), "{order:?}");
    }
}

#[test]
fn every_trial_sets_one_own_field_and_a_kinds_subjects_walk_its_own_updates_without_repeats() {
    let creates = vec![Fields::new()];
    // Seven fields of its own with three values each, a hundred of its template's.
    let own: Vec<(String, Value)> = (0..7)
        .flat_map(|f| (0..3).map(move |v| (format!("spec.own{f}"), json!(v))))
        .collect();
    let order = own_order(own.clone(), 5, "UnitedDeployment");
    assert_eq!(order.len(), own.len());
    assert_eq!(order, own_order(own.clone(), 5, "UnitedDeployment"));
    assert_ne!(order, own_order(own.clone(), 6, "UnitedDeployment"));
    // One value of every field before a second of any.
    let first: std::collections::BTreeSet<&str> =
        order[..7].iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(first.len(), 7, "{order:?}");
    // A kind's subjects whose own fields differ a little keep the order of those they share.
    let fewer = own_order(own[3..].to_vec(), 5, "UnitedDeployment");
    let shared: Vec<&(String, Value)> = order.iter().filter(|u| fewer.contains(u)).collect();
    assert_eq!(shared, fewer.iter().collect::<Vec<_>>());
    let mut updates = order.clone();
    updates.extend((0..100).map(|i| (format!("spec.template.spec.f{i}"), json!(i))));
    // Three subjects of one kind, seven trials each: 21 trials, 21 own updates, each once.
    let mut seen = Vec::new();
    for at in 0..3 {
        let m = Material {
            subject: [
                "UnitedDeployment.a",
                "UnitedDeployment.b",
                "UnitedDeployment.c",
            ][at],
            creates: &creates,
            updates: &updates,
            own_updates: order.len(),
            settled_first: 0,
            walk: Walk {
                at: at as u64,
                of: 3,
            },
            ops: POD_OPS,
            perturbations: &[],
        };
        for i in 0..7 {
            let w = walked(&m, i).expect("own updates to walk");
            let t = behaviour(&m, 5, i);
            assert!(
                t.steps[1..].contains(&Step::Update {
                    set: Fields::from([w.clone()])
                }),
                "{t:?}"
            );
            assert!((2..=6).contains(&t.steps.len()), "{t:?}");
            seen.push(w);
        }
    }
    seen.sort_by(|a, b| (&a.0, a.1.to_string()).cmp(&(&b.0, b.1.to_string())));
    seen.dedup();
    assert_eq!(seen.len(), 21, "every own update once");
    // Without own updates, nothing is walked and two to four steps are drawn.
    let m = Material {
        subject: "CloneSet",
        creates: &creates,
        updates: &updates[7..],
        own_updates: 0,
        settled_first: 0,
        walk: Walk::ALONE,
        ops: POD_OPS,
        perturbations: &[],
    };
    assert_eq!(walked(&m, 0), None);
    assert!((0..50).all(|i| (3..=5).contains(&behaviour(&m, 5, i).steps.len())));
}

#[test]
fn a_carried_trial_keeps_its_steps_on_the_other_subject_or_is_not_carried() {
    let set = |pairs: &[(&str, Value)]| -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    };
    let t = Trial {
        subject: "P.A".into(),
        mode: Mode::Behaviour,
        seed: 3,
        index: 41,
        steps: vec![
            Step::Create {
                set: set(&[("spec.own", json!(1)), ("target:spec.onlyA", json!("x"))]),
            },
            Step::Settle,
            Step::Operate { op: Op::Rollout },
            Step::Update {
                set: set(&[("spec.own", json!(2))]),
            },
            Step::Perturb {
                perturbation: Perturbation::CordonNode,
            },
        ],
    };
    let offers: std::collections::BTreeSet<String> = ["spec.own".to_string()].into();
    let ops = [Op::Rollout, Op::Recreate];
    let perturbations = [Perturbation::CordonNode];
    let c = carried(&t, "P.B", &offers, &ops, &perturbations).expect("carried");
    assert_eq!((c.subject.as_str(), c.seed, c.index), ("P.B", 3, 41));
    assert_eq!(
        c.steps[0],
        Step::Create {
            set: set(&[("spec.own", json!(1))])
        },
        "the create's field B does not offer is left out"
    );
    assert_eq!(c.steps[1..], t.steps[1..], "every other step as it was");
    assert_eq!(carried(&t, "P.A", &offers, &ops, &perturbations), None);
    assert_eq!(
        carried(&t, "P.B", &offers, &[Op::Recreate], &perturbations),
        None,
        "an operation B has not"
    );
    assert_eq!(
        carried(&t, "P.B", &offers, &ops, &[]),
        None,
        "a perturbation"
    );
    let only_a = set(&[("target:spec.onlyA", json!("x"))]);
    for (at, step, why) in [
        (
            3,
            Step::Update {
                set: only_a.clone(),
            },
            "an update of a field B does not offer",
        ),
        (
            0,
            Step::Create { set: only_a },
            "a create that keeps none of its fields",
        ),
    ] {
        let mut u = t.clone();
        u.steps[at] = step;
        assert_eq!(
            carried(&u, "P.B", &offers, &ops, &perturbations),
            None,
            "{why}"
        );
    }
    let mut w = t.clone();
    w.steps[0] = Step::Create { set: Fields::new() };
    assert!(
        carried(&w, "P.B", &offers, &ops, &perturbations).is_some(),
        "the seed object alone, as it was"
    );
}

#[test]
fn a_rollout_follows_the_walked_update_half_the_time_where_the_subject_rolls_out() {
    let creates = vec![Fields::new()];
    let updates: Vec<(String, Value)> = (0..20).map(|i| (format!("spec.f{i}"), json!(i))).collect();
    let followed = |ops: &[Op]| {
        let m = Material {
            subject: "CloneSet",
            creates: &creates,
            updates: &updates,
            own_updates: updates.len(),
            settled_first: 0,
            walk: Walk::ALONE,
            ops,
            perturbations: &[],
        };
        (0..400)
            .filter(|&i| {
                let w = walked(&m, i).expect("own updates to walk");
                let t = behaviour(&m, 3, i);
                let at = t
                    .steps
                    .iter()
                    .position(|s| {
                        *s == Step::Update {
                            set: Fields::from([w.clone()]),
                        }
                    })
                    .expect("the walked update is among the steps");
                t.steps.get(at + 1) == Some(&Step::Operate { op: Op::Rollout })
            })
            .count()
    };
    let n = followed(POD_OPS);
    assert!(
        (170..300).contains(&n),
        "{n} of 400 trials roll out after the walked update"
    );
    // Where no rollout applies, none.
    assert_eq!(followed(&[Op::ScaleUp, Op::ScaleDown]), 0);
}
