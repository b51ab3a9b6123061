//! Running one trial on a ready cell. Start with [`Cell::run`]: it makes a namespace of the
//! trial's own, sends each step, and judges the trial with every oracle that applies — the
//! admission oracles on each create and update, and for a behaviour trial the monitor while
//! it runs, convergence once it settles, repeated failure events and the controller's health.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::params::ValidationDirective;
use serde_json::{Value, json};

mod copies;

use super::oracle::{self, Answer, Finding, Oracle, PodView};
use super::pace::Phases;
use super::subject::{
    IMAGE_V2, Makes, Subject, TRIAL_LABEL, get, resolve, set, split_target, target_name,
};
use super::trial::{Fields, Mode, Op, Perturbation, Step, Trial, Watched, Which};
use crate::cluster::OWNER_LABEL;
use crate::controller::Installation;
use crate::scenario::monitor;
use crate::wait::{Check, poll};

/// What a trial run saw.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The rules it broke.
    pub findings: Vec<Finding>,
    /// The subject's answer to each create and update, in step order.
    pub answers: Vec<Answer>,
    /// What happened, a line a step.
    pub log: Vec<String>,
    /// The controller's log lines of the trial's window (behaviour trials that broke a rule).
    pub manager_log: String,
    /// How it ended, for the release differential.
    pub end: oracle::EndState,
    /// How long each phase of a behaviour trial took ([`super::pace::PHASES`]).
    pub phases: Vec<(&'static str, std::time::Duration)>,
}

/// A cluster with the controller installed, that trials run on.
pub struct Cell<'a> {
    /// An admin client.
    pub client: kube::Client,
    /// The installed controller.
    pub installation: &'a Installation,
    /// The cluster, for the perturbations that act on it (a node gone NotReady, the apiserver
    /// restarted); `None` leaves them out.
    pub cluster: Option<&'a crate::cluster::any::AnyCluster>,
    /// Who owns the namespaces trials make (the cluster's name).
    pub owner: String,
    /// How long a behaviour trial may take to settle.
    pub settle: Duration,
    /// Namespaces made so far (their names count them).
    pub made: std::sync::atomic::AtomicUsize,
    /// The objects trials' references name ([`super::openapi::Doc::referenced`]).
    pub references: Vec<super::openapi::Made>,
}

const MANAGER: &str = "harness-explore";

/// What a behaviour trial's perturbations left that its end undoes.
#[derive(Debug, Default)]
struct Undo {
    /// Nodes it cordoned.
    cordoned: Vec<String>,
    /// Nodes whose kubelet it silenced.
    silenced: Vec<String>,
    /// The resources whose watch events it held or dropped.
    stale: Vec<String>,
    /// A window of the controller's logs opening once an apiserver the trial restarted served
    /// again.
    served: Option<crate::controller::Window>,
    /// When that apiserver served again.
    served_at: Option<k8s_openapi::jiff::Timestamp>,
}

/// The twin's object name in a behaviour trial (the subject's is `x`: their pods' names
/// must not collide).
const TWIN: &str = "t";

/// Whether a monitored object ("Kind name") is the twin's or made for it (its target, pods,
/// ReplicaSets, claims): the monitor judges the subject's side; the twin is the reference.
fn of_twin(object: &str) -> bool {
    let name = object.rsplit(' ').next().unwrap_or(object);
    name == TWIN || name.starts_with(&format!("{TWIN}-")) || name.contains(&format!("-{TWIN}-"))
}

