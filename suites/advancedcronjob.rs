//! AdvancedCronJob (`apps.kruise.io/v1alpha1`): scheduled BroadcastJobs and Jobs, concurrency
//! policies (Allow, Forbid, Replace), paused, the starting deadline, failed and successful job
//! history limits, status (`type`, `active`, `lastScheduleTime`) and schedule / time zone
//! validation. Start with [`scenarios`]; manifests come from [`cron`].
//!
//! The first run of a cron schedule comes at its next tick after creation, so the scenarios use
//! the `@every 2s` descriptor of the standard cron syntax: runs every two seconds. Where a
//! scenario asserts that something did *not* run, a second, unrestricted AdvancedCronJob on the
//! same schedule is the clock: once it has run a few times, so would the one under test have.
//! BroadcastJobs whose pods may run nowhere (a node label no node has) have nothing to do and
//! stay active: they never finish on their own.

use anyhow::{bail, ensure};
use futures::FutureExt;
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use super::broadcastjob::{exiting_main, job_spec};
use super::common::*;
use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, FINDING, Scenario, status};

const API: &str = "apps.kruise.io/v1alpha1";
const KIND: &str = "AdvancedCronJob";
const EVERY: &str = "@every 2s";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "advancedcronjob/broadcast-job-template-runs-on-schedule",
            "each tick creates a BroadcastJob from broadcastJobTemplate, named after its scheduled time; status type, active and lastScheduleTime follow",
            &["advancedcronjob", "schedule", "broadcastjob", "status"],
            |ctx| broadcast_runs(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/broadcast-job-template-labels-reach-the-runs",
            "the labels of broadcastJobTemplate.metadata are set on every BroadcastJob it creates",
            &["advancedcronjob", "broadcastjob", "template-metadata"],
            |ctx| broadcast_labels(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/job-template-runs-jobs-that-complete",
            "a jobTemplate AdvancedCronJob creates batch Jobs on schedule, carrying the template's labels, which complete; status type Job",
            &["smoke", "advancedcronjob", "schedule", "job"],
            |ctx| job_runs(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/concurrency-allow-runs-jobs-side-by-side",
            "concurrencyPolicy Allow starts a run while earlier ones are still active",
            &["advancedcronjob", "concurrency"],
            |ctx| concurrency_allow(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/concurrency-forbid-skips-runs-while-one-is-active",
            "concurrencyPolicy Forbid creates no run while the previous one is active",
            &["advancedcronjob", "concurrency"],
            |ctx| concurrency_forbid(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/concurrency-replace-deletes-the-active-run",
            "concurrencyPolicy Replace deletes the active run when it starts the next one",
            &["advancedcronjob", "concurrency"],
            |ctx| concurrency_replace(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/paused-runs-nothing-until-resumed",
            "paused creates no run while the schedule ticks; resuming runs again",
            &["advancedcronjob", "paused"],
            |ctx| paused(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/starting-deadline-zero-skips-every-run",
            "with startingDeadlineSeconds 0 every scheduled run has missed its deadline by the time it is seen, so none starts while the schedule ticks",
            &["advancedcronjob", "schedule", "starting-deadline"],
            |ctx| starting_deadline(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/history-limits-prune-finished-jobs",
            "successfulJobsHistoryLimit and failedJobsHistoryLimit 1 keep at most one finished run of each kind",
            &["advancedcronjob", "history"],
            |ctx| history(ctx).boxed(),
        )
        .allowing(&["DeadlineExceeded"]),
        Scenario::new(
            "advancedcronjob/schedule-and-time-zone-are-validated",
            "an invalid schedule, timeZone Local and TZ in the schedule beside timeZone are refused; a named timeZone is accepted",
            &["advancedcronjob", "validation", "time-zone"],
            |ctx| validation(ctx).boxed(),
        ),
        Scenario::new(
            "advancedcronjob/every-served-version-refuses-a-job-template-that-always-restarts",
            "a jobTemplate whose pods restart Always (which no Job may have), asked through each API version the CRD serves, is refused as a CronJob's is",
            &["advancedcronjob", "api-versions", "validation", "job"],
            |ctx| job_restart_policy(ctx).boxed(),
        ),
    ]
}

/// A job template whose pods have restart policy `policy`.
fn job_template(policy: &str) -> Value {
    json!({"spec": {"template": {"metadata": {"labels": {"app": "restarts"}},
        "spec": {"restartPolicy": policy, "containers": [exiting_main()]}}}})
}

async fn job_restart_policy(ctx: Ctx) -> anyhow::Result<()> {
    let control = ctx
        .step("a CronJob's answer (the control)", async {
            let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "restarts"},
                "spec": {"schedule": "*/5 * * * *", "jobTemplate": job_template("Always")}});
            match ctx.admits(&cronjob).await {
                Ok(()) => {
                    bail!("the control: a CronJob whose job pods restart Always was admitted")
                }
                Err(e) => Ok(refusal(e).to_string()),
            }
        })
        .await?;
    let versions = ctx
        .step(
            "the versions the CRD serves",
            served_versions(&ctx, "advancedcronjobs.apps.kruise.io"),
        )
        .await?;
    let mut findings = vec![];
    for version in &versions {
        // Valid the other way: the same template restarting Never is admitted.
        for (policy, refused) in [("Never", false), ("Always", true)] {
            let mut o = cron(
                "restarts",
                json!({"jobTemplate": job_template(policy)}),
                json!({}),
            );
            o["apiVersion"] = json!(format!("apps.kruise.io/{version}"));
            match (ctx.admits(&o).await, refused) {
                (Ok(()), true) => findings.push(format!(
                    "{FINDING}job-restart-policy-always: AdvancedCronJob admitted through apps.kruise.io/{version} with spec.template.jobTemplate.spec.template.spec.restartPolicy Always, where a CronJob is refused ({control}); every Job it would make is refused"
                )),
                (Err(e), false) => bail!(
                    "AdvancedCronJob through apps.kruise.io/{version} with restartPolicy {policy} refused: {}",
                    refusal(e)
                ),
                _ => {}
            }
        }
    }
    ensure!(findings.is_empty(), "{}", findings.join("\n"));
    Ok(())
}

/// An AdvancedCronJob `name` on [`EVERY`] with `template` and `extra` merged into its spec.
fn cron(name: &str, template: Value, extra: Value) -> Value {
    let mut spec = json!({"schedule": EVERY, "template": template});
    super::broadcastjob::merge(&mut spec, extra);
    json!({"apiVersion": API, "kind": KIND, "metadata": {"name": name}, "spec": spec})
}

/// A broadcastJobTemplate whose pods are labelled `app=<app>`, with `extra` merged into its spec.
fn broadcast(app: &str, extra: Value) -> Value {
    json!({"broadcastJobTemplate": {"spec": job_spec(app, extra)}})
}

/// The runs among `r` lacking the label `harness-cron=<name>`, with their labels.
fn unlabelled(r: &[DynamicObject], name: &str) -> Vec<String> {
    r.iter()
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("harness-cron"))
                .map(String::as_str)
                != Some(name)
        })
        .map(|j| {
            format!(
                "{} {:?}",
                j.metadata.name.clone().unwrap_or_default(),
                j.metadata.labels
            )
        })
        .collect()
}

