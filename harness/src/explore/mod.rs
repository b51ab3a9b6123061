//! Exploration: trials generated from each CRD, not written, judged by oracles that need no
//! per-trial assertion. Start with [`explore`]: on one cell (a cluster with the controller
//! installed) it runs, for every [`subject::Subject`],
//!
//! 1. **admission trials**: every value of every leaf of the CRD's schema ([`schema`]) and
//!    values of the leaves of its pod template, walked from the cell's OpenAPI ([`openapi`];
//!    bounded, see [`TEMPLATE_SINGLES`]), alone, at create and at update, then the rows of a
//!    pairwise covering array over the values admitted alone ([`trial::covering_rows`]) —
//!    sent as dry runs to the subject and to its native twin;
//! 2. **behaviour trials** until the budget ends: an object created with admitted values, then
//!    updates, semantic operations and perturbations ([`trial::behaviour`]), watched by the
//!    monitor and judged once it settles ([`exec`]). They run on a pool ([`pool`]): up to a
//!    width of them at once, the next starting as soon as one ends, the width adapting to
//!    what the cell sustains ([`pace::Pacer`]); a trial that acts on the whole controller or
//!    cluster runs alone.
//!
//! Each new finding ([`oracle::Finding`], one per oracle, subject and key; another trial
//! firing it again is counted, not shrunk again) is shrunk ([`minimize`]), run again three
//! times at once (a finding that does not fire every time is reported as unstable) and
//! written as a reproduction ([`output`]) — while shrinking and confirming have used less
//! than their share of the budget ([`SHRINK_SHARE`] by default); past it, it is written as it fired,
//! for `--replay` to shrink and confirm. Every trial is data: replayed exactly from its YAML
//! ([`replay`]), or regenerated from the seed.

pub mod exec;
pub mod gates;
pub mod minimize;
pub mod openapi;
pub mod oracle;
pub mod output;
pub mod pace;
pub mod path;
pub mod reach;
pub mod schema;
pub mod subject;
pub mod trial;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{FutureExt, StreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::exec::Cell;
use self::oracle::{Answer, Finding, Oracle};
use self::subject::Subject;
use self::trial::{Fields, Material, Mode, Perturbation, Rng, Step, Trial};
use crate::cluster::any::Provider;
use crate::controller::ControllerRef;
use crate::toolchain::{KubeVersion, Toolchain};
use crate::up::{ControllerChoice, Session};

/// How an exploration goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Kubernetes version of the cell.
    pub kubernetes: KubeVersion,
    /// The controller under test.
    pub controller: ControllerRef,
    /// The subjects, by name (empty: every one).
    pub kinds: Vec<String>,
    /// The seed every choice comes from.
    pub seed: u64,
    /// How long the whole exploration may take, bring-up aside.
    pub budget: Duration,
    /// Which trials are judged: admission trials always run (behaviour trials are made of
    /// the values they admit), their findings are reported when asked for.
    pub modes: Vec<Mode>,
    /// The classes of perturbation behaviour trials draw from (none: they perturb nothing).
    pub perturbations: Vec<trial::Class>,
    /// Behaviour trials at once to start with: the pool's width then adapts between 1 and
    /// the larger of this and [`pace::MAX_WIDTH`] ([`pace::Pacer`]).
    pub parallel: usize,
    /// How long a behaviour trial may take to settle.
    pub settle: Duration,
    /// Times a shrunk finding runs again to be called stable.
    pub confirm: usize,
    /// Candidates minimizing one finding may run.
    pub shrink_runs: usize,
    /// The share of the budget shrinking and confirming findings may take together (0 to 1):
    /// past it, a new finding is written as it fired, for `--replay` to shrink and confirm.
    pub shrink_share: f64,
    /// Where findings are written (`<dir>/findings/<n>-<oracle>-<subject>/`).
    pub dir: PathBuf,
    /// A baseline release: every trial also runs on a cell of it, and where the controller
    /// under test answers or settles otherwise is a finding (O5).
    pub baseline: Option<ControllerRef>,
    /// The feature gates of the cell (and of the baseline's).
    pub gates: Gates,
}

impl Options {
    /// The options `harness explore` takes by default, for `controller` on Kubernetes
    /// `kubernetes`, with `seed` and `budget`, into `dir`: every kind, both modes, the
    /// default perturbations, two behaviour trials at once to start with settling within 60 s,
    /// 12 shrinking runs, three confirming runs, no baseline, default gates.
    pub fn new(
        kubernetes: KubeVersion,
        controller: ControllerRef,
        seed: u64,
        budget: Duration,
        dir: PathBuf,
    ) -> Self {
        Options {
            kubernetes,
            controller,
            kinds: vec![],
            seed,
            budget,
            modes: vec![Mode::Admission, Mode::Behaviour],
            perturbations: trial::Class::DEFAULT.to_vec(),
            parallel: DEFAULT_PARALLEL,
            settle: DEFAULT_SETTLE,
            confirm: 3,
            shrink_runs: DEFAULT_SHRINK_RUNS,
            shrink_share: SHRINK_SHARE,
            dir,
            baseline: None,
            gates: Gates::default(),
        }
    }
}

/// Behaviour trials at once to start with, unless told (`--parallel`).
pub const DEFAULT_PARALLEL: usize = 2;
/// The share of the budget that shrinking and confirming findings (of either mode) may take
/// together, unless told (`--shrink-share`). Past it, a new finding is written as it fired, neither shrunk nor confirmed,
/// and `harness explore --replay <its directory>` shrinks and confirms it.
pub const SHRINK_SHARE: f64 = 0.25;
/// The most candidates of one shrinking run side by side (with an admission finding, where
/// nothing else runs, that many; with a behaviour finding, half the pool's width at most).
const SIDE_BY_SIDE: usize = 4;
/// What an admission trial's run is taken to last when its finding's shrinking is planned
/// (admission trials run eight at a time, not timed one by one): a namespace made, dry runs,
/// the namespace deleted.
const ADMISSION_RUN: Duration = Duration::from_secs(5);
/// The latency counted for an apiserver read that failed: a strained apiserver answers errors
/// too, and the pool narrows.
const PROBE_FAILED: f64 = 2.0;
/// How long a behaviour trial may take to settle, unless told (`--settle`).
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(60);
/// Candidates minimizing one behaviour finding may run, unless told (`--shrink-runs`).
pub const DEFAULT_SHRINK_RUNS: usize = 12;

/// Feature gates a cell is brought up with: the Kubernetes control plane's and the
/// controller manager's. Exploring with a gate on explores what the gate turns on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gates {
    /// The control plane's (`--feature-gates` of the apiserver and the others).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cluster: BTreeMap<String, bool>,
    /// The controller manager's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub controller: BTreeMap<String, bool>,
}

impl Gates {
    /// Whether no gate is set.
    pub fn is_empty(&self) -> bool {
        self.cluster.is_empty() && self.controller.is_empty()
    }
}

impl std::fmt::Display for Gates {
    /// `cluster: A=true; controller: B=true`, or `defaults`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |m: &BTreeMap<String, bool>| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut parts = vec![];
        if !self.cluster.is_empty() {
            parts.push(format!("cluster {}", list(&self.cluster)));
        }
        if !self.controller.is_empty() {
            parts.push(format!("controller {}", list(&self.controller)));
        }
        if parts.is_empty() {
            write!(f, "default gates")
        } else {
            write!(f, "{}", parts.join("; "))
        }
    }
}

/// The names `--kinds` takes for a kind ([`subject::catalog::families`]).
pub fn subject_names() -> Vec<&'static str> {
    subject::catalog::families()
}

/// The subjects `kinds` names among those known without a cell ([`subject::subjects`]; all
/// when empty), in their order: those each name selects ([`Subject::selected_by`]). A name
/// only a cell tells of (another served version, a union member, claim templates:
/// `CloneSet@v1beta1`) selects the known subjects of its kind, which say what the cell needs
/// (their gates); [`select_served`] picks the subjects once the cell is read. A name of no
/// kind is an error naming the kinds.
pub fn select(kinds: &[String]) -> anyhow::Result<Vec<Subject>> {
    let all = subject::subjects();
    let mut families = vec![];
    for k in kinds {
        if !all.iter().any(|s| s.selected_by(k)) {
            let family = subject::derive::family_of(k);
            anyhow::ensure!(
                family.is_some(),
                "no kind `{k}` to explore; the kinds are: {} (each also as `Kind@version` for \
                 another version the cell serves, a policy as `Policy.Target`)",
                subject_names().join(", ")
            );
            families.extend(family);
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| {
            kinds.is_empty()
                || kinds.iter().any(|k| s.selected_by(k))
                || families.contains(&s.family)
        })
        .collect())
}

/// The subjects `kinds` names (all when empty) among those the cell serves, derived from its
/// CRDs and OpenAPI ([`subject::served`]), in their order; and the names that select none
/// of them (not served by the cell's release).
pub fn select_served(
    kinds: &[String],
    crds: &BTreeMap<String, Value>,
    doc: &openapi::Doc,
) -> (Vec<Subject>, Vec<String>) {
    let all = subject::served(crds, doc);
    let unserved = kinds
        .iter()
        .filter(|k| !all.iter().any(|s| s.selected_by(k)))
        .cloned()
        .collect();
    let chosen = all
        .into_iter()
        .filter(|s| kinds.is_empty() || kinds.iter().any(|k| s.selected_by(k)))
        .collect();
    (chosen, unserved)
}

/// A finding as reported: shrunk, confirmed, written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reported {
    /// What the shrunk trial fired.
    pub finding: Finding,
    /// The trial that first fired it.
    pub original: Trial,
    /// The shrunk trial.
    pub trial: Trial,
    /// Runs of the shrunk trial that fired it, of [`Options::confirm`].
    pub reproduced: usize,
    /// Runs made to confirm it.
    pub confirm_runs: usize,
    /// Whether every confirming run fired it.
    pub stable: bool,
    /// Seconds into the exploration when it was first seen.
    pub first_seen: f64,
    /// Its directory.
    pub dir: PathBuf,
    /// The controller it was found on.
    pub controller: String,
    /// The Kubernetes version it was found on.
    pub kubernetes: String,
    /// The baseline release it was compared with, if any.
    #[serde(default)]
    pub baseline: Option<String>,
    /// The gates of the cell it was found on.
    #[serde(default, skip_serializing_if = "Gates::is_empty")]
    pub gates: Gates,
}

impl Reported {
    /// Whether it was confirmed at all (a finding written as it fired, past shrinking's share
    /// of the budget, was not: `--replay` confirms it).
    pub fn confirmed(&self) -> bool {
        self.confirm_runs > 0
    }

    /// How often its confirming runs fired it: `3/3`, `1/3 (unstable)`, or that it was not
    /// confirmed.
    pub fn reproduction(&self) -> String {
        match (self.confirmed(), self.stable) {
            (false, _) => "not confirmed (`--replay` confirms it)".to_string(),
            (true, true) => format!("{}/{}", self.reproduced, self.confirm_runs),
            (true, false) => format!("{}/{} (unstable)", self.reproduced, self.confirm_runs),
        }
    }
}

