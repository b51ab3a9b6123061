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
        Scenario::new(
            "resourcedistribution/immutable-resource-change-is-refused-or-reaches-its-copies",
            "an immutable ConfigMap is copied immutable; a change of its data is refused, or reaches the copy once the distribution has observed it",
            &["resourcedistribution", "configmap", "immutable"],
            |ctx| immutable_change(ctx).boxed(),
        )
        .requiring(requires()),
        Scenario::new(
            "resourcedistribution/all-namespaces-leaves-out-the-system-namespaces",
            "allNamespaces copies a ConfigMap into every namespace, one no target names included, but not into kube-system or kube-public, which the field's documentation leaves out",
            &["resourcedistribution", "configmap", "all-namespaces"],
            |ctx| all_namespaces(ctx).boxed(),
        )
        .requiring(requires()),
        Scenario::new(
            "resourcedistribution/resource-labels-reach-its-copies",
            "a label of the distributed resource is on its copy, and a changed label reaches the copy once the distribution has observed the change",
            &["resourcedistribution", "configmap", "labels"],
            |ctx| label_change(ctx).boxed(),
        )
        .requiring(requires()),
        Scenario::new(
            "resourcedistribution/every-generation-is-observed",
            "an update the API stores as a new generation is observed, though it selects no other namespace (an empty namespace selector set, or removed): the status catches up with it",
            &["resourcedistribution", "configmap", "observed-generation"],
            |ctx| generation_observed(ctx).boxed(),
        )
        .requiring(requires()),
    ]
}

/// Distribution `name` of a ConfigMap of the same name holding `mode: on`, to `targets`.
fn configmap_distribution(name: &str, targets: Value) -> Value {
    json!({"apiVersion": API, "kind": KIND, "metadata": {"name": name},
           "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name}, "data": {"mode": "on"}},
                    "targets": targets}})
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

/// Waits until distribution `name` has observed generation `generation` or later; returns its
/// status conditions that are not False (what failed).
async fn observed(ctx: &Ctx, name: &str, generation: i64) -> anyhow::Result<Vec<Value>> {
    let api = ctx.dyn_api(API, KIND).await?;
    let what = format!("{KIND} {name} to observe generation {generation}");
    let o = until(&api, name, &what, ctx.timeouts.converge, move |o| {
        async move {
            let observed = o
                .as_ref()
                .and_then(|o| status(o)["observedGeneration"].as_i64())
                .unwrap_or(0);
            Check::when(observed >= generation, || {
                format!("observedGeneration {observed}")
            })
        }
        .boxed()
    })
    .await?
    .context("the distribution is gone")?;
    Ok(status(&o)["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] != "False")
        .cloned()
        .collect())
}

/// The one namespace a scenario's distribution targets, labelled for it; made through the
/// context.
async fn target(ctx: &Ctx, base: &str) -> anyhow::Result<String> {
    let ns = ctx.unique(base);
    namespace(ctx, &ns, json!({LABEL: ctx.namespace})).await?;
    Ok(ns)
}

async fn immutable_change(ctx: Ctx) -> anyhow::Result<()> {
    let ns = ctx
        .step("a namespace to copy into", target(&ctx, "frozen"))
        .await?;
    let rd = ctx.unique("frozen");
    let resource = |mode: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
               "data": {"mode": mode}, "immutable": true})
    };
    ctx.step("an immutable ConfigMap is copied, immutable", async {
        create(
            &ctx,
            json!({"apiVersion": API, "kind": KIND, "metadata": {"name": rd},
                   "spec": {"resource": resource("on"), "targets": {
                       "namespaceLabelSelector": {"matchLabels": {LABEL: ctx.namespace}}}}}),
        )
        .await?;
        wait_distributed(&ctx, &rd, 1).await?;
        wait_copy::<ConfigMap>(&ctx, &ns, "frozen", "the configmap copied", has_config).await?;
        let copy = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
            .get("frozen")
            .await?;
        ensure!(
            copy.immutable == Some(true),
            "the copy is not immutable: {:?}",
            copy.immutable
        );
        Ok(())
    })
    .await?;
    ctx.step(
        "a change of its data is refused, or reaches the copy once observed",
        async {
            match ctx
                .patch(API, KIND, &rd, json!({"spec": {"resource": resource("off")}}))
                .await
            {
                Err(kube::Error::Api(e)) if e.message.contains("resource") => {
                    ctx.passed_by("the change was refused");
                    return Ok(());
                }
                Err(e) => bail!("want the change admitted or refused naming the resource, got {}", refusal(e)),
                Ok(_) => {}
            }
            let failing = observed(&ctx, &rd, 2).await?;
            ensure!(
                failing.is_empty(),
                "the change was admitted but never reaches the immutable copy: {failing:?}"
            );
            let copy = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
                .get("frozen")
                .await?;
            let mode = copy.data.as_ref().and_then(|d| d.get("mode"));
            ensure!(
                mode.map(String::as_str) == Some("off"),
                "the distribution observed the change and reports no failure, but the copy's mode is {mode:?}"
            );
            ctx.passed_by("the change reached the copy");
            Ok(())
        },
    )
    .await
}

