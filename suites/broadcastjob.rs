//! BroadcastJob (`apps.kruise.io/v1alpha1`): one pod per eligible node, parallelism, completion
//! policy (Always with activeDeadlineSeconds and ttlSecondsAfterFinished, Never), failure policy
//! (FailFast, Continue, Pause, restartLimit), paused, status counters and conditions. Start with
//! [`scenarios`]; manifests come from [`job`].
//!
//! A pod with restartPolicy Never or OnFailure finishes as soon as it runs, its containers
//! exiting 0. The pod annotation [`EXIT_CODE`] makes them exit with another code: with Never the
//! pod Failed, with OnFailure the kubelet restarts the containers again and again (restartCount
//! one higher each time, the pod stays Running) — a crash loop. kwok nodes read the annotation; on real
//! ones the container's command does ([`exiting_main`]).

use std::collections::BTreeSet;

use anyhow::ensure;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use super::common::*;
use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, Scenario, status};

/// The pod annotation the local cluster's kubelet reads as the exit code of every container.
pub const EXIT_CODE: &str = "harness.kwok/exit-code";
const API: &str = "apps.kruise.io/v1alpha1";
const NAME: &str = "bcast";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "broadcastjob/runs-one-pod-per-node-and-completes",
            "one pod per node, each succeeds; status desired/succeeded/active, phase completed, Complete condition, completionTime",
            &["smoke", "broadcastjob", "completion", "status"],
            |ctx| one_per_node(ctx).boxed(),
        ),
        Scenario::new(
            "broadcastjob/node-selector-and-affinity-restrict-the-nodes",
            "the template's nodeSelector and node affinity limit the job to the matching nodes",
            &["broadcastjob", "node-selection"],
            |ctx| node_selection(ctx).boxed(),
        ),
        Scenario::new(
            "broadcastjob/parallelism-caps-the-active-pods",
            "parallelism 2 runs two pods at a time over four nodes; raising it runs the rest",
            &["broadcastjob", "parallelism"],
            |ctx| parallelism(ctx).boxed(),
        ),
        Scenario::new(
            "broadcastjob/completion-policy-never-keeps-the-job-running",
            "completionPolicy Never: every pod succeeds, yet the job stays running without a Complete condition",
            &["broadcastjob", "completion"],
            |ctx| completion_never(ctx).boxed(),
        ),
        Scenario::new(
            "broadcastjob/active-deadline-fails-the-job-and-deletes-its-pods",
            "activeDeadlineSeconds: a job still running past it fails with DeadlineExceeded and its active pods are deleted",
            &["broadcastjob", "completion", "deadline"],
            |ctx| active_deadline(ctx).boxed(),
        )
        .allowing(&["DeadlineExceeded"]),
        Scenario::new(
            "broadcastjob/ttl-after-finished-deletes-the-job",
            "ttlSecondsAfterFinished: a completed job is deleted that long after it finished",
            &["broadcastjob", "completion", "ttl"],
            |ctx| ttl(ctx).boxed(),
        ),
        Scenario::new(
            "broadcastjob/failure-policy-fail-fast-fails-the-job",
            "failurePolicy FailFast (the default): a failed pod fails the job (phase failed, Failed condition)",
            &["broadcastjob", "failure-policy"],
            |ctx| fail_fast(ctx).boxed(),
        )
        .allowing(&["failed pod is found"]),
        Scenario::new(
            "broadcastjob/failure-policy-continue-completes-with-failed-pods",
            "failurePolicy Continue: failed pods are counted and the job still completes",
            &["broadcastjob", "failure-policy"],
            |ctx| continue_on_failure(ctx).boxed(),
        ),
        Scenario::new(
            "broadcastjob/failure-policy-pause-pauses-the-job",
            "failurePolicy Pause: a failed pod pauses the job (phase paused, no further pod, not failed)",
            &["broadcastjob", "failure-policy", "paused"],
            |ctx| pause_on_failure(ctx).boxed(),
        )
        .allowing(&["Paused"]),
        Scenario::new(
            "broadcastjob/restart-limit-fails-a-crash-looping-pod",
            "failurePolicy.restartLimit: an OnFailure pod restarted more often than the limit counts as failed and fails the job",
            &["broadcastjob", "failure-policy", "restart-limit"],
            |ctx| restart_limit(ctx).boxed(),
        )
        .allowing(&["failed pod is found"]),
        Scenario::new(
            "broadcastjob/paused-creates-no-pods-until-resumed",
            "paused: the job reports phase paused and creates no pod; resuming runs it to completion",
            &["broadcastjob", "paused"],
            |ctx| paused(ctx).boxed(),
        ),
    ]
}

