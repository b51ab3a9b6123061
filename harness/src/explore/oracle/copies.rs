//! A kind that copies a resource into the namespaces it selects: [`copies_convergence`] (start
//! there) judges its copies in every namespace [`selects`] picks ([`NamespaceView`], matched by
//! [`selector_matches`]) and nowhere else.

use std::collections::BTreeMap;

use serde_json::Value;

/// Namespaces no copy goes to, whatever the targets say: the targets' documentation names
/// them ("except some forbidden namespaces, such as kube-system and kube-public").
pub const FORBIDDEN_NAMESPACES: &[&str] = &["kube-system", "kube-public"];

/// A namespace, as the copy oracle sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceView {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Whether it is being deleted (nothing can be made in it; what it holds goes with it).
    pub terminating: bool,
}

/// Whether a label selector selects `labels`: every `matchLabels` pair and every
/// `matchExpressions` requirement holds. An empty or absent selector selects nothing, as the
/// targets' documentation says ("if NamespaceLabelSelector is not empty").
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector["matchLabels"].as_object();
    let exprs = selector["matchExpressions"].as_array();
    if pairs.is_none_or(|p| p.is_empty()) && exprs.is_none_or(|e| e.is_empty()) {
        return false;
    }
    let pairs_hold = pairs
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let exprs_hold = exprs.into_iter().flatten().all(|e| {
        let value = e["key"].as_str().and_then(|k| labels.get(k));
        let among = || {
            value.is_some_and(|v| {
                e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|x| x.as_str() == Some(v.as_str()))
            })
        };
        match e["operator"].as_str() {
            Some("In") => among(),
            Some("NotIn") => !among(),
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    });
    pairs_hold && exprs_hold
}

/// Whether `targets` (a copying object's `spec.targets`) select namespace `ns`: never a
/// forbidden or an excluded one; else every one with `allNamespaces`, an included one, or one
/// the namespace selector (`namespaceLabelSelector`, `namespaceSelector` in later versions)
/// selects.
pub fn selects(targets: &Value, ns: &NamespaceView) -> bool {
    let listed = |list: &Value| {
        list["list"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|i| i["name"].as_str() == Some(ns.name.as_str()))
    };
    if FORBIDDEN_NAMESPACES.contains(&ns.name.as_str()) || listed(&targets["excludedNamespaces"]) {
        return false;
    }
    targets["allNamespaces"] == true
        || listed(&targets["includedNamespaces"])
        || ["namespaceLabelSelector", "namespaceSelector"]
            .iter()
            .any(|k| selector_matches(&targets[*k], &ns.labels))
}

