//! O2 for a policy that writes into pods (a SidecarSet: containers put into the pods it selects
//! when they are made, then updated in place to its current version), judged from the pods.
//! Start with [`injection`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::{FORBIDDEN_NAMESPACES, NamespaceView, selector_matches};
use crate::scenario::monitor::rules::scaled;

/// The pod annotation naming the policies that wrote into it (names, comma-separated).
pub const INJECTED_LIST: &str = "kruise.io/sidecarset-injected-list";
/// The annotation of a policy's current version (on the policy), and of the version of each
/// policy a pod is at (on the pod: a JSON object by policy name, each `{"hash": ...}` or, as
/// older releases write it, the version itself).
pub const VERSION: &str = "kruise.io/sidecarset-hash";
/// The same versions with the containers' images left out: a pod whose version differs from
/// the policy's only in images can be updated in place.
pub const VERSION_WITHOUT_IMAGE: &str = "kruise.io/sidecarset-hash-without-image";
/// How long after the policy's last change a pod must be made to be judged by it: the
/// admission webhook that writes into pods reads policies from a cache.
pub const CACHE_MARGIN: time::Duration = time::Duration::seconds(5);

/// An annotation of `o`.
fn annotation<'a>(o: &'a Value, key: &str) -> &'a str {
    o["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_default()
}

/// The version of policy `name` a pod is at, by the pod's annotation `key`.
fn pod_version(pod: &Value, key: &str, name: &str) -> String {
    let parsed: BTreeMap<String, Value> =
        serde_json::from_str(annotation(pod, key)).unwrap_or_default();
    match parsed.get(name) {
        Some(Value::String(v)) => v.clone(),
        Some(v) => v["hash"].as_str().unwrap_or_default().to_string(),
        None => String::new(),
    }
}

/// An RFC 3339 instant.
fn instant(v: &Value) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(v.as_str()?, &time::format_description::well_known::Rfc3339).ok()
}

/// When the policy was last written, its status aside: its creation, or the latest write its
/// managed fields record on anything but the status.
fn last_write(policy: &Value) -> Option<time::OffsetDateTime> {
    let writes = policy["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["subresource"].as_str() != Some("status"))
        .filter_map(|m| instant(&m["time"]));
    instant(&policy["metadata"]["creationTimestamp"])
        .into_iter()
        .chain(writes)
        .max()
}

/// Whether a container the policy declares is updated by swapping a pair of containers under
/// other names (a hot upgrade) rather than in place under its own: only when its upgrade type
/// is the one its documentation names for that, `HotUpgrade`; any other (the default
/// `ColdUpgrade`, or a word the API admitted without knowing it) is upgraded in place.
fn paired(c: &Value) -> bool {
    c["upgradeStrategy"]["upgradeType"].as_str() == Some("HotUpgrade")
}

/// The names under which a pod carries a declared container.
fn carried_as(c: &Value) -> Vec<String> {
    let name = c["name"].as_str().unwrap_or_default();
    if paired(c) {
        vec![format!("{name}-1"), format!("{name}-2")]
    } else {
        vec![name.to_string()]
    }
}

/// A pod's container (or init container) named `name`.
fn container<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|list| pod["spec"][*list].as_array().into_iter().flatten())
        .find(|c| c["name"].as_str() == Some(name))
}

/// Whether a pod is Running with its Ready condition True.
fn running_and_ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Whether a label selector is present and empty (listing it selects every pod).
fn empty_selector(selector: &Value) -> bool {
    selector.as_object().is_some_and(|s| {
        s.values().all(|v| {
            v.is_null()
                || v.as_object().is_some_and(|o| o.is_empty())
                || v.as_array().is_some_and(|a| a.is_empty())
        })
    })
}