/// Merges `from` into `into`: objects key by key, other values replace.
pub(super) fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Container `main` of a job's pod, as the local cluster's kubelet plays it on every provider:
/// [`IMAGE_V1`], exiting at once with the code of the pod's [`EXIT_CODE`] annotation (0
/// without one). kwok reads the annotation; a real kubelet runs the command, which reads it
/// through the downward API.
pub(super) fn exiting_main() -> Value {
    json!({
        "name": "main",
        "image": IMAGE_V1,
        "command": ["sh", "-c", "exit ${EXIT_CODE:-0}"],
        "env": [{"name": "EXIT_CODE", "valueFrom": {"fieldRef": {
            "fieldPath": format!("metadata.annotations['{EXIT_CODE}']")
        }}}]
    })
}

/// A BroadcastJob spec whose pods (labelled `app=<app>`, restartPolicy Never) run
/// [`exiting_main`], with `extra` merged over it.
pub(super) fn job_spec(app: &str, extra: Value) -> Value {
    let mut spec = json!({
        "template": {
            "metadata": {"labels": {"app": app}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [exiting_main()]
            }
        }
    });
    merge(&mut spec, extra);
    spec
}

/// A BroadcastJob `name` with [`job_spec`].
fn job(name: &str, extra: Value) -> Value {
    json!({
        "apiVersion": API,
        "kind": "BroadcastJob",
        "metadata": {"name": name},
        "spec": job_spec(name, extra)
    })
}

/// Template additions for pods whose containers keep failing under restartPolicy OnFailure.
fn crash_looping() -> Value {
    json!({"template": {"metadata": {"annotations": {EXIT_CODE: "1"}},
        "spec": {"restartPolicy": "OnFailure"}}})
}

/// Waits until `check` holds for the job `name` (the job's status and its live pods).
async fn wait_job<F>(ctx: &Ctx, name: &str, what: &str, check: F) -> anyhow::Result<DynamicObject>
where
    F: Fn(&DynamicObject, &[Pod]) -> Check + Send + Sync + Clone + 'static,
{
    let api = ctx.dyn_api(API, "BroadcastJob").await?;
    let c = ctx.clone();
    let selector = format!("app={name}");
    let o = until(&api, name, what, ctx.timeouts.converge, move |o| {
        let (c, selector, check) = (c.clone(), selector.clone(), check.clone());
        async move {
            let Some(o) = o else {
                return Check::Pending("the BroadcastJob does not exist".into());
            };
            match pods(&c, &selector).await {
                Ok(p) => check(&o, &p),
                Err(e) => Check::Failed(format!("list pods: {e}")),
            }
        }
        .boxed()
    })
    .await?;
    o.ok_or_else(|| anyhow::anyhow!("BroadcastJob {name} vanished"))
}

/// `status.<field>` as a number (0 when absent).
fn count(o: &DynamicObject, field: &str) -> i64 {
    status(o)[field].as_i64().unwrap_or(0)
}

fn phase(o: &DynamicObject) -> &str {
    status(o)["phase"].as_str().unwrap_or_default()
}

