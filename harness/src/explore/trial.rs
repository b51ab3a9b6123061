//! Trials as data. Start with [`Trial`]: a subject and an ordered list of [`Step`]s, written
//! and read as YAML, replayed exactly. [`Rng`] is the seeded generator every choice comes
//! from, [`covering_rows`] the pairwise covering array over fields, and [`behaviour`] makes
//! one behaviour trial from a seed and an index.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Fields to set: path → value (`null` removes the field).
pub type Fields = BTreeMap<String, Value>;

/// What a trial checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Admission only: each create or update is sent as a dry run, to the subject and to its
    /// twin; nothing is created but the object an update starts from.
    Admission,
    /// The object is created and driven through the steps; the controller converges.
    Behaviour,
}

/// A seeded sequence of steps on one subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The subject's name ([`super::subject::Subject::name`]).
    pub subject: String,
    /// What it checks.
    pub mode: Mode,
    /// The run's seed it came from.
    pub seed: u64,
    /// Its number in that seed's stream.
    pub index: u64,
    /// Its steps, in order; the first is a [`Step::Create`].
    pub steps: Vec<Step>,
}

/// One step of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum Step {
    /// Create the subject's seed object with these fields set.
    Create {
        /// The fields.
        set: Fields,
    },
    /// Change these fields of the object (a merge patch).
    Update {
        /// The fields.
        set: Fields,
    },
    /// A semantic operation.
    Operate {
        /// Which.
        op: Op,
    },
    /// A perturbation of the environment while the controller converges.
    Perturb {
        /// Which.
        perturbation: Perturbation,
    },
    /// Wait until the controller has observed the object's last change and its pods (or
    /// copies) have stopped changing for a moment, bounded by the settle bound: the next step
    /// then acts on what the controller did in answer to the ones before, not on a state
    /// half-way there.
    Settle,
}

/// The semantic operations: those every workload kind shares, then those of a kind that
/// copies a resource into namespaces ([`super::subject::Subject::ops`] says which apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Change the image of the first container.
    Rollout,
    /// Change the template so that pods must be recreated (a new environment variable, which
    /// no in-place update carries).
    Recreate,
    /// One replica more.
    ScaleUp,
    /// One replica fewer.
    ScaleDown,
    /// Set the pod template's labels and the selector to a new label pair.
    ChangeSelector,
    /// Change what is copied: a key added to the data of the object's resource.
    Rewrite,
    /// Change only the metadata of what is copied: a label and an annotation added to the
    /// object's resource, its data as it was (each part of a copy the copy oracle judges has
    /// an operation that changes it alone).
    Retag,
    /// Make another namespace of the trial (labelled as the trial's are).
    AddNamespace,
    /// Take the trial's label off its namespace, or put it back.
    Relabel,
    /// Of a policy that declares containers to put into pods: change the image of the first
    /// one, its target as it was (a [`Op::Rollout`] of a policy's trial changes both), so that
    /// the pods it wrote into are to be updated where they are.
    RolloutDeclared,
    /// Of such a policy: one more environment variable in the first container it declares,
    /// its target as it was (a change that reaches only the pods made later).
    RecreateDeclared,
}

impl Op {
    /// What it does in a policy's trial: the operation on its target (or the subject itself,
    /// for a workload), and the one on the containers the policy declares, as a template's
    /// are changed ([`Op::Rollout`] or [`Op::Recreate`]). A rollout or a recreate changes
    /// both; a `…Declared` one only what the policy declares; any other only the workload.
    pub fn parts(self) -> (Option<Op>, Option<Op>) {
        match self {
            Op::Rollout | Op::Recreate => (Some(self), Some(self)),
            Op::RolloutDeclared => (None, Some(Op::Rollout)),
            Op::RecreateDeclared => (None, Some(Op::Recreate)),
            _ => (Some(self), None),
        }
    }
}

