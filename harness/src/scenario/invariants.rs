//! Checks run after every scenario, whatever it asked: no orphaned pods or PVCs in its
//! namespace, no unexpected Warning events. (That the manager neither exited nor restarted is
//! checked by the runner with [`crate::controller::Manager::check`].)

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams};
use kube::core::ObjectMeta;

use crate::wait::Check;

/// Why a pod or PVC without any owner reference is an orphan.
pub const NO_OWNER: &str = "no owner reference";

/// The expected violation of a scenario that creates pods or PVCs of its own, without owners:
/// the orphan check then counts only objects whose owner is gone.
pub const BARE_OBJECTS: &str = "bare-objects";

/// Pods and PVCs in `namespace` without a controller owner, or whose owner no longer exists,
/// named with their labels.
pub async fn orphans(client: &kube::Client, namespace: &str) -> Result<Vec<String>, kube::Error> {
    let mut found = vec![];
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for p in pods.list(&ListParams::default()).await?.items {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(why) = orphaned(client, namespace, &p.metadata).await? {
            found.push(describe("pod", &p.metadata, &why));
        }
    }
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    for c in pvcs.list(&ListParams::default()).await?.items {
        if c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(why) = orphaned(client, namespace, &c.metadata).await? {
            found.push(describe("pvc", &c.metadata, &why));
        }
    }
    Ok(found)
}

/// [`orphans`] that are still there `grace` later: the garbage collector deletes the
/// dependents of a deleted owner asynchronously (it lags on a loaded host), so an orphan only
/// counts once it outlived that. Returns at once when there is none.
pub async fn lasting_orphans(
    client: &kube::Client,
    namespace: &str,
    grace: std::time::Duration,
) -> Result<Vec<String>, kube::Error> {
    if orphans(client, namespace).await?.is_empty() {
        return Ok(vec![]);
    }
    let collected = crate::wait::poll(
        "orphans to be collected",
        grace,
        std::time::Duration::from_secs(1),
        || {
            let (client, namespace) = (client.clone(), namespace.to_string());
            async move {
                match orphans(&client, &namespace).await {
                    Ok(o) => Check::when(o.is_empty(), || format!("{} left", o.len())),
                    Err(e) => Check::Pending(e.to_string()),
                }
            }
        },
    )
    .await;
    if collected.is_ok() {
        return Ok(vec![]);
    }
    orphans(client, namespace).await
}

fn describe(kind: &str, meta: &ObjectMeta, why: &str) -> String {
    let labels: BTreeMap<String, String> = meta.labels.clone().unwrap_or_default();
    format!(
        "orphaned {kind} {} (labels {}): {why}",
        meta.name.clone().unwrap_or_default(),
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    )
}

async fn orphaned(
    client: &kube::Client,
    namespace: &str,
    meta: &ObjectMeta,
) -> Result<Option<String>, kube::Error> {
    let refs = meta.owner_references.clone().unwrap_or_default();
    let Some(owner) = refs
        .iter()
        .find(|r| r.controller == Some(true))
        .or(refs.first())
    else {
        return Ok(Some(NO_OWNER.into()));
    };
    let (group, version) = owner
        .api_version
        .split_once('/')
        .unwrap_or(("", owner.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &ar),
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
    };
    Ok(match api.get_opt(&owner.name).await? {
        Some(o) if o.metadata.uid.as_deref() == Some(owner.uid.as_str()) => None,
        _ => Some(format!(
            "owner {} {} ({}) no longer exists",
            owner.kind, owner.name, owner.uid
        )),
    })
}

