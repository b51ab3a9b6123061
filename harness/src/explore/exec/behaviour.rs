//! A behaviour trial on a cell: [`Cell::behaviour`] (start there) sets the trial up (its
//! object's names, its sides, the monitor), acts ([`Cell::act`]: each step on the subject and
//! its twin), lets the object settle ([`Cell::settle`]), compares it with its twin
//! ([`Cell::twin_pods`]), undoes what its perturbations left and judges it: the end state,
//! convergence, the monitor's rules, failure events and the controller's health.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch};

use super::settle::Settled;
use super::{
    Cell, KNOWN_QUIET, Outcome, Place, Settling, Side, TWIN, Undo, answer, api_for, object,
    of_twin, resolved, scoped_name, strict, update_patch,
};
use crate::explore::oracle::{self, Answer, Finding, Oracle};
use crate::explore::pace::Phases;
use crate::explore::subject::{Subject, catalog, resolve, split_target};
use crate::explore::trial::{Fields, Perturbation, Step, Trial};
use crate::scenario::monitor;
use crate::wait::{Check, poll};

/// A warning event of a trial's namespace: the kind of the object it is about, its reason,
/// count and message.
type Warning = (String, String, i32, String);

impl Cell<'_> {
    /// The object made and driven through the steps while the monitor watches; then settled
    /// and judged.
    pub(super) async fn behaviour(
        &self,
        s: &Subject,
        trial: &Trial,
        ns: &str,
        settling: Settling,
        phases: &mut Phases,
    ) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        let api = api_for(&self.client, ns, &s.api_version, s.kind).await?;
        let name = &scoped_name(&self.client, s, ns, "x").await?;
        let tname = &match s.twin_subject() {
            Some(t) => scoped_name(&self.client, &t, ns, TWIN).await?,
            None => TWIN.to_string(),
        };
        let at = Place {
            ns,
            api: &api,
            name,
            tname,
            settling,
        };
        let window = self.installation.window(ns);
        let settings = monitor::Settings {
            availability: true,
            ..monitor::Settings::with_liveness(self.settle)
        };
        let watching = monitor::Monitor::start(&self.client, ns, settings);
        let mut undo = Undo::default();
        // What operations, perturbations and convergence act on.
        let ours = Side::new(&self.client, ns, s, name)
            .await
            .context("find the subject's API")?;
        // The twin goes through the same steps (perturbations aside) when it has every field.
        let mut twin = match s.twin_subject() {
            Some(t) if trial.fields().iter().all(|(k, _)| s.twin_path(k).is_some()) => Some(
                Side::new(&self.client, ns, &t, tname)
                    .await
                    .context("find the twin's API")?,
            ),
            _ => None,
        };
        let refused = self
            .act(s, trial, &at, &ours, &mut twin, &mut undo, &mut out)
            .await?;
        self.resume_silenced(&mut undo, &mut out.log).await;
        phases.next("settle");
        let Settled {
            mut differences,
            early,
        } = match refused {
            true => Settled::default(),
            false => self.settle(s, &at, &ours).await,
        };
        if let Some(t) = early {
            out.ended_early = true;
            out.log.push(format!(
                "settle ended after {:.0} s: every difference left is of a kind a trial of {} \
                 already reported not converging, and none changed for {KNOWN_QUIET:?} (not \
                 judged for convergence): {}",
                t.as_secs_f64(),
                s.family,
                differences.join("; ")
            ));
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
            out.findings
                .extend(self.twin_pods(s, ns, &ours, side, at.settling).await);
        }
        phases.next("judge");
        if at.settling.reached() {
            out.cut = true;
            out.log.push(
                "its waits were cut at the end of its share of the budget (not judged for \
                 convergence)"
                    .into(),
            );
        }
        let served = undo.served.take();
        let served_at = undo.served_at.take();
        self.undo(undo).await;
        out.end = self
            .end_state(&out.answers, &differences, refused, &ours, ns)
            .await;
        let (events, twin_events) = self
            .warnings(ns, served_at)
            .await
            .context("read the trial's events")?;
        // The twin's refusals count only where it went through the trial's steps.
        let twin_events = if twin.is_some() { twin_events } else { vec![] };
        held_by_policy(s, name, &events, &mut differences, &mut out.log);
        // What did not converge within the full bound: a kind of difference later trials of
        // the subject's kind may end their settle on. A settle that ended so did not wait to
        // see whether its differences would go: it judges no convergence.
        if early.is_none() && !out.cut {
            let converged = convergence(s, &differences, self.settle);
            self.unsettled_by(s, &converged);
            out.findings.extend(converged);
        }
        let found = watching.stop().await.context("end the monitor")?;
        out.findings.extend(monitored(s, trial, found));
        // Failures on the way to a settled state were retries that succeeded; a write the API
        // refused for its content is a finding either way. A cut run saw no end to judge by.
        if !differences.is_empty() && !out.cut {
            out.findings
                .extend(oracle::repeated_failures(s, name, &events));
        }
        out.findings.extend(oracle::refused_writes(
            s,
            (name, tname),
            &events,
            &twin_events,
        ));
        if let Err(e) = self.installation.check(&window).await {
            let health = self
                .health(s, format!("{e:#}"), served.as_ref(), &mut out.log)
                .await
                .filter(|f| self.charged(s, f, &window, &mut out.log));
            out.findings.extend(health);
        }
        // What the controller logged over the trial's window, read once: refusals no event
        // carried, and the log a finding keeps.
        let log = self
            .installation
            .logs()
            .first()
            .map(|l| window.read(l))
            .unwrap_or_default();
        let messages: Vec<String> = events.iter().map(|e| e.3.clone()).collect();
        out.findings.extend(oracle::logged_refusals(
            s,
            (name, tname),
            ns,
            &log,
            &messages,
        ));
        if !out.findings.is_empty() {
            out.manager_log = log;
        }
        Ok(out)
    }

    /// Sends the trial's steps in order, the subject's side and its twin's (which is dropped
    /// once it cannot follow), each step's line in `out`'s log; whether the subject refused
    /// its create (the steps then stop).
    #[expect(
        clippy::too_many_arguments,
        reason = "the trial, where it acts, its two sides, and what it leaves"
    )]
    async fn act(
        &self,
        s: &Subject,
        trial: &Trial,
        at: &Place<'_>,
        ours: &Side,
        twin: &mut Option<Side>,
        undo: &mut Undo,
        out: &mut Outcome,
    ) -> anyhow::Result<bool> {
        let ns = at.ns;
        let mut refused = false;
        for step in &trial.steps {
            let line = match step {
                Step::Create { set } => match self.create(s, set, at, ours, twin, out).await? {
                    Some((line, r)) => {
                        refused = r;
                        line
                    }
                    None => {
                        refused = true;
                        break;
                    }
                },
                Step::Update { set } => self.update(s, set, at, ours, twin.as_ref(), out).await,
                Step::Operate { op } => {
                    // On the workload (a policy's target), and on what a policy declares.
                    let (on_workload, on_declared) = op.parts();
                    let on_declared = on_declared.filter(|_| s.target.is_some());
                    let r = match on_workload {
                        Some(o) => Some(
                            self.operate(&ours.workload, &ours.wapi, ns, &ours.wname, o)
                                .await,
                        ),
                        None => None,
                    };
                    let declared = match on_declared {
                        Some(o) => self.operate_declared(at.api, at.name, o).await,
                        None => Ok(false),
                    };
                    if let Some(side) = &twin {
                        if let Some(o) = on_workload {
                            let _ = self
                                .operate(&side.workload, &side.wapi, ns, &side.wname, o)
                                .await;
                        }
                        if let Some(o) = on_declared {
                            let _ = self.operate_declared(&side.api, at.tname, o).await;
                        }
                    }
                    let declared = match (declared, &r) {
                        (Ok(true), Some(_)) => ", and the policy's declared containers",
                        (Ok(true), None) => "the policy's declared containers",
                        (Ok(false), _) if on_declared.is_none() => "",
                        (Ok(false), _) => ", not the policy's declared containers (none)",
                        (Err(_), _) => ", not the policy's declared containers",
                    };
                    let done = match r {
                        Some(r) => r.map_or_else(|e| format!("{e:#}"), |_| "done".into()),
                        None => String::new(),
                    };
                    format!("{op:?}: {done}{declared}")
                }
                Step::Settle => {
                    let line = self.quiet(ours, ns, at.settling).await;
                    if let Some(side) = &twin {
                        let _ = self.quiet(side, ns, at.settling.full()).await;
                    }
                    format!("settle: {line}")
                }
                Step::Perturb { perturbation } => {
                    let r = self.perturb(ours, ns, *perturbation, undo).await;
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
        Ok(refused)
    }

    /// A create step: the object made with `set` (a policy's target first), then its twin's
    /// (the twin dropped when it cannot be). Its line and whether the subject refused it; none
    /// when the target refused (logged in `out`).
    async fn create(
        &self,
        s: &Subject,
        set: &Fields,
        at: &Place<'_>,
        ours: &Side,
        twin: &mut Option<Side>,
        out: &mut Outcome,
    ) -> anyhow::Result<Option<(String, bool)>> {
        let (ns, name, tname) = (at.ns, at.name, at.tname);
        let Some((own, o)) = super::created(s, set, ns, name) else {
            anyhow::bail!("set {set:?} on the seed object");
        };
        if let Some(m) = self.make_target(ns, s, name, set).await? {
            out.log
                .push(format!("create {set:?}: the target refused: {m}"));
            out.answers
                .push(Answer::Refused(format!("the target refused: {m}")));
            return Ok(None);
        }
        let a = answer(at.api.patch(name, &strict(), &Patch::Apply(&o)).await);
        let refused = a != Answer::Admitted;
        if !refused {
            self.scale_target(ours, set).await?;
        }
        out.answers.push(a.clone());
        if let Some(side) = &*twin {
            let seed = resolve(&side.subject.seed.make(tname), ns, tname);
            let o = object(seed, &own, |k| s.twin_path(k));
            // The twin's target is made with the target's fields at its twin's paths; one it
            // cannot be made with (a field its schema has not) leaves the trial without a twin.
            let ok = match (o, s.twin_fields(set)) {
                (Some(o), Some(set)) => {
                    let made = self.make_target(ns, &side.subject, tname, &set).await;
                    if let Err(e) = &made {
                        out.log.push(format!("the twin's target: {e:#}"));
                    }
                    matches!(made, Ok(None))
                        && side
                            .api
                            .patch(tname, &strict(), &Patch::Apply(&o))
                            .await
                            .is_ok()
                        && self.scale_target(side, &set).await.is_ok()
                }
                _ => false,
            };
            if !ok {
                *twin = None;
            }
        }
        Ok(Some((format!("create {set:?}: {a:?}"), refused)))
    }

    /// An update step: `set` patched onto the object and its twin's (a policy's update of its
    /// target's fields changes the target); its line.
    async fn update(
        &self,
        s: &Subject,
        set: &Fields,
        at: &Place<'_>,
        ours: &Side,
        twin: Option<&Side>,
        out: &mut Outcome,
    ) -> String {
        // A policy's update of its target's fields changes the target.
        let (own, target) = split_target(&resolved(set, at.ns, at.name));
        let (api, name, set, twin_api, twin_name) = match own.is_empty() {
            false => (at.api, at.name, &own, twin.map(|t| &t.api), at.tname),
            true => (
                &ours.wapi,
                ours.wname.as_str(),
                &target,
                twin.map(|t| &t.wapi),
                twin.map_or("", |t| t.wname.as_str()),
            ),
        };
        let patch = update_patch(api, name, set, |k| Some(k.to_string())).await;
        let a = match patch {
            Some(p) => answer(api.patch(name, &strict(), &Patch::Merge(&p)).await),
            None => Answer::Refused(format!("set {set:?} on the object")),
        };
        // A change of the workload's claim templates: what its pods are then, for the rule
        // on the claims they get ([`oracle::claims_follow`]).
        let claims = crate::explore::subject::claims_at(&ours.workload.template);
        if matches!(a, Answer::Admitted)
            && (own.is_empty() || s.target.is_none())
            && set.keys().any(|k| k.starts_with(&claims))
        {
            let now = self.claims_snapshot(&ours.workload, api, name, at.ns).await;
            out.log.push(match &now {
                Some(c) => format!(
                    "claim templates changed: {} live pod(s) then, judged by the rule on claims",
                    c.pods.len()
                ),
                None => "claim templates changed: the pods could not be read".to_string(),
            });
            if let Ok(mut c) = ours.claims_changed.lock() {
                *c = now;
            }
        }
        out.answers.push(a.clone());
        if let Some(twin_api) = twin_api
            && let Some(p) = update_patch(twin_api, twin_name, set, |k| s.twin_path(k)).await
        {
            let _ = twin_api
                .patch(twin_name, &strict(), &Patch::Merge(&p))
                .await;
        }
        format!("update {set:?}: {a:?}")
    }

    /// A silenced node comes back before the trial settles: it was a transient failure,
    /// which the controller must converge from.
    async fn resume_silenced(&self, undo: &mut Undo, log: &mut Vec<String>) {
        let Some(cluster) = self.cluster else {
            return;
        };
        for node in std::mem::take(&mut undo.silenced) {
            let t = std::time::Instant::now();
            log.push(match cluster.resume_node(&node).await {
                Ok(()) => format!(
                    "the kubelet of {node} reports again: Ready after {:.0} s",
                    t.elapsed().as_secs_f64()
                ),
                Err(e) => format!("the kubelet of {node} did not come back: {e:#}"),
            });
        }
    }

    /// O4 on the live pods: once the twin `side` settles too, a finding when the subject's
    /// object (`ours`) keeps another number of live pods than the twin for the whole settle
    /// bound.
    async fn twin_pods(
        &self,
        s: &Subject,
        ns: &str,
        ours: &Side,
        side: &Side,
        settling: Settling,
    ) -> Option<Finding> {
        let (w, wapi, wname) = (&side.workload, &side.wapi, side.wname.as_str());
        let settled = poll(
            &format!("{} {wname} to settle", w.kind),
            settling.bound(self.settle),
            Duration::from_millis(500),
            move || async move {
                let d = self.differences(w, wapi, ns, wname, None, None).await;
                Check::when(d.is_empty(), || d.join("; "))
            },
        )
        .await
        .is_ok();
        if !settled {
            return None;
        }
        // A settled count is one that stays: a kind that deletes a pod before it makes its
        // replacement passes through one pod fewer at an instant that looks settled (every
        // pod left at the template), so the counts must differ through the whole bound.
        let counts = std::cell::Cell::new((0, 0));
        let same = poll(
            &format!("{} and {wname} to keep as many live pods", s.name),
            settling.bound(self.settle),
            Duration::from_millis(500),
            || async {
                let now = (
                    self.live(&ours.workload, &ours.wapi, ns, &ours.wname).await,
                    self.live(w, wapi, ns, wname).await,
                );
                counts.set(now);
                Check::when(now.0 == now.1, || format!("{} vs {}", now.0, now.1))
            },
        )
        .await;
        // Counts that differed only until the wait was cut did not differ through the bound.
        if same.is_ok() || settling.reached() {
            return None;
        }
        let (t, (mine, theirs)) = (&side.subject, counts.get());
        let twin = s
            .twin
            .as_ref()
            .map_or_else(|| t.kind.to_string(), |t| t.describe());
        Some(Finding {
            oracle: Oracle::Native,
            subject: s.name.to_string(),
            key: format!("settles on another number of live pods than {twin}"),
            observed: format!("{} settled on {mine} live pods", s.name),
            expected: format!("as {} {twin}: {theirs} live pods", t.api_version),
        })
    }

    /// How the trial ended, for the release differential: each create and update admitted or
    /// not, what had not settled, and the live pods of a settled object.
    async fn end_state(
        &self,
        answers: &[Answer],
        differences: &[String],
        refused: bool,
        ours: &Side,
        ns: &str,
    ) -> oracle::EndState {
        oracle::EndState {
            admitted: answers.iter().map(|a| *a == Answer::Admitted).collect(),
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
        }
    }

    /// The warning events of namespace `ns` about the subject's objects, and apart those
    /// about the twin's (the twin shares the namespace), but the refusals by role of an
    /// apiserver that the trial restarted (`served_at`: when it served again).
    async fn warnings(
        &self,
        ns: &str,
        served_at: Option<k8s_openapi::jiff::Timestamp>,
    ) -> anyhow::Result<(Vec<Warning>, Vec<Warning>)> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let (twin, ours): (Vec<Event>, Vec<Event>) = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .partition(|e| of_twin(e.involved_object.name.as_deref().unwrap_or_default()));
        let read = |events: Vec<Event>| -> Vec<Warning> {
            events
                .into_iter()
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
                .collect()
        };
        Ok((read(ours), read(twin)))
    }

    /// The Health finding of the manager's error `whole` over the trial's window, if any.
    ///
    /// After a restart of the apiserver, a new apiserver denies requests until its
    /// authorizer has read the roles and bindings, and a manager that could not renew its
    /// leader-election lease while it was down exits by design (controller-runtime's "leader
    /// election lost") and is started again: the trial's doing, not the controller's. Such a
    /// trial's manager is judged from when the apiserver served again (`served`, a window
    /// from then; what came before, those two aside, is judged as any), what is excused
    /// logged in `log`. A request decided just before the new apiserver was ready can be
    /// logged after the harness saw it ready, so a denial since then counts only if the
    /// apiserver still denies it when asked again ([`Cell::denied_still`]).
    async fn health(
        &self,
        s: &Subject,
        whole: String,
        served: Option<&crate::controller::Window>,
        log: &mut Vec<String>,
    ) -> Option<Finding> {
        let lost_lease =
            |t: &str| health_key(t) == "exited or restarted" && t.contains("leader election lost");
        let outage = |t: &str| health_key(t) == "denied by its RBAC" || lost_lease(t);
        let judged = match served {
            None => Some(whole),
            Some(_) if !outage(&whole) => Some(whole),
            Some(w) => match self.installation.check(w).await {
                Ok(()) => {
                    log.push(format!(
                        "the manager was denied or lost its lease only while the restarted \
                         apiserver was not serving yet (nothing since it served): {whole}"
                    ));
                    None
                }
                Err(since) if lost_lease(&format!("{since:#}")) => {
                    log.push(format!(
                        "the manager lost its lease while the apiserver was down: exited by \
                         design, started again: {since:#}"
                    ));
                    self.panicked_within(w)
                }
                Err(since) if health_key(&format!("{since:#}")) == "denied by its RBAC" => {
                    match self.denied_still(w).await {
                        Ok(still) if still.is_empty() => {
                            log.push(format!(
                                "the manager was denied as the restarted apiserver began to \
                                 serve, and every request denied is allowed when asked again: \
                                 {since:#}"
                            ));
                            self.panicked_within(w)
                        }
                        Ok(still) => Some(format!(
                            "{since:#} (since the restarted apiserver served; still denied when \
                             asked again: {})",
                            still.join("; ")
                        )),
                        Err(e) => Some(format!(
                            "{since:#} (since the restarted apiserver served; could not ask \
                             again: {e:#})"
                        )),
                    }
                }
                Err(since) => Some(format!("{since:#} (since the restarted apiserver served)")),
            },
        };
        judged.map(|text| Finding {
            oracle: Oracle::Health,
            subject: s.name.to_string(),
            // A denial is keyed by what was denied: two missing permissions, two findings.
            key: match (health_key(&text), oracle::denied_request(&text)) {
                (k @ "denied by its RBAC", Some(what)) => format!("controller {k}: {what}"),
                (k, _) => format!("controller {k}"),
            },
            observed: text,
            expected: "the controller neither exits, restarts, panics nor is denied".into(),
        })
    }

    /// Whether O6's finding `f` is trial `s`'s: a panic is not when every panic in its
    /// `window` ran through the controller of another kind the exploration makes (see
    /// [`oracle::panics_are_theirs`]), nor an exit or restart that such a panic caused
    /// ([`oracle::exit_is_theirs`]); said in `log` when it is not.
    fn charged(
        &self,
        s: &Subject,
        f: &Finding,
        window: &crate::controller::Window,
        log: &mut Vec<String>,
    ) -> bool {
        let exited = f.key == format!("controller {}", health_key("exited"));
        if !exited && f.key != format!("controller {}", health_key("panicked")) {
            return true;
        }
        let (judge, what) = match exited {
            true => (oracle::exit_is_theirs as Charge, "exited on a panic"),
            false => (oracle::panics_are_theirs as Charge, "panicked"),
        };
        let panics = self.panics(window, crate::controller::panic_stacks_within);
        let mut kinds = s.event_names();
        kinds.extend(s.twin.as_deref().map(|t| t.kind));
        let theirs = judge(&panics, &kinds, &catalog::kinds_and_names());
        if !theirs {
            log.push(format!(
                "the controller {what} beside this trial, in another kind's controller; not \
                 charged to it: {}",
                f.observed.lines().take(2).collect::<Vec<_>>().join(" ")
            ));
        }
        theirs
    }

    /// The panics the controller's components logged within `window`, as `read` reads them
    /// from a log ([`crate::controller::panics_within`]: with the first lines of each stack;
    /// [`crate::controller::panic_stacks_within`]: with an unrecovered one's whole stack, what
    /// decides whose controller it was).
    fn panics(
        &self,
        window: &crate::controller::Window,
        read: fn(&str, &crate::controller::Window) -> Vec<String>,
    ) -> Vec<String> {
        self.installation
            .logs()
            .into_iter()
            .flat_map(|path| read(&window.read(path), window))
            .collect()
    }

    /// What a component's panics within `window` say, if any panicked: a check reports the
    /// first problem it sees (an exit, then denials, then panics), so a problem excused leaves
    /// the panics after it to be asked for.
    fn panicked_within(&self, window: &crate::controller::Window) -> Option<String> {
        let panics = self.panics(window, crate::controller::panics_within);
        let first = panics.first()?;
        Some(format!(
            "the controller panicked ({} times) since the restarted apiserver served: {first}",
            panics.len()
        ))
    }

    /// The requests the manager was denied within `window` (its log's denial lines) that the
    /// apiserver still denies when asked now with a SubjectAccessReview: the apiserver's
    /// authorizer, not a log line's timing, tells a denial of the shipped RBAC from one of an
    /// apiserver that had not yet read its roles. A line that names no resource is kept.
    async fn denied_still(
        &self,
        window: &crate::controller::Window,
    ) -> anyhow::Result<Vec<String>> {
        use crate::controller::{Denial, forbidden_lines};
        let mut asked = std::collections::BTreeSet::new();
        let mut still = vec![];
        for path in self.installation.logs() {
            for line in forbidden_lines(&window.read(path), window) {
                let Some(d) = Denial::parse(&line) else {
                    still.push(line);
                    continue;
                };
                if !asked.insert(d.clone()) {
                    continue;
                }
                if !self.allowed_now(&d).await? {
                    still.push(format!(
                        "{} {}{} in {}",
                        d.verb,
                        d.resource,
                        d.subresource.map(|s| format!("/{s}")).unwrap_or_default(),
                        d.namespace.as_deref().unwrap_or("the cluster scope")
                    ));
                }
            }
        }
        Ok(still)
    }

    /// Whether the apiserver allows the request `d` was denied, asked now with a
    /// SubjectAccessReview for its ServiceAccount (with the groups its token carries).
    pub async fn allowed_now(&self, d: &crate::controller::Denial) -> anyhow::Result<bool> {
        use k8s_openapi::api::authorization::v1::{
            ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        };
        let sa_ns = d.user.split(':').nth(2).unwrap_or_default();
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(d.user.clone()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{sa_ns}"),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    namespace: d.namespace.clone(),
                    verb: Some(d.verb.clone()),
                    group: Some(d.group.clone()),
                    resource: Some(d.resource.clone()),
                    subresource: d.subresource.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&Default::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

/// A trial whose own policy refused its target's writes (an event of `events` says so) is
/// held where the policy declares it must stand: what it did not reach (`differences`,
/// cleared) is logged in `log`, not judged.
fn held_by_policy(
    s: &Subject,
    name: &str,
    events: &[Warning],
    differences: &mut Vec<String>,
    log: &mut Vec<String>,
) {
    let kinds = s.event_kinds();
    let held = events
        .iter()
        .find(|(k, _, _, m)| kinds.contains(&k.as_str()) && oracle::by_own_policy(s, name, m));
    if let Some((_, reason, _, message)) = held {
        if !differences.is_empty() {
            log.push(format!(
                "held by its policy ({reason}: {message}): {}",
                differences.join("; ")
            ));
        }
        differences.clear();
    }
}

/// The O2 findings of what still differs from the declared state after `settle`: one per
/// convergence key.
fn convergence(s: &Subject, differences: &[String], settle: Duration) -> Vec<Finding> {
    let mut seen = BTreeMap::new();
    for d in differences {
        seen.entry(oracle::convergence_key(d))
            .or_insert_with(|| d.clone());
    }
    seen.into_iter()
        .map(|(key, d)| Finding {
            oracle: Oracle::Convergence,
            subject: s.name.to_string(),
            key,
            observed: format!("after {settle:?}: {d}"),
            expected: "the declared state: every difference gone".into(),
        })
        .collect()
}

/// The O3 findings of the monitor's violations `found` during `trial`, but those the trial
/// causes by its own hand and the twin's.
fn monitored(s: &Subject, trial: &Trial, found: Vec<monitor::Violation>) -> Vec<Finding> {
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
    let mut out = vec![];
    for v in found {
        if v.rule == monitor::rules::FAILED_CREATE
            || (takes_pods && v.rule == monitor::rules::MAX_UNAVAILABLE)
            || (node_down && v.rule == monitor::rules::LIVENESS)
            || (restarted
                && [monitor::rules::COUNTERS, monitor::rules::AVAILABLE].contains(&v.rule))
            || of_twin(&v.object)
        {
            continue;
        }
        out.push(Finding {
            oracle: Oracle::Safety,
            subject: s.name.to_string(),
            key: format!("monitor rule {}", v.rule),
            observed: v.to_string(),
            expected: format!("the monitor's rule {} holds at every instant", v.rule),
        });
    }
    out
}

/// How O6 charges a finding to a trial: from the panics in its window, the trial's kinds and
/// every kind the exploration makes ([`oracle::panics_are_theirs`]).
type Charge = fn(&[String], &[&str], &[&str]) -> bool;

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