/// Which pod a perturbation picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Which {
    /// One still at an older template.
    Old,
    /// One at the newest template.
    New,
    /// The one made last: what the controller just made (a replacement, a surge).
    Newest,
    /// Any.
    Any,
}

/// The environment perturbations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Perturbation {
    /// Delete a pod of the subject.
    DeletePod {
        /// Which pod.
        which: Which,
    },
    /// Evict a pod of the subject (the eviction API: budgets apply).
    EvictPod {
        /// Which pod.
        which: Which,
    },
    /// Mark a node a pod of the subject runs on unschedulable (undone at the trial's end).
    CordonNode,
    /// Delete a copy the subject made (of a kind that copies a resource into namespaces).
    DeleteCopy,
    /// Kill the controller manager right after the step before it (its last write) and start
    /// it again, as a crash and its Deployment's restart would (local clusters).
    RestartManager,
    /// Hold the manager's watch events of `of` for `seconds`, then deliver them in order: its
    /// view of them is that old meanwhile (local clusters, through the apiserver proxy).
    HoldEvents {
        /// Whose events.
        of: Watched,
        /// For how long.
        seconds: u64,
    },
    /// Drop the manager's watch events of `of` for `seconds` while its watches stay open, then
    /// end its watches of them: it watches again from the last event it saw (or lists again),
    /// so it learns late what it missed, as after a watch that went silent and broke.
    DropEvents {
        /// Whose events.
        of: Watched,
        /// For how long.
        seconds: u64,
    },
    /// End the manager's open watches of `of` at once: it watches again.
    CloseWatches {
        /// Whose events.
        of: Watched,
    },
    /// Silence the kubelet of a node a pod of the subject runs on, until the trial's end: the
    /// node controller marks the node NotReady and its pods not ready, as when a node loses
    /// power or its network (local clusters' kwok nodes; the step ends once it is NotReady).
    SilenceNode,
    /// Crash the apiserver and start it again (local clusters): every client's watches end
    /// and its requests fail until the new one serves (the step ends once it serves).
    RestartApiserver,
}

/// Whose watch events a stale-view perturbation acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Watched {
    /// The pods'.
    Pods,
    /// The subject's own kind's (for a policy, the policy's).
    Own,
}

impl Perturbation {
    /// Whether it acts on the whole controller (every trial running at once would see it),
    /// not on the trial's own objects: such a trial runs alone.
    pub fn global(self) -> bool {
        self.class().global()
    }

    /// Its class (`--perturbations`).
    pub fn class(self) -> Class {
        match self {
            Perturbation::DeletePod { .. }
            | Perturbation::EvictPod { .. }
            | Perturbation::DeleteCopy => Class::Pods,
            Perturbation::CordonNode => Class::Nodes,
            Perturbation::RestartManager => Class::Manager,
            Perturbation::HoldEvents { .. }
            | Perturbation::DropEvents { .. }
            | Perturbation::CloseWatches { .. } => Class::Watches,
            Perturbation::SilenceNode => Class::NodeDown,
            Perturbation::RestartApiserver => Class::Apiserver,
        }
    }
}

/// The classes of environment perturbation (`--perturbations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// What the subject made taken away: a pod deleted (at the old template, at the new
    /// one) or evicted; a copy deleted.
    Pods,
    /// A node cordoned.
    Nodes,
    /// The manager killed and started again.
    Manager,
    /// The manager's watch events held, dropped or its watches ended (through the apiserver
    /// proxy).
    Watches,
    /// A node gone NotReady: its kubelet silent until the trial's end.
    NodeDown,
    /// The apiserver crashed and started again.
    Apiserver,
}

impl Class {
    /// Every class, in order.
    pub const ALL: [Class; 6] = [
        Class::Pods,
        Class::Nodes,
        Class::Manager,
        Class::Watches,
        Class::NodeDown,
        Class::Apiserver,
    ];
    /// The classes a run draws from unless told: those that act on the trial's own objects
    /// (the others act on the whole controller, so their trials run one at a time).
    pub const DEFAULT: [Class; 2] = [Class::Pods, Class::Nodes];