/// The status of condition `ty`, if reported, and its reason.
fn condition(o: &DynamicObject, ty: &str) -> Option<(String, String)> {
    status(o)["conditions"].as_array()?.iter().find_map(|c| {
        (c["type"] == ty).then(|| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
    })
}

/// Waits until the job reports `phase`.
async fn wait_phase(ctx: &Ctx, name: &str, want: &'static str) -> anyhow::Result<DynamicObject> {
    let what = format!("BroadcastJob {name} phase {want}");
    wait_job(ctx, name, &what, move |o, _| {
        Check::when(phase(o) == want, || format!("status {}", status(o)))
    })
    .await
}

/// Names of the nodes matching `selector` (all nodes for "") that a job's pods, which
/// tolerate no taint, can run on: none tainted NoSchedule or NoExecute (kind's control plane,
/// the harness's real nodes).
async fn node_names(ctx: &Ctx, selector: &str) -> anyhow::Result<BTreeSet<String>> {
    let nodes: kube::Api<Node> = kube::Api::all(ctx.client.clone());
    Ok(nodes
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|n| {
            !n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.effect != "PreferNoSchedule"))
        })
        .filter_map(|n| n.metadata.name)
        .collect())
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

fn pod_phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

async fn one_per_node(ctx: Ctx) -> anyhow::Result<()> {
    let (nodes, n, o) = ctx
        .step("the job runs to completion over every node", async {
            let nodes = node_names(&ctx, "").await?;
            let n = nodes.len() as i64;
            create(&ctx, job(NAME, json!({}))).await?;
            let o = wait_phase(&ctx, NAME, "completed").await?;
            Ok((nodes, n, o))
        })
        .await?;
    ctx.step(
        "status counts every node, with Complete and its times",
        async {
            ensure!(
                count(&o, "desired") == n
                    && count(&o, "succeeded") == n
                    && count(&o, "active") == 0,
                "want desired {n}, succeeded {n}, active 0 over {n} nodes; status {}",
                status(&o)
            );
            ensure!(
                condition(&o, "Complete").is_some_and(|c| c.0 == "True")
                    && !status(&o)["completionTime"].is_null()
                    && !status(&o)["startTime"].is_null(),
                "a completed job lacks Complete=True, startTime or completionTime: {}",
                status(&o)
            );
            Ok(())
        },
    )
    .await?;
    ctx.step("one Succeeded pod ran on each node", async {
        let pods = pods(&ctx, &format!("app={NAME}")).await?;
        let on: Vec<String> = pods.iter().map(node_of).collect();
        let distinct: BTreeSet<String> = on.iter().cloned().collect();
        ensure!(
            on.len() == nodes.len() && distinct == nodes,
            "want one pod on each of {nodes:?}, pods are on {on:?}"
        );
        ensure!(
            pods.iter().all(|p| pod_phase(p) == "Succeeded"),
            "pods of a completed job are not all Succeeded: {:?}",
            pods.iter().map(pod_phase).collect::<Vec<_>>()
        );
        Ok(())
    })
    .await
}

async fn node_selection(ctx: Ctx) -> anyhow::Result<()> {
    let cases = [
        (
            "by-selector",
            json!({"template": {"spec": {"nodeSelector": {"node-type": "stable"}}}}),
            "node-type=stable",
        ),
        (
            "by-affinity",
            json!({"template": {"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                on_nodes("topology.kubernetes.io/zone", "zone-b")
            ]}}}}}}),
            "topology.kubernetes.io/zone=zone-b",
        ),
    ];
    ctx.step(
        "a job restricted by nodeSelector and one by node affinity",
        async {
            for (name, extra, _) in &cases {
                create(&ctx, job(name, extra.clone())).await?;
            }
            Ok(())
        },
    )
    .await?;
    for (name, _, selector) in cases {
        ctx.step(
            &format!("job {name} completes with one pod on each node of {selector}"),
            async {
                let want = node_names(&ctx, selector).await?;
                let o = wait_phase(&ctx, name, "completed").await?;
                ensure!(
                    count(&o, "desired") == want.len() as i64,
                    "job {name}: desired {}, want {} (nodes {selector})",
                    count(&o, "desired"),
                    want.len()
                );
                let on: Vec<String> = pods(&ctx, &format!("app={name}"))
                    .await?
                    .iter()
                    .map(node_of)
                    .collect();
                ensure!(
                    on.len() == want.len() && on.iter().cloned().collect::<BTreeSet<_>>() == want,
                    "job {name}: pods on {on:?}, want one on each of {want:?} ({selector})"
                );
                Ok(())
            },
        )
        .await?;
    }
    Ok(())
}

