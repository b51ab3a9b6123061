//! CloneSet's served API versions: a setting the schema of a version offers, set through that
//! version, is read back as set (or the create is refused), never admitted and lost on the way
//! to the stored version.

use anyhow::{Context, ensure};
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::{Map, Value, json};

use crate::scenario::workload::CloneSet;
use crate::scenario::{Ctx, Scenario};
use crate::suites::common::*;

const CRD: &str = "clonesets.apps.kruise.io";
const VERSION: &str = "v1alpha1";
/// The settings judged: the in-place update strategy's, under `spec`.
const STRATEGY: &[&str] = &["updateStrategy", "inPlaceUpdateStrategy"];
const NAME: &str = "versions";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "cloneset/v1alpha1-keeps-every-in-place-update-setting-its-schema-offers",
        "each inPlaceUpdateStrategy setting the served v1alpha1 schema offers, set at create through apps.kruise.io/v1alpha1, is read back as set",
        &["cloneset", "api-versions", "in-place"],
        |ctx| keeps_what_the_schema_offers(ctx).boxed(),
    )]
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
        assert!(
            offered(&none)
                .unwrap_err()
                .to_string()
                .contains("serves no")
        );
    }
}