async fn label_change(ctx: Ctx) -> anyhow::Result<()> {
    let ns = ctx
        .step("a namespace to copy into", target(&ctx, "tiered"))
        .await?;
    let rd = ctx.unique("tiered");
    let resource = |tier: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "tiered", "labels": {"harness-tier": tier}},
               "data": {"mode": "on"}})
    };
    let tier = |c: &ConfigMap| {
        c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("harness-tier"))
            .cloned()
    };
    ctx.step("the copy carries the resource's label", async {
        create(
            &ctx,
            json!({"apiVersion": API, "kind": KIND, "metadata": {"name": rd},
                   "spec": {"resource": resource("a"), "targets": {
                       "namespaceLabelSelector": {"matchLabels": {LABEL: ctx.namespace}}}}}),
        )
        .await?;
        wait_distributed(&ctx, &rd, 1).await?;
        wait_copy::<ConfigMap>(&ctx, &ns, "tiered", "the configmap copied", has_config).await?;
        let copy = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
            .get("tiered")
            .await?;
        ensure!(
            tier(&copy).as_deref() == Some("a"),
            "the copy's label harness-tier is {:?}, want \"a\"",
            tier(&copy)
        );
        Ok(())
    })
    .await?;
    ctx.step(
        "a changed label reaches the copy once the distribution observed it",
        async {
            ctx.patch(API, KIND, &rd, json!({"spec": {"resource": resource("b")}}))
                .await
                .map_err(refusal)
                .context("change the resource's label")?;
            let failing = observed(&ctx, &rd, 2).await?;
            ensure!(failing.is_empty(), "the distribution reports failures: {failing:?}");
            // The controller writes the copies before the status that observed the change.
            let copy = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
                .get("tiered")
                .await?;
            ensure!(
                tier(&copy).as_deref() == Some("b"),
                "the copy's label harness-tier is still {:?} after the distribution observed the change to \"b\" and reports every namespace succeeded",
                tier(&copy)
            );
            Ok(())
        },
    )
    .await
}

async fn all_namespaces(ctx: Ctx) -> anyhow::Result<()> {
    // A namespace nothing names or labels for the distribution: only `allNamespaces` reaches it.
    let plain = ctx.unique("plain");
    ctx.step(
        "a namespace no target names",
        namespace(&ctx, &plain, json!({})),
    )
    .await?;
    let rd = ctx.unique("everywhere");
    ctx.step("allNamespaces copies the ConfigMap everywhere", async {
        create(
            &ctx,
            configmap_distribution(&rd, json!({"allNamespaces": true})),
        )
        .await?;
        // Copies are written before the status that observed the spec.
        observed(&ctx, &rd, 1).await?;
        for ns in [ctx.namespace.as_str(), plain.as_str()] {
            let copy = Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
                .get_opt(&rd)
                .await?;
            ensure!(
                copy.as_ref()
                    .and_then(|c| c.data.as_ref())
                    .and_then(|d| d.get("mode"))
                    == Some(&"on".to_string()),
                "no copy in namespace {ns} once the distribution observed allNamespaces: {copy:?}"
            );
        }
        Ok(())
    })
    .await?;
    ctx.step("no copy in kube-system or kube-public", async {
        for ns in ["kube-system", "kube-public"] {
            let copy = Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
                .get_opt(&rd)
                .await?;
            ensure!(
                copy.is_none(),
                "allNamespaces copied into {ns}, which its documentation leaves out"
            );
        }
        Ok(())
    })
    .await
}

async fn generation_observed(ctx: Ctx) -> anyhow::Result<()> {
    let ns = ctx
        .step("a namespace to copy into", target(&ctx, "observed"))
        .await?;
    let rd = ctx.unique("observed");
    ctx.step("the distribution copies a ConfigMap there", async {
        create(
            &ctx,
            configmap_distribution(&rd, json!({"includedNamespaces": names(&[&ns])})),
        )
        .await?;
        wait_distributed(&ctx, &rd, 1).await
    })
    .await?;
    ctx.step(
        "an empty namespace selector set (or removed) makes a generation, and it is observed",
        async {
            let api = ctx.dyn_api(API, KIND).await?;
            let before = api.get(&rd).await?;
            // Whichever way the API holds it (a release that converts through another version
            // writes the empty selector back), the update changes what is stored.
            let held = before.data["spec"]["targets"]
                .get("namespaceLabelSelector")
                .is_some();
            let selector = if held { Value::Null } else { json!({}) };
            let after = ctx
                .patch(
                    API,
                    KIND,
                    &rd,
                    json!({"spec": {"targets": {"namespaceLabelSelector": selector}}}),
                )
                .await
                .map_err(refusal)
                .context("set the empty namespace selector")?;
            let (was, now) = (
                before.metadata.generation.unwrap_or(0),
                after.metadata.generation.unwrap_or(0),
            );
            ensure!(
                now > was,
                "the update (namespaceLabelSelector {selector}) made no new generation ({was} → {now}): nothing to observe"
            );
            let failing = observed(&ctx, &rd, now).await.map_err(|e| {
                anyhow::anyhow!("generation {now} never observed, the status stays behind: {e:#}")
            })?;
            ensure!(failing.is_empty(), "the distribution reports failures: {failing:?}");
            wait_copy::<ConfigMap>(&ctx, &ns, &rd, "the copy kept", has_config).await
        },
    )
    .await
}