/// Sends an operation's merge patch to object `name`; a refusal is an error with the API's
/// message.
async fn merge(api: &Api<DynamicObject>, name: &str, patch: &Value) -> anyhow::Result<()> {
    match api.patch(name, &strict(), &Patch::Merge(patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => anyhow::bail!("refused: {}", e.message),
        Err(e) => Err(e.into()),
    }
}

fn strict() -> PatchParams {
    PatchParams {
        dry_run: false,
        force: false,
        field_manager: Some(MANAGER.into()),
        field_validation: Some(ValidationDirective::Strict),
    }
}

fn answer(r: Result<DynamicObject, kube::Error>) -> Answer {
    match r {
        Ok(_) => Answer::Admitted,
        // Strict validation's words, for a create (server-side apply: a field the schema
        // lacks, or of another type there) and an update.
        Err(kube::Error::Api(s))
            if s.message.contains("failed to create typed patch object")
                || s.message.contains("cannot unmarshal")
                || s.message.contains("field not declared in schema")
                || s.message.contains("unknown field") =>
        {
            Answer::UnknownField(s.message)
        }
        Err(kube::Error::Api(s)) => Answer::Refused(s.message),
        Err(e) => Answer::Refused(format!("request failed: {e}")),
    }
}

/// The resource of `kind` and whether it is cluster-scoped. It is discovered once per API
/// version and kind (a kind's plural and scope are the same on every cell), not on every poll
/// of a trial.
async fn resource(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> anyhow::Result<(kube::discovery::ApiResource, bool)> {
    type Known = std::sync::Mutex<BTreeMap<(String, String), (kube::discovery::ApiResource, bool)>>;
    static KNOWN: std::sync::OnceLock<Known> = std::sync::OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    let key = (api_version.to_string(), kind.to_string());
    let cached = known.lock().ok().and_then(|m| m.get(&key).cloned());
    Ok(match cached {
        Some(found) => found,
        None => {
            let (ar, caps) = crate::scenario::pinned(client, api_version, kind).await?;
            let found = (ar, caps.scope == kube::discovery::Scope::Cluster);
            if let Ok(mut m) = known.lock() {
                m.insert(key, found.clone());
            }
            found
        }
    })
}

/// The API of `kind` in `namespace` (of every namespace for a cluster-scoped kind).
async fn api_for(
    client: &kube::Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
) -> anyhow::Result<Api<DynamicObject>> {
    let (ar, cluster) = resource(client, api_version, kind).await?;
    Ok(match cluster {
        true => Api::all_with(client.clone(), &ar),
        false => Api::namespaced_with(client.clone(), namespace, &ar),
    })
}

/// The name of a trial's object `name` in namespace `ns`: itself, or for a cluster-scoped
/// kind (which the namespace does not hold) prefixed with the namespace, so that trials at
/// once do not meet and [`Cell::drop_namespace`] finds it.
async fn scoped_name(
    client: &kube::Client,
    s: &Subject,
    ns: &str,
    name: &str,
) -> anyhow::Result<String> {
    let (_, cluster) = resource(client, &s.api_version, s.kind).await?;
    Ok(match cluster {
        true => format!("{ns}-{name}"),
        false => name.to_string(),
    })
}

/// The subject's object (or its twin's) with `fields` set.
fn object(seed: Value, fields: &Fields, path: impl Fn(&str) -> Option<String>) -> Option<Value> {
    let mut o = seed;
    for (k, v) in fields {
        set(&mut o, &path(k)?, v.clone()).ok()?;
    }
    Some(o)
}

/// `fields` with the trial's namespace `ns` and object name `name` in place of their
/// placeholders ([`resolve`]).
fn resolved(fields: &Fields, ns: &str, name: &str) -> Fields {
    fields
        .iter()
        .map(|(k, v)| (k.clone(), resolve(v, ns, name)))
        .collect()
}

/// A merge patch that sets `fields` (at the paths `path` gives) on the object `name` as it is
/// now: a path through a list item carries the whole list, since a merge patch replaces lists;
/// a removed field is an explicit null. None when the object cannot be read or a field has
/// no path.
async fn update_patch(
    api: &Api<DynamicObject>,
    name: &str,
    fields: &Fields,
    path: impl Fn(&str) -> Option<String>,
) -> Option<Value> {
    let mut next = serde_json::to_value(api.get(name).await.ok()?).ok()?;
    let mut patch = json!({});
    for (k, v) in fields {
        let p = path(k)?;
        set(&mut next, &p, v.clone()).ok()?;
        let whole = p.split_once('[').map_or(p.as_str(), |(head, _)| head);
        super::subject::put(&mut patch, whole, get(&next, whole).clone()).ok()?;
    }
    Some(patch)
}

/// One side of a behaviour trial (the subject's or its twin's): the subject's API and what
/// operations, perturbations and convergence act on — the object itself, or a policy's
/// target.
struct Side {
    subject: Subject,
    api: Api<DynamicObject>,
    workload: Subject,
    wapi: Api<DynamicObject>,
    wname: String,
}

impl Side {
    async fn new(client: &kube::Client, ns: &str, s: &Subject, name: &str) -> anyhow::Result<Self> {
        let workload = s.workload();
        Ok(Side {
            subject: s.clone(),
            api: api_for(client, ns, &s.api_version, s.kind).await?,
            wapi: api_for(client, ns, &workload.api_version, workload.kind).await?,
            wname: match s.target {
                Some(_) => target_name(name),
                None => name.to_string(),
            },
            workload,
        })
    }
}

impl Cell<'_> {
    /// Makes what every trial may refer to: the cluster-scoped objects of
    /// [`Cell::references`] (the namespaced ones are made in each namespace,
    /// [`Cell::namespace`]).
    pub async fn prepare(&self) -> anyhow::Result<()> {
        for r in self.references.iter().filter(|r| !r.namespaced) {
            self.make_reference(r, "").await;
        }
        Ok(())
    }

    /// Makes the object `r` in namespace `ns` (or the cluster), owned by the cell; one the API
    /// refuses is logged, not fatal: a trial naming it then names nothing.
    async fn make_reference(&self, r: &super::openapi::Made, ns: &str) {
        let (api_version, kind) = (
            r.object["apiVersion"].as_str().unwrap_or_default(),
            r.object["kind"].as_str().unwrap_or_default(),
        );
        let made = async {
            let api = api_for(&self.client, ns, api_version, kind).await?;
            let mut o = r.object.clone();
            o["metadata"]["labels"] = json!({OWNER_LABEL: self.owner});
            let o: DynamicObject = serde_json::from_value(o)?;
            match api.create(&PostParams::default(), &o).await {
                Ok(_) => anyhow::Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(e) => Err(e.into()),
            }
        };
        if let Err(e) = made.await {
            tracing::warn!("make the referenced {kind} {ns}: {e:#}");
        }
    }

    /// Makes the target of the policy object `name` of `s` (none for a workload subject),
    /// kept from making pods ([`Subject::idle`]).
    /// `set` holds the target's fields of the trial's create ([`super::subject::TARGET`]).
    async fn make_target(
        &self,
        ns: &str,
        s: &Subject,
        name: &str,
        set: &Fields,
    ) -> anyhow::Result<Option<String>> {
        let Some(t) = &s.target else {
            return Ok(None);
        };
        let api = api_for(&self.client, ns, &t.api_version, t.kind).await?;
        let target = target_name(name);
        let (_, mut fields) = split_target(set);
        fields.extend(t.idle());
        let Some(o) = object(t.seed.make(&target), &fields, |k| Some(k.to_string())) else {
            anyhow::bail!("set {fields:?} on the target {} {target}", t.kind);
        };
        match api.patch(&target, &strict(), &Patch::Apply(&o)).await {
            Ok(_) => Ok(None),
            // The target's template is the target kind's to admit (its own subject explores
            // that): the trial has no policy to judge.
            Err(kube::Error::Api(e)) if (400..500).contains(&e.code) && e.code != 409 => {
                Ok(Some(e.message))
            }
            Err(e) => Err(anyhow::anyhow!("make the target {} {target}: {e}", t.kind)),
        }
    }

    /// Lets a policy's target make its pods once the policy exists ([`Subject::wake`]), as
    /// the trial's create `set` has it.
    async fn scale_target(&self, side: &Side, set: &Fields) -> anyhow::Result<()> {
        if side.subject.target.is_none() {
            return Ok(());
        }
        let patch = side.workload.wake(&side.wname, &split_target(set).1);
        side.wapi
            .patch(&side.wname, &strict(), &Patch::Merge(&patch))
            .await
            .map_err(|e| anyhow::anyhow!("scale the target {}: {e}", side.wname))?;
        Ok(())
    }

    /// Makes a namespace of the trials' own, removed by [`Cell::drop_namespace`].
    pub async fn namespace(&self, subject: &Subject) -> anyhow::Result<String> {
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ns = format!("x-{}-{n}-{:04x}", subject.slug(), rand::random::<u16>());
        let nss: Api<Namespace> = Api::all(self.client.clone());
        let body: Namespace = serde_json::from_value(json!({"metadata": {
            "name": ns, "labels": {OWNER_LABEL: self.owner, TRIAL_LABEL: ns}}}))?;
        nss.create(&PostParams::default(), &body).await?;
        for r in self.references.iter().filter(|r| r.namespaced) {
            self.make_reference(r, &ns).await;
        }
        Ok(ns)
    }

    /// Deletes a namespace [`Cell::namespace`] made for trials of `subject`, the namespaces its
    /// trials added ([`Op::AddNamespace`]), and the objects of a cluster-scoped subject (or
    /// twin) those trials named after it.
    pub async fn drop_namespace(&self, ns: &str, subject: &Subject) {
        let kinds = std::iter::once(subject.clone()).chain(subject.twin_subject());
        for k in kinds {
            let Ok((ar, true)) = resource(&self.client, &k.api_version, k.kind).await else {
                continue;
            };
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let prefix = format!("{ns}-");
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    for o in list.items {
                        let name = o.metadata.name.unwrap_or_default();
                        if name.starts_with(&prefix)
                            && let Err(e) = api.delete(&name, &DeleteParams::background()).await
                        {
                            tracing::warn!("delete {} {name}: {e}", k.kind);
                        }
                    }
                }
                Err(e) => tracing::warn!("list {}: {e}", k.kind),
            }
        }
        let nss: Api<Namespace> = Api::all(self.client.clone());
        let added = ListParams::default().labels(&format!("{TRIAL_LABEL}={ns}"));
        let mut names = vec![ns.to_string()];
        match nss.list(&added).await {
            Ok(list) => names.extend(
                list.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .filter(|n| n.starts_with(&format!("{ns}-"))),
            ),
            Err(e) => tracing::warn!("list the namespaces of {ns}: {e}"),
        }
        for n in names {
            if let Err(e) = nss.delete(&n, &DeleteParams::background()).await {
                tracing::warn!("delete namespace {n}: {e}");
            }
        }
    }

    /// Runs `trial` of `subject` in a namespace of its own (removed after), and judges it.
    pub async fn run(&self, subject: &Subject, trial: &Trial) -> anyhow::Result<Outcome> {
        // A manager that exited in an earlier trial is running and ready again (its exit was
        // that trial's finding).
        self.installation.revive().await?;
        let mut phases = Phases::start("namespace");
        let ns = self.namespace(subject).await?;
        phases.next("steps");
        let mut result = match trial.mode {
            Mode::Admission => self.admit(subject, trial, &ns, "x").await,
            Mode::Behaviour => self.behaviour(subject, trial, &ns, &mut phases).await,
        };
        self.drop_namespace(&ns, subject).await;
        if let Ok(out) = &mut result {
            out.phases = phases.end();
        }
        result
    }

    /// Runs admission trial `trial` in namespace `ns` (which may be shared: the objects are
    /// named `name`): its last create or update as a dry run on the subject and its twin, the
    /// steps before it for real on both sides.
    pub async fn admit(
        &self,
        s: &Subject,
        trial: &Trial,
        ns: &str,
        name: &str,
    ) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        let name = &scoped_name(&self.client, s, ns, name).await?;
        let ours = api_for(&self.client, ns, &s.api_version, s.kind).await?;
        let twin = match s.twin.as_deref() {
            Some(t) => Some((t, api_for(&self.client, ns, &t.api_version, t.kind).await?)),
            None => None,
        };
        // A twin of the subject's own kind (a policy over another target) is named apart.
        let tname = match s.twin.as_deref() {
            Some(t) if t.kind == s.kind && t.api_version == s.api_version => format!("{name}-t"),
            _ => name.to_string(),
        };
        let tname = tname.as_str();
        let n = trial.steps.len();
        for (i, step) in trial.steps.iter().enumerate() {
            let last = i + 1 == n;
            let mut params = strict();
            params.dry_run = last;
            let (verb, fields, mine, theirs) = match step {
                Step::Create { set } => {
                    let (own, _) = split_target(&resolved(set, ns, name));
                    let seed = resolve(&s.seed.make(name), ns, name);
                    let Some(o) = object(seed, &own, |k| Some(k.to_string())) else {
                        anyhow::bail!("set {set:?} on the seed object");
                    };
                    if let Some(m) = self.make_target(ns, s, name, set).await? {
                        out.log
                            .push(format!("create {set:?}: the target refused: {m}"));
                        out.answers
                            .push(Answer::Refused(format!("the target refused: {m}")));
                        break;
                    }
                    let r = ours.patch(name, &params, &Patch::Apply(&o)).await;
                    if last && let Ok(stored) = &r {
                        let stored = serde_json::to_value(stored)?;
                        out.findings.extend(oracle::stored(s, &own, &stored));
                    }
                    let mine = answer(r);
                    let theirs = match &twin {
                        Some((t, api)) => {
                            match object(resolve(&t.seed.make(tname), ns, tname), &own, |k| {
                                s.twin_path(k)
                            }) {
                                Some(o) => {
                                    let refused = match s.twin_subject() {
                                        Some(ts) => self.make_target(ns, &ts, tname, set).await?,
                                        None => None,
                                    };
                                    match refused {
                                        Some(_) => None,
                                        None => Some(answer(
                                            api.patch(tname, &params, &Patch::Apply(&o)).await,
                                        )),
                                    }
                                }
                                None => None,
                            }
                        }
                        None => None,
                    };
                    ("create", set, mine, theirs)
                }
                Step::Update { set } => {
                    let mine_set = resolved(set, ns, name);
                    let Some(patch) =
                        update_patch(&ours, name, &mine_set, |k| Some(k.to_string())).await
                    else {
                        anyhow::bail!("set {set:?} on the object");
                    };
                    let mine = answer(ours.patch(name, &params, &Patch::Merge(&patch)).await);
                    let theirs = match &twin {
                        Some((_, api)) => {
                            let set = resolved(set, ns, tname);
                            match update_patch(api, tname, &set, |k| s.twin_path(k)).await {
                                Some(p) => {
                                    Some(answer(api.patch(tname, &params, &Patch::Merge(&p)).await))
                                }
                                None => None,
                            }
                        }
                        None => None,
                    };
                    ("update", set, mine, theirs)
                }
                other => {
                    anyhow::bail!("an admission trial has only creates and updates, not {other:?}")
                }
            };
            out.log
                .push(format!("{verb} {fields:?}: {mine:?} (twin: {theirs:?})"));
            let paths: Vec<(&str, &Value)> = fields.iter().map(|(k, v)| (k.as_str(), v)).collect();
            if last {
                out.findings
                    .extend(oracle::admission(s, verb, &paths, &mine, theirs.as_ref()));
            } else if mine != Answer::Admitted {
                anyhow::bail!("the object an update starts from was refused: {mine:?}");
            }
            out.answers.push(mine);
        }
        out.end.admitted = out.answers.iter().map(|a| *a == Answer::Admitted).collect();
        Ok(out)
    }

    /// The object made and driven through the steps while the monitor watches; then settled
    /// and judged.
    async fn behaviour(
        &self,
        s: &Subject,
        trial: &Trial,
        ns: &str,
        phases: &mut Phases,
    ) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        let api = api_for(&self.client, ns, &s.api_version, s.kind).await?;
        let name = &scoped_name(&self.client, s, ns, "x").await?;
        let tname = &match s.twin_subject() {
            Some(t) => scoped_name(&self.client, &t, ns, TWIN).await?,
            None => TWIN.to_string(),
        };
        let window = self.installation.window(ns);
        let settings = monitor::Settings::with_liveness(self.settle);
        let watching = monitor::Monitor::start(&self.client, ns, settings);
        let mut undo = Undo::default();
        let mut refused = false;
        // What operations, perturbations and convergence act on.
        let ours = Side::new(&self.client, ns, s, name).await?;
        // The twin goes through the same steps (perturbations aside) when it has every field.
        let mut twin = match s.twin_subject() {
            Some(t) if trial.fields().iter().all(|(k, _)| s.twin_path(k).is_some()) => {
                Some(Side::new(&self.client, ns, &t, tname).await?)
            }
            _ => None,
        };
        for step in &trial.steps {
            let line = match step {
                Step::Create { set } => {
                    let (own, _) = split_target(&resolved(set, ns, name));
                    let seed = resolve(&s.seed.make(name), ns, name);
                    let Some(o) = object(seed, &own, |k| Some(k.to_string())) else {
                        anyhow::bail!("set {set:?} on the seed object");
                    };
                    if let Some(m) = self.make_target(ns, s, name, set).await? {
                        out.log
                            .push(format!("create {set:?}: the target refused: {m}"));
                        out.answers
                            .push(Answer::Refused(format!("the target refused: {m}")));
                        refused = true;
                        break;
                    }
                    let a = answer(api.patch(name, &strict(), &Patch::Apply(&o)).await);
                    refused = a != Answer::Admitted;
                    if !refused {
                        self.scale_target(&ours, set).await?;
                    }
                    out.answers.push(a.clone());
                    if let Some(side) = &twin {
                        let seed = resolve(&side.subject.seed.make(tname), ns, tname);
                        let o = object(seed, &own, |k| s.twin_path(k));
                        let ok = match o {
                            Some(o) => {
                                self.make_target(ns, &side.subject, tname, set)
                                    .await?
                                    .is_none()
                                    && side
                                        .api
                                        .patch(tname, &strict(), &Patch::Apply(&o))
                                        .await
                                        .is_ok()
                                    && self.scale_target(side, set).await.is_ok()
                            }
                            None => false,
                        };
                        if !ok {
                            twin = None;
                        }
                    }
                    format!("create {set:?}: {a:?}")
                }
                Step::Update { set } => {
                    // A policy's update of its target's fields changes the target.
                    let (own, target) = split_target(&resolved(set, ns, name));
                    let (api, name, set, twin_api, twin_name) = match own.is_empty() {
                        false => (
                            &api,
                            name.as_str(),
                            &own,
                            twin.as_ref().map(|t| &t.api),
                            tname.as_str(),
                        ),
                        true => (
                            &ours.wapi,
                            ours.wname.as_str(),
                            &target,
                            twin.as_ref().map(|t| &t.wapi),
                            twin.as_ref().map_or("", |t| t.wname.as_str()),
                        ),
                    };
                    let patch = update_patch(api, name, set, |k| Some(k.to_string())).await;
                    let a = match patch {
                        Some(p) => answer(api.patch(name, &strict(), &Patch::Merge(&p)).await),
                        None => Answer::Refused(format!("set {set:?} on the object")),
                    };
                    out.answers.push(a.clone());
                    if let Some(twin_api) = twin_api
                        && let Some(p) =
                            update_patch(twin_api, twin_name, set, |k| s.twin_path(k)).await
                    {
                        let _ = twin_api
                            .patch(twin_name, &strict(), &Patch::Merge(&p))
                            .await;
                    }
                    format!("update {set:?}: {a:?}")
                }
                Step::Operate { op } => {
                    let r = self
                        .operate(&ours.workload, &ours.wapi, ns, &ours.wname, *op)
                        .await;
                    if let Some(side) = &twin {
                        let _ = self
                            .operate(&side.workload, &side.wapi, ns, &side.wname, *op)
                            .await;
                    }
                    format!(
                        "{op:?}: {}",
                        r.map_or_else(|e| format!("{e:#}"), |_| "done".into())
                    )
                }
                Step::Perturb { perturbation } => {
                    let r = self.perturb(&ours, ns, *perturbation, &mut undo).await;
                    format!(
                        "{perturbation:?}: {}",
                        r.unwrap_or_else(|e| format!("{e:#}"))
                    )
                }
            };
            out.log.push(line);
            if refused {
                break;
            }
        }
        // A silenced node comes back before the trial settles: it was a transient failure,
        // which the controller must converge from.
        if let Some(cluster) = self.cluster {
            for node in std::mem::take(&mut undo.silenced) {
                let t = std::time::Instant::now();
                out.log.push(match cluster.resume_node(&node).await {
                    Ok(()) => format!(
                        "the kubelet of {node} reports again: Ready after {:.0} s",
                        t.elapsed().as_secs_f64()
                    ),
                    Err(e) => format!("the kubelet of {node} did not come back: {e:#}"),
                });
            }
        }
        phases.next("settle");
        let mut differences = vec![];
        if !refused {
            let this = self;
            let (w, wapi, wname) = (&ours.workload, &ours.wapi, ours.wname.as_str());
            // A policy that writes into pods settles once its content is in them, too.
            let policy = (s.target.is_some()).then_some((&api, name.as_str()));
            let all = move || async move {
                let mut d = this.differences(w, wapi, ns, wname).await;
                if let Some((api, name)) = policy {
                    d.extend(this.injection_differences(api, name, ns).await);
                }
                d
            };
            let r = poll(
                &format!("{} {wname} to settle", w.kind),
                self.settle,
                Duration::from_millis(500),
                move || async move {
                    let d = all().await;
                    if d.is_empty() {
                        Check::Met
                    } else {
                        Check::Pending(d.join("; "))
                    }
                },
            )
            .await;
            if r.is_err() {
                differences = all().await;
            }
        }
        phases.next("twin");
        // O4 on what settles: the same number of live pods as the twin (for kinds that keep
        // their pods: a BroadcastJob runs one on every node where a Job runs its parallelism).
        // A policy's twin is the same policy over another kind of workload, whose pods are
        // that workload's to count: each side's count is judged against its own spec (O2).
        // Nor when the spec holds its updates (paused, partitioned, a wait past the bound,
        // hooks): settled then means "as far as it may go now", and a rollout still under
        // way counts its pods by each kind's own order (one deletes before it creates, the
        // other surges first), so two counts taken a moment apart are no end state.
        if !refused
            && s.target.is_none()
            && ours.workload.rolls_out
            && differences.is_empty()
            && let Some(side) = &twin
            && !self.holds_updates(&ours.wapi, &ours.wname).await
        {
            let (w, wapi, wname) = (&side.workload, &side.wapi, side.wname.as_str());
            let settled = poll(
                &format!("{} {wname} to settle", w.kind),
                self.settle,
                Duration::from_millis(500),
                move || async move {
                    let d = self.differences(w, wapi, ns, wname).await;
                    Check::when(d.is_empty(), || d.join("; "))
                },
            )
            .await
            .is_ok();
            let t = &side.subject;
            let (mine, theirs) = (
                self.live(&ours.workload, &ours.wapi, ns, &ours.wname).await,
                self.live(w, wapi, ns, wname).await,
            );
            if settled && mine != theirs {
                let twin = s
                    .twin
                    .as_ref()
                    .map_or_else(|| t.kind.to_string(), |t| t.describe());
                out.findings.push(Finding {
                    oracle: Oracle::Native,
                    subject: s.name.to_string(),
                    key: format!("settles on another number of live pods than {twin}"),
                    observed: format!("{} settled on {mine} live pods", s.name),
                    expected: format!("as {} {twin}: {theirs} live pods", t.api_version),
                });
            }
        }
        phases.next("judge");
        let served = undo.served.take();
        let served_at = undo.served_at.take();
        self.undo(undo).await;
        out.end = oracle::EndState {
            admitted: out.answers.iter().map(|a| *a == Answer::Admitted).collect(),
            unsettled: {
                let mut k: Vec<String> = differences
                    .iter()
                    .map(|d| oracle::convergence_key(d))
                    .collect();
                k.sort();
                k.dedup();
                k
            },
            live: (!refused && differences.is_empty())
                .then_some(self.live(&ours.workload, &ours.wapi, ns, &ours.wname).await),
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let events: Vec<(String, String, i32, String)> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .filter(|e| {
                // A new apiserver refuses what its authorizer cannot yet tell is allowed (it has
                // not read the roles and bindings): refusals by role until a second after it
                // served are the restart's, not the controller's.
                let (Some(at), Some(m)) = (served_at, e.message.as_deref()) else {
                    return true;
                };
                let when = e
                    .last_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .or(e.event_time.as_ref().map(|t| t.0));
                let by_role = m.contains("is forbidden: User \"") && m.contains("\" cannot ");
                !(by_role && when.is_some_and(|w| w.as_second() <= at.as_second() + 1))
            })
            .map(|e| {
                (
                    e.involved_object.kind.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.count.unwrap_or(1),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
        // A trial whose own policy refused its target's writes is held where the policy
        // declares it must stand: what it did not reach is logged, not judged.
        let kinds = s.event_kinds();
        let held = events
            .iter()
            .find(|(k, _, _, m)| kinds.contains(&k.as_str()) && oracle::by_own_policy(s, name, m));
        if let Some((_, reason, _, message)) = held {
            if !differences.is_empty() {
                out.log.push(format!(
                    "held by its policy ({reason}: {message}): {}",
                    differences.join("; ")
                ));
            }
            differences.clear();
        }
        let mut seen = BTreeMap::new();
        for d in &differences {
            seen.entry(oracle::convergence_key(d))
                .or_insert_with(|| d.clone());
        }
        for (key, d) in seen {
            out.findings.push(Finding {
                oracle: Oracle::Convergence,
                subject: s.name.to_string(),
                key,
                observed: format!("after {:?}: {d}", self.settle),
                expected: "the declared state: every difference gone".into(),
            });
        }
        let found = watching.stop().await?;
        // A trial that takes pods away itself (or the node they run on) breaks the
        // availability bound by its own hand, as a catalog scenario that deletes pods declares.
        let takes_pods = trial.steps.iter().any(|s| {
            matches!(
                s,
                Step::Perturb {
                    perturbation: Perturbation::DeletePod { .. }
                        | Perturbation::EvictPod { .. }
                        | Perturbation::SilenceNode
                }
            )
        });
        // A restarted apiserver denies the controller's watches until it has read the roles,
        // and client-go backs its reflectors off after such a denial: every controller's
        // status lags for a while then (seen: an Advanced StatefulSet's `status.replicas` 0
        // with its pod there for 20 s), whatever it does.
        let restarted = trial
            .perturbations()
            .any(|p| p == Perturbation::RestartApiserver);
        // While a node is down, a pod there that the controller deletes stays terminating
        // until its kubelet confirms (a StatefulSet waits for it, by design): no progress
        // then is the node's, and convergence is judged once it is back (O2).
        let node_down = trial
            .perturbations()
            .any(|p| p == Perturbation::SilenceNode);
        for v in found {
            if v.rule == monitor::rules::FAILED_CREATE
                || (takes_pods && v.rule == monitor::rules::MAX_UNAVAILABLE)
                || (node_down && v.rule == monitor::rules::LIVENESS)
                || (restarted && v.rule == monitor::rules::COUNTERS)
                || of_twin(&v.object)
            {
                continue;
            }
            out.findings.push(Finding {
                oracle: Oracle::Safety,
                subject: s.name.to_string(),
                key: format!("monitor rule {}", v.rule),
                observed: v.to_string(),
                expected: format!("the monitor's rule {} holds at every instant", v.rule),
            });
        }
        // Failures on the way to a settled state were retries that succeeded; a write the API
        // refused for its content is a finding either way.
        if !differences.is_empty() {
            out.findings
                .extend(oracle::repeated_failures(s, name, &events));
        }
        out.findings
            .extend(oracle::refused_writes(s, name, &events));
        if let Err(e) = self.installation.check(&window).await {
            // After a restart of the apiserver, a new apiserver denies requests until its
            // authorizer has read the roles and bindings, and a manager that could not renew
            // its leader-election lease while it was down exits by design (controller-runtime's
            // "leader election lost") and is started again: the trial's doing, not the
            // controller's. Such a trial's manager is judged from when the apiserver served
            // again (what came before, those two aside, is judged as any).
            let whole = format!("{e:#}");
            let lost_lease = |t: &str| {
                health_key(t) == "exited or restarted" && t.contains("leader election lost")
            };
            let outage = |t: &str| health_key(t) == "denied by its RBAC" || lost_lease(t);
            let judged = match &served {
                None => Some(whole),
                Some(_) if !outage(&whole) => Some(whole),
                Some(w) => match self.installation.check(w).await {
                    Ok(()) => {
                        out.log.push(format!(
                            "the manager was denied or lost its lease only while the restarted \
                             apiserver was not serving yet (nothing since it served): {whole}"
                        ));
                        None
                    }
                    Err(since) if lost_lease(&format!("{since:#}")) => {
                        out.log.push(format!(
                            "the manager lost its lease while the apiserver was down: exited by \
                             design, started again: {since:#}"
                        ));
                        None
                    }
                    Err(since) => Some(format!("{since:#} (since the restarted apiserver served)")),
                },
            };
            if let Some(text) = judged {
                out.findings.push(Finding {
                    oracle: Oracle::Health,
                    subject: s.name.to_string(),
                    key: format!("controller {}", health_key(&text)),
                    observed: text,
                    expected: "the controller neither exits, restarts, panics nor is denied".into(),
                });
            }
        }
        if !out.findings.is_empty() {
            out.manager_log = self
                .installation
                .logs()
                .first()
                .map(|l| window.read(l))
                .unwrap_or_default();
        }
        Ok(out)
    }

    /// The live pods of object `name` of `s` (0 when it cannot be read).
    async fn live(&self, s: &Subject, api: &Api<DynamicObject>, ns: &str, name: &str) -> usize {
        if s.makes == Makes::Copies {
            return self.live_copies(api, name).await;
        }
        let Ok(o) = api.get(name).await else {
            return 0;
        };
        let uid = o.metadata.uid.unwrap_or_default();
        self.pods(ns, &uid, &s.via)
            .await
            .map(|p| {
                p.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .count()
            })
            .unwrap_or(0)
    }

    /// Whether the object's spec holds its updates now ([`oracle::holds_updates`], with the
    /// settle bound); false when it cannot be read.
    async fn holds_updates(&self, api: &Api<DynamicObject>, name: &str) -> bool {
        api.get(name).await.is_ok_and(|o| {
            oracle::holds_updates(
                &serde_json::to_value(&o).unwrap_or_default()["spec"],
                self.settle.as_secs() as i64,
            )
        })
    }

    /// What differs from the declared state now ([`oracle::convergence`]).
    async fn differences(
        &self,
        s: &Subject,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
    ) -> Vec<String> {
        if s.makes == Makes::Copies {
            return self.copy_differences(api, ns, name).await;
        }
        let obj = match api.get(name).await {
            Ok(o) => serde_json::to_value(o).unwrap_or_default(),
            // Gone by its own controller (a finished job's TTL): nothing left to converge.
            Err(kube::Error::Api(e)) if e.code == 404 => return vec![],
            Err(e) => return vec![format!("get {name}: {e}")],
        };
        let uid = obj["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let pods = match self.pods(ns, &uid, &s.via).await {
            Ok(p) => p,
            Err(e) => return vec![format!("list pods: {e:#}")],
        };
        let revisions = match self.revisions(ns, &uid).await {
            Ok(r) => r,
            Err(e) => return vec![format!("list revisions: {e:#}")],
        };
        // The template's first container, found on a pod by its name: a policy may put
        // containers of its own before it.
        let first = super::subject::get(&obj, &format!("{}.spec.containers[0].name", s.template))
            .as_str()
            .map(String::from);
        let views: Vec<PodView> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| PodView {
                name: p.metadata.name.clone().unwrap_or_default(),
                image: p
                    .spec
                    .as_ref()
                    .and_then(|s| {
                        s.containers
                            .iter()
                            .find(|c| Some(&c.name) == first.as_ref())
                            .or(s.containers.first())
                    })
                    .and_then(|c| c.image.clone())
                    .unwrap_or_default(),
                labels: p.metadata.labels.clone().unwrap_or_default(),
            })
            .collect();
        let mut out = oracle::convergence(s, &obj, &views, self.settle.as_secs() as i64);
        out.extend(oracle::revision_history(&obj, &revisions));
        out
    }

    /// What a policy that declares containers to put into pods (`spec.containers` or
    /// `spec.initContainers`) has not got into the pods of namespace `ns` it selects
    /// ([`oracle::injection::injection`]); nothing for a policy that declares none.
    async fn injection_differences(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        ns: &str,
    ) -> Vec<String> {
        let policy = match api.get(name).await {
            Ok(o) => serde_json::to_value(o).unwrap_or_default(),
            Err(e) => return vec![format!("get {name}: {e}")],
        };
        let declares = ["containers", "initContainers"]
            .iter()
            .any(|k| policy["spec"][k].as_array().is_some_and(|c| !c.is_empty()));
        if !declares {
            return vec![];
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let pods: Vec<Value> = match pods.list(&ListParams::default()).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .collect(),
            Err(e) => return vec![format!("list pods: {e}")],
        };
        let namespaces = match self.namespaces().await {
            Ok(n) => n,
            Err(e) => return vec![format!("list namespaces: {e:#}")],
        };
        oracle::injection::injection(&policy, &pods, &namespaces)
    }

    /// The pods `uid` owns, itself or through objects of the kinds `via` (from the top).
    async fn pods(
        &self,
        ns: &str,
        uid: &str,
        via: &[super::subject::Kind],
    ) -> anyhow::Result<Vec<Pod>> {
        let lp = ListParams::default();
        let mut owners: Vec<String> = vec![uid.to_string()];
        let owned_by = |m: &kube::api::ObjectMeta, owners: &[String]| {
            m.owner_references
                .iter()
                .flatten()
                .any(|o| owners.contains(&o.uid))
        };
        for (api_version, kind) in via {
            let api = api_for(&self.client, ns, api_version, kind).await?;
            let found: Vec<String> = api
                .list(&lp)
                .await?
                .items
                .into_iter()
                .filter(|o| owned_by(&o.metadata, &owners))
                .filter_map(|o| o.metadata.uid)
                .collect();
            owners.extend(found);
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        Ok(pods
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|p| owned_by(&p.metadata, &owners))
            .collect())
    }

    /// The ControllerRevisions `uid` owns: (name, revision number).
    async fn revisions(&self, ns: &str, uid: &str) -> anyhow::Result<Vec<(String, i64)>> {
        use k8s_openapi::api::apps::v1::ControllerRevision;
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .map(|r| (r.metadata.name.unwrap_or_default(), r.revision))
            .collect())
    }

    async fn operate(
        &self,
        s: &Subject,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
        op: Op,
    ) -> anyhow::Result<()> {
        if s.makes == Makes::Copies {
            return self.operate_copies(api, ns, name, op).await;
        }
        let obj = serde_json::to_value(api.get(name).await?)?;
        let mut patch = json!({});
        let t = s.template.as_str();
        match op {
            Op::Rollout => {
                let image = if get(&obj, t)["spec"]["containers"][0]["image"] == IMAGE_V2 {
                    super::subject::IMAGE_V1
                } else {
                    IMAGE_V2
                };
                let mut containers = get(&obj, t)["spec"]["containers"].clone();
                containers[0]["image"] = json!(image);
                set(&mut patch, &format!("{t}.spec.containers"), containers)
                    .map_err(anyhow::Error::msg)?;
            }
            Op::Recreate => {
                let mut containers = get(&obj, t)["spec"]["containers"].clone();
                let n = containers[0]["env"].as_array().map_or(0, Vec::len);
                let mut env = containers[0]["env"].as_array().cloned().unwrap_or_default();
                env.push(json!({"name": format!("EXPLORE_{n}"), "value": "1"}));
                containers[0]["env"] = json!(env);
                set(&mut patch, &format!("{t}.spec.containers"), containers)
                    .map_err(anyhow::Error::msg)?;
            }
            Op::ScaleUp | Op::ScaleDown => {
                let n = obj["spec"]["replicas"].as_i64().unwrap_or(1);
                let n = if op == Op::ScaleUp {
                    n + 1
                } else {
                    (n - 1).max(0)
                };
                patch = json!({"spec": {"replicas": n}});
            }
            Op::ChangeSelector => {
                let labels = json!({"app": name, "generation": "2"});
                set(&mut patch, &format!("{t}.metadata.labels"), labels.clone())
                    .map_err(anyhow::Error::msg)?;
                set(&mut patch, "spec.selector", json!({"matchLabels": labels}))
                    .map_err(anyhow::Error::msg)?;
            }
            Op::Rewrite | Op::AddNamespace | Op::Relabel => {
                anyhow::bail!(
                    "{op:?} applies to a kind that copies a resource, not to {}",
                    s.kind
                )
            }
        }
        merge(api, name, &patch).await
    }

    /// Undoes what a trial's perturbations left: releases the manager's held events,
    /// uncordons the nodes and has silenced kubelets report again (the next trial starts on a
    /// whole cluster). A failure is logged: what is left shows in the next trials' findings.
    async fn undo(&self, undo: Undo) {
        if let Some(proxy) = self.installation.proxy() {
            for resource in &undo.stale {
                proxy.release(resource);
            }
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        for node in undo.cordoned {
            let patch = json!({"spec": {"unschedulable": null}});
            if let Err(e) = nodes
                .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!("uncordon {node}: {e}");
            }
        }
        if let Some(cluster) = self.cluster {
            for node in undo.silenced {
                if let Err(e) = cluster.resume_node(&node).await {
                    tracing::warn!("have {node} report again: {e:#}");
                }
            }
        }
    }

    /// Waits (up to 30 s) until the node controller has marked not ready every live pod of
    /// the subject (its object's `uid`) on silent node `node`: what it saw.
    async fn unready_on(
        &self,
        ns: &str,
        uid: &str,
        s: &Subject,
        node: &str,
    ) -> anyhow::Result<String> {
        let count = || async {
            let pods = self.pods(ns, uid, &s.via).await?;
            let on: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
                .collect();
            let ready = on.iter().filter(|p| monitor::pod_state(p).ready).count();
            anyhow::Ok((on.len(), ready))
        };
        let r = poll(
            &format!("the pods on {node} marked not ready"),
            Duration::from_secs(30),
            Duration::from_millis(500),
            || async {
                match count().await {
                    Ok((_, 0)) => Check::Met,
                    Ok((n, ready)) => Check::Pending(format!("{ready} of {n} still Ready")),
                    Err(e) => Check::Pending(format!("{e:#}")),
                }
            },
        )
        .await;
        let (n, ready) = count().await?;
        Ok(match r {
            Ok(_) => format!("its {n} pod(s) of the subject there marked not ready"),
            Err(_) => {
                format!("{ready} of its {n} pod(s) of the subject there still Ready after 30 s")
            }
        })
    }

    async fn perturb(
        &self,
        side: &Side,
        ns: &str,
        p: Perturbation,
        undo: &mut Undo,
    ) -> anyhow::Result<String> {
        let (s, api, name) = (&side.workload, &side.wapi, side.wname.as_str());
        // What acts on the whole controller first: it needs no pod.
        let proxy = || {
            self.installation.proxy().ok_or_else(|| {
                anyhow::anyhow!("the manager does not talk through an apiserver proxy on this cell")
            })
        };
        let plural = |of: Watched| async move {
            let kind = match of {
                Watched::Pods => return anyhow::Ok("pods".to_string()),
                Watched::Own => &side.subject,
            };
            Ok(resource(&self.client, &kind.api_version, kind.kind)
                .await?
                .0
                .plural)
        };
        match p {
            Perturbation::RestartManager => {
                // Right after the manager's next write (the previous step's consequence), when
                // the proxy can tell one.
                let after = match self.installation.proxy() {
                    Some(proxy) => match proxy.next_write(Duration::from_secs(10)).await {
                        Some(write) => format!(" right after its write {write}"),
                        None => " (no write of it within 10 s)".into(),
                    },
                    None => String::new(),
                };
                let restarted = self.installation.restart(&self.client).await?;
                return Ok(match restarted.is_empty() {
                    true => "nothing restarts the controller on this cell: left running".into(),
                    false => format!("killed and restarted {}{after}", restarted.join(", ")),
                });
            }
            Perturbation::HoldEvents { of, seconds } => {
                let (proxy, r) = (proxy()?, plural(of).await?);
                proxy.hold(&r, Duration::from_secs(seconds));
                undo.stale.push(r.clone());
                return Ok(format!("holding the manager's {r} events for {seconds} s"));
            }
            Perturbation::DropEvents { of, seconds } => {
                let (proxy, r) = (proxy()?, plural(of).await?);
                proxy.drop_events(&r, Duration::from_secs(seconds));
                undo.stale.push(r.clone());
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                let dropped = proxy.stats(&r).dropped;
                proxy.close_watches(&r);
                return Ok(format!(
                    "dropped the manager's {r} events for {seconds} s ({dropped} so far), then ended its watches"
                ));
            }
            Perturbation::CloseWatches { of } => {
                let (proxy, r) = (proxy()?, plural(of).await?);
                proxy.close_watches(&r);
                return Ok(format!("ended the manager's {r} watches"));
            }
            Perturbation::DeleteCopy => return self.delete_copy(api, name).await,
            Perturbation::RestartApiserver => {
                let restarted = match self.cluster {
                    Some(c) => c.restart_apiserver().await?,
                    None => None,
                };
                if restarted.is_some() {
                    undo.served = Some(self.installation.window(ns));
                    undo.served_at = Some(k8s_openapi::jiff::Timestamp::now());
                }
                return Ok(match restarted {
                    Some(took) => format!(
                        "killed the apiserver and started it again: serving after {:.1} s",
                        took.as_secs_f64()
                    ),
                    None => "the harness does not run this cell's apiserver: left running".into(),
                });
            }
            _ => {}
        }
        let obj = serde_json::to_value(api.get(name).await?)?;
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        let image = get(&obj, &s.template)["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut pods: Vec<Pod> = self
            .pods(ns, uid, &s.via)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let at = |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                == Some(image.clone())
        };
        let pick = |which: Which| {
            pods.iter()
                .find(|p| match which {
                    Which::Old => !at(p),
                    Which::New => at(p),
                    Which::Any => true,
                })
                .cloned()
        };
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match p {
            Perturbation::DeletePod { which } => {
                let Some(pod) = pick(which) else {
                    return Ok(format!("no {which:?} pod"));
                };
                let n = pod.metadata.name.unwrap_or_default();
                pod_api.delete(&n, &DeleteParams::default()).await?;
                Ok(format!("deleted {n}"))
            }
            Perturbation::EvictPod { which } => {
                let Some(pod) = pick(which) else {
                    return Ok(format!("no {which:?} pod"));
                };
                let n = pod.metadata.name.unwrap_or_default();
                match pod_api.evict(&n, &Default::default()).await {
                    Ok(_) => Ok(format!("evicted {n}")),
                    Err(kube::Error::Api(e)) => {
                        Ok(format!("eviction of {n} refused: {}", e.message))
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Perturbation::CordonNode => {
                let Some(node) = pick(Which::Any).and_then(|p| p.spec.and_then(|s| s.node_name))
                else {
                    return Ok("no scheduled pod".into());
                };
                let nodes: Api<Node> = Api::all(self.client.clone());
                let patch = json!({"spec": {"unschedulable": true}});
                nodes
                    .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                undo.cordoned.push(node.clone());
                Ok(format!("cordoned {node}"))
            }
            Perturbation::SilenceNode => {
                // A node to take away is one a pod of the subject runs on: waited for (30 s) when
                // none is scheduled yet (the step right after a create).
                let mut node = pick(Which::Any).and_then(|p| p.spec.and_then(|s| s.node_name));
                if node.is_none() {
                    let found = std::sync::Mutex::new(None);
                    let _ = poll(
                        "a pod of the subject scheduled",
                        Duration::from_secs(30),
                        Duration::from_millis(500),
                        || async {
                            let pods = self.pods(ns, uid, &s.via).await.unwrap_or_default();
                            let on = pods.into_iter().find_map(|p| {
                                p.metadata.deletion_timestamp.is_none().then_some(())?;
                                p.spec.and_then(|s| s.node_name)
                            });
                            let met = on.is_some();
                            *found.lock().expect("not poisoned") = on;
                            Check::when(met, || "none scheduled".into())
                        },
                    )
                    .await;
                    node = found.into_inner().expect("not poisoned");
                }
                let Some(node) = node else {
                    return Ok("no pod scheduled within 30 s".into());
                };
                if undo.silenced.contains(&node) {
                    return Ok(format!("{node} is silent already"));
                }
                let silenced = match self.cluster {
                    Some(c) => c.silence_node(&node).await?,
                    None => None,
                };
                Ok(match silenced {
                    Some(took) => {
                        undo.silenced.push(node.clone());
                        let on_node = self.unready_on(ns, uid, s, &node).await?;
                        format!(
                            "silenced the kubelet of {node}: NotReady after {:.0} s, {on_node}",
                            took.as_secs_f64()
                        )
                    }
                    None => format!("the harness cannot silence the kubelet of {node}: left alone"),
                })
            }
            Perturbation::RestartManager
            | Perturbation::RestartApiserver
            | Perturbation::HoldEvents { .. }
            | Perturbation::DropEvents { .. }
            | Perturbation::CloseWatches { .. }
            | Perturbation::DeleteCopy => unreachable!("handled above"),
        }
    }
}

/// The key of a Health finding whose error reads `text`.
fn health_key(text: &str) -> &'static str {
    if text.contains("panicked") {
        "panicked"
    } else if text.contains("denied") || text.contains("forbidden") {
        "denied by its RBAC"
    } else {
        "exited or restarted"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_twins_objects_are_told_from_the_subjects() {
        assert!(of_twin("Deployment t"));
        assert!(of_twin("Deployment t-target"));
        assert!(of_twin("Pod t-target-58d9f-abcde"));
        assert!(of_twin("PVC data-t-target-abcde"));
        assert!(!of_twin("CloneSet x"));
        assert!(!of_twin("CloneSet x-target"));
        assert!(!of_twin("PVC data-x-target-abcde"));
    }

    #[test]
    fn an_object_takes_the_fields_at_the_paths_given_and_none_when_one_has_no_path() {
        let fields = Fields::from([("spec.a".to_string(), json!(1))]);
        assert_eq!(
            object(json!({"spec": {}}), &fields, |k| Some(k.to_string())),
            Some(json!({"spec": {"a": 1}}))
        );
        assert_eq!(object(json!({"spec": {}}), &fields, |_| None), None);
    }
}