/// What an exploration did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    /// The controller.
    pub controller: String,
    /// Kubernetes.
    pub kubernetes: String,
    /// The seed.
    pub seed: u64,
    /// Trials run, by mode and subject.
    pub trials: BTreeMap<String, usize>,
    /// Findings, in the order they were first seen.
    pub findings: Vec<Reported>,
    /// Seconds, bring-up included.
    pub seconds: f64,
    /// The baseline release every trial was compared with, if any.
    #[serde(default)]
    pub baseline: Option<String>,
    /// The gates of the cell.
    #[serde(default, skip_serializing_if = "Gates::is_empty")]
    pub gates: Gates,
    /// Where the time went.
    #[serde(default)]
    pub pace: pace::Pace,
    /// What it reached of what the API offers, by subject.
    #[serde(default)]
    pub reach: reach::Reach,
}

impl Summary {
    /// Findings of the stable kind.
    pub fn stable(&self) -> impl Iterator<Item = &Reported> {
        self.findings.iter().filter(|r| r.stable)
    }
}

/// Reads the subjects' CRDs as the cell serves them: kind → CRD (as JSON).
async fn crds(client: &kube::Client) -> anyhow::Result<BTreeMap<String, Value>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut out = BTreeMap::new();
    for c in api.list(&Default::default()).await?.items {
        let key = format!("{}/{}", c.spec.group, c.spec.names.kind);
        out.insert(key, serde_json::to_value(c)?);
    }
    Ok(out)
}

/// The most single values tried on a subject's pod template, and on a policy's target's.
///
/// How admission trials are bounded: a pod template walked from the cell's OpenAPI has
/// hundreds of leaves ([`schema`] bounds the walk by depth and by lists), and each single is
/// two dry runs on the subject and two on its twin, for each of about twenty subjects. Every
/// template leaf gets its first value (the typical one: the first member, the first word,
/// the object the cell makes); further values are drawn with the run's seed until the
/// template has [`TEMPLATE_SINGLES`] singles (a policy's target, [`TARGET_SINGLES`]: it
/// explores the policy, not the template, which its own subject explores). So one run
/// tries every template leaf, and another seed tries other values of them. The CRD's own
/// leaves are not bounded: they are the subject's, and a few hundred values at most.
pub const TEMPLATE_SINGLES: usize = 150;

/// The most values of one field that covering rows pair with the others' (see
/// [`Explorer::admission`]).
const ROW_VALUES: usize = 12;

/// The most single values tried on a policy's target's template (see [`TEMPLATE_SINGLES`]).
pub const TARGET_SINGLES: usize = 50;

/// The single values tried on `s`, each a field set: each leaf of its schema with each of its
/// values, its pod template's leaves walked from the cell's core types in `doc` (bounded, see
/// [`TEMPLATE_SINGLES`], drawn with `seed`), and a policy's target's. A field of a list's item
/// where the seed has no item is set through a minimal item: the set holds the list with
/// that item (the field set in it) and the field itself, so that findings name the field.
pub fn singles(s: &Subject, crd: &Value, doc: &openapi::Doc, seed: u64) -> Vec<Fields> {
    let version = s.api_version.rsplit('/').next().unwrap_or_default();
    let obj = s.seed.make("x");
    let reselect = s.reselect();
    let w = s.workload();
    let wseed = w.seed.make("x");
    let pod = subject::get(&wseed, &w.template).clone();
    let walk = schema::Walk {
        doc: Some(doc),
        template: &s.template,
        seed: &obj,
        pod: &pod,
    };
    let mut leaves = schema::leaves_with(crd, version, &walk);
    twin_words(s, doc, &mut leaves);
    let in_template = |l: &schema::Leaf| {
        !s.template.is_empty() && l.path.starts_with(&format!("{}.", s.template))
    };
    let (template, own): (Vec<_>, Vec<_>) = leaves.into_iter().partition(in_template);
    let own: Vec<_> = own
        .into_iter()
        .filter(|l| l.path != "spec.replicas" || s.replicated)
        .collect();
    let mut out = leaf_sets(&own, &obj, &reselect, false, "");
    let sets = leaf_sets(&template, &obj, &reselect, true, "");
    out.extend(bounded(sets, TEMPLATE_SINGLES, seed, &s.name));
    // A policy meets its target's template fields.
    if let Some(t) = &s.target {
        let tseed = t.seed.make("x");
        let tl = schema::template_leaves(doc, &t.template, &tseed);
        let sets = leaf_sets(&tl, &tseed, &reselect, true, subject::TARGET);
        out.extend(bounded(sets, TARGET_SINGLES, seed, &s.name));
    }
    out
}

/// The field sets of `leaves` of `seed` (keys prefixed with `prefix`), each value alone: a
/// selector also as `reselect`; absent only where `seed` has the field, when
/// `absent_if_set` (else absence is the seed itself); a field of a list item the seed lacks
/// through the list's minimal item. A value that cannot be set on the seed is left out.
fn leaf_sets(
    leaves: &[schema::Leaf],
    seed: &Value,
    reselect: &Value,
    absent_if_set: bool,
    prefix: &str,
) -> Vec<Fields> {
    let minimal = |list: &str| {
        leaves.iter().find_map(|l| match &l.shape {
            schema::Shape::Objects(item) if l.path == list => Some(item.clone()),
            _ => None,
        })
    };
    let mut out = vec![];
    for l in leaves {
        let mut values = l.values();
        if l.shape == schema::Shape::Selector {
            values.insert(0, reselect.clone());
        }
        if absent_if_set && subject::get(seed, &l.path).is_null() {
            values.retain(|v| !v.is_null());
        }
        // The outermost list on the way with no item in the seed.
        let missing = l
            .path
            .match_indices("[0]")
            .map(|(i, _)| &l.path[..i])
            .find(|list| {
                subject::get(seed, list)
                    .as_array()
                    .is_none_or(Vec::is_empty)
            });
        for v in values {
            let set = match missing {
                None => Fields::from([(format!("{prefix}{}", l.path), v)]),
                Some(list) => {
                    let Some(mut item) = minimal(list) else {
                        continue;
                    };
                    let rest = &l.path[list.len() + "[0]".len()..];
                    if !rest.is_empty()
                        && subject::set(&mut item, rest.trim_start_matches('.'), v.clone()).is_err()
                    {
                        continue;
                    }
                    Fields::from([
                        (format!("{prefix}{list}"), Value::Array(vec![item])),
                        (format!("{prefix}{}", l.path), v),
                    ])
                }
            };
            out.push(set);
        }
    }
    out
}

/// `sets` bounded to `cap`: the first set of each field (the innermost path of the set), then
/// others drawn with `seed` (and `name`), in their order. With more fields than `cap`, the
/// fields are drawn too.
fn bounded(sets: Vec<Fields>, cap: usize, seed: u64, name: &str) -> Vec<Fields> {
    if sets.len() <= cap {
        return sets;
    }
    let stream = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    });
    let mut rng = Rng::new(seed, stream);
    let field = |f: &Fields| f.keys().last().cloned().unwrap_or_default();
    let mut firsts = vec![];
    let mut others = vec![];
    for (i, f) in sets.iter().enumerate() {
        match i == 0 || field(&sets[i - 1]) != field(f) {
            true => firsts.push(i),
            false => others.push(i),
        }
    }
    rng.shuffle(&mut firsts);
    rng.shuffle(&mut others);
    let mut keep: Vec<usize> = firsts.into_iter().chain(others).take(cap).collect();
    keep.sort_unstable();
    let mut sets: Vec<Option<Fields>> = sets.into_iter().map(Some).collect();
    keep.into_iter().filter_map(|i| sets[i].take()).collect()
}

/// Adds to each string leaf of `s` without an enum the enum of the same field in its native
/// twin's schema, as the cell serves it, before the words of its description.
fn twin_words(s: &Subject, doc: &openapi::Doc, leaves: &mut [schema::Leaf]) {
    let Some(t) = s.twin.as_deref() else { return };
    let Some(root) = doc.kind_schema(&t.api_version, t.kind) else {
        return;
    };
    for l in leaves {
        let schema::Shape::String(words) = &mut l.shape else {
            continue;
        };
        let Some(path) = s.twin_path(&l.path) else {
            continue;
        };
        let members = doc
            .at(root, &path)
            .and_then(|n| n["enum"].as_array().cloned())
            .unwrap_or_default();
        let mut all: Vec<String> = members
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect();
        for w in words.drain(..) {
            if !all.contains(&w) {
                all.push(w);
            }
        }
        *words = all;
    }
}

/// The fields of `set` that no other field of it holds: a list set with an item, beside a
/// field of that item, is the list (whose item has the field).
fn outermost(set: Vec<(&str, &Value)>) -> Vec<(String, Value)> {
    let paths: Vec<&str> = set.iter().map(|(k, _)| *k).collect();
    set.iter()
        .filter(|(k, _)| {
            !paths.iter().any(|p| {
                k.len() > p.len()
                    && k.starts_with(p)
                    && matches!(k.as_bytes()[p.len()], b'.' | b'[')
            })
        })
        .map(|(k, v)| (k.to_string(), (*v).clone()))
        .collect()
}

/// A row without the fields that hold another of its fields (a list beside its item's
/// fields): the inner ones are kept.
fn innermost(mut set: Fields) -> Fields {
    let paths: Vec<String> = set.keys().cloned().collect();
    set.retain(|k, _| {
        !paths.iter().any(|p| {
            p.len() > k.len()
                && p.starts_with(k.as_str())
                && matches!(p.as_bytes()[k.len()], b'.' | b'[')
        })
    });
    set
}

/// Whether a value is small enough for a behaviour trial to create objects with (a replica
/// count of two billion is for admission only).
fn small(v: &Value) -> bool {
    v.as_i64().is_none_or(|i| (-1..=10).contains(&i))
}

/// A subject with the field sets its behaviour trials create objects with, and the single
/// values its updates set.
type Prepared = (Subject, Vec<Fields>, Vec<(String, Value)>);

/// What behaviour trials of `s` are made from, given the single values its admission trials
/// admitted (in schema order): the small ones for updates, and those that set a value each a
/// create, in the seeded order of [`trial::create_order`] (so that a budget that ends early
/// has created with fields from across the schema).
fn prepare(s: Subject, admitted: Vec<(String, Value)>, seed: u64) -> Prepared {
    let updates: Vec<(String, Value)> = admitted.into_iter().filter(|(_, v)| small(v)).collect();
    let creates: Vec<Fields> = updates
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| Fields::from([(k.clone(), v.clone())]))
        .collect();
    let creates = s.vary(trial::create_order(&creates, seed, &s.name), seed);
    (s, creates, updates)
}

/// Schedules behaviour trials: the next batch, `parallel` trials (at least one) from the
/// run's behaviour trial `next` on, each as (the position of its subject among `subjects`,
/// its trial number: [`trial::behaviour`]'s `index`); empty without subjects.
///
/// How the budget is shared among subjects: they take turns, one trial each, in their order,
/// so the run's trial k is number k / `subjects` of subject k % `subjects`. Every subject runs
/// its numbers 0, 1, 2, … in order, each once (none repeated, none skipped), whatever the
/// parallelism and the number of subjects; when the budget ends, each has started as many
/// trials as the others or one more. The turns share trials, not time: a subject whose trials
/// take longer to settle uses more of the budget.
fn schedule(next: u64, parallel: usize, subjects: usize) -> Vec<(usize, u64)> {
    if subjects == 0 {
        return vec![];
    }
    let n = subjects as u64;
    (next..next + parallel.max(1) as u64)
        .map(|k| ((k % n) as usize, k / n))
        .collect()
}

