//! The claims a workload's pods get from its claim templates (`volumeClaimTemplates`), judged
//! from the pods and their claims: [`claims_follow`]. A pod the controller moves to a revision
//! made after the claim templates changed, keeping the pod (an update in place), keeps the
//! claims it was made with: unless its claims already carry what the templates now declare, the
//! templates' change never reaches it. The controller's update strategy decides between an
//! update in place and a new pod; what it may not do is move the pod to the new revision and
//! leave its claims behind it, unless the strategy updates in place only.

use std::collections::BTreeMap;

use serde_json::Value;

/// The label a workload marks each pod's revision with (the name of its ControllerRevision).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The workload's pods when a trial's update changed its claim templates: each live pod's
/// revision by its UID, and the newest revision number then.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimsChanged {
    /// Each live pod's revision label, by UID.
    pub pods: BTreeMap<String, String>,
    /// The newest ControllerRevision number the workload owned.
    pub newest: i64,
}

/// A live pod as the claims rule sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedPod {
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its revision label.
    pub revision: String,
}

/// Whether the update strategy of `spec` updates pods in place only (a pod is never replaced
/// to bring it to a new revision, so its claims stay whatever changed): a value of it, at any
/// depth (a strategy's `type`, a rolling update's pod update policy), that says so.
fn in_place_only(spec: &Value) -> bool {
    fn says(v: &Value) -> bool {
        match v {
            Value::String(t) => t.starts_with("InPlace") && t.ends_with("Only"),
            Value::Object(m) => m.values().any(says),
            _ => false,
        }
    }
    says(&spec["updateStrategy"])
}

/// O2 on the claims of a workload whose claim templates a trial changed (`changed`, taken then):
/// every pod live then and still live now (same UID) that the controller moved to a revision
/// made after the change (numbered above `changed.newest`) carries in its claims
/// (`claims`: by name, `<template>-<pod>`) the `templates` of `spec` (at `at`) as they are now;
/// a field the template declares, the claim holds alike (quantities by value). Nothing when
/// the strategy updates in place only. Returns what differs.
pub fn claims_follow(
    spec: &Value,
    at: &str,
    changed: &ClaimsChanged,
    revisions: &[(String, i64)],
    pods: &[ClaimedPod],
    claims: &BTreeMap<String, Value>,
) -> Vec<String> {
    let templates = match spec["volumeClaimTemplates"].as_array() {
        Some(t) if !in_place_only(spec) => t,
        _ => return vec![],
    };
    let number: BTreeMap<&str, i64> = revisions.iter().map(|(n, i)| (n.as_str(), *i)).collect();
    let mut out = vec![];
    for p in pods {
        let Some(before) = changed.pods.get(&p.uid) else {
            continue;
        };
        let after = number.get(p.revision.as_str()).copied();
        if *before == p.revision || after.is_none_or(|n| n <= changed.newest) {
            continue;
        }
        for (i, t) in templates.iter().enumerate() {
            let Some(name) = t["metadata"]["name"].as_str() else {
                continue;
            };
            let claim = format!("{name}-{}", p.name);
            let Some(c) = claims.get(&claim) else {
                out.push(format!(
                    "claims: pod {} moved to revision {} after {at}[{i}] changed, in place; its claim {claim} is missing",
                    p.name, p.revision
                ));
                continue;
            };
            if let Some((field, want, got)) = first_difference(&t["spec"], &c["spec"], "spec") {
                out.push(format!(
                    "claims: pod {} moved to revision {} after {at}[{i}] changed, in place; its claim {claim} has {field} {got}, the template {want}",
                    p.name, p.revision
                ));
            }
        }
    }
    out
}

/// The first field `want` declares that `got` does not hold alike: (path, want, got).
fn first_difference(want: &Value, got: &Value, path: &str) -> Option<(String, String, String)> {
    match want {
        Value::Object(m) => m.iter().find_map(|(k, w)| {
            first_difference(
                w,
                got.get(k).unwrap_or(&Value::Null),
                &format!("{path}.{k}"),
            )
        }),
        Value::Null => None,
        _ if alike(want, got) => None,
        _ => Some((path.to_string(), want.to_string(), got.to_string())),
    }
}

/// Whether two values are the same, quantities (`1Gi`, `1024Mi`) by value.
fn alike(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (quantity(a), quantity(b)) {
        (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()),
        _ => false,
    }
}

