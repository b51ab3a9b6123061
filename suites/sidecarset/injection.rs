//! SidecarSet injection details: what the pod-create webhook writes into a pod for a sidecar's
//! `transferEnv`, shared volumes and block devices, `podInjectPolicy` of init containers, hot
//! upgrade and `resourcesPolicy`, for sidecars in `containers` and in `initContainers` (native
//! sidecars with restartPolicy Always included); which historic revision it injects
//! (`injectionStrategy.revision`); and in which order a sidecar image change reaches running
//! pods (`priorityStrategy.orderPriority`, `scatterStrategy`, `maxUnavailable`).
//! Start with [`scenarios`].
//!
//! Injection is checked at admission: each case creates its pod as a server-side dry run, so
//! the webhook mutates it and the API returns the injected pod without storing or running it.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail, ensure};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::PostParams;
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::scenario::wait::Check;
use crate::scenario::workload::{CloneSet, same_image};
use crate::scenario::{Ctx, Scenario};
use crate::suites::common::*;

const SIDECAR_V1: &str = "busybox:1.36";
const SIDECAR_V2: &str = "busybox:1.37";
/// The image of the idle half of a hot-upgrade pair: it runs the sidecar's command and does
/// no work.
const EMPTY_IMAGE: &str = "busybox:1.35";
const CUSTOM_VERSION: &str = "apps.kruise.io/sidecarset-custom-version";

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "sidecarset/injection-transfers-env-shares-volumes-and-pairs-hot-upgrade-sidecars",
            "at pod creation the webhook copies the named envs (envName, envNames) from the source container named directly or by a pod label (fieldRef), shares the app's volume mounts with init sidecars, places init sidecars before the pod's own init containers under podInjectPolicy BeforeAppContainer and after them otherwise, and injects a HotUpgrade sidecar as a pair whose idle half runs hotUpgradeEmptyImage; upgradeType is immutable and a fieldRef must read the pod in apiVersion v1",
            &["sidecarset", "injection", "transfer-env", "hot-upgrade", "native-sidecar"],
            |ctx| transfer_and_hot_upgrade(ctx).boxed(),
        )
        .since("v1.7.0"),
        Scenario::new(
            "sidecarset/resources-policy-and-volume-devices-set-at-injection",
            "resourcesPolicy computes a sidecar's limits and requests from the sum or max of the containers its regex selects, in containers and native init sidecars; a pod none of whose containers match is refused, as are SidecarSets mixing resources with resourcesPolicy or giving it to a plain init container; shareVolumeDevicePolicy shares the app's block devices",
            &["sidecarset", "injection", "resources-policy", "volume-devices", "native-sidecar"],
            |ctx| resources_and_devices(ctx).boxed(),
        )
        .since("v1.9.0"),
        Scenario::new(
            "sidecarset/injection-revision-injects-a-historic-sidecar",
            "injectionStrategy.revision makes new pods get the sidecar of an earlier revision, chosen by customVersion (the revision's custom-version label) or revisionName; an unknown version is refused",
            &["sidecarset", "injection", "revision"],
            |ctx| injection_revision(ctx).boxed(),
        ),
        Scenario::new(
            "sidecarset/partial-injection-revision-gives-selected-pods-the-latest",
            "under injectionStrategy.revision policy Partial, new pods the update selector skips get the named revision's sidecar and pods it picks get the latest",
            &["sidecarset", "injection", "revision"],
            |ctx| partial_injection_revision(ctx).boxed(),
        )
        .since("v1.8.0"),
        Scenario::new(
            "sidecarset/update-order-follows-priority-and-scatter-within-max-unavailable",
            "a sidecar image change reaches running pods in orderPriority order, one at a time under maxUnavailable 1; with maxUnavailable 50% and a scatter term the first batch of two takes one pod of the scattered zone, never more than two pods updating at once",
            &["sidecarset", "update", "in-place", "priority", "scatter", "max-unavailable"],
            |ctx| update_order(ctx).boxed(),
        ),
        Scenario::new(
            "sidecarset/namespace-selects-its-pods-and-reads-back-as-written",
            "spec.namespace injects a sidecar into the pods of that namespace and not into those of another, and the SidecarSet reads back with spec.namespace as written",
            &["sidecarset", "injection"],
            |ctx| namespace_as_written(ctx).boxed(),
        ),
    ]
}