/// Jobs for [`pool`]: where they come from, what they need, and where their results go.
trait Jobs {
    /// A job to start.
    type Job;
    /// What a job gives when it ends.
    type Done;
    /// The next job to start, if one may start now.
    fn next(&mut self) -> anyhow::Result<Option<Self::Job>>;
    /// A job that waited for room: itself if it may still start, else none (the jobs take it
    /// back).
    fn keep(&mut self, job: Self::Job) -> anyhow::Result<Option<Self::Job>>;
    /// How many of the pool's places `job` takes (at least one).
    fn places(&self, job: &Self::Job) -> usize;
    /// Whether `job` runs alone: once nothing else runs, and nothing beside it.
    fn alone(&self, job: &Self::Job) -> bool;
    /// The pool's places now.
    fn width(&self) -> usize;
    /// Takes the result of a job that ended, `full` whether every place was taken as it did.
    async fn done(&mut self, done: Self::Done, full: bool) -> anyhow::Result<()>;
}

/// Runs the jobs of `jobs`, each started with `start`, keeping up to [`Jobs::width`] places
/// taken: when a job ends, its result goes to [`Jobs::done`] at once and the next job starts,
/// so that no job waits for a slower one. A job that runs alone waits until nothing runs and
/// nothing starts beside it; a job that needs more places than are free waits for them
/// (nothing starts before it meanwhile). Ends once nothing runs and nothing may start.
async fn pool<'f, J: Jobs>(
    jobs: &mut J,
    start: impl Fn(J::Job) -> futures::future::LocalBoxFuture<'f, J::Done>,
) -> anyhow::Result<()> {
    let mut running = futures::stream::FuturesUnordered::new();
    let (mut taken, mut alone) = (0usize, false);
    let mut waiting: Option<J::Job> = None;
    loop {
        while !alone {
            let job = match waiting.take() {
                Some(job) => match jobs.keep(job)? {
                    Some(job) => job,
                    None => continue,
                },
                None if taken < jobs.width() => match jobs.next()? {
                    Some(job) => job,
                    None => break,
                },
                None => break,
            };
            let (places, by_itself) = (jobs.places(&job).max(1), jobs.alone(&job));
            let fits = taken == 0 || (!by_itself && taken + places <= jobs.width());
            if !fits {
                waiting = Some(job);
                break;
            }
            taken += places;
            alone = by_itself;
            let run = start(job);
            running.push(async move { (places, by_itself, run.await) });
        }
        let Some((places, by_itself, done)) = running.next().await else {
            return Ok(());
        };
        let full = taken >= jobs.width();
        taken -= places;
        alone &= !by_itself;
        jobs.done(done, full).await?;
    }
}

/// A new finding waiting to be shrunk and confirmed.
#[derive(Debug, Clone)]
struct Pending {
    subject: Subject,
    finding: Finding,
    /// The trial that fired it.
    trial: Trial,
    /// How long that trial took: what a candidate or a confirming run may take.
    seconds: Duration,
    /// Seconds into the exploration when it was first seen.
    first_seen: f64,
    /// The controller's log window of the trial that fired it.
    manager_log: String,
}

/// How a finding's shrinking and confirming fit in the time left for them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plan {
    /// How long after the shrinking starts a candidate may still start.
    shrink_for: Duration,
    /// Candidates at once.
    side_by_side: usize,
    /// Whether the confirming runs run at once (else one after another).
    confirm_at_once: bool,
}

/// How a finding whose trial took `trial` is shrunk and confirmed (`confirm` runs) with `left`
/// of the time for both: the confirming runs come last and, all at once, take about one
/// trial; candidates (`side_by_side` at once) may start while a candidate and the confirming
/// runs still fit. A trial that acts on the whole controller or cluster ([`Trial::global`])
/// runs alone: its candidates and confirming runs one after another. None when not even the
/// confirming runs fit: the finding is then written as it fired.
fn plan(
    left: Duration,
    trial: Duration,
    confirm: usize,
    side_by_side: usize,
    global: bool,
) -> Option<Plan> {
    let (side_by_side, rounds) = match global {
        true => (1, confirm.max(1)),
        false => (side_by_side.max(1), 1),
    };
    let confirming = trial * u32::try_from(rounds).unwrap_or(u32::MAX);
    if left.is_zero() || left < confirming {
        return None;
    }
    Some(Plan {
        shrink_for: (left - confirming).saturating_sub(trial),
        side_by_side,
        confirm_at_once: !global,
    })
}

/// The cells a finding's trial runs on again: the cell, and for an O5 finding the baseline's
/// with its release's name.
#[derive(Clone, Copy)]
struct Cells<'c> {
    cell: &'c Cell<'c>,
    baseline: Option<(&'c Cell<'c>, &'c str)>,
}

/// What shrinking and confirming a finding gave.
#[derive(Debug)]
struct Shrunk {
    pending: Pending,
    /// The smallest trial found that still fires it (the one that fired it, unshrunk).
    trial: Trial,
    /// Candidates run.
    candidates: usize,
    /// Confirming runs made (none: not confirmed), and of them those that fired it.
    confirm_runs: usize,
    reproduced: usize,
    /// What the last confirming run that fired it saw, with the controller's log window.
    hit: Option<(Finding, String)>,
    /// Seconds of shrinking and of confirming.
    shrinking: f64,
    confirming: f64,
}

impl Shrunk {
    /// `p` as it fired: neither shrunk nor confirmed.
    fn not(p: Pending) -> Self {
        Shrunk {
            trial: p.trial.clone(),
            pending: p,
            candidates: 0,
            confirm_runs: 0,
            reproduced: 0,
            hit: None,
            shrinking: 0.0,
            confirming: 0.0,
        }
    }
}

/// Shrinks `p`'s trial on `cells` as `plan` says (at most `runs` candidates), then runs the
/// smallest trial found `confirm` times.
async fn shrink(cells: Cells<'_>, p: Pending, plan: Plan, runs: usize, confirm: usize) -> Shrunk {
    let started = Instant::now();
    let (s, target) = (&p.subject, &p.finding);
    let deadline = started + plan.shrink_for;
    let minimized = minimize::minimize(
        p.trial.clone(),
        runs,
        deadline,
        plan.side_by_side,
        |t| async move { fires(cells, s, &t, target).await.is_some() },
    )
    .await;
    let shrinking = started.elapsed().as_secs_f64();
    let confirming = Instant::now();
    let run = || fires(cells, s, &minimized.trial, target);
    let hits = match plan.confirm_at_once {
        true => futures::future::join_all((0..confirm).map(|_| run())).await,
        false => {
            let mut hits = vec![];
            for _ in 0..confirm {
                hits.push(run().await);
            }
            hits
        }
    };
    let reproduced = hits.iter().filter(|h| h.is_some()).count();
    let hit = hits.into_iter().flatten().last();
    Shrunk {
        pending: p,
        trial: minimized.trial,
        candidates: minimized.runs,
        confirm_runs: confirm,
        reproduced,
        hit,
        shrinking,
        confirming: confirming.elapsed().as_secs_f64(),
    }
}

/// What an exploration keeps as it goes: the summary it writes (counts, findings, pace), the
/// findings seen and not written yet, its clock, and who hears progress.
struct Book<'a> {
    options: &'a Options,
    started: Instant,
    summary: Summary,
    /// Findings seen and not written yet (waiting to be shrunk, or being shrunk), each with
    /// the times other trials fired it again.
    held: Vec<(Finding, usize)>,
    say: &'a (dyn Fn(String) + Sync),
}

impl Book<'_> {
    fn left(&self) -> Duration {
        self.options.budget.saturating_sub(self.started.elapsed())
    }

    fn count(&mut self, what: String, n: usize) {
        *self.summary.trials.entry(what).or_default() += n;
    }

    /// The time shrinking and confirming may still take: what is left of their share, and of
    /// the budget.
    fn shrink_left(&self) -> Duration {
        Duration::from_secs_f64(self.summary.pace.shrink_left()).min(self.left())
    }

    /// Of `findings`, fired by `trial` of `s` (which took `seconds`, with the controller's log
    /// window `manager_log`), the new ones, to shrink; each other is counted as a repeat of
    /// the one it is alike ([`alike`]), written or held.
    fn sort(
        &mut self,
        s: &Subject,
        trial: &Trial,
        seconds: Duration,
        findings: Vec<Finding>,
        manager_log: &str,
    ) -> Vec<Pending> {
        let mut new = vec![];
        for f in findings {
            if self.repeat(&f) {
                continue;
            }
            let first_seen = self.started.elapsed().as_secs_f64();
            (self.say)(format!(
                "[{:>5.0}s] {} {} {}: {}",
                first_seen,
                f.oracle.short(),
                s.name,
                f.key,
                f.observed.lines().next().unwrap_or_default()
            ));
            self.held.push((f.clone(), 0));
            new.push(Pending {
                subject: s.clone(),
                finding: f,
                trial: trial.clone(),
                seconds,
                first_seen,
                manager_log: manager_log.to_string(),
            });
        }
        new
    }

    /// Whether `f` is alike a finding written or held: then counted as its repeat.
    fn repeat(&mut self, f: &Finding) -> bool {
        let written = self.summary.findings.iter().find(|r| alike(&r.finding, f));
        if let Some(r) = written {
            let name = r.dir.file_name().unwrap_or_default().to_string_lossy();
            let record = self.summary.pace.findings.entry(name.into_owned());
            record.or_default().repeats += 1;
            return true;
        }
        match self.held.iter_mut().find(|(h, _)| alike(h, f)) {
            Some((_, repeats)) => {
                *repeats += 1;
                true
            }
            None => false,
        }
    }

    /// Writes a finding as shrinking and confirming left it (see [`output`]), and counts what
    /// they cost.
    fn write(&mut self, done: Shrunk) -> anyhow::Result<()> {
        let p = done.pending;
        let at = self.held.iter().position(|(h, _)| alike(h, &p.finding));
        let repeats = at.map_or(0, |i| self.held.remove(i).1);
        let (finding, manager_log) = done.hit.unwrap_or((p.finding, p.manager_log));
        let s = p.subject;
        let n = self.summary.findings.len() + 1;
        let name = format!(
            "{n:02}-{}-{}",
            finding.oracle.short(),
            s.name.to_lowercase()
        );
        let dir = self.options.dir.join("findings").join(&name);
        let confirmed = done.confirm_runs > 0;
        let r = Reported {
            finding,
            original: p.trial,
            trial: done.trial,
            reproduced: done.reproduced,
            confirm_runs: done.confirm_runs,
            stable: confirmed && done.reproduced == done.confirm_runs,
            first_seen: p.first_seen,
            dir: dir.clone(),
            controller: self.options.controller.to_string(),
            kubernetes: self.options.kubernetes.to_string(),
            baseline: self.options.baseline.as_ref().map(ToString::to_string),
            gates: self.options.gates.clone(),
        };
        output::write_finding(&dir, &s, &r, &self.options.controller, &manager_log)?;
        let shrunk = done.candidates > 0;
        (self.say)(match (shrunk, confirmed) {
            (_, false) => format!(
                "         written as it fired, neither shrunk nor confirmed: its confirming runs \
                 (about {:.0} s, as long as its trial) do not fit in what is left of the budget \
                 and of shrinking's share of it ({:.0} s); `harness explore --replay {}` does \
                 both",
                p.seconds.as_secs_f64(),
                self.shrink_left().as_secs_f64(),
                dir.display()
            ),
            (true, true) => format!(
                "         shrunk to {} step(s), {} field(s) in {} runs; reproduced {}/{} → {}",
                r.trial.steps.len(),
                r.trial.fields().len(),
                done.candidates,
                r.reproduced,
                r.confirm_runs,
                dir.display()
            ),
            (false, true) => format!(
                "         not shrunk (no time left for candidates); reproduced {}/{} → {}",
                r.reproduced,
                r.confirm_runs,
                dir.display()
            ),
        });
        let pace = &mut self.summary.pace;
        pace.shrinking += done.shrinking;
        pace.confirming += done.confirming;
        pace.findings.insert(
            name,
            pace::FindingPace {
                shrinking: done.shrinking,
                confirming: done.confirming,
                candidates: done.candidates,
                shrunk,
                confirmed,
                repeats,
            },
        );
        self.summary.findings.push(r);
        Ok(())
    }
}

