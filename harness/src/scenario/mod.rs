//! Scenarios as values. Start with [`Scenario`]: a name, a suite, labels, [`Requirements`] and
//! an async body over a typed [`Ctx`] (its own namespace, a client, cluster facts, timeouts and
//! a cleanup stack). [`wait`] has the bounded, watch-based waits; [`monitor`] the invariants
//! watched while a scenario runs, [`invariants`] the checks run after it.

pub mod coverage;
pub mod invariants;
pub mod monitor;
pub mod record;
pub mod steps;
pub mod workload;

pub use crate::wait;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde::{Deserialize, Serialize};

use self::record::{Recorder, Sent, Verb};
pub use self::steps::{StepRecord, Steps};
use crate::controller::ControllerRef;
use crate::toolchain::KubeVersion;

/// How a table-driven scenario starts each finding line of its failure (one line per case that
/// went wrong); the ledger then judges the failure line by line.
pub const FINDING: &str = "finding: ";

/// A scenario body as a plain function (what most suites write).
pub type BodyFn = fn(Ctx) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// A scenario body: a function of its context, shared (a declarative test carries its data).
pub type Body =
    Arc<dyn Fn(Ctx) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + Send + Sync>;

/// What a scenario needs from its cell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirements {
    /// Oldest Kubernetes minor it runs on (inclusive), e.g. (1, 27).
    pub min_kubernetes: Option<(u32, u32)>,
    /// Newest Kubernetes minor it runs on (inclusive).
    pub max_kubernetes: Option<(u32, u32)>,
    /// apiserver (control plane) feature gates.
    pub apiserver_gates: BTreeMap<String, bool>,
    /// Controller manager feature gates.
    pub controller_gates: BTreeMap<String, bool>,
    /// It runs across a controller upgrade: installed at a baseline, its body calls
    /// [`Ctx::upgrade_controller`] to replace it with a candidate. Only qualification
    /// (`harness qualify`) has both; other runs skip it.
    #[serde(default)]
    pub upgrade: bool,
    /// The oldest controller release that has what the scenario exercises (an API field, a
    /// feature); older releases skip it with the reason. Commits and checkouts have it.
    #[serde(default)]
    pub min_controller: Option<String>,
    /// Real nodes (a kubelet and a container runtime each) the scenario needs beside the fake
    /// ones; its cluster gets them (local provider), other providers skip it.
    #[serde(default)]
    pub real_nodes: usize,
    /// It may take the controller down (an object that panics a release with a known bug on
    /// every sync): it runs after the other scenarios of its cluster, with none beside it, so
    /// that none of theirs meets a controller that is restarting.
    #[serde(default)]
    pub alone: bool,
    /// Skipped everywhere, with this reason (a declarative test that says `skip: true`).
    #[serde(default)]
    pub skip: Option<String>,
    /// Who makes the scenario's namespace: the runner (by default), or the body (a chainsaw
    /// test, whose namespace chainsaw makes from its templates).
    #[serde(default)]
    pub namespace: NamespaceMaker,
}

/// Who makes a scenario's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum NamespaceMaker {
    /// The runner makes `h-<name>-<random>`, labelled as the run's, before the body.
    #[default]
    Runner,
    /// The body makes it: under the runner's name, or under `name` when the body chooses it
    /// (`None`: the body's tool chooses one the runner cannot know, and the runner watches
    /// its own name, which stays empty). The runner watches it and deletes it afterwards if
    /// the body left it.
    Body {
        /// The name the body uses instead of the runner's.
        name: Option<String>,
    },
}

impl Requirements {
    /// Why the scenario cannot run on `kubernetes`, if it cannot.
    pub fn unmet(&self, kubernetes: KubeVersion) -> Option<String> {
        if let Some(why) = &self.skip {
            return Some(why.clone());
        }
        let v = (kubernetes.major, kubernetes.minor);
        if let Some(min) = self.min_kubernetes
            && v < min
        {
            return Some(format!(
                "needs Kubernetes >= {}.{}, cell has {kubernetes}",
                min.0, min.1
            ));
        }
        if let Some(max) = self.max_kubernetes
            && v > max
        {
            return Some(format!(
                "needs Kubernetes <= {}.{}, cell has {kubernetes}",
                max.0, max.1
            ));
        }
        None
    }