/// Optimistic-concurrency conflicts between Kubernetes' own components (the object changed
/// under them, or the scheduler's volume cache lagged one write), and a scheduling attempt of a
/// pod the scheduler had already assumed onto a node (its cache refuses the second assume; the
/// first binding stands), a binding of a pod deleted meanwhile, and a pod scheduled a moment
/// before the PVC its controller creates for it (the scheduler's PVC lister not having it yet,
/// or its claim cache, which the same informer feeds a moment after the lister, not having it
/// yet: `error getting PVC … could not find v1.PersistentVolumeClaim`; the pod is tried
/// again), and a kubelet's first volume mount of a pod in
/// a new namespace (any ConfigMap or Secret volume) timing out while the Node authorizer learns
/// of the pod, or asked before the kubelet's ConfigMap manager has registered the pod (`"kube-root-ca.crt" not registered`),
/// or a claim or a service account token the Node authorizer does not yet tie to the pod's
/// node (`no relationship found between node`; the kubelet retries each), or an exec probe the kubelet started as the
/// container's task ended (`no running task found`, or `container is in CONTAINER_EXITED
/// state` when the runtime saw the exit first; the next probe finds the container's new
/// state): retried or moot, not a finding.
pub fn transient(message: &str) -> bool {
    if message.contains("probe errored: ")
        && (message.contains("no running task found")
            || message.contains("container is in CONTAINER_EXITED state"))
    {
        return true;
    }
    message.starts_with("MountVolume.SetUp failed for volume \"")
        && (message
            .ends_with("failed to sync configmap cache: timed out waiting for the condition")
            || message
                .ends_with("failed to sync secret cache: timed out waiting for the condition")
            || message.ends_with("/\"kube-root-ca.crt\" not registered"))
        || ((message.contains("failed to fetch PVC from API server")
            || message.contains("failed to fetch token:"))
            && message.contains("no relationship found between node"))
        || message.contains(
            "the object has been modified; please apply your changes to the latest version",
        )
        || (message.contains("VolumeBinding") && message.contains("is out of sync (stored:"))
        || message.ends_with("is in the cache, so can't be assumed")
        || (message.contains("running Bind plugin")
            && (message.contains("is being deleted, cannot be assigned to a host")
                || message.ends_with("\" not found")))
        || (message.contains("running PreBind plugin \"VolumeBinding\"")
            && message.contains("pod does not exist any more"))
        || (message.starts_with("0/")
            && message.contains("nodes are available: persistentvolumeclaim \"")
            && message.contains("\" not found."))
        || (message.contains("running PreFilter plugin \"VolumeBinding\": error getting PVC \"")
            && message.contains(": could not find v1.PersistentVolumeClaim \""))
}

/// The Warning events in `namespace`, listed once.
pub async fn warning_events(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<Event>, kube::Error> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut list = events.list(&ListParams::default()).await?.items;
    list.retain(|e| e.type_.as_deref() == Some("Warning"));
    Ok(list)
}

/// An event as "Warning <reason> on <kind> <name>: <message>".
pub fn describe_warning(e: &Event) -> String {
    format!(
        "Warning {} on {} {}: {}",
        e.reason.as_deref().unwrap_or_default(),
        e.involved_object.kind.as_deref().unwrap_or_default(),
        e.involved_object.name.as_deref().unwrap_or_default(),
        e.message.as_deref().unwrap_or_default()
    )
}

