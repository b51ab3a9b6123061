//! What holds a workload's update short of its template, read precisely so that a spec that
//! holds is judged "as far as it may go" rather than skipped. Start with [`Holds`]: read from a
//! spec ([`Holds::of`]), it says how many pods its update strategy may keep behind
//! ([`Holds::behind`]); [`waits_on_hook`] says whether one pod is held by a lifecycle hook, as
//! the controller marks it and its labels confirm.

use std::collections::BTreeMap;

use serde_json::Value;

/// The label a controller with lifecycle hooks marks each pod's lifecycle state with.
pub const LIFECYCLE_STATE_LABEL: &str = "lifecycle.apps.kruise.io/state";

/// What a spec's update strategy holds back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Holds {
    /// What holds the whole update, when something does (`spec.paused`, an `OnDelete`
    /// strategy, a declared wait past the bound, a hold in a template of workloads).
    pub all: Option<String>,
    /// The partitions that keep pods behind, as declared: (where, value).
    pub partitions: Vec<(String, Value)>,
}

/// Whether `key` holds a template (a pod's, or a workload's that is stamped once per subset).
fn is_template(key: &str) -> bool {
    key == "template" || key.ends_with("Template")
}

impl Holds {
    /// Reads the holds of `spec`, for an update that must be over within `bound_seconds`.
    ///
    /// Held by the fields' names, for every kind: `paused: true`; a strategy `type` of
    /// `OnDelete` (the user replaces the pods); `minReadySeconds` past a quarter of the bound
    /// (each batch of a rollout waits that long); a `partition` (a count or a percentage of
    /// the pods kept behind) or `partitions` (one count per subset); a `selector` of an update
    /// strategy (the pods, or the nodes whose pods, it updates) holds the whole update. Inside a template of
    /// workloads (`cloneSetTemplate`, ...) any of these holds the whole update: the template
    /// is stamped once per subset, so its partition holds an unknown share. A container's own
    /// lifecycle handlers are no hold: they run in the pod, within its grace period, and the
    /// controller's update does not wait on them.
    pub fn of(spec: &Value, bound_seconds: i64) -> Self {
        let mut holds = Holds::default();
        holds.walk(spec, "spec", false, bound_seconds);
        holds
    }

    fn walk(&mut self, v: &Value, path: &str, nested: bool, bound: i64) {
        let Some(m) = v.as_object() else {
            return;
        };
        for (k, x) in m {
            let here = format!("{path}.{k}");
            let whole = match k.as_str() {
                "paused" => x == true,
                "type" => x == "OnDelete",
                "minReadySeconds" => x.as_i64().is_some_and(|s| s > bound / 4),
                // Which pods (or the pods on which nodes) an update strategy updates: who it
                // leaves behind is other objects' labels, not read here.
                "selector"
                    if path.ends_with(".rollingUpdate") || path.ends_with(".updateStrategy") =>
                {
                    !x.is_null()
                }
                "partition" if !zero_partition(x) => {
                    if nested {
                        true
                    } else {
                        self.partitions.push((here.clone(), x.clone()));
                        false
                    }
                }
                "partitions" if !nested => {
                    for (subset, p) in x.as_object().into_iter().flatten() {
                        if !zero_partition(p) {
                            self.partitions
                                .push((format!("{here}.{subset}"), p.clone()));
                        }
                    }
                    false
                }
                "partitions" => x
                    .as_object()
                    .is_some_and(|p| !p.values().all(zero_partition)),
                _ => false,
            };
            if whole && self.all.is_none() {
                self.all = Some(format!("{here}: {x}"));
            }
            self.walk(x, &here, nested || is_template(k), bound);
        }
    }

    /// Whether anything is held.
    pub fn any(&self) -> bool {
        self.all.is_some() || !self.partitions.is_empty()
    }

    /// How many of `total` pods may stay behind the template: all of them when the whole
    /// update is held, else what the partitions keep (a percentage of `total` rounded up, a
    /// value that is neither a count nor a percentage keeping all), at most `total`.
    pub fn behind(&self, total: i64) -> i64 {
        if self.all.is_some() {
            return total.max(0);
        }
        let kept: i64 = self
            .partitions
            .iter()
            .map(|(_, p)| match p {
                Value::Number(n) => n.as_i64().unwrap_or(total),
                Value::String(s) => s
                    .strip_suffix('%')
                    .and_then(|pct| pct.trim().parse::<i64>().ok())
                    .map_or(total, |pct| (pct * total + 99).div_euclid(100)),
                _ => total,
            })
            .map(|n| n.max(0))
            .sum();
        kept.min(total).max(0)
    }