async fn broadcast_labels(ctx: Ctx) -> anyhow::Result<()> {
    let name = "labelled";
    let mut template = never_finishing(name);
    template["broadcastJobTemplate"]["metadata"] = json!({"labels": {"harness-cron": name}});
    let r = ctx
        .step("a first run is created, then the schedule paused", async {
            create(&ctx, cron(name, template, json!({}))).await?;
            let r = wait_count(&ctx, name, BCJ, 1).await?;
            pause(&ctx, name).await?;
            Ok(r)
        })
        .await?;
    ctx.step("every run carries the template's labels", async {
        let missing = unlabelled(&r, name);
        // What the apiserver kept of the template's metadata tells a pruning schema from a
        // controller that does not copy it.
        let stored = ctx.dyn_api(API, KIND).await?.get(name).await?;
        let kept = &stored.data["spec"]["template"]["broadcastJobTemplate"]["metadata"];
        ensure!(
            missing.is_empty(),
            "runs lack the label harness-cron={name} of broadcastJobTemplate.metadata: {missing:?}; \
             the stored AdvancedCronJob's broadcastJobTemplate.metadata is {kept}"
        );
        Ok(())
    })
    .await
}

/// A broadcastJobTemplate whose jobs never finish: their pods fit no node.
fn never_finishing(app: &str) -> Value {
    broadcast(
        app,
        json!({"template": {"spec": {"nodeSelector": {"harness-node-pool": "none"}}}}),
    )
}