    /// Why the scenario cannot run against `controller`, if it cannot.
    pub fn unmet_controller(&self, controller: &ControllerRef) -> Option<String> {
        use crate::toolchain::versions::Version;
        let min = self.min_controller.as_deref()?;
        let below = match (
            controller.version.parse::<Version>(),
            min.parse::<Version>(),
        ) {
            (Ok(have), Ok(min)) => have.parts() >= 2 && have.cmp_within(&min).is_lt(),
            _ => false,
        };
        (controller.is_release() && below).then(|| {
            format!(
                "needs {} >= {min}, cell has {}",
                controller.kind.name(),
                controller.version
            )
        })
    }
}

/// A scenario's text: a literal in the catalog, owned when read from a file (chainsaw tests).
pub type Text = Cow<'static, str>;

/// What a list of texts can be given as: a literal list, or owned strings.
pub trait Texts {
    /// The texts.
    fn texts(self) -> Vec<Text>;
}

impl<const N: usize> Texts for &'static [&'static str; N] {
    fn texts(self) -> Vec<Text> {
        self.iter().map(|s| Text::Borrowed(s)).collect()
    }
}

impl Texts for &'static [&'static str] {
    fn texts(self) -> Vec<Text> {
        self.iter().map(|s| Text::Borrowed(s)).collect()
    }
}

impl Texts for Vec<String> {
    fn texts(self) -> Vec<Text> {
        self.into_iter().map(Text::Owned).collect()
    }
}

/// One conformance scenario.
#[derive(Clone)]
pub struct Scenario {
    /// Unique name, `suite/short-name` (the suite is the part before the first `/`).
    pub name: Text,
    /// One line saying what it establishes.
    pub summary: Text,
    /// Labels for `--labels`.
    pub labels: Vec<Text>,
    /// What it needs.
    pub requires: Requirements,
    /// Warning event reasons the scenario expects (not counted by the invariants).
    pub allowed_warnings: Vec<Text>,
    /// Invariant rules the scenario expects the watching monitor to see broken (by rule
    /// name), e.g. because its body deletes pods by hand; they are not counted as findings.
    pub expected_violations: Vec<Text>,
    /// Its body.
    pub body: Body,
}

impl Scenario {
    /// A scenario of the suite its name begins with (`suite/behaviour`), with no
    /// requirements, allowed Warning reasons or expected violations; the builder methods
    /// below add them. Every scenario is made this way.
    pub fn new<F, Fut>(
        name: impl Into<Text>,
        summary: impl Into<Text>,
        labels: impl Texts,
        body: F,
    ) -> Self
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Self {
            name: name.into(),
            summary: summary.into(),
            labels: labels.texts(),
            requires: Requirements::default(),
            allowed_warnings: vec![],
            expected_violations: vec![],
            body: Arc::new(move |ctx| Box::pin(body(ctx))),
        }
    }

    /// The suite (feature area): the part of the name before the first `/`.
    pub fn suite(&self) -> &str {
        self.name.split('/').next().unwrap_or(&self.name)
    }

    /// Whether it has label `label`.
    pub fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l == label)
    }

    /// The same scenario, with these requirements.
    pub fn requiring(mut self, requires: Requirements) -> Self {
        self.requires = requires;
        self
    }

    /// The same scenario, expecting Warning events with these reasons.
    pub fn allowing(mut self, warnings: impl Texts) -> Self {
        self.allowed_warnings = warnings.texts();
        self
    }

    /// The same scenario, expecting the monitor to see these rules broken.
    pub fn expecting(mut self, rules: impl Texts) -> Self {
        self.expected_violations = rules.texts();
        self
    }

    /// The same scenario, with controller gate `gate` on.
    pub fn with_controller_gate(mut self, gate: &str) -> Self {
        self.requires.controller_gates.insert(gate.into(), true);
        self
    }

    /// The same scenario, with cluster (Kubernetes) feature gate `gate` on.
    pub fn with_cluster_gate(mut self, gate: &str) -> Self {
        self.requires.apiserver_gates.insert(gate.into(), true);
        self
    }

    /// The same scenario, on a cluster with `count` real nodes (see
    /// [`Requirements::real_nodes`]).
    pub fn on_real_nodes(mut self, count: usize) -> Self {
        self.requires.real_nodes = count;
        self
    }

    /// The same scenario, run with no other beside it (see [`Requirements::alone`]).
    pub fn alone(mut self) -> Self {
        self.requires.alone = true;
        self
    }

    /// The same scenario, for controller releases from `release` on (see
    /// [`Requirements::min_controller`]).
    pub fn since(mut self, release: &str) -> Self {
        self.requires.min_controller = Some(release.into());
        self
    }
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("name", &self.name)
            .field("requires", &self.requires)
            .finish_non_exhaustive()
    }
}

