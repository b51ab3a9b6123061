//! A typed vocabulary for the workloads a scenario drives. Start with [`Spec`]: a builder of a
//! typical manifest (`CloneSet::new("web").replicas(2).in_place_if_possible()`), parameterised
//! by a [`Kind`] that knows its API and its one rollout check ([`Kind::rolled_out`], pure, over
//! the object's status). [`Spec::create`] returns a [`Handle`] to act on and wait for the
//! workload (`set_image`, `patch`, `pods`, `wait_rolled_out`).
//!
//! Kinds: [`CloneSet`], [`AdvancedStatefulSet`], [`AdvancedDaemonSet`], [`Deployment`],
//! [`StatefulSet`], [`DaemonSet`].

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::Ctx;
use super::wait::{Check, until};
use crate::kruise;

/// The image workloads start with.
pub const IMAGE_V1: &str = "nginx:1.25";
/// The image workloads are updated to.
pub const IMAGE_V2: &str = "nginx:1.26";

/// Every image the catalog's scenarios and the controllers' readiness checks name by a tag.
/// Clusters whose nodes pull only from the harness's registry (kind's) get a stand-in for each
/// pushed there; a unit test reads the suites' sources and fails on a tagged image missing
/// here.
pub const CATALOG_IMAGES: &[&str] = &[
    "nginx:1.25",
    "nginx:1.26",
    "nginx:1.27",
    "nginx:1.28",
    "busybox:1.34",
    "busybox:1.35",
    "busybox:1.36",
    "busybox:1.37",
];

/// Whether a container status's `image` is the image a spec gave: the same reference, or
/// the same once qualified — a kwok node reports the spec's text, a real kubelet the
/// runtime's name for it (`nginx:1.26` as `docker.io/library/nginx:1.26`).
pub fn same_image(reported: &str, spec: &str) -> bool {
    use crate::toolchain::images::Reference;
    reported == spec
        || matches!(
            (Reference::parse(reported), Reference::parse(spec)),
            (Some(r), Some(s)) if r.qualified() == s.qualified()
        )
}

/// The long-running image real nodes pull from the cluster's registry (busybox; its
/// `/etc/harness-image` says `v1`).
pub const REAL_IMAGE_V1: &str = "harness.local/busybox:v1";
/// The same image's next version (`/etc/harness-image` says `v2`).
pub const REAL_IMAGE_V2: &str = "harness.local/busybox:v2";

/// A workload kind: its API, the shape of its manifest and its rollout check.
pub trait Kind: Send + Sync + 'static {
    /// The API (group, version, kind, plural).
    fn api_resource() -> ApiResource;

    /// Whether pods are counted by `spec.replicas` (false for DaemonSets: one per node).
    const REPLICATED: bool = true;

    /// The `updateStrategy` (or `strategy`) field of the spec for a strategy `type`.
    fn strategy(ty: &str) -> (&'static str, Value) {
        ("updateStrategy", json!({"type": ty}))
    }

    /// Whether an object with this status has `want` pods ready and up to date with its latest
    /// spec; the mismatch names the field, what was expected and what was seen.
    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check;
}

/// The API of a kind that has a Rust type (kopium-generated or k8s-openapi).
fn erased<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// Parses a status, `Pending` while it is absent or incomplete.
fn parse<S: DeserializeOwned>(status: &Value) -> Result<S, Check> {
    if status.is_null() {
        return Err(Check::Pending("status: not reported yet".into()));
    }
    serde_json::from_value(status.clone())
        .map_err(|e| Check::Pending(format!("status: incomplete ({e})")))
}

/// `observedGeneration` caught up, then each `(field, actual)` equal to `want`.
fn counts(
    generation: Option<i64>,
    observed: Option<i64>,
    fields: &[(&str, Option<i64>)],
    want: i64,
) -> Check {
    let caught_up = Check::when(observed.is_some() && observed >= generation, || {
        format!(
            "status.observedGeneration: want {}, got {}",
            show(generation),
            show(observed)
        )
    });
    fields.iter().fold(caught_up, |c, (field, got)| {
        c.and(Check::when(*got == Some(want), || {
            format!("status.{field}: want {want}, got {}", show(*got))
        }))
    })
}

fn show(v: Option<impl std::fmt::Display>) -> String {
    v.map_or_else(|| "none".into(), |v| v.to_string())
}

