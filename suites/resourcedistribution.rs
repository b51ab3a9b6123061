//! ResourceDistribution (`apps.kruise.io/v1alpha1`, cluster-scoped): a Secret or ConfigMap
//! copied into the namespaces its targets pick. Start with [`scenarios`]. Every namespace a
//! scenario targets is its own (created through the context, labelled with the scenario's
//! namespace), so concurrent scenarios never see each other's copies.

use std::collections::BTreeMap;

use anyhow::{Context, bail, ensure};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use serde_json::{Value, json};

use super::common::*;
use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, Requirements, Scenario, status};

const API: &str = "apps.kruise.io/v1alpha1";
const KIND: &str = "ResourceDistribution";
const LABEL: &str = "harness-distribution";
const FROM: &str = "kruise.io/resourcedistribution.resource.from";

fn requires() -> Requirements {
    Requirements {
        controller_gates: BTreeMap::from([("ResourceDistributionGate".to_string(), true)]),
        ..Default::default()
    }
}

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "resourcedistribution/secret-follows-included-labelled-and-excluded-namespaces",
            "a Secret is copied to the included and the label-selected namespaces but not the excluded one; updates propagate; a namespace dropped from the targets loses its copy",
            &["smoke", "resourcedistribution", "secret", "targets"],
            |ctx| secret_targets(ctx).boxed(),
        )
        .requiring(requires()),
        Scenario::new(
            "resourcedistribution/configmap-follows-namespace-labels",
            "targets naming a namespace both included and excluded are refused; a ConfigMap reaches a namespace labelled after the distribution and leaves it when the label goes",
            &[
                "resourcedistribution",
                "configmap",
                "namespace-label-selector",
                "webhook",
            ],
            |ctx| configmap_labels(ctx).boxed(),
        )
        .requiring(requires()),
    ]
}

/// Creates namespace `name` with `labels` (cluster-scoped: deleted after the scenario).
async fn namespace(ctx: &Ctx, name: &str, labels: Value) -> anyhow::Result<()> {
    create(
        ctx,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
    )
    .await?;
    Ok(())
}

fn names(list: &[&str]) -> Value {
    json!({"list": list.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()})
}

/// Waits until the distribution has observed its spec and counts `desired` namespaces, all
/// succeeded, with every condition False (nothing failed).
async fn wait_distributed(ctx: &Ctx, name: &str, desired: i64) -> anyhow::Result<()> {
    let api = ctx.dyn_api(API, KIND).await?;
    let what = format!("{KIND} {name} to succeed in {desired} namespaces");
    until(&api, name, &what, ctx.timeouts.converge, move |o| {
        async move {
            let Some(o) = o else {
                return Check::Pending("the distribution does not exist".into());
            };
            let s = status(&o);
            let observed = s["observedGeneration"].as_i64() >= o.metadata.generation;
            let counts = (
                s["desired"].as_i64().unwrap_or(0),
                s["succeeded"].as_i64().unwrap_or(0),
                s["failed"].as_i64().unwrap_or(0),
            );
            let failing: Vec<&Value> = s["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["status"] != "False")
                .collect();
            Check::when(
                observed && counts == (desired, desired, 0) && failing.is_empty(),
                || {
                    format!(
                        "desired/succeeded/failed {counts:?}, want ({desired}, {desired}, 0); \
                         conditions not False: {failing:?}; observed {observed}"
                    )
                },
            )
        }
        .boxed()
    })
    .await?;
    Ok(())
}

/// Waits until object `name` in namespace `ns` satisfies `ok` (`None`: absent).
async fn wait_copy<K>(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    what: &str,
    ok: fn(Option<&K>) -> Result<(), String>,
) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    <K as kube::Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let what = format!("{what} in namespace {ns}");
    until(&api, name, &what, ctx.timeouts.converge, move |o| {
        std::future::ready(Check::from_result(ok(o.as_ref()))).boxed()
    })
    .await?;
    Ok(())
}

fn secret_value(s: Option<&Secret>) -> Option<String> {
    let v = s?.data.as_ref()?.get("token")?;
    String::from_utf8(v.0.clone()).ok()
}

fn has_v1(s: Option<&Secret>) -> Result<(), String> {
    match secret_value(s) {
        Some(v) if v == "v1" => Ok(()),
        other => Err(format!("secret token {other:?}, want \"v1\"")),
    }
}

fn has_v2(s: Option<&Secret>) -> Result<(), String> {
    match secret_value(s) {
        Some(v) if v == "v2" => Ok(()),
        other => Err(format!("secret token {other:?}, want \"v2\"")),
    }
}

fn absent<K: std::fmt::Debug>(o: Option<&K>) -> Result<(), String> {
    match o {
        None => Ok(()),
        Some(o) => Err(format!("still there: {o:?}")),
    }
}