    /// Whether its perturbations act on the whole controller or the whole cluster (its trials
    /// run alone).
    pub fn global(self) -> bool {
        self >= Class::Manager
    }

    /// Whether its perturbations need the manager to talk through the apiserver proxy (which
    /// tells its writes and holds or drops its watch events).
    pub fn needs_proxy(self) -> bool {
        matches!(self, Class::Manager | Class::Watches)
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Class::Pods => "pods",
            Class::Nodes => "nodes",
            Class::Manager => "manager",
            Class::Watches => "watches",
            Class::NodeDown => "node-down",
            Class::Apiserver => "apiserver",
        }
    }

    /// Reads `--perturbations`: a comma-separated list of class names, `all`, `none` (or
    /// `false`), or `default` (or `true`, [`Class::DEFAULT`]).
    pub fn parse_list(text: &str) -> Result<Vec<Class>, String> {
        let mut out = vec![];
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "all" => out.extend(Class::ALL),
                "none" | "false" => {}
                "default" | "true" => out.extend(Class::DEFAULT),
                w => match Class::ALL.iter().find(|c| c.name() == w) {
                    Some(c) => out.push(*c),
                    None => {
                        return Err(format!(
                            "unknown perturbation class `{w}`: name some of {}, or all, none, default",
                            Class::ALL.map(Class::name).join(", ")
                        ));
                    }
                },
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The perturbations of the class a trial may draw.
    pub fn perturbations(self) -> Vec<Perturbation> {
        match self {
            Class::Pods => vec![
                Perturbation::DeletePod { which: Which::Old },
                Perturbation::DeletePod { which: Which::New },
                Perturbation::DeletePod {
                    which: Which::Newest,
                },
                Perturbation::EvictPod { which: Which::Any },
                Perturbation::DeleteCopy,
            ],
            Class::Nodes => vec![Perturbation::CordonNode],
            Class::Manager => vec![Perturbation::RestartManager],
            Class::Watches => [Watched::Pods, Watched::Own]
                .into_iter()
                .flat_map(|of| {
                    [
                        Perturbation::HoldEvents { of, seconds: 10 },
                        Perturbation::DropEvents { of, seconds: 10 },
                        Perturbation::CloseWatches { of },
                    ]
                })
                .collect(),
            Class::NodeDown => vec![Perturbation::SilenceNode],
            Class::Apiserver => vec![Perturbation::RestartApiserver],
        }
    }
}

impl Trial {
    /// Whether a step of it acts on the whole controller ([`Perturbation::global`]).
    pub fn global(&self) -> bool {
        self.perturbations().any(Perturbation::global)
    }

    /// Whether a step of it needs the manager behind the apiserver proxy
    /// ([`Class::needs_proxy`]).
    pub fn needs_proxy(&self) -> bool {
        self.perturbations().any(|p| p.class().needs_proxy())
    }

    /// Its perturbations, in step order.
    pub fn perturbations(&self) -> impl Iterator<Item = Perturbation> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::Perturb { perturbation } => Some(*perturbation),
            _ => None,
        })
    }

    /// The fields the trial sets, in step order.
    pub fn fields(&self) -> Vec<(&str, &Value)> {
        self.steps
            .iter()
            .flat_map(|s| match s {
                Step::Create { set } | Step::Update { set } => {
                    set.iter().map(|(k, v)| (k.as_str(), v)).collect()
                }
                _ => vec![],
            })
            .collect()
    }

    /// Parses a trial from YAML.
    pub fn from_yaml(text: &str) -> Result<Self, String> {
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }

    /// The trial as YAML.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("a trial serializes")
    }
}

