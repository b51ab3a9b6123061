//! CloneSet's served API versions: a setting the schema of a version offers, set through that
//! version, is read back as set (or the create is refused), never admitted and lost on the way
//! to the stored version; and every served version bounds its rolling update's
//! `maxUnavailable` as a Deployment does, whatever the replicas.

use anyhow::{Context, ensure};
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::{Map, Value, json};

use crate::scenario::workload::{CloneSet, Deployment};
use crate::scenario::{Ctx, FINDING, Scenario};
use crate::suites::common::*;

const CRD: &str = "clonesets.apps.kruise.io";
const VERSION: &str = "v1alpha1";
/// The settings judged: the in-place update strategy's, under `spec`.
const STRATEGY: &[&str] = &["updateStrategy", "inPlaceUpdateStrategy"];
const NAME: &str = "versions";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "cloneset/v1alpha1-keeps-every-in-place-update-setting-its-schema-offers",
            "each inPlaceUpdateStrategy setting the served v1alpha1 schema offers, set at create through apps.kruise.io/v1alpha1, is read back as set",
            &["cloneset", "api-versions", "in-place"],
            |ctx| keeps_what_the_schema_offers(ctx).boxed(),
        ),
        Scenario::new(
            "cloneset/every-served-version-refuses-a-negative-max-unavailable-at-zero-replicas",
            "a CloneSet of zero replicas with a negative rolling-update maxUnavailable, asked through each API version the CRD serves, is refused as a Deployment's is",
            &["cloneset", "api-versions", "admission"],
            |ctx| agrees_with_deployment(ctx, NEGATIVE_AT_ZERO).boxed(),
        ),
        Scenario::new(
            "cloneset/every-served-version-admits-a-surge-with-none-unavailable",
            "a CloneSet with rolling-update maxSurge 1 and maxUnavailable 0, asked through each API version the CRD serves, is admitted as a Deployment's is",
            &["cloneset", "api-versions", "admission"],
            |ctx| agrees_with_deployment(ctx, SURGE_NONE_UNAVAILABLE).boxed(),
        ),
    ]
}

/// A rolling update's bounds asked of a CloneSet through every served version and of a
/// Deployment: the two must answer alike.
struct Bounds {
    /// The finding's name.
    name: &'static str,
    replicas: i64,
    /// The rolling update's fields, by the name each version's schema gives them.
    set: &'static [(&'static str, i64)],
}

const NEGATIVE_AT_ZERO: Bounds = Bounds {
    name: "max-unavailable-negative at zero replicas",
    replicas: 0,
    set: &[("maxUnavailable", -1)],
};

const SURGE_NONE_UNAVAILABLE: Bounds = Bounds {
    name: "max-surge-one-max-unavailable-zero",
    replicas: 2,
    set: &[("maxUnavailable", 0), ("maxSurge", 1)],
};

/// The path of rolling-update field `field` under `spec.updateStrategy` in the schema of
/// served version `v` of a CRD (directly under it, or under one of its objects), as field
/// names.
fn strategy_path(v: &Value, field: &str) -> Option<Vec<String>> {
    let strategy =
        &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["updateStrategy"];
    let props = strategy["properties"].as_object()?;
    let at = |rest: &[&str]| {
        let mut p = vec!["spec".to_string(), "updateStrategy".to_string()];
        p.extend(rest.iter().map(|s| s.to_string()));
        p
    };
    if props.contains_key(field) {
        return Some(at(&[field]));
    }
    props.iter().find_map(|(name, s)| {
        s["properties"]
            .as_object()?
            .contains_key(field)
            .then(|| at(&[name, field]))
    })
}

/// Served versions, each with the paths of the fields asked for.
type Served = Vec<(String, Vec<Vec<String>>)>;

/// Each version the CRD `crd` serves, with where its schema has each of `fields`.
fn served_paths(crd: &Value, fields: &[&str]) -> anyhow::Result<Served> {
    let versions = crd["spec"]["versions"].as_array().context("no versions")?;
    versions
        .iter()
        .filter(|v| v["served"] == json!(true))
        .map(|v| {
            let name = v["name"].as_str().context("a version without a name")?;
            let paths = fields
                .iter()
                .map(|f| {
                    strategy_path(v, f).with_context(|| {
                        format!("the {name} schema of {CRD} has no {f} under spec.updateStrategy")
                    })
                })
                .collect::<anyhow::Result<_>>()?;
            Ok((name.to_string(), paths))
        })
        .collect()
}

