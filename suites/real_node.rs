//! Behaviour that only real nodes show: a kubelet that really restarts containers and a
//! container runtime that really pulls images. Each scenario asks for a real node
//! ([`Scenario::on_real_nodes`]); its pods select and tolerate it.

use anyhow::ensure;
use futures::FutureExt;

use super::common::*;
use crate::scenario::workload::{CloneSet, REAL_IMAGE_V1, REAL_IMAGE_V2};
use crate::scenario::{Ctx, Scenario};

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "cloneset/in-place-image-update-restarts-the-container-on-a-real-node",
            "an in-place image update on a real node keeps the pod and restarts only its container, which then runs the new image",
            &["real-node", "in-place"],
            |ctx| in_place_restart(ctx).boxed(),
        )
        .on_real_nodes(1),
    ]
}

const NAME: &str = "real";

/// What the kubelet reports of container `main`: image, image ID, container ID, restarts.
fn main_container(p: &k8s_openapi::api::core::v1::Pod) -> (String, String, String, i32) {
    container_status(p, "main")
        .map(|c| {
            (
                c.image,
                c.image_id,
                c.container_id.unwrap_or_default(),
                c.restart_count,
            )
        })
        .unwrap_or_default()
}

async fn in_place_restart(ctx: Ctx) -> anyhow::Result<()> {
    let cs = CloneSet::new(NAME)
        .on_real_nodes()
        .in_place_if_possible()
        .create(&ctx)
        .await?;
    cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
    let before = pods(&ctx, &cs.selector()).await?;
    ensure!(before.len() == 1, "{} pods, want 1", before.len());
    let node = before[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    ensure!(
        ctx.facts.real_nodes.contains(&node),
        "the pod runs on {node}, not on a real node {:?}",
        ctx.facts.real_nodes
    );
    let (image, image_id, container, restarts) = main_container(&before[0]);
    ensure!(
        image == REAL_IMAGE_V1 && image_id.starts_with("harness.local/busybox@sha256:"),
        "the kubelet reports image {image} ({image_id}), want {REAL_IMAGE_V1} pulled from the registry"
    );
    cs.set_image(REAL_IMAGE_V2).await?;
    cs.wait_rolled_out(1, ctx.timeouts.converge, &[]).await?;
    let after = pods(&ctx, &cs.selector()).await?;
    ensure!(after.len() == 1, "{} pods, want 1", after.len());
    ensure!(
        after[0].metadata.uid == before[0].metadata.uid,
        "the pod was recreated, not updated in place"
    );
    let (image2, image_id2, container2, restarts2) = main_container(&after[0]);
    ensure!(
        image2 == REAL_IMAGE_V2,
        "the kubelet reports image {image2}, want {REAL_IMAGE_V2}"
    );
    ensure!(
        image_id2 != image_id && image_id2.starts_with("harness.local/busybox@sha256:"),
        "the image ID did not change: {image_id} -> {image_id2}"
    );
    ensure!(
        container2 != container,
        "the container was not replaced: {container}"
    );
    ensure!(
        restarts2 == restarts + 1,
        "restartCount {restarts} -> {restarts2}, want one restart"
    );
    Ok(())
}