/// Facts about the cell a scenario runs in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Facts {
    /// Kubernetes version.
    pub kubernetes: KubeVersion,
    /// Controller under test.
    pub controller: ControllerRef,
    /// Node names by zone (the fake nodes).
    pub zones: BTreeMap<String, Vec<String>>,
    /// The real nodes' names (see [`Requirements::real_nodes`]).
    #[serde(default)]
    pub real_nodes: Vec<String>,
    /// An admin kubeconfig of the cell, for tools a scenario runs (declarative tests' scripts).
    #[serde(skip)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The toolchain's kubectl for the cell's Kubernetes version, when the run built it.
    #[serde(skip)]
    pub kubectl: Option<std::path::PathBuf>,
    /// The toolchain's chainsaw, when the run selected a chainsaw test.
    #[serde(skip)]
    pub chainsaw: Option<std::path::PathBuf>,
}

impl Facts {
    /// Whether the controller under test has what release `release` brought (commits and
    /// checkouts are taken to have it): for a scenario that asks for a later addition only
    /// where it exists.
    pub fn controller_since(&self, release: &str) -> bool {
        Requirements {
            min_controller: Some(release.into()),
            ..Requirements::default()
        }
        .unmet_controller(&self.controller)
        .is_none()
    }
}

/// Timeouts a scenario uses.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// For a workload to converge.
    pub converge: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            converge: Duration::from_secs(90),
        }
    }
}

/// Objects to delete after the scenario, newest first (namespaced objects go with the
/// namespace; cluster-scoped ones are pushed here).
#[derive(Clone, Default)]
pub struct Cleanup {
    stack: std::sync::Arc<std::sync::Mutex<Vec<Deletion>>>,
}

/// One object to delete: its API and name.
type Deletion = (Api<DynamicObject>, String);

impl Cleanup {
    /// Deletes `name` of `api` when the scenario ends.
    pub fn push(&self, api: Api<DynamicObject>, name: &str) {
        self.stack
            .lock()
            .expect("not poisoned")
            .push((api, name.to_string()));
    }

    /// Unwinds the stack in reverse order; every error is collected, none stops the unwinding.
    pub async fn unwind(&self) -> Vec<String> {
        let items: Vec<_> = std::mem::take(&mut *self.stack.lock().expect("not poisoned"));
        let mut errors = vec![];
        for (api, name) in items.into_iter().rev() {
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => errors.push(format!("delete {name}: {e}")),
            }
        }
        errors
    }
}

/// What a scenario body gets: its own namespace, a client, the cell's facts, timeouts and a
/// cleanup stack.
///
/// Every write goes through it ([`Ctx::create`], [`Ctx::patch`], [`Ctx::json_patch`],
/// [`Ctx::replace`]), so that what the scenario sends is recorded ([`Ctx::recorder`]) for the
/// coverage report; the client is for reads and watches.
#[derive(Clone)]
pub struct Ctx {
    /// The scenario's own namespace (created before, deleted after).
    pub namespace: String,
    /// An admin client.
    pub client: kube::Client,
    /// Cell facts.
    pub facts: Facts,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Deletions run after the scenario.
    pub cleanup: Cleanup,
    /// Replaces the controller with the candidate, for scenarios that run across an upgrade.
    pub upgrade: Option<Upgrade>,
    /// What the scenario sent.
    pub recorder: Recorder,
    /// Its named steps so far ([`Ctx::step`]).
    pub steps: Steps,
}

