//! Running one trial on a ready cell. Start with [`Cell::run`]: it makes a namespace of the
//! trial's own, sends each step, and judges the trial with every oracle that applies — the
//! admission oracles on each create and update, and for a behaviour trial the monitor while
//! it runs, convergence once it settles, repeated failure events and the controller's health.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::params::ValidationDirective;
use serde_json::{Value, json};

mod admit;
mod behaviour;
mod copies;
mod observe;
mod operate;
mod perturb;
mod settle;

use super::oracle::{self, Answer, Finding};
use super::pace::Phases;
use super::subject::{Subject, TRIAL_LABEL, get, resolve, set, split_target, target_name};
use super::trial::{Fields, Mode, Step, Trial};
use crate::cluster::OWNER_LABEL;
use crate::controller::Installation;

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
    /// Whether its settle ended before the bound, on what its subject's kind had reported
    /// ([`Settling::EndKnown`]).
    pub ended_early: bool,
    /// Whether it reached the instant of its [`Settling::Until`] before it was judged: a wait
    /// may have ended there, not where it would have, so it judged no convergence, and what it
    /// did not fire says nothing.
    pub cut: bool,
}

/// How a behaviour trial's final settle may end short of the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settling {
    /// Once nothing differs from the declared state, else at the bound: a run compared with a
    /// baseline release, and a finding's shrinking and confirming runs with no share to keep
    /// (`--replay`).
    Bound,
    /// As [`Settling::Bound`], every wait of the trial (a settle step, the final settle, the
    /// twin's) ending at the instant given when it comes first: a finding's shrinking and
    /// confirming runs, whose share of the budget ends then. A run that reached it is cut
    /// ([`Outcome::cut`]).
    Until(Instant),
    /// Also once every difference left is of a kind ([`oracle::convergence_key`]) that a trial
    /// of the same kind of subject already reported not converging within the full bound on
    /// this cell, and the differences have stayed the same for [`KNOWN_QUIET`] (the trial
    /// then reports no convergence finding: it did not wait to see one); and a settle step
    /// once the controller has not observed the last change, as such a trial reported, and
    /// nothing the workload owns changed for [`KNOWN_QUIET`]. A new trial of an exploration.
    EndKnown,
}

impl Settling {
    /// How long a wait that may last `bound` may last from now.
    pub fn bound(self, bound: Duration) -> Duration {
        match self {
            Settling::Until(at) => bound.min(at.saturating_duration_since(Instant::now())),
            Settling::Bound | Settling::EndKnown => bound,
        }
    }

    /// As it is, but [`Settling::EndKnown`] as [`Settling::Bound`]: how the twin settles (what
    /// the subject's kind reported is not the twin's).
    pub fn full(self) -> Self {
        match self {
            Settling::EndKnown => Settling::Bound,
            s => s,
        }
    }

    /// Whether its instant has come ([`Settling::Until`]).
    pub fn reached(self) -> bool {
        matches!(self, Settling::Until(at) if Instant::now() >= at)
    }
}

/// How long the differences of a [`Settling::EndKnown`] settle must stay the same, every one
/// of a kind already reported, before the settle ends.
pub const KNOWN_QUIET: Duration = Duration::from_secs(5);

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
    /// By kind of subject ([`Subject::family`]), the kinds of difference
    /// ([`oracle::convergence_key`]) its behaviour trials on this cell reported not converging
    /// within the full settle bound.
    pub unsettled: std::sync::Mutex<BTreeMap<String, std::collections::BTreeSet<String>>>,
}

const MANAGER: &str = "harness-explore";

/// Where a behaviour trial acts: its namespace, the subject's API, and the names of the
/// subject's object and of its twin's.
struct Place<'p> {
    ns: &'p str,
    api: &'p Api<DynamicObject>,
    name: &'p str,
    tname: &'p str,
    /// How its settles may end.
    settling: Settling,
}

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

