//! Subjects derived from what a cell serves, over the kinds of the [`catalog`]. Start with
//! [`served`].
//!
//! - **Versions**: a subject per version the kind's CRD serves. The one its seed is written
//!   for has the plain name, another is named `@version` (`CloneSet@v1beta1`).
//! - **Union members**: a kind whose pod template is one member of a union of workload
//!   templates is a subject per member its schema has that holds a workload of the catalog
//!   (`UnitedDeployment.cloneSetTemplate`).
//! - **Claim templates**: a workload whose schema has `volumeClaimTemplates` beside its pod
//!   template is also a subject whose seed has one, mounted by its container (named with
//!   [`CLAIMS`]).
//! - **Targets**: a policy is a subject per workload subject (the controller's own and the
//!   built-in ones, in every version, with and without claim templates; a union by its first
//!   member), whatever its webhook accepts: a refused target is a finding or a documented
//!   difference, not a subject left out. Its twin is the same policy over the target's twin.
//! - **Seed variants** ([`Subject::variants`]): the replicas either side of the seed's, and
//!   rows of the values of the settings of its spec (its strings and numbers, from its
//!   schema, and what the seed's containers ask of the cell's nodes), every two values of
//!   two settings together in some row.
//!
//! Without a cell ([`subjects`]) each kind is a subject at the version its seed is written
//! for, with no member, claim template or variant the schema would tell of (a union by the
//! member its twin has, if any): what `--kinds` is checked against before a cell is up, and
//! what tests use.
//!
//! The subjects come in rounds: those at the versions the seeds are written for and without
//! claim templates first (in the catalog's order: workloads, unions, policies, copiers),
//! then those with one more difference, and so on, so that a budget that ends early has
//! explored the kinds as written.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::catalog::{self, COPIERS, Native, POLICIES, Policy, UNIONS, Union, WORKLOADS, Workload};
use super::{CLAIMS, Makes, Seed, Subject, TARGET, Twin, set};
use crate::explore::openapi::Doc;

mod source;

use source::{Source, Version};

/// The subjects a cell serves: derived from its CRDs (`group/Kind` → CRD, as JSON) and its
/// OpenAPI `doc` (the built-in kinds' schemas), in rounds (see the module's doc).
pub fn served(crds: &BTreeMap<String, Value>, doc: &Doc) -> Vec<Subject> {
    derive(&Source::Cell { crds, doc })
}

/// The subjects known without a cell (see the module's doc).
pub fn subjects() -> Vec<Subject> {
    derive(&Source::Known)
}