/// Sets `value` at `path` in `obj`, making the objects on the way.
fn set_at(obj: &mut Value, path: &[String], value: Value) {
    let mut at = obj;
    for field in &path[..path.len() - 1] {
        if !at[field.as_str()].is_object() {
            at[field.as_str()] = json!({});
        }
        at = &mut at[field.as_str()];
    }
    at[path[path.len() - 1].as_str()] = value;
}

/// What the API answered: admitted, or refused with its words.
fn answer(r: Result<(), kube::Error>) -> Result<(), String> {
    r.map_err(|e| refusal(e).to_string())
}

async fn agrees_with_deployment(ctx: Ctx, b: Bounds) -> anyhow::Result<()> {
    let fields: Vec<&str> = b.set.iter().map(|(f, _)| *f).collect();
    let deployment = ctx
        .step("a Deployment's answer (the control)", async {
            let mut d = Deployment::new(NAME).replicas(b.replicas).manifest();
            let mut rolling = json!({});
            for (f, v) in b.set {
                rolling[*f] = json!(v);
            }
            d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": rolling});
            Ok(answer(ctx.admits(&d).await))
        })
        .await?;
    let served = ctx
        .step(
            "the versions the CRD serves and where each has the fields",
            async {
                let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
                served_paths(&serde_json::to_value(crds.get(CRD).await?)?, &fields)
            },
        )
        .await?;
    let mut findings = vec![];
    for (version, paths) in &served {
        let mut manifest = CloneSet::new(NAME).replicas(b.replicas).manifest();
        manifest["apiVersion"] = json!(format!("apps.kruise.io/{version}"));
        let mut set = vec![];
        for (path, (_, v)) in paths.iter().zip(b.set) {
            set_at(&mut manifest, path, json!(v));
            set.push(format!("{} {v}", path.join(".")));
        }
        let cloneset = answer(ctx.admits(&manifest).await);
        if cloneset.is_ok() != deployment.is_ok() {
            let said = |a: &Result<(), String>| match a {
                Ok(()) => "admitted".to_string(),
                Err(e) => format!("refused ({e})"),
            };
            findings.push(format!(
                "{FINDING}{}: CloneSet {} through apps.kruise.io/{version} ({}, {} replicas), where a Deployment is {}",
                b.name,
                if cloneset.is_ok() { "admitted" } else { "refused" },
                set.join(", "),
                b.replicas,
                said(&deployment)
            ));
            if let Err(e) = &cloneset {
                tracing::info!(version, refusal = %e, "CloneSet refused");
            }
        }
    }
    ensure!(findings.is_empty(), "{}", findings.join("\n"));
    Ok(())
}

/// A value for a setting of schema `s`: a small number for a number (or int-or-string);
/// none for another shape.
fn value_for(s: &Value) -> Option<Value> {
    let int_or_string = s["x-kubernetes-int-or-string"] == json!(true);
    (int_or_string || s["type"] == json!("integer")).then(|| json!(1))
}

/// The settings under [`STRATEGY`] in the v1alpha1 schema of the served CRD `crd`, each with
/// the value [`value_for`] gives it.
fn offered(crd: &Value) -> anyhow::Result<Map<String, Value>> {
    let versions = crd["spec"]["versions"].as_array().context("no versions")?;
    let v = versions
        .iter()
        .find(|v| v["name"] == json!(VERSION) && v["served"] == json!(true))
        .with_context(|| format!("{CRD} serves no {VERSION}"))?;
    let mut at = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    for field in STRATEGY {
        at = &at["properties"][field];
    }
    let props = at["properties"]
        .as_object()
        .with_context(|| format!("the {VERSION} schema has no spec.{}", STRATEGY.join(".")))?;
    Ok(props
        .iter()
        .filter_map(|(k, s)| value_for(s).map(|v| (k.clone(), v)))
        .collect())
}