/// A small seeded generator (SplitMix64): the same seed gives the same sequence on every
/// platform and with every dependency version, which is what replay needs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, stream `stream` (a trial's index): streams of one seed differ.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next_u64();
        r
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// `items` shuffled (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// A pairwise covering array over `fields` (each with its values): rows that set every field,
/// such that every pair of values of two fields appears together in some row. Built greedily
/// (each row takes, field by field in a shuffled order, the value covering the most pairs not
/// yet covered; ties broken by `rng`), so the same `rng` gives the same rows.
pub fn covering_rows(fields: &[(String, Vec<Value>)], rng: &mut Rng) -> Vec<Fields> {
    let fields: Vec<&(String, Vec<Value>)> = fields.iter().filter(|f| !f.1.is_empty()).collect();
    let n = fields.len();
    // uncovered[(a, b)] for a < b: the value pairs (index in a, index in b) not yet covered.
    let mut uncovered: BTreeMap<(usize, usize), Vec<(usize, usize)>> = BTreeMap::new();
    for a in 0..n {
        for b in a + 1..n {
            let pairs = (0..fields[a].1.len())
                .flat_map(|i| (0..fields[b].1.len()).map(move |j| (i, j)))
                .collect();
            uncovered.insert((a, b), pairs);
        }
    }
    let mut rows = vec![];
    if n == 1 {
        for v in &fields[0].1 {
            rows.push(Fields::from([(fields[0].0.clone(), v.clone())]));
        }
        return rows;
    }
    while uncovered.values().any(|p| !p.is_empty()) {
        let mut order: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut order);
        // Start from one uncovered pair, so that every row covers at least one.
        let (&(a, b), pairs) = uncovered
            .iter()
            .find(|(_, p)| !p.is_empty())
            .expect("an uncovered pair");
        let (i, j) = pairs[rng.below(pairs.len())];
        let mut chosen: Vec<Option<usize>> = vec![None; n];
        chosen[a] = Some(i);
        chosen[b] = Some(j);
        for &f in &order {
            if chosen[f].is_some() {
                continue;
            }
            let gain = |v: usize| {
                chosen
                    .iter()
                    .enumerate()
                    .filter_map(|(g, c)| c.map(|c| (g, c)))
                    .filter(|(g, c)| {
                        let (key, pair) = if *g < f {
                            ((*g, f), (*c, v))
                        } else {
                            ((f, *g), (v, *c))
                        };
                        uncovered[&key].contains(&pair)
                    })
                    .count()
            };
            let best = (0..fields[f].1.len()).map(gain).max().unwrap_or(0);
            let ties: Vec<usize> = (0..fields[f].1.len())
                .filter(|v| gain(*v) == best)
                .collect();
            chosen[f] = Some(*rng.pick(&ties));
        }
        let chosen: Vec<usize> = chosen.into_iter().map(|c| c.unwrap_or(0)).collect();
        for a in 0..n {
            for b in a + 1..n {
                let covered = (chosen[a], chosen[b]);
                if let Some(p) = uncovered.get_mut(&(a, b)) {
                    p.retain(|x| *x != covered);
                }
            }
        }
        rows.push(
            fields
                .iter()
                .zip(&chosen)
                .map(|(f, v)| (f.0.clone(), f.1[*v].clone()))
                .collect(),
        );
    }
    rows
}