/// `status.currentRevision` equal to `status.updateRevision`.
fn revisions_match(current: Option<&str>, update: Option<&str>) -> Check {
    Check::when(current.is_some() && current == update, || {
        format!(
            "status.currentRevision: want {} (updateRevision), got {}",
            show(update),
            show(current)
        )
    })
}

macro_rules! kind {
    ($(#[$doc:meta])* $marker:ident, $alias:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $marker;
        $(#[$doc])*
        pub type $alias = Spec<$marker>;
    };
}

kind!(
    /// OpenKruise CloneSet (`apps.kruise.io/v1alpha1`).
    CloneSetKind,
    CloneSet
);
kind!(
    /// OpenKruise Advanced StatefulSet (`apps.kruise.io/v1beta1` StatefulSet).
    AdvancedStatefulSetKind,
    AdvancedStatefulSet
);
kind!(
    /// OpenKruise Advanced DaemonSet (`apps.kruise.io/v1alpha1` DaemonSet).
    AdvancedDaemonSetKind,
    AdvancedDaemonSet
);
kind!(
    /// Native Deployment (`apps/v1`).
    DeploymentKind,
    Deployment
);
kind!(
    /// Native StatefulSet (`apps/v1`).
    StatefulSetKind,
    StatefulSet
);
kind!(
    /// Native DaemonSet (`apps/v1`).
    DaemonSetKind,
    DaemonSet
);

impl Kind for CloneSetKind {
    fn api_resource() -> ApiResource {
        erased::<kruise::cloneset::CloneSet>()
    }

    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
        let s: kruise::cloneset::CloneSetStatus = match parse(status) {
            Ok(s) => s,
            Err(c) => return c,
        };
        counts(
            generation,
            s.observed_generation,
            &[
                ("replicas", Some(s.replicas.into())),
                ("readyReplicas", Some(s.ready_replicas.into())),
                (
                    "updatedReadyReplicas",
                    Some(s.updated_ready_replicas.into()),
                ),
            ],
            want,
        )
    }
}

/// The check shared by the native and the Advanced StatefulSet (same status fields).
fn statefulset_rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
    let s: apps::StatefulSetStatus = match parse(status) {
        Ok(s) => s,
        Err(c) => return c,
    };
    counts(
        generation,
        s.observed_generation,
        &[
            ("replicas", Some(s.replicas.into())),
            ("readyReplicas", s.ready_replicas.map(i64::from)),
            ("updatedReplicas", s.updated_replicas.map(i64::from)),
        ],
        want,
    )
    .and(revisions_match(
        s.current_revision.as_deref(),
        s.update_revision.as_deref(),
    ))
}

impl Kind for AdvancedStatefulSetKind {
    fn api_resource() -> ApiResource {
        let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "StatefulSet");
        ApiResource::from_gvk_with_plural(&gvk, "statefulsets")
    }

    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
        statefulset_rolled_out(generation, status, want)
    }
}

impl Kind for StatefulSetKind {
    fn api_resource() -> ApiResource {
        erased::<apps::StatefulSet>()
    }

    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
        statefulset_rolled_out(generation, status, want)
    }
}

impl Kind for DeploymentKind {
    fn api_resource() -> ApiResource {
        erased::<apps::Deployment>()
    }

    fn strategy(ty: &str) -> (&'static str, Value) {
        ("strategy", json!({"type": ty}))
    }

    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
        let s: apps::DeploymentStatus = match parse(status) {
            Ok(s) => s,
            Err(c) => return c,
        };
        counts(
            generation,
            s.observed_generation,
            &[
                ("replicas", Some(s.replicas.unwrap_or(0).into())),
                ("readyReplicas", Some(s.ready_replicas.unwrap_or(0).into())),
                (
                    "updatedReplicas",
                    Some(s.updated_replicas.unwrap_or(0).into()),
                ),
            ],
            want,
        )
    }
}

impl Kind for AdvancedDaemonSetKind {
    const REPLICATED: bool = false;

    fn api_resource() -> ApiResource {
        erased::<kruise::daemonset::DaemonSet>()
    }

    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
        let s: kruise::daemonset::DaemonSetStatus = match parse(status) {
            Ok(s) => s,
            Err(c) => return c,
        };
        daemonset_counts(
            generation,
            s.observed_generation,
            [
                s.desired_number_scheduled,
                s.number_ready,
                s.updated_number_scheduled,
            ],
            want,
        )
    }
}

