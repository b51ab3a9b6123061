//! Selector immutability: the Advanced DaemonSet (S5) and, beside it, CloneSet and a native
//! Deployment as a control.

use anyhow::{bail, ensure};
use futures::FutureExt;
use serde_json::json;

use crate::scenario::wait::{Check, until};
use crate::scenario::workload::{AdvancedDaemonSet, CloneSet, Deployment, Kind, Spec};
use crate::scenario::{Ctx, Scenario, status};
use crate::suites::common::*;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "daemonset/advanced-daemonset-selector-is-immutable",
            "updating an Advanced DaemonSet's selector is refused; pods keep their owner (S5)",
            &["seed", "s5", "webhook", "selector"],
            |ctx| selector_immutable_on(ctx, Workload::AdvancedDaemonSet).boxed(),
        ),
        Scenario::new(
            "daemonset/cloneset-selector-is-immutable",
            "updating a CloneSet's selector is refused",
            &["selector", "webhook"],
            |ctx| selector_immutable_on(ctx, Workload::CloneSet).boxed(),
        ),
        Scenario::new(
            "daemonset/native-deployment-selector-is-immutable",
            "control: the apiserver refuses a Deployment selector update",
            &["selector", "control"],
            |ctx| selector_immutable_on(ctx, Workload::Deployment).boxed(),
        ),
    ]
}

async fn selector_immutable_on(ctx: Ctx, w: Workload) -> anyhow::Result<()> {
    let nodes = ctx.facts.zones.values().map(Vec::len).sum::<usize>() as i64;
    match w {
        Workload::AdvancedDaemonSet => {
            selector_immutable(ctx, AdvancedDaemonSet::new(NAME), nodes).await
        }
        Workload::CloneSet => selector_immutable(ctx, CloneSet::new(NAME).recreate(), 2).await,
        Workload::Deployment => selector_immutable(ctx, Deployment::new(NAME), 2).await,
    }
}

#[derive(Debug, Clone, Copy)]
enum Workload {
    AdvancedDaemonSet,
    CloneSet,
    Deployment,
}

const NAME: &str = "sel";

async fn selector_immutable<K: Kind>(ctx: Ctx, w: Spec<K>, want: i64) -> anyhow::Result<()> {
    let name = NAME;
    let kind = K::api_resource().kind;
    let w = ctx
        .step("a pod on every node it selects", async {
            let w = w.replicas(2).label("tier", "node").create(&ctx).await?;
            w.wait_rolled_out(want, ctx.timeouts.converge, &[]).await?;
            Ok(w)
        })
        .await?;
    let api = w.api();
    let before = pod_uids(&ctx, &format!("app={name}")).await?;

    ctx.step("the selector update is refused", async {
        // A new selector that still matches the (updated) template, and no longer the old pods.
        let update = w
            .patch(json!({"spec": {
                "selector": {"matchLabels": {"app": name, "release": "v2"}},
                "template": {"metadata": {"labels": {"release": "v2"}}}
            }}))
            .await;
        match update {
            Err(kube::Error::Api(e)) if e.code == 422 || e.code == 403 || e.code == 400 => {
                ensure!(
                    e.message.contains("Forbidden") || e.message.contains("immutable"),
                    "the selector update was refused for another reason: {}",
                    e.message
                );
                // The live selector is still the one it was made with.
                let ar = K::api_resource();
                let expected = format!(
                    "apiVersion: {}\nkind: {}\nmetadata: {{name: {name}}}\n\
                     spec: {{selector: {{matchLabels: {{app: {name}, release: null}}}}}}\n",
                    ar.api_version, ar.kind
                );
                ctx.wait_subset(&expected, ctx.timeouts.converge).await
            }
            Err(e) => Err(refusal(e)),
            Ok(o) => {
                // Give the controller the chance to act on it, so what it does is seen.
                let generation = o.metadata.generation;
                until(
                    &api,
                    name,
                    "controller observes the accepted update",
                    ctx.timeouts.converge,
                    move |o| {
                        async move {
                            let Some(o) = o else {
                                return Check::Pending("absent".into());
                            };
                            Check::when(
                                status(&o)["observedGeneration"].as_i64() == generation,
                                || {
                                    format!(
                                        "observedGeneration {}",
                                        status(&o)["observedGeneration"]
                                    )
                                },
                            )
                        }
                        .boxed()
                    },
                )
                .await?;
                bail!("the {kind} selector update was accepted; it must be refused as immutable");
            }
        }
    })
    .await?;

    ctx.step("its pods stay, owned by it", async {
        let after = pod_uids(&ctx, &format!("app={name}")).await?;
        ensure!(
            before == after,
            "pods changed after a refused selector update: {before:?} -> {after:?}"
        );
        for p in pods(&ctx, &format!("app={name}")).await? {
            ensure!(
                p.metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|r| r.iter().any(|r| r.controller == Some(true))),
                "pod {:?} lost its controller owner reference",
                p.metadata.name
            );
        }
        Ok(())
    })
    .await
}