/// Replaces the installed controller (its CRDs, webhook configurations and components) with
/// another version, in the scenario's cluster. Given by the runner to upgrade scenarios.
#[derive(Clone)]
pub struct Upgrade(pub Arc<dyn Fn() -> BoxFuture<'static, anyhow::Result<()>> + Send + Sync>);

impl Ctx {
    /// A context for a scenario in `namespace` (which the caller creates and deletes).
    pub fn new(namespace: &str, client: kube::Client, facts: Facts, timeouts: Timeouts) -> Self {
        Self {
            namespace: namespace.into(),
            client,
            facts,
            timeouts,
            cleanup: Cleanup::default(),
            upgrade: None,
            recorder: Recorder::default(),
            steps: Steps::default(),
        }
    }

    /// Runs `work` as the scenario's next named step: its name and times go into the report,
    /// and its error says which step failed and after how long (`step 3, 'lower the
    /// partition to 0', after 12.4 s: …`).
    pub async fn step<T>(
        &self,
        name: &str,
        work: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        self.steps.run(name, work).await
    }

    /// Records which way the current step passed, when it may pass one of two ways ("the
    /// change was refused" or "the change reached the copy"): the report shows it beside the
    /// result, so two passes that differ can be told apart.
    pub fn passed_by(&self, way: &str) {
        self.steps.passed_by(way);
    }

    /// Waits until the live object `expected` names (its `apiVersion`, `kind` and
    /// `metadata.name`, in the scenario's namespace if namespaced) holds every field
    /// `expected` gives ([`steps::subset`]), as a chainsaw assert does; YAML or JSON. On
    /// timeout the error names the first field that differs and the value last seen.
    pub async fn wait_subset(&self, expected: &str, timeout: Duration) -> anyhow::Result<()> {
        let expected: serde_json::Value = serde_saphyr::from_str(expected)
            .map_err(|e| anyhow::anyhow!("expected object: {e}"))?;
        let name = expected["metadata"]["name"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("the expected object names no metadata.name"))?
            .to_string();
        let api = self.api_of(&expected).await?;
        let what = format!(
            "{} {name} to hold what is expected",
            expected["kind"].as_str().unwrap_or_default()
        );
        wait::poll(&what, timeout, Duration::from_millis(250), || {
            let (api, name, expected) = (api.clone(), name.clone(), expected.clone());
            async move {
                match api.get_opt(&name).await {
                    Ok(Some(o)) => {
                        let live = serde_json::to_value(&o).unwrap_or_default();
                        match steps::subset(&expected, &live) {
                            Ok(()) => wait::Check::Met,
                            Err(why) => wait::Check::Pending(why),
                        }
                    }
                    Ok(None) => wait::Check::Pending("it does not exist".into()),
                    Err(e) => wait::Check::Pending(e.to_string()),
                }
            }
        })
        .await?;
        Ok(())
    }

    /// Replaces the controller with the candidate and waits until it is ready.
    pub async fn upgrade_controller(&self) -> anyhow::Result<()> {
        match &self.upgrade {
            Some(Upgrade(upgrade)) => upgrade().await,
            None => anyhow::bail!(
                "upgrade the controller: this run has no upgrade target (`harness qualify` runs \
                 upgrade scenarios)"
            ),
        }
    }

    /// A typed API in the scenario's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A dynamic API for `apiVersion` + `kind` (namespaced ones in the scenario's namespace).
    pub async fn dyn_api(
        &self,
        api_version: &str,
        kind: &str,
    ) -> anyhow::Result<Api<DynamicObject>> {
        let (ar, caps) = pinned(&self.client, api_version, kind).await?;
        Ok(match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), &self.namespace, &ar)
            }
            kube::discovery::Scope::Cluster => Api::all_with(self.client.clone(), &ar),
        })
    }

    /// The API of `obj` (from its `apiVersion` and `kind`).
    async fn api_of(&self, obj: &serde_json::Value) -> Result<Api<DynamicObject>, kube::Error> {
        self.dyn_api(
            obj["apiVersion"].as_str().unwrap_or_default(),
            obj["kind"].as_str().unwrap_or_default(),
        )
        .await
        .map_err(|e| kube::Error::Service(e.into()))
    }

    /// Creates an object given as JSON (`apiVersion` and `kind` pick the API); cluster-scoped
    /// objects are pushed on the cleanup stack.
    pub async fn create(&self, obj: serde_json::Value) -> Result<DynamicObject, kube::Error> {
        let api = self.api_of(&obj).await?;
        self.record_object(&obj, Verb::Create);
        let o: DynamicObject = serde_json::from_value(obj).map_err(kube::Error::SerdeError)?;
        let created = api.create(&PostParams::default(), &o).await?;
        if created.metadata.namespace.is_none() {
            self.cleanup
                .push(api, created.metadata.name.as_deref().unwrap_or_default());
        }
        Ok(created)
    }

    /// Asks whether the API admits creating an object given as JSON (a dry run: nothing is
    /// made, every admission webhook answers).
    pub async fn admits(&self, obj: &serde_json::Value) -> Result<(), kube::Error> {
        let api = self.api_of(obj).await?;
        self.record_object(obj, Verb::Create);
        let o: DynamicObject =
            serde_json::from_value(obj.clone()).map_err(kube::Error::SerdeError)?;
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        api.create(&params, &o).await.map(|_| ())
    }

    /// Replaces an object given as JSON (with its `metadata.resourceVersion`, if the update
    /// must not overwrite a newer one).
    pub async fn replace(&self, obj: serde_json::Value) -> Result<DynamicObject, kube::Error> {
        let api = self.api_of(&obj).await?;
        self.record_object(&obj, Verb::Replace);
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let o: DynamicObject = serde_json::from_value(obj).map_err(kube::Error::SerdeError)?;
        api.replace(&name, &PostParams::default(), &o).await
    }

    /// Merge-patches the object `name` of `apiVersion` + `kind`.
    pub async fn patch(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        body: serde_json::Value,
    ) -> Result<DynamicObject, kube::Error> {
        let api = self
            .api_of(&serde_json::json!({"apiVersion": api_version, "kind": kind}))
            .await?;
        self.recorder
            .record(Sent::of_object(api_version, kind, Verb::MergePatch, &body));
        api.patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await
    }

    /// Applies a JSON patch (RFC 6902) to the object `name` of `apiVersion` + `kind`.
    pub async fn json_patch(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        ops: serde_json::Value,
    ) -> Result<DynamicObject, kube::Error> {
        let api = self
            .api_of(&serde_json::json!({"apiVersion": api_version, "kind": kind}))
            .await?;
        self.recorder
            .record(Sent::of_json_patch(api_version, kind, &ops));
        let patch: json_patch::Patch =
            serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
        api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
    }

    /// Deletes the object `name` of `apiVersion` + `kind` (background propagation).
    pub async fn delete(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<(), kube::Error> {
        let api = self
            .api_of(&serde_json::json!({"apiVersion": api_version, "kind": kind}))
            .await?;
        api.delete(name, &DeleteParams::background())
            .await
            .map(|_| ())
    }

    fn record_object(&self, obj: &serde_json::Value, verb: Verb) {
        self.recorder.record(Sent::of_object(
            obj["apiVersion"].as_str().unwrap_or_default(),
            obj["kind"].as_str().unwrap_or_default(),
            verb,
            obj,
        ));
    }

    /// A name unique to this scenario, for cluster-scoped objects.
    pub fn unique(&self, base: &str) -> String {
        format!("{base}-{}", self.namespace)
    }
}