impl Kind for DaemonSetKind {
    const REPLICATED: bool = false;

    fn api_resource() -> ApiResource {
        erased::<apps::DaemonSet>()
    }

    fn rolled_out(generation: Option<i64>, status: &Value, want: i64) -> Check {
        let s: apps::DaemonSetStatus = match parse(status) {
            Ok(s) => s,
            Err(c) => return c,
        };
        daemonset_counts(
            generation,
            s.observed_generation,
            [
                s.desired_number_scheduled,
                s.number_ready,
                s.updated_number_scheduled.unwrap_or(0),
            ],
            want,
        )
    }
}

/// DaemonSet counts: desired, ready and updated, in that order.
fn daemonset_counts(
    generation: Option<i64>,
    observed: Option<i64>,
    [desired, ready, updated]: [i32; 3],
    want: i64,
) -> Check {
    counts(
        generation,
        observed,
        &[
            ("desiredNumberScheduled", Some(desired.into())),
            ("numberReady", Some(ready.into())),
            ("updatedNumberScheduled", Some(updated.into())),
        ],
        want,
    )
}

/// A typical manifest of kind `K`: pods labelled `app=<name>`, one container `main`.
#[derive(Debug, Clone)]
pub struct Spec<K> {
    name: String,
    replicas: i64,
    image: String,
    strategy: Option<String>,
    data: Option<String>,
    labels: BTreeMap<String, String>,
    node_selector: BTreeMap<String, String>,
    resources: Option<Value>,
    tolerations: Vec<Value>,
    extra: serde_json::Map<String, Value>,
    kind: PhantomData<K>,
}

impl<K: Kind> Spec<K> {
    /// A workload `name` of 1 replica running [`IMAGE_V1`].
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            replicas: 1,
            image: IMAGE_V1.into(),
            strategy: None,
            data: None,
            labels: BTreeMap::new(),
            node_selector: BTreeMap::new(),
            resources: None,
            tolerations: vec![],
            extra: serde_json::Map::new(),
            kind: PhantomData,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `spec.replicas` (ignored by DaemonSets).
    pub fn replicas(mut self, n: i64) -> Self {
        self.replicas = n;
        self
    }

    /// Container 0's image.
    pub fn image(mut self, image: &str) -> Self {
        self.image = image.into();
        self
    }

    /// The update strategy type (`updateStrategy.type`, `strategy.type` for Deployments).
    pub fn strategy(mut self, ty: &str) -> Self {
        self.strategy = Some(ty.into());
        self
    }

    /// A volumeClaimTemplate `data` of `size`, mounted by container 0 at `/data`.
    pub fn data_volume(mut self, size: &str) -> Self {
        self.data = Some(size.into());
        self
    }

    /// A label on the pod template (besides `app`).
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// A node selector entry on the pod template.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    /// Pods on the cluster's real nodes only (selected by their label, their taint
    /// tolerated), running [`REAL_IMAGE_V1`] with a short grace period.
    pub fn on_real_nodes(mut self) -> Self {
        use crate::cluster::local::node::REAL_NODE_LABEL;
        self.node_selector
            .insert(REAL_NODE_LABEL.0.into(), REAL_NODE_LABEL.1.into());
        self.tolerations
            .push(json!({"key": "harness.io/real-node", "operator": "Exists"}));
        self.image = REAL_IMAGE_V1.into();
        self
    }

    /// Container 0's `resources` (requests and limits).
    pub fn resources(mut self, resources: Value) -> Self {
        self.resources = Some(resources);
        self
    }

    /// The selector of its pods, `app=<name>`.
    pub fn selector(&self) -> String {
        format!("app={}", self.name)
    }