/// What an object holds besides its identity and status: its top-level fields but
/// `apiVersion`, `kind`, `metadata` and `status`.
fn content(o: &Value) -> BTreeMap<String, Value> {
    o.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// O2 for a subject that copies a resource into namespaces ([`super::subject::Makes::Copies`]),
/// once settled: its status has observed its generation and counts the namespaces that hold
/// their copy; each namespace its targets select (and that is not being deleted) holds one
/// copy it owns, named as the resource, holding what the resource holds as the API stores it
/// (`stored`: the resource as a dry-run create answers, or the resource itself) and its labels
/// and annotations; no other namespace holds a copy it owns; `status.succeeded` counts the
/// selected namespaces that hold their copy. `copies` are the objects of the
/// resource's kind it owns, everywhere. Returns what differs.
pub fn copies_convergence(
    obj: &Value,
    stored: &Value,
    namespaces: &[NamespaceView],
    copies: &[Value],
) -> Vec<String> {
    let mut out = vec![];
    let generation = obj["metadata"]["generation"].as_i64();
    let observed = obj["status"]["observedGeneration"].as_i64();
    if observed.is_none() || observed < generation {
        out.push(format!(
            "status.observedGeneration: want {}, got {}",
            generation.unwrap_or_default(),
            observed.map_or("none".into(), |o| o.to_string())
        ));
    }
    let resource = &obj["spec"]["resource"];
    let name = resource["metadata"]["name"].as_str().unwrap_or_default();
    let want = content(stored);
    let targets = &obj["spec"]["targets"];
    let mut holding = 0;
    let mut terminating_with_copy = 0;
    for ns in namespaces {
        let copy = copies.iter().find(|c| {
            c["metadata"]["namespace"].as_str() == Some(ns.name.as_str())
                && c["metadata"]["name"].as_str() == Some(name)
        });
        if ns.terminating {
            terminating_with_copy += usize::from(copy.is_some());
            continue;
        }
        if !selects(targets, ns) {
            if copy.is_some() {
                out.push(format!(
                    "copy left: in namespace {}, which its targets do not select",
                    ns.name
                ));
            }
            continue;
        }
        let Some(copy) = copy else {
            out.push(format!(
                "copy missing: namespace {} is selected by its targets and holds no copy {name}",
                ns.name
            ));
            continue;
        };
        holding += 1;
        let got = content(copy);
        for k in want
            .keys()
            .chain(got.keys())
            .collect::<std::collections::BTreeSet<_>>()
        {
            if want.get(k) != got.get(k) {
                out.push(format!(
                    "copy {k}: in namespace {}, want {} (the resource's), got {}",
                    ns.name,
                    want.get(k).map_or("none".into(), Value::to_string),
                    got.get(k).map_or("none".into(), Value::to_string)
                ));
            }
        }
        for m in ["labels", "annotations"] {
            for (k, v) in resource["metadata"][m].as_object().into_iter().flatten() {
                if copy["metadata"][m][k] != *v {
                    out.push(format!(
                        "copy {m}: in namespace {}, {k} want {v} (the resource's), got {}",
                        ns.name, copy["metadata"][m][k]
                    ));
                }
            }
        }
    }
    // A namespace being deleted may still hold a copy the controller counts.
    if let Some(succeeded) = obj["status"]["succeeded"].as_i64() {
        let (low, high) = (holding as i64, (holding + terminating_with_copy) as i64);
        if !(low..=high).contains(&succeeded) {
            out.push(format!(
                "status.succeeded: want {low} (the selected namespaces holding their copy), got {succeeded}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::convergence_key;
    use serde_json::json;

    fn ns(name: &str, labels: &[(&str, &str)], terminating: bool) -> NamespaceView {
        NamespaceView {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            terminating,
        }
    }

    #[test]
    fn a_selector_holds_every_pair_and_requirement_and_an_empty_one_selects_nothing() {
        let labels = BTreeMap::from([("a".to_string(), "1".to_string())]);
        assert!(selector_matches(
            &json!({"matchLabels": {"a": "1"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"a": "2"}}),
            &labels
        ));
        let expr = |op: &str, values: &[&str]| json!({"matchExpressions": [{"key": "a", "operator": op, "values": values}]});
        assert!(selector_matches(&expr("In", &["0", "1"]), &labels));
        assert!(!selector_matches(&expr("NotIn", &["1"]), &labels));
        assert!(selector_matches(&expr("Exists", &[]), &labels));
        assert!(!selector_matches(&expr("DoesNotExist", &[]), &labels));
        assert!(!selector_matches(&expr("Sideways", &[]), &labels));
        assert!(!selector_matches(&json!({}), &labels));
        assert!(!selector_matches(&json!({"matchExpressions": []}), &labels));
    }

    #[test]
    fn copies_are_judged_in_every_selected_namespace_and_nowhere_else() {
        let resource = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "r", "labels": {"l": "v"}}, "data": {"k": "v"}});
        let mut obj = json!({"metadata": {"generation": 2, "uid": "u"},
            "spec": {"resource": resource.clone(), "targets": {
                "includedNamespaces": {"list": [{"name": "in"}, {"name": "gone"}]},
                "excludedNamespaces": {"list": [{"name": "out"}]},
                "namespaceLabelSelector": {"matchLabels": {"t": "x"}}}},
            "status": {"observedGeneration": 2, "succeeded": 2}});
        let namespaces = [
            ns("in", &[], false),
            ns("picked", &[("t", "x")], false),
            ns("out", &[("t", "x")], false),
            ns("kube-system", &[("t", "x")], false),
            ns("other", &[], false),
            ns("ending", &[("t", "x")], true),
        ];
        let copy = |ns: &str, data: Value| {
            json!({"metadata": {"namespace": ns, "name": "r", "labels": {"l": "v"}},
                   "data": data})
        };
        let copies = vec![
            copy("in", json!({"k": "v"})),
            copy("picked", json!({"k": "v"})),
        ];
        assert!(
            copies_convergence(&obj, &resource, &namespaces, &copies).is_empty(),
            "{:?}",
            copies_convergence(&obj, &resource, &namespaces, &copies)
        );
        // A copy in a namespace being deleted may still be counted.
        let mut with_ending = copies.clone();
        with_ending.push(copy("ending", json!({"k": "v"})));
        obj["status"]["succeeded"] = json!(3);
        assert!(copies_convergence(&obj, &resource, &namespaces, &with_ending).is_empty());
        obj["status"]["succeeded"] = json!(2);

        let keys = |copies: &[Value], obj: &Value| -> Vec<String> {
            let mut k: Vec<String> = copies_convergence(obj, &resource, &namespaces, copies)
                .iter()
                .map(|d| convergence_key(d))
                .collect();
            k.dedup();
            k
        };
        let stale = vec![
            copy("in", json!({"k": "old"})),
            copy("picked", json!({"k": "v"})),
        ];
        assert_eq!(keys(&stale, &obj), ["does not converge: copy data"]);
        let missing = vec![copy("in", json!({"k": "v"}))];
        assert_eq!(
            keys(&missing, &obj),
            [
                "does not converge: copy missing",
                "does not converge: status.succeeded"
            ]
        );
        let mut extra = copies.clone();
        extra.push(copy("out", json!({"k": "v"})));
        assert_eq!(keys(&extra, &obj), ["does not converge: copy left"]);
        let unlabelled = vec![
            json!({"metadata": {"namespace": "in", "name": "r"}, "data": {"k": "v"}}),
            copy("picked", json!({"k": "v"})),
        ];
        assert_eq!(keys(&unlabelled, &obj), ["does not converge: copy labels"]);
        obj["status"]["observedGeneration"] = json!(1);
        assert_eq!(
            keys(&copies, &obj),
            ["does not converge: status.observedGeneration"]
        );
        // Every namespace but the forbidden and the excluded ones, with allNamespaces.
        let all = json!({"metadata": {"generation": 1}, "spec": {"resource": resource.clone(),
            "targets": {"allNamespaces": true, "excludedNamespaces": {"list": [{"name": "out"}]}}},
            "status": {"observedGeneration": 1}});
        let everywhere: Vec<Value> = ["in", "picked", "other"]
            .iter()
            .map(|n| copy(n, json!({"k": "v"})))
            .collect();
        assert!(copies_convergence(&all, &resource, &namespaces, &everywhere).is_empty());
    }
}