async fn parallelism(ctx: Ctx) -> anyhow::Result<()> {
    let (n, o) = ctx.step("two pods run under parallelism 2", async {
        let n = node_names(&ctx, "").await?.len();
        ensure!(n > 2, "the cluster has {n} nodes, this needs more than 2");
        // Pods that never finish (restarts stay within the limit) hold their parallelism slot.
        let mut extra = crash_looping();
        merge(
            &mut extra,
            json!({"parallelism": 2, "failurePolicy": {"type": "Continue", "restartLimit": 1000}}),
        );
        create(&ctx, job(NAME, extra)).await?;
        let o = wait_job(&ctx, NAME, "two active pods", |o, p| {
            Check::when(count(o, "active") == 2 && p.len() >= 2, || {
                format!("{} pods; status {}", p.len(), status(o))
            })
    })
    .await?;
        Ok((n, o))
    })
    .await?;
    ctx.step("no third pod exists while every node is desired", async {
        let p = pods(&ctx, &format!("app={NAME}")).await?;
        ensure!(
            p.len() == 2 && count(&o, "desired") == n as i64,
            "parallelism 2: {} pods exist, desired {} (want 2 pods, desired {n})",
            p.len(),
            count(&o, "desired")
        );
        Ok(())
    })
    .await?;
    ctx.step("raising parallelism runs a pod on every node", async {
        ctx.patch(
            API,
            "BroadcastJob",
            NAME,
            json!({"spec": {"parallelism": n}}),
        )
        .await
        .map_err(refusal)?;
        let want = n as i64;
        wait_job(&ctx, NAME, "every node running a pod", move |o, p| {
            Check::when(count(o, "active") == want && p.len() as i64 == want, || {
                format!("{} pods; status {}", p.len(), status(o))
            })
        })
        .await?;
        Ok(())
    })
    .await
}

async fn completion_never(ctx: Ctx) -> anyhow::Result<()> {
    let o = ctx
        .step("every pod succeeds", async {
            let n = node_names(&ctx, "").await?.len() as i64;
            create(
                &ctx,
                job(NAME, json!({"completionPolicy": {"type": "Never"}})),
            )
            .await?;
            let o = wait_job(&ctx, NAME, "every pod succeeded", move |o, _| {
                Check::when(count(o, "succeeded") == n, || {
                    format!("status {}", status(o))
                })
            })
            .await?;
            Ok(o)
        })
        .await?;
    ctx.step(
        "the job stays running without a Complete condition",
        async {
            ensure!(
                phase(&o) == "running" && condition(&o, "Complete").is_none(),
                "a job with completionPolicy Never finished: {}",
                status(&o)
            );
            Ok(())
        },
    )
    .await
}

async fn active_deadline(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step("the job fails with Failed=True past its deadline", async {
        let mut extra = crash_looping();
        merge(
            &mut extra,
            json!({"completionPolicy": {"type": "Always", "activeDeadlineSeconds": 2},
            "failurePolicy": {"type": "Continue", "restartLimit": 1000}}),
        );
        create(&ctx, job(NAME, extra)).await?;
        let o = wait_phase(&ctx, NAME, "failed").await?;
        ensure!(
            condition(&o, "Failed").is_some_and(|c| c.0 == "True"),
            "a job past its deadline lacks Failed=True: {}",
            status(&o)
        );
        Ok(())
    })
    .await?;
    ctx.step("its active pods are deleted", async {
        wait_job(&ctx, NAME, "the active pods deleted", |o, p| {
            Check::when(p.is_empty() && count(o, "active") == 0, || {
                format!("{} pods left; status {}", p.len(), status(o))
            })
        })
        .await?;
        Ok(())
    })
    .await
}