/// Warning events in `namespace` whose reason is not in `allowed` (transient conflicts aside).
pub async fn unexpected_warnings(
    client: &kube::Client,
    namespace: &str,
    allowed: &[impl AsRef<str>],
) -> Result<Vec<String>, kube::Error> {
    Ok(warning_events(client, namespace)
        .await?
        .iter()
        .filter(|e| {
            let reason = e.reason.as_deref().unwrap_or_default();
            !allowed.iter().any(|a| a.as_ref() == reason)
        })
        .filter(|e| !transient(e.message.as_deref().unwrap_or_default()))
        .map(describe_warning)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::transient;

    #[test]
    fn only_retried_conflicts_are_transient() {
        assert!(transient(
            "Readiness probe errored: rpc error: code = NotFound desc = failed to exec in container: failed to load task: no running task found: task db93 not found: not found"
        ));
        assert!(transient(
            "Readiness probe errored: rpc error: code = Unknown desc = failed to exec in container: container is in CONTAINER_EXITED state"
        ));
        assert!(!transient(
            "Readiness probe failed: cat: can't open '/ready'"
        ));
        assert!(transient(
            "MountVolume.SetUp failed for volume \"kube-api-access-wrk8z\" : failed to fetch token: serviceaccounts \"default\" is forbidden: User \"system:node:real-node-0\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"h-a\": no relationship found between node 'real-node-0' and this object"
        ));
        assert!(!transient(
            "MountVolume.SetUp failed for volume \"kube-api-access-wrk8z\" : failed to fetch token: serviceaccounts \"default\" is forbidden: User \"system:node:real-node-0\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"h-a\""
        ));
        assert!(transient(
            "running Bind plugin \"DefaultBinder\": pods \"united-zone-a-lsbg6-0\" not found"
        ));
        assert!(transient(
            "0/4 nodes are available: persistentvolumeclaim \"data-data-app-3\" not found. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        ));
        assert!(transient(
            "running PreBind plugin \"VolumeBinding\": binding volumes: pod does not exist any more: pod \"disk-jfpk5\" not found"
        ));
        assert!(transient(
            "running PreFilter plugin \"VolumeBinding\": error getting PVC \"h-recreate-pods-and-pvcs-on-image-and-temp-95bf1/data-vct-9m26q\": could not find v1.PersistentVolumeClaim \"h-recreate-pods-and-pvcs-on-image-and-temp-95bf1/data-vct-9m26q\""
        ));
        assert!(!transient(
            "running PreFilter plugin \"VolumeBinding\": pod has unbound immediate PersistentVolumeClaims"
        ));
        assert!(transient(
            "running Bind plugin \"DefaultBinder\": Operation cannot be fulfilled on pods/binding \"web-0\": pod web-0 is being deleted, cannot be assigned to a host"
        ));
        assert!(transient(
            "Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again"
        ));
        assert!(transient(
            "running Reserve plugin \"VolumeBinding\": v1.PersistentVolumeClaim \"ns/data\" is out of sync (stored: 412, assume: 408)"
        ));
        assert!(transient(
            "pod 8fe0c4ac-8836-4f0b-8a4e-c89be9e016d6(ns/sel-x6hww) is in the cache, so can't be assumed"
        ));
        assert!(transient(
            "MountVolume.SetUp failed for volume \"kube-api-access-pp6gp\" : failed to sync configmap cache: timed out waiting for the condition"
        ));
        assert!(transient(
            "MountVolume.SetUp failed for volume \"kube-api-access-sjnzt\" : object \"h-in-place-update-with-injected-sidecar-on-26033\"/\"kube-root-ca.crt\" not registered"
        ));
        // Any ConfigMap or Secret volume's first sync may time out the same way (kind's real
        // kubelets under load); the kubelet retries, and a mount that never succeeds leaves
        // the pod unready, which the scenario sees.
        assert!(transient(
            "MountVolume.SetUp failed for volume \"data\" : failed to sync configmap cache: timed out waiting for the condition"
        ));
        assert!(transient(
            "MountVolume.SetUp failed for volume \"v\" : failed to sync secret cache: timed out waiting for the condition"
        ));
        assert!(!transient(
            "MountVolume.SetUp failed for volume \"config\" : object \"ns\"/\"app-config\" not registered"
        ));
        assert!(transient(
            "Unable to attach or mount volumes: unmounted volumes=[data kube-api-access-7nxjh], unattached volumes=[], failed to process volumes=[data]: error processing PVC ns/data-vct-w5qhh: failed to fetch PVC from API server: persistentvolumeclaims \"data-vct-w5qhh\" is forbidden: User \"system:node:real-node-0\" cannot get resource \"persistentvolumeclaims\" in API group \"\" in the namespace \"ns\": no relationship found between node 'real-node-0' and this object"
        ));
        assert!(!transient(
            "Error creating: pods \"x\" is forbidden: quota exceeded"
        ));
        assert!(!transient(
            "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity"
        ));
    }
}
