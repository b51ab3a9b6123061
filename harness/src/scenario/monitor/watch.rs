//! What the monitor watches and how it sees it: [`watch_all`] merges the watches of a
//! scenario's namespace (pods, PVCs and every workload kind) into one stream of [`Change`]s,
//! each object turned into the state the rules read ([`pod_state`], [`claim_state`],
//! [`workload_state`]).

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};

use super::rules::{self, ClaimState, PodState, Workload, WorkloadKind};
use super::{Change, Listed};
use crate::scenario::workload::{
    AdvancedDaemonSetKind, AdvancedStatefulSetKind, CloneSetKind, DaemonSetKind, DeploymentKind,
    Kind, StatefulSetKind,
};

/// A pod's state as the rules see it.
pub fn pod_state(p: &Pod) -> PodState {
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let ready_condition = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
    let ready = ready_condition.is_some();
    PodState {
        name: p.metadata.name.clone().unwrap_or_default(),
        uid: p.metadata.uid.clone().unwrap_or_default(),
        ready,
        terminating: p.metadata.deletion_timestamp.is_some(),
        revision: labels.get(rules::REVISION_LABEL).cloned(),
        instance: labels.get(rules::INSTANCE_LABEL).cloned(),
        owner: controller_of(&p.metadata),
        claims: p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .map(|v| {
                v.iter()
                    .filter_map(|v| v.persistent_volume_claim.as_ref())
                    .map(|c| c.claim_name.clone())
                    .collect()
            })
            .unwrap_or_default(),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        ready_since: ready_condition
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_second()),
    }
}

fn controller_of(meta: &kube::core::ObjectMeta) -> Option<String> {
    let refs = meta.owner_references.as_ref()?;
    refs.iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// A PVC's state as the rules see it.
pub fn claim_state(c: &PersistentVolumeClaim) -> ClaimState {
    ClaimState {
        name: c.metadata.name.clone().unwrap_or_default(),
        uid: c.metadata.uid.clone().unwrap_or_default(),
        terminating: c.metadata.deletion_timestamp.is_some(),
        instance: c
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(rules::INSTANCE_LABEL).cloned()),
        owners: c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|r| r.uid.clone())
            .collect(),
    }
}

/// A workload's state as the rules see it (a ReplicaSet's controller is kept in its spec as
/// `__owner`, for the Deployment that owns it).
pub fn workload_state(kind: WorkloadKind, o: &DynamicObject) -> Workload {
    let mut spec = o.data["spec"].clone();
    if let (Some(owner), Some(m)) = (controller_of(&o.metadata), spec.as_object_mut()) {
        m.insert("__owner".into(), owner.into());
    }
    Workload {
        kind,
        name: o.metadata.name.clone().unwrap_or_default(),
        uid: o.metadata.uid.clone().unwrap_or_default(),
        generation: o.metadata.generation,
        deleting: o.metadata.deletion_timestamp.is_some(),
        spec,
        status: o.data["status"].clone(),
    }
}

/// The kinds watched, with their APIs.
pub(super) fn kinds() -> Vec<(WorkloadKind, ApiResource)> {
    vec![
        (WorkloadKind::CloneSet, CloneSetKind::api_resource()),
        (
            WorkloadKind::AdvancedStatefulSet,
            AdvancedStatefulSetKind::api_resource(),
        ),
        (
            WorkloadKind::AdvancedDaemonSet,
            AdvancedDaemonSetKind::api_resource(),
        ),
        (WorkloadKind::Deployment, DeploymentKind::api_resource()),
        (
            WorkloadKind::ReplicaSet,
            ApiResource::erase::<apps::ReplicaSet>(&()),
        ),
        (WorkloadKind::StatefulSet, StatefulSetKind::api_resource()),
        (WorkloadKind::DaemonSet, DaemonSetKind::api_resource()),
    ]
}

/// The changes of one watched API, as [`Change`]s; a relist (after a watch broke) ends with
/// [`Change::Relisted`] naming every object it showed, so that objects deleted while the watch
/// was down are forgotten rather than kept, stale, in the model.
fn changes<K, S>(
    stream: S,
    apply: impl Fn(K) -> Change + Send + 'static,
    gone: impl Fn(K) -> Change + Send + 'static,
    listed: Listed,
) -> impl Stream<Item = Change> + Send
where
    K: Resource + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    stream
        .scan(None::<BTreeSet<String>>, move |seen, e| {
            let out = match e {
                Ok(watcher::Event::Init) => {
                    *seen = Some(BTreeSet::new());
                    vec![]
                }
                Ok(watcher::Event::InitApply(o)) => {
                    if let Some(s) = seen.as_mut() {
                        s.insert(uid_of(&o));
                    }
                    vec![apply(o)]
                }
                Ok(watcher::Event::InitDone) => seen
                    .take()
                    .map(|uids| vec![Change::Relisted(listed, uids)])
                    .unwrap_or_default(),
                Ok(watcher::Event::Apply(o)) => vec![apply(o)],
                Ok(watcher::Event::Delete(o)) => vec![gone(o)],
                Err(e) => {
                    tracing::debug!("monitor watch: {e}");
                    vec![]
                }
            };
            futures::future::ready(Some(futures::stream::iter(out)))
        })
        .flatten()
}

fn uid_of<K: Resource>(o: &K) -> String {
    o.meta().uid.clone().unwrap_or_default()
}

/// Every watched change in `namespace`, merged.
pub(super) fn watch_all(
    client: &kube::Client,
    namespace: &str,
) -> impl Stream<Item = Change> + Send + Unpin + use<> {
    let cfg = watcher::Config::default;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let mut streams: Vec<futures::stream::BoxStream<'static, Change>> = vec![
        changes(
            watcher(pods, cfg()).default_backoff(),
            |p| Change::Pod(Box::new(p)),
            |p| Change::PodGone(uid_of(&p)),
            Listed::Pods,
        )
        .boxed(),
        changes(
            watcher(claims, cfg()).default_backoff(),
            |c| Change::Claim(Box::new(c)),
            |c| Change::ClaimGone(uid_of(&c)),
            Listed::Claims,
        )
        .boxed(),
    ];
    for (kind, ar) in kinds() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let s = changes(
            watcher(api, cfg()).default_backoff(),
            move |o: DynamicObject| Change::Workload(Box::new(workload_state(kind, &o))),
            |o: DynamicObject| Change::WorkloadGone(uid_of(&o)),
            Listed::Workloads(kind),
        );
        streams.push(s.boxed());
    }
    futures::stream::select_all(streams)
}