/// `seed` with a claim template `data`, at the object that holds the pod template at
/// `template`, mounted by the template's first container at `/data`.
fn with_claims(seed: Seed, template: &str) -> Seed {
    let claims = super::claims_at(template);
    let mounts = format!("{template}.spec.containers[0].volumeMounts");
    Seed::new(move |n| {
        let mut o = seed.make(n);
        let claim = json!([{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]);
        // Both paths are the seed's own: its template has a first container.
        let _ = set(&mut o, &claims, claim);
        let _ = set(
            &mut o,
            &mounts,
            json!([{"name": "data", "mountPath": "/data"}]),
        );
        o
    })
}

/// The twin `native`, with claim templates when `claims` and its kind has them.
fn native_twin(src: &Source<'_>, native: &Native, claims: bool) -> Twin {
    let w = catalog::workload(native.workload).expect("a twin is a workload of the catalog");
    let (build, api_version) = (native.build.unwrap_or(w.build), w.api_version);
    let mut seed = Seed::new(move |n| build(api_version, n));
    if claims && src.kind_claims(w) {
        seed = with_claims(seed, w.template);
    }
    Twin {
        api_version: api_version.to_string(),
        kind: w.kind,
        suspend: src.suspend(w, None),
        seed,
        renamed: native.renamed,
        documented: native.documented,
        template: w.template.to_string(),
        observes_generation: w.observes_generation,
        via: w.via.to_vec(),
        target: None,
    }
}

/// The subject of workload `w` in version `v`, with claim templates when `claims`.
fn workload_subject(src: &Source<'_>, w: &Workload, v: &Version<'_>, claims: bool) -> Subject {
    let (build, api_version) = (w.build, v.api_version.clone());
    let mut seed = Seed::new(move |n| build(&api_version, n));
    if claims {
        seed = with_claims(seed, w.template);
    }
    let mut s = Subject {
        name: format!(
            "{}{}{}",
            w.name,
            if claims { CLAIMS } else { "" },
            v.suffix()
        ),
        family: w.name,
        api_version: v.api_version.clone(),
        kind: w.kind,
        seed,
        twin: w
            .twin
            .as_ref()
            .map(|n| Box::new(native_twin(src, n, claims))),
        replicated: w.replicated,
        suspend: src.suspend(w, Some(v)),
        template: w.template.to_string(),
        rolls_out: w.rolls_out,
        observes_generation: w.observes_generation,
        via: w.via.to_vec(),
        target: None,
        makes: Makes::Pods,
        gates: &[],
        variants: vec![],
    };
    s.variants = src.variants(&s, v);
    s
}

/// The subject of union `u` in version `v` holding workload `m`, with claim templates when
/// `claims`: named `Kind.member`, or `Kind` for the member its twin has.
fn member_subject(
    src: &Source<'_>,
    u: &Union,
    v: &Version<'_>,
    m: &'static Workload,
    claims: bool,
) -> Subject {
    let member = m.member();
    let inner = m.template.strip_prefix("spec.").unwrap_or(m.template);
    let template = format!("{}.{member}.spec.{inner}", u.members_at);
    let (build, api_version, held) = (u.build, v.api_version.clone(), member.clone());
    let mut seed = Seed::new(move |n| {
        let spec = (m.build)(m.api_version, n)["spec"].clone();
        build(&api_version, n, &held, spec)
    });
    if claims {
        seed = with_claims(seed, &template);
    }
    let twin = u
        .twin
        .filter(|(t, _)| *t == member)
        .map(|(_, n)| Box::new(native_twin(src, &n, claims)));
    let base = match twin {
        Some(_) => u.name.to_string(),
        None => format!("{}.{member}", u.name),
    };
    let mut via = vec![(m.api_version, m.kind)];
    via.extend(m.via);
    let mut s = Subject {
        name: format!("{base}{}{}", if claims { CLAIMS } else { "" }, v.suffix()),
        family: u.name,
        api_version: v.api_version.clone(),
        kind: u.kind,
        seed,
        twin,
        replicated: u.replicated,
        suspend: src.union_holds(v),
        template,
        rolls_out: u.rolls_out,
        observes_generation: u.observes_generation,
        via,
        target: None,
        makes: Makes::Pods,
        gates: &[],
        variants: vec![],
    };
    s.variants = src.variants(&s, v);
    s
}

/// The subject of policy `p` in version `v` over target `t` (a workload subject); its twin,
/// the same policy over the target's twin.
fn policy_subject(src: &Source<'_>, p: &Policy, v: &Version<'_>, t: &Subject) -> Subject {
    let over = |target: &Subject| {
        let (build, api_version, spec) = (p.build, v.api_version.clone(), v.spec.clone());
        let (target_api, target_kind) = (target.api_version.clone(), target.kind);
        Seed::new(move |n| build(&api_version, (&target_api, target_kind), n, &spec))
    };
    let twin = t.twin_subject().map(|native| {
        Box::new(Twin {
            api_version: v.api_version.clone(),
            kind: p.kind,
            suspend: None,
            seed: over(&native),
            renamed: &[],
            documented: &[],
            template: String::new(),
            observes_generation: false,
            via: vec![],
            target: Some(Box::new(native)),
        })
    });
    let mut s = Subject {
        name: format!("{}{}.{}", p.name, v.suffix(), t.name),
        family: p.name,
        api_version: v.api_version.clone(),
        kind: p.kind,
        seed: over(t),
        twin,
        replicated: t.replicated,
        suspend: None,
        template: String::new(),
        rolls_out: false,
        observes_generation: false,
        via: vec![],
        target: None,
        makes: Makes::Pods,
        gates: &[],
        variants: vec![],
    };
    s.variants = src.variants(&s, v);
    // The target's variants, as fields of the target, and the replicas it wakes to.
    s.variants.extend(t.variants.iter().map(|f| {
        f.iter()
            .map(|(k, x)| (format!("{TARGET}{k}"), x.clone()))
            .collect()
    }));
    s.target = Some(Box::new(t.clone()));
    s
}

/// Every subject of `src`, in rounds (see the module's doc).
fn derive(src: &Source<'_>) -> Vec<Subject> {
    // (round, subject): the round counts what differs from the kinds as written.
    let mut out: Vec<(usize, Subject)> = vec![];
    let mut targets: Vec<(usize, Subject)> = vec![];
    for w in WORKLOADS {
        for v in src.versions(w.api_version, w.kind, w.builtin) {
            for claims in [false, true] {
                if claims && !src.claims(w, &v) {
                    continue;
                }
                let s = workload_subject(src, w, &v, claims);
                let round = usize::from(!v.plain) + usize::from(claims);
                targets.push((round, s.clone()));
                if !w.builtin {
                    out.push((round, s));
                }
            }
        }
    }
    for u in UNIONS {
        for v in src.versions(u.api_version, u.kind, false) {
            for (i, m) in src.members(u, &v).into_iter().enumerate() {
                for claims in [false, true] {
                    if claims && !src.kind_claims(m) {
                        continue;
                    }
                    let s = member_subject(src, u, &v, m, claims);
                    let round = usize::from(!v.plain) + usize::from(claims);
                    // A union is a target by its first member: the pods of the others meet
                    // a policy alike, and each is explored as a subject of its own.
                    if i == 0 {
                        targets.push((round, s.clone()));
                    }
                    out.push((round, s));
                }
            }
        }
    }
    for p in POLICIES {
        for v in src.versions(p.api_version, p.kind, false) {
            for (round, t) in &targets {
                out.push((round + usize::from(!v.plain), policy_subject(src, p, &v, t)));
            }
        }
    }
    for c in COPIERS {
        for v in src.versions(c.api_version, c.kind, false) {
            let (build, api_version) = (c.build, v.api_version.clone());
            let mut s = Subject {
                name: format!("{}{}", c.name, v.suffix()),
                family: c.name,
                api_version: v.api_version.clone(),
                kind: c.kind,
                seed: Seed::new(move |n| build(&api_version, n)),
                twin: None,
                replicated: false,
                suspend: None,
                template: String::new(),
                rolls_out: false,
                observes_generation: true,
                via: vec![],
                target: None,
                makes: Makes::Copies,
                gates: c.gates,
                variants: vec![],
            };
            s.variants = src.variants(&s, &v);
            out.push((usize::from(!v.plain), s));
        }
    }
    out.sort_by_key(|(round, _)| *round);
    out.into_iter().map(|(_, s)| s).collect()
}

/// The family `k` (a `--kinds` name) names, if it names one of the [`catalog`]: the name of
/// a kind of it, alone or followed by [`CLAIMS`], `.` or `@` (a subject only a cell tells
/// of, as `CloneSet@v1beta1`, names its kind's family).
pub fn family_of(k: &str) -> Option<&'static str> {
    let k = k.to_ascii_lowercase();
    let claims = CLAIMS.to_ascii_lowercase();
    catalog::families()
        .into_iter()
        .filter(|f| {
            k.strip_prefix(&f.to_ascii_lowercase()).is_some_and(|rest| {
                let rest = rest.strip_prefix(&claims).unwrap_or(rest);
                rest.is_empty() || rest.starts_with(['.', '@'])
            })
        })
        .max_by_key(|f| f.len())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::explore::subject::{IMAGE_V1, embedded_values, get, target_name};
    use crate::explore::trial::Fields;

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
        let (crds, doc) = cell();
        let all = served(&crds, &doc);
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

    fn names(subjects: &[Subject]) -> Vec<&str> {
        subjects.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn every_policy_is_a_subject_over_every_workload_subject_with_its_twin() {
        let (crds, doc) = cell();
        let all = served(&crds, &doc);
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
        let (crds, doc) = cell();
        let all = served(&crds, &doc);
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
        let (crds, doc) = cell();
        let all = served(&crds, &doc);
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
        let ws = all
            .iter()
            .find(|s| s.name == "SidecarSet.CloneSet")
            .unwrap();
        assert!(has(
            ws,
            "target:spec.updateStrategy.type",
            json!("InPlaceIfPossible")
        ));
        assert!(has(ws, "target:spec.replicas", json!(3)));
        let over_deployment = all
            .iter()
            .find(|s| s.name == "SidecarSet.Deployment")
            .unwrap();
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
            serde_json::from_str(include_str!("../../../tests/fixtures/openapi-core.json"))
                .expect("the fixture is JSON");
        let requests = "spec.template.spec.containers[0].resources.requests";
        let limits = "spec.template.spec.containers[0].resources.limits";
        let of =
            |all: &[Subject], name: &str| all.iter().find(|s| s.name == name).cloned().unwrap();
        let set = |s: &Subject, k: &str| s.variants.iter().filter(|f| f.contains_key(k)).count();
        // Nodes that offer nothing: no variant asks for anything.
        let bare = served(&crds, &Doc::new(std::slice::from_ref(&core)));
        assert_eq!(set(&of(&bare, "CloneSet"), requests), 0);
        let mut doc = Doc::new(&[core]);
        doc.offer(&[BTreeMap::from([
            ("cpu".to_string(), "2".to_string()),
            ("memory".to_string(), "8Gi".to_string()),
        ])]);
        let all = served(&crds, &doc);
        let cs = of(&all, "CloneSet");
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
        let ss = of(&all, "SidecarSet.CloneSet");
        assert!(set(&ss, &format!("{TARGET}{requests}")) > 0);
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
            crate::explore::oracle::panics_are_theirs(
                std::slice::from_ref(&stack),
                &kinds,
                &explored,
            )
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
}
