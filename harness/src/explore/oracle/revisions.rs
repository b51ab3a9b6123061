//! The revisions a workload keeps: [`revision_history`] judges its ControllerRevisions against
//! the history its spec declares.

use std::collections::BTreeMap;

use serde_json::Value;

/// O2 on the revision history of a workload once settled, from its ControllerRevisions
/// (name, number): each revision has a number of its own, and no more are kept than
/// `spec.revisionHistoryLimit` declares besides the (at most two) in use. Returns what
/// differs.
pub fn revision_history(obj: &Value, revisions: &[(String, i64)]) -> Vec<String> {
    let mut out = vec![];
    let mut by_number: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for (name, n) in revisions {
        by_number.entry(*n).or_default().push(name);
    }
    for (n, names) in by_number.iter().filter(|(_, v)| v.len() > 1) {
        out.push(format!(
            "revision numbers: {} revisions share number {n} ({}); want one number each",
            names.len(),
            names.join(", ")
        ));
    }
    if let Some(limit) = obj["spec"]["revisionHistoryLimit"].as_i64()
        && limit >= 0
        && revisions.len() as i64 > limit + 2
    {
        out.push(format!(
            "revisions kept: want at most {} (spec.revisionHistoryLimit {limit} and those in use), got {}",
            limit + 2,
            revisions.len()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::convergence_key;
    use serde_json::json;

    #[test]
    fn revisions_have_numbers_of_their_own_and_no_more_than_the_declared_history() {
        let obj = json!({"spec": {"revisionHistoryLimit": 1}});
        let r = |n: &[(&str, i64)]| -> Vec<(String, i64)> {
            n.iter().map(|(a, b)| (a.to_string(), *b)).collect()
        };
        assert!(revision_history(&obj, &r(&[("a", 1), ("b", 2), ("c", 3)])).is_empty());
        let alike = revision_history(&obj, &r(&[("a", 1), ("b", 1)]));
        assert_eq!(alike.len(), 1);
        assert_eq!(
            convergence_key(&alike[0]),
            "does not converge: revision numbers"
        );
        let kept = revision_history(&obj, &r(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)]));
        assert_eq!(
            convergence_key(&kept[0]),
            "does not converge: revisions kept"
        );
        assert!(
            revision_history(
                &json!({"spec": {}}),
                &r(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)])
            )
            .is_empty(),
            "no declared limit, no bound"
        );
    }
}