async fn ttl(ctx: Ctx) -> anyhow::Result<()> {
    let finished = ctx
        .step("the job completes", async {
            create(
                &ctx,
                job(
                    NAME,
                    json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 2}}),
                ),
            )
            .await?;
            let o = wait_phase(&ctx, NAME, "completed").await?;
            let finished = status(&o)["completionTime"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            Ok(finished)
        })
        .await?;
    let api = ctx
        .step(
            "the job is deleted no sooner than the TTL after it finished",
            async {
                let api = ctx.dyn_api(API, "BroadcastJob").await?;
                let get = api.clone();
                // Absence is read, not inferred from the watch (which starts empty).
                until(
                    &api,
                    NAME,
                    "the finished job deleted",
                    ctx.timeouts.converge,
                    move |_| {
                        let get = get.clone();
                        async move {
                            match get.get_opt(NAME).await {
                                Ok(o) => Check::when(o.is_none(), || {
                                    "the BroadcastJob still exists".into()
                                }),
                                Err(e) => Check::Failed(format!("get the BroadcastJob: {e}")),
                            }
                        }
                        .boxed()
                    },
                )
                .await?;
                let gone = epoch_now();
                let finished = parse_time(&finished)?;
                ensure!(
                    gone - finished >= 2,
                    "the job was deleted {}s after it finished, before ttlSecondsAfterFinished 2",
                    gone - finished
                );
                Ok(api)
            },
        )
        .await?;
    ctx.step("its pods are collected", async {
        // Its pods follow (garbage collection).
        let c = ctx.clone();
        until(
            &api,
            NAME,
            "the job's pods collected",
            ctx.timeouts.converge,
            move |_| {
                let c = c.clone();
                async move {
                    match pods(&c, &format!("app={NAME}")).await {
                        Ok(p) => Check::when(p.is_empty(), || format!("{} pods left", p.len())),
                        Err(e) => Check::Failed(format!("list pods: {e}")),
                    }
                }
                .boxed()
            },
        )
        .await?;
        Ok(())
    })
    .await
}

/// Seconds since the epoch, now.
fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// Seconds since the epoch of an RFC 3339 time.
fn parse_time(t: &str) -> anyhow::Result<i64> {
    let t: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time = serde_json::from_value(json!(t))
        .map_err(|e| anyhow::anyhow!("completionTime {t:?} is not a time: {e}"))?;
    Ok(t.0.as_second())
}

fn failing(policy: &str) -> Value {
    json!({"template": {"metadata": {"annotations": {EXIT_CODE: "1"}}},
        "failurePolicy": {"type": policy}})
}

async fn fail_fast(ctx: Ctx) -> anyhow::Result<()> {
    let o = ctx
        .step("the job with a failing pod reaches phase failed", async {
            let mut extra = failing("FailFast");
            extra["failurePolicy"] = json!({});
            create(&ctx, job(NAME, extra)).await?;
            let o = wait_phase(&ctx, NAME, "failed").await?;
            Ok(o)
        })
        .await?;
    ctx.step("the failed pod is counted and the job is Failed", async {
        ensure!(
            count(&o, "failed") >= 1 && condition(&o, "Failed").is_some_and(|c| c.0 == "True"),
            "a failed job lacks failed pods or Failed=True: {}",
            status(&o)
        );
        Ok(())
    })
    .await
}

async fn continue_on_failure(ctx: Ctx) -> anyhow::Result<()> {
    let (n, o) = ctx
        .step("the job with failing pods completes", async {
            let n = node_names(&ctx, "").await?.len() as i64;
            create(&ctx, job(NAME, failing("Continue"))).await?;
            let o = wait_phase(&ctx, NAME, "completed").await?;
            Ok((n, o))
        })
        .await?;
    ctx.step(
        "every failed pod is counted and the job is Complete",
        async {
            ensure!(
                count(&o, "failed") == n
                    && count(&o, "succeeded") == 0
                    && condition(&o, "Complete").is_some_and(|c| c.0 == "True"),
                "want a Complete job with {n} failed pods: {}",
                status(&o)
            );
            Ok(())
        },
    )
    .await
}

