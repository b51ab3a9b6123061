//! A small dynamic volume provisioner, as local-path-provisioner is on kind: the default
//! StorageClass [`STORAGE_CLASS`] names [`PROVISIONER`], and [`run`] makes a PV for each of its
//! pending PVCs and deletes released PVs. It runs as the harness binary's hidden `provisioner`
//! command, one process per cluster.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

/// The provisioner name the default StorageClass carries.
pub const PROVISIONER: &str = "harness.local/hostpath";
/// Provisioners the harness stands in for: StorageClasses naming them are served as its own
/// (the CSI hostpath driver, whose classes OpenKruise's e2e setup creates; its images cannot
/// be had here).
pub const STAND_IN_PROVISIONERS: &[&str] = &["hostpath.csi.k8s.io"];

/// Whether the harness provisions (and expands) volumes of provisioner `name`.
pub fn serves(name: &str) -> bool {
    name == PROVISIONER || STAND_IN_PROVISIONERS.contains(&name)
}
/// The default StorageClass.
pub const STORAGE_CLASS: &str = "standard";

const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";

/// The default StorageClass object: WaitForFirstConsumer binding, Delete reclaim and no volume
/// expansion, as kind's (the provisioner expands volumes of classes that allow it).
pub fn default_storage_class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(STORAGE_CLASS.into()),
            annotations: Some(BTreeMap::from([(
                "storageclass.kubernetes.io/is-default-class".to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        allow_volume_expansion: Some(false),
        ..Default::default()
    }
}

/// Creates [`default_storage_class`].
pub async fn create_default_storage_class(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<StorageClass> = Api::all(client.clone());
    api.create(&PostParams::default(), &default_storage_class())
        .await
        .map(|_| ())
}

/// The PV to make for `pvc` (None if the claim is not ours to provision yet): a hostPath
/// directory under `volumes` (the cluster's own directory, so that a real node's kubelet
/// creates it there and the cluster's teardown removes it).
pub fn volume_for(
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
    volumes: &std::path::Path,
) -> Option<PersistentVolume> {
    let meta = &pvc.metadata;
    let spec = pvc.spec.as_ref()?;
    if spec.volume_name.as_ref().is_some_and(|v| !v.is_empty()) {
        return None;
    }
    if !serves(&class.provisioner) || meta.deletion_timestamp.is_some() {
        return None;
    }
    let annotations = meta.annotations.clone().unwrap_or_default();
    let wffc = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    let node = annotations.get(SELECTED_NODE);
    if wffc && node.is_none() {
        return None;
    }
    let uid = meta.uid.clone()?;
    let storage = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .cloned()?;
    let name = format!("pvc-{uid}");
    Some(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY.to_string(),
                PROVISIONER.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), storage)])),
            access_modes: spec.access_modes.clone(),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: Some(uid),
                ..Default::default()
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: Some(class.metadata.name.clone().unwrap_or_default()),
            volume_mode: spec.volume_mode.clone(),
            host_path: Some(HostPathVolumeSource {
                path: volumes.join(&name).display().to_string(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity: node.map(|n| VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "kubernetes.io/hostname".into(),
                            operator: "In".into(),
                            values: Some(vec![n.clone()]),
                        }]),
                        ..Default::default()
                    }],
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn ours(pvc: &PersistentVolumeClaim) -> bool {
    let a = pvc.metadata.annotations.clone().unwrap_or_default();
    a.get(STORAGE_PROVISIONER)
        .or(a.get(BETA_STORAGE_PROVISIONER))
        .is_some_and(|p| serves(p))
}

/// Bytes of a storage quantity (`1Gi`, `500M`, `1073741824`); None if it does not parse.
pub fn bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let factor: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    if let Ok(n) = number.parse::<u128>() {
        return Some(n * factor);
    }
    let f: f64 = number.parse().ok()?;
    Some((f * factor as f64).ceil() as u128)
}