/// How long a policy's target is waited for until its controller has observed it.
const TARGET_SEEN: Duration = Duration::from_secs(10);

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

/// The webhook a trial met down, if it met one, in the words of `result`: a request the
/// apiserver could not put to the controller's webhook at all (its server refused the
/// connection, its Service had no endpoint), so that a step failed or was refused, or a
/// finding reports it. The controller was not there to answer (it had exited: a panic in
/// another trial beside this one, whose finding that is), and the trial tried nothing.
pub(super) fn met_webhook_down(result: &anyhow::Result<Outcome>) -> Option<String> {
    let down = |t: &str| -> Option<String> {
        let (_, rest) = t.split_once("failed calling webhook \"")?;
        let unreachable =
            t.contains("connect: connection refused") || t.contains("no endpoints available");
        unreachable.then(|| rest.split('"').next().unwrap_or_default().to_string())
    };
    match result {
        Err(e) => down(&format!("{e:#}")),
        Ok(out) => out
            .answers
            .iter()
            .filter_map(|a| match a {
                Answer::Refused(m) => Some(m.as_str()),
                _ => None,
            })
            .chain(out.findings.iter().map(|f| f.observed.as_str()))
            .find_map(down),
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

/// Whether every field `trial`'s create sets has a place on the subject's seed object. A
/// field inside a list item that neither the seed nor the create makes has none: a shrinking
/// candidate that dropped the item and kept a field of it. Such a trial is not a trial.
pub(super) fn placeable(s: &Subject, trial: &Trial) -> bool {
    trial.steps.iter().all(|step| match step {
        Step::Create { set } => created(s, set, "x", "x").is_some(),
        _ => true,
    })
}

/// The subject's own fields of `set` ([`split_target`]), in namespace `ns` as `name`, and
/// the object a create of `s` setting them sends: the seed with those fields; None when one
/// has no place.
fn created(s: &Subject, set: &Fields, ns: &str, name: &str) -> Option<(Fields, Value)> {
    let (own, _) = split_target(&resolved(set, ns, name));
    let seed = resolve(&s.seed.make(name), ns, name);
    let o = object(seed, &own, |k| Some(k.to_string()))?;
    Some((own, o))
}

/// Whether `s`'s seed object has a place for field `k` set alone (to any value but null, which
/// removes and so always has one): not a field through a list
/// item the seed does not have (a claim template's, on a subject made without claim
/// templates). What a trial carried to `s` may set ([`super::behaviour::offers`]).
pub(super) fn has_place(s: &Subject, k: &str) -> bool {
    created(
        s,
        &Fields::from([(k.to_string(), Value::Bool(true))]),
        "x",
        "x",
    )
    .is_some()
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
/// now ([`patch_of`] what [`read`] gives). None when the object cannot be read or a field has
/// no path.
async fn update_patch(
    api: &Api<DynamicObject>,
    name: &str,
    fields: &Fields,
    path: impl Fn(&str) -> Option<String>,
) -> Option<Value> {
    patch_of(&read(api, name).await?, fields, path)
}

/// Object `name` as it is now, as JSON; none when it cannot be read.
async fn read(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    serde_json::to_value(api.get(name).await.ok()?).ok()
}

/// A merge patch that sets `fields` (at the paths `path` gives) on `object`: a path through a
/// list item carries the whole list, since a merge patch replaces lists; a removed field is an
/// explicit null. None when a field has no path.
fn patch_of(
    object: &Value,
    fields: &Fields,
    path: impl Fn(&str) -> Option<String>,
) -> Option<Value> {
    let mut next = object.clone();
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
    /// The workload's pods when an update of the trial last changed its claim templates.
    claims_changed: std::sync::Mutex<Option<oracle::ClaimsChanged>>,
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
            claims_changed: std::sync::Mutex::new(None),
        })
    }

    /// What the workload's pods were when its claim templates last changed, if they did.
    fn claims_changed(&self) -> Option<oracle::ClaimsChanged> {
        self.claims_changed
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }
}