async fn pause_on_failure(ctx: Ctx) -> anyhow::Result<()> {
    let (n, o) = ctx
        .step("the job pauses after its first failed pod", async {
            let n = node_names(&ctx, "").await?.len() as i64;
            // One pod at a time: the first one fails and no other node gets a pod.
            let mut extra = failing("Pause");
            extra["parallelism"] = json!(1);
            create(&ctx, job(NAME, extra)).await?;
            let o = wait_job(&ctx, NAME, "paused after one failed pod", |o, _| {
                Check::when(phase(o) == "paused" && count(o, "failed") == 1, || {
                    format!("status {}", status(o))
                })
            })
            .await?;
            Ok((n, o))
        })
        .await?;
    ctx.step("no other pod ran and the job did not fail", async {
        let p = pods(&ctx, &format!("app={NAME}")).await?;
        ensure!(
            p.len() == 1 && count(&o, "desired") == n && condition(&o, "Failed").is_none(),
            "a job paused by its failed pod ran {} pods (want 1) or failed: status {}",
            p.len(),
            status(&o)
        );
        Ok(())
    })
    .await
}

async fn restart_limit(ctx: Ctx) -> anyhow::Result<()> {
    let o = ctx
        .step("the crash-looping job fails", async {
            let mut extra = crash_looping();
            merge(
                &mut extra,
                json!({"failurePolicy": {"type": "FailFast", "restartLimit": 2}}),
            );
            create(&ctx, job(NAME, extra)).await?;
            let o = wait_phase(&ctx, NAME, "failed").await?;
            Ok(o)
        })
        .await?;
    ctx.step(
        "a pod restarted more than restartLimit times was counted as failed",
        async {
            ensure!(
                count(&o, "failed") >= 1,
                "the job failed without counting a failed pod: {}",
                status(&o)
            );
            let restarts: Vec<i32> = pods(&ctx, &format!("app={NAME}"))
                .await?
                .iter()
                .filter_map(|p| container_status(p, "main").map(|s| s.restart_count))
                .collect();
            ensure!(
                restarts.iter().any(|r| *r > 2),
                "the job failed before a pod restarted more than restartLimit 2 times: {restarts:?}"
            );
            Ok(())
        },
    )
    .await
}

async fn paused(ctx: Ctx) -> anyhow::Result<()> {
    let (n, o) = ctx
        .step("the paused job reports its desired count", async {
            let n = node_names(&ctx, "").await?.len() as i64;
            create(&ctx, job(NAME, json!({"paused": true}))).await?;
            let o = wait_job(&ctx, NAME, "paused with its desired count", move |o, _| {
                Check::when(phase(o) == "paused" && count(o, "desired") == n, || {
                    format!("status {}", status(o))
                })
            })
            .await?;
            Ok((n, o))
        })
        .await?;
    ctx.step("the paused job created no pod", async {
        let p = pods(&ctx, &format!("app={NAME}")).await?;
        ensure!(
            p.is_empty() && count(&o, "active") == 0,
            "a paused job created {} pods: status {}",
            p.len(),
            status(&o)
        );
        Ok(())
    })
    .await?;
    ctx.step("resumed, it runs to completion", async {
        ctx.patch(
            API,
            "BroadcastJob",
            NAME,
            json!({"spec": {"paused": false}}),
        )
        .await
        .map_err(refusal)?;
        let o = wait_phase(&ctx, NAME, "completed").await?;
        ensure!(
            count(&o, "succeeded") == n,
            "the resumed job completed with status {}",
            status(&o)
        );
        Ok(())
    })
    .await
}
