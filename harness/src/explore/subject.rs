//! What exploration works on: a [`Subject`] is one kind of the controller under test — its
//! API, a valid seed object, its native twin if it has one, and where its spec keeps the
//! knobs the semantic operations turn. Start with [`subjects`].
//!
//! Nothing here names a case to try: the values come from the CRD schema
//! ([`super::schema`]) and from [`TEMPLATE_FIELDS`], the members of the pod template's union
//! types, each tried alike.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The image of every seed object.
pub use crate::scenario::workload::{IMAGE_V1, IMAGE_V2};

/// The native counterpart of a subject.
#[derive(Debug, Clone, Copy)]
pub struct Twin {
    /// Its API version.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed object for a name.
    pub seed: fn(&str) -> Value,
    /// Fields the two keep at different paths: (subject's path, twin's path).
    pub renamed: &'static [(&'static str, &'static str)],
    /// Fields the two treat differently by design, as OpenKruise documents it (the parity
    /// table's differences): the twin's answer on them is not compared.
    pub documented: &'static [&'static str],
    /// Where its pod template is.
    pub template: &'static str,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
}

/// One kind of the controller that exploration creates objects of.
#[derive(Debug, Clone, Copy)]
pub struct Subject {
    /// Its kind, as `--kinds` names it.
    pub name: &'static str,
    /// Its API version.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its seed object for a name: valid, with one container running [`IMAGE_V1`], pods
    /// labelled `app=<name>`.
    pub seed: fn(&str) -> Value,
    /// Its native twin.
    pub twin: Option<Twin>,
    /// Whether it keeps `spec.replicas` pods (false for one-per-node and job kinds).
    pub replicated: bool,
    /// Where its pod template is.
    pub template: &'static str,
    /// Whether it keeps its pods at its template (rolls out): false for job kinds, whose
    /// pods run to completion.
    pub rolls_out: bool,
    /// Whether its status reports `observedGeneration`.
    pub observes_generation: bool,
}

impl Subject {
    /// Its twin as a subject of its own (for driving it through the same steps).
    pub fn twin_subject(&self) -> Option<Subject> {
        let t = self.twin?;
        Some(Subject {
            name: t.kind,
            api_version: t.api_version,
            kind: t.kind,
            seed: t.seed,
            twin: None,
            replicated: self.replicated,
            template: t.template,
            rolls_out: self.rolls_out,
            observes_generation: t.observes_generation,
        })
    }

    /// Fields that keep an object of the subject (and of its twin) from making pods: what an
    /// update's admission is tried on, so that hundreds of them cost no pods. A node selector
    /// matching no node, and no replicas for replicated kinds.
    pub fn quiet(&self) -> BTreeMap<String, Value> {
        let mut f = BTreeMap::from([(
            format!("{}.spec.nodeSelector", self.template),
            json!({"explore.harness.io/nowhere": "x"}),
        )]);
        if self.replicated {
            f.insert("spec.replicas".into(), json!(0));
        }
        f
    }

    /// Its twin's path for `path`: renamed, the same, or none (a documented difference).
    pub fn twin_path(&self, path: &str) -> Option<String> {
        let twin = self.twin?;
        if twin.documented.contains(&path) {
            return None;
        }
        for (from, to) in twin.renamed {
            if let Some(rest) = path.strip_prefix(from) {
                return Some(format!("{to}{rest}"));
            }
        }
        Some(path.to_string())
    }
}

fn template(name: &str, batch: bool) -> Value {
    let mut spec = json!({"containers": [{"name": "main", "image": IMAGE_V1}]});
    if batch {
        spec["restartPolicy"] = json!("Never");
    }
    json!({"metadata": {"labels": {"app": name}}, "spec": spec})
}

fn object(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec})
}

fn replicated(api_version: &str, kind: &str, name: &str) -> Value {
    object(
        api_version,
        kind,
        name,
        json!({"replicas": 2, "selector": {"matchLabels": {"app": name}},
               "template": template(name, false)}),
    )
}

fn stateful(api_version: &str, name: &str) -> Value {
    let mut o = replicated(api_version, "StatefulSet", name);
    o["spec"]["serviceName"] = json!(name);
    o
}

fn per_node(api_version: &str, name: &str) -> Value {
    object(
        api_version,
        "DaemonSet",
        name,
        json!({"selector": {"matchLabels": {"app": name}}, "template": template(name, false)}),
    )
}

