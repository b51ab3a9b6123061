//! CloneSet: recreating pods and PVCs when the image and volumeClaimTemplates change together
//! (S2 and its template-only and InPlaceOnly steps).

use std::collections::BTreeMap;

use anyhow::ensure;
use futures::FutureExt;
use serde_json::json;

use crate::scenario::workload::{CloneSet, CloneSetKind, Handle, REAL_IMAGE_V2, same_image};
use crate::scenario::{Ctx, Requirements, Scenario};
use crate::suites::common::*;

const GATE: &str = "RecreatePodWhenChangeVCTInCloneSetGate";

fn requires() -> Requirements {
    Requirements {
        controller_gates: BTreeMap::from([(GATE.to_string(), true)]),
        ..Default::default()
    }
}

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "cloneset/recreate-pods-and-pvcs-on-image-and-template-change",
            "image + volumeClaimTemplate size change together recreates every pod and its PVCs at the new size (S2)",
            &["seed", "s2", "pvc"],
            |ctx| s2_together_on(ctx, false).boxed(),
        )
        .requiring(requires()),
        Scenario::new(
            "cloneset/recreate-pods-and-pvcs-on-image-and-template-change-on-a-real-node",
            "S2 with the pods on a real node: a real kubelet mounts the claims and runs the images",
            &["s2", "pvc", "real-node", "fidelity"],
            |ctx| s2_together_on(ctx, true).boxed(),
        )
        .requiring(requires())
        .on_real_nodes(1),
        Scenario::new(
            "cloneset/template-only-change-touches-no-pod",
            "a volumeClaimTemplate-only change leaves every pod alone (S2 step 2)",
            &["s2", "pvc"],
            |ctx| s2_template_only(ctx).boxed(),
        )
        .requiring(requires()),
        Scenario::new(
            "cloneset/in-place-only-keeps-pods-and-pvcs",
            "with InPlaceOnly an image change updates in place and PVCs stay (S2 step 3)",
            &["s2", "pvc", "in-place"],
            |ctx| s2_in_place_only(ctx).boxed(),
        )
        .requiring(requires()),
    ]
}

const NAME: &str = "vct";
const SELECTOR: &str = "app=vct";

async fn start(
    ctx: &Ctx,
    strategy: &str,
) -> anyhow::Result<(Handle<CloneSetKind>, BTreeMap<String, String>)> {
    start_on(ctx, strategy, false).await
}

/// The CloneSet of 2 pods with a 1Gi claim each, on the kwok nodes or on a real node.
async fn start_on(
    ctx: &Ctx,
    strategy: &str,
    real: bool,
) -> anyhow::Result<(Handle<CloneSetKind>, BTreeMap<String, String>)> {
    let mut spec = CloneSet::new(NAME)
        .replicas(2)
        .strategy(strategy)
        .data_volume("1Gi");
    if real {
        spec = spec.on_real_nodes();
    }
    let cs = spec.create(ctx).await?;
    cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
    Ok((cs, pod_uids(ctx, SELECTOR).await?))
}

