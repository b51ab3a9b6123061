//! The behaviour phase: [`Behaviour`] (start there) gives the [`pool`](super::pool) its jobs, the
//! subjects taking turns ([`Turns`]) with trials made from what their admission trials
//! admitted ([`prepare`]), and the shrinking of the findings they fire; the width follows the
//! [`pace::Pacer`].

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::api::Api;
use serde_json::Value;

use super::admission::shared_field;
use super::book::Book;
use super::exec;
use super::oracle::Finding;
use super::pace;
use super::pool::Jobs;
use super::reach::Reach;
use super::shrinking::{Pending, Plan, SIDE_BY_SIDE, Shrunk, plan};
use super::subject::Subject;
use super::trial::{self, Fields, Material, Perturbation, Trial};
use super::turns::{Turn, Turns};

/// The latency counted for an apiserver read that failed: a strained apiserver answers errors
/// too, and the pool narrows.
pub(super) const PROBE_FAILED: f64 = 2.0;

/// Whether a value is small enough for a behaviour trial to create objects with (a replica
/// count of two billion is for admission only).
pub(super) fn small(v: &Value) -> bool {
    v.as_i64().is_none_or(|i| (-1..=10).contains(&i))
}

/// A subject with the field sets its behaviour trials create objects with, the single values
/// its updates set, and how many of those, the first, set its own fields
/// ([`trial::Material::own_updates`]).
pub(super) type Prepared = (Subject, Vec<Fields>, Vec<(String, Value)>, usize);

/// What behaviour trials of `s` are made from, given the single values its admission trials
/// admitted (in schema order): the small ones for updates, the subject's own fields first
/// (and counted, in the order their trials walk them: first those that take away what its
/// seed object declares, [`takes_away`], the largest first, then the others, each part in
/// [`trial::own_order`]), and those that set a value each a create, in the seeded order of
/// [`trial::create_order`] (so that a budget that ends early has created with fields from
/// across the schema). Neither sets how a policy names its target ([`naming_target`]).
///
/// `pool`, when not empty, stands for the subject's own admitted values in its updates (not
/// in its creates, which stay what its own admission admitted): the own values its policy's
/// subjects admitted ([`pools`]).
pub(super) fn prepare(
    s: Subject,
    admitted: Vec<(String, Value)>,
    pool: &[(String, Value)],
    seed: u64,
) -> Prepared {
    let declared = s.seed.make("x");
    let naming = naming_target(&s, &declared);
    let kept_by = |(k, v): &(String, Value)| small(v) && !naming.iter().any(|n| trial::meets(n, k));
    let kept: Vec<(String, Value)> = admitted.into_iter().filter(kept_by).collect();
    let creates: Vec<Fields> = kept
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| Fields::from([(k.clone(), v.clone())]))
        .collect();
    let creates = s.vary(trial::create_order(&creates, seed, &s.name), seed);
    let (mut updates, shared): (Vec<_>, Vec<_>) = kept
        .into_iter()
        .partition(|(k, _)| !shared_field(k, &s.template));
    if !pool.is_empty() {
        updates = pool.iter().filter(|kv| kept_by(kv)).cloned().collect();
    }
    let (away, rest): (Vec<_>, Vec<_>) = updates
        .into_iter()
        .partition(|(k, v)| takes_away(&declared, k, v));
    let mut updates = trial::own_order(away, seed, s.family);
    // The largest first: a whole object taken away before its parts (a stable sort keeps
    // the seeded order within a depth).
    updates.sort_by_key(|(k, _)| depth(k));
    updates.extend(trial::own_order(rest, seed, s.family));
    // What the subject's claim templates declare, before the rest (a stable partition,
    // see `settled_first`).
    let claims = s.claims();
    let (mut updates, rest): (Vec<_>, Vec<_>) = updates
        .into_iter()
        .partition(|(k, _)| claims.as_ref().is_some_and(|c| trial::meets(c, k)));
    updates.extend(rest);
    let own = updates.len();
    updates.extend(shared);
    (s, creates, updates, own)
}