/// The subjects exploration knows, every workload kind of OpenKruise that needs no real node.
pub fn subjects() -> Vec<Subject> {
    const ROLLING: &[(&str, &str)] = &[
        (
            "spec.updateStrategy.maxUnavailable",
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        (
            "spec.updateStrategy.maxSurge",
            "spec.strategy.rollingUpdate.maxSurge",
        ),
    ];
    vec![
        Subject {
            name: "CloneSet",
            api_version: "apps.kruise.io/v1alpha1",
            kind: "CloneSet",
            seed: |n| replicated("apps.kruise.io/v1alpha1", "CloneSet", n),
            twin: Some(Twin {
                api_version: "apps/v1",
                kind: "Deployment",
                // With the CloneSet's defaults (maxSurge 0, maxUnavailable 20 %), where a
                // Deployment's differ (25 % each): both start from the same strategy.
                seed: |n| {
                    let mut d = replicated("apps/v1", "Deployment", n);
                    d["spec"]["strategy"] = json!({"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "20%"}});
                    d
                },
                renamed: ROLLING,
                documented: &[],
                template: "spec.template",
                observes_generation: true,
            }),
            replicated: true,
            template: "spec.template",
            rolls_out: true,
            observes_generation: true,
        },
        Subject {
            name: "AdvancedStatefulSet",
            api_version: "apps.kruise.io/v1beta1",
            kind: "StatefulSet",
            seed: |n| stateful("apps.kruise.io/v1beta1", n),
            twin: Some(Twin {
                api_version: "apps/v1",
                kind: "StatefulSet",
                seed: |n| stateful("apps/v1", n),
                renamed: &[],
                documented: &["spec.updateStrategy.rollingUpdate.maxUnavailable"],
                template: "spec.template",
                observes_generation: true,
            }),
            replicated: true,
            template: "spec.template",
            rolls_out: true,
            observes_generation: true,
        },
        Subject {
            name: "AdvancedDaemonSet",
            api_version: "apps.kruise.io/v1alpha1",
            kind: "DaemonSet",
            seed: |n| per_node("apps.kruise.io/v1alpha1", n),
            twin: Some(Twin {
                api_version: "apps/v1",
                kind: "DaemonSet",
                seed: |n| per_node("apps/v1", n),
                renamed: &[],
                documented: &["spec.updateStrategy.rollingUpdate.maxSurge"],
                template: "spec.template",
                observes_generation: true,
            }),
            replicated: false,
            template: "spec.template",
            rolls_out: true,
            observes_generation: true,
        },
        Subject {
            name: "BroadcastJob",
            api_version: "apps.kruise.io/v1alpha1",
            kind: "BroadcastJob",
            seed: |n| {
                object(
                    "apps.kruise.io/v1alpha1",
                    "BroadcastJob",
                    n,
                    json!({"template": template(n, true), "completionPolicy": {"type": "Always"}}),
                )
            },
            twin: Some(Twin {
                api_version: "batch/v1",
                kind: "Job",
                seed: |n| object("batch/v1", "Job", n, json!({"template": template(n, true)})),
                renamed: &[],
                documented: &[],
                template: "spec.template",
                observes_generation: false,
            }),
            replicated: false,
            template: "spec.template",
            rolls_out: false,
            observes_generation: false,
        },
        Subject {
            name: "AdvancedCronJob",
            api_version: "apps.kruise.io/v1alpha1",
            kind: "AdvancedCronJob",
            seed: |n| {
                object(
                    "apps.kruise.io/v1alpha1",
                    "AdvancedCronJob",
                    n,
                    json!({"schedule": "0 0 1 1 *", "template": {"jobTemplate": {
                        "spec": {"template": template(n, true)}}}}),
                )
            },
            twin: Some(Twin {
                api_version: "batch/v1",
                kind: "CronJob",
                seed: |n| {
                    object(
                        "batch/v1",
                        "CronJob",
                        n,
                        json!({"schedule": "0 0 1 1 *", "jobTemplate": {
                            "spec": {"template": template(n, true)}}}),
                    )
                },
                renamed: &[("spec.template.jobTemplate", "spec.jobTemplate")],
                documented: &[],
                template: "spec.jobTemplate.spec.template",
                observes_generation: false,
            }),
            replicated: false,
            template: "spec.template.jobTemplate.spec.template",
            rolls_out: false,
            observes_generation: false,
        },
    ]
}

/// The pod template fields tried on every subject, relative to its pod template: each member
/// of the core pod spec's union types (lifecycle handlers, probe handlers) and of its common
/// scalars, alike for every subject and every twin.
pub const TEMPLATE_FIELDS: &[&str] = &[
    "spec.containers[0].lifecycle.preStop",
    "spec.containers[0].lifecycle.postStart",
    "spec.containers[0].readinessProbe",
    "spec.containers[0].livenessProbe",
    "spec.containers[0].resources",
    "spec.terminationGracePeriodSeconds",
    "metadata.labels",
    "metadata.annotations",
];

/// The values tried on a [`TEMPLATE_FIELDS`] entry.
pub fn template_values(field: &str) -> Vec<Value> {
    let handlers = || {
        vec![
            json!({"exec": {"command": ["sh", "-c", "true"]}}),
            json!({"httpGet": {"path": "/", "port": 8080}}),
            json!({"tcpSocket": {"port": 8080}}),
            json!({"sleep": {"seconds": 1}}),
        ]
    };
    let probes = || {
        vec![
            json!({"exec": {"command": ["true"]}}),
            json!({"httpGet": {"path": "/", "port": 8080}}),
            json!({"tcpSocket": {"port": 8080}}),
            json!({"grpc": {"port": 8080}}),
        ]
    };
    let last = field.rsplit('.').next().unwrap_or(field);
    match last {
        "preStop" | "postStart" => handlers(),
        "readinessProbe" | "livenessProbe" => probes(),
        "resources" => vec![
            json!({"requests": {"cpu": "10m", "memory": "16Mi"}}),
            json!({"limits": {"cpu": "100m", "memory": "64Mi"}}),
            json!({"requests": {"cpu": "10m"}, "limits": {"cpu": "100m"}}),
        ],
        "terminationGracePeriodSeconds" => vec![json!(0), json!(1), json!(30)],
        "labels" | "annotations" => vec![json!({"explore.harness.io/template": "v"})],
        _ => vec![],
    }
}

/// Sets `path` (dot-separated, `name[i]` for a list item) in `obj` to `value`, making the
/// objects on the way; `null` removes the field. Fails on a path through a non-object, or an
/// item past the end of a list.
pub fn set(obj: &mut Value, path: &str, value: Value) -> Result<(), String> {
    assign(obj, path, value, true)
}

/// As [`set`], but a `null` is kept as a value (a merge patch's removal).
pub fn put(obj: &mut Value, path: &str, value: Value) -> Result<(), String> {
    assign(obj, path, value, false)
}

fn assign(obj: &mut Value, path: &str, value: Value, null_removes: bool) -> Result<(), String> {
    let mut at = obj;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => {
                let n: usize = rest
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("{path}: `{part}` is not `name[index]`"))?;
                (k, Some(n))
            }
            None => (*part, None),
        };
        let map = at
            .as_object_mut()
            .ok_or_else(|| format!("{path}: `{key}` is inside a non-object"))?;
        if last && index.is_none() {
            if value.is_null() && null_removes {
                map.remove(key);
            } else {
                map.insert(key.into(), value);
            }
            return Ok(());
        }
        let next = map.entry(key).or_insert_with(|| match index {
            Some(_) => json!([]),
            None => json!({}),
        });
        at = match index {
            Some(n) => {
                let list = next
                    .as_array_mut()
                    .ok_or_else(|| format!("{path}: `{key}` is not a list"))?;
                let item = list
                    .get_mut(n)
                    .ok_or_else(|| format!("{path}: `{key}` has no item {n}"))?;
                if last {
                    *item = value;
                    return Ok(());
                }
                item
            }
            None => next,
        };
    }
    Ok(())
}