/// `spec.namespace`: its effect (pods of the namespace get the sidecar, pods of the same labels
/// elsewhere do not), then the object as read back.
async fn namespace_as_written(ctx: Ctx) -> anyhow::Result<()> {
    let (here, there) = (ctx.unique("here"), ctx.unique("there"));
    let spec = |c: &str| json!({"containers": [sidecar(c, json!({}))]});
    let elsewhere = ctx
        .step(
            "a SidecarSet naming this namespace and one naming another",
            async {
                sidecarset(&ctx, &here, "here", json!({}), spec("logger")).await?;
                // The same selector in another namespace's name.
                let elsewhere = format!("{}-elsewhere", ctx.namespace);
                let mut other =
                    sidecarset_manifest(&ctx, &there, "there", json!({}), spec("other"));
                other["spec"]["namespace"] = json!(elsewhere);
                create_observed(&ctx, other).await?;
                Ok(elsewhere)
            },
        )
        .await?;
    let pod = |case: &'static str| {
        let ctx = ctx.clone();
        async move {
            let spec = json!({"containers": [app_container("main", json!({}))]});
            admit(&ctx, case, case, json!({}), spec)
                .await
                .map_err(refusal)
                .with_context(|| format!("admit a pod labelled injection-case={case}"))
        }
    };
    ctx.step("only the SidecarSet naming the pod's namespace injects its sidecar", async {
        find(&pod("here").await?, "logger", false)
            .context("spec.namespace names the pod's namespace")?;
        let p = pod("there").await?;
        ensure!(
            find(&p, "other", false).is_err(),
            "a SidecarSet whose spec.namespace is {elsewhere} injected its sidecar into a pod of {}",
            ctx.namespace
        );
        Ok(())
    })
    .await?;
    ctx.step("both SidecarSets read back with spec.namespace as written", async {
        let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "SidecarSet").await?;
        for (name, want) in [(&here, ctx.namespace.clone()), (&there, elsewhere)] {
            let o = api.get(name).await.map_err(refusal)?;
            let o = serde_json::to_value(o)?;
            ensure!(
                o["spec"]["namespace"] == json!(want),
                "SidecarSet {name}: spec.namespace written as {want:?}, read back as {} (spec.namespaceSelector {})",
                o["spec"]["namespace"],
                o["spec"]["namespaceSelector"]
            );
        }
        Ok(())
    })
    .await
}

/// A SidecarSet `name` over the pods `injection-case=<case>` of the scenario's namespace,
/// with `spec` merged into it and `labels` on it, created and observed.
async fn sidecarset(
    ctx: &Ctx,
    name: &str,
    case: &str,
    labels: Value,
    spec: Value,
) -> anyhow::Result<()> {
    create_observed(ctx, sidecarset_manifest(ctx, name, case, labels, spec)).await?;
    Ok(())
}

/// The manifest [`sidecarset`] creates.
fn sidecarset_manifest(ctx: &Ctx, name: &str, case: &str, labels: Value, spec: Value) -> Value {
    let mut s = json!({
        "selector": {"matchLabels": {"injection-case": case}},
        "namespace": ctx.namespace,
    });
    crate::suites::common::merge(&mut s, spec);
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": name, "labels": labels}, "spec": s})
}

/// A sidecar container `name` running [`SIDECAR_V1`], with `extra` merged into it.
fn sidecar(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": SIDECAR_V1, "command": ["sleep", "3600"]});
    crate::suites::common::merge(&mut c, extra);
    c
}

/// Creates the pod `name` labelled `injection-case=<case>` (plus `labels`) as a dry run: the
/// pod as admitted, webhook mutations included, or the API's refusal.
async fn admit(
    ctx: &Ctx,
    name: &str,
    case: &str,
    labels: Value,
    spec: Value,
) -> Result<Pod, kube::Error> {
    let mut l = json!({"injection-case": case});
    crate::suites::common::merge(&mut l, labels);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": l}, "spec": spec
    }))
    .map_err(kube::Error::SerdeError)?;
    ctx.api::<Pod>()
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &pod,
        )
        .await
}

/// An app container `name` running [`IMAGE_V1`], with `extra` merged into it.
fn app_container(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": IMAGE_V1});
    crate::suites::common::merge(&mut c, extra);
    c
}

/// The container `name` of a pod (`init` picks initContainers).
fn find<'a>(p: &'a Pod, name: &str, init: bool) -> anyhow::Result<&'a Container> {
    let spec = p.spec.as_ref().context("pod without spec")?;
    let list = if init {
        spec.init_containers.as_deref().unwrap_or_default()
    } else {
        &spec.containers
    };
    list.iter().find(|c| c.name == name).with_context(|| {
        let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
        format!(
            "pod {}: no {} {name} among {names:?}",
            name_of(p),
            if init { "initContainer" } else { "container" }
        )
    })
}

/// Names of a pod's containers (`init` picks initContainers), in order.
fn names(p: &Pod, init: bool) -> Vec<String> {
    p.spec
        .iter()
        .flat_map(|s| {
            if init {
                s.init_containers.clone().unwrap_or_default()
            } else {
                s.containers.clone()
            }
        })
        .map(|c| c.name)
        .collect()
}

/// The value of env `name` of a container.
fn env<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

/// Checks that `r` is the API's refusal, with a message containing `reason`.
fn refused<T>(r: Result<T, kube::Error>, what: &str, reason: &str) -> anyhow::Result<()> {
    match r {
        Ok(_) => bail!("{what} was admitted, want a refusal saying {reason:?}"),
        Err(kube::Error::Api(s)) if s.message.contains(reason) => Ok(()),
        Err(e) => bail!(
            "{what}: want a refusal saying {reason:?}, got {}",
            refusal(e)
        ),
    }
}