/// A Kubernetes quantity's value (`2Gi`, `500m`, `1e3`, `10`), when `v` is one
/// ([`crate::explore::openapi::quantity`]).
fn quantity(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| crate::explore::openapi::quantity(v.as_str()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::convergence_key;
    use serde_json::json;

    fn spec(strategy: &str, storage: &str) -> Value {
        json!({"updateStrategy": {"type": strategy}, "volumeClaimTemplates": [
            {"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": storage}}}}]})
    }

    fn claim(storage: &str) -> Value {
        json!({"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
            "volumeMode": "Filesystem", "resources": {"requests": {"storage": storage}}}})
    }

    /// Two pods at revision `r1` (number 1) when the claim templates changed to 2Gi.
    fn changed() -> ClaimsChanged {
        ClaimsChanged {
            pods: [("u1", "r1"), ("u2", "r1")]
                .iter()
                .map(|(u, r)| (u.to_string(), r.to_string()))
                .collect(),
            newest: 1,
        }
    }

    fn revisions() -> Vec<(String, i64)> {
        vec![("r1".into(), 1), ("r2".into(), 2)]
    }

    fn pod(name: &str, uid: &str, revision: &str) -> ClaimedPod {
        ClaimedPod {
            name: name.into(),
            uid: uid.into(),
            revision: revision.into(),
        }
    }

    fn claims(entries: &[(&str, &str)]) -> BTreeMap<String, Value> {
        entries
            .iter()
            .map(|(n, s)| (n.to_string(), claim(s)))
            .collect()
    }

    const AT: &str = "spec.volumeClaimTemplates";

    #[test]
    fn a_pod_moved_in_place_past_a_claims_change_with_its_old_claims_is_a_finding() {
        // A recorded bad trace: both pods updated in place to the new revision, claims 1Gi.
        let pods = [pod("x-a", "u1", "r2"), pod("x-b", "u2", "r2")];
        let old = claims(&[("data-x-a", "1Gi"), ("data-x-b", "1Gi")]);
        let d = claims_follow(
            &spec("InPlaceIfPossible", "2Gi"),
            AT,
            &changed(),
            &revisions(),
            &pods,
            &old,
        );
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(convergence_key(&d[0]), "does not converge: claims");
        assert!(
            d[0].contains("spec.resources.requests.storage \"1Gi\""),
            "{d:?}"
        );
        let gone = claims(&[("data-x-a", "1Gi")]);
        let d = claims_follow(
            &spec("InPlaceIfPossible", "2Gi"),
            AT,
            &changed(),
            &revisions(),
            &pods[1..],
            &gone,
        );
        assert!(d[0].contains("data-x-b is missing"), "{d:?}");
    }

    #[test]
    fn new_pods_untouched_pods_old_revisions_and_in_place_only_strategies_are_let_be() {
        let s = spec("InPlaceIfPossible", "2Gi");
        let old = claims(&[
            ("data-x-a", "1Gi"),
            ("data-x-b", "1Gi"),
            ("data-x-c", "2Gi"),
        ]);
        // A good trace: the pods were replaced (new UIDs) and their claims follow.
        let replaced = [pod("x-c", "u3", "r2")];
        assert!(claims_follow(&s, AT, &changed(), &revisions(), &replaced, &old).is_empty());
        // The templates changed alone: no pod moved.
        let kept = [pod("x-a", "u1", "r1")];
        assert!(claims_follow(&s, AT, &changed(), &revisions(), &kept, &old).is_empty());
        // Moved to a revision that was there before the change.
        let mut before = changed();
        before.newest = 2;
        let moved = [pod("x-a", "u1", "r2")];
        assert!(claims_follow(&s, AT, &before, &revisions(), &moved, &old).is_empty());
        // A strategy that only updates in place keeps the claims.
        let only = spec("InPlaceOnly", "2Gi");
        assert!(claims_follow(&only, AT, &changed(), &revisions(), &moved, &old).is_empty());
        let mut policy = spec("RollingUpdate", "2Gi");
        policy["updateStrategy"]["rollingUpdate"] = json!({"podUpdatePolicy": "InPlaceOnly"});
        assert!(claims_follow(&policy, AT, &changed(), &revisions(), &moved, &old).is_empty());
        // A claim that already holds what the template declares, written otherwise.
        let same = claims(&[("data-x-a", "2048Mi")]);
        assert!(claims_follow(&s, AT, &changed(), &revisions(), &moved, &same).is_empty());
    }

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(quantity(&json!("2Gi")), Some(2.0 * 1024f64.powi(3)));
        assert_eq!(quantity(&json!("500m")), Some(0.5));
        assert_eq!(quantity(&json!("1e3")), Some(1000.0));
        assert_eq!(quantity(&json!(3)), Some(3.0));
        assert_eq!(quantity(&json!("2Ei")), Some(2.0 * 1024f64.powi(6)));
        assert_eq!(quantity(&json!("ReadWriteOnce")), None);
        assert!(alike(&json!("1Gi"), &json!("1024Mi")));
        assert!(!alike(&json!("1Gi"), &json!("1G")));
    }
}