/// The fields by which a policy's seed object names its target (those it sets to the
/// target's name: a reference's name, a selector's label): a behaviour trial that sets one
/// applies its policy to something else than the target it made, so its creates and updates
/// leave them (and what holds them) as the seed has them; its admission trials try them.
/// None for a workload. `declared` is its seed object named `x`.
fn naming_target(s: &Subject, declared: &Value) -> Vec<String> {
    fn walk(v: &Value, at: &str, name: &str, out: &mut Vec<String>) {
        let join = |k: &str| match at {
            "" => k.to_string(),
            _ => format!("{at}.{k}"),
        };
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| walk(x, &join(k), name, out)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, &format!("{at}[{i}]"), name, out)),
            Value::String(t) if t == name => out.push(at.to_string()),
            _ => {}
        }
    }
    let mut out = vec![];
    if s.target.is_some() {
        let target = super::subject::target_name("x");
        walk(declared, "", &target, &mut out);
    }
    out
}

/// The own values each subject of `materials` (with what its admission admitted) walks in
/// its updates, for a policy over one of its targets: every value of the policy's own fields
/// (not its target's) admitted on any of the policy's subjects at its API version, each once,
/// where the subject's seed object has a place for it ([`exec::has_place`]). These subjects
/// are one object but for the target it names, and each one's admission tried its own part of
/// those fields before its deadline; their trials share one walk of own updates
/// ([`trial::Walk`]), which takes each step once only if they walk one list. Empty (the
/// subject's own admitted values) for any other subject.
pub(super) fn pools(materials: &[(Subject, Vec<(String, Value)>)]) -> Vec<Vec<(String, Value)>> {
    let policy_of = |o: &Subject, s: &Subject| {
        o.target.is_some() && o.family == s.family && o.api_version == s.api_version
    };
    materials
        .iter()
        .map(|(s, _)| {
            let mut pool: Vec<(String, Value)> = vec![];
            if s.target.is_none() {
                return pool;
            }
            let admitted =
                materials
                    .iter()
                    .filter(|(o, _)| policy_of(o, s))
                    .flat_map(|(o, admitted)| {
                        admitted
                            .iter()
                            .filter(|(k, _)| !shared_field(k, &o.template))
                    });
            let mut placed = std::collections::BTreeMap::new();
            for (k, v) in admitted {
                if !pool.iter().any(|(pk, pv)| pk == k && pv == v)
                    && *placed.entry(k).or_insert_with(|| exec::has_place(s, k))
                {
                    pool.push((k.clone(), v.clone()));
                }
            }
            pool
        })
        .collect()
}

/// The fields each of `prepared` offers a trial carried to it ([`trial::carried`]): what its
/// schema offers ([`Reach::offered_fields`]), not only what its admission trials reached
/// (those tried a part of the fields each, a different part on each subject), and what its
/// behaviour trials set; each one its seed object has a place for ([`exec::has_place`]).
pub(super) fn offers(prepared: &[Prepared], reach: &Reach) -> Vec<BTreeSet<String>> {
    prepared
        .iter()
        .map(|(s, creates, updates, _)| {
            let mut offers = reach.offered_fields(&s.name);
            offers.extend(creates.iter().flat_map(|c| c.keys().cloned()));
            offers.extend(updates.iter().map(|(k, _)| k.clone()));
            offers.retain(|k| exec::has_place(s, k));
            offers
        })
        .collect()
}

/// Whether the update setting `k` to `v` takes away what the seed object `declared` declares
/// there: the seed holds something at `k` and the update removes it or leaves it empty. What
/// a working object has, taken away, is where a controller meets absence (a default, a
/// missing part); a kind's walk starts with those, the few its seed declares.
pub(super) fn takes_away(declared: &Value, k: &str, v: &Value) -> bool {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(t) => t.is_empty(),
        _ => false,
    };
    !empty(super::path::get(declared, k)) && empty(v)
}

/// How many of `updates`, the first `own` of them the subject's own, are of its claim
/// templates ([`Subject::claims`]; [`prepare`] puts them first): a subject made with claim
/// templates (the kind's [`super::subject::CLAIMS`] one) is there to explore what they do,
/// the rest of its own fields its kind's other subjects walk too ([`trial::Walk`]), so its
/// walk takes them first; and a claim is made with its pod, so a change to its template
/// acts on claims made already only once the object has settled
/// ([`trial::Material::settled_first`]).
fn settled_first(s: &Subject, updates: &[(String, Value)], own: usize) -> usize {
    let Some(claims) = s.claims() else {
        return 0;
    };
    updates[..own.min(updates.len())]
        .iter()
        .take_while(|(k, _)| trial::meets(&claims, k))
        .count()
}

