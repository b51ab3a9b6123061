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
/// Its unit tests, and the cell they derive subjects from (test code only).
pub(crate) mod tests;

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
