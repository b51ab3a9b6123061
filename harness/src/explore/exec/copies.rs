//! Trials of a kind that copies a resource into namespaces ([`Makes::Copies`]): what its
//! convergence is judged on (the cluster's namespaces, the copies it owns, the resource as the
//! API stores it), its semantic operations and the deletion of a copy.
//!
//! [`Makes::Copies`]: super::super::subject::Makes::Copies

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};

/// The copies among `copies` in a namespace of `namespaces` that is not being deleted.
fn in_live_namespaces(copies: Vec<Value>, namespaces: &[NamespaceView]) -> Vec<Value> {
    copies
        .into_iter()
        .filter(|c| {
            namespaces.iter().any(|n| {
                !n.terminating && c["metadata"]["namespace"].as_str() == Some(n.name.as_str())
            })
        })
        .collect()
}
use serde_json::{Value, json};

use super::{Cell, api_for, merge};
use crate::cluster::OWNER_LABEL;
use crate::explore::oracle::{self, NamespaceView};
use crate::explore::output::RETAGGED;
use crate::explore::subject::TRIAL_LABEL;
use crate::explore::trial::Op;

/// The data value [`Op::Rewrite`] adds: valid as a ConfigMap's text and as a Secret's
/// base64.
const REWRITTEN: &str = "dg==";