impl Cell<'_> {
    /// Whether the cell serves the subject's kind at its version, and its target's: asked of
    /// the cell's discovery, not of what another cell told ([`resource`] remembers one answer
    /// for every cell of the process, so a baseline of an older release would be sent to
    /// resources it does not have).
    pub async fn serves(&self, s: &Subject) -> bool {
        let target = s
            .target
            .as_deref()
            .map(|t| (t.api_version.as_str(), t.kind));
        for (api_version, kind) in std::iter::once((s.api_version.as_str(), s.kind)).chain(target) {
            if crate::scenario::pinned(&self.client, api_version, kind)
                .await
                .is_err()
            {
                return false;
            }
        }
        true
    }

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
    /// A target whose kind reports `observedGeneration` is waited for until its controller
    /// has observed it (at most [`TARGET_SEEN`]). Returns the refusal's words if the target
    /// kind refused it.
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
            Ok(_) => {
                // The policy is made over a target its controller has seen, as a user makes
                // one over a workload that runs: a webhook that reads the target from the
                // controller's cache finds it, whenever the trial runs.
                if t.observes_generation {
                    let what = format!("{} {target} observed", t.kind);
                    let observed = crate::wait::until(&api, &target, &what, TARGET_SEEN, |o| {
                        let o = o.map(|o| serde_json::to_value(o).unwrap_or_default());
                        Box::pin(async move {
                            let o = o.unwrap_or_default();
                            crate::wait::Check::when(
                                o["status"]["observedGeneration"].as_i64()
                                    >= o["metadata"]["generation"].as_i64()
                                    && o["metadata"]["generation"].is_i64(),
                                || "not observed yet".to_string(),
                            )
                        })
                    })
                    .await;
                    if let Err(e) = observed {
                        tracing::debug!("{e}: the trial goes on");
                    }
                }
                Ok(None)
            }
            // The target's template is the target kind's to admit (its own subject explores
            // that): the trial has no policy to judge. A webhook's denial is a refusal whatever
            // code it carries (OpenKruise's Advanced DaemonSet webhook denies with 500).
            Err(kube::Error::Api(e))
                if ((400..500).contains(&e.code) && e.code != 409)
                    || e.message.contains("denied the request") =>
            {
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
        let ns = namespace_name(subject, n, rand::random::<u16>());
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

    /// Runs `trial` of `subject` in a namespace of its own (removed after), and judges it; a
    /// behaviour trial settles up to the full bound ([`Settling::Bound`]).
    pub async fn run(&self, subject: &Subject, trial: &Trial) -> anyhow::Result<Outcome> {
        self.run_as(subject, trial, Settling::Bound).await
    }

    /// [`Cell::run`], a behaviour trial settling as `settling` says.
    pub async fn run_as(
        &self,
        subject: &Subject,
        trial: &Trial,
        settling: Settling,
    ) -> anyhow::Result<Outcome> {
        // A manager that exited in an earlier trial is running and ready again (its exit was
        // that trial's finding).
        self.installation
            .revive()
            .await
            .context("start the exited manager again")?;
        let mut phases = Phases::start("namespace");
        let ns = self
            .namespace(subject)
            .await
            .context("make the trial's namespace")?;
        phases.next("steps");
        let mut result = match trial.mode {
            Mode::Admission => self.admit(subject, trial, &ns, "x").await,
            Mode::Behaviour => {
                self.behaviour(subject, trial, &ns, settling, &mut phases)
                    .await
            }
        };
        self.drop_namespace(&ns, subject).await;
        if let Ok(out) = &mut result {
            out.phases = phases.end();
        }
        result
    }
}

/// The most characters of a subject's slug a trial namespace's name takes: a cluster-scoped
/// subject's objects are named after the namespace (`<namespace>-<name>`, [`scoped_name`]), a
/// policy's target after its policy (`<name>-target`), and controllers name what they make
/// after those (`<name>-<hash>`, a label value too, at most 63 characters).
const NAMESPACE_SLUG: usize = 16;