/// How deep path `k` lies: its fields and list items below the root.
fn depth(k: &str) -> usize {
    k.matches(['.', '[']).count()
}

/// Whether subject `s`, whose admission trials admitted `admitted` (its single values), takes
/// behaviour trials: not when the API refuses its seed object (`reach` records it,
/// [`super::reach::SubjectReach::seed_refused`]) and admitted no value alone: every trial,
/// its seed variants' creates included, would be refused at its first step in the words
/// admission already judged, once, as the seed object's trial, and its turns would be taken
/// from the subjects of its kind that the API admits.
pub(super) fn takes_turns(s: &Subject, admitted: &[(String, Value)], reach: &Reach) -> bool {
    let refused = reach
        .subjects
        .get(&s.name)
        .is_some_and(|r| r.seed_refused.is_some());
    !refused || admitted.iter().any(|(_, v)| !v.is_null())
}

/// How often a trial that met the controller's webhook down ([`exec::met_webhook_down`]) is
/// put back for its subject's next turn, at most; then it did not run.
pub(super) const PUT_BACK_MOST: usize = 2;

/// A trial waiting for its subject's turn ([`Turns`]): carried to it ([`trial::carried`]),
/// with the findings it was carried for, as the subject's; or put back after it met the
/// controller's webhook down, with none (it waits whatever the subject holds), `carried`
/// as it was.
pub(super) struct Waiting {
    pub(super) trial: Trial,
    pub(super) findings: Vec<Finding>,
    pub(super) carried: bool,
}

/// Whether a trial waiting as `w` still waits once its subject holds what `holds` says: a
/// carried one while the subject does not hold every finding it was carried for yet, one
/// put back always.
fn still_waits(w: &Waiting, holds: impl Fn(&Finding) -> bool) -> bool {
    w.findings.is_empty() || !w.findings.iter().all(holds)
}

/// A behaviour job of [`pool`]: a trial of a subject, or the shrinking of a finding.
pub(super) enum Job {
    /// A trial, and whether it was carried to its subject ([`trial::carried`]).
    Trial(Box<(Subject, Trial, bool)>),
    Shrink(Box<Pending>, Plan),
}

/// What a behaviour job gave.
pub(super) enum Done {
    Trial(Box<Ran>),
    Shrunk(Box<Shrunk>),
}

/// A behaviour trial `t` of `s` that ran: what it saw, in how many seconds.
pub(super) struct Ran {
    pub(super) s: Subject,
    pub(super) t: Trial,
    pub(super) out: anyhow::Result<exec::Outcome>,
    pub(super) seconds: f64,
    /// The cell it ran on (a lane of the pool).
    pub(super) lane: usize,
    /// Whether it was carried to its subject from another ([`trial::carried`]).
    pub(super) carried: bool,
}

/// Behaviour trials, the subjects taking turns ([`Turns`]), and the shrinking of their
/// findings, as jobs of [`pool`]: a finding's shrinking starts before any new trial, one at a
/// time (so that the share of the budget is not spent twice), its candidates side by side
/// (half the width at most, [`SIDE_BY_SIDE`]) beside the trials; a finding the share cannot
/// hold any more is written as it fired. The width is the [`pace::Pacer`]'s, on each of the
/// run's cells (a lane of the pool each).
pub(super) struct Behaviour<'b, 'a> {
    pub(super) book: &'b mut Book<'a>,
    pub(super) prepared: &'b [Prepared],
    pub(super) perturbations: &'b [Perturbation],
    /// The cells' clients, to take their apiserver's latency with (a lane of the pool each).
    pub(super) clients: Vec<kube::Client>,
    pub(super) pacer: pace::Pacer,
    /// Whose behaviour trial is next.
    pub(super) turns: Turns,
    /// Trials waiting for each prepared subject's turn: carried to it ([`trial::carried`]),
    /// or put back after they met the controller's webhook down.
    pub(super) carried: Vec<std::collections::VecDeque<Waiting>>,
    /// The trials put back so far, once for each time.
    pub(super) put_back: Vec<Trial>,
    /// The fields each prepared subject offers a carried trial ([`offers`]).
    pub(super) offers: Vec<BTreeSet<String>>,
    /// When the behaviour trials started.
    pub(super) started: Instant,
    /// New findings waiting to be shrunk.
    pub(super) queue: std::collections::VecDeque<Pending>,
    /// Whether a finding is being shrunk.
    pub(super) shrinking: bool,
}