/// One admission case: a SidecarSet over the pods of the case, the pod, and what the webhook
/// must have made of it.
struct Case {
    name: &'static str,
    /// The SidecarSet's spec additions (its containers, initContainers, ...).
    sidecarset: Value,
    /// Labels of the pod besides `injection-case`.
    pod_labels: Value,
    /// The pod's spec.
    pod: Value,
    check: fn(&Pod) -> anyhow::Result<()>,
}

/// Creates every case's SidecarSet, then admits every case's pod and checks it.
async fn injection_cases(ctx: Ctx, cases: Vec<Case>) -> anyhow::Result<()> {
    ctx.step("every case's SidecarSet is created and observed", async {
        futures::future::try_join_all(cases.iter().map(|c| {
            let ctx = &ctx;
            async move {
                let name = ctx.unique(c.name);
                sidecarset(ctx, &name, c.name, json!({}), c.sidecarset.clone()).await
            }
        }))
        .await?;
        Ok(())
    })
    .await?;
    for c in &cases {
        ctx.step(
            &format!("case {}: the webhook injects its pod as expected", c.name),
            async {
                let p = admit(&ctx, c.name, c.name, c.pod_labels.clone(), c.pod.clone())
                    .await
                    .map_err(refusal)
                    .with_context(|| format!("case {}: admit its pod", c.name))?;
                (c.check)(&p).with_context(|| format!("case {}", c.name))?;
                Ok(())
            },
        )
        .await?;
    }
    Ok(())
}

/// transferEnv entries naming the source container directly (envName, envNames) and through
/// the pod label `env-source` (fieldRef).
fn transfer_env() -> Value {
    json!([
        {"sourceContainerName": "main", "envName": "A"},
        {"sourceContainerName": "main", "envNames": ["B", "C"]},
        {"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v1",
            "fieldPath": "metadata.labels['env-source']"}}, "envName": "X"}
    ])
}

async fn transfer_and_hot_upgrade(ctx: Ctx) -> anyhow::Result<()> {
    injection_cases(ctx.clone(), transfer_and_hot_upgrade_cases()).await?;
    ctx.step("a sidecar's upgradeType cannot change", async {
        // A sidecar's upgradeType cannot change once set.
        let cold = json!([{"op": "replace",
            "path": "/spec/containers/0/upgradeStrategy/upgradeType", "value": "ColdUpgrade"}]);
        let hot = ctx.unique("hot");
        refused(
            ctx.json_patch("apps.kruise.io/v1alpha1", "SidecarSet", &hot, cold)
                .await,
            "changing the upgradeType of sidecar proxy from HotUpgrade to ColdUpgrade",
            "upgradeType is immutable",
        )?;
        Ok(())
    })
    .await?;
    ctx.step(
        "a transferEnv fieldRef in apiVersion v2 is refused",
        async {
            // A fieldRef naming the source container reads the pod in API version v1 (the default);
            // another version is refused.
            let v2_ref = json!({"containers": [sidecar("env-sidecar", json!({"transferEnv": [
            {"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v2",
                "fieldPath": "metadata.labels['env-source']"}}, "envName": "X"}]}))]});
            let m = sidecarset_manifest(
                &ctx,
                &ctx.unique("noversion"),
                "noversion",
                json!({}),
                v2_ref,
            );
            refused(
                ctx.create(m).await,
                "a transferEnv fieldRef in apiVersion v2",
                "unsupported pod version: v2",
            )
        },
    )
    .await
}

