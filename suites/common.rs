//! Helpers shared by the suites: workload manifests, waits on workloads, pod and event queries.

use std::collections::BTreeMap;

use anyhow::{Context, anyhow};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, status};

pub use crate::scenario::workload::{IMAGE_V1, IMAGE_V2};

/// A CloneSet manifest.
pub fn cloneset(name: &str, replicas: i64, strategy: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": strategy},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": IMAGE_V1}]}
            }
        }
    })
}

/// Adds a volumeClaimTemplate `data` of `size`, mounted by container 0.
pub fn with_data_volume(mut w: Value, size: &str) -> Value {
    w["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "data", "mountPath": "/data"}]);
    w["spec"]["volumeClaimTemplates"] = json!([{
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    }]);
    w
}

/// A node selector term on one label.
pub fn on_nodes(key: &str, value: &str) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]})
}

/// Merge-patches an object.
pub async fn patch(
    ctx: &Ctx,
    api_version: &str,
    kind: &str,
    name: &str,
    body: Value,
) -> Result<DynamicObject, kube::Error> {
    let api = ctx
        .dyn_api(api_version, kind)
        .await
        .map_err(|e| kube::Error::Service(e.into()))?;
    api.patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
}

/// Sets container 0's image with a JSON patch (leaving the rest of the template as it is).
pub async fn set_image(
    ctx: &Ctx,
    api_version: &str,
    kind: &str,
    name: &str,
    image: &str,
) -> anyhow::Result<()> {
    json_patch(
        ctx,
        api_version,
        kind,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}]),
    )
    .await
}

/// Applies a JSON patch (RFC 6902).
pub async fn json_patch(
    ctx: &Ctx,
    api_version: &str,
    kind: &str,
    name: &str,
    ops: Value,
) -> anyhow::Result<()> {
    let api = ctx.dyn_api(api_version, kind).await?;
    let ops: json_patch::Patch = serde_json::from_value(ops)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .map_err(refusal)?;
    Ok(())
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

/// Warning events in the namespace with `reason`, as "object: message".
pub async fn warnings(
    client: &kube::Client,
    ns: &str,
    reason: &str,
) -> Result<Vec<String>, kube::Error> {
    let events: kube::Api<Event> = kube::Api::namespaced(client.clone(), ns);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason))
        .map(|e| {
            format!(
                "{} {}: {}",
                e.involved_object.kind.unwrap_or_default(),
                e.involved_object.name.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect())
}

/// Waits until a workload (CloneSet, Deployment, ...) has `replicas` ready and up to date with
/// its latest spec; fails at once on a Warning event with one of `fatal_reasons`.
pub async fn rolled_out(
    ctx: &Ctx,
    api_version: &str,
    kind: &str,
    name: &str,
    replicas: i64,
    fatal_reasons: &'static [&'static str],
) -> anyhow::Result<DynamicObject> {
    let api = ctx.dyn_api(api_version, kind).await?;
    let client = ctx.client.clone();
    let ns = ctx.namespace.clone();
    let kind_s = kind.to_string();
    let what = format!("{kind} {name} to roll out {replicas} ready replicas");
    let obj = until(&api, name, &what, ctx.timeouts.converge, move |o| {
        let client = client.clone();
        let ns = ns.clone();
        let kind_s = kind_s.clone();
        async move {
            for reason in fatal_reasons {
                match warnings(&client, &ns, reason).await {
                    Ok(w) if !w.is_empty() => return Check::Failed(format!("Warning {reason}: {}", w.join("; "))),
                    Ok(_) => {}
                    Err(e) => return Check::Failed(format!("list events: {e}")),
                }
            }
            let Some(o) = o else {
                return Check::Pending(format!("{kind_s} does not exist"));
            };
            let s = status(&o);
            let observed = s["observedGeneration"].as_i64() == o.metadata.generation;
            let updated_key = if kind_s == "CloneSet" { "updatedReadyReplicas" } else { "updatedReplicas" };
            let ready = s["readyReplicas"].as_i64() == Some(replicas)
                && s["replicas"].as_i64() == Some(replicas)
                && s[updated_key].as_i64() == Some(replicas);
            Check::when(observed && ready, || {
                format!(
                    "generation {:?} observed {}, replicas {} ready {} {updated_key} {} (want {replicas})",
                    o.metadata.generation, s["observedGeneration"], s["replicas"], s["readyReplicas"], s[updated_key]
                )
            })
        }
        .boxed()
    })
    .await?;
    obj.ok_or_else(|| anyhow!("{kind} {name} vanished"))
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

/// An API error as its server message (the text signatures match), other errors as they are.
pub fn refusal(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) => anyhow!("{} ({})", s.message, s.reason),
        other => anyhow::Error::new(other),
    }
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