/// The name of trial namespace number `n` of `subject`, with `random` to tell runs apart:
/// `x-<slug>-<n>-<random>`, the slug cut to [`NAMESPACE_SLUG`] characters.
fn namespace_name(subject: &Subject, n: usize, random: u16) -> String {
    let slug: String = subject.slug().chars().take(NAMESPACE_SLUG).collect();
    format!("x-{}-{n}-{random:04x}", slug.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_until_an_instant_ends_at_the_bound_or_the_instant_whichever_comes_first() {
        let s = Duration::from_secs;
        let bound = s(60);
        assert_eq!(Settling::Bound.bound(bound), bound);
        assert_eq!(Settling::EndKnown.bound(bound), bound);
        let later = Settling::Until(Instant::now() + s(3600));
        assert_eq!(later.bound(bound), bound);
        assert!(!later.reached());
        let soon = Settling::Until(Instant::now() + s(10));
        assert!(soon.bound(bound) <= s(10) && soon.bound(bound) > s(5));
        let past = Settling::Until(Instant::now() - s(1));
        assert_eq!(past.bound(bound), Duration::ZERO);
        assert!(past.reached());
        assert!(!Settling::Bound.reached() && !Settling::EndKnown.reached());
        // The twin waits as the subject does, but never on what the subject's kind reported.
        assert_eq!(Settling::EndKnown.full(), Settling::Bound);
        assert_eq!(past.full(), past);
    }

    #[test]
    fn a_carried_create_keeps_the_fields_its_new_subjects_seed_has_a_place_for() {
        use crate::explore::trial::carried;
        let (crds, doc) = crate::explore::subject::derive::tests::cell();
        let all = crate::explore::subject::derive::served(&crds, &doc);
        let subject = |n: &str| all.iter().find(|s| s.name == n).unwrap().clone();
        let (plain, claims) = (subject("CloneSet"), subject("CloneSetWithClaims"));
        let claim = (
            "spec.volumeClaimTemplates[0].spec.volumeName".to_string(),
            json!("x"),
        );
        let own = ("spec.minReadySeconds".to_string(), json!(1));
        let keys = [claim.0.clone(), own.0.clone()];
        let trial = |set: Fields| Trial {
            subject: "Other".into(),
            mode: Mode::Behaviour,
            seed: 1,
            index: 0,
            steps: vec![Step::Create { set }, Step::Settle],
        };
        // What each subject offers a carried trial, of the two fields.
        let offers = |s: &Subject| -> std::collections::BTreeSet<String> {
            keys.iter().filter(|k| has_place(s, k)).cloned().collect()
        };
        let to = |s: &Subject, t: &Trial| carried(t, &s.name, &offers(s), &[], &[]);
        let create = |t: Option<Trial>| match t.map(|t| t.steps[0].clone()) {
            Some(Step::Create { set }) => Some(set),
            _ => None,
        };
        let both = trial(Fields::from([claim.clone(), own.clone()]));
        assert_eq!(create(to(&plain, &both)), Some(Fields::from([own.clone()])));
        assert_eq!(
            create(to(&claims, &both)),
            Some(Fields::from([claim.clone(), own]))
        );
        assert_eq!(to(&plain, &trial(Fields::from([claim]))), None);
        assert_eq!(
            create(to(&plain, &trial(Fields::new()))),
            Some(Fields::new())
        );
    }

    #[test]
    fn a_trial_met_the_webhook_down_when_the_apiserver_could_not_reach_it() {
        let refused = |port: &str| {
            format!(
                "Internal error occurred: failed calling webhook \"mcloneset.kb.io\": failed to \
                 call webhook: Post \"https://127.0.0.1:{port}/mutate\": dial tcp \
                 127.0.0.1:{port}: connect: connection refused"
            )
        };
        let step = Err(anyhow::anyhow!("{}", refused("1")).context("make the target CloneSet x"));
        assert_eq!(met_webhook_down(&step).as_deref(), Some("mcloneset.kb.io"));
        let answered = |a: Answer| {
            Ok(Outcome {
                answers: vec![Answer::Admitted, a],
                ..Default::default()
            })
        };
        let down = answered(Answer::Refused(refused("2")));
        assert_eq!(met_webhook_down(&down).as_deref(), Some("mcloneset.kb.io"));
        let endpoints = "failed calling webhook \"vpod.kb.io\": failed to call webhook: Post \
             \"https://kruise-webhook-service.kruise-system.svc:443/validate\": no endpoints \
             available for service \"kruise-webhook-service\"";
        let reported = Ok(Outcome {
            findings: vec![Finding {
                oracle: oracle::Oracle::Realizable,
                subject: "s".into(),
                key: "k".into(),
                observed: format!("FailedCreate: {endpoints}"),
                expected: String::new(),
            }],
            ..Default::default()
        });
        assert_eq!(met_webhook_down(&reported).as_deref(), Some("vpod.kb.io"));
        // The webhook answered: a refusal in its words, or a webhook that took too long (the
        // controller's doing, judged), or an error that is no webhook's.
        let denied = "admission webhook \"vcloneset.kb.io\" denied the request: spec.x: Invalid";
        assert_eq!(
            met_webhook_down(&answered(Answer::Refused(denied.into()))),
            None
        );
        let slow = "failed calling webhook \"m.kb.io\": context deadline exceeded";
        assert_eq!(
            met_webhook_down(&answered(Answer::Refused(slow.into()))),
            None
        );
        let other = Err(anyhow::anyhow!("connect: connection refused"));
        assert_eq!(met_webhook_down(&other), None);
        assert_eq!(met_webhook_down(&answered(Answer::Admitted)), None);
    }

    #[test]
    fn names_made_from_a_trial_namespace_fit_a_label_value() {
        let all = crate::explore::subject::subjects();
        let longest = all.iter().max_by_key(|s| s.name.len()).unwrap();
        let ns = namespace_name(longest, 99_999, 0xffff);
        assert!(ns.starts_with("x-") && ns.ends_with("-99999-ffff"), "{ns}");
        // A cluster-scoped policy's object (named after the namespace), its target (after
        // it), a subset of the target (`<name>-<subset>-<5 random>`) and a revision of it.
        let target = target_name(&format!("{ns}-t99999"));
        let revision = format!("{target}-a-{}-{}", "r".repeat(5), "h".repeat(10));
        assert!(
            revision.len() <= 63,
            "{revision} ({} characters)",
            revision.len()
        );
        assert!(!ns.contains("--"), "{ns}");
    }

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

    #[test]
    fn a_create_is_placeable_unless_a_field_sits_in_a_list_item_nothing_makes() {
        let all = crate::explore::subject::subjects();
        let s = all.iter().find(|s| s.name == "CloneSet").unwrap();
        let claims = "spec.template.spec.containers[0].resources.claims";
        let create = |set: Vec<(String, Value)>| Trial {
            subject: s.name.to_string(),
            mode: Mode::Admission,
            seed: 0,
            index: 0,
            steps: vec![Step::Create {
                set: set.into_iter().collect(),
            }],
        };
        // The seed's first container is there; a field of it has a place.
        let image = "spec.template.spec.containers[0].image".to_string();
        assert!(placeable(s, &create(vec![(image, json!("i"))])));
        // A field of a claim, with the claims the create makes, and without them.
        let item = (format!("{claims}[0].request"), json!("r"));
        let list = (claims.to_string(), json!([{"name": "c"}]));
        assert!(placeable(s, &create(vec![list, item.clone()])));
        assert!(!placeable(s, &create(vec![item])));
    }
}