    /// The manifest.
    pub fn manifest(&self) -> Value {
        let ar = K::api_resource();
        let mut labels = self.labels.clone();
        labels.insert("app".into(), self.name.clone());
        let mut pod = json!({"containers": [{"name": "main", "image": self.image}]});
        if let Some(r) = &self.resources {
            pod["containers"][0]["resources"] = r.clone();
        }
        if !self.node_selector.is_empty() {
            pod["nodeSelector"] = json!(self.node_selector);
        }
        if !self.tolerations.is_empty() {
            pod["tolerations"] = json!(self.tolerations);
            // Real containers stop on SIGTERM; no need to wait the default 30 s.
            pod["terminationGracePeriodSeconds"] = json!(2);
        }
        let mut spec = json!({
            "selector": {"matchLabels": {"app": self.name}},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        });
        if K::REPLICATED {
            spec["replicas"] = json!(self.replicas);
        }
        if let Some(ty) = &self.strategy {
            let (field, value) = K::strategy(ty);
            spec[field] = value;
        }
        for (k, v) in &self.extra {
            spec[k] = v.clone();
        }
        if let Some(size) = &self.data {
            spec["template"]["spec"]["containers"][0]["volumeMounts"] =
                json!([{"name": "data", "mountPath": "/data"}]);
            spec["volumeClaimTemplates"] = json!([{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
            }]);
        }
        json!({
            "apiVersion": ar.api_version,
            "kind": ar.kind,
            "metadata": {"name": self.name},
            "spec": spec,
        })
    }

    /// Creates it in the scenario's namespace, with the API's refusal as the error.
    pub async fn create(self, ctx: &Ctx) -> anyhow::Result<Handle<K>> {
        let what = format!("create {} {}", K::api_resource().kind, self.name);
        ctx.create(self.manifest())
            .await
            .map_err(refusal)
            .map_err(|e| e.context(what))?;
        Ok(Handle::of(ctx, &self.name))
    }
}

impl Spec<CloneSetKind> {
    /// `updateStrategy.type: InPlaceIfPossible`.
    pub fn in_place_if_possible(self) -> Self {
        self.strategy("InPlaceIfPossible")
    }

    /// `updateStrategy.type: InPlaceOnly`.
    pub fn in_place_only(self) -> Self {
        self.strategy("InPlaceOnly")
    }

    /// `updateStrategy.type: ReCreate`.
    pub fn recreate(self) -> Self {
        self.strategy("ReCreate")
    }
}

impl Spec<StatefulSetKind> {
    /// Pods created and deleted in parallel, governed by the Service of its own name, and claims
    /// deleted with the set or its scale-down.
    pub fn parallel_owning_claims(mut self) -> Self {
        let name = self.name.clone();
        self.extra.insert("serviceName".into(), json!(name));
        self.extra
            .insert("podManagementPolicy".into(), json!("Parallel"));
        self.extra.insert(
            "persistentVolumeClaimRetentionPolicy".into(),
            json!({"whenDeleted": "Delete", "whenScaled": "Delete"}),
        );
        self
    }
}

/// An API error as its server message (the text signatures match), other errors as they are.
pub fn refusal(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) => anyhow::anyhow!("{} ({})", s.message, s.reason),
        other => anyhow::Error::new(other),
    }
}

/// A workload of kind `K` in a scenario's namespace.
#[derive(Clone)]
pub struct Handle<K> {
    ctx: Ctx,
    name: String,
    kind: PhantomData<K>,
}

impl<K: Kind> Handle<K> {
    /// The workload `name` of the scenario's namespace (created or not).
    pub fn of(ctx: &Ctx, name: &str) -> Self {
        Self {
            ctx: ctx.clone(),
            name: name.into(),
            kind: PhantomData,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its API in the scenario's namespace.
    pub fn api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.ctx.client.clone(),
            &self.ctx.namespace,
            &K::api_resource(),
        )
    }

    /// The object as it is now.
    pub async fn get(&self) -> anyhow::Result<DynamicObject> {
        Ok(self.api().get(&self.name).await?)
    }

    /// Merge-patches it (through [`Ctx::patch`], so the write is recorded).
    pub async fn patch(&self, body: Value) -> Result<DynamicObject, kube::Error> {
        let ar = K::api_resource();
        self.ctx
            .patch(&ar.api_version, &ar.kind, &self.name, body)
            .await
    }

    /// Applies a JSON patch (RFC 6902), with the API's refusal as the error.
    pub async fn json_patch(&self, ops: Value) -> anyhow::Result<()> {
        let ar = K::api_resource();
        self.ctx
            .json_patch(&ar.api_version, &ar.kind, &self.name, ops)
            .await
            .map_err(refusal)?;
        Ok(())
    }

    /// Sets container 0's image (leaving the rest of the template as it is).
    pub async fn set_image(&self, image: &str) -> anyhow::Result<()> {
        self.json_patch(json!([{
            "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image
        }]))
        .await
    }

