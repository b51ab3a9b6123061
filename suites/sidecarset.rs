//! SidecarSet: in-place update of pods with an injected sidecar under
//! InPlacePodVerticalScaling (S3).

use std::collections::BTreeMap;

use anyhow::ensure;
use futures::FutureExt;
use serde_json::json;

use super::common::*;
use crate::scenario::workload::CloneSet;
use crate::scenario::{Ctx, Requirements, Scenario};

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "sidecarset/in-place-update-with-injected-sidecar",
        suite: "sidecarset",
        summary: "with InPlacePodVerticalScaling on, an image change updates pods with an injected sidecar in place (S3)",
        labels: &["seed", "s3", "in-place"],
        requires: Requirements {
            apiserver_gates: BTreeMap::from([("InPlacePodVerticalScaling".to_string(), true)]),
            ..Default::default()
        },
        allowed_warnings: &[],
        expected_violations: &[],
        body: |ctx| s3(ctx).boxed(),
    }]
}

async fn s3(ctx: Ctx) -> anyhow::Result<()> {
    let sidecarset = ctx.unique("logger");
    create_observed(
        &ctx,
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "SidecarSet",
            "metadata": {"name": sidecarset},
            "spec": {
                "selector": {"matchLabels": {"harness-sidecar": ctx.namespace}},
                "containers": [{"name": "logger", "image": "busybox:1.36", "command": ["sleep", "3600"]}]
            }
        }),
    )
    .await?;
    let app = CloneSet::new("app")
        .replicas(2)
        .in_place_if_possible()
        .label("harness-sidecar", &ctx.namespace)
        .resources(json!({
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"}
        }))
        .create(&ctx)
        .await?;
    app.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
    let before = pod_uids(&ctx, "app=app").await?;
    for p in pods(&ctx, "app=app").await? {
        let names: Vec<String> = p
            .spec
            .as_ref()
            .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        ensure!(
            names.contains(&"logger".to_string()),
            "sidecar not injected into {:?}: {names:?}",
            p.metadata.name
        );
    }
    app.set_image(IMAGE_V2).await?;
    app.wait_rolled_out(2, ctx.timeouts.converge, &["FailedUpdatePodInPlace"])
        .await?;
    ensure!(
        before == pod_uids(&ctx, "app=app").await?,
        "pods were recreated instead of updated in place"
    );
    for p in pods(&ctx, "app=app").await? {
        let s = container_status(&p, "main");
        ensure!(
            s.as_ref()
                .is_some_and(|s| s.image == IMAGE_V2 && s.restart_count >= 1),
            "container main of {:?} was not restarted with {IMAGE_V2}: {s:?}",
            p.metadata.name
        );
    }
    Ok(())
}