impl Behaviour<'_, '_> {
    /// The run's perturbations that apply to `s`.
    fn perturbations_of(&self, s: &Subject) -> Vec<Perturbation> {
        self.perturbations
            .iter()
            .copied()
            .filter(|p| s.perturbed_by(*p))
            .collect()
    }

    /// Trial `number` of the subject at `at` of the prepared ones.
    pub(super) fn trial(&self, at: usize, number: u64) -> (Subject, Trial) {
        let (s, creates, updates, own) = &self.prepared[at];
        let ops = s.ops();
        let perturbations = self.perturbations_of(s);
        // The subject's place among its kind's, which share one walk of own updates.
        let kind: Vec<usize> = (0..self.prepared.len())
            .filter(|&i| self.prepared[i].0.family == s.family)
            .collect();
        let walk = trial::Walk {
            at: kind.iter().position(|&i| i == at).unwrap_or_default() as u64,
            of: kind.len() as u64,
        };
        let m = Material {
            subject: &s.name,
            creates,
            updates,
            own_updates: *own,
            settled_first: settled_first(s, updates, *own),
            walk,
            ops: &ops,
            perturbations: &perturbations,
        };
        (
            s.clone(),
            trial::behaviour(&m, self.book.options.seed, number),
        )
    }

    /// Carries trial `t`, which fired a new finding, to every other prepared subject of its
    /// kind that can run its steps ([`trial::carried`], with the fields [`offers`] says), to
    /// run in their own turns ([`Turns`]):
    /// whether what a trial found on one target kind, version or variant holds on the others
    /// is a question of the finding's reach, and the others' own trials would meet its cause
    /// only by chance. Not to a subject that holds every one of the `new` findings already; a
    /// carried trial is not carried again.
    pub(super) fn carry(&mut self, t: &Trial, new: &[Pending]) {
        let Some(from) = self.prepared.iter().position(|p| p.0.name == t.subject) else {
            return;
        };
        let family = self.prepared[from].0.family;
        let mut to = vec![];
        for (i, (s, ..)) in self.prepared.iter().enumerate() {
            if i == from || s.family != family {
                continue;
            }
            let findings: Vec<Finding> = new
                .iter()
                .map(|p| Finding {
                    subject: s.name.clone(),
                    ..p.finding.clone()
                })
                .collect();
            if findings.iter().all(|f| self.book.holds(f)) {
                continue;
            }
            let perturbations = self.perturbations_of(s);
            let offers = &self.offers[i];
            if let Some(c) = trial::carried(t, &s.name, offers, &s.ops(), &perturbations) {
                self.carried[i].push_back(Waiting {
                    trial: c,
                    findings,
                    carried: true,
                });
                to.push(s.name.as_str());
            }
        }
        if !to.is_empty() {
            (self.book.say)(format!(
                "[{:>5.0}s] {} trial {} carried to {} other subject(s) of its kind: {}",
                self.book.started.elapsed().as_secs_f64(),
                t.subject,
                t.index,
                to.len(),
                to.join(", ")
            ));
        }
    }

    /// Puts trial `ran` back for its subject's next turn when it met the controller's
    /// webhook down ([`exec::met_webhook_down`]), at most [`PUT_BACK_MOST`] times: whether it
    /// did. Nothing it saw is judged or counted: the controller had exited, and the exit is
    /// the finding of the trial it is charged to ([`exec`]'s O6); a trial that ran beside that
    /// one tried nothing. Its subject's next turn comes once every other subject has had
    /// about one, by when the objects that crashed the controller are gone, their trial over.
    fn put_back(&mut self, ran: &Ran) -> bool {
        let Some(webhook) = exec::met_webhook_down(&ran.out) else {
            return false;
        };
        let times = self.put_back.iter().filter(|t| **t == ran.t).count();
        let at = self.prepared.iter().position(|p| p.0.name == ran.s.name);
        let Some(at) = at.filter(|_| times < PUT_BACK_MOST) else {
            return false;
        };
        self.put_back.push(ran.t.clone());
        self.carried[at].push_back(Waiting {
            trial: ran.t.clone(),
            findings: vec![],
            carried: ran.carried,
        });
        (self.book.say)(format!(
            "[{:>5.0}s] {}: trial {} met the controller's webhook {webhook} down (the \
             apiserver could not reach it); put back for its subject's next turn",
            self.book.started.elapsed().as_secs_f64(),
            ran.s.name,
            ran.t.index,
        ));
        true
    }