    /// The selector of its pods, `app=<name>`.
    pub fn selector(&self) -> String {
        format!("app={}", self.name)
    }

    /// Its pods that are not being deleted.
    pub async fn pods(&self) -> anyhow::Result<Vec<Pod>> {
        Ok(self
            .ctx
            .api::<Pod>()
            .list(&ListParams::default().labels(&self.selector()))
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    }

    /// Waits up to `timeout` until [`Kind::rolled_out`] holds for `want` pods; fails at once on
    /// a Warning event in the namespace with one of `fatal_reasons`.
    pub async fn wait_rolled_out(
        &self,
        want: i64,
        timeout: Duration,
        fatal_reasons: &'static [&'static str],
    ) -> anyhow::Result<DynamicObject> {
        let client = self.ctx.client.clone();
        let ns = self.ctx.namespace.clone();
        let kind = K::api_resource().kind;
        let what = format!("{kind} {} to roll out {want} ready replicas", self.name);
        let obj = until(&self.api(), &self.name, &what, timeout, move |o| {
            let (client, ns, kind) = (client.clone(), ns.clone(), kind.clone());
            async move {
                if let Some(failed) = fatal_warning(&client, &ns, fatal_reasons).await {
                    return failed;
                }
                match o {
                    None => Check::Pending(format!("{kind} does not exist")),
                    Some(o) => K::rolled_out(o.metadata.generation, &o.data["status"], want),
                }
            }
            .boxed()
        })
        .await?;
        obj.ok_or_else(|| anyhow::anyhow!("{} {} vanished", K::api_resource().kind, self.name))
    }
}