fn storage(c: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> String {
    c.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

/// One update of the volumeClaimTemplate size and, optionally, the image.
async fn update(cs: &Handle<CloneSetKind>, image: Option<&str>, size: &str) -> anyhow::Result<()> {
    let mut ops = vec![json!({
        "op": "replace",
        "path": "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
        "value": size
    })];
    if let Some(image) = image {
        ops.push(json!({"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}));
    }
    cs.json_patch(json!(ops)).await
}

async fn s2_together_on(ctx: Ctx, real: bool) -> anyhow::Result<()> {
    let (cs, before) = ctx
        .step(
            "two pods run, each with its claim",
            start_on(&ctx, "InPlaceIfPossible", real),
        )
        .await?;
    let old_claims: Vec<String> = claims(&ctx, SELECTOR)
        .await?
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let v2 = if real { REAL_IMAGE_V2 } else { IMAGE_V2 };
    ctx.step("the image and the claim size change in one update", async {
        update(&cs, Some(v2), "2Gi").await?;
        cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        Ok(())
    })
    .await?;
    ctx.step("every pod and claim is made again at the new size", async {
        let after = pod_uids(&ctx, SELECTOR).await?;
        let kept: Vec<&String> = after
            .values()
            .filter(|u| before.values().any(|b| b == *u))
            .collect();
        ensure!(
            kept.is_empty(),
            "pods were updated in place: {} of {} kept their UID across an image + volumeClaimTemplates change",
            kept.len(),
            after.len()
        );
        // Every current claim asks for the new size; the old claims are gone.
        let current = claims(&ctx, SELECTOR).await?;
        for c in &current {
            ensure!(
                storage(c) == "2Gi",
                "PVC {} still requests {} after the template asked for 2Gi",
                c.metadata.name.clone().unwrap_or_default(),
                storage(c)
            );
        }
        let lingering: Vec<&String> = old_claims
            .iter()
            .filter(|n| current.iter().any(|c| c.metadata.name.as_ref() == Some(n)))
            .collect();
        ensure!(
            lingering.is_empty(),
            "old PVCs were not recreated: {lingering:?}"
        );
        ensure!(
            current.len() == after.len(),
            "{} PVCs for {} pods with one volumeClaimTemplate",
            current.len(),
            after.len()
        );
        Ok(())
    })
    .await
}

async fn s2_template_only(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, before) = ctx
        .step("two pods run, each with its claim", async {
            let (cs, before) = start(&ctx, "InPlaceIfPossible").await?;
            Ok((cs, before))
        })
        .await?;
    ctx.step("only the claim size of the template changes", async {
        update(&cs, None, "2Gi").await?;
        cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        Ok(())
    })
    .await?;
    ctx.step("the revision does not move", async {
        // The revision did not move: no pod has anything to update to.
        let typed: kube::Api<crate::kruise::cloneset::CloneSet> = ctx.api();
        let status = typed
            .get(NAME)
            .await?
            .status
            .ok_or_else(|| anyhow::anyhow!("CloneSet {NAME} has no status"))?;
        ensure!(
            status.updated_replicas == 2 && status.current_revision == status.update_revision,
            "a template-only change started a rollout: {status:?}"
        );
        Ok(())
    })
    .await?;
    ctx.step("no pod is touched or restarted", async {
        let after = pod_uids(&ctx, SELECTOR).await?;
        ensure!(
            before == after,
            "pods were touched by a template-only change: before {before:?}, after {after:?}"
        );
        for p in pods(&ctx, SELECTOR).await? {
            let restarts = container_status(&p, "main")
                .map(|s| s.restart_count)
                .unwrap_or(-1);
            ensure!(
                restarts == 0,
                "pod {:?} restarted {restarts} times",
                p.metadata.name
            );
        }
        Ok(())
    })
    .await
}

async fn s2_in_place_only(ctx: Ctx) -> anyhow::Result<()> {
    let (cs, before, claims_before) = ctx
        .step("two pods run, each with its claim", async {
            let (cs, before) = start(&ctx, "InPlaceOnly").await?;
            let claims_before: Vec<String> = claims(&ctx, SELECTOR)
                .await?
                .into_iter()
                .filter_map(|c| c.metadata.uid)
                .collect();
            Ok((cs, before, claims_before))
        })
        .await?;
    ctx.step("an image change rolls out under InPlaceOnly", async {
        cs.set_image(IMAGE_V2).await?;
        cs.wait_rolled_out(2, ctx.timeouts.converge, &[]).await?;
        Ok(())
    })
    .await?;
    ctx.step("every pod restarted in place on the new image", async {
        ensure!(
            before == pod_uids(&ctx, SELECTOR).await?,
            "pods were recreated under InPlaceOnly"
        );
        for p in pods(&ctx, SELECTOR).await? {
            let s = container_status(&p, "main");
            ensure!(
                s.as_ref()
                    .is_some_and(|s| same_image(&s.image, IMAGE_V2) && s.restart_count >= 1),
                "pod {:?} was not restarted in place with {IMAGE_V2}: {s:?}",
                p.metadata.name
            );
        }
        Ok(())
    })
    .await?;
    ctx.step("the claims stay", async {
        let mut claims_after: Vec<String> = claims(&ctx, SELECTOR)
            .await?
            .into_iter()
            .filter_map(|c| c.metadata.uid)
            .collect();
        let mut cb = claims_before;
        cb.sort();
        claims_after.sort();
        ensure!(cb == claims_after, "PVCs changed under an in-place update");
        Ok(())
    })
    .await
}