/// What a behaviour trial is made from.
#[derive(Debug, Clone)]
pub struct Material<'a> {
    /// The subject's name.
    pub subject: &'a str,
    /// Field sets a trial may create the object with (in [`super::explore`], each a single
    /// admitted value, in the order [`create_order`] gives them), tried in order before
    /// random ones.
    pub creates: &'a [Fields],
    /// Single admitted field values an update step may set.
    pub updates: &'a [(String, Value)],
    /// How many of `updates`, the first, set the subject's own fields (not its pod
    /// template's nor its target's), in the order of [`own_order`]: every trial sets one of
    /// them where `walk` says, and a drawn update draws from them or from the rest, each half
    /// the time, so that a template's hundreds of leaves, tried on every kind, do not crowd
    /// out the fields only this kind has.
    pub own_updates: usize,
    /// How many of the own updates, the first, act on what the controller made from the
    /// object rather than on the object alone (a workload's claim templates, which its
    /// claims are made from as its pods are): a trial walking one of them settles before it
    /// ([`behaviour`]), so that the change meets what was made.
    pub settled_first: usize,
    /// Where in the own updates this subject's trials walk.
    pub walk: Walk,
    /// The semantic operations that apply to the subject.
    pub ops: &'a [Op],
    /// The perturbations that apply to the subject and the provider can do.
    pub perturbations: &'a [Perturbation],
}

/// Where a subject's trials take their walked own update ([`walked`]): the subject is number
/// `at` of the `of` subjects of its kind (a policy over each target, a union's members, the
/// served versions), and its trial `i` takes own update `at + i * of` (wrapping). The kind's
/// subjects thus share one walk through the order of [`own_order`] without taking the same
/// step twice, until it wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// The subject's number among its kind's.
    pub at: u64,
    /// How many subjects its kind has.
    pub of: u64,
}

impl Walk {
    /// A subject alone in its kind.
    pub const ALONE: Walk = Walk { at: 0, of: 1 };
}

/// A subject's own updates in the order its trials walk them: in rounds, one value of every
/// field before a second of any, the fields of a round and the values of a field each in an
/// order drawn from `seed` and the `kind`'s name by a hash of the path (and value), not of
/// the position, so that subjects of one kind whose own fields mostly agree walk them in the
/// same order ([`Walk`]), and the same seed gives the same order. A value that is an object
/// counts, in the rounds, as the fields it sets ([`fields_set`]): a free-form object's values
/// (a subset's patch, each setting another leaf of a pod) are as many fields, not as many
/// rounds.
pub fn own_order(own: Vec<(String, Value)>, seed: u64, kind: &str) -> Vec<(String, Value)> {
    /// An update with the key that orders it.
    type Keyed = (u64, (String, Value));
    let key = |text: &str| stream_of(&format!("{seed}/{kind}/{text}"));
    let mut by_field: BTreeMap<String, Vec<Keyed>> = BTreeMap::new();
    for (k, v) in own {
        let value_key = key(&format!("{k}={v}"));
        by_field
            .entry(fields_set(&k, &v))
            .or_default()
            .push((value_key, (k, v)));
    }
    let mut fields: Vec<(u64, Vec<Keyed>)> = by_field
        .into_iter()
        .map(|(k, mut values)| {
            values.sort_by_key(|(vk, _)| *vk);
            (key(&k), values)
        })
        .collect();
    fields.sort_by_key(|(fk, _)| *fk);
    let rounds = fields.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for round in 0..rounds {
        for (_, values) in &fields {
            if let Some((_, kv)) = values.get(round) {
                out.push(kv.clone());
            }
        }
    }
    out
}

/// The field an update setting `k` to `v` counts as in [`own_order`]'s rounds: `k`, or for a
/// value that is an object with members, `k` with the paths of the leaves it sets.
fn fields_set(k: &str, v: &Value) -> String {
    fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (name, x) in m {
                    leaves(x, format!("{at}.{name}"), out);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, x) in a.iter().enumerate() {
                    leaves(x, format!("{at}[{i}]"), out);
                }
            }
            _ => out.push(at),
        }
    }
    if v.as_object().is_none_or(|m| m.is_empty()) {
        return k.to_string();
    }
    let mut out = vec![];
    leaves(v, String::new(), &mut out);
    format!("{k}:{}", out.join(","))
}

/// The own update behaviour trial `index` of `m` sets ([`Walk`]); none without own updates.
pub fn walked(m: &Material<'_>, index: u64) -> Option<(String, Value)> {
    walked_at(m, index).map(|at| m.updates[at].clone())
}