/// O2 for a policy that writes containers into the pods it selects (`spec.selector`, within
/// `spec.namespace` or the namespaces `spec.namespaceSelector` selects, never a forbidden one),
/// once settled. `pods` are every pod of the namespaces the trial made, as the API serves
/// them; `namespaces` those namespaces. Judged from the pods:
///
/// - the status has observed the policy's generation;
/// - a selected pod made after the policy's last change (by [`CACHE_MARGIN`], or after a pod
///   the policy wrote its current version into, itself made after that change) carries every
///   container the policy declares, at the declared image (unless its injection is paused, or
///   pinned to another revision by `injectionStrategy.revision`);
/// - a pod at the policy's current version ([`VERSION`]) runs every declared image;
/// - the pods that could be updated in place to that version ([`VERSION_WITHOUT_IMAGE`]) and
///   that `updateStrategy.selector` selects are, but for as many as `updateStrategy.partition`
///   keeps behind — unless the policy's own strategy holds them: `NotUpdate`, `paused`, or
///   `maxUnavailable` pods at the version not ready yet (an update still in progress);
/// - `status.matchedPods` and `status.updatedPods` count the pods it wrote into and that are
///   at its version, `status.readyPods` and `status.updatedReadyPods` no more than are ready.
///
/// Containers a policy declares after a pod was made, or changes beyond their images, reach
/// only pods made later (a pod's containers cannot be added or changed but for their image):
/// such a pod is not judged on them. Returns what differs.
pub fn injection(policy: &Value, pods: &[Value], namespaces: &[NamespaceView]) -> Vec<String> {
    let mut out = vec![];
    let generation = policy["metadata"]["generation"].as_i64();
    let observed = policy["status"]["observedGeneration"].as_i64();
    if observed.is_none() || observed < generation {
        out.push(format!(
            "status.observedGeneration: want {}, got {}",
            generation.unwrap_or_default(),
            observed.map_or("none".into(), |o| o.to_string())
        ));
    }
    let name = policy["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &policy["spec"];
    let version = annotation(policy, VERSION);
    let without_image = annotation(policy, VERSION_WITHOUT_IMAGE);
    let declared: Vec<&Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let declared_init: Vec<&Value> = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    // The webhook knew the policy as it is now once it wrote its current version into a pod
    // made after its last change: a pod made later is judged too, whatever the margin.
    let written = last_write(policy);
    let known = pods
        .iter()
        .filter(|p| annotation(p, INJECTED_LIST).split(',').any(|n| n == name))
        .filter(|p| !version.is_empty() && pod_version(p, VERSION, name) == version)
        .filter_map(|p| instant(&p["metadata"]["creationTimestamp"]))
        .filter(|made| written.is_some_and(|w| *made > w))
        .min();
    let since = written
        .map(|w| w + CACHE_MARGIN)
        .into_iter()
        .chain(known)
        .min();
    let injection_held = spec["injectionStrategy"]["paused"] == true;
    let pinned = !spec["injectionStrategy"]["revision"].is_null();
    let in_scope = |pod: &Value| -> Option<bool> {
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        if FORBIDDEN_NAMESPACES.contains(&ns) {
            return Some(false);
        }
        if let Some(only) = spec["namespace"].as_str().filter(|n| !n.is_empty())
            && only != ns
        {
            return Some(false);
        }
        let selector = &spec["namespaceSelector"];
        if selector.is_null() {
            return Some(true);
        }
        let namespace = namespaces.iter().find(|n| n.name == ns)?;
        Some(empty_selector(selector) || selector_matches(selector, &namespace.labels))
    };
    let image_differences = |pod: &Value, of: &str| -> Vec<String> {
        let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
        declared
            .iter()
            .filter(|c| !paired(c))
            .filter_map(|c| {
                let cname = c["name"].as_str().unwrap_or_default();
                let want = c["image"].as_str().unwrap_or_default();
                let got = container(pod, cname)?["image"].as_str().unwrap_or_default();
                (got != want).then(|| {
                    format!(
                        "pod {pod_name}: injected image want {want} (container {cname} {of}), got {got}"
                    )
                })
            })
            .collect()
    };
    let mut matched: Vec<&Value> = vec![];
    for pod in pods {
        if !pod["metadata"]["deletionTimestamp"].is_null()
            || matches!(
                pod["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
        {
            continue;
        }
        let Some(scope) = in_scope(pod) else {
            continue;
        };
        let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let labels: BTreeMap<String, String> =
            serde_json::from_value(pod["metadata"]["labels"].clone()).unwrap_or_default();
        let selector = &spec["selector"];
        let selected = scope && selector_matches(selector, &labels);
        let listed = scope && (empty_selector(selector) || selected);
        let injected = annotation(pod, INJECTED_LIST).split(',').any(|n| n == name);
        let carries = |c: &&Value| carried_as(c).iter().all(|n| container(pod, n).is_some());
        if listed && injected && declared.iter().all(carries) {
            matched.push(pod);
        }
        let made = instant(&pod["metadata"]["creationTimestamp"]);
        let new = matches!((made, since), (Some(m), Some(s)) if m > s);
        if !selected || !new || injection_held {
            continue;
        }
        if !injected {
            out.push(format!(
                "pod {pod_name}: no injection of the policy's containers (selected, and made after \
                 its last change)"
            ));
            continue;
        }
        for c in declared
            .iter()
            .chain(&declared_init)
            .filter(|c| !carries(c))
        {
            out.push(format!(
                "pod {pod_name}: injected container missing, want {} (declared by the policy)",
                carried_as(c).join(" and ")
            ));
        }
        if !pinned {
            out.extend(image_differences(
                pod,
                "of the policy, made after its last change",
            ));
        }
    }
    let at_version =
        |pod: &&Value| !version.is_empty() && pod_version(pod, VERSION, name) == version;
    let updated: Vec<&Value> = matched.iter().copied().filter(at_version).collect();
    for pod in &updated {
        out.extend(image_differences(
            pod,
            &format!("of the policy at its version {version}"),
        ));
    }
    let strategy = &spec["updateStrategy"];
    let total = matched.len() as i64;
    let unready_updated = updated.iter().filter(|p| !running_and_ready(p)).count() as i64;
    let max_unavailable = scaled(&strategy["maxUnavailable"], total, true).unwrap_or(1);
    let held = strategy["type"] == "NotUpdate"
        || strategy["paused"] == true
        || unready_updated >= max_unavailable.max(1);
    if !held {
        let waiting: Vec<&Value> = matched
            .iter()
            .copied()
            .filter(|p| !at_version(p))
            .filter(|p| pod_version(p, VERSION_WITHOUT_IMAGE, name) == without_image)
            .filter(|p| {
                strategy["selector"].is_null() || {
                    let labels: BTreeMap<String, String> =
                        serde_json::from_value(p["metadata"]["labels"].clone()).unwrap_or_default();
                    empty_selector(&strategy["selector"])
                        || selector_matches(&strategy["selector"], &labels)
                }
            })
            .collect();
        let partition = scaled(&strategy["partition"], total, true)
            .unwrap_or(0)
            .clamp(0, total);
        if waiting.len() as i64 > partition {
            let note = if partition > 0 {
                format!("; partition keeps {partition} of {total} behind")
            } else {
                String::new()
            };
            for p in waiting {
                out.push(format!(
                    "pod {}: injected version want {version} (the policy's{note}), got {}",
                    p["metadata"]["name"].as_str().unwrap_or_default(),
                    pod_version(p, VERSION, name)
                ));
            }
        }
    }
    let ready = matched.iter().filter(|p| running_and_ready(p)).count() as i64;
    let ready_updated = updated.iter().filter(|p| running_and_ready(p)).count() as i64;
    let status = &policy["status"];
    let count = |field: &str| status[field].as_i64().unwrap_or(0);
    for (field, want, what) in [
        ("matchedPods", total, "pods it wrote into"),
        (
            "updatedPods",
            updated.len() as i64,
            "of them at its version",
        ),
    ] {
        if count(field) != want {
            out.push(format!(
                "status.{field}: want {want} ({what}), got {}",
                count(field)
            ));
        }
    }
    for (field, most, what) in [
        ("readyPods", ready, "of them ready"),
        (
            "updatedReadyPods",
            ready_updated,
            "of them at its version and ready",
        ),
    ] {
        if count(field) > most {
            out.push(format!(
                "status.{field}: want at most {most} ({what}), got {}",
                count(field)
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

    /// A policy named `p` selecting `app=a`, declaring container `side` at `image`, last
    /// written at 10:00:00, at version `v-<image>`.
    fn policy(image: &str, strategy: Value, status: Value) -> Value {
        json!({"metadata": {"name": "p", "generation": 2,
                "creationTimestamp": "2026-01-01T09:00:00Z",
                "managedFields": [
                    {"manager": "harness", "time": "2026-01-01T10:00:00Z"},
                    {"manager": "kruise", "subresource": "status", "time": "2026-01-01T11:00:00Z"}],
                "annotations": {VERSION: format!("v-{image}"), VERSION_WITHOUT_IMAGE: "w"}},
               "spec": {"selector": {"matchLabels": {"app": "a"}},
                        "containers": [{"name": "side", "image": image}],
                        "updateStrategy": strategy},
               "status": status})
    }

    fn status(matched: i64, updated: i64, ready: i64) -> Value {
        json!({"observedGeneration": 2, "matchedPods": matched, "updatedPods": updated,
               "readyPods": ready, "updatedReadyPods": ready.min(updated)})
    }

    /// A ready pod `name` labelled `app=a`, made at `made`, carrying `side` at `image` as the
    /// policy's version `v-<image>` (none when `image` is empty: not written into).
    fn pod(name: &str, made: &str, image: &str) -> Value {
        let mut containers = vec![json!({"name": "main", "image": "app"})];
        let mut annotations = json!({});
        if !image.is_empty() {
            containers.push(json!({"name": "side", "image": image}));
            annotations = json!({INJECTED_LIST: "other,p",
                VERSION: json!({"p": {"hash": format!("v-{image}")}}).to_string(),
                VERSION_WITHOUT_IMAGE: json!({"p": {"hash": "w"}}).to_string()});
        }
        json!({"metadata": {"name": name, "namespace": "t", "creationTimestamp": made,
                            "labels": {"app": "a"}, "annotations": annotations},
               "spec": {"containers": containers},
               "status": {"phase": "Running",
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    const BEFORE: &str = "2026-01-01T08:00:00Z";
    const AFTER: &str = "2026-01-01T10:01:00Z";

    fn keys(d: &[String]) -> Vec<String> {
        let mut k: Vec<String> = d.iter().map(|d| convergence_key(d)).collect();
        k.dedup();
        k
    }

    #[test]
    fn every_pod_it_selects_is_written_into_at_its_current_version() {
        let good = [pod("a-1", BEFORE, "v2"), pod("a-2", AFTER, "v2")];
        let p = policy("v2", json!({}), status(2, 2, 2));
        assert!(
            injection(&p, &good, &[]).is_empty(),
            "{:?}",
            injection(&p, &good, &[])
        );
        // A pod made before the policy and never written into is not judged, nor counted.
        let mut older = good.to_vec();
        older.push(pod("a-0", BEFORE, ""));
        assert!(injection(&p, &older, &[]).is_empty());
        // One made after it, and selected, must be.
        let mut missed = good.to_vec();
        missed.push(pod("a-3", AFTER, ""));
        assert_eq!(
            keys(&injection(&p, &missed, &[])),
            ["does not converge: no injection"]
        );
        // Made a second after the change, within the margin: judged once a pod made after
        // the change, and before it, was written into at the current version.
        let soon = [
            pod("a-1", "2026-01-01T10:00:01Z", ""),
            pod("a-2", "2026-01-01T10:00:02Z", ""),
        ];
        let p0 = policy("v2", json!({}), status(0, 0, 0));
        assert!(injection(&p0, &soon, &[]).is_empty());
        let mut evidence = soon.to_vec();
        evidence[0] = pod("a-1", "2026-01-01T10:00:01Z", "v2");
        let p1 = policy("v2", json!({}), status(1, 1, 1));
        let d = injection(&p1, &evidence, &[]);
        assert_eq!(keys(&d), ["does not converge: no injection"], "{d:?}");
        assert!(d[0].starts_with("pod a-2"), "{d:?}");
        // A container is carried under its own name unless its upgrade type is a hot one
        // (a pair under other names): a word the API admitted without knowing it is not.
        for (kind, want) in [("ColdUpgrade", true), ("x", true), ("HotUpgrade", false)] {
            let mut q = p.clone();
            q["spec"]["containers"][0]["upgradeStrategy"] = json!({"upgradeType": kind});
            let d = injection(&q, &good, &[]);
            assert_eq!(d.is_empty(), want, "{kind}: {d:?}");
            if !want {
                assert!(
                    d.iter().any(|d| d.contains("want side-1 and side-2")),
                    "{kind}: {d:?}"
                );
            }
        }
        // Written into at an old image, made after the change.
        let stale = [pod("a-1", BEFORE, "v2"), pod("a-2", AFTER, "v1")];
        let d = injection(&p, &stale, &[]);
        assert!(
            d.iter().any(|d| d
                == "pod a-2: injected image want v2 (container side of the policy, made after \
                    its last change), got v1"),
            "{d:?}"
        );
    }

    #[test]
    fn pods_behind_its_version_are_updated_unless_its_strategy_holds_them() {
        let behind = [pod("a-1", BEFORE, "v1"), pod("a-2", BEFORE, "v2")];
        let p = policy("v2", json!({}), status(2, 1, 2));
        let d = injection(&p, &behind, &[]);
        assert_eq!(
            d,
            ["pod a-1: injected version want v-v2 (the policy's), got v-v1"],
            "{d:?}"
        );
        for held in [
            json!({"paused": true}),
            json!({"type": "NotUpdate"}),
            json!({"partition": 1}),
            json!({"partition": "50%"}),
            json!({"selector": {"matchLabels": {"app": "b"}}}),
        ] {
            let p = policy("v2", held.clone(), status(2, 1, 2));
            assert!(injection(&p, &behind, &[]).is_empty(), "{held}");
        }
        // An update in progress: the updated pod is not ready yet, and maxUnavailable is 1.
        let mut unready = behind.clone();
        unready[1]["status"]["conditions"][0]["status"] = json!("False");
        let mut counts = status(2, 1, 1);
        counts["updatedReadyPods"] = json!(0);
        let p = policy("v2", json!({}), counts);
        assert!(
            injection(&p, &unready, &[]).is_empty(),
            "{:?}",
            injection(&p, &unready, &[])
        );
        // A change beyond the image: the pod cannot be updated in place, and is not judged.
        let mut other = behind.clone();
        other[0]["metadata"]["annotations"][VERSION_WITHOUT_IMAGE] =
            json!({"p": {"hash": "w0"}}).to_string().into();
        let p = policy("v2", json!({}), status(2, 1, 2));
        assert!(injection(&p, &other, &[]).is_empty());
    }

    #[test]
    fn a_pod_marked_at_its_version_runs_its_images_and_the_status_counts_the_pods() {
        let mut marked = [pod("a-1", BEFORE, "v2"), pod("a-2", BEFORE, "v2")];
        marked[0]["spec"]["containers"][1]["image"] = json!("v1");
        let p = policy("v2", json!({}), status(2, 2, 2));
        assert_eq!(
            injection(&p, &marked, &[]),
            [
                "pod a-1: injected image want v2 (container side of the policy at its version \
              v-v2), got v1"
            ]
        );
        let good = [pod("a-1", BEFORE, "v2"), pod("a-2", BEFORE, "v2")];
        let counted = |s: Value| keys(&injection(&policy("v2", json!({}), s), &good, &[]));
        assert!(counted(status(2, 2, 2)).is_empty());
        assert_eq!(
            counted(status(3, 2, 2)),
            ["does not converge: status.matchedPods"]
        );
        assert_eq!(
            counted(status(2, 1, 2)),
            ["does not converge: status.updatedPods"]
        );
        assert_eq!(
            counted(status(2, 2, 3)),
            ["does not converge: status.readyPods"]
        );
        let mut lagging = status(2, 2, 2);
        lagging["observedGeneration"] = json!(1);
        assert_eq!(
            counted(lagging),
            ["does not converge: status.observedGeneration"]
        );
    }

    #[test]
    fn only_the_namespaces_it_selects_are_its() {
        let namespaces = [NamespaceView {
            name: "t".into(),
            labels: BTreeMap::from([("team".into(), "x".into())]),
            terminating: false,
        }];
        let missed = [pod("a-1", AFTER, "")];
        let mut p = policy("v2", json!({}), status(0, 0, 0));
        p["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "y"}});
        assert!(injection(&p, &missed, &namespaces).is_empty());
        p["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "x"}});
        assert_eq!(injection(&p, &missed, &namespaces).len(), 1);
        p["spec"]["injectionStrategy"] = json!({"paused": true});
        assert!(injection(&p, &missed, &namespaces).is_empty());
    }
}