/// The status of a dynamic object, or null.
pub fn status(o: &DynamicObject) -> &serde_json::Value {
    &o.data["status"]
}

/// What the cluster serves for `apiVersion` + `kind` (`v1`, `apps/v1`, ...): its resource and
/// capabilities (scope), by discovery of that group version.
pub async fn pinned(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<
    (
        kube::discovery::ApiResource,
        kube::discovery::ApiCapabilities,
    ),
    kube::Error,
> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pre_release_has_not_what_its_release_brings() {
        let needs = Requirements {
            min_controller: Some("v1.9.0".into()),
            ..Requirements::default()
        };
        let at = |tag: &str| {
            format!("openkruise@{tag}")
                .parse::<ControllerRef>()
                .unwrap()
        };
        assert_eq!(
            needs.unmet_controller(&at("v1.9.0-rc.1")).as_deref(),
            Some("needs openkruise >= v1.9.0, cell has v1.9.0-rc.1")
        );
        assert_eq!(needs.unmet_controller(&at("v1.9.0")), None);
        assert_eq!(needs.unmet_controller(&at("v1.10.0")), None);
        assert!(needs.unmet_controller(&at("v1.8.3")).is_some());
        assert_eq!(needs.unmet_controller(&at("4c2bbcec")), None);
    }
}