struct Explorer<'a> {
    options: &'a Options,
    cell: Cell<'a>,
    baseline: Option<Cell<'a>>,
    /// The baseline's release, named.
    base_name: Option<String>,
    book: Book<'a>,
}

impl Explorer<'_> {
    fn cells(&self) -> Cells<'_> {
        Cells {
            cell: &self.cell,
            baseline: self.baseline.as_ref().zip(self.base_name.as_deref()),
        }
    }

    /// Judges an admission trial's findings: each new one shrunk and confirmed now while the
    /// share lasts (nothing else runs meanwhile: its candidates run side by side), else
    /// written as it fired.
    async fn judge_now(
        &mut self,
        s: &Subject,
        trial: &Trial,
        findings: Vec<Finding>,
    ) -> anyhow::Result<()> {
        let (runs, confirm) = (self.options.shrink_runs.max(1) * 4, self.options.confirm);
        for p in self.book.sort(s, trial, ADMISSION_RUN, findings, "") {
            let planned = plan(
                self.book.shrink_left(),
                p.seconds,
                confirm,
                SIDE_BY_SIDE,
                false,
            );
            let done = match planned {
                Some(plan) => shrink(self.cells(), p, plan, runs, confirm).await,
                None => Shrunk::not(p),
            };
            self.book.write(done)?;
        }
        Ok(())
    }

    /// Admission trials of one subject: singles at create and update, then covering rows.
    async fn admission(
        &mut self,
        s: &Subject,
        crd: &Value,
        doc: &openapi::Doc,
    ) -> anyhow::Result<Vec<(String, Value)>> {
        let singles = singles(s, crd, doc, self.options.seed);
        self.book.summary.reach.offer(&s.name, &singles);
        let mut trials: Vec<Trial> = vec![];
        let mut index = 0;
        let seed = self.options.seed;
        let mut next = |steps: Vec<Step>| {
            index += 1;
            Trial {
                subject: s.name.to_string(),
                mode: Mode::Admission,
                seed,
                index: index - 1,
                steps,
            }
        };
        for set in singles {
            trials.push(next(vec![Step::Create { set: set.clone() }]));
            // A target's template is the target's to admit once it changes; a field through
            // a minimal item is tried at create (at update, the list's own values add and
            // remove its item: the update of each of the item's fields would be the same
            // trial of the list again, under another name).
            if set.len() > 1 || set.keys().any(|k| k.starts_with(subject::TARGET)) {
                continue;
            }
            trials.push(next(vec![
                Step::Create { set: s.quiet() },
                Step::Update { set },
            ]));
        }
        let mut results = self.admit_all(&self.cell, s, &trials).await?;
        self.compare(s, &trials, &mut results).await?;
        for t in &trials {
            self.book.summary.reach.tried(t);
        }
        let mut admitted = vec![];
        for (t, out) in trials.iter().zip(&results) {
            let single = matches!(t.steps.as_slice(), [Step::Create { .. }]);
            if single && out.answers.last() == Some(&Answer::Admitted) {
                admitted.extend(outermost(t.fields()));
            }
        }
        for (t, out) in trials.iter().zip(results) {
            if self.options.modes.contains(&Mode::Admission) {
                self.judge_now(s, t, out.findings).await?;
            }
        }
        // Pairs of values admitted alone.
        let mut by_field: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (k, v) in &admitted {
            if !v.is_null() {
                by_field.entry(k.clone()).or_default().push(v.clone());
            }
        }
        // A list whose item's fields were each admitted through a minimal item has as many
        // values as the item has fields: pairs with them would outnumber all other rows. A
        // field takes part with [`ROW_VALUES`] of its values at most, drawn with the seed.
        let mut draw = Rng::new(self.options.seed, u64::MAX - 1);
        let fields: Vec<(String, Vec<Value>)> = by_field
            .into_iter()
            .map(|(k, mut v)| {
                if v.len() > ROW_VALUES {
                    draw.shuffle(&mut v);
                    v.truncate(ROW_VALUES);
                }
                (k, v)
            })
            .collect();
        let rows = trial::covering_rows(&fields, &mut Rng::new(self.options.seed, u64::MAX));
        let row_trials: Vec<Trial> = rows
            .into_iter()
            .map(|set| {
                next(vec![Step::Create {
                    set: innermost(set),
                }])
            })
            .collect();
        let mut results = self.admit_all(&self.cell, s, &row_trials).await?;
        self.compare(s, &row_trials, &mut results).await?;
        self.book.summary.reach.rows(&s.name, row_trials.len());
        for t in &row_trials {
            self.book.summary.reach.tried(t);
        }
        for (t, out) in row_trials.iter().zip(results) {
            if self.options.modes.contains(&Mode::Admission) {
                self.judge_now(s, t, out.findings).await?;
            }
        }
        self.book.count(
            format!("admission {}", s.name),
            trials.len() + row_trials.len(),
        );
        Ok(admitted)
    }

    /// With a baseline: runs `trials` there too, and adds to each outcome the O5 finding of
    /// an end that differs.
    async fn compare(
        &self,
        s: &Subject,
        trials: &[Trial],
        outcomes: &mut [exec::Outcome],
    ) -> anyhow::Result<()> {
        let (Some(base), Some(name)) = (&self.baseline, &self.options.baseline) else {
            return Ok(());
        };
        let theirs = self.admit_all(base, s, trials).await?;
        for ((t, ours), theirs) in trials.iter().zip(outcomes.iter_mut()).zip(theirs) {
            ours.findings.extend(oracle::release(
                s,
                &t.fields(),
                &ours.end,
                &theirs.end,
                &name.to_string(),
            ));
        }
        Ok(())
    }

    /// Runs admission trials 8 at a time in one namespace of `cell`.
    async fn admit_all(
        &self,
        cell: &Cell<'_>,
        s: &Subject,
        trials: &[Trial],
    ) -> anyhow::Result<Vec<exec::Outcome>> {
        let ns = cell.namespace(s).await?;
        let results: Vec<anyhow::Result<exec::Outcome>> = futures::stream::iter(trials)
            .map(|t| {
                let name = format!("t{}", t.index);
                let ns = ns.clone();
                async move { cell.admit(s, t, &ns, &name).await }
            })
            .buffered(8)
            .collect()
            .await;
        cell.drop_namespace(&ns, s).await;
        results.into_iter().collect()
    }
}

/// A behaviour job of [`pool`]: a trial of a subject, or the shrinking of a finding.
enum Job {
    Trial(Box<(Subject, Trial)>),
    Shrink(Box<Pending>, Plan),
}

/// What a behaviour job gave.
enum Done {
    Trial(Box<Ran>),
    Shrunk(Box<Shrunk>),
}

/// A behaviour trial `t` of `s` that ran: what it saw, in how many seconds.
struct Ran {
    s: Subject,
    t: Trial,
    out: anyhow::Result<exec::Outcome>,
    seconds: f64,
}

/// Behaviour trials, the subjects taking turns ([`schedule`]), and the shrinking of their
/// findings, as jobs of [`pool`]: a finding's shrinking starts before any new trial, one at a
/// time (so that the share of the budget is not spent twice), its candidates side by side
/// (half the width at most, [`SIDE_BY_SIDE`]) beside the trials; a finding the share cannot
/// hold any more is written as it fired. The width is the [`pace::Pacer`]'s.
struct Behaviour<'b, 'a> {
    book: &'b mut Book<'a>,
    prepared: &'b [Prepared],
    perturbations: &'b [Perturbation],
    /// The cell's client, to take the apiserver's latency with.
    client: kube::Client,
    pacer: pace::Pacer,
    /// The run's next behaviour trial.
    next: u64,
    /// When the behaviour trials started.
    started: Instant,
    /// New findings waiting to be shrunk.
    queue: std::collections::VecDeque<Pending>,
    /// Whether a finding is being shrunk.
    shrinking: bool,
}

impl Behaviour<'_, '_> {
    /// Trial `number` of the subject at `at` of the prepared ones.
    fn trial(&self, at: usize, number: u64) -> (Subject, Trial) {
        let (s, creates, updates) = &self.prepared[at];
        let ops = s.ops();
        let perturbations: Vec<Perturbation> = self
            .perturbations
            .iter()
            .copied()
            .filter(|p| s.perturbed_by(*p))
            .collect();
        let m = Material {
            subject: &s.name,
            creates,
            updates,
            ops: &ops,
            perturbations: &perturbations,
        };
        (
            s.clone(),
            trial::behaviour(&m, self.book.options.seed, number),
        )
    }

    /// Decides the width again, when a decision is due, the pool `full` or not.
    async fn pace(&mut self, full: bool) {
        if !self.pacer.due() {
            return;
        }
        let latency = latency(&self.client).await;
        let cpu = self.pacer.cpu();
        let at = self.started.elapsed().as_secs_f64();
        if let Some(c) = self.pacer.decide(latency, cpu, full, at) {
            (self.book.say)(format!(
                "[{:>5.0}s] {} → {} trials at once: {} (apiserver {:.0} ms, harness CPU {:.0} %)",
                self.book.started.elapsed().as_secs_f64(),
                c.from,
                c.to,
                c.why,
                latency * 1000.0,
                cpu * 100.0
            ));
            self.book.summary.pace.widths.changes.push(c);
        }
    }
}

impl Jobs for Behaviour<'_, '_> {
    type Job = Job;
    type Done = Done;

    fn next(&mut self) -> anyhow::Result<Option<Job>> {
        if !self.shrinking {
            while let Some(p) = self.queue.pop_front() {
                let side_by_side = (self.pacer.width() / 2).clamp(1, SIDE_BY_SIDE);
                let (left, confirm) = (self.book.shrink_left(), self.book.options.confirm);
                match plan(left, p.seconds, confirm, side_by_side, p.trial.global()) {
                    Some(plan) => {
                        self.shrinking = true;
                        return Ok(Some(Job::Shrink(Box::new(p), plan)));
                    }
                    None => self.book.write(Shrunk::not(p))?,
                }
            }
        }
        if self.book.left().is_zero() || self.prepared.is_empty() {
            return Ok(None);
        }
        let (at, number) = schedule(self.next, 1, self.prepared.len())[0];
        self.next += 1;
        self.book.summary.pace.widths.start(self.pacer.width());
        let (s, t) = self.trial(at, number);
        Ok(Some(Job::Trial(Box::new((s, t)))))
    }

