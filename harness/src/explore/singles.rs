//! The values admission trials try: [`singles`] (start there), each leaf of a subject's schema
//! with each of its values, its pod template's leaves bounded ([`TEMPLATE_SINGLES`]), and
//! the helpers that make covering rows of them ([`outermost`], [`innermost`]).

use serde_json::Value;

use super::subject::{self, Subject};
use super::trial::{Fields, Rng, stream_of};
use super::{openapi, schema};

/// The most single values tried on a subject's pod template, and on a policy's target's.
///
/// How admission trials are bounded: a pod template walked from the cell's OpenAPI has
/// hundreds of leaves ([`schema`] bounds the walk by depth and by lists), and each single is
/// two dry runs on the subject and two on its twin, for each of many subjects. Every leaf of
/// a subject's own template gets its first value (the typical one: the first member, the
/// first word, the object the cell makes), however many leaves there are; further values are
/// drawn with the run's seed until the template has [`TEMPLATE_SINGLES`] singles. A policy's
/// target ([`TARGET_SINGLES`]) explores the policy, not the template, which its own subject
/// explores: its fields are drawn too. So one run tries every leaf of every subject's own
/// template, and another seed tries other values of them. The CRD's own leaves are not
/// bounded: they are the subject's, and a few hundred values at most.
pub const TEMPLATE_SINGLES: usize = 150;

/// The most values of one field that covering rows pair with the others' (see
/// [`Explorer::admission`]).
pub(super) const ROW_VALUES: usize = 12;

/// The most single values tried on a policy's target's template (see [`TEMPLATE_SINGLES`]).
pub const TARGET_SINGLES: usize = 50;

/// The single values tried on `s`, each a field set: each leaf of its schema with each of its
/// values, its pod template's leaves walked from the cell's core types in `doc` (bounded, see
/// [`TEMPLATE_SINGLES`], drawn with `seed`), and a policy's target's. A field of a list's item
/// where the seed has no item is set through a minimal item: the set holds the list with
/// that item (the field set in it) and the field itself, so that findings name the field.
pub fn singles(s: &Subject, crd: &Value, doc: &openapi::Doc, seed: u64) -> Vec<Fields> {
    let [mut own, template, target] = parts(s, crd, doc);
    own.extend(bounded(template, TEMPLATE_SINGLES, seed, &s.name, true));
    own.extend(bounded(target, TARGET_SINGLES, seed, &s.name, false));
    own
}

/// Every single value the schema offers `s`, unbounded: what [`singles`] draws from (the
/// reach table's "offered").
pub fn offered(s: &Subject, crd: &Value, doc: &openapi::Doc) -> Vec<Fields> {
    parts(s, crd, doc).concat()
}

/// The singles of `s`'s own leaves, of its pod template's and of its target's template.
fn parts(s: &Subject, crd: &Value, doc: &openapi::Doc) -> [Vec<Fields>; 3] {
    let version = s.api_version.rsplit('/').next().unwrap_or_default();
    let obj = s.seed.make("x");
    let reselect = s.reselect();
    let w = s.workload();
    let wseed = w.seed.make("x");
    let pod = subject::get(&wseed, &w.template).clone();
    let walk = schema::Walk {
        doc: Some(doc),
        template: &s.template,
        seed: &obj,
        pod: &pod,
    };
    let mut leaves = schema::leaves_with(crd, version, &walk);
    twin_words(s, doc, &mut leaves);
    let in_template = |l: &schema::Leaf| {
        !s.template.is_empty() && l.path.starts_with(&format!("{}.", s.template))
    };
    let (template, own): (Vec<_>, Vec<_>) = leaves.into_iter().partition(in_template);
    let own: Vec<_> = own
        .into_iter()
        .filter(|l| l.path != "spec.replicas" || s.replicated)
        .collect();
    let own = leaf_sets(&own, &obj, &reselect, false, "");
    let template = leaf_sets(&template, &obj, &reselect, true, "");
    // A policy meets its target's template fields.
    let target = match &s.target {
        Some(t) => {
            let tseed = t.seed.make("x");
            let tl = schema::template_leaves(doc, &t.template, &tseed);
            leaf_sets(&tl, &tseed, &reselect, true, subject::TARGET)
        }
        None => vec![],
    };
    [own, template, target]
}