async fn keeps_what_the_schema_offers(ctx: Ctx) -> anyhow::Result<()> {
    let settings = ctx
        .step("the settings the served v1alpha1 schema offers", async {
            let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
            let crd = serde_json::to_value(crds.get(CRD).await?)?;
            let settings = offered(&crd)?;
            ensure!(
                !settings.is_empty(),
                "the {VERSION} schema offers no number under spec.{}",
                STRATEGY.join(".")
            );
            Ok(settings)
        })
        .await?;
    let path = format!("spec.{}", STRATEGY.join("."));
    ctx.step(
        "a CloneSet created through v1alpha1 with every one of them keeps each",
        async {
            let mut manifest = CloneSet::new(NAME).replicas(0).manifest();
            manifest["apiVersion"] = json!(format!("apps.kruise.io/{VERSION}"));
            manifest["spec"]["updateStrategy"]["inPlaceUpdateStrategy"] =
                Value::Object(settings.clone());
            ctx.create(manifest).await.map_err(refusal)?;
            let api = ctx
                .dyn_api(&format!("apps.kruise.io/{VERSION}"), "CloneSet")
                .await?;
            let read = serde_json::to_value(api.get(NAME).await?)?;
            let kept = &read["spec"]["updateStrategy"]["inPlaceUpdateStrategy"];
            let dropped: Vec<String> = settings
                .iter()
                .filter(|(k, v)| kept[k.as_str()] != **v)
                .map(|(k, v)| format!("{path}.{k} (set {v}, read {})", kept[k.as_str()]))
                .collect();
            ensure!(
                dropped.is_empty(),
                "the API admitted and dropped {}: the {VERSION} schema offers them",
                dropped.join(", ")
            );
            Ok(())
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_offered_are_the_numbers_of_the_served_versions_schema() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1beta1", "served": true, "schema": {}},
            {"name": "v1alpha1", "served": true, "schema": {"openAPIV3Schema": {"properties": {
                "spec": {"properties": {"updateStrategy": {"properties": {
                    "inPlaceUpdateStrategy": {"properties": {
                        "gracePeriodSeconds": {"type": "integer"},
                        "parallelism": {"x-kubernetes-int-or-string": true},
                        "note": {"type": "string"}
                    }}
                }}}}
            }}}}
        ]}});
        let s = offered(&crd).unwrap();
        assert_eq!(
            s.keys().collect::<Vec<_>>(),
            ["gracePeriodSeconds", "parallelism"]
        );
        let none = json!({"spec": {"versions": [{"name": "v1alpha1", "served": false}]}});
        assert!(served_paths(&none, &["maxUnavailable"]).unwrap().is_empty());
        assert!(
            offered(&none)
                .unwrap_err()
                .to_string()
                .contains("serves no")
        );
    }

    #[test]
    fn a_rolling_update_field_is_found_where_each_served_version_has_it() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1alpha1", "served": true, "schema": {"openAPIV3Schema": {"properties": {
                "spec": {"properties": {"updateStrategy": {"properties": {
                    "maxUnavailable": {"x-kubernetes-int-or-string": true}
                }}}}
            }}}},
            {"name": "v1beta1", "served": true, "schema": {"openAPIV3Schema": {"properties": {
                "spec": {"properties": {"updateStrategy": {"properties": {
                    "type": {"type": "string"},
                    "rollingUpdate": {"properties": {"maxUnavailable": {}}}
                }}}}
            }}}},
            {"name": "v2", "served": false}
        ]}});
        let got = served_paths(&crd, &["maxUnavailable"]).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1[0].join("."), "spec.updateStrategy.maxUnavailable");
        assert_eq!(
            got[1].1[0].join("."),
            "spec.updateStrategy.rollingUpdate.maxUnavailable"
        );
        let mut obj = json!({"spec": {}});
        set_at(&mut obj, &got[1].1[0], json!(-1));
        assert_eq!(
            obj["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            -1
        );
        let without = json!({"spec": {"versions": [
            {"name": "v1", "served": true, "schema": {"openAPIV3Schema": {"properties": {
                "spec": {"properties": {"updateStrategy": {"properties": {"type": {}}}}}
            }}}}
        ]}});
        let e = served_paths(&without, &["maxUnavailable"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the v1 schema") && e.contains("no maxUnavailable"),
            "{e}"
        );
    }
}