    fn keep(&mut self, job: Job) -> anyhow::Result<Option<Job>> {
        if !self.book.left().is_zero() {
            return Ok(Some(job));
        }
        if let Job::Shrink(p, _) = job {
            self.shrinking = false;
            self.book.write(Shrunk::not(*p))?;
        }
        Ok(None)
    }

    fn places(&self, job: &Job) -> usize {
        match job {
            Job::Trial(_) => 1,
            Job::Shrink(_, plan) => {
                let confirm = if plan.confirm_at_once {
                    self.book.options.confirm
                } else {
                    1
                };
                plan.side_by_side.max(confirm).min(self.pacer.width())
            }
        }
    }

    fn alone(&self, job: &Job) -> bool {
        match job {
            Job::Trial(st) => st.1.global(),
            Job::Shrink(p, _) => p.trial.global(),
        }
    }

    fn width(&self) -> usize {
        self.pacer.width()
    }

    async fn done(&mut self, done: Done, full: bool) -> anyhow::Result<()> {
        match done {
            Done::Trial(ran) => {
                let Ran { s, t, out, seconds } = *ran;
                self.book.count(format!("behaviour {}", s.name), 1);
                self.book.summary.reach.tried(&t);
                let phases = out.as_ref().map_or(&[][..], |o| &o.phases[..]);
                self.book.summary.pace.behaviour_trial(&t, seconds, phases);
                match out {
                    Ok(out) => {
                        if let Some(settle) = settled(&out) {
                            self.pacer.settled(settle);
                        }
                        let took = Duration::from_secs_f64(seconds);
                        let new = self.book.sort(&s, &t, took, out.findings, &out.manager_log);
                        self.queue.extend(new);
                    }
                    Err(e) => {
                        (self.book.say)(format!("{}: trial {} did not run: {e:#}", s.name, t.index))
                    }
                }
                self.pace(full).await;
            }
            Done::Shrunk(d) => {
                self.shrinking = false;
                self.book.write(*d)?;
            }
        }
        Ok(())
    }
}

/// The seconds a behaviour trial took to settle, if it settled: created, and every difference
/// from the declared state gone.
fn settled(out: &exec::Outcome) -> Option<f64> {
    let settled = out.end.admitted.first() == Some(&true) && out.end.unsettled.is_empty();
    settled.then(|| {
        out.phases
            .iter()
            .filter(|(p, _)| *p == "settle")
            .map(|(_, d)| d.as_secs_f64())
            .sum()
    })
}

/// The apiserver's latency now, seconds: the median of three reads of one namespace's
/// metadata (cheap, and through the apiserver's storage); a read that fails counts as
/// [`PROBE_FAILED`], and is logged.
async fn latency(client: &kube::Client) -> f64 {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let mut seconds = vec![];
    for _ in 0..3 {
        let at = Instant::now();
        match api
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await
        {
            Ok(_) => seconds.push(at.elapsed().as_secs_f64()),
            Err(e) => {
                tracing::warn!("read the apiserver's latency: {e}");
                seconds.push(PROBE_FAILED);
            }
        }
    }
    pace::median(&mut seconds)
}

/// Whether `trial` fires a finding like `target` (same oracle and key) on `cells`; with it and
/// the controller's log window. An O5 finding runs the trial on the baseline cell too.
async fn fires(
    cells: Cells<'_>,
    s: &Subject,
    trial: &Trial,
    target: &Finding,
) -> Option<(Finding, String)> {
    let cells = Cells {
        baseline: cells.baseline.filter(|_| target.oracle == Oracle::Release),
        ..cells
    };
    let out = match run_compared(cells, s, trial).await {
        Ok(out) => out,
        Err(e) => {
            tracing::warn!("trial run: {e:#}");
            return None;
        }
    };
    out.findings
        .into_iter()
        .find(|f| same(f, target))
        .map(|f| (f, out.manager_log))
}

/// Runs `trial` on the cell of `cells`, and with a baseline on it too, adding the O5 finding
/// of an end that differs.
async fn run_compared(
    cells: Cells<'_>,
    s: &Subject,
    trial: &Trial,
) -> anyhow::Result<exec::Outcome> {
    let Some((base, name)) = cells.baseline else {
        return cells.cell.run(s, trial).await;
    };
    let (ours, theirs) = futures::join!(cells.cell.run(s, trial), base.run(s, trial));
    let mut ours = ours?;
    if let Ok(theirs) = theirs {
        ours.findings.extend(oracle::release(
            s,
            &trial.fields(),
            &ours.end,
            &theirs.end,
            name,
        ));
    }
    Ok(ours)
}

fn same(a: &Finding, b: &Finding) -> bool {
    a.oracle == b.oracle && a.subject == b.subject && a.key == b.key
}

/// Whether two findings are one: the same oracle, subject and key, the verb of an admission
/// finding's key aside (the same field and form of value refused or admitted alike at create
/// and at update is one finding).
fn alike(a: &Finding, b: &Finding) -> bool {
    let verbless = |k: &str| k.replace(" on update of ", " on create of ");
    a.oracle == b.oracle && a.subject == b.subject && verbless(&a.key) == verbless(&b.key)
}

/// `options` with the controller's gates `subjects` need turned on, unless the options set
/// them already (a gate turned off on purpose stays off, and its kinds are skipped).
fn with_gates_of(options: &Options, subjects: &[Subject]) -> Options {
    let mut o = options.clone();
    for g in subjects.iter().flat_map(|s| s.gates) {
        o.gates.controller.entry(g.to_string()).or_insert(true);
    }
    o
}

/// Makes a cell for exploration (the scenario layout, the controller at its default gates),
/// named with `prefix`: its name and the session that removes it when dropped.
async fn start_cell(
    prefix: &str,
    controller: &ControllerRef,
    options: &Options,
    proxy: bool,
    provider: &Provider,
    toolchain: &Toolchain,
) -> anyhow::Result<(String, Session)> {
    let name = crate::run::new_id(prefix);
    let mut profile = crate::run::scenario_profile(options.kubernetes);
    profile.feature_gates = options.gates.cluster.clone();
    let choice = ControllerChoice {
        reference: controller.clone(),
        gates: options.gates.controller.clone(),
    };
    let start = crate::up::StartOptions { proxy };
    let session =
        Session::start_with(provider, toolchain, &name, &profile, Some(&choice), start).await?;
    Ok((name, session))
}

/// The cell trials run on in `session` (cluster `name`, made by `start_cell` or a test), prepared.
pub async fn cell<'a>(
    name: &str,
    session: &'a Session,
    settle: Duration,
) -> anyhow::Result<Cell<'a>> {
    Ok(cell_reading(name, session, settle).await?.0)
}

/// As [`cell`], with what the cell serves: its OpenAPI and its CRDs (see [`crds`]).
async fn cell_reading<'a>(
    name: &str,
    session: &'a Session,
    settle: Duration,
) -> anyhow::Result<(Cell<'a>, openapi::Doc, BTreeMap<String, Value>)> {
    let client = session.cluster.client().await?;
    let doc = openapi::fetch(&client)
        .await
        .context("read the cell's OpenAPI")?;
    let crds = crds(&client).await?;
    let mut doc = doc;
    // An object the API refuses (a required field its schema cannot say how to fill) is not
    // made: a reference to its kind is then a string as any other.
    for r in references(&doc, &crds) {
        if let Err(e) = dry_make(&client, &r).await {
            tracing::info!("not made for references: {e:#}");
            doc.unmade(r.object["kind"].as_str().unwrap_or_default());
        }
    }
    let cell = Cell {
        client,
        installation: session
            .installation
            .as_ref()
            .context("the controller was not installed")?,
        cluster: Some(&session.cluster),
        owner: name.to_string(),
        settle,
        made: Default::default(),
        references: references(&doc, &crds),
    };
    cell.prepare().await?;
    Ok((cell, doc, crds))
}

/// Whether the API admits the object `r` (a dry run, in the namespace `default` for a
/// namespaced kind).
async fn dry_make(client: &kube::Client, r: &openapi::Made) -> anyhow::Result<()> {
    let (api_version, kind) = (
        r.object["apiVersion"].as_str().unwrap_or_default(),
        r.object["kind"].as_str().unwrap_or_default(),
    );
    let (ar, _) = crate::scenario::pinned(client, api_version, kind).await?;
    let api: Api<kube::api::DynamicObject> = match r.namespaced {
        true => Api::namespaced_with(client.clone(), "default", &ar),
        false => Api::all_with(client.clone(), &ar),
    };
    let o: kube::api::DynamicObject = serde_json::from_value(r.object.clone())?;
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &o).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(anyhow::anyhow!("{kind} {}: {e}", openapi::REFERENCED)),
    }
}

/// The objects the references among every subject's leaves name, made by the cell
/// ([`openapi::Doc::referenced`]), a kind each.
fn references(doc: &openapi::Doc, crds: &BTreeMap<String, Value>) -> Vec<openapi::Made> {
    let mut kinds = std::collections::BTreeSet::new();
    let mut walked = std::collections::BTreeSet::new();
    for s in subject::served(crds, doc) {
        // A policy's own leaves are the same over every target, and its target's template is
        // a pod template as the first one walked: the references they name are the same.
        if !walked.insert((s.api_version.clone(), s.kind, s.template.clone())) {
            continue;
        }
        let group = s.api_version.split('/').next().unwrap_or_default();
        let Some(crd) = crds.get(&format!("{group}/{}", s.kind)) else {
            continue;
        };
        let version = s.api_version.rsplit('/').next().unwrap_or_default();
        let seed = s.seed.make("x");
        let walk = schema::Walk {
            doc: Some(doc),
            template: &s.template,
            seed: &seed,
            pod: &Value::Null,
        };
        let mut leaves = schema::leaves_with(crd, version, &walk);
        if let Some(t) = &s.target {
            leaves.extend(schema::template_leaves(doc, &t.template, &t.seed.make("x")));
        }
        for l in leaves {
            if let schema::Shape::Reference(k) = l.shape {
                kinds.insert(k);
            }
        }
    }
    kinds
        .iter()
        .filter_map(|k| doc.served(k))
        .filter_map(|k| doc.referenced(k))
        .collect()
}