/// The field sets of `leaves` of `seed` (keys prefixed with `prefix`), each value alone: a
/// selector also as `reselect`; absent only where `seed` has the field, when
/// `absent_if_set` (else absence is the seed itself); a field of a list item the seed lacks
/// through the list's minimal item. A value that cannot be set on the seed is left out.
pub(super) fn leaf_sets(
    leaves: &[schema::Leaf],
    seed: &Value,
    reselect: &Value,
    absent_if_set: bool,
    prefix: &str,
) -> Vec<Fields> {
    let minimal = |list: &str| {
        leaves.iter().find_map(|l| match &l.shape {
            schema::Shape::Objects(item) if l.path == list => Some(item.clone()),
            _ => None,
        })
    };
    let mut out = vec![];
    for l in leaves {
        let mut values = l.values();
        if l.shape == schema::Shape::Selector {
            values.insert(0, reselect.clone());
        }
        if absent_if_set && subject::get(seed, &l.path).is_null() {
            values.retain(|v| !v.is_null());
        }
        // The outermost list on the way with no item in the seed.
        let missing = l
            .path
            .match_indices("[0]")
            .map(|(i, _)| &l.path[..i])
            .find(|list| {
                subject::get(seed, list)
                    .as_array()
                    .is_none_or(Vec::is_empty)
            });
        for v in values {
            let set = match missing {
                None => Fields::from([(format!("{prefix}{}", l.path), v)]),
                Some(list) => {
                    let Some(mut item) = minimal(list) else {
                        continue;
                    };
                    let rest = &l.path[list.len() + "[0]".len()..];
                    if !rest.is_empty()
                        && subject::set(&mut item, rest.trim_start_matches('.'), v.clone()).is_err()
                    {
                        continue;
                    }
                    Fields::from([
                        (format!("{prefix}{list}"), Value::Array(vec![item])),
                        (format!("{prefix}{}", l.path), v),
                    ])
                }
            };
            out.push(set);
        }
    }
    out
}

/// `sets` bounded to `cap`: the first set of each field (the innermost path of the set), then
/// others drawn with `seed` (and `name`), in their order. With more fields than `cap`, every
/// field's first set is kept when `every_field` (the bound is then the number of fields), else
/// the fields are drawn too.
pub(super) fn bounded(
    sets: Vec<Fields>,
    cap: usize,
    seed: u64,
    name: &str,
    every_field: bool,
) -> Vec<Fields> {
    if sets.len() <= cap {
        return sets;
    }
    let stream = stream_of(name);
    let mut rng = Rng::new(seed, stream);
    let field = |f: &Fields| f.keys().last().cloned().unwrap_or_default();
    let mut firsts = vec![];
    let mut others = vec![];
    for (i, f) in sets.iter().enumerate() {
        match i == 0 || field(&sets[i - 1]) != field(f) {
            true => firsts.push(i),
            false => others.push(i),
        }
    }
    let cap = match every_field {
        true => cap.max(firsts.len()),
        false => cap,
    };
    rng.shuffle(&mut firsts);
    rng.shuffle(&mut others);
    let mut keep: Vec<usize> = firsts.into_iter().chain(others).take(cap).collect();
    keep.sort_unstable();
    let mut sets: Vec<Option<Fields>> = sets.into_iter().map(Some).collect();
    keep.into_iter().filter_map(|i| sets[i].take()).collect()
}

/// Adds to each string leaf of `s` without an enum the enum of the same field in its native
/// twin's schema, as the cell serves it, before the words of its description.
pub(super) fn twin_words(s: &Subject, doc: &openapi::Doc, leaves: &mut [schema::Leaf]) {
    let Some(t) = s.twin.as_deref() else { return };
    let Some(root) = doc.kind_schema(&t.api_version, t.kind) else {
        return;
    };
    for l in leaves {
        let schema::Shape::String(words) = &mut l.shape else {
            continue;
        };
        let Some(path) = s.twin_path(&l.path) else {
            continue;
        };
        let members = doc
            .at(root, &path)
            .and_then(|n| n["enum"].as_array().cloned())
            .unwrap_or_default();
        let mut all: Vec<String> = members
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect();
        for w in words.drain(..) {
            if !all.contains(&w) {
                all.push(w);
            }
        }
        *words = all;
    }
}