async fn secret_targets(ctx: Ctx) -> anyhow::Result<()> {
    let [included, labelled, excluded] =
        [ctx.unique("incl"), ctx.unique("lbl"), ctx.unique("excl")];
    ctx.step("an included, a labelled and an excluded namespace", async {
        namespace(&ctx, &included, json!({})).await?;
        for ns in [&labelled, &excluded] {
            namespace(&ctx, ns, json!({LABEL: ctx.namespace})).await?;
        }
        Ok(())
    })
    .await?;
    let rd = ctx.unique("secret");
    let resource = |token: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "shared"},
               "type": "Opaque", "data": {"token": token}})
    };
    ctx.step("a Secret distribution succeeds in 2 namespaces", async {
        create(
            &ctx,
            json!({
                "apiVersion": API, "kind": KIND, "metadata": {"name": rd},
                "spec": {
                    "resource": resource("djE="),
                    "targets": {
                        "includedNamespaces": names(&[&included]),
                        "namespaceLabelSelector": {"matchLabels": {LABEL: ctx.namespace}},
                        "excludedNamespaces": names(&[&excluded]),
                    }
                }
            }),
        )
        .await?;
        wait_distributed(&ctx, &rd, 2).await?;
        Ok(())
    })
    .await?;
    ctx.step("the included and labelled namespaces hold owned copies, the excluded one none", async {
        for ns in [&included, &labelled] {
            wait_copy::<Secret>(&ctx, ns, "shared", "the secret with token v1", has_v1).await?;
            let copy: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
            let s = copy.get("shared").await?;
            let owned = s
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.kind == KIND && r.name == rd && r.controller == Some(true));
            let from = s.metadata.annotations.as_ref().and_then(|a| a.get(FROM));
            ensure!(
                owned && from == Some(&rd),
                "copy in {ns} is not owned by and annotated with {rd}: owners {:?}, {FROM} {from:?}",
                s.metadata.owner_references
            );
        }
        let copy: Api<Secret> = Api::namespaced(ctx.client.clone(), &excluded);
        if let Some(s) = copy.get_opt("shared").await? {
            bail!(
                "the excluded namespace {excluded} got a copy: {:?}",
                s.metadata
            );
        }
        Ok(())
    })
    .await?;

    ctx.step("an update of the Secret reaches both copies", async {
        ctx.patch(
            API,
            KIND,
            &rd,
            json!({"spec": {"resource": resource("djI=")}}),
        )
        .await
        .map_err(refusal)
        .context("update the distributed secret")?;
        for ns in [&included, &labelled] {
            wait_copy::<Secret>(&ctx, ns, "shared", "the secret updated to token v2", has_v2)
                .await?;
        }
        Ok(())
    })
    .await?;

    ctx.step(
        "a namespace dropped from the targets loses its copy",
        async {
            ctx.patch(
                API,
                KIND,
                &rd,
                json!({"spec": {"targets": {"includedNamespaces": {"list": []}}}}),
            )
            .await
            .map_err(refusal)
            .context("drop the included namespace")?;
            wait_distributed(&ctx, &rd, 1).await?;
            wait_copy::<Secret>(&ctx, &included, "shared", "the copy removed", absent).await?;
            wait_copy::<Secret>(&ctx, &labelled, "shared", "the copy kept", has_v2).await
        },
    )
    .await
}

fn has_config(c: Option<&ConfigMap>) -> Result<(), String> {
    let v = c.and_then(|c| c.data.as_ref()?.get("mode").cloned());
    match v.as_deref() {
        Some("on") => Ok(()),
        other => Err(format!("configmap mode {other:?}, want \"on\"")),
    }
}

async fn configmap_labels(ctx: Ctx) -> anyhow::Result<()> {
    let ns = ctx.unique("late");
    let resource = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": {"mode": "on"}});
    let rd = ctx.unique("config");
    let ambiguous = json!({
        "apiVersion": API, "kind": KIND, "metadata": {"name": rd},
        "spec": {"resource": resource, "targets": {
            "includedNamespaces": names(&[&ns]), "excludedNamespaces": names(&[&ns])}}
    });
    ctx.step(
        "targets naming a namespace both included and excluded are refused",
        async {
            match ctx.create(ambiguous).await {
                Ok(_) => bail!("targets with {ns} both included and excluded were accepted"),
                Err(kube::Error::Api(s)) if s.message.contains("ambiguous targets") => {}
                Err(e) => bail!(
                    "want a refusal naming ambiguous targets, got {}",
                    refusal(e)
                ),
            }
            Ok(())
        },
    )
    .await?;
    ctx.step(
        "a ConfigMap distribution by namespace label reaches no namespace yet",
        async {
            create(
                &ctx,
                json!({
                    "apiVersion": API, "kind": KIND, "metadata": {"name": rd},
                    "spec": {"resource": resource, "targets": {
                        "namespaceLabelSelector": {"matchLabels": {LABEL: ctx.namespace}}}}
                }),
            )
            .await?;
            wait_distributed(&ctx, &rd, 0).await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("a namespace labelled afterwards gets the copy", async {
        namespace(&ctx, &ns, json!({LABEL: ctx.namespace})).await?;
        wait_copy::<ConfigMap>(&ctx, &ns, "settings", "the configmap copied", has_config).await?;
        wait_distributed(&ctx, &rd, 1).await?;
        Ok(())
    })
    .await?;
    ctx.step(
        "with its label removed the namespace loses the copy",
        async {
            ctx.patch(
                "v1",
                "Namespace",
                &ns,
                json!({"metadata": {"labels": {LABEL: null}}}),
            )
            .await
            .map_err(refusal)
            .context("remove the namespace's label")?;
            wait_copy::<ConfigMap>(&ctx, &ns, "settings", "the copy removed", absent).await?;
            wait_distributed(&ctx, &rd, 0).await
        },
    )
    .await
}