/// The size a bound claim of ours asks to grow to, when its class allows expansion and the
/// claim asks for more than it has (its status capacity): what an external resizer and the
/// kubelet would give it. None otherwise.
pub fn expansion_for(pvc: &PersistentVolumeClaim, class: &StorageClass) -> Option<Quantity> {
    if !serves(&class.provisioner) || class.allow_volume_expansion != Some(true) {
        return None;
    }
    let spec = pvc.spec.as_ref()?;
    spec.volume_name.as_ref().filter(|v| !v.is_empty())?;
    let want = spec.resources.as_ref()?.requests.as_ref()?.get("storage")?;
    let status = pvc.status.as_ref()?;
    if status.phase.as_deref() != Some("Bound") {
        return None;
    }
    let has = status.capacity.as_ref()?.get("storage")?;
    (bytes(&want.0)? > bytes(&has.0)?).then(|| want.clone())
}

/// Grows `pvc`'s volume to `size`: the PV's capacity, then the claim's status capacity (its
/// resize conditions cleared), as a resizer and the kubelet do for a filesystem volume.
async fn expand(
    pvcs: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    pvc: &PersistentVolumeClaim,
    size: &Quantity,
) -> Result<(), kube::Error> {
    use kube::api::{Patch, PatchParams};
    let volume = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    pvs.patch(
        &volume,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"capacity": {"storage": size}}})),
    )
    .await?;
    let namespaced: Api<PersistentVolumeClaim> = Api::namespaced(
        pvcs.clone().into_client(),
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
    );
    namespaced
        .patch_status(
            pvc.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {
                "capacity": {"storage": size},
                "conditions": null,
                "allocatedResources": {"storage": size},
                "allocatedResourceStatuses": null,
            }})),
        )
        .await?;
    Ok(())
}

/// Whether a released PV of ours should be deleted.
pub fn should_delete(pv: &PersistentVolume) -> bool {
    let ours = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONED_BY))
        .is_some_and(|p| p == PROVISIONER);
    let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let delete = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        == Some("Delete");
    ours && released && delete && pv.metadata.deletion_timestamp.is_none()
}