/// The fields of `set` that no other field of it holds: a list set with an item, beside a
/// field of that item, is the list (whose item has the field).
pub(super) fn outermost(set: Vec<(&str, &Value)>) -> Vec<(String, Value)> {
    let paths: Vec<&str> = set.iter().map(|(k, _)| *k).collect();
    set.iter()
        .filter(|(k, _)| {
            !paths.iter().any(|p| {
                k.len() > p.len()
                    && k.starts_with(p)
                    && matches!(k.as_bytes()[p.len()], b'.' | b'[')
            })
        })
        .map(|(k, v)| (k.to_string(), (*v).clone()))
        .collect()
}

/// A row without the fields that hold another of its fields (a list beside its item's
/// fields): the inner ones are kept.
pub(super) fn innermost(mut set: Fields) -> Fields {
    let paths: Vec<String> = set.keys().cloned().collect();
    set.retain(|k, _| {
        !paths.iter().any(|p| {
            p.len() > k.len()
                && p.starts_with(k.as_str())
                && matches!(p.as_bytes()[k.len()], b'.' | b'[')
        })
    });
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::select;
    use serde_json::json;

    #[test]
    fn a_row_keeps_an_items_fields_and_not_the_list_that_holds_them() {
        let row = Fields::from([
            ("spec.subsets".to_string(), json!([])),
            ("spec.subsets[0].name".to_string(), json!("x")),
            ("spec.subsetsLimit".to_string(), json!(1)),
            ("spec.paused".to_string(), json!(true)),
        ]);
        let kept: Vec<String> = innermost(row).into_keys().collect();
        assert_eq!(
            kept,
            ["spec.paused", "spec.subsetsLimit", "spec.subsets[0].name"]
        );
    }

    #[test]
    fn a_bound_keeps_every_fields_first_value_when_asked_and_draws_fields_else() {
        // 40 fields of 3 values each, in the order leaf_sets makes them.
        let sets: Vec<Fields> = (0..40)
            .flat_map(|f| (0..3).map(move |v| Fields::from([(format!("spec.f{f:02}"), json!(v))])))
            .collect();
        let firsts = |kept: &[Fields]| {
            kept.iter()
                .filter(|f| f.values().next() == Some(&json!(0)))
                .count()
        };
        let every = bounded(sets.clone(), 10, 1, "s", true);
        assert_eq!(every.len(), 40, "the bound is the number of fields");
        assert_eq!(firsts(&every), 40, "each field with its first value");
        let more = bounded(sets.clone(), 50, 1, "s", true);
        assert_eq!((more.len(), firsts(&more)), (50, 40), "then other values");
        let drawn = bounded(sets.clone(), 10, 1, "s", false);
        assert_eq!((drawn.len(), firsts(&drawn)), (10, 10), "fields drawn");
        assert_ne!(
            drawn,
            bounded(sets, 10, 2, "s", false),
            "another seed, others"
        );
    }

    #[test]
    fn a_templates_singles_come_from_the_cells_openapi_bounded_with_list_items_made_whole() {
        let doc = openapi::Doc::new(&[serde_json::from_str(include_str!(
            "../../tests/fixtures/openapi-core.json"
        ))
        .unwrap()]);
        let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let crd = json!({"spec": {"versions": [{"name": "v1alpha1", "served": true,
            "schema": {"openAPIV3Schema": {"properties": {"spec": {"type": "object",
                "properties": {"template": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
        let all = singles(&cloneset, &crd, &doc, 1);
        let fields: Vec<&String> = all.iter().flat_map(|f| f.keys()).collect();
        assert!(all.len() <= TEMPLATE_SINGLES, "{}", all.len());
        assert!(
            fields.iter().all(|k| k.starts_with("spec.template.")),
            "{fields:?}"
        );
        // Every leaf is tried with its first value when the leaves fit the bound.
        let leaves = schema::template_leaves(&doc, "spec.template", &cloneset.seed.make("x"));
        assert!(leaves.len() < TEMPLATE_SINGLES);
        for l in &leaves {
            assert!(fields.contains(&&l.path), "{} is tried", l.path);
        }
        // A field of an item the seed lacks: the list with a minimal item holding it, and it.
        let tol = all
            .iter()
            .find(|f| f.contains_key("spec.template.spec.tolerations[0].effect"))
            .expect("a toleration's effect is tried");
        let v = &tol["spec.template.spec.tolerations[0].effect"];
        assert_eq!(tol["spec.template.spec.tolerations"][0]["effect"], *v);
        assert_eq!(
            outermost(tol.iter().map(|(k, v)| (k.as_str(), v)).collect()).len(),
            1
        );
        // The seed lacks the field: absent is the seed itself, not a trial.
        assert!(
            !all.iter()
                .any(|f| f.get("spec.template.spec.priorityClassName") == Some(&Value::Null))
        );
        // Another seed draws other values, as many.
        let other = singles(&cloneset, &crd, &doc, 2);
        assert_eq!(other.len(), all.len());
        // A policy meets its target's template, bounded apart.
        let ws = select(&["WorkloadSpread.CloneSet".to_string()])
            .unwrap()
            .remove(0);
        let target = singles(&ws, &json!({}), &doc, 1);
        assert!(!target.is_empty() && target.len() <= TARGET_SINGLES);
        assert!(
            target
                .iter()
                .flat_map(|f| f.keys())
                .all(|k| k.starts_with(subject::TARGET))
        );
    }

    #[test]
    fn a_string_without_an_enum_takes_the_enum_of_its_twins_field() {
        let doc = openapi::Doc::new(&[json!({"components": {"schemas": {
            "io.k8s.api.apps.v1.Deployment": {
                "x-kubernetes-group-version-kind": [
                    {"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {"spec": {"properties": {"strategy": {"properties": {
                    "type": {"type": "string", "enum": ["Recreate", "RollingUpdate"]}}}}}}}}}})]);
        let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let mut leaves = vec![schema::Leaf {
            path: "spec.strategy.type".into(),
            shape: schema::Shape::String(vec!["Recreate".into(), "Other".into()]),
            required: false,
        }];
        twin_words(&cloneset, &doc, &mut leaves);
        assert_eq!(
            leaves[0].shape,
            schema::Shape::String(vec![
                "Recreate".into(),
                "RollingUpdate".into(),
                "Other".into()
            ])
        );
    }

    #[test]
    fn a_copying_kinds_singles_come_from_its_schema_with_the_trials_namespaces_selected() {
        let rd = select(&["ResourceDistribution".to_string()])
            .unwrap()
            .remove(0);
        let list = json!({"type": "object", "properties": {"list": {"type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}});
        let crd = json!({"spec": {"versions": [{"name": "v1alpha1", "served": true,
            "schema": {"openAPIV3Schema": {"properties": {"spec": {"type": "object",
                "required": ["resource", "targets"], "properties": {
                "resource": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true},
                "targets": {"type": "object", "properties": {
                    "allNamespaces": {"type": "boolean"},
                    "includedNamespaces": list.clone(),
                    "excludedNamespaces": list,
                    "namespaceLabelSelector": {"type": "object", "properties": {
                        "matchLabels": {"type": "object"},
                        "matchExpressions": {"type": "array"}}}}}}}}}}}]}});
        let singles = singles(&rd, &crd, &openapi::Doc::default(), 1);
        let of = |path: &str| -> Vec<&Value> {
            singles
                .iter()
                .filter(|f| f.len() == 1 && f.contains_key(path))
                .filter_map(|f| f.get(path))
                .collect()
        };
        assert_eq!(
            of("spec.resource").len(),
            subject::embedded_values().len(),
            "the resource is tried as each object that holds data, and never absent"
        );
        assert_eq!(
            of("spec.targets.namespaceLabelSelector")[0],
            &json!({"matchLabels": {subject::TRIAL_LABEL: subject::NAMESPACE}})
        );
        assert!(!of("spec.targets.includedNamespaces.list[0].name").is_empty());
        assert!(!of("spec.targets.excludedNamespaces.list[0].name").is_empty());
        assert_eq!(of("spec.targets.allNamespaces").len(), 3);
        // Its metadata is the spec's to set, as a nested template's.
        assert_eq!(
            of("spec.resource.metadata.labels"),
            [&json!({}), &json!({schema::MAP_KEY: "v"}), &Value::Null]
        );
        assert_eq!(of("spec.resource.metadata.annotations").len(), 3);
        assert!(
            singles
                .iter()
                .flat_map(|f| f.keys())
                .all(|k| !k.contains("template"))
        );
    }
}