impl Cell<'_> {
    /// Every namespace of the cluster, as the copy oracle sees it.
    pub(super) async fn namespaces(&self) -> anyhow::Result<Vec<NamespaceView>> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|n| NamespaceView {
                terminating: n.metadata.deletion_timestamp.is_some()
                    || n.status.and_then(|s| s.phase).as_deref() == Some("Terminating"),
                name: n.metadata.name.unwrap_or_default(),
                labels: n.metadata.labels.unwrap_or_default(),
            })
            .collect())
    }

    /// The objects of the kind of `obj`'s resource that `obj` owns, in every namespace.
    async fn copies(&self, obj: &Value) -> anyhow::Result<Vec<Value>> {
        let r = &obj["spec"]["resource"];
        let (Some(api_version), Some(kind)) = (r["apiVersion"].as_str(), r["kind"].as_str()) else {
            return Ok(vec![]);
        };
        let (ar, _) = super::resource(&self.client, api_version, kind).await?;
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        let mut out = vec![];
        for o in api.list(&ListParams::default()).await?.items {
            if o.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid)
            {
                out.push(serde_json::to_value(o)?);
            }
        }
        Ok(out)
    }

    /// `obj`'s resource as the API stores it (its defaults and conversions applied): a
    /// dry-run create of it in `ns` under a name of its own; the resource itself when the
    /// API refuses it.
    async fn stored(&self, obj: &Value, ns: &str) -> Value {
        let r = obj["spec"]["resource"].clone();
        let (Some(api_version), Some(kind)) = (r["apiVersion"].as_str(), r["kind"].as_str()) else {
            return r;
        };
        let Ok(api) = api_for(&self.client, ns, api_version, kind).await else {
            return r;
        };
        let mut probe = r.clone();
        probe["metadata"] = json!({"name": "explore-stored-probe", "namespace": ns});
        let Ok(probe) = serde_json::from_value::<DynamicObject>(probe) else {
            return r;
        };
        let params = PostParams {
            dry_run: true,
            field_manager: None,
        };
        match api.create(&params, &probe).await {
            Ok(o) => serde_json::to_value(o).unwrap_or(r),
            Err(_) => r,
        }
    }

    /// What differs from the declared state of the copying object `name` now
    /// ([`oracle::copies_convergence`]).
    pub(super) async fn copy_differences(
        &self,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
    ) -> Vec<String> {
        let obj = match api.get(name).await {
            Ok(o) => serde_json::to_value(o).unwrap_or_default(),
            Err(e) => return vec![format!("get {name}: {e}")],
        };
        let namespaces = match self.namespaces().await {
            Ok(n) => n,
            Err(e) => return vec![format!("list namespaces: {e:#}")],
        };
        let copies = match self.copies(&obj).await {
            Ok(c) => c,
            Err(e) => return vec![format!("list copies: {e:#}")],
        };
        let stored = self.stored(&obj, ns).await;
        oracle::copies_convergence(&obj, &stored, &namespaces, &copies)
    }

    /// The copies object `name` owns in namespaces not being deleted (0 when it cannot be
    /// read).
    pub(super) async fn live_copies(&self, api: &Api<DynamicObject>, name: &str) -> usize {
        let Ok(o) = api.get(name).await else {
            return 0;
        };
        let Ok(obj) = serde_json::to_value(o) else {
            return 0;
        };
        self.copies_in_live_namespaces(&obj)
            .await
            .map_or(0, |c| c.len())
    }

    /// The copies `obj` owns in namespaces that are not being deleted.
    async fn copies_in_live_namespaces(&self, obj: &Value) -> anyhow::Result<Vec<Value>> {
        let namespaces = self.namespaces().await?;
        Ok(in_live_namespaces(self.copies(obj).await?, &namespaces))
    }

    /// A semantic operation of a copying kind on its object `name`, in the trial's namespace
    /// `ns`.
    pub(super) async fn operate_copies(
        &self,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
        op: Op,
    ) -> anyhow::Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        match op {
            Op::Rewrite => {
                let obj = serde_json::to_value(api.get(name).await?)?;
                let n = obj["spec"]["resource"]["data"]
                    .as_object()
                    .map_or(0, |m| m.len());
                let patch =
                    json!({"spec": {"resource": {"data": {format!("explore-{n}"): REWRITTEN}}}});
                merge(api, name, &patch).await
            }
            Op::Retag => {
                let obj = serde_json::to_value(api.get(name).await?)?;
                let meta = &obj["spec"]["resource"]["metadata"];
                let n = ["labels", "annotations"]
                    .iter()
                    .map(|m| meta[m].as_object().map_or(0, |o| o.len()))
                    .sum::<usize>();
                let key = format!("{RETAGGED}-{n}");
                let patch = json!({"spec": {"resource": {"metadata": {
                    "labels": {&key: "v"}, "annotations": {&key: "v"}}}}});
                merge(api, name, &patch).await
            }
            Op::AddNamespace => {
                // Numbered after those the trial added before (whatever their labels now).
                let prefix = format!("{ns}-");
                let k = 1 + nss
                    .list(&ListParams::default())
                    .await?
                    .items
                    .iter()
                    .filter(|n| {
                        n.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with(&prefix))
                    })
                    .count();
                let body: Namespace = serde_json::from_value(json!({"metadata": {
                    "name": format!("{ns}-{k}"),
                    "labels": {OWNER_LABEL: self.owner, TRIAL_LABEL: ns}}}))?;
                nss.create(&PostParams::default(), &body).await?;
                Ok(())
            }
            Op::Relabel => {
                let labelled = nss
                    .get(ns)
                    .await?
                    .metadata
                    .labels
                    .unwrap_or_default()
                    .contains_key(TRIAL_LABEL);
                let value = if labelled { Value::Null } else { json!(ns) };
                let patch = json!({"metadata": {"labels": {TRIAL_LABEL: value}}});
                nss.patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Ok(())
            }
            other => anyhow::bail!("{other:?} does not apply to a kind that copies a resource"),
        }
    }

    /// The copies `obj` owns in live namespaces, each as its namespace, name and resource
    /// version, in that order: what a settle step watches for a kind that copies (empty when
    /// they cannot be read).
    pub(super) async fn copy_versions(&self, obj: &Value) -> Vec<(String, String)> {
        let Ok(copies) = self.copies_in_live_namespaces(obj).await else {
            return vec![];
        };
        let mut out: Vec<(String, String)> = copies
            .iter()
            .map(|c| {
                let m = &c["metadata"];
                (
                    format!(
                        "{}/{}",
                        m["namespace"].as_str().unwrap_or_default(),
                        m["name"].as_str().unwrap_or_default()
                    ),
                    m["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Deletes one copy object `name` owns (the first by namespace, of those not being
    /// deleted).
    pub(super) async fn delete_copy(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> anyhow::Result<String> {
        let obj = serde_json::to_value(api.get(name).await?)?;
        let mut copies = self.copies_in_live_namespaces(&obj).await?;
        copies.sort_by(|a, b| {
            a["metadata"]["namespace"]
                .as_str()
                .cmp(&b["metadata"]["namespace"].as_str())
        });
        let Some(copy) = copies.first() else {
            return Ok("no copy".into());
        };
        let r = &obj["spec"]["resource"];
        let (cns, cname) = (
            copy["metadata"]["namespace"].as_str().unwrap_or_default(),
            copy["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let capi = api_for(
            &self.client,
            cns,
            r["apiVersion"].as_str().unwrap_or_default(),
            r["kind"].as_str().unwrap_or_default(),
        )
        .await?;
        capi.delete(cname, &DeleteParams::default()).await?;
        Ok(format!("deleted the copy {cns}/{cname}"))
    }
}