    /// Decides the width again, when a decision is due, the pool `full` or not: from the
    /// slowest of the cells' apiservers.
    pub(super) async fn pace(&mut self, full: bool) {
        if !self.pacer.due() {
            return;
        }
        let mut slowest = 0.0f64;
        for c in &self.clients {
            slowest = slowest.max(latency(c).await);
        }
        let latency = slowest;
        let cpu = self.pacer.cpu();
        let at = self.started.elapsed().as_secs_f64();
        if let Some(c) = self.pacer.decide(latency, cpu, full, at) {
            let cells = match self.clients.len() {
                1 => String::new(),
                n => format!(" on each of {n} cells"),
            };
            (self.book.say)(format!(
                "[{:>5.0}s] {} → {} trials at once{cells}: {} (apiserver {:.0} ms, harness CPU \
                 {:.0} %)",
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
        // A carried trial whose findings the subject has come to hold meanwhile is dropped.
        let (book, carried) = (&*self.book, &mut self.carried);
        let take = |at: usize| {
            let q = &mut carried[at];
            q.retain(|w| still_waits(w, |f| book.holds(f)));
            q.pop_front()
        };
        let job = match self.turns.next_or_carried(take) {
            None => return Ok(None),
            Some(Turn::Number { at, number }) => {
                let (s, t) = self.trial(at, number);
                (s, t, false)
            }
            Some(Turn::Carried { at, trial: w }) => {
                (self.prepared[at].0.clone(), w.trial, w.carried)
            }
        };
        self.book.summary.pace.widths.start(self.pacer.width());
        Ok(Some(Job::Trial(Box::new(job))))
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

    fn lanes(&self) -> usize {
        self.clients.len()
    }

    async fn done(&mut self, done: Done, full: bool) -> anyhow::Result<()> {
        match done {
            Done::Trial(ran) if self.put_back(&ran) => self.pace(full).await,
            Done::Trial(ran) => {
                let Ran {
                    s,
                    t,
                    out,
                    seconds,
                    lane,
                    carried,
                } = *ran;
                self.book.count(format!("behaviour {}", s.name), 1);
                self.book.summary.pace.carried += usize::from(carried);
                self.book.summary.reach.tried(&t);
                let phases = out.as_ref().map_or(&[][..], |o| &o.phases[..]);
                let pace = &mut self.book.summary.pace;
                pace.behaviour_trial(lane, &t, seconds, phases);
                match out {
                    Ok(out) => {
                        self.book.summary.pace.ended_early += usize::from(out.ended_early);
                        if let Some(settle) = settled(&out) {
                            self.pacer.settled(&s.name, settle);
                        }
                        self.book.log_trial(&t, carried, seconds, &out.findings)?;
                        let took = bound_run(&out, seconds, self.book.options.settle);
                        let new = self.book.sort(&s, &t, took, out.findings, &out.manager_log);
                        if !new.is_empty() && !carried {
                            self.carry(&t, &new);
                        }
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
pub(super) fn settled(out: &exec::Outcome) -> Option<f64> {
    let settled = out.end.admitted.first() == Some(&true) && out.end.unsettled.is_empty();
    settled.then(|| settling(out).as_secs_f64())
}

/// How long a behaviour trial's settle phase took.
fn settling(out: &exec::Outcome) -> Duration {
    out.phases
        .iter()
        .filter(|(p, _)| *p == "settle")
        .map(|(_, d)| *d)
        .sum()
}

/// How long a run of `out`'s trial (which took `seconds`) may take when it waits out the settle
/// bound `bound`, as shrinking's candidates and confirming runs do ([`exec::Settling::Bound`]):
/// what it took, but a settle that ended early on what its kind reported counted at the bound.
/// What a finding's shrinking is planned with, so that its share is not overrun.
fn bound_run(out: &exec::Outcome, seconds: f64, bound: Duration) -> Duration {
    let took = Duration::from_secs_f64(seconds);
    if !out.ended_early {
        return took;
    }
    took.saturating_sub(settling(out)) + bound
}

/// The apiserver's latency now, seconds: the median of three reads of one namespace's
/// metadata (cheap, and through the apiserver's storage); a read that fails counts as
/// [`PROBE_FAILED`], and is logged.
pub(super) async fn latency(client: &kube::Client) -> f64 {
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

#[cfg(test)]
mod tests;
