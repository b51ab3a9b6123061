//! Helpers shared by the suites: object creation, pod and PVC queries here; the pod readers
//! and the wait over a workload and its pods in [`objects`] (re-exported here); the lifecycle
//! hook cases several workload suites run in [`lifecycle`]. Workloads themselves are built
//! and waited on with [`crate::scenario::workload`].

pub mod lifecycle;
pub mod objects;

pub use objects::*;

use std::collections::BTreeMap;

use anyhow::Context;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, status};

pub use crate::scenario::workload::{IMAGE_V1, IMAGE_V2, refusal};

/// The answer to a write a scenario takes either way: refused by the API (422, 400 or 403:
/// none, the scenario passing by "refused") or admitted (the object, by "admitted"); any other
/// error is the scenario's.
pub fn refused_or_admitted<T>(
    ctx: &Ctx,
    answer: Result<T, kube::Error>,
) -> anyhow::Result<Option<T>> {
    match answer {
        Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 || e.code == 403 => {
            ctx.passed_by("refused");
            Ok(None)
        }
        Err(e) => Err(e.into()),
        Ok(o) => {
            ctx.passed_by("admitted");
            Ok(Some(o))
        }
    }
}

/// A node selector term on one label.
pub fn on_nodes(key: &str, value: &str) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]})
}

/// Pods matching `selector` that are not being deleted.
pub async fn pods(ctx: &Ctx, selector: &str) -> anyhow::Result<Vec<Pod>> {
    Ok(ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// PVCs matching `selector` that are not being deleted.
pub async fn claims(ctx: &Ctx, selector: &str) -> anyhow::Result<Vec<PersistentVolumeClaim>> {
    Ok(ctx
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Name -> UID of pods matching `selector`.
pub async fn pod_uids(ctx: &Ctx, selector: &str) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(pods(ctx, selector)
        .await?
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect())
}

/// Creates an object, with the API's refusal as the error.
pub async fn create(ctx: &Ctx, obj: Value) -> anyhow::Result<DynamicObject> {
    let what = format!(
        "create {} {}",
        obj["kind"].as_str().unwrap_or_default(),
        obj["metadata"]["name"].as_str().unwrap_or_default()
    );
    ctx.create(obj).await.map_err(refusal).context(what)
}

/// Creates an object and waits until its controller has observed it
/// (`status.observedGeneration`), so that webhooks reading the controller's cache see it.
pub async fn create_observed(ctx: &Ctx, obj: Value) -> anyhow::Result<DynamicObject> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let created = create(ctx, obj).await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let generation = created.metadata.generation;
    let api = ctx.dyn_api(&api_version, &kind).await?;
    let what = format!("{kind} {name} observed by its controller");
    until(&api, &name, &what, ctx.timeouts.converge, move |o| {
        async move {
            match o {
                Some(o) => Check::when(
                    status(&o)["observedGeneration"].as_i64() >= generation,
                    || format!("status {}", status(&o)),
                ),
                None => Check::Pending("absent".into()),
            }
        }
        .boxed()
    })
    .await?;
    Ok(created)
}

/// The container `name`'s status of a pod.
pub fn container_status(
    p: &Pod,
    name: &str,
) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
        .cloned()
}

/// Waits for pod `name` of the scenario's namespace until `check` holds.
pub async fn wait_pod<F>(ctx: &Ctx, name: &str, what: &str, check: F) -> anyhow::Result<Pod>
where
    F: Fn(&Pod) -> Check + Send + Sync + Clone + 'static,
{
    let pod = until(
        &ctx.api::<Pod>(),
        name,
        what,
        ctx.timeouts.converge,
        move |p: Option<Pod>| {
            let check = check.clone();
            async move {
                match p {
                    None => Check::Pending("no such pod".into()),
                    Some(p) => check(&p),
                }
            }
            .boxed()
        },
    )
    .await?;
    pod.ok_or_else(|| anyhow::anyhow!("pod {name} vanished"))
}

/// (container ID, restart count, ready) of container `name`.
pub fn container_state(p: &Pod, name: &str) -> (String, i32, bool) {
    container_status(p, name)
        .map(|c| (c.container_id.unwrap_or_default(), c.restart_count, c.ready))
        .unwrap_or_default()
}

/// Waits for object `name` (of `api_version` `kind`, in the scenario's namespace, or the
/// cluster's if the kind is cluster-scoped) until `check` holds.
pub async fn wait_object<F>(
    ctx: &Ctx,
    api_version: &str,
    kind: &str,
    name: &str,
    what: &str,
    check: F,
) -> anyhow::Result<DynamicObject>
where
    F: Fn(&DynamicObject) -> Check + Send + Sync + Clone + 'static,
{
    let api = ctx.dyn_api(api_version, kind).await?;
    let kind = kind.to_string();
    let o = until(&api, name, what, ctx.timeouts.converge, move |o| {
        let (check, kind) = (check.clone(), kind.clone());
        async move {
            match o {
                None => Check::Pending(format!("the {kind} does not exist")),
                Some(o) => check(&o),
            }
        }
        .boxed()
    })
    .await?;
    o.ok_or_else(|| anyhow::anyhow!("{name} vanished"))
}