fn transfer_and_hot_upgrade_cases() -> Vec<Case> {
    let env_pod = json!({"containers": [
        app_container("main", json!({"env": [
            {"name": "A", "value": "a-main"}, {"name": "B", "value": "b-main"},
            {"name": "C", "value": "c-main"}, {"name": "X", "value": "x-main"}]})),
        app_container("peer", json!({"env": [
            {"name": "A", "value": "a-peer"}, {"name": "X", "value": "x-peer"}]}))
    ]});
    let volume_pod = json!({
        "initContainers": [app_container("app-init", json!({"command": ["true"]}))],
        "containers": [app_container("main", json!({
            "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}))],
        "volumes": [{"name": "cache", "emptyDir": {}}]
    });
    let hot = |extra: Value| {
        let mut s = json!({"upgradeStrategy": {"upgradeType": "HotUpgrade",
            "hotUpgradeEmptyImage": EMPTY_IMAGE}});
        crate::suites::common::merge(&mut s, extra);
        s
    };
    vec![
        Case {
            name: "env",
            sidecarset: json!({
                "containers": [sidecar("env-sidecar", json!({"transferEnv": transfer_env()}))],
                "initContainers": [sidecar("env-init",
                    json!({"command": ["true"], "transferEnv": transfer_env()}))]
            }),
            pod_labels: json!({"env-source": "peer"}),
            pod: env_pod,
            check: check_transfer_env,
        },
        Case {
            name: "init",
            sidecarset: json!({
                "containers": [sidecar("keep-alive", json!({}))],
                "initContainers": [
                    sidecar("shared-init", json!({"command": ["true"],
                        "shareVolumePolicy": {"type": "enabled"}})),
                    // The CRD describes podInjectPolicy as not applying to initContainers;
                    // since native sidecar support (v1.7.0) the webhook orders injected init
                    // containers by it as it does containers.
                    sidecar("unshared-init", json!({"command": ["true"],
                        "podInjectPolicy": "BeforeAppContainer",
                        "shareVolumePolicy": {"type": "disabled"}}))
                ]
            }),
            pod_labels: json!({}),
            pod: volume_pod,
            check: check_init_volumes_and_order,
        },
        Case {
            name: "hot",
            sidecarset: json!({
                // Native sidecars (init containers that keep running) are not updated in
                // place, so the SidecarSet must not roll them.
                "updateStrategy": {"type": "NotUpdate"},
                "containers": [
                    sidecar("proxy", hot(json!({}))),
                    sidecar("cold", json!({"upgradeStrategy": {"upgradeType": "ColdUpgrade"}}))
                ],
                "initContainers": [sidecar("agent", hot(json!({"restartPolicy": "Always"})))]
            }),
            pod_labels: json!({}),
            pod: json!({"containers": [app_container("main", json!({}))]}),
            check: check_hot_upgrade,
        },
    ]
}

fn check_transfer_env(p: &Pod) -> anyhow::Result<()> {
    for (name, init) in [("env-sidecar", false), ("env-init", true)] {
        let c = find(p, name, init)?;
        let got: Vec<Option<&str>> = ["A", "B", "C", "X"].iter().map(|e| env(c, e)).collect();
        ensure!(
            got == [
                Some("a-main"),
                Some("b-main"),
                Some("c-main"),
                Some("x-peer")
            ],
            "{name}: envs A, B, C, X are {got:?}, want A/B/C from main (envName, envNames) and X from peer (named by label env-source)"
        );
        ensure!(
            env(c, "IS_INJECTED") == Some("true"),
            "{name}: IS_INJECTED is {:?}",
            env(c, "IS_INJECTED")
        );
    }
    Ok(())
}

fn check_init_volumes_and_order(p: &Pod) -> anyhow::Result<()> {
    let inits = names(p, true);
    ensure!(
        inits == ["unshared-init", "app-init", "shared-init"],
        "initContainers {inits:?}: want unshared-init (podInjectPolicy BeforeAppContainer) before the pod's own, shared-init (no policy) after them"
    );
    let mounts = |name| -> anyhow::Result<Vec<String>> {
        Ok(find(p, name, true)?
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.clone())
            .collect())
    };
    let (shared, unshared) = (mounts("shared-init")?, mounts("unshared-init")?);
    ensure!(
        shared.contains(&"/cache".to_string()),
        "shared-init (shareVolumePolicy enabled) mounts {shared:?}, want the app's /cache"
    );
    ensure!(
        !unshared.contains(&"/cache".to_string()),
        "unshared-init (shareVolumePolicy disabled) mounts the app's volumes: {unshared:?}"
    );
    Ok(())
}

fn check_hot_upgrade(p: &Pod) -> anyhow::Result<()> {
    let (containers, inits) = (names(p, false), names(p, true));
    for (sidecar, init, all) in [("proxy", false, &containers), ("agent", true, &inits)] {
        ensure!(
            !all.contains(&sidecar.to_string()),
            "{sidecar} (HotUpgrade) was injected as is: {all:?}"
        );
        let (work, idle) = (
            find(p, &format!("{sidecar}-1"), init)?,
            find(p, &format!("{sidecar}-2"), init)?,
        );
        let images = (work.image.as_deref(), idle.image.as_deref());
        ensure!(
            images == (Some(SIDECAR_V1), Some(EMPTY_IMAGE)),
            "{sidecar}: images of the pair (-1, -2) are {images:?}, want ({SIDECAR_V1}, {EMPTY_IMAGE})"
        );
        ensure!(
            work.command == idle.command,
            "{sidecar}: the idle half runs {:?}, the working one {:?}",
            idle.command,
            work.command
        );
    }
    ensure!(
        containers.contains(&"cold".to_string()) && !containers.contains(&"cold-1".to_string()),
        "cold (ColdUpgrade) should be injected once: {containers:?}"
    );
    let working = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kruise.io/sidecarset-working-hotupgrade-container"))
        .context("no working hot-upgrade container annotation")?;
    let working: BTreeMap<String, String> = serde_json::from_str(working)?;
    ensure!(
        working.get("proxy").map(String::as_str) == Some("proxy-1"),
        "working hot-upgrade containers {working:?}, want proxy -> proxy-1"
    );
    Ok(())
}

/// A resource quantity as a number (cores or bytes).
fn quantity(q: &str) -> Option<f64> {
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (n, unit) = q.split_at(split);
    let scale = match unit {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n.parse::<f64>().ok()? * scale)
}

/// Checks a container's resources: `want` is [limits cpu, limits memory, requests cpu,
/// requests memory].
fn check_resources(c: &Container, want: [&str; 4]) -> anyhow::Result<()> {
    let r = c.resources.clone().unwrap_or_default();
    let get =
        |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         k: &str| m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone());
    let got = [
        get(&r.limits, "cpu"),
        get(&r.limits, "memory"),
        get(&r.requests, "cpu"),
        get(&r.requests, "memory"),
    ];
    let same =
        got.iter().zip(want).all(
            |(g, w)| match (g.as_deref().and_then(quantity), quantity(w)) {
                (Some(g), Some(w)) => (g - w).abs() <= w.abs() * 1e-9,
                _ => false,
            },
        );
    ensure!(
        same,
        "{}: limits cpu/memory, requests cpu/memory are {got:?}, want {want:?}",
        c.name
    );
    Ok(())
}

async fn resources_and_devices(ctx: Ctx) -> anyhow::Result<()> {
    let targets = "^(main|aux)$";
    // Sum over main and aux: limits 500m / 192Mi, requests 150m / 96Mi.
    let by_sum = json!({"targetContainersMode": "sum", "targetContainersNameRegex": targets,
        "resourcesExpr": {
            "limits": {"cpu": "cpu * 50%", "memory": "memory * 2 / 3"},
            "requests": {"cpu": "max(cpu * 50%, 100m)", "memory": "min(memory, 64Mi)"}}});
    // Max over main and aux: limits 300m / 128Mi, requests 100m / 64Mi.
    let by_max = json!({"targetContainersMode": "max", "targetContainersNameRegex": targets,
        "resourcesExpr": {
            "limits": {"cpu": "cpu", "memory": "memory"},
            "requests": {"cpu": "cpu * 50%", "memory": "memory"}}});
    let res = "res";
    ctx.step(
        "a SidecarSet sizing its sidecars by resourcesPolicy",
        async {
            sidecarset(
                &ctx,
                &ctx.unique(res),
                res,
                json!({}),
                json!({
                    "updateStrategy": {"type": "NotUpdate"},
                    "containers": [sidecar("sized", json!({"resourcesPolicy": by_sum}))],
                    "initContainers": [sidecar("sized-init",
                        json!({"restartPolicy": "Always", "resourcesPolicy": by_max}))]
                }),
            )
            .await?;
            Ok(())
        },
    )
    .await?;
    ctx.step("the sum and the max of the selected containers size the sidecars", async {
        let sized = |cpu: &str, mem: &str, rcpu: &str, rmem: &str| json!({"limits": {"cpu": cpu, "memory": mem}, "requests": {"cpu": rcpu, "memory": rmem}});
        let pod = json!({"containers": [
            app_container("main", json!({"resources": sized("200m", "128Mi", "100m", "64Mi")})),
            app_container("aux", json!({"resources": sized("300m", "64Mi", "50m", "32Mi")})),
            // Not selected by the regex: it would change every sum and max.
            app_container("other", json!({"resources": sized("1", "1Gi", "500m", "512Mi")}))
        ]});
        let p = admit(&ctx, "sized", res, json!({}), pod)
            .await
            .map_err(refusal)
            .context("admit a pod with main, aux and other")?;
        check_resources(find(&p, "sized", false)?, ["250m", "128Mi", "100m", "64Mi"])
            .context("sum mode")?;
        check_resources(
            find(&p, "sized-init", true)?,
            ["300m", "128Mi", "50m", "64Mi"],
        )
        .context("max mode (native init sidecar)")?;
        Ok(())
    })
    .await?;
    ctx.step("a pod with no selected container is refused", async {
        let unmatched = json!({"containers": [app_container("solo", json!({}))]});
        refused(
            admit(&ctx, "unmatched", res, json!({}), unmatched).await,
            &format!("a pod with no container matching {targets}"),
            "no containers match the regex pattern",
        )?;
        Ok(())
    })
    .await?;

    ctx.step("resources beside resourcesPolicy, or resourcesPolicy on a plain init container, are refused", async {
        // The SidecarSet webhook refuses resources next to resourcesPolicy, and resourcesPolicy on
        // an init container that is not a native sidecar.
        let refusals = [
            (
                "both",
                "resourcesPolicy and resources cannot be configured together",
                json!({"containers": [sidecar("both", json!({"resourcesPolicy": by_sum,
                    "resources": {"limits": {"cpu": "100m"}}}))]}),
            ),
            (
                "plain-init",
                "resourcesPolicy is only supported for containers with RestartPolicy Always",
                json!({"containers": [sidecar("c", json!({}))],
                    "initContainers": [sidecar("plain-init", json!({"command": ["true"],
                        "resourcesPolicy": by_max}))]}),
            ),
        ];
        for (what, reason, spec) in refusals {
            let m = sidecarset_manifest(&ctx, &ctx.unique(what), what, json!({}), spec);
            refused(
                ctx.create(m).await,
                &format!("a SidecarSet with resourcesPolicy on {what}"),
                reason,
            )?;
        }
        Ok(())
    })
    .await?;

    let dev = "dev";
    ctx.step("a SidecarSet with sidecars sharing and not sharing block devices", async {
        sidecarset(
            &ctx,
            &ctx.unique(dev),
            dev,
            json!({}),
            json!({
                "containers": [
                    sidecar("dev-shared", json!({"shareVolumeDevicePolicy": {"type": "enabled"}})),
                    sidecar("dev-unshared", json!({"shareVolumeDevicePolicy": {"type": "disabled"}}))
                ],
                "initContainers": [sidecar("dev-init", json!({"command": ["true"],
                    "shareVolumeDevicePolicy": {"type": "enabled"}}))]
            }),
        )
        .await?;
        Ok(())
    })
    .await?;
    ctx.step(
        "only the sharing sidecars get the app's block device",
        async {
            let pod = json!({
                "containers": [app_container("main", json!({
                    "volumeDevices": [{"name": "disk", "devicePath": "/dev/xvdb"}]}))],
                "volumes": [{"name": "disk", "persistentVolumeClaim": {"claimName": "disk"}}]
            });
            let p = admit(&ctx, "devices", dev, json!({}), pod)
                .await
                .map_err(refusal)
                .context("admit a pod with a block device")?;
            let devices = |name, init| -> anyhow::Result<Vec<String>> {
                Ok(find(&p, name, init)?
                    .volume_devices
                    .iter()
                    .flatten()
                    .map(|d| d.device_path.clone())
                    .collect())
            };
            for (name, init, want) in [
                ("dev-shared", false, vec!["/dev/xvdb".to_string()]),
                ("dev-unshared", false, vec![]),
                ("dev-init", true, vec!["/dev/xvdb".to_string()]),
            ] {
                let got = devices(name, init)?;
                ensure!(
                    got == want,
                    "{name}: volumeDevices {got:?}, want {want:?} (shareVolumeDevicePolicy)"
                );
            }
            Ok(())
        },
    )
    .await
}

/// The sidecar image the webhook injects into a dry-run pod of the case `case`.
async fn injected_image(ctx: &Ctx, case: &str, labels: Value) -> anyhow::Result<String> {
    let spec = json!({"containers": [app_container("main", json!({}))]});
    let p = admit(ctx, "revision", case, labels, spec)
        .await
        .map_err(refusal)
        .context("admit a pod")?;
    Ok(find(&p, "logger", false)?.image.clone().unwrap_or_default())
}

/// Patches the SidecarSet `name` and waits until its controller has observed the change
/// (`status.latestRevision` then names the revision of its current spec).
async fn change(ctx: &Ctx, name: &str, patch: Value) -> anyhow::Result<String> {
    ctx.patch("apps.kruise.io/v1alpha1", "SidecarSet", name, patch)
        .await
        .map_err(refusal)?;
    let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "SidecarSet").await?;
    let what = format!("SidecarSet {name}: the change observed");
    let o = crate::scenario::wait::until(&api, name, &what, ctx.timeouts.converge, |o| {
        let check = match o {
            Some(o) => Check::when(
                observed(&o) && !text(&o, "latestRevision").is_empty(),
                || format!("status {}", crate::scenario::status(&o)),
            ),
            None => Check::Failed("the SidecarSet is gone".into()),
        };
        std::future::ready(check).boxed()
    })
    .await?
    .context("the SidecarSet is gone")?;
    Ok(text(&o, "latestRevision"))
}

/// A SidecarSet over the pods of `case` whose sidecar `logger` took each of `images` in turn,
/// the n-th labelled with custom version `v<n>`: its name and its revisions, oldest first.
async fn revisions(
    ctx: &Ctx,
    case: &str,
    images: &[&str],
) -> anyhow::Result<(String, Vec<String>)> {
    let name = ctx.unique(case);
    let logger =
        |image: &str| json!([{"name": "logger", "image": image, "command": ["sleep", "3600"]}]);
    sidecarset(
        ctx,
        &name,
        case,
        json!({CUSTOM_VERSION: "v1"}),
        json!({"containers": logger(images[0])}),
    )
    .await?;
    let mut revs = vec![change(ctx, &name, json!({})).await?];
    for (i, image) in images.iter().enumerate().skip(1) {
        let rev = change(
            ctx,
            &name,
            json!({"metadata": {"labels": {CUSTOM_VERSION: format!("v{}", i + 1)}},
                "spec": {"containers": logger(image)}}),
        )
        .await?;
        ensure!(
            !revs.contains(&rev),
            "changing the sidecar image to {image} made no new revision: {rev}"
        );
        revs.push(rev);
    }
    let got = injected_image(ctx, case, json!({})).await?;
    let latest = images[images.len() - 1];
    ensure!(
        got == latest,
        "without injectionStrategy.revision the pod got {got}, want the latest {latest}"
    );
    Ok((name, revs))
}

async fn injection_revision(ctx: Ctx) -> anyhow::Result<()> {
    let case = "rev";
    let images = [SIDECAR_V1, SIDECAR_V2, EMPTY_IMAGE];
    let (name, revs) = ctx
        .step(
            "a SidecarSet of three revisions injects the latest",
            async {
                let (name, revs) = revisions(&ctx, case, &images).await?;
                Ok((name, revs))
            },
        )
        .await?;
    ctx.step("customVersion v1 injects the first revision's sidecar", async {
        change(
            &ctx,
            &name,
            json!({"spec": {"injectionStrategy": {"revision": {"customVersion": "v1", "policy": "Always"}}}}),
        )
        .await?;
        let got = injected_image(&ctx, case, json!({})).await?;
        ensure!(
            got == images[0],
            "with revision customVersion v1 the pod got {got}, want {} of revision {}",
            images[0],
            revs[0]
        );
        Ok(())
    })
    .await?;
    ctx.step("revisionName injects the second revision's sidecar", async {
        change(
            &ctx,
            &name,
            json!({"spec": {"injectionStrategy": {"revision": {"customVersion": null, "revisionName": revs[1]}}}}),
        )
        .await?;
        let got = injected_image(&ctx, case, json!({})).await?;
        ensure!(
            got == images[1],
            "with revisionName {} the pod got {got}, want {}",
            revs[1],
            images[1]
        );
        Ok(())
    })
    .await?;
    ctx.step("an unknown customVersion is refused", async {
        let unknown = json!({"spec": {"injectionStrategy": {"revision":
            {"revisionName": null, "customVersion": "v9"}}}});
        refused(
            ctx.patch("apps.kruise.io/v1alpha1", "SidecarSet", &name, unknown)
                .await,
            "injectionStrategy.revision.customVersion v9 (no such revision)",
            "Cannot find specific ControllerRevision",
        )
    })
    .await
}

async fn partial_injection_revision(ctx: Ctx) -> anyhow::Result<()> {
    let case = "partial";
    let (name, revs) = ctx
        .step("a SidecarSet of two revisions injects the latest", async {
            let (name, revs) = revisions(&ctx, case, &[SIDECAR_V1, SIDECAR_V2]).await?;
            Ok((name, revs))
        })
        .await?;
    ctx.step("under policy Partial a pod the update selector skips gets the named revision", async {
        change(
            &ctx,
            &name,
            json!({"spec": {
                "injectionStrategy": {"revision": {"revisionName": revs[0], "policy": "Partial"}},
                "updateStrategy": {"selector": {"matchLabels": {"canary": "true"}}}
            }}),
        )
        .await?;
        let got = injected_image(&ctx, case, json!({})).await?;
        ensure!(
            got == SIDECAR_V1,
            "with revisionName {} (policy Partial) a pod the update selector skips got {got}, want {SIDECAR_V1}",
            revs[0]
        );
        Ok(())
    })
    .await?;
    ctx.step("a pod the update selector picks gets the latest", async {
        // Without a percentage partition, every pod the update selector picks gets the latest.
        let got = injected_image(&ctx, case, json!({"canary": "true"})).await?;
        ensure!(
            got == SIDECAR_V2,
            "with revisionName {} (policy Partial) a pod the update selector picks got {got}, want the latest {SIDECAR_V2}",
            revs[0]
        );
        Ok(())
    })
    .await
}

/// What a watch of the pods saw while a sidecar image change rolled through them.
#[derive(Default, Debug)]
struct Rollout {
    /// Pods (their `order` label) in the order their sidecars were changed to the new image.
    order: Vec<String>,
    /// The most pods seen changed but not yet running the new image ready.
    max_updating: usize,
}

/// Whether the pod's `logger` sidecar is specified with `image`.
fn specified(p: &Pod, image: &str) -> bool {
    p.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .any(|c| c.name == "logger" && c.image.as_deref() == Some(image))
    })
}

