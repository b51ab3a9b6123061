//! SidecarSet lifecycle: the documented contract of `apps.kruise.io/v1alpha1` SidecarSet —
//! which pods get the sidecar (selector, namespace, namespaceSelector, paused injection), what
//! is injected (containers in order, init containers, volumes shared with the app,
//! imagePullSecrets, pod metadata) and how a sidecar image change rolls through running pods
//! in place (rolling, partition, paused, NotUpdate, selector, priority), with its status
//! counters. Start with [`scenarios`].

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::scenario::wait::Check;
use crate::scenario::workload::{CloneSet, same_image};
use crate::scenario::{Ctx, Requirements, Scenario};
use crate::suites::common::*;

const SIDECAR_V1: &str = "busybox:1.36";
const SIDECAR_V2: &str = "busybox:1.37";
const METADATA_GATE: &str = "SidecarSetPatchPodMetadataDefaultsAllowed";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "sidecarset/injects-containers-volumes-and-secrets-into-selected-pods",
            "containers in podInjectPolicy order, initContainers, volumes, shared app volumes and imagePullSecrets are injected into pods of the selected namespace only, not while injection is paused",
            &["sidecarset", "injection", "namespace-selector", "volumes"],
            |ctx| injection(ctx).boxed(),
        ),
        Scenario::new(
            "sidecarset/patch-pod-metadata-annotates-injected-pods",
            "patchPodMetadata adds its annotations to the pods it injects",
            &["sidecarset", "injection", "metadata"],
            |ctx| patch_metadata(ctx).boxed(),
        )
        .requiring(Requirements {
            controller_gates: BTreeMap::from([(METADATA_GATE.to_string(), true)]),
            ..Default::default()
        }),
        Scenario::new(
            "sidecarset/sidecar-image-change-updates-running-pods-in-place",
            "a sidecar image change restarts the sidecar in place (same pod) under RollingUpdate, stops at a partition, a selector or a priority, and touches nothing when paused or NotUpdate; status counts follow",
            &[
                "smoke",
                "sidecarset",
                "update",
                "in-place",
                "partition",
                "paused",
                "priority",
                "status",
            ],
            |ctx| updates(ctx).boxed(),
        ),
        Scenario::new(
            "sidecarset/revision-history-limit-prunes-revisions",
            "after three sidecar image changes with revisionHistoryLimit 1, one ControllerRevision of the SidecarSet remains",
            &["sidecarset", "revision-history"],
            |ctx| revision_history(ctx).boxed(),
        ),
    ]
}

/// A SidecarSet `name` over the pods `app=<app>` of the scenario's namespace, with `spec`
/// merged into it, created and observed.
async fn sidecarset(ctx: &Ctx, name: &str, app: &str, spec: Value) -> anyhow::Result<()> {
    let mut s = json!({
        "selector": {"matchLabels": {"app": app}},
        "namespace": ctx.namespace,
        "containers": [{"name": "logger", "image": SIDECAR_V1, "command": ["sleep", "3600"]}]
    });
    crate::suites::common::merge(&mut s, spec);
    // A null in `spec` removes the default (e.g. `namespace` for a namespaceSelector).
    if let Some(fields) = s.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    create_observed(
        ctx,
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": name}, "spec": s}),
    )
    .await?;
    Ok(())
}

/// A CloneSet `app` of `replicas` pods (whose container mounts an emptyDir at /cache),
/// rolled out.
async fn app(ctx: &Ctx, app: &str, replicas: i64) -> anyhow::Result<Vec<Pod>> {
    let mut m = CloneSet::new(app).replicas(replicas).manifest();
    m["spec"]["template"]["spec"]["volumes"] = json!([{"name": "cache", "emptyDir": {}}]);
    m["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "cache", "mountPath": "/cache"}]);
    create(ctx, m).await?;
    let cs =
        crate::scenario::workload::Handle::<crate::scenario::workload::CloneSetKind>::of(ctx, app);
    cs.wait_rolled_out(replicas, ctx.timeouts.converge, &[])
        .await?;
    pods(ctx, &format!("app={app}")).await
}

/// Container names of a pod, in order.
fn containers(p: &Pod) -> Vec<String> {
    p.spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect()
}

/// Mount paths of a pod's container `name`.
fn mounts(p: &Pod, name: &str) -> Vec<String> {
    p.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(|c| c.name == name)
        .flat_map(|c| {
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.mount_path.clone())
        })
        .collect()
}