/// The value at `path` in `obj` (see [`set`]), or null.
pub fn get<'a>(obj: &'a Value, path: &str) -> &'a Value {
    let mut at = obj;
    for part in path.split('.') {
        at = match part.split_once('[') {
            Some((k, rest)) => {
                let n: usize = rest.trim_end_matches(']').parse().unwrap_or(usize::MAX);
                &at[k][n]
            }
            None => &at[part],
        };
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_makes_the_way_and_null_removes() {
        let mut o = json!({"spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}});
        set(&mut o, "spec.updateStrategy.partition", json!(1)).unwrap();
        set(
            &mut o,
            "spec.template.spec.containers[0].lifecycle.preStop",
            json!({"exec": {}}),
        )
        .unwrap();
        assert_eq!(o["spec"]["updateStrategy"]["partition"], 1);
        assert_eq!(
            get(&o, "spec.template.spec.containers[0].lifecycle.preStop"),
            &json!({"exec": {}})
        );
        set(&mut o, "spec.updateStrategy.partition", Value::Null).unwrap();
        assert_eq!(o["spec"]["updateStrategy"], json!({}));
        assert!(set(&mut o, "spec.template.spec.containers[3].image", json!("x")).is_err());
        let mut patch = json!({});
        put(&mut patch, "spec.paused", Value::Null).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"paused": null}}),
            "a patch keeps its removals"
        );
    }

    #[test]
    fn twin_paths_follow_renames_and_skip_documented_differences() {
        let all = subjects();
        let cs = all.iter().find(|s| s.name == "CloneSet").unwrap();
        assert_eq!(
            cs.twin_path("spec.updateStrategy.maxSurge").as_deref(),
            Some("spec.strategy.rollingUpdate.maxSurge")
        );
        assert_eq!(
            cs.twin_path("spec.minReadySeconds").as_deref(),
            Some("spec.minReadySeconds")
        );
        let ads = all.iter().find(|s| s.name == "AdvancedDaemonSet").unwrap();
        assert_eq!(
            ads.twin_path("spec.updateStrategy.rollingUpdate.maxSurge"),
            None
        );
        for s in &all {
            let seed = (s.seed)("x");
            assert_eq!(seed["kind"], s.kind);
            assert_eq!(
                get(&seed, s.template)["spec"]["containers"][0]["image"],
                IMAGE_V1
            );
            if let Some(t) = s.twin {
                let twin = (t.seed)("x");
                let at = s.twin_path(s.template).unwrap();
                assert_eq!(at, t.template);
                assert_eq!(get(&twin, &at)["spec"]["containers"][0]["image"], IMAGE_V1);
            }
        }
    }
}