/// Watches the pods `selector` until all `total` run the sidecar `image` ready, recording in
/// which order their sidecars were changed and how many were updating at once.
async fn watch_rollout(
    ctx: &Ctx,
    selector: &str,
    total: usize,
    image: &'static str,
    started: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Rollout> {
    let config = watcher::Config::default().labels(selector);
    let mut stream = watcher(ctx.api::<Pod>(), config).boxed();
    let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
    let mut seen = Rollout::default();
    let mut started = Some(started);
    let deadline = tokio::time::Instant::now() + ctx.timeouts.converge;
    let what = format!("{total} pods {selector} running sidecar {image}");
    loop {
        let ev = tokio::select! {
            ev = stream.next() => ev,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "timed out after {:?} waiting for {what}: order so far {:?}",
                ctx.timeouts.converge, seen.order
            ),
        };
        match ev {
            Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => {
                pods.insert(name_of(&p), p);
            }
            Some(Ok(watcher::Event::Delete(p))) => bail!("pod {} was deleted", name_of(&p)),
            Some(Ok(watcher::Event::Init)) => pods.clear(),
            Some(Ok(watcher::Event::InitDone)) => {
                if let Some(s) = started.take() {
                    let _ = s.send(());
                }
            }
            Some(Err(e)) => bail!("watch pods {selector}: {e}"),
            None => bail!("the watch of pods {selector} ended"),
        }
        for (name, p) in &pods {
            let order = label(p, "order").unwrap_or(name).to_string();
            if specified(p, image) && !seen.order.contains(&order) {
                seen.order.push(order);
            }
        }
        let done = |p: &Pod| {
            ready(p) && container_status(p, "logger").is_some_and(|s| same_image(&s.image, image))
        };
        let updating = pods
            .values()
            .filter(|p| specified(p, image) && !done(p))
            .count();
        seen.max_updating = seen.max_updating.max(updating);
        if pods.len() == total && pods.values().all(|p| specified(p, image) && done(p)) {
            return Ok(seen);
        }
    }
}