/// Live BroadcastJobs controlled by the AdvancedCronJob `owner`, oldest schedule first.
async fn runs(ctx: &Ctx, kind: (&str, &str), owner: &str) -> anyhow::Result<Vec<DynamicObject>> {
    let api = ctx.dyn_api(kind.0, kind.1).await?;
    let mut v: Vec<DynamicObject> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter(|j| {
            j.metadata.owner_references.as_ref().is_some_and(|r| {
                r.iter()
                    .any(|r| r.kind == KIND && r.name == owner && r.controller == Some(true))
            })
        })
        .collect();
    v.sort_by_key(|j| j.metadata.name.clone());
    Ok(v)
}

const BCJ: (&str, &str) = (API, "BroadcastJob");
const JOB: (&str, &str) = ("batch/v1", "Job");

fn finished(j: &DynamicObject) -> Option<String> {
    status(j)["conditions"].as_array()?.iter().find_map(|c| {
        ((c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
            .then(|| c["type"].as_str().unwrap_or_default().to_string())
    })
}

/// Waits until `check` holds over the AdvancedCronJob `name` and the runs it controls.
async fn wait_runs<F>(
    ctx: &Ctx,
    name: &str,
    kind: (&'static str, &'static str),
    what: &str,
    check: F,
) -> anyhow::Result<(DynamicObject, Vec<DynamicObject>)>
where
    F: Fn(&DynamicObject, &[DynamicObject]) -> Check + Send + Sync + Clone + 'static,
{
    let api = ctx.dyn_api(API, KIND).await?;
    let (c, owner) = (ctx.clone(), name.to_string());
    // The runs the passing check saw (listed again, a run could already be replaced).
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let last = seen.clone();
    let o = until(&api, name, what, ctx.timeouts.converge, move |o| {
        let (c, owner, check, last) = (c.clone(), owner.clone(), check.clone(), last.clone());
        async move {
            let Some(o) = o else {
                return Check::Pending("the AdvancedCronJob does not exist".into());
            };
            match runs(&c, kind, &owner).await {
                Ok(r) => {
                    let verdict = check(&o, &r);
                    *last.lock().unwrap() = r;
                    verdict
                }
                Err(e) => Check::Failed(format!("list runs: {e}")),
            }
        }
        .boxed()
    })
    .await?
    .ok_or_else(|| anyhow::anyhow!("AdvancedCronJob {name} vanished"))?;
    let r = std::mem::take(&mut *seen.lock().unwrap());
    Ok((o, r))
}

/// Waits until the AdvancedCronJob `name` has at least `n` runs.
async fn wait_count(
    ctx: &Ctx,
    name: &str,
    kind: (&'static str, &'static str),
    n: usize,
) -> anyhow::Result<Vec<DynamicObject>> {
    let what = format!("{n} runs of {name}");
    Ok(wait_runs(ctx, name, kind, &what, move |_, r| {
        Check::when(r.len() >= n, || format!("{} runs", r.len()))
    })
    .await?
    .1)
}

fn names(r: &[DynamicObject]) -> Vec<String> {
    r.iter().filter_map(|j| j.metadata.name.clone()).collect()
}

async fn broadcast_runs(ctx: Ctx) -> anyhow::Result<()> {
    let name = "nightly";
    let (o, r) = ctx
        .step(
            "two runs are created and lastScheduleTime is reported",
            async {
                create(&ctx, cron(name, broadcast(name, json!({})), json!({}))).await?;
                let (o, r) = wait_runs(
                    &ctx,
                    name,
                    BCJ,
                    "two runs, lastScheduleTime reported",
                    |o, r| {
                        Check::when(
                            r.len() >= 2 && !status(o)["lastScheduleTime"].is_null(),
                            || format!("{} runs; status {}", r.len(), status(o)),
                        )
                    },
                )
                .await?;
                Ok((o, r))
            },
        )
        .await?;
    ctx.step(
        "status type is BroadcastJob and each run is named after its scheduled time",
        async {
            ensure!(
                status(&o)["type"] == "BroadcastJob",
                "status.type is {}, want BroadcastJob",
                status(&o)["type"]
            );
            for j in &r {
                let jname = j.metadata.name.clone().unwrap_or_default();
                let stamp = jname.strip_prefix(&format!("{name}-")).unwrap_or_default();
                ensure!(
                    stamp.parse::<i64>().is_ok(),
                    "run {jname} is not named <cron>-<scheduled unix time>"
                );
            }
            Ok(())
        },
    )
    .await?;
    ctx.step("finished runs leave status.active", async {
        // Runs finish (their pods succeed); status.active lists only unfinished ones.
        wait_runs(
            &ctx,
            name,
            BCJ,
            "finished runs out of status.active",
            |o, r| {
                let done: Vec<String> = r
                    .iter()
                    .filter(|j| finished(j).is_some())
                    .filter_map(|j| j.metadata.name.clone())
                    .collect();
                let active: Vec<String> = status(o)["active"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x["name"].as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                Check::when(
                    !done.is_empty() && done.iter().all(|d| !active.contains(d)),
                    || format!("finished runs {done:?}, status.active {active:?}"),
                )
            },
        )
        .await?;
        pause(&ctx, name).await
    })
    .await
}

/// Pauses the AdvancedCronJob `name` (so that nothing more runs while the scenario ends).
async fn pause(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    ctx.patch(API, KIND, name, json!({"spec": {"paused": true}}))
        .await
        .map_err(refusal)?;
    Ok(())
}

async fn job_runs(ctx: Ctx) -> anyhow::Result<()> {
    let name = "batch";
    let template = json!({"jobTemplate": {"metadata": {"labels": {"harness-cron": name}},
        "spec": {"template": {
        "metadata": {"labels": {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": [exiting_main()]}
    }}}});
    let (o, r) = ctx
        .step("a Job of the schedule completes", async {
            create(&ctx, cron(name, template, json!({}))).await?;
            let (o, r) = wait_runs(&ctx, name, JOB, "a completed Job", |_, r| {
                Check::when(
                    r.iter().any(|j| finished(j).as_deref() == Some("Complete")),
                    || format!("jobs {:?}, none Complete", names(r)),
                )
            })
            .await?;
            pause(&ctx, name).await?;
            Ok((o, r))
        })
        .await?;
    ctx.step(
        "the Jobs carry the template's labels and status type is Job",
        async {
            let missing = unlabelled(&r, name);
            ensure!(
                missing.is_empty(),
                "Jobs lack the label harness-cron={name} of jobTemplate.metadata: {missing:?}"
            );
            ensure!(
                status(&o)["type"] == "Job",
                "status.type is {}, want Job",
                status(&o)["type"]
            );
            Ok(())
        },
    )
    .await
}

async fn concurrency_allow(ctx: Ctx) -> anyhow::Result<()> {
    let name = "allow";
    let r = ctx
        .step("two runs are active side by side", async {
            create(
                &ctx,
                cron(
                    name,
                    never_finishing(name),
                    json!({"concurrencyPolicy": "Allow"}),
                ),
            )
            .await?;
            let (_, r) = wait_runs(&ctx, name, BCJ, "two active runs side by side", |o, r| {
                let listed = status(o)["active"].as_array().map_or(0, Vec::len);
                Check::when(r.len() >= 2 && listed >= 2, || {
                    format!("{} runs, status.active lists {listed}", r.len())
                })
            })
            .await?;
            pause(&ctx, name).await?;
            Ok(r)
        })
        .await?;
    ctx.step("none of the runs has finished", async {
        ensure!(
            r.iter().all(|j| finished(j).is_none()),
            "runs of a job with nothing to do finished: {:?}",
            r.iter().map(finished).collect::<Vec<_>>()
        );
        Ok(())
    })
    .await
}

async fn concurrency_forbid(ctx: Ctx) -> anyhow::Result<()> {
    let (name, clock) = ("forbid", "clock");
    let first = ctx
        .step("the Forbid AdvancedCronJob starts its first run", async {
            create(
                &ctx,
                cron(
                    name,
                    never_finishing(name),
                    json!({"concurrencyPolicy": "Forbid"}),
                ),
            )
            .await?;
            create(&ctx, cron(clock, never_finishing(clock), json!({}))).await?;
            wait_count(&ctx, name, BCJ, 1).await?;
            let first = runs(&ctx, BCJ, name).await?;
            Ok(first)
        })
        .await?;
    let now = ctx
        .step("the clock runs three more times", async {
            // Three more ticks for the clock: the forbidding job had as many chances to run.
            let seen = runs(&ctx, BCJ, clock).await?.len();
            wait_count(&ctx, clock, BCJ, seen + 3).await?;
            let now = runs(&ctx, BCJ, name).await?;
            pause(&ctx, name).await?;
            pause(&ctx, clock).await?;
            Ok(now)
        })
        .await?;
    ctx.step("no other run started while the first was active", async {
        ensure!(
            names(&now) == names(&first),
            "Forbid started runs {:?} while {:?} was active",
            names(&now),
            names(&first)
        );
        Ok(())
    })
    .await
}

async fn concurrency_replace(ctx: Ctx) -> anyhow::Result<()> {
    let name = "replace";
    let first = ctx
        .step("the Replace AdvancedCronJob starts its first run", async {
            create(
                &ctx,
                cron(
                    name,
                    never_finishing(name),
                    json!({"concurrencyPolicy": "Replace"}),
                ),
            )
            .await?;
            let first = wait_count(&ctx, name, BCJ, 1).await?;
            let first = names(&first);
            Ok(first)
        })
        .await?;
    let r = ctx
        .step("the next run replaces the first", async {
            let f = first.clone();
            let (_, r) = wait_runs(&ctx, name, BCJ, "the first run replaced", move |_, r| {
                let n = names(r);
                Check::when(!n.is_empty() && n.iter().all(|x| !f.contains(x)), || {
                    format!("runs {n:?}, first {f:?}")
                })
            })
            .await?;
            pause(&ctx, name).await?;
            Ok(r)
        })
        .await?;
    ctx.step("one run is left", async {
        ensure!(
            r.len() == 1,
            "Replace left {} runs side by side: {:?}",
            r.len(),
            names(&r)
        );
        Ok(())
    })
    .await
}

async fn paused(ctx: Ctx) -> anyhow::Result<()> {
    let (name, clock) = ("held", "clock");
    ctx.step(
        "the clock runs three times beside a paused AdvancedCronJob",
        async {
            create(
                &ctx,
                cron(name, never_finishing(name), json!({"paused": true})),
            )
            .await?;
            create(&ctx, cron(clock, never_finishing(clock), json!({}))).await?;
            wait_count(&ctx, clock, BCJ, 3).await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("the paused AdvancedCronJob ran nothing", async {
        let held = runs(&ctx, BCJ, name).await?;
        ensure!(
            held.is_empty(),
            "a paused AdvancedCronJob ran {:?}",
            names(&held)
        );
        Ok(())
    })
    .await?;
    ctx.step("resumed, it runs", async {
        pause(&ctx, clock).await?;
        ctx.patch(API, KIND, name, json!({"spec": {"paused": false}}))
            .await
            .map_err(refusal)?;
        wait_count(&ctx, name, BCJ, 1).await?;
        pause(&ctx, name).await
    })
    .await
}

async fn starting_deadline(ctx: Ctx) -> anyhow::Result<()> {
    let (name, clock) = ("late", "clock");
    ctx.step(
        "the clock runs three times beside one with startingDeadlineSeconds 0",
        async {
            create(
                &ctx,
                cron(
                    name,
                    never_finishing(name),
                    json!({"startingDeadlineSeconds": 0}),
                ),
            )
            .await?;
            create(&ctx, cron(clock, never_finishing(clock), json!({}))).await?;
            wait_count(&ctx, clock, BCJ, 3).await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("no run started past its deadline", async {
        let late = runs(&ctx, BCJ, name).await?;
        ensure!(
            late.is_empty(),
            "an AdvancedCronJob with startingDeadlineSeconds 0 ran {:?}",
            names(&late)
        );
        pause(&ctx, clock).await?;
        pause(&ctx, name).await
    })
    .await
}

async fn history(ctx: Ctx) -> anyhow::Result<()> {
    let (failing, ok) = ctx
        .step(
            "an AdvancedCronJob of failing runs and one of succeeding runs",
            async {
                // Failed runs: nothing to do, failed by their
                // activeDeadlineSeconds (no pods at all).
                let failing = "failing";
                let mut t = never_finishing(failing);
                t["broadcastJobTemplate"]["spec"]["completionPolicy"] =
                    json!({"type": "Always", "activeDeadlineSeconds": 1});
                create(
                    &ctx,
                    cron(
                        failing,
                        t,
                        json!({"failedJobsHistoryLimit": 1, "successfulJobsHistoryLimit": 0}),
                    ),
                )
                .await?;
                // Successful runs: every pod succeeds.
                let ok = "ok";
                create(
                    &ctx,
                    cron(
                        ok,
                        broadcast(ok, json!({})),
                        json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 0}),
                    ),
                )
                .await?;
                Ok((failing, ok))
            },
        )
        .await?;
    for (name, want) in [(failing, "Failed"), (ok, "Complete")] {
        ctx.step(&format!("{name}: three {want} runs are seen"), async {
            let what = format!("{name}: three finished runs seen");
            let seen =
                std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
            let s = seen.clone();
            wait_runs(&ctx, name, BCJ, &what, move |_, r| {
                let mut s = s.lock().expect("not poisoned");
                s.extend(
                    r.iter()
                        .filter(|j| finished(j).as_deref() == Some(want))
                        .filter_map(|j| j.metadata.name.clone()),
                );
                Check::when(s.len() >= 3, || format!("finished runs seen {:?}", *s))
            })
            .await?;
            pause(&ctx, name).await?;
            Ok(())
        })
        .await?;
        ctx.step(
            &format!("{name}: at most one finished run is kept"),
            async {
                let what = format!("{name}: at most one finished run kept (history limit 1)");
                wait_runs(&ctx, name, BCJ, &what, |_, r| {
                    let kept: Vec<String> = r
                        .iter()
                        .filter(|j| finished(j).is_some())
                        .filter_map(|j| j.metadata.name.clone())
                        .collect();
                    Check::when(kept.len() <= 1, || format!("finished runs kept {kept:?}"))
                })
                .await?;
                Ok(())
            },
        )
        .await?;
    }
    ctx.step("the pods of pruned runs are collected", async {
        // The pods of pruned runs go with them (garbage collection).
        let c = ctx.clone();
        let api = ctx.dyn_api(API, KIND).await?;
        until(
            &api,
            ok,
            "the pods of pruned runs collected",
            ctx.timeouts.converge,
            move |_| {
                let c = c.clone();
                async move {
                    match crate::scenario::invariants::orphans(&c.client, &c.namespace).await {
                        Ok(o) => Check::when(o.is_empty(), || o.join("; ")),
                        Err(e) => Check::Failed(format!("list orphans: {e}")),
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

async fn validation(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step(
        "an invalid schedule, timeZone Local and TZ beside timeZone are refused",
        async {
            let refused = [
                (
                    "bad-schedule",
                    json!({"schedule": "every now and then"}),
                    "schedule",
                ),
                ("local-zone", json!({"timeZone": "Local"}), "timeZone"),
                (
                    "both-zones",
                    json!({"schedule": "TZ=UTC */5 * * * *", "timeZone": "Europe/Paris"}),
                    "schedule",
                ),
            ];
            for (name, extra, field) in refused {
                match ctx.create(cron(name, never_finishing(name), extra)).await {
                    Err(kube::Error::Api(e)) => ensure!(
                        e.message.contains(field),
                        "{name} was refused for another reason than {field}: {}",
                        e.message
                    ),
                    Err(e) => return Err(refusal(e)),
                    Ok(_) => {
                        bail!("AdvancedCronJob {name} was accepted; its {field} must be refused")
                    }
                }
            }
            Ok(())
        },
    )
    .await?;
    ctx.step("a named timeZone is accepted and runs", async {
        let zoned = "zoned";
        create(
            &ctx,
            cron(
                zoned,
                never_finishing(zoned),
                json!({"timeZone": "Asia/Shanghai"}),
            ),
        )
        .await?;
        // A named zone is accepted and the schedule still runs.
        wait_count(&ctx, zoned, BCJ, 1).await?;
        pause(&ctx, zoned).await
    })
    .await
}
