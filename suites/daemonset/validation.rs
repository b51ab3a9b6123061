//! What the Advanced DaemonSet's webhook admits: a setting a native DaemonSet has no word for
//! either is refused, or the controller runs what it admitted.

use futures::FutureExt;
use serde_json::json;

use crate::scenario::workload::{AdvancedDaemonSet, AdvancedDaemonSetKind, Handle};
use crate::scenario::{Ctx, Scenario};
use crate::suites::common::*;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "daemonset/negative-burst-replicas-is-refused-or-run",
            "an Advanced DaemonSet with burstReplicas -1 (a count of pods to create at once) is refused, or admitted and runs a ready pod on every node",
            &["advanced-daemonset", "webhook", "burst-replicas"],
            |ctx| negative_burst(ctx).boxed(),
        )
        // Releases whose manager exits on a panic restart it on every sync of such a set.
        .alone(),
    ]
}

const NAME: &str = "burst";

async fn negative_burst(ctx: Ctx) -> anyhow::Result<()> {
    let nodes = ctx.facts.zones.values().map(Vec::len).sum::<usize>() as i64;
    let created = ctx
        .step("burstReplicas -1 is refused, or admitted", async {
            let mut m = AdvancedDaemonSet::new(NAME).manifest();
            m["spec"]["burstReplicas"] = json!(-1);
            refused_or_admitted(&ctx, ctx.create(m).await)
        })
        .await?;
    if created.is_none() {
        return Ok(());
    }
    ctx.step(
        &format!("admitted, it runs a pod on every node ({nodes}) with burstReplicas -1"),
        async {
            Handle::<AdvancedDaemonSetKind>::of(&ctx, NAME)
                .wait_rolled_out(nodes, ctx.timeouts.converge, &[])
                .await?;
            Ok(())
        },
    )
    .await
}