/// `Failed` on the first Warning event with one of `reasons` (or on failing to list events).
async fn fatal_warning(client: &kube::Client, ns: &str, reasons: &[&str]) -> Option<Check> {
    if reasons.is_empty() {
        return None;
    }
    let events = match super::invariants::warning_events(client, ns).await {
        Ok(events) => events,
        Err(e) => return Some(Check::Failed(format!("list events: {e}"))),
    };
    let fatal: Vec<String> = events
        .iter()
        .filter(|e| reasons.contains(&e.reason.as_deref().unwrap_or_default()))
        .map(super::invariants::describe_warning)
        .collect();
    (!fatal.is_empty()).then(|| Check::Failed(fatal.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under `dir` (recursively) whose name ends in one of `exts`.
    fn sources(dir: &std::path::Path, exts: &[&str], out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, exts, out);
            } else if exts.iter().any(|x| p.extension().is_some_and(|e| e == *x)) {
                out.push(p);
            }
        }
    }

    #[test]
    fn a_reported_image_is_the_spec_s_as_given_or_qualified() {
        assert!(same_image("nginx:1.26", "nginx:1.26"));
        assert!(same_image("docker.io/library/nginx:1.26", "nginx:1.26"));
        assert!(same_image(
            "harness.local/busybox:v2",
            "harness.local/busybox:v2"
        ));
        assert!(!same_image("docker.io/library/nginx:1.25", "nginx:1.26"));
        assert!(!same_image("quay.io/library/nginx:1.26", "nginx:1.26"));
    }

    #[test]
    fn every_tagged_image_the_catalog_names_has_a_stand_in() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![];
        sources(&root.join("../suites"), &["rs", "yaml"], &mut files);
        sources(&root.join("src/scenario"), &["rs"], &mut files);
        sources(&root.join("src/explore"), &["rs"], &mut files);
        files.push(root.join("src/controller/openkruise/ready.rs"));
        // A quoted reference (Rust) or an `image:` value (YAML) with a name and a tag that
        // starts with a digit.
        let quoted = regex::Regex::new(r#""([a-z][a-z0-9./-]*:[0-9][0-9A-Za-z._-]*)""#).unwrap();
        let yaml =
            regex::Regex::new(r#"image:\s*"?([a-z][a-z0-9./-]*:[0-9][0-9A-Za-z._-]*)"#).unwrap();
        let mut missing = std::collections::BTreeSet::new();
        let mut seen = 0;
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            // What a file's unit tests write is not run on a cluster.
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            for c in quoted.captures_iter(text).chain(yaml.captures_iter(text)) {
                seen += 1;
                if !CATALOG_IMAGES.contains(&&c[1]) {
                    missing.insert(format!("{} in {}", &c[1], f.display()));
                }
            }
        }
        assert!(seen > 10, "the scan finds the catalog's images ({seen})");
        assert!(missing.is_empty(), "add to CATALOG_IMAGES: {missing:?}");
    }

    fn pending_names(c: Check, field: &str) {
        match c {
            Check::Pending(m) => assert!(m.contains(field), "{m} should name {field}"),
            other => panic!("expected pending on {field}, got {other:?}"),
        }
    }

    #[test]
    fn cloneset_rolled_out_counts_updated_ready_replicas() {
        let done = json!({"observedGeneration": 2, "replicas": 2, "readyReplicas": 2,
            "availableReplicas": 2, "updatedReplicas": 2, "updatedReadyReplicas": 2});
        assert_eq!(CloneSetKind::rolled_out(Some(2), &done, 2), Check::Met);
        let mut half = done.clone();
        half["updatedReadyReplicas"] = json!(1);
        pending_names(
            CloneSetKind::rolled_out(Some(2), &half, 2),
            "status.updatedReadyReplicas: want 2, got 1",
        );
        pending_names(
            CloneSetKind::rolled_out(Some(3), &done, 2),
            "status.observedGeneration: want 3, got 2",
        );
        pending_names(CloneSetKind::rolled_out(Some(1), &Value::Null, 2), "status");
    }

    #[test]
    fn statefulsets_need_current_revision_caught_up() {
        let s = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
            "updatedReplicas": 2, "currentRevision": "a", "updateRevision": "a"});
        assert_eq!(StatefulSetKind::rolled_out(Some(1), &s, 2), Check::Met);
        assert_eq!(
            AdvancedStatefulSetKind::rolled_out(Some(1), &s, 2),
            Check::Met
        );
        let mut rolling = s.clone();
        rolling["updateRevision"] = json!("b");
        pending_names(
            StatefulSetKind::rolled_out(Some(1), &rolling, 2),
            "status.currentRevision: want b (updateRevision), got a",
        );
        pending_names(
            AdvancedStatefulSetKind::rolled_out(Some(1), &rolling, 2),
            "status.currentRevision",
        );
    }

    #[test]
    fn deployment_counts_updated_replicas() {
        let s = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
            "updatedReplicas": 2});
        assert_eq!(DeploymentKind::rolled_out(Some(1), &s, 2), Check::Met);
        pending_names(
            DeploymentKind::rolled_out(Some(1), &json!({"observedGeneration": 1}), 2),
            "status.replicas: want 2, got 0",
        );
    }

    #[test]
    fn daemonsets_count_scheduled_pods() {
        let s = json!({"observedGeneration": 1, "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3, "numberMisscheduled": 0, "numberReady": 3,
            "updatedNumberScheduled": 3});
        assert_eq!(DaemonSetKind::rolled_out(Some(1), &s, 3), Check::Met);
        assert_eq!(
            AdvancedDaemonSetKind::rolled_out(Some(1), &s, 3),
            Check::Met
        );
        let mut unready = s.clone();
        unready["numberReady"] = json!(2);
        pending_names(
            AdvancedDaemonSetKind::rolled_out(Some(1), &unready, 3),
            "status.numberReady: want 3, got 2",
        );
        pending_names(
            DaemonSetKind::rolled_out(Some(1), &unready, 3),
            "status.numberReady: want 3, got 2",
        );
    }

    #[test]
    fn manifests_carry_the_kind_strategy_and_data_volume() {
        let m = CloneSet::new("web")
            .replicas(2)
            .in_place_if_possible()
            .data_volume("1Gi")
            .manifest();
        assert_eq!(m["apiVersion"], "apps.kruise.io/v1alpha1");
        assert_eq!(m["spec"]["updateStrategy"]["type"], "InPlaceIfPossible");
        assert_eq!(
            m["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            "1Gi"
        );
        let d = Deployment::new("d").strategy("Recreate").manifest();
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
        let ds = AdvancedDaemonSet::new("a")
            .node_selector("k", "v")
            .manifest();
        assert_eq!(ds["kind"], "DaemonSet");
        assert!(ds["spec"].get("replicas").is_none());
        assert_eq!(ds["spec"]["template"]["spec"]["nodeSelector"]["k"], "v");
        let sts = AdvancedStatefulSet::new("s").manifest();
        assert_eq!(sts["apiVersion"], "apps.kruise.io/v1beta1");
    }
}