/// One update-order case: pods labelled `order=<n>` (and `zone`), a strategy, and what the
/// rollout must show.
struct OrderCase {
    case: &'static str,
    /// Zone label of the pods with order 1, 2, ...
    zones: &'static [&'static str],
    strategy: Value,
    max_updating: usize,
    check: fn(&[String]) -> Result<(), String>,
}

async fn update_order(ctx: Ctx) -> anyhow::Result<()> {
    let by_order = json!({"orderPriority": [{"orderedKey": "order"}]});
    let cases = [
        OrderCase {
            case: "priority",
            zones: &["a", "a", "a"],
            strategy: json!({"maxUnavailable": 1, "priorityStrategy": by_order}),
            max_updating: 1,
            // The highest order value first, one at a time.
            check: |order| {
                (order == ["3", "2", "1"])
                    .then_some(())
                    .ok_or_else(|| format!("order {order:?}, want 3, 2, 1"))
            },
        },
        OrderCase {
            case: "scatter",
            zones: &["b", "b", "a", "a"],
            strategy: json!({"maxUnavailable": "50%", "priorityStrategy": by_order,
                "scatterStrategy": [{"key": "zone", "value": "a"}]}),
            max_updating: 2,
            // By priority alone the first batch would be 4 and 3 (both zone a); the scatter
            // term spreads zone a so that the first batch is 4 and 2.
            check: |order| {
                let first: BTreeSet<&str> = order.iter().take(2).map(String::as_str).collect();
                (first == BTreeSet::from(["4", "2"]))
                    .then_some(())
                    .ok_or_else(|| format!("order {order:?}, want 4 and 2 first"))
            },
        },
    ];
    ctx.step(
        "each case's sidecar image change reaches its pods in order, within maxUnavailable",
        async {
            futures::future::try_join_all(cases.iter().map(|c| order_case(&ctx, c))).await?;
            Ok(())
        },
    )
    .await?;
    Ok(())
}