async fn injection(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step("four SidecarSets: a full one, one by namespaceSelector, one for another namespace, one paused", async {
        let full = json!({
            "initContainers": [{"name": "init-conf", "image": SIDECAR_V1, "command": ["true"]}],
            "containers": [
                {"name": "before", "image": SIDECAR_V1, "command": ["sleep", "3600"],
                 "podInjectPolicy": "BeforeAppContainer"},
                {"name": "logger", "image": SIDECAR_V1, "command": ["sleep", "3600"],
                 "podInjectPolicy": "AfterAppContainer", "shareVolumePolicy": {"type": "enabled"},
                 "volumeMounts": [{"name": "sidecar-conf", "mountPath": "/conf"}]}
            ],
            "volumes": [{"name": "sidecar-conf", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "registry-auth"}]
        });
        sidecarset(&ctx, &ctx.unique("full"), "inj", full).await?;
        let by_ns_selector = json!({"namespace": null,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ctx.namespace}},
            "containers": [{"name": "by-ns-selector", "image": SIDECAR_V1, "command": ["sleep", "3600"]}]});
        sidecarset(&ctx, &ctx.unique("nssel"), "inj", by_ns_selector).await?;
        let elsewhere = json!({"namespace": "default",
            "containers": [{"name": "elsewhere", "image": SIDECAR_V1, "command": ["sleep", "3600"]}]});
        sidecarset(&ctx, &ctx.unique("other"), "inj", elsewhere).await?;
        let paused = json!({"injectionStrategy": {"paused": true},
            "containers": [{"name": "paused", "image": SIDECAR_V1, "command": ["sleep", "3600"]}]});
        sidecarset(&ctx, &ctx.unique("paused"), "inj", paused).await?;
        Ok(())
    })
    .await?;

    ctx.step(
        "the app's pods get what the SidecarSets selecting them inject, and nothing more",
        async {
            for p in app(&ctx, "inj", 2).await? {
                check_injected(&p)?;
            }
            Ok(())
        },
    )
    .await
}

/// What the SidecarSets of [`injection`] must have done to pod `p`.
fn check_injected(p: &Pod) -> anyhow::Result<()> {
    let names = containers(p);
    let at = |n: &str| names.iter().position(|c| c == n);
    ensure!(
        at("before") < at("main") && at("main") < at("logger") && at("before").is_some(),
        "pod {}: containers {names:?}, want before < main < logger (podInjectPolicy)",
        name_of(p)
    );
    ensure!(
        names.contains(&"by-ns-selector".to_string()),
        "pod {}: the SidecarSet selecting its namespace by namespaceSelector injected nothing: {names:?}",
        name_of(p)
    );
    for absent in ["elsewhere", "paused"] {
        ensure!(
            !names.contains(&absent.to_string()),
            "pod {}: container {absent} was injected: {names:?}",
            name_of(p)
        );
    }
    let spec = p.spec.as_ref().context("pod without spec")?;
    let inits: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    ensure!(
        inits.contains(&"init-conf"),
        "pod {}: initContainers {inits:?}",
        name_of(p)
    );
    let volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    ensure!(
        volumes.contains(&"sidecar-conf"),
        "pod {}: volumes {volumes:?}",
        name_of(p)
    );
    let secrets: Vec<&str> = spec
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    ensure!(
        secrets.contains(&"registry-auth"),
        "pod {}: imagePullSecrets {secrets:?}",
        name_of(p)
    );
    let (logger, before) = (mounts(p, "logger"), mounts(p, "before"));
    ensure!(
        logger.contains(&"/conf".into()) && logger.contains(&"/cache".into()),
        "pod {}: logger (shareVolumePolicy enabled) mounts {logger:?}, want /conf and the app's /cache",
        name_of(p)
    );
    ensure!(
        !before.contains(&"/cache".into()),
        "pod {}: before (shareVolumePolicy off) mounts the app's volumes: {before:?}",
        name_of(p)
    );
    Ok(())
}