    /// What holds, for a message: the first whole hold, else the partitions.
    pub fn describe(&self) -> String {
        match &self.all {
            Some(what) => what.clone(),
            None => self
                .partitions
                .iter()
                .map(|(at, v)| format!("{at}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// A partition that keeps nothing behind: absent, 0 or `0%`.
fn zero_partition(v: &Value) -> bool {
    v.is_null() || v == 0 || v == "0%"
}

/// A lifecycle hook: the labels and finalizers a pod must carry for the hook to hold it (or,
/// for a hook a new pod waits to satisfy, to let it go).
#[derive(Debug, Clone, Default, PartialEq)]
struct Hook {
    labels: Vec<(String, String)>,
    finalizers: Vec<String>,
}

impl Hook {
    /// The hook `v` declares (`labelsHandler`, `finalizersHandler`), if it has a handler.
    fn of(v: &Value) -> Option<Hook> {
        let labels: Vec<(String, String)> = v["labelsHandler"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let finalizers: Vec<String> = v["finalizersHandler"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(String::from))
            .collect();
        (!labels.is_empty() || !finalizers.is_empty()).then_some(Hook { labels, finalizers })
    }

    /// The pod carries one of the handlers: a hook on update or deletion holds it.
    fn any(&self, labels: &Pairs, finalizers: &[String]) -> bool {
        self.labels.iter().any(|(k, v)| labels.get(k) == Some(v))
            || self.finalizers.iter().any(|f| finalizers.contains(f))
    }

    /// The pod carries every handler: a hook a new pod waits on lets it go.
    fn all(&self, labels: &Pairs, finalizers: &[String]) -> bool {
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.finalizers.iter().all(|f| finalizers.contains(f))
    }
}

/// A pod's labels.
type Pairs = BTreeMap<String, String>;

/// Every workload lifecycle in `spec` (an object under a `lifecycle` key whose members declare
/// `labelsHandler` or `finalizersHandler`, unlike a container's), with the template beside it
/// whose pods it governs.
fn lifecycles(spec: &Value) -> Vec<(&Value, &Value)> {
    let mut out = vec![];
    let mut stack = vec![spec];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(l) = m.get("lifecycle")
                    && l.as_object().is_some_and(|hooks| {
                        hooks.values().any(|h| {
                            h.get("labelsHandler").is_some() || h.get("finalizersHandler").is_some()
                        })
                    })
                {
                    out.push((l, m.get("template").unwrap_or(&Value::Null)));
                }
                stack.extend(m.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    out
}

/// The finalizers a template gives its pods.
fn finalizers_of(template: &Value) -> Vec<String> {
    template["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect()
}

/// Whether a pod with `labels` is held by a lifecycle hook of `spec`: the controller marks it
/// in a waiting state ([`LIFECYCLE_STATE_LABEL`]) and the hook of that state holds it — before
/// an update in place or a deletion while the pod carries one of the hook's handlers, after an
/// update in place or at creation while it lacks one. A pod's finalizers are taken from its
/// template (the one place a trial's pods get theirs).
pub fn waits_on_hook(spec: &Value, labels: &Pairs) -> bool {
    let Some(state) = labels.get(LIFECYCLE_STATE_LABEL) else {
        return false;
    };
    let (member, while_carried) = match state.as_str() {
        "PreparingUpdate" => ("inPlaceUpdate", true),
        "PreparingDelete" => ("preDelete", true),
        "Updated" => ("inPlaceUpdate", false),
        "PreparingNormal" => ("preNormal", false),
        _ => return false,
    };
    lifecycles(spec).into_iter().any(|(lifecycle, template)| {
        let finalizers = finalizers_of(template);
        Hook::of(&lifecycle[member]).is_some_and(|hook| {
            if while_carried {
                hook.any(labels, &finalizers)
            } else {
                !hook.all(labels, &finalizers)
            }
        })
    })
}

/// Whether a pod is marked as waiting to be deleted ([`LIFECYCLE_STATE_LABEL`]): still live,
/// beside the pod that may replace it.
pub fn preparing_delete(labels: &Pairs) -> bool {
    labels.get(LIFECYCLE_STATE_LABEL).map(String::as_str) == Some("PreparingDelete")
}

/// Whether a lifecycle hook of `spec` can hold the pods its template makes: a hook on update
/// or deletion whose handler the template's labels or finalizers carry, or a hook at creation
/// whose handlers they do not all carry. Read from the spec alone, for a judge that sees no
/// pods.
pub fn hooks_can_hold(spec: &Value) -> bool {
    lifecycles(spec).into_iter().any(|(lifecycle, template)| {
        let labels: Pairs =
            serde_json::from_value(template["metadata"]["labels"].clone()).unwrap_or_default();
        let finalizers = finalizers_of(template);
        let carried = |member: &str| {
            Hook::of(&lifecycle[member]).is_some_and(|h| h.any(&labels, &finalizers))
        };
        carried("inPlaceUpdate")
            || carried("preDelete")
            || Hook::of(&lifecycle["preNormal"]).is_some_and(|h| !h.all(&labels, &finalizers))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(p: &[(&str, &str)]) -> Pairs {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_partition_keeps_its_share_and_a_pause_or_a_template_hold_keeps_all() {
        let of = |spec: Value| Holds::of(&spec, 60);
        // An update strategy's selector holds all; a workload's own selector holds nothing.
        let selected = json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]});
        let held = of(json!({"updateStrategy": {"rollingUpdate": {"selector": selected}}}));
        assert_eq!(held.behind(4), 4, "{held:?}");
        assert!(
            of(json!({"updateStrategy": {"selector": selected}}))
                .all
                .is_some()
        );
        assert!(!of(json!({"selector": selected, "updateStrategy": {"rollingUpdate": {}}})).any());
        assert!(!of(json!({"replicas": 3, "updateStrategy": {"partition": 0}})).any());
        let counted = of(json!({"updateStrategy": {"rollingUpdate": {"partition": 1}}}));
        assert_eq!(counted.behind(3), 1);
        assert_eq!(
            counted.describe(),
            "spec.updateStrategy.rollingUpdate.partition: 1"
        );
        assert_eq!(
            of(json!({"updateStrategy": {"partition": "50%"}})).behind(3),
            2
        );
        assert_eq!(of(json!({"updateStrategy": {"partition": 9}})).behind(3), 3);
        assert_eq!(
            of(json!({"updateStrategy": {"partition": -1}})).behind(3),
            0
        );
        let subsets = json!({"updateStrategy": {"manualUpdate": {"partitions": {"a": 1, "b": 1}}}});
        assert_eq!(of(subsets).behind(3), 2);
        for whole in [
            json!({"paused": true}),
            json!({"updateStrategy": {"type": "OnDelete"}}),
            json!({"minReadySeconds": 30}),
            json!({"template": {"cloneSetTemplate": {"spec": {"updateStrategy": {"partition": 1}}}}}),
        ] {
            assert_eq!(of(whole.clone()).behind(3), 3, "{whole}");
        }
        // A short wait, and a container's own hooks, hold nothing.
        let free = json!({"minReadySeconds": 5, "template": {"spec": {"containers": [
            {"lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}]}}});
        assert!(!of(free).any());
    }

    #[test]
    fn a_hook_holds_a_pod_the_controller_marks_waiting_and_that_carries_its_handler() {
        let spec = json!({"lifecycle": {
            "inPlaceUpdate": {"labelsHandler": {"hold": "true"}},
            "preNormal": {"labelsHandler": {"ready": "true"}, "finalizersHandler": ["f"]}},
            "template": {"metadata": {"finalizers": ["f"]}}});
        let marked = |state: &str, extra: &[(&str, &str)]| {
            let mut l = pairs(extra);
            l.insert(LIFECYCLE_STATE_LABEL.into(), state.into());
            l
        };
        assert!(waits_on_hook(
            &spec,
            &marked("PreparingUpdate", &[("hold", "true")])
        ));
        assert!(
            !waits_on_hook(&spec, &marked("PreparingUpdate", &[])),
            "no handler carried: the controller must go on"
        );
        assert!(waits_on_hook(&spec, &marked("PreparingNormal", &[])));
        assert!(
            !waits_on_hook(&spec, &marked("PreparingNormal", &[("ready", "true")])),
            "every handler carried (the finalizer from the template): it may go"
        );
        assert!(!waits_on_hook(
            &spec,
            &marked("Normal", &[("hold", "true")])
        ));
        assert!(
            !waits_on_hook(&spec, &marked("PreparingDelete", &[("hold", "true")])),
            "no hook on deletion declared"
        );
        assert!(
            !waits_on_hook(&spec, &pairs(&[("hold", "true")])),
            "no mark"
        );
    }

    #[test]
    fn a_hook_can_hold_only_what_the_template_lets_it() {
        let with = |lifecycle: Value, labels: Value| json!({"lifecycle": lifecycle, "template": {"metadata": {"labels": labels}}});
        let update = json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}});
        assert!(!hooks_can_hold(&with(update.clone(), json!({"app": "a"}))));
        assert!(hooks_can_hold(&with(update, json!({"hold": "true"}))));
        let normal = json!({"preNormal": {"labelsHandler": {"ready": "true"}}});
        assert!(hooks_can_hold(&with(normal.clone(), json!({}))));
        assert!(!hooks_can_hold(&with(normal, json!({"ready": "true"}))));
        let empty = json!({"preDelete": {"finalizersHandler": []}});
        assert!(!hooks_can_hold(&with(empty, json!({}))));
        // A container's lifecycle is no workload hook.
        let container = json!({"template": {"spec": {"containers": [
            {"lifecycle": {"postStart": {"httpGet": {"path": "/", "port": 8080}}}}]}}});
        assert!(!hooks_can_hold(&container));
    }
}
