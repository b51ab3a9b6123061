//! Tests of the subjects derived from a cell, and the cell they are derived from ([`cell`]).
//! Test code only.

#![cfg(test)]

use super::*;
use crate::explore::subject::{IMAGE_V1, embedded_values, get, target_name};
use crate::explore::trial::Fields;

/// The subject of `all` named `name`.
fn named<'a>(all: &'a [Subject], name: &str) -> &'a Subject {
    all.iter().find(|s| s.name == name).unwrap()
}

/// A CRD of `group`/`kind` serving `versions`, each with `spec` as its `spec` schema.
fn crd(group: &str, kind: &str, versions: &[(&str, Value)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, spec)| {
            json!({"name": name, "served": true, "storage": false,
                   "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}})
        })
        .collect();
    json!({"spec": {"group": group, "names": {"kind": kind}, "versions": versions}})
}

fn object(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

/// A workload's spec schema: replicas, a pod template, claim templates when `claims`,
/// and an update strategy whose type is an enum.
fn workload_spec(claims: bool) -> Value {
    let mut p = json!({
        "replicas": {"type": "integer"},
        "minReadySeconds": {"type": "integer", "minimum": 0},
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "updateStrategy": object(json!({
            "maxSurge": {"x-kubernetes-int-or-string": true},
            "type": {"type": "string", "enum": ["ReCreate", "InPlaceIfPossible"]}}))});
    if claims {
        p["volumeClaimTemplates"] = json!({"type": "array", "items": {"type": "object"}});
    }
    object(p)
}

/// What a cell of the catalog's kinds serves: CloneSet in two versions (claim templates
/// in both), every other CRD kind in the version its seed is written for, a
/// UnitedDeployment with two members, and a core document where StatefulSet has claim
/// templates and Deployment an enum for its strategy.
pub(crate) fn cell() -> (BTreeMap<String, Value>, Doc) {
    let mut crds = BTreeMap::new();
    let mut add = |api_version: &str, kind: &str, versions: &[(&str, Value)]| {
        let group = api_version.rsplit_once('/').unwrap().0;
        crds.insert(format!("{group}/{kind}"), crd(group, kind, versions));
    };
    add(
        "apps.kruise.io/v1alpha1",
        "CloneSet",
        &[
            ("v1alpha1", workload_spec(true)),
            ("v1beta1", workload_spec(true)),
        ],
    );
    for w in WORKLOADS
        .iter()
        .filter(|w| !w.builtin && w.kind != "CloneSet")
    {
        let version = w.api_version.rsplit_once('/').unwrap().1;
        add(w.api_version, w.kind, &[(version, workload_spec(false))]);
    }
    let members = object(json!({
        "cloneSetTemplate": object(json!({"spec": workload_spec(true)})),
        "deploymentTemplate": object(json!({"spec": {"type": "object"}})),
        "imageListPullJobTemplate": object(json!({}))}));
    add(
        "apps.kruise.io/v1alpha1",
        "UnitedDeployment",
        &[("v1alpha1", object(json!({"template": members})))],
    );
    let cron = object(
        json!({"paused": {"type": "boolean"}, "template": object(json!({
        "jobTemplate": object(json!({})), "broadcastJobTemplate": object(json!({}))}))}),
    );
    add(
        "apps.kruise.io/v1alpha1",
        "AdvancedCronJob",
        &[("v1alpha1", cron)],
    );
    for p in POLICIES {
        let version = p.api_version.rsplit_once('/').unwrap().1;
        add(p.api_version, p.kind, &[(version, object(json!({})))]);
    }
    add(
        "apps.kruise.io/v1alpha1",
        "ResourceDistribution",
        &[("v1alpha1", object(json!({})))],
    );
    let gvk = |g: &str, k: &str| json!([{"group": g, "version": "v1", "kind": k}]);
    let doc = Doc::new(&[json!({"components": {"schemas": {
        "io.k8s.api.apps.v1.StatefulSet": {
            "x-kubernetes-group-version-kind": gvk("apps", "StatefulSet"),
            "properties": {"spec": object(json!({
                "volumeClaimTemplates": {"type": "array", "items": {}}}))}},
        "io.k8s.api.batch.v1.Job": {
            "x-kubernetes-group-version-kind": [
                {"group": "batch", "version": "v1", "kind": "Job"}],
            "properties": {"spec": object(json!({"suspend": {"type": "boolean"}}))}},
        "io.k8s.api.apps.v1.Deployment": {
            "x-kubernetes-group-version-kind": gvk("apps", "Deployment"),
            "properties": {"spec": object(json!({"strategy": object(json!({
                "type": {"type": "string", "enum": ["Recreate", "RollingUpdate"]}}))}))}}}}})]);
    (crds, doc)
}

#[test]
fn a_target_whose_schema_offers_suspend_is_made_suspended_and_resumed() {
    let all = served_by_cell();
    let over = |t: &str| {
        all.iter()
            .find(|s| s.name == format!("WorkloadSpread.{t}"))
            .and_then(|s| s.target.as_deref())
            .unwrap()
            .clone()
    };
    // The Job's schema has `spec.suspend`: its template need not change to let it run.
    let job = over("Job");
    assert_eq!(job.suspend.as_deref(), Some("spec.suspend"));
    assert_eq!(
        job.idle(),
        Fields::from([("spec.suspend".to_string(), json!(true))])
    );
    assert_eq!(
        job.wake("t", &Fields::new()),
        json!({"spec": {"suspend": null}})
    );
    // One whose webhook refuses template updates pauses instead (`spec.paused`).
    let cron = over("AdvancedCronJob");
    assert_eq!(cron.suspend.as_deref(), Some("spec.paused"));
    assert_eq!(
        cron.wake("t", &Fields::new()),
        json!({"spec": {"paused": null}})
    );
    // One without either is kept off every node, as before.
    let ds = over("DaemonSet");
    assert_eq!(ds.suspend, None);
    assert!(ds.idle().keys().all(|k| k.ends_with("nodeSelector")));
    // A policy over a kind whose twin is a Job drives the twin's Job the same way.
    let twin_target = all
        .iter()
        .find(|s| s.name == "WorkloadSpread.BroadcastJob")
        .and_then(|s| s.twin.as_deref())
        .and_then(|t| t.target.as_deref())
        .unwrap();
    assert_eq!(twin_target.kind, "Job");
    assert_eq!(twin_target.suspend.as_deref(), Some("spec.suspend"));
}

/// The subjects [`cell`] serves.
fn served_by_cell() -> Vec<Subject> {
    let (crds, doc) = cell();
    served(&crds, &doc)
}

fn names(subjects: &[Subject]) -> Vec<&str> {
    subjects.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn every_policy_is_a_subject_over_every_workload_subject_with_its_twin() {
    let all = served_by_cell();
    let workloads: Vec<&Subject> = all
        .iter()
        .filter(|s| s.target.is_none() && s.makes == Makes::Pods)
        .collect();
    // The targets: every workload subject of the controller (a union by its first
    // member), and every built-in workload with and without claim templates.
    let mut targets: Vec<String> = workloads
        .iter()
        .filter(|s| s.family != "UnitedDeployment" || s.name.contains("cloneSetTemplate"))
        .filter(|s| s.family != "AdvancedCronJob" || !s.name.contains('.'))
        .map(|s| s.name.clone())
        .collect();
    for w in WORKLOADS.iter().filter(|w| w.builtin) {
        targets.push(w.name.to_string());
    }
    targets.push(format!("StatefulSet{CLAIMS}"));
    for p in POLICIES {
        let mut over: Vec<&str> = all
            .iter()
            .filter(|s| s.family == p.name)
            .map(|s| s.name.strip_prefix(&format!("{}.", p.name)).unwrap())
            .collect();
        over.sort_unstable();
        let mut want: Vec<&str> = targets.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(over, want, "{}", p.name);
    }
    for s in all.iter().filter(|s| s.target.is_some()) {
        let t = s.target.as_deref().unwrap();
        let seed = s.seed.make("x");
        assert_eq!(seed["apiVersion"], s.api_version.as_str(), "{}", s.name);
        // A policy names its target, or selects its pods.
        match seed["spec"]["targetRef"].is_null() {
            false => {
                assert_eq!(seed["spec"]["targetRef"]["kind"], t.kind, "{}", s.name);
                assert_eq!(
                    seed["spec"]["targetRef"]["apiVersion"],
                    t.api_version.as_str()
                );
                assert_eq!(seed["spec"]["targetRef"]["name"], target_name("x"));
            }
            true => assert_eq!(
                seed["spec"]["selector"]["matchLabels"]["app"],
                get(&t.seed.make(&target_name("x")), &t.template)["metadata"]["labels"]["app"],
                "{}",
                s.name
            ),
        }
        // Its twin: the same policy over the target's twin, where the target has one.
        match (&s.twin, &t.twin) {
            (Some(twin), Some(native)) => {
                let over = twin.target.as_deref().unwrap();
                assert_eq!(over.kind, native.kind, "{}", s.name);
                assert_eq!(over.api_version, native.api_version, "{}", s.name);
                assert_eq!(twin.kind, s.kind);
                let theirs = twin.seed.make("x");
                if !seed["spec"]["targetRef"].is_null() {
                    assert_eq!(theirs["spec"]["targetRef"]["kind"], native.kind);
                }
            }
            (None, None) => {}
            (mine, native) => {
                panic!(
                    "{}: twin {mine:?} over a target whose twin is {native:?}",
                    s.name
                )
            }
        }
    }
    let twinned = |n: &str| all.iter().find(|s| s.name == n).unwrap().twin.is_some();
    assert!(twinned("WorkloadSpread.CloneSet"));
    assert!(twinned(&format!("WorkloadSpread.CloneSet{CLAIMS}")));
    assert!(!twinned("WorkloadSpread.Deployment"));
}

#[test]
fn a_crd_serving_two_versions_is_a_subject_in_each() {
    let (crds, doc) = cell();
    let all = served(&crds, &doc);
    let cs: Vec<&str> = all
        .iter()
        .filter(|s| s.family == "CloneSet")
        .map(|s| s.name.as_str())
        .collect();
    // The kind as written first, then what differs from it by one thing, then by two.
    assert_eq!(
        cs,
        [
            "CloneSet",
            &format!("CloneSet{CLAIMS}"),
            "CloneSet@v1beta1",
            &format!("CloneSet{CLAIMS}@v1beta1"),
        ]
    );
    let beta = all.iter().find(|s| s.name == "CloneSet@v1beta1").unwrap();
    assert_eq!(beta.api_version, "apps.kruise.io/v1beta1");
    assert_eq!(beta.seed.make("x")["apiVersion"], "apps.kruise.io/v1beta1");
    // A policy is a subject over each version of its target.
    let over: Vec<&str> = all
        .iter()
        .filter(|s| s.family == "PodUnavailableBudget")
        .filter(|s| s.target.as_ref().is_some_and(|t| t.family == "CloneSet"))
        .map(|s| s.target.as_ref().unwrap().api_version.as_str())
        .collect();
    assert_eq!(over.iter().filter(|v| v.ends_with("v1beta1")).count(), 2);
    // A version the CRD no longer serves makes no subject.
    let mut crds = crds;
    crds.get_mut("apps.kruise.io/CloneSet").unwrap()["spec"]["versions"][1]["served"] =
        json!(false);
    assert!(!names(&served(&crds, &doc)).contains(&"CloneSet@v1beta1"));
    // A kind the cell does not serve makes none.
    crds.remove("apps.kruise.io/CloneSet");
    let all = served(&crds, &doc);
    assert!(all.iter().all(|s| s.family != "CloneSet"));
    assert!(
        all.iter()
            .all(|s| s.target.as_ref().is_none_or(|t| t.family != "CloneSet"))
    );
}

#[test]
fn claim_templates_and_union_members_come_from_the_schema() {
    let all = served_by_cell();
    let n = names(&all);
    // CloneSet's schema has claim templates, the Advanced DaemonSet's has none.
    assert!(n.contains(&format!("CloneSet{CLAIMS}").as_str()));
    assert!(
        !n.iter()
            .any(|n| n.starts_with(&format!("AdvancedDaemonSet{CLAIMS}")))
    );
    let with = all
        .iter()
        .find(|s| s.name == format!("CloneSet{CLAIMS}"))
        .unwrap();
    let seed = with.seed.make("x");
    assert_eq!(
        seed["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
        "data"
    );
    assert_eq!(
        seed["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"],
        "data"
    );
    // Members the schema has and the catalog can seed; a member holding a CloneSet
    // with claims as CloneSet has them.
    let ud: Vec<&str> = n
        .iter()
        .copied()
        .filter(|n| n.starts_with("UnitedDeployment"))
        .collect();
    assert_eq!(
        ud,
        [
            "UnitedDeployment.cloneSetTemplate",
            "UnitedDeployment.deploymentTemplate",
            &format!("UnitedDeployment.cloneSetTemplate{CLAIMS}"),
        ]
    );
    let member = all
        .iter()
        .find(|s| s.name == format!("UnitedDeployment.cloneSetTemplate{CLAIMS}"))
        .unwrap();
    let seed = member.seed.make("x");
    assert!(
        get(
            &seed,
            "spec.template.cloneSetTemplate.spec.volumeClaimTemplates"
        )
        .is_array(),
        "{seed}"
    );
    assert!(get(&seed, "spec.template.cloneSetTemplate.spec.replicas").is_null());
    assert_eq!(
        get(&seed, &member.template)["spec"]["containers"][0]["image"],
        IMAGE_V1
    );
    // The member with the twin has the kind's plain name.
    assert!(n.contains(&"AdvancedCronJob"));
    assert!(n.contains(&"AdvancedCronJob.broadcastJobTemplate"));
    let acj = all.iter().find(|s| s.name == "AdvancedCronJob").unwrap();
    assert_eq!(acj.twin.as_ref().unwrap().kind, "CronJob");
    assert_eq!(acj.template, "spec.template.jobTemplate.spec.template");
}

#[test]
fn variants_come_from_the_seed_and_the_schema() {
    let all = served_by_cell();
    let cs = all.iter().find(|s| s.name == "CloneSet").unwrap();
    // A variant has the value among others (its settings paired, see `source::paired`).
    let has = |s: &Subject, k: &str, v: Value| s.variants.iter().any(|f| f.get(k) == Some(&v));
    let together = |s: &Subject, set: &[(&str, Value)]| {
        s.variants
            .iter()
            .any(|f| set.iter().all(|(k, v)| f.get(*k) == Some(v)))
    };
    // Numbers at their typical value, each value of a setting with each of another's.
    assert!(together(
        cs,
        &[
            ("spec.minReadySeconds", json!(1)),
            ("spec.updateStrategy.maxSurge", json!(1))
        ]
    ));
    for t in ["ReCreate", "InPlaceIfPossible"] {
        assert!(together(
            cs,
            &[
                ("spec.updateStrategy.type", json!(t)),
                ("spec.minReadySeconds", json!(1))
            ]
        ));
    }
    // The replicas vary alone.
    assert!(
        cs.variants
            .iter()
            .all(|f| !f.contains_key("spec.replicas") || f.len() == 1)
    );
    assert!(has(cs, "spec.replicas", json!(1)));
    assert!(has(cs, "spec.replicas", json!(3)));
    assert!(has(
        cs,
        "spec.updateStrategy.type",
        json!("InPlaceIfPossible")
    ));
    // Nothing of the pod template here: the cell's nodes offer nothing (see
    // `a_seed_variant_asks_the_nodes_for_what_they_offer`).
    assert!(
        !cs.variants
            .iter()
            .any(|f| f.keys().any(|k| k.starts_with("spec.template")))
    );
    // A policy draws its target's, as the target's fields; a built-in target's come from
    // the cell's OpenAPI.
    let ws = named(&all, "SidecarSet.CloneSet");
    assert!(has(
        ws,
        "target:spec.updateStrategy.type",
        json!("InPlaceIfPossible")
    ));
    assert!(has(ws, "target:spec.replicas", json!(3)));
    let over_deployment = named(&all, "SidecarSet.Deployment");
    assert!(has(
        over_deployment,
        "target:spec.strategy.type",
        json!("Recreate")
    ));
    // Drawn into every other create, never over a field the create sets.
    let creates: Vec<Fields> = (0..8)
        .map(|i| Fields::from([(format!("spec.f{i}"), json!(i))]))
        .chain([Fields::from([(
            "spec.updateStrategy".to_string(),
            json!({}),
        )])])
        .collect();
    let varied = cs.vary(creates.clone(), 7);
    assert_eq!(varied.len(), creates.len());
    for (i, (v, c)) in varied.iter().zip(&creates).enumerate() {
        assert!(c.iter().all(|(k, x)| v.get(k) == Some(x)));
        assert_eq!(v.len() > c.len(), i % 2 == 1 && i < 8, "{i}: {v:?}");
    }
    assert_eq!(
        cs.vary(creates.clone(), 7),
        varied,
        "the same seed, the same draw"
    );
    assert_eq!(cs.vary(vec![], 7), cs.variants);
    // A policy: its target's variants at its even creates, its own at its odd ones (its
    // target's where it has none of its own).
    let mut policy = ws.clone();
    let mut targets = policy.variants.clone();
    assert!(
        targets
            .iter()
            .all(|f| f.keys().all(|k| k.starts_with(TARGET)))
    );
    let varied = policy.vary(creates.clone(), 7);
    assert!(
        varied[..8]
            .iter()
            .all(|v| v.keys().any(|k| k.starts_with(TARGET)))
    );
    targets.truncate(2);
    let own: Vec<Fields> = (0..2)
        .map(|i| Fields::from([("spec.own".to_string(), json!(i))]))
        .collect();
    policy.variants = own.iter().cloned().chain(targets).collect();
    for (i, v) in policy.vary(creates[..6].to_vec(), 7).iter().enumerate() {
        let (of_target, of_own) = (
            v.keys().any(|k| k.starts_with(TARGET)),
            v.contains_key("spec.own"),
        );
        assert_eq!((of_target, of_own), (i % 2 == 0, i % 2 == 1), "{i}: {v:?}");
    }
    // Known without a cell, a subject draws none.
    let known = subjects();
    assert!(known.iter().all(|s| s.variants.is_empty()));
}

#[test]
fn a_seed_variant_asks_the_nodes_for_what_they_offer() {
    let (crds, _) = cell();
    let core: Value =
        serde_json::from_str(include_str!("../../../../tests/fixtures/openapi-core.json"))
            .expect("the fixture is JSON");
    let requests = "spec.template.spec.containers[0].resources.requests";
    let limits = "spec.template.spec.containers[0].resources.limits";
    let set = |s: &Subject, k: &str| s.variants.iter().filter(|f| f.contains_key(k)).count();
    // Nodes that offer nothing: no variant asks for anything.
    let bare = served(&crds, &Doc::new(std::slice::from_ref(&core)));
    assert_eq!(set(named(&bare, "CloneSet"), requests), 0);
    let mut doc = Doc::new(&[core]);
    doc.offer(&[BTreeMap::from([
        ("cpu".to_string(), "2".to_string()),
        ("memory".to_string(), "8Gi".to_string()),
    ])]);
    let all = served(&crds, &doc);
    let cs = named(&all, "CloneSet");
    // Each map of quantities of the seed's container, at its typical value (the first
    // resource offered, at its share), paired with the spec's settings as any setting.
    for k in [requests, limits] {
        assert!(
            cs.variants
                .iter()
                .any(|f| f.get(k) == Some(&json!({"cpu": "20m"})) && f.len() > 1),
            "{k}: {:?}",
            cs.variants
        );
    }
    // Nothing else of the template: not the pod's own maps, nor a container the seed
    // does not declare.
    let template: std::collections::BTreeSet<&String> = cs
        .variants
        .iter()
        .flat_map(|f| f.keys())
        .filter(|k| k.starts_with("spec.template"))
        .collect();
    assert_eq!(
        template,
        std::collections::BTreeSet::from([&requests.to_string(), &limits.to_string()])
    );
    // A policy's target asks too, as the target's fields.
    let ss = named(&all, "SidecarSet.CloneSet");
    assert!(set(ss, &format!("{TARGET}{requests}")) > 0);
}

#[test]
fn a_trial_s_objects_are_named_by_their_kinds_and_the_catalog_s_names() {
    assert_eq!(
        catalog::named("apps.kruise.io/v1beta1", "StatefulSet"),
        Some("AdvancedStatefulSet")
    );
    assert_eq!(
        catalog::named("apps/v1", "StatefulSet"),
        Some("StatefulSet")
    );
    assert_eq!(catalog::named("apps/v1", "Pod"), None);
    let (crds, doc) = cell();
    let all: Vec<Subject> = served(&crds, &doc).into_iter().chain(subjects()).collect();
    let names = |n: &str| all.iter().find(|s| s.name == n).unwrap().event_names();
    let advanced = names("SidecarSet.AdvancedStatefulSet");
    assert!(advanced.contains(&"AdvancedStatefulSet"), "{advanced:?}");
    assert!(advanced.contains(&"StatefulSet"), "{advanced:?}");
    let clones = names("UnitedDeployment.cloneSetTemplate");
    assert!(clones.contains(&"CloneSet"), "{clones:?}");
    assert!(!clones.contains(&"AdvancedStatefulSet"), "{clones:?}");
    // A panic in the Advanced StatefulSet's adapter of a union is charged to the trials
    // whose objects include an Advanced StatefulSet, not to the union's other members.
    let stack = "panic: assignment to entry in nil map\n\ngoroutine 1 [running]:\n\
                 example.com/k/pkg/controller/uniteddeployment/adapter.\
                 (*AdvancedStatefulSetAdapter).ApplySubsetTemplate(0x1)"
        .to_string();
    let explored = catalog::kinds_and_names();
    let charged = |mut kinds: Vec<&str>| {
        kinds.push("UnitedDeployment");
        crate::explore::oracle::panics_are_theirs(std::slice::from_ref(&stack), &kinds, &explored)
    };
    assert!(charged(advanced));
    assert!(!charged(clones));
}

#[test]
fn names_are_unique_and_every_seed_is_of_its_kind_and_version() {
    let (crds, doc) = cell();
    for all in [served(&crds, &doc), subjects()] {
        let mut n = names(&all);
        n.sort_unstable();
        let len = n.len();
        n.dedup();
        assert_eq!(n.len(), len, "names are unique");
        for s in &all {
            let seed = s.seed.make("x");
            assert_eq!(seed["kind"], s.kind, "{}", s.name);
            assert_eq!(seed["apiVersion"], s.api_version.as_str(), "{}", s.name);
            assert_eq!(family_of(&s.name), Some(s.family), "{}", s.name);
            assert!(s.selected_by(s.family) && s.selected_by(&s.name));
            if s.makes == Makes::Copies {
                assert!(embedded_values().contains(&seed["spec"]["resource"]));
                continue;
            }
            let w = s.workload();
            let pod = get(&w.seed.make("x"), &w.template).clone();
            assert_eq!(
                pod["spec"]["containers"][0]["image"], IMAGE_V1,
                "{}",
                s.name
            );
            if let Some(t) = s.twin.as_deref().filter(|_| s.target.is_none()) {
                let at = s.twin_path(&s.template).unwrap();
                assert_eq!(at, t.template, "{}", s.name);
                assert_eq!(
                    get(&t.seed.make("x"), &at)["spec"]["containers"][0]["image"],
                    IMAGE_V1
                );
            }
        }
    }
}

#[test]
fn without_a_cell_each_kind_is_a_subject_at_the_version_its_seed_is_written_for() {
    let all = subjects();
    let n = names(&all);
    for w in WORKLOADS.iter().filter(|w| !w.builtin) {
        assert!(n.contains(&w.name), "{}", w.name);
    }
    assert!(n.contains(&"AdvancedCronJob"));
    assert!(!n.iter().any(|n| n.contains('@') || n.contains(CLAIMS)));
    assert!(n.contains(&"WorkloadSpread.Deployment"));
    assert!(n.contains(&"PersistentPodState.AdvancedStatefulSet"));
    assert_eq!(
        all.iter().filter(|s| s.family == "SidecarSet").count(),
        WORKLOADS.len() + 1,
        "over every workload and the cron union"
    );
}

#[test]
fn a_name_a_cell_tells_of_names_its_family() {
    assert_eq!(family_of("CloneSet@v1beta1"), Some("CloneSet"));
    assert_eq!(family_of(&format!("cloneset{CLAIMS}")), Some("CloneSet"));
    assert_eq!(
        family_of("WorkloadSpread@v1beta1.StatefulSet"),
        Some("WorkloadSpread")
    );
    assert_eq!(
        family_of("AdvancedStatefulSet"),
        Some("AdvancedStatefulSet")
    );
    assert_eq!(family_of("CloneSetX"), None);
    assert_eq!(
        family_of("Deployment"),
        None,
        "a built-in kind is not explored alone"
    );
}