async fn patch_metadata(ctx: Ctx) -> anyhow::Result<()> {
    ctx.step("a SidecarSet with patchPodMetadata", async {
        let spec = json!({"patchPodMetadata": [{
            "annotations": {"harness.io/sidecar": "injected"}, "patchPolicy": "Overwrite"
        }]});
        sidecarset(&ctx, &ctx.unique("meta"), "meta", spec).await?;
        Ok(())
    })
    .await?;
    ctx.step("the pods it injects carry its annotation", async {
        for p in app(&ctx, "meta", 2).await? {
            let got = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("harness.io/sidecar"));
            ensure!(
                got.map(String::as_str) == Some("injected"),
                "pod {}: annotation harness.io/sidecar is {got:?}, want injected",
                name_of(&p)
            );
        }
        Ok(())
    })
    .await
}

/// One update strategy: its settings and how many of 2 pods take the new sidecar image.
struct Case {
    app: &'static str,
    strategy: Value,
    updated: usize,
    /// Whether the pod labelled `canary=true` is the one that updates.
    canary: bool,
}

async fn updates(ctx: Ctx) -> anyhow::Result<()> {
    let canary = json!({"matchLabels": {"canary": "true"}});
    let cases = [
        Case {
            app: "rolling",
            strategy: json!({"type": "RollingUpdate"}),
            updated: 2,
            canary: false,
        },
        Case {
            app: "partition",
            strategy: json!({"partition": 1}),
            updated: 1,
            canary: false,
        },
        Case {
            app: "paused",
            strategy: json!({"paused": true}),
            updated: 0,
            canary: false,
        },
        Case {
            app: "not-update",
            strategy: json!({"type": "NotUpdate"}),
            updated: 0,
            canary: false,
        },
        Case {
            app: "selector",
            strategy: json!({"selector": canary}),
            updated: 1,
            canary: true,
        },
        Case {
            app: "priority",
            strategy: json!({"partition": 1, "priorityStrategy": {"weightPriority": [
                {"weight": 50, "matchSelector": {"matchLabels": {"canary": "true"}}}]}}),
            updated: 1,
            canary: true,
        },
    ];
    ctx.step(
        "each update strategy takes its share of pods to the new sidecar image in place",
        async {
            futures::future::try_join_all(cases.iter().map(|c| update_case(&ctx, c))).await?;
            Ok(())
        },
    )
    .await?;
    Ok(())
}

