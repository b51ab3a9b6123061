//! O2 for the pods a workload keeps, judged "as far as it may go": what its update strategy
//! and its lifecycle hooks hold back ([`super::holds`]) is let be, the rest must reach the
//! template. Start with [`convergence`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::holds::{self, Holds, hooks_can_hold, waits_on_hook};
use crate::explore::subject::{Subject, get};

/// How the difference of a change the controller has not observed begins (its
/// `status.observedGeneration` behind its `metadata.generation`).
pub const UNOBSERVED: &str = "status.observedGeneration";

/// A pod as convergence sees it: its template image (first container) and labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// Its name.
    pub name: String,
    /// Its first container's image.
    pub image: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// Whether a spec holds its updates short of the template ([`Holds`]: a pause, `OnDelete`, a
/// partition, a declared wait past `bound_seconds`), or declares a lifecycle hook that can hold
/// the pods its template makes ([`hooks_can_hold`]) — read from the spec alone, for a judge
/// that sees no pods.
pub fn holds_updates(spec: &Value, bound_seconds: i64) -> bool {
    Holds::of(spec, bound_seconds).any() || hooks_can_hold(spec)
}

/// One way a pod differs from its template: what, the template's value, the pod's.
type Difference = (String, String, String);

/// O2 for a replicated subject, once settled, judged from its pods "as far as it may go":
///
/// - the status has caught up with the spec;
/// - the live pods number `spec.replicas`, or up to as many more as the pods a lifecycle hook
///   holds from deletion ([`holds::preparing_delete`]; their replacements may come first);
/// - at least as many pods run the template's image with its labels as its update strategy
///   lets through ([`Holds::behind`]: all of them unless paused, partitioned, `OnDelete` or
///   waiting past the bound); none while a lifecycle hook holds a pod ([`waits_on_hook`]),
///   as the others may be waiting behind it. An image in `declared` (what a policy over the
///   workload declares for the template's container: [`declared_images`]) counts as the
///   template's: the policy wrote it into the pod.
///
/// Returns what differs.
///
/// The difference of a change the controller has not observed starts with [`UNOBSERVED`].
pub fn convergence(
    subject: &Subject,
    obj: &Value,
    pods: &[PodView],
    declared: &[String],
    bound: i64,
) -> Vec<String> {
    let mut out = vec![];
    let generation = obj["metadata"]["generation"].as_i64();
    let observed = obj["status"]["observedGeneration"].as_i64();
    if subject.observes_generation && (observed.is_none() || observed < generation) {
        out.push(format!(
            "{UNOBSERVED}: want {}, got {}",
            generation.unwrap_or_default(),
            observed.map_or("none".into(), |o| o.to_string())
        ));
    }
    let spec = &obj["spec"];
    let hooked: Vec<&PodView> = pods
        .iter()
        .filter(|p| waits_on_hook(spec, &p.labels))
        .collect();
    let want = spec["replicas"].as_i64().unwrap_or(1);
    if subject.replicated {
        let deleting = hooked
            .iter()
            .filter(|p| holds::preparing_delete(&p.labels))
            .count() as i64;
        let live = pods.len() as i64;
        if live < want || live > want + deleting {
            let held = if deleting > 0 {
                format!(" and up to {deleting} a hook holds from deletion")
            } else {
                String::new()
            };
            out.push(format!(
                "live pods: want {want} (spec.replicas){held}, got {live}"
            ));
        }
    }
    // While a lifecycle hook holds a pod, the others may be waiting behind it: none is judged.
    if subject.rolls_out && hooked.is_empty() {
        let template = get(obj, &subject.template);
        let image = template["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        let labels: BTreeMap<String, String> =
            serde_json::from_value(template["metadata"]["labels"].clone()).unwrap_or_default();
        let differs = |p: &PodView| {
            let mut d = vec![];
            if p.image != image && !declared.contains(&p.image) {
                d.push(("image".to_string(), image.to_string(), p.image.clone()));
            }
            for (k, v) in &labels {
                if p.labels.get(k) != Some(v) {
                    d.push((
                        format!("label {k}"),
                        v.clone(),
                        p.labels.get(k).cloned().unwrap_or_else(|| "none".into()),
                    ));
                }
            }
            d
        };
        let behind: Vec<(&PodView, Vec<Difference>)> = pods
            .iter()
            .map(|p| (p, differs(p)))
            .filter(|(_, d)| !d.is_empty())
            .collect();
        let total = if subject.replicated {
            want
        } else {
            pods.len() as i64
        };
        let holds = Holds::of(spec, bound);
        let may = holds.behind(total);
        if behind.len() as i64 > may {
            let note = if may > 0 {
                format!("; {may} of {total} may stay behind, {}", holds.describe())
            } else {
                String::new()
            };
            for (p, d) in behind {
                for (what, want, got) in d {
                    out.push(format!(
                        "pod {}: {what} want {want} (the template's{note}), got {got}",
                        p.name
                    ));
                }
            }
        }
    }
    out
}

/// The images policy object `policy` declares, anywhere in its spec, for a container named
/// `container` (the workload template's): a container of that name with an image, as a
/// patch of the pods it selects carries one. Which pods a declaration reaches is the
/// policy's to say; any of them may run such an image.
pub fn declared_images(policy: &Value, container: &str) -> Vec<String> {
    fn walk(v: &Value, container: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.get("name").and_then(Value::as_str) == Some(container)
                    && let Some(image) = m.get("image").and_then(Value::as_str)
                    && !out.iter().any(|o| o == image)
                {
                    out.push(image.to_string());
                }
                m.values().for_each(|v| walk(v, container, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, container, out)),
            _ => {}
        }
    }
    let mut out = vec![];
    walk(&policy["spec"], container, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::convergence_key;
    use crate::explore::oracle::holds::LIFECYCLE_STATE_LABEL;
    use crate::explore::oracle::tests::cloneset;
    use serde_json::json;

    #[test]
    fn convergence_wants_the_pods_its_strategy_lets_through_at_the_template() {
        let cs = cloneset();
        let obj = |spec_extra: Value| {
            let mut o = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2},
                "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "a"}},
                    "spec": {"containers": [{"image": "v2"}]}}}});
            json_patch::merge(&mut o["spec"], &spec_extra);
            o
        };
        let pod = |n: &str, image: &str| PodView {
            name: n.into(),
            image: image.into(),
            labels: BTreeMap::from([("app".into(), "a".into())]),
        };
        let both = [pod("a-1", "v2"), pod("a-2", "v1")];
        let diff = convergence(&cs, &obj(json!({})), &both, &[], 60);
        assert_eq!(
            diff,
            vec!["pod a-2: image want v2 (the template's), got v1"]
        );
        assert_eq!(convergence_key(&diff[0]), "does not converge: image want");
        // An image a policy over the workload declares for the container is not behind.
        let policy = json!({"spec": {"subsets": [
            {"name": "s0", "patch": {"spec": {"containers": [{"name": "main", "image": "v1"}]}}},
            {"name": "s1", "patch": {"spec": {"containers": [{"name": "side", "image": "v3"}]}}},
        ]}});
        let declared = declared_images(&policy, "main");
        assert_eq!(declared, ["v1"], "only the template's container, by name");
        assert!(declared_images(&json!({"spec": {"containers": []}}), "main").is_empty());
        assert!(convergence(&cs, &obj(json!({})), &both, &declared, 60).is_empty());
        let other = [pod("a-1", "v2"), pod("a-2", "v3")];
        assert_eq!(
            convergence(
                &cs,
                &obj(json!({})),
                &other,
                &declared_images(&policy, "main"),
                60
            ),
            vec!["pod a-2: image want v2 (the template's), got v3"],
            "an image declared for another container is behind"
        );
        let paused = json!({"updateStrategy": {"paused": true}});
        assert!(convergence(&cs, &obj(paused), &both, &[], 60).is_empty());
        // A partition of 1 lets one pod of two through: it must be there, and only it.
        let partitioned = json!({"updateStrategy": {"partition": 1}});
        assert!(convergence(&cs, &obj(partitioned.clone()), &both, &[], 60).is_empty());
        let none = [pod("a-1", "v1"), pod("a-2", "v1")];
        let diff = convergence(&cs, &obj(partitioned), &none, &[], 60);
        assert_eq!(diff.len(), 2, "{diff:?}");
        assert_eq!(
            diff[0],
            "pod a-1: image want v2 (the template's; 1 of 2 may stay behind, \
             spec.updateStrategy.partition: 1), got v1"
        );
        assert_eq!(convergence_key(&diff[0]), "does not converge: image want");
        let one = [pod("a-1", "v2")];
        assert_eq!(
            convergence(&cs, &obj(json!({})), &one, &[], 60),
            vec!["live pods: want 2 (spec.replicas), got 1"]
        );
    }

    #[test]
    fn a_lifecycle_hook_holds_only_the_pods_the_controller_marks_waiting_on_it() {
        let cs = cloneset();
        let hooks = json!({"lifecycle": {"inPlaceUpdate": {"labelsHandler": {"hold": "y"}},
                                         "preDelete": {"labelsHandler": {"hold": "y"}}}});
        let mut o = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"image": "v2"}]}}}});
        json_patch::merge(&mut o["spec"], &hooks);
        let pod = |n: &str, image: &str, state: Option<&str>| {
            let mut labels = BTreeMap::from([("app".to_string(), "a".to_string())]);
            if let Some(s) = state {
                labels.insert(LIFECYCLE_STATE_LABEL.into(), s.into());
                labels.insert("hold".into(), "y".into());
            }
            PodView {
                name: n.into(),
                image: image.into(),
                labels,
            }
        };
        // A hook declared, no pod waiting on it: judged as any spec.
        let free = [pod("a-1", "v2", None), pod("a-2", "v1", None)];
        assert_eq!(convergence(&cs, &o, &free, &[], 60).len(), 1);
        assert!(!convergence(&cs, &o, &free[..1], &[], 60).is_empty());
        // A pod held before its update in place: it, and the pods behind it, may wait.
        let waiting = [
            pod("a-1", "v1", Some("PreparingUpdate")),
            pod("a-2", "v1", None),
        ];
        assert!(convergence(&cs, &o, &waiting, &[], 60).is_empty());
        // A pod held before its deletion stays beside its replacement.
        let deleting = [
            pod("a-1", "v2", None),
            pod("a-2", "v2", None),
            pod("a-3", "v1", Some("PreparingDelete")),
        ];
        assert!(convergence(&cs, &o, &deleting, &[], 60).is_empty());
        let more = [
            pod("a-1", "v2", None),
            pod("a-2", "v2", None),
            pod("a-4", "v2", None),
            pod("a-3", "v1", Some("PreparingDelete")),
        ];
        assert_eq!(
            convergence(&cs, &o, &more, &[], 60),
            ["live pods: want 2 (spec.replicas) and up to 1 a hook holds from deletion, got 4"]
        );
        // A container's own lifecycle handlers hold nothing.
        let mut container = o.clone();
        container["spec"]["lifecycle"] = Value::Null;
        container["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
            json!({"preStop": {"exec": {"command": ["true"]}}});
        assert!(!holds_updates(&container["spec"], 60));
        assert_eq!(convergence(&cs, &container, &free, &[], 60).len(), 1);
    }
}
