//! The worked example of the book's page "Writing a scenario" (`docs/writing-a-scenario.md`
//! shows this file; `harness/tests/scenario_guide.rs` compiles it and runs it on a local
//! cluster with OpenKruise, so the page cannot drift from the API).
//!
//! A CloneSet's `updateStrategy.partition` is the number of pods kept at the old revision
//! during an update. The scenario sets it and asserts its effect where it shows: on the pods.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::ensure;
use harness::scenario::{Ctx, Scenario};
use harness::wait::{Check, poll};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use serde_json::json;

const API: &str = "apps.kruise.io/v1alpha1";
const NAME: &str = "web";
const OLD: &str = "busybox:1.36";
const NEW: &str = "busybox:1.37";

/// The scenario: its name (`suite/behaviour`), one line saying what it shows, its labels
/// (what `--labels` selects), and its body, a sequence of named steps.
pub fn partition_keeps_old_pods() -> Scenario {
    Scenario::new(
        "guide/a-partition-keeps-old-pods",
        "a CloneSet's partition of 1 keeps one of two pods at the old image until it is lowered to 0",
        &["guide", "cloneset", "partition"],
        |ctx: Ctx| async move {
            ctx.step("two pods run the old image", async {
                ctx.create(cloneset()).await?;
                images_become(&ctx, &[(OLD, 2)]).await
            })
            .await?;
            ctx.step("a new image with a partition of 1 updates one pod", async {
                let change = json!({"spec": {
                    "updateStrategy": {"partition": 1},
                    "template": {"spec": {"containers": [{"name": "main", "image": NEW}]}},
                }});
                ctx.patch(API, "CloneSet", NAME, change).await?;
                // The controller says it is done with this generation (its status is computed
                // from what it has seen, so the pods it counts ready are ready)...
                let done = json!({
                    "apiVersion": API, "kind": "CloneSet", "metadata": {"name": NAME},
                    "status": {"observedGeneration": 2, "replicas": 2, "readyReplicas": 2,
                               "updatedReplicas": 1, "updatedReadyReplicas": 1},
                });
                ctx.wait_subset(&done.to_string(), ctx.timeouts.converge)
                    .await?;
                // ...and the pods, not its status, are what is judged.
                let now = images(&ctx).await?;
                ensure!(
                    now == BTreeMap::from([(OLD.to_string(), 1), (NEW.to_string(), 1)]),
                    "with a partition of 1 the pods run {now:?}"
                );
                Ok(())
            })
            .await?;
            ctx.step("a partition of 0 updates the other", async {
                let change = json!({"spec": {"updateStrategy": {"partition": 0}}});
                ctx.patch(API, "CloneSet", NAME, change).await?;
                images_become(&ctx, &[(NEW, 2)]).await
            })
            .await
        },
    )
}

/// The CloneSet: two pods of the old image, the default update strategy.
fn cloneset() -> serde_json::Value {
    json!({
        "apiVersion": API,
        "kind": "CloneSet",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "main", "image": OLD}]},
            },
        },
    })
}

/// How many of the CloneSet's running, ready pods (not being deleted) run each image.
async fn images(ctx: &Ctx) -> anyhow::Result<BTreeMap<String, usize>> {
    let pods = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await?;
    let mut by_image = BTreeMap::new();
    for p in pods.items {
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if p.metadata.deletion_timestamp.is_some() || !ready {
            continue;
        }
        let spec = p.spec.unwrap_or_default();
        for c in spec.containers {
            *by_image.entry(c.image.unwrap_or_default()).or_default() += 1;
        }
    }
    Ok(by_image)
}

/// Waits until the pods run exactly `want` (image, how many), with the timeout in sight; on
/// timeout the error says what the pods ran when last seen.
async fn images_become(ctx: &Ctx, want: &[(&str, usize)]) -> anyhow::Result<()> {
    let want: BTreeMap<String, usize> = want.iter().map(|(i, n)| (i.to_string(), *n)).collect();
    let what = format!("the pods to run {want:?}");
    poll(
        &what,
        ctx.timeouts.converge,
        Duration::from_millis(250),
        || {
            let want = want.clone();
            async move {
                match images(ctx).await {
                    Ok(got) if got == want => Check::Met,
                    Ok(got) => Check::Pending(format!("they run {got:?}")),
                    Err(e) => Check::Pending(format!("{e:#}")),
                }
            }
        },
    )
    .await?;
    Ok(())
}