async fn update_case(ctx: &Ctx, case: &Case) -> anyhow::Result<()> {
    let (name, app_name) = (ctx.unique(case.app), case.app);
    sidecarset(
        ctx,
        &name,
        app_name,
        json!({"updateStrategy": case.strategy}),
    )
    .await?;
    let pods = app(ctx, app_name, 2).await?;
    let first = name_of(pods.first().context("no pod")?);
    ctx.patch(
        "v1",
        "Pod",
        &first,
        json!({"metadata": {"labels": {"canary": "true"}}}),
    )
    .await
    .map_err(refusal)?;
    let before = pod_uids(ctx, &format!("app={app_name}")).await?;
    ctx.json_patch(
        "apps.kruise.io/v1alpha1",
        "SidecarSet",
        &name,
        json!([{"op": "replace", "path": "/spec/containers/0/image", "value": SIDECAR_V2}]),
    )
    .await
    .map_err(refusal)?;
    let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "SidecarSet").await?;
    let want = case.updated;
    let what = format!("{app_name}: {want} of 2 pods with sidecar {SIDECAR_V2}");
    wait_pods(ctx, &api, &name, &format!("app={app_name}"), &what, move |o, pods| {
        let on_v2 = pods
            .iter()
            .filter(|p| container_status(p, "logger").is_some_and(|s| same_image(&s.image, SIDECAR_V2)))
            .count();
        let counts = ["matchedPods", "readyPods", "updatedPods", "updatedReadyPods"].map(|f| count(o, f));
        Check::when(observed(o) && on_v2 == want && counts == [2, 2, want as i64, want as i64], || {
            format!("{on_v2} pods run {SIDECAR_V2}; matched/ready/updated/updatedReady {counts:?}")
        })
    })
    .await
    .with_context(|| format!("update strategy {}", case.strategy))?;
    let after = pods_of(ctx, app_name).await?;
    ensure!(
        pod_uids(ctx, &format!("app={app_name}")).await? == before,
        "{app_name}: the sidecar update recreated pods instead of updating them in place"
    );
    for p in after
        .iter()
        .filter(|p| container_status(p, "logger").is_some_and(|s| same_image(&s.image, SIDECAR_V2)))
    {
        let restarts = container_status(p, "logger").map_or(0, |s| s.restart_count);
        ensure!(
            restarts >= 1,
            "{app_name}: sidecar of {} shows {restarts} restarts",
            name_of(p)
        );
        if case.canary {
            ensure!(
                label(p, "canary") == Some("true"),
                "{app_name}: pod {} updated, but only the canary pod {first} should",
                name_of(p)
            );
        }
    }
    Ok(())
}

/// The live pods `app=<app>`.
async fn pods_of(ctx: &Ctx, app: &str) -> anyhow::Result<Vec<Pod>> {
    pods(ctx, &format!("app={app}")).await
}

async fn revision_history(ctx: Ctx) -> anyhow::Result<()> {
    let name = ctx.unique("hist");
    ctx.step("a SidecarSet with revisionHistoryLimit 1", async {
        sidecarset(
            &ctx,
            &name,
            "no-such-app",
            json!({"revisionHistoryLimit": 1}),
        )
        .await?;
        Ok(())
    })
    .await?;
    let api = ctx
        .step("three sidecar image changes are observed", async {
            let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "SidecarSet").await?;
            for image in ["busybox:1.37", "busybox:1.35", "busybox:1.34"] {
                ctx.json_patch(
                    "apps.kruise.io/v1alpha1",
                    "SidecarSet",
                    &name,
                    json!([{"op": "replace", "path": "/spec/containers/0/image", "value": image}]),
                )
                .await
                .map_err(refusal)?;
                wait_pods(
                    &ctx,
                    &api,
                    &name,
                    "app=no-such-app",
                    "the image change observed",
                    |o, _| Check::when(observed(o), || "status.observedGeneration behind".into()),
                )
                .await?;
            }
            Ok(api)
        })
        .await?;
    ctx.step("one revision of the SidecarSet remains", async {
        // The controller keeps a SidecarSet's revisions in its own namespace.
        let revs: kube::Api<k8s_openapi::api::apps::v1::ControllerRevision> = kube::Api::namespaced(
            ctx.client.clone(),
            ctx.facts.controller.controller().namespace(),
        );
        let selector = format!("kruise.io/sidecarset-name={name}");
        let what = "the SidecarSet's revisions pruned to revisionHistoryLimit";
        crate::scenario::wait::until(&api, &name, what, ctx.timeouts.converge, move |_| {
            let (revs, selector) = (revs.clone(), selector.clone());
            async move {
                match revs
                    .list(&kube::api::ListParams::default().labels(&selector))
                    .await
                {
                    Ok(l) => Check::when(l.items.len() == 1, || {
                        format!("{} revisions labelled {selector}, want 1", l.items.len())
                    }),
                    Err(e) => Check::Failed(format!("list ControllerRevisions: {e}")),
                }
            }
            .boxed()
        })
        .await?;
        Ok(())
    })
    .await
}
