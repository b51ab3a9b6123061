//! SidecarSet: in-place update of pods with an injected sidecar under
//! InPlacePodVerticalScaling (S3).

use std::collections::BTreeMap;

use anyhow::ensure;
use futures::FutureExt;
use serde_json::json;

use crate::scenario::workload::{CloneSet, REAL_IMAGE_V1, REAL_IMAGE_V2, same_image};
use crate::scenario::{Ctx, Requirements, Scenario};
use crate::suites::common::*;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "sidecarset/in-place-update-with-injected-sidecar",
            "with InPlacePodVerticalScaling on, an image change updates pods with an injected sidecar in place (S3)",
            &["seed", "s3", "in-place"],
            |ctx| s3_on(ctx, false).boxed(),
        )
        .requiring(Requirements {
            apiserver_gates: BTreeMap::from([("InPlacePodVerticalScaling".to_string(), true)]),
            ..Default::default()
        }),
        Scenario::new(
            "sidecarset/in-place-update-with-injected-sidecar-on-a-real-node",
            "S3 with the pods on a real node: a real kubelet restarts the container in place",
            &["s3", "in-place", "real-node", "fidelity"],
            |ctx| s3_on(ctx, true).boxed(),
        )
        .requiring(Requirements {
            apiserver_gates: BTreeMap::from([("InPlacePodVerticalScaling".to_string(), true)]),
            ..Default::default()
        })
        .on_real_nodes(1),
    ]
}

async fn s3_on(ctx: Ctx, real: bool) -> anyhow::Result<()> {
    let (sidecar_image, v2) = if real {
        (REAL_IMAGE_V1, REAL_IMAGE_V2)
    } else {
        ("busybox:1.36", IMAGE_V2)
    };
    let sidecarset = ctx.unique("logger");
    let app = ctx
        .step("a SidecarSet injects its container into the app's pods", async {
            create_observed(
                &ctx,
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1",
                    "kind": "SidecarSet",
                    "metadata": {"name": sidecarset},
                    "spec": {
                        "selector": {"matchLabels": {"harness-sidecar": ctx.namespace}},
                        "containers": [{"name": "logger", "image": sidecar_image, "command": ["sleep", "3600"]}]
                    }
                }),
            )
            .await?;
            let mut app = CloneSet::new("app");
            if real {
                app = app.on_real_nodes();
            }
            let app = app
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
            Ok(app)
        })
        .await?;
    let before = pod_uids(&ctx, "app=app").await?;
    ctx.step(
        "an image change updates the app's container in place",
        async {
            app.set_image(v2).await?;
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
                        .is_some_and(|s| same_image(&s.image, v2) && s.restart_count >= 1),
                    "container main of {:?} was not restarted with {v2}: {s:?}",
                    p.metadata.name
                );
            }
            Ok(())
        },
    )
    .await
}