/// Explores the controller of `options` on a cell of its own (made with `provider`, removed
/// at the end however it ends); `say` hears progress.
pub async fn explore(
    options: &Options,
    provider: &Provider,
    toolchain: &Toolchain,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Summary> {
    let subjects = select(&options.kinds)?;
    let options = &with_gates_of(options, &subjects);
    let t0 = Instant::now();
    // The manager talks through an apiserver proxy when trials make its view stale or crash
    // it right after a write (the proxy tells its writes).
    let proxy = options.perturbations.iter().any(|c| c.needs_proxy());
    say(format!(
        "bringing up a cell: Kubernetes {}, {}, {}",
        options.kubernetes, options.controller, options.gates
    ));
    let (name, session) = start_cell(
        "explore",
        &options.controller,
        options,
        proxy,
        provider,
        toolchain,
    )
    .await?;
    let base_session = match &options.baseline {
        Some(b) => {
            say(format!("bringing up a baseline cell: {b}"));
            Some(start_cell("baseline", b, options, proxy, provider, toolchain).await?)
        }
        None => None,
    };
    say(format!("cell ready in {:.0} s", t0.elapsed().as_secs_f64()));
    let (ours, doc, crds) = cell_reading(&name, &session, options.settle).await?;
    // The subjects themselves, derived from what the cell serves.
    let (subjects, unserved) = select_served(&options.kinds, &crds, &doc);
    for k in unserved {
        say(format!(
            "{k}: not served by {}; skipped",
            options.controller
        ));
    }
    let baseline = match &base_session {
        Some((n, s)) => Some(cell(n, s, options.settle).await?),
        None => None,
    };
    let mut x = Explorer {
        options,
        cell: ours,
        baseline,
        base_name: options.baseline.as_ref().map(ToString::to_string),
        book: Book {
            options,
            started: Instant::now(),
            summary: Summary {
                controller: options.controller.to_string(),
                kubernetes: options.kubernetes.to_string(),
                seed: options.seed,
                baseline: options.baseline.as_ref().map(ToString::to_string),
                gates: options.gates.clone(),
                ..Summary::default()
            },
            held: vec![],
            say,
        },
    };
    let pace = &mut x.book.summary.pace;
    pace.bring_up = t0.elapsed().as_secs_f64();
    pace.budget = options.budget.as_secs_f64();
    pace.shrink_share = options.shrink_share;
    let admitting = Instant::now();
    let mut materials = vec![];
    for s in &subjects {
        let group = s.api_version.split('/').next().unwrap_or_default();
        if let Some(g) = s
            .gates
            .iter()
            .find(|g| options.gates.controller.get(**g) == Some(&false))
        {
            say(format!(
                "{}: needs the controller gate {g}, which is turned off; skipped",
                s.name
            ));
            continue;
        }
        let Some(crd) = crds.get(&format!("{group}/{}", s.kind)) else {
            say(format!(
                "{}: not served by {}; skipped",
                s.name, options.controller
            ));
            continue;
        };
        say(format!("{}: admission trials", s.name));
        let admitted = x.admission(s, crd, &doc).await?;
        materials.push((s.clone(), admitted));
        if x.book.left().is_zero() {
            break;
        }
    }
    let perturbations: Vec<Perturbation> = options
        .perturbations
        .iter()
        .filter(|c| match c {
            // Without the proxy (another provider) there is no stale view to make.
            trial::Class::Watches if x.cell.installation.proxy().is_none() => {
                say(format!(
                    "perturbations: no apiserver proxy on this cell ({} provider): \
                     watch perturbations left out",
                    provider.label()
                ));
                false
            }
            _ => true,
        })
        .flat_map(|c| c.perturbations())
        .collect();
    // Behaviour trials, the subjects taking turns (see `schedule`), on a pool whose width
    // adapts (see `pool`, `pace::Pacer`), until the budget.
    let prepared: Vec<Prepared> = materials
        .into_iter()
        .map(|(s, admitted)| prepare(s, admitted, options.seed))
        .collect();
    x.book.summary.pace.admission = admitting.elapsed().as_secs_f64();
    let behaving = Instant::now();
    let behave = options.modes.contains(&Mode::Behaviour);
    if behave && !prepared.is_empty() && !x.book.left().is_zero() {
        let cells = Cells {
            cell: &x.cell,
            baseline: x.baseline.as_ref().zip(x.base_name.as_deref()),
        };
        let calm = latency(&x.cell.client).await;
        let cap = options.parallel.max(pace::MAX_WIDTH);
        let mut jobs = Behaviour {
            book: &mut x.book,
            prepared: &prepared,
            perturbations: &perturbations,
            client: x.cell.client.clone(),
            pacer: pace::Pacer::new(options.parallel, cap, calm),
            next: 0,
            started: behaving,
            queue: Default::default(),
            shrinking: false,
        };
        let (runs, confirm) = (options.shrink_runs, options.confirm);
        pool(&mut jobs, |job| match job {
            Job::Trial(st) => async move {
                let (s, t) = *st;
                let at = Instant::now();
                let out = run_compared(cells, &s, &t).await;
                let seconds = at.elapsed().as_secs_f64();
                Done::Trial(Box::new(Ran { s, t, out, seconds }))
            }
            .boxed_local(),
            Job::Shrink(p, plan) => {
                async move { Done::Shrunk(Box::new(shrink(cells, *p, plan, runs, confirm).await)) }
                    .boxed_local()
            }
        })
        .await?;
        // What the budget's end left waiting.
        while let Some(p) = jobs.queue.pop_front() {
            jobs.book.write(Shrunk::not(p))?;
        }
        x.book.summary.pace.behaviour = behaving.elapsed().as_secs_f64();
    }
    x.book.summary.seconds = t0.elapsed().as_secs_f64();
    for line in x.book.summary.pace.lines() {
        say(line);
    }
    output::write_summary(&options.dir, &x.book.summary)?;
    let summary = x.book.summary;
    drop(x.cell);
    drop(x.baseline);
    drop(base_session);
    drop(session);
    Ok(summary)
}

/// What `--explore` asks of `matrix` or `qualify`: an exploration beside the run.
#[derive(Debug, Clone)]
pub struct Exploring {
    /// How long each exploration may take, bring-up aside.
    pub budget: Duration,
    /// The kinds (empty: every one).
    pub kinds: Vec<String>,
}

impl Exploring {
    /// `harness explore`'s defaults for `controller` on Kubernetes `kubernetes` with `seed`,
    /// into `dir`, with these kinds and budget.
    pub fn options(
        &self,
        kubernetes: KubeVersion,
        controller: ControllerRef,
        seed: u64,
        dir: PathBuf,
    ) -> Options {
        let mut options = Options::new(kubernetes, controller, seed, self.budget, dir);
        options.kinds = self.kinds.clone();
        options
    }
}

/// An exploration made beside a matrix cell or a qualification: where it wrote, and its
/// findings a line each (differences to triage, not part of any verdict).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Explored {
    /// Its directory (`explore.json`, `findings.md`, `report.html`, `findings/`).
    pub dir: PathBuf,
    /// Its seed.
    pub seed: u64,
    /// Trials run.
    pub trials: usize,
    /// Its findings, a line each: oracle, kind, key, how often it reproduced.
    pub findings: Vec<String>,
}

impl Explored {
    /// What a person reads of it after a run: `explored <what>: ...` with its counts, seed and
    /// directory, then a `FINDING` line per finding.
    pub fn lines(&self, what: &str) -> Vec<String> {
        let mut out = vec![format!(
            "explored {what}: {} trials, {} finding(s) to triage (seed {}; {})",
            self.trials,
            self.findings.len(),
            self.seed,
            self.dir.display()
        )];
        out.extend(self.findings.iter().map(|f| format!("FINDING     {f}")));
        out
    }
}

/// Reads a summary [`output::write_summary`] wrote.
pub fn read_summary(dir: &std::path::Path) -> anyhow::Result<Summary> {
    let p = dir.join("explore.json");
    let text = std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", p.display()))
}

/// Runs the trial of a finding directory again on a cell of its own: whether it still fires
/// its oracle, and what it fired.
pub async fn replay(
    dir: &std::path::Path,
    options: &Options,
    provider: &Provider,
    toolchain: &Toolchain,
) -> anyhow::Result<(Reported, Vec<Finding>)> {
    let r = output::read_finding(dir)?;
    let known = select(std::slice::from_ref(&r.trial.subject))?;
    let options = &with_gates_of(options, &known);
    let proxy = r.trial.needs_proxy();
    let (name, session) = start_cell(
        "replay",
        &options.controller,
        options,
        proxy,
        provider,
        toolchain,
    )
    .await?;
    let (ours, doc, crds) = cell_reading(&name, &session, options.settle).await?;
    let s = subject::served(&crds, &doc)
        .into_iter()
        .find(|s| s.name == r.trial.subject)
        .with_context(|| {
            format!(
                "{} is not served by {}",
                r.trial.subject, options.controller
            )
        })?;
    // An O5 finding runs on its baseline too (the one given, or the finding's).
    let baseline: Option<ControllerRef> = match (&options.baseline, &r.baseline) {
        _ if r.finding.oracle != Oracle::Release => None,
        (Some(b), _) => Some(b.clone()),
        (None, Some(b)) => Some(b.parse()?),
        (None, None) => None,
    };
    let base_session = match &baseline {
        Some(b) => {
            Some(start_cell("replay-baseline", b, options, proxy, provider, toolchain).await?)
        }
        None => None,
    };
    let base = match &base_session {
        Some((n, s)) => Some(cell(n, s, options.settle).await?),
        None => None,
    };
    let base_name = baseline.as_ref().map(ToString::to_string);
    let cells = Cells {
        cell: &ours,
        baseline: base.as_ref().zip(base_name.as_deref()),
    };
    if r.confirm_runs == 0 {
        return shrink_written(dir, cells, s, r, options).await;
    }
    let fired = match cells.baseline {
        Some(_) => fires(cells, &s, &r.trial, &r.finding)
            .await
            .map(|(f, _)| vec![f])
            .unwrap_or_default(),
        None => ours.run(&s, &r.trial).await?.findings,
    };
    Ok((r, fired))
}

/// Shrinks and confirms finding `r` of `s`, written in `dir` as it fired (shrinking's share
/// of its run's budget was used up), on `cells` within `options`' budget and shrinking runs,
/// its candidates side by side unless its trial runs alone; then writes it again in `dir`,
/// shrunk and confirmed: it, and what its confirming runs fired.
async fn shrink_written(
    dir: &std::path::Path,
    cells: Cells<'_>,
    s: Subject,
    r: Reported,
    options: &Options,
) -> anyhow::Result<(Reported, Vec<Finding>)> {
    let runs = match r.trial.mode {
        Mode::Admission => options.shrink_runs.max(1) * 4,
        Mode::Behaviour => options.shrink_runs,
    };
    let global = r.trial.global();
    let p = Pending {
        subject: s.clone(),
        finding: r.finding.clone(),
        trial: r.trial.clone(),
        seconds: options.settle,
        first_seen: r.first_seen,
        manager_log: String::new(),
    };
    let plan = Plan {
        shrink_for: options.budget,
        side_by_side: if global { 1 } else { SIDE_BY_SIDE },
        confirm_at_once: !global,
    };
    let done = shrink(cells, p, plan, runs, options.confirm).await;
    let fired: Vec<Finding> = done.hit.iter().map(|(f, _)| f.clone()).collect();
    let (finding, manager_log) = done.hit.unwrap_or((r.finding.clone(), String::new()));
    let again = Reported {
        finding,
        trial: done.trial,
        reproduced: done.reproduced,
        confirm_runs: done.confirm_runs,
        stable: done.confirm_runs > 0 && done.reproduced == done.confirm_runs,
        ..r
    };
    output::write_finding(dir, &s, &again, &options.controller, &manager_log)?;
    Ok((again, fired))
}