/// Where among `m`'s updates the own update of trial `index` is ([`walked`]).
fn walked_at(m: &Material<'_>, index: u64) -> Option<usize> {
    let own = m.own_updates.min(m.updates.len());
    if own == 0 {
        return None;
    }
    let at = m.walk.at.wrapping_add(index.wrapping_mul(m.walk.of.max(1))) % own as u64;
    Some(at as usize)
}

/// `creates` in the order behaviour trials of `subject` take them, drawn from `seed` (and the
/// subject's name, so that subjects of one run differ): a seeded shuffle in rounds, one field
/// set of each field (its paths) before a second of any, the sets of a field and the fields of
/// a round each in a shuffled order. The first trials thus create with fields from across
/// the schema, not with its alphabetical start; the same seed gives the same order.
pub fn create_order(creates: &[Fields], seed: u64, subject: &str) -> Vec<Fields> {
    let mut rng = Rng::new(seed, stream_of(subject));
    let mut by_field: BTreeMap<Vec<&str>, Vec<&Fields>> = BTreeMap::new();
    for c in creates {
        by_field
            .entry(c.keys().map(String::as_str).collect())
            .or_default()
            .push(c);
    }
    let mut fields: Vec<Vec<&Fields>> = by_field.into_values().collect();
    for sets in &mut fields {
        rng.shuffle(sets);
    }
    let rounds = fields.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::with_capacity(creates.len());
    for round in 0..rounds {
        let mut this: Vec<&Fields> = fields
            .iter()
            .filter_map(|s| s.get(round).copied())
            .collect();
        rng.shuffle(&mut this);
        out.extend(this.into_iter().cloned());
    }
    out
}

/// The create of behaviour trial `index`: two trials of every three take the field sets of
/// `creates` in order (each once: trial `3k + j`, `j` < 2, takes set `2k + j`), the third a
/// combination drawn at random ([`combination`]); past the sets, every trial a combination.
pub fn create_of(creates: &[Fields], index: u64, rng: &mut Rng) -> Fields {
    let (round, at) = (index / 3, index % 3);
    if at < 2
        && let Some(c) = creates.get((round * 2 + at) as usize)
    {
        return c.clone();
    }
    combination(creates, rng)
}

/// Two or three of `creates` drawn at random and set together, each of fields apart from the
/// others' (none the same as, inside or around another's): fields that meet at create, as a
/// covering row's do. Fewer when the draws find no set apart from those taken.
pub fn combination(creates: &[Fields], rng: &mut Rng) -> Fields {
    let mut out = Fields::new();
    if creates.is_empty() {
        return out;
    }
    let want = 2 + rng.below(2);
    let mut taken = 0;
    for _ in 0..want * 4 {
        let c = rng.pick(creates);
        if c.keys().all(|k| out.keys().all(|o| !meets(k, o))) {
            out.extend(c.iter().map(|(k, v)| (k.clone(), v.clone())));
            taken += 1;
            if taken == want {
                break;
            }
        }
    }
    out
}