/// Runs the provisioner until it is ended. A watch that fails (the apiserver restarting, or
/// gone for a while) is retried with backoff, and a claim or volume it could not act on is
/// logged and met again at its next event or relist, as an informer-based controller does.
pub async fn run(client: kube::Client, volumes: std::path::PathBuf) -> anyhow::Result<()> {
    let pvcs: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client.clone());

    let provision = {
        let pvs = pvs.clone();
        let pvcs = pvcs.clone();
        watcher(pvcs.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .for_each(move |pvc| {
                let (pvs, pvcs, classes, volumes) =
                    (pvs.clone(), pvcs.clone(), classes.clone(), volumes.clone());
                async move {
                    match pvc {
                        Ok(pvc) => {
                            if let Err(e) = provision(&pvs, &pvcs, &classes, &volumes, &pvc).await {
                                tracing::warn!(error = %e, claim = pvc.metadata.name.as_deref(), "provision");
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "watch claims (retried)"),
                    }
                }
            })
    };
    let reclaim = watcher(pvs.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .for_each(move |pv| {
            let pvs = pvs.clone();
            async move {
                let pv = match pv {
                    Ok(pv) => pv,
                    Err(e) => return tracing::warn!(error = %e, "watch volumes (retried)"),
                };
                if should_delete(&pv) {
                    let name = pv.metadata.name.clone().unwrap_or_default();
                    match pvs.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => tracing::info!(pv = name, "deleted released volume"),
                        Err(kube::Error::Api(e)) if e.code == 404 => {}
                        Err(e) => tracing::warn!(error = %e, "delete PV"),
                    }
                }
            }
        });
    futures::future::join(provision, reclaim).await;
    Ok(())
}

/// Makes the volume claim `pvc` of one of its classes asks for, and grows the volume of one
/// whose request grew.
async fn provision(
    pvs: &Api<PersistentVolume>,
    pvcs: &Api<PersistentVolumeClaim>,
    classes: &Api<StorageClass>,
    volumes: &std::path::Path,
    pvc: &PersistentVolumeClaim,
) -> anyhow::Result<()> {
    if !ours(pvc) {
        return Ok(());
    }
    let class_name = pvc
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default();
    let Some(class) = classes.get_opt(&class_name).await? else {
        return Ok(());
    };
    if let Some(pv) = volume_for(pvc, &class, volumes) {
        match pvs.create(&PostParams::default(), &pv).await {
            Ok(_) => tracing::info!(
                pv = pv.metadata.name.as_deref(),
                claim = pvc.metadata.name.as_deref(),
                "provisioned"
            ),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => tracing::warn!(error = %e, "create PV"),
        }
    }
    if let Some(size) = expansion_for(pvc, &class) {
        match expand(pvcs, pvs, pvc, &size).await {
            Ok(()) => tracing::info!(
                claim = pvc.metadata.name.as_deref(),
                size = size.0,
                "expanded"
            ),
            Err(e) => tracing::warn!(error = %e, "expand volume"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    const VOLUMES: &str = "/c/volumes";
    use super::*;

    #[test]
    fn the_default_class_promises_no_expansion_and_the_csi_hostpath_driver_is_stood_in_for() {
        assert!(serves(PROVISIONER) && serves("hostpath.csi.k8s.io"));
        assert!(!serves("rancher.io/local-path"));
        let c = default_storage_class();
        assert_eq!(c.allow_volume_expansion, Some(false));
        assert_eq!(
            c.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
    }
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn claim(selected: Option<&str>) -> PersistentVolumeClaim {
        let mut ann = BTreeMap::from([(STORAGE_PROVISIONER.to_string(), PROVISIONER.to_string())]);
        if let Some(n) = selected {
            ann.insert(SELECTED_NODE.into(), n.into());
        }
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data-web-0".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                annotations: Some(ann),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(STORAGE_CLASS.into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn waits_for_the_scheduler_then_provisions_on_the_selected_node() {
        let class = default_storage_class();
        assert!(volume_for(&claim(None), &class, VOLUMES.as_ref()).is_none());
        let pv = volume_for(&claim(Some("kwok-node-1")), &class, VOLUMES.as_ref()).unwrap();
        let spec = pv.spec.unwrap();
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
        assert_eq!(spec.capacity.unwrap()["storage"], Quantity("1Gi".into()));
        assert_eq!(spec.claim_ref.unwrap().uid.as_deref(), Some("u1"));
        let term = &spec
            .node_affinity
            .unwrap()
            .required
            .unwrap()
            .node_selector_terms[0];
        assert_eq!(
            term.match_expressions.as_ref().unwrap()[0].values,
            Some(vec!["kwok-node-1".to_string()])
        );
    }

    #[test]
    fn a_bound_claim_asking_for_more_grows_where_its_class_allows_it() {
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("1500M"), Some(1_500_000_000));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("12"), Some(12));
        assert_eq!(bytes("1Xi"), None);
        let mut c = claim(Some("n"));
        c.spec.as_mut().unwrap().volume_name = Some("pvc-u1".into());
        c.status = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
            ..Default::default()
        });
        let mut expandable = default_storage_class();
        expandable.provisioner = STAND_IN_PROVISIONERS[0].into();
        expandable.allow_volume_expansion = Some(true);
        assert_eq!(expansion_for(&c, &expandable), None, "asks for what it has");
        c.spec.as_mut().unwrap().resources = Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([("storage".into(), Quantity("2Gi".into()))])),
            ..Default::default()
        });
        assert_eq!(expansion_for(&c, &expandable), Some(Quantity("2Gi".into())));
        // Not where the class forbids it, nor for another provisioner's class.
        assert_eq!(expansion_for(&c, &default_storage_class()), None);
        let mut foreign = expandable.clone();
        foreign.provisioner = "example.com/other".into();
        assert_eq!(expansion_for(&c, &foreign), None);
        // Nor for a claim not yet bound.
        c.status.as_mut().unwrap().phase = Some("Pending".into());
        assert_eq!(expansion_for(&c, &expandable), None);
    }

    #[test]
    fn leaves_bound_claims_and_foreign_classes_alone() {
        let mut bound = claim(Some("n"));
        bound.spec.as_mut().unwrap().volume_name = Some("pv".into());
        assert!(volume_for(&bound, &default_storage_class(), VOLUMES.as_ref()).is_none());
        let mut other = default_storage_class();
        other.provisioner = "example.com/other".into();
        assert!(volume_for(&claim(Some("n")), &other, VOLUMES.as_ref()).is_none());
    }
}