/// The oracle names, for help texts.
pub fn oracles() -> [Oracle; 6] {
    [
        Oracle::Realizable,
        Oracle::Convergence,
        Oracle::Safety,
        Oracle::Native,
        Oracle::Release,
        Oracle::Health,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_row_keeps_an_items_fields_and_not_the_list_that_holds_them() {
        let row = Fields::from([
            ("spec.subsets".to_string(), json!([])),
            ("spec.subsets[0].name".to_string(), json!("x")),
            ("spec.subsetsLimit".to_string(), json!(1)),
            ("spec.paused".to_string(), json!(true)),
        ]);
        let kept: Vec<String> = innermost(row).into_keys().collect();
        assert_eq!(
            kept,
            ["spec.paused", "spec.subsetsLimit", "spec.subsets[0].name"]
        );
    }

    /// A job of a [`pool`] test: its number, seconds, whether it runs alone, its places.
    type FakeJob = (usize, u64, bool, usize);

    /// When a [`pool`] test's job ran: its number, start and end (seconds), places, alone.
    type Ran = (usize, f64, f64, usize, bool);

    /// Jobs of a [`pool`] test: each lasts its seconds on tokio's paused clock; after the
    /// `n`-th ends, the width becomes `w` (`widen`).
    struct Fake {
        jobs: std::collections::VecDeque<FakeJob>,
        width: usize,
        widen: Option<(usize, usize)>,
        ended: usize,
    }

    impl Jobs for Fake {
        type Job = FakeJob;
        type Done = usize;
        fn next(&mut self) -> anyhow::Result<Option<FakeJob>> {
            Ok(self.jobs.pop_front())
        }
        fn keep(&mut self, job: FakeJob) -> anyhow::Result<Option<FakeJob>> {
            Ok(Some(job))
        }
        fn places(&self, job: &FakeJob) -> usize {
            job.3
        }
        fn alone(&self, job: &FakeJob) -> bool {
            job.2
        }
        fn width(&self) -> usize {
            self.width
        }
        async fn done(&mut self, _: usize, _: bool) -> anyhow::Result<()> {
            self.ended += 1;
            if let Some((n, w)) = self.widen
                && n == self.ended
            {
                self.width = w;
            }
            Ok(())
        }
    }

    /// Runs `jobs` on a pool `width` wide (changed as `widen` says): when each ran, by number.
    async fn run_fake(jobs: &[FakeJob], width: usize, widen: Option<(usize, usize)>) -> Vec<Ran> {
        let t0 = tokio::time::Instant::now();
        let ran = std::cell::RefCell::new(vec![]);
        let mut fake = Fake {
            jobs: jobs.iter().copied().collect(),
            width,
            widen,
            ended: 0,
        };
        pool(&mut fake, |(n, seconds, alone, places)| {
            let ran = &ran;
            async move {
                let start = t0.elapsed().as_secs_f64();
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                let end = t0.elapsed().as_secs_f64();
                ran.borrow_mut().push((n, start, end, places, alone));
                n
            }
            .boxed_local()
        })
        .await
        .unwrap();
        let mut ran = ran.into_inner();
        ran.sort_by_key(|r| r.0);
        ran
    }

    /// The places taken at second `at` by the jobs of `ran` running then.
    fn taken_at(ran: &[Ran], at: f64) -> usize {
        ran.iter()
            .filter(|r| r.1 <= at && at < r.2)
            .map(|r| r.3)
            .sum()
    }

    #[tokio::test(start_paused = true)]
    async fn a_pool_starts_the_next_job_as_one_ends_without_waiting_for_the_slowest() {
        let mut jobs = vec![(0, 10, false, 1)];
        jobs.extend((1..10).map(|n| (n, 1, false, 1)));
        let ran = run_fake(&jobs, 2, None).await;
        assert_eq!(ran.len(), 10);
        // The slow one holds one place; the other runs the quick ones back to back.
        assert_eq!(ran[0].2, 10.0);
        for (n, r) in ran.iter().enumerate().skip(1) {
            assert_eq!(
                r.1,
                (n - 1) as f64,
                "job {n} starts as the one before it ends"
            );
        }
        assert!((0..10).all(|t| taken_at(&ran, t as f64 + 0.5) <= 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_that_runs_alone_waits_for_an_empty_pool_and_nothing_runs_beside_it() {
        let jobs = [
            (0, 3, false, 1),
            (1, 2, false, 1),
            (2, 1, true, 1),
            (3, 2, false, 1),
            (4, 2, false, 1),
        ];
        let ran = run_fake(&jobs, 3, None).await;
        let alone = ran[2];
        assert_eq!(
            (alone.1, alone.2),
            (3.0, 4.0),
            "it starts once both have ended"
        );
        for r in ran.iter().filter(|r| r.0 != 2) {
            assert!(r.2 <= alone.1 || r.1 >= alone.2, "{r:?} ran beside it");
        }
        // Nothing started while it waited, though a place was free; after it, the pool refills.
        assert_eq!((ran[3].1, ran[4].1), (4.0, 4.0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pool_follows_its_width_and_a_job_waits_for_the_places_it_needs() {
        let jobs = [
            (0, 1, false, 1),
            (1, 1, false, 1),
            (2, 1, false, 1),
            (3, 1, false, 1),
            (4, 1, false, 3),
            (5, 1, false, 1),
        ];
        let ran = run_fake(&jobs, 1, Some((1, 3))).await;
        // One at a time until the first ends, then three.
        assert_eq!(ran[1].1, 1.0);
        assert_eq!((ran[2].1, ran[3].1), (1.0, 1.0));
        // The job of three places waits for all three, and the next for it.
        assert_eq!(ran[4].1, 2.0);
        assert_eq!(
            ran[5].1, 3.0,
            "and the next waits for it: it takes the three places"
        );
        assert!((0..4).all(|t| taken_at(&ran, t as f64 + 0.5) <= 3));
    }

    #[test]
    fn shrinking_starts_only_where_its_confirming_runs_still_fit() {
        let s = Duration::from_secs;
        let plain = |shrink_for| {
            Some(Plan {
                shrink_for,
                side_by_side: 2,
                confirm_at_once: true,
            })
        };
        // The confirming runs, at once, take a trial; candidates start while one more fits.
        assert_eq!(plan(s(100), s(20), 3, 2, false), plain(s(60)));
        assert_eq!(
            plan(s(30), s(20), 3, 2, false),
            plain(s(0)),
            "confirmed, not shrunk"
        );
        assert_eq!(plan(s(10), s(20), 3, 2, false), None, "written as it fired");
        assert_eq!(plan(Duration::ZERO, s(1), 3, 2, false), None);
        // A trial that runs alone: its runs one after another.
        assert_eq!(
            plan(s(100), s(20), 3, 4, true),
            Some(Plan {
                shrink_for: s(20),
                side_by_side: 1,
                confirm_at_once: false,
            })
        );
        assert_eq!(plan(s(50), s(20), 3, 4, true), None);
    }

    #[test]
    fn a_finding_fired_again_is_counted_as_a_repeat_not_shrunk_again() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new(
            crate::toolchain::versions::DEFAULT_KUBERNETES
                .parse()
                .unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
            1,
            Duration::from_secs(100),
            dir.path().to_path_buf(),
        );
        let heard = std::sync::Mutex::new(vec![]);
        let say = |line: String| heard.lock().unwrap().push(line);
        let mut book = Book {
            options: &options,
            started: Instant::now(),
            summary: Summary::default(),
            held: vec![],
            say: &say,
        };
        let s = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let trial = Trial {
            subject: s.name.to_string(),
            mode: Mode::Admission,
            seed: 1,
            index: 0,
            steps: vec![Step::Create { set: Fields::new() }],
        };
        let finding = |key: &str| Finding {
            oracle: Oracle::Native,
            subject: s.name.to_string(),
            key: key.into(),
            observed: "o".into(),
            expected: "e".into(),
        };
        let second = Duration::from_secs(1);
        let new = book.sort(
            &s,
            &trial,
            second,
            vec![finding("admits x on create of a")],
            "",
        );
        assert_eq!(new.len(), 1);
        // Fired again while it waits, at the other verb too: counted, not new.
        let again = vec![
            finding("admits x on create of a"),
            finding("admits x on update of a"),
        ];
        assert!(book.sort(&s, &trial, second, again, "").is_empty());
        let p = new.into_iter().next().unwrap();
        book.write(Shrunk::not(p)).unwrap();
        assert!(book.held.is_empty());
        // And once written.
        let more = vec![finding("admits x on create of a"), finding("admits y")];
        assert_eq!(book.sort(&s, &trial, second, more, "").len(), 1);
        let r = &book.summary.findings[0];
        assert_eq!((r.confirm_runs, r.stable), (0, false));
        let record = &book.summary.pace.findings["01-O4-cloneset"];
        assert_eq!(record.repeats, 3);
        assert!(!record.shrunk && !record.confirmed);
        assert!(r.dir.join("trial.yaml").exists());
        let heard = heard.lock().unwrap().join("\n");
        assert!(heard.contains("harness explore --replay"), "{heard}");
    }

    #[test]
    fn behaviour_trials_run_each_number_once_per_subject_whatever_runs_at_once() {
        for subjects in [1, 2, 3, 16, 17] {
            for parallel in [0, 1, 2, 3, 8, 20] {
                let budget = 200;
                let mut run: Vec<(usize, u64)> = vec![];
                let mut next = 0;
                while run.len() < budget {
                    let batch = schedule(next, parallel, subjects);
                    assert_eq!(batch.len(), parallel.max(1));
                    next += batch.len() as u64;
                    run.extend(batch);
                }
                let mut pairs = run.clone();
                pairs.sort();
                pairs.dedup();
                assert_eq!(
                    pairs.len(),
                    run.len(),
                    "{subjects} subjects, {parallel} at once: a trial ran twice"
                );
                for s in 0..subjects {
                    let numbers: Vec<u64> = run
                        .iter()
                        .filter(|(at, _)| *at == s)
                        .map(|(_, n)| *n)
                        .collect();
                    let expected: Vec<u64> = (0..numbers.len() as u64).collect();
                    assert_eq!(
                        numbers, expected,
                        "{subjects} subjects, {parallel} at once: subject {s}"
                    );
                }
                // The budget is shared evenly: no subject more than one trial ahead.
                let counts: Vec<usize> = (0..subjects)
                    .map(|s| run.iter().filter(|(at, _)| *at == s).count())
                    .collect();
                let (lo, hi) = (counts.iter().min(), counts.iter().max());
                assert!(hi.unwrap() - lo.unwrap() <= 1, "{counts:?}");
            }
        }
        assert!(schedule(0, 2, 0).is_empty());
    }

    #[test]
    fn creates_reach_fields_from_across_the_schema_in_an_order_drawn_from_the_seed() {
        let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let schema: Vec<String> = (0..20).map(|f| format!("spec.f{f:02}")).collect();
        // What admission admitted, in schema order: a few values of each field, and absent.
        let admitted: Vec<(String, Value)> = schema
            .iter()
            .flat_map(|f| [json!(0), json!(1), json!(true), Value::Null].map(|v| (f.clone(), v)))
            .collect();
        let budget = 8;
        let in_schema_order: Vec<&str> = admitted
            .iter()
            .filter(|(_, v)| !v.is_null())
            .take(budget)
            .map(|(k, _)| k.as_str())
            .collect();
        let tried = |seed: u64| -> Vec<Fields> {
            let (s, creates, updates) = prepare(cloneset.clone(), admitted.clone(), seed);
            let m = Material {
                subject: &s.name,
                creates: &creates,
                updates: &updates,
                ops: &[],
                perturbations: &[],
            };
            (0..budget as u64)
                .map(|i| match &trial::behaviour(&m, seed, i).steps[0] {
                    Step::Create { set } => set.clone(),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let a = tried(7);
        let fields: Vec<&str> = a
            .iter()
            .flat_map(|set| set.keys().map(String::as_str))
            .collect();
        assert_ne!(fields, in_schema_order);
        let mut distinct = fields.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), budget, "a field each: {fields:?}");
        assert!(
            fields
                .iter()
                .any(|f| !schema[..budget].contains(&f.to_string())),
            "past the schema's first fields: {fields:?}"
        );
        assert_eq!(tried(7), a, "the same seed, the same creates");
        assert_ne!(tried(8), a, "another seed, other creates");
        // Every admitted create is kept, each once.
        let (_, mut creates, _) = prepare(cloneset.clone(), admitted.clone(), 7);
        let mut all: Vec<Fields> = admitted
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| Fields::from([(k.clone(), v.clone())]))
            .collect();
        let key = |f: &Fields| serde_json::to_string(f).unwrap();
        creates.sort_by_key(key);
        all.sort_by_key(key);
        assert_eq!(creates, all);
    }

    #[test]
    fn a_kind_selects_its_subjects_and_a_policy_every_target() {
        let names = |k: &str| -> Vec<String> {
            select(&[k.to_string()])
                .unwrap()
                .into_iter()
                .map(|s| s.name)
                .collect()
        };
        assert_eq!(names("cloneset"), ["CloneSet"]);
        assert_eq!(names("AdvancedCronJob"), ["AdvancedCronJob"]);
        // A policy's name selects it over every target, each once.
        let all = subject::subjects();
        let spreads = names("WorkloadSpread");
        let over: Vec<&str> = all
            .iter()
            .filter(|s| s.family == "WorkloadSpread")
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(spreads, over);
        for t in all
            .iter()
            .filter(|s| s.target.is_none() && s.makes == subject::Makes::Pods)
        {
            let name = format!("WorkloadSpread.{}", t.name);
            assert!(spreads.contains(&name), "{name} in {spreads:?}");
        }
        for target in ["Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"] {
            assert!(spreads.contains(&format!("WorkloadSpread.{target}")));
        }
        assert_eq!(
            names("WorkloadSpread.CloneSet"),
            ["WorkloadSpread.CloneSet"]
        );
        // A name only a cell tells of selects its kind's known subjects (their gates); a
        // name of no kind is an error.
        assert_eq!(names("CloneSet@v1beta1"), ["CloneSet"]);
        assert!(names("UnitedDeployment.cloneSetTemplate").is_empty());
        assert!(select(&["Nothing".to_string()]).is_err());
        assert!(select(&["Deployment".to_string()]).is_err());
    }

    #[test]
    fn a_kind_that_copies_draws_its_own_operations_and_perturbations_and_gets_its_gate() {
        let rd = select(&["ResourceDistribution".to_string()])
            .unwrap()
            .remove(0);
        let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let all: Vec<Perturbation> = trial::Class::ALL
            .into_iter()
            .flat_map(trial::Class::perturbations)
            .collect();
        let mine: Vec<Perturbation> = all
            .iter()
            .copied()
            .filter(|p| rd.perturbed_by(*p))
            .collect();
        assert!(mine.contains(&Perturbation::DeleteCopy));
        assert!(mine.contains(&Perturbation::RestartManager));
        assert!(
            !mine
                .iter()
                .any(|p| matches!(p, Perturbation::DeletePod { .. } | Perturbation::CordonNode))
        );
        assert!(!cloneset.perturbed_by(Perturbation::DeleteCopy));
        let ops = rd.ops();
        let creates = vec![Fields::new()];
        let m = Material {
            subject: &rd.name,
            creates: &creates,
            updates: &[],
            ops: &ops,
            perturbations: &mine,
        };
        for i in 0..30 {
            for step in &trial::behaviour(&m, 5, i).steps[1..] {
                match step {
                    Step::Operate { op } => assert!(ops.contains(op), "{op:?}"),
                    Step::Perturb { perturbation } => {
                        assert!(rd.perturbed_by(*perturbation), "{perturbation:?}")
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        // Its gate is turned on, unless turned off on purpose.
        let options = Options {
            kubernetes: crate::toolchain::versions::DEFAULT_KUBERNETES
                .parse()
                .unwrap(),
            controller: "openkruise@v1.9.0".parse().unwrap(),
            kinds: vec![],
            seed: 1,
            budget: Duration::from_secs(1),
            modes: vec![],
            perturbations: vec![],
            parallel: 1,
            settle: Duration::from_secs(1),
            confirm: 1,
            shrink_runs: 1,
            shrink_share: SHRINK_SHARE,
            dir: PathBuf::new(),
            baseline: None,
            gates: Gates::default(),
        };
        let on = with_gates_of(&options, &[rd.clone(), cloneset]);
        assert_eq!(
            on.gates.controller.get("ResourceDistributionGate"),
            Some(&true)
        );
        assert_eq!(on.gates.controller.len(), 1);
        let mut off = options.clone();
        off.gates
            .controller
            .insert("ResourceDistributionGate".into(), false);
        let kept = with_gates_of(&off, &[rd]);
        assert_eq!(
            kept.gates.controller.get("ResourceDistributionGate"),
            Some(&false)
        );
    }

    #[test]
    fn a_templates_singles_come_from_the_cells_openapi_bounded_with_list_items_made_whole() {
        let doc = openapi::Doc::new(&[serde_json::from_str(include_str!(
            "../../tests/fixtures/openapi-core.json"
        ))
        .unwrap()]);
        let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let crd = json!({"spec": {"versions": [{"name": "v1alpha1", "served": true,
            "schema": {"openAPIV3Schema": {"properties": {"spec": {"type": "object",
                "properties": {"template": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
        let all = singles(&cloneset, &crd, &doc, 1);
        let fields: Vec<&String> = all.iter().flat_map(|f| f.keys()).collect();
        assert!(all.len() <= TEMPLATE_SINGLES, "{}", all.len());
        assert!(
            fields.iter().all(|k| k.starts_with("spec.template.")),
            "{fields:?}"
        );
        // Every leaf is tried with its first value when the leaves fit the bound.
        let leaves = schema::template_leaves(&doc, "spec.template", &cloneset.seed.make("x"));
        assert!(leaves.len() < TEMPLATE_SINGLES);
        for l in &leaves {
            assert!(fields.contains(&&l.path), "{} is tried", l.path);
        }
        // A field of an item the seed lacks: the list with a minimal item holding it, and it.
        let tol = all
            .iter()
            .find(|f| f.contains_key("spec.template.spec.tolerations[0].effect"))
            .expect("a toleration's effect is tried");
        let v = &tol["spec.template.spec.tolerations[0].effect"];
        assert_eq!(tol["spec.template.spec.tolerations"][0]["effect"], *v);
        assert_eq!(
            outermost(tol.iter().map(|(k, v)| (k.as_str(), v)).collect()).len(),
            1
        );
        // The seed lacks the field: absent is the seed itself, not a trial.
        assert!(
            !all.iter()
                .any(|f| f.get("spec.template.spec.priorityClassName") == Some(&Value::Null))
        );
        // Another seed draws other values, as many.
        let other = singles(&cloneset, &crd, &doc, 2);
        assert_eq!(other.len(), all.len());
        // A policy meets its target's template, bounded apart.
        let ws = select(&["WorkloadSpread.CloneSet".to_string()])
            .unwrap()
            .remove(0);
        let target = singles(&ws, &json!({}), &doc, 1);
        assert!(!target.is_empty() && target.len() <= TARGET_SINGLES);
        assert!(
            target
                .iter()
                .flat_map(|f| f.keys())
                .all(|k| k.starts_with(subject::TARGET))
        );
    }

    #[test]
    fn a_string_without_an_enum_takes_the_enum_of_its_twins_field() {
        let doc = openapi::Doc::new(&[json!({"components": {"schemas": {
            "io.k8s.api.apps.v1.Deployment": {
                "x-kubernetes-group-version-kind": [
                    {"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {"spec": {"properties": {"strategy": {"properties": {
                    "type": {"type": "string", "enum": ["Recreate", "RollingUpdate"]}}}}}}}}}})]);
        let cloneset = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let mut leaves = vec![schema::Leaf {
            path: "spec.strategy.type".into(),
            shape: schema::Shape::String(vec!["Recreate".into(), "Other".into()]),
            required: false,
        }];
        twin_words(&cloneset, &doc, &mut leaves);
        assert_eq!(
            leaves[0].shape,
            schema::Shape::String(vec![
                "Recreate".into(),
                "RollingUpdate".into(),
                "Other".into()
            ])
        );
    }

    #[test]
    fn a_copying_kinds_singles_come_from_its_schema_with_the_trials_namespaces_selected() {
        let rd = select(&["ResourceDistribution".to_string()])
            .unwrap()
            .remove(0);
        let list = json!({"type": "object", "properties": {"list": {"type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}});
        let crd = json!({"spec": {"versions": [{"name": "v1alpha1", "served": true,
            "schema": {"openAPIV3Schema": {"properties": {"spec": {"type": "object",
                "required": ["resource", "targets"], "properties": {
                "resource": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true},
                "targets": {"type": "object", "properties": {
                    "allNamespaces": {"type": "boolean"},
                    "includedNamespaces": list.clone(),
                    "excludedNamespaces": list,
                    "namespaceLabelSelector": {"type": "object", "properties": {
                        "matchLabels": {"type": "object"},
                        "matchExpressions": {"type": "array"}}}}}}}}}}}]}});
        let singles = singles(&rd, &crd, &openapi::Doc::default(), 1);
        let of = |path: &str| -> Vec<&Value> {
            singles
                .iter()
                .filter(|f| f.len() == 1 && f.contains_key(path))
                .filter_map(|f| f.get(path))
                .collect()
        };
        assert_eq!(
            of("spec.resource").len(),
            subject::embedded_values().len(),
            "the resource is tried as each object that holds data, and never absent"
        );
        assert_eq!(
            of("spec.targets.namespaceLabelSelector")[0],
            &json!({"matchLabels": {subject::TRIAL_LABEL: subject::NAMESPACE}})
        );
        assert!(!of("spec.targets.includedNamespaces.list[0].name").is_empty());
        assert!(!of("spec.targets.excludedNamespaces.list[0].name").is_empty());
        assert_eq!(of("spec.targets.allNamespaces").len(), 3);
        // Its metadata is the spec's to set, as a nested template's.
        assert_eq!(
            of("spec.resource.metadata.labels"),
            [&json!({}), &json!({schema::MAP_KEY: "v"}), &Value::Null]
        );
        assert_eq!(of("spec.resource.metadata.annotations").len(), 3);
        assert!(
            singles
                .iter()
                .flat_map(|f| f.keys())
                .all(|k| !k.contains("template"))
        );
    }
}