/// Whether paths `a` and `b` are the same field or one is inside the other.
pub fn meets(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.strip_prefix(short)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// A stream number for `name` (FNV-1a): the same on every platform and release, as replay
/// needs.
pub(super) fn stream_of(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// Trial `t`, which fired a new finding, carried to `to`, another subject of its kind (a
/// policy over another target kind, the kind at another version or with claim templates):
/// the same steps on `to`, a create's fields that `to` does not offer (`offers`: the paths
/// its behaviour trials may set) left out. None when an update sets a field `to` does not
/// offer or the create keeps none of the fields it set (the sequence would not be the same),
/// an operation or a perturbation does not apply to `to` (`ops`, `perturbations`), or `t` is
/// `to`'s already.
pub fn carried(
    t: &Trial,
    to: &str,
    offers: &std::collections::BTreeSet<String>,
    ops: &[Op],
    perturbations: &[Perturbation],
) -> Option<Trial> {
    if t.subject == to {
        return None;
    }
    let mut steps = Vec::with_capacity(t.steps.len());
    for step in &t.steps {
        steps.push(match step {
            Step::Create { set } => {
                let kept: Fields = set
                    .iter()
                    .filter(|(k, _)| offers.contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if kept.is_empty() && !set.is_empty() {
                    return None;
                }
                Step::Create { set: kept }
            }
            Step::Update { set } if set.keys().all(|k| offers.contains(k)) => step.clone(),
            Step::Operate { op } if ops.contains(op) => step.clone(),
            Step::Perturb { perturbation } if perturbations.contains(perturbation) => step.clone(),
            Step::Settle => Step::Settle,
            _ => return None,
        });
    }
    Some(Trial {
        subject: to.to_string(),
        steps,
        ..t.clone()
    })
}

/// Behaviour trial `index` of `seed`: the object created as [`create_of`] says, then two to
/// four steps: the subject's walked own update ([`walked`]), if it has own fields, at a drawn
/// place among the others, drawn from updates, semantic operations, perturbations and
/// settles (a settle neither last, where the trial's end settles anyway, nor right after
/// another). Half the time, where the subject rolls out ([`Op::Rollout`] applies), a rollout
/// follows the walked update: most of what a workload's own fields say (a strategy, its
/// bounds, what pods are made with beside the template) acts only when pods are replaced or
/// updated, and a rollout drawn by chance after the one update that set it is rare. A walked
/// update among the first [`Material::settled_first`] follows a settle (one is put before it
/// where the step before is not one): what it changes acts on what the controller made.
pub fn behaviour(m: &Material<'_>, seed: u64, index: u64) -> Trial {
    // The subject's name in the stream: subjects of one kind (a policy over each target)
    // with much the same material draw different steps at the same number.
    let mut rng = Rng::new(seed, index ^ stream_of(m.subject));
    let create = create_of(m.creates, index, &mut rng);
    let mut steps = vec![Step::Create { set: create }];
    let walk = walked_at(m, index);
    let count = usize::from(walk.is_none()) + 1 + rng.below(3);
    for i in 0..count {
        let settles = i + 1 < count && steps.last() != Some(&Step::Settle);
        let step = match rng.below(4) {
            0 if !m.updates.is_empty() => {
                let (own, rest) = m.updates.split_at(m.own_updates.min(m.updates.len()));
                let part = match (own.is_empty(), rest.is_empty()) {
                    (true, _) => rest,
                    (_, true) => own,
                    _ if rng.below(2) == 0 => own,
                    _ => rest,
                };
                let (k, v) = rng.pick(part).clone();
                Step::Update {
                    set: Fields::from([(k, v)]),
                }
            }
            2 if !m.perturbations.is_empty() => Step::Perturb {
                perturbation: *rng.pick(m.perturbations),
            },
            3 if settles => Step::Settle,
            _ if !m.ops.is_empty() => Step::Operate {
                op: *rng.pick(m.ops),
            },
            _ => continue,
        };
        steps.push(step);
    }
    if let Some(w) = walk {
        let (k, v) = m.updates[w].clone();
        let mut at = 1 + rng.below(steps.len());
        if w < m.settled_first && steps[at - 1] != Step::Settle {
            steps.insert(at, Step::Settle);
            at += 1;
        }
        steps.insert(
            at,
            Step::Update {
                set: Fields::from([(k, v)]),
            },
        );
        if m.ops.contains(&Op::Rollout) && rng.below(2) == 0 {
            steps.insert(at + 1, Step::Operate { op: Op::Rollout });
        }
    }
    Trial {
        subject: m.subject.into(),
        mode: Mode::Behaviour,
        seed,
        index,
        steps,
    }
}

#[cfg(test)]
mod tests;