async fn order_case(ctx: &Ctx, case: &OrderCase) -> anyhow::Result<()> {
    let name = ctx.unique(case.case);
    sidecarset(
        ctx,
        &name,
        case.case,
        json!({}),
        json!({"updateStrategy": case.strategy,
            "containers": [sidecar("logger", json!({}))]}),
    )
    .await?;
    // The pods' own workload allows as many unavailable pods as the SidecarSet updates at
    // once.
    let total = case.zones.len();
    let mut m = CloneSet::new(case.case).replicas(total as i64).manifest();
    m["spec"]["template"]["metadata"]["labels"]["injection-case"] = json!(case.case);
    m["spec"]["updateStrategy"]["maxUnavailable"] = case.strategy["maxUnavailable"].clone();
    create(ctx, m).await?;
    let selector = format!("injection-case={}", case.case);
    let api = ctx.dyn_api("apps.kruise.io/v1alpha1", "SidecarSet").await?;
    let what = format!("{total} pods with the sidecar, ready");
    wait_pods(ctx, &api, &name, &selector, &what, move |_, pods| {
        let ok = pods
            .iter()
            .filter(|p| ready(p) && specified(p, SIDECAR_V1))
            .count();
        Check::when(ok == total, || {
            format!("{ok} ready with sidecar {SIDECAR_V1}")
        })
    })
    .await?;
    let mut live: Vec<String> = pods(ctx, &selector).await?.iter().map(name_of).collect();
    live.sort();
    for (i, (pod, zone)) in live.iter().zip(case.zones).enumerate() {
        let labels = json!({"metadata": {"labels": {"order": (i + 1).to_string(), "zone": zone}}});
        ctx.patch("v1", "Pod", pod, labels).await.map_err(refusal)?;
    }

    let (started, watching) = tokio::sync::oneshot::channel();
    let watch = watch_rollout(ctx, &selector, total, SIDECAR_V2, started);
    let change = async {
        watching
            .await
            .context("the pod watch stopped before listing")?;
        ctx.json_patch(
            "apps.kruise.io/v1alpha1",
            "SidecarSet",
            &name,
            json!([{"op": "replace", "path": "/spec/containers/0/image", "value": SIDECAR_V2}]),
        )
        .await
        .map_err(refusal)
    };
    let (seen, _) = futures::future::try_join(watch, change).await?;
    (case.check)(&seen.order).map_err(|e| anyhow::anyhow!("{}: {e}", case.case))?;
    ensure!(
        seen.max_updating <= case.max_updating,
        "{}: {} pods were updating at once, maxUnavailable allows {}",
        case.case,
        seen.max_updating,
        case.max_updating
    );
    Ok(())
}
