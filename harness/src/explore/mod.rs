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
//! than their share of the budget ([`SHRINK_SHARE`] by default); past it, it is written as it
//! fired, for `--replay` to shrink and confirm (shrunk but not confirmed when, once shrunk, its
//! confirming runs no longer fit: [`shrinking::confirm_fits`]). Every wait of a candidate or a
//! confirming run ends at the end of the share ([`exec::Settling::Until`]); a confirming run cut
//! there before it fired says nothing ([`shrinking::counted`]). Every trial is data: replayed
//! exactly from its YAML ([`replay`]), or regenerated from the seed.
//!
//! The run is split by phase: [`Options`] and [`Gates`] say how it goes ([`options`]), the
//! cell is brought up and read in [`bring_up`], the admission phase is [`admission`] (its
//! values from [`singles`]), the behaviour phase is [`behaviour`] on a [`pool`] (whose turn is
//! next: [`turns`]), findings are kept by [`book`] and shrunk in [`shrinking`], and what the
//! run reports is [`Summary`] ([`summary`]).

mod admission;
mod behaviour;
mod book;
mod bring_up;
pub mod exec;
pub mod gates;
pub mod minimize;
pub mod openapi;
mod options;
pub mod oracle;
pub mod output;
pub mod pace;
pub mod path;
mod pool;
pub mod reach;
mod refusals;
pub mod schema;
mod shrinking;
mod singles;
pub mod subject;
mod summary;
pub mod trial;
mod turns;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context;
use futures::FutureExt;
use serde_json::Value;

use self::admission::{Explorer, admission_deadline, weight};
use self::behaviour::{
    Behaviour, Done, Job, Prepared, Ran, latency, offers, pools, prepare, takes_turns,
};
use self::book::Book;
use self::bring_up::{start_cell, start_cells, with_gates_of};
use self::exec::Cell;
use self::oracle::{Finding, Oracle};
use self::pool::pool;
use self::refusals::Named;
use self::shrinking::{Cells, Pending, Plan, SIDE_BY_SIDE, Shrunk, fires, run_compared, shrink};
use self::subject::Subject;
use self::trial::{Mode, Perturbation};
use self::turns::{Turns, groups};
use crate::cluster::any::Provider;
use crate::controller::ControllerRef;
use crate::toolchain::Toolchain;
pub use bring_up::{cell, cell_reading};
pub use options::{
    ADMISSION_SHARE, DEFAULT_PARALLEL, DEFAULT_SETTLE, DEFAULT_SHRINK_RUNS, Exploring, Gates,
    Options, SHRINK_SHARE, Share, TAIL_SIDE_BY_SIDE, default_cells,
};
pub use singles::{TARGET_SINGLES, TEMPLATE_SINGLES, singles};
pub use summary::{Explored, Reported, Summary, read_summary};

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

/// Explores the controller of `options` on cells of its own ([`Options::cells`], made with
/// `provider`, removed at the end however it ends; admission trials run on the first, behaviour
/// trials on all of them); `say` hears progress.
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
    let n = options.cells.max(1);
    let (cells_named, ready) = match n {
        1 => ("a cell".to_string(), "cell ready"),
        n => (format!("{n} cells"), "cells ready"),
    };
    say(format!(
        "bringing up {cells_named}: Kubernetes {}, {}, {}",
        options.kubernetes, options.controller, options.gates
    ));
    let sessions = start_cells(
        "explore",
        n,
        &options.controller,
        options,
        proxy,
        provider,
        toolchain,
    )
    .await?;
    let base_sessions = match &options.baseline {
        Some(b) => {
            say(format!("bringing up a baseline cell for each: {b}"));
            start_cells("baseline", n, b, options, proxy, provider, toolchain).await?
        }
        None => vec![],
    };
    say(format!("{ready} in {:.0} s", t0.elapsed().as_secs_f64()));
    let (name, session) = &sessions[0];
    let (ours, doc, crds) = cell_reading(name, session, options.settle).await?;
    // The other cells, for behaviour trials (each reads what it serves: the same release).
    let mut more = vec![];
    for (name, session) in &sessions[1..] {
        more.push(cell(name, session, options.settle).await?);
    }
    // The subjects themselves, derived from what the cell serves.
    let (subjects, unserved) = select_served(&options.kinds, &crds, &doc);
    for k in unserved {
        say(format!(
            "{k}: not served by {}; skipped",
            options.controller
        ));
    }
    let mut bases = vec![];
    for (name, session) in &base_sessions {
        bases.push(cell(name, session, options.settle).await?);
    }
    let mut bases = bases.into_iter();
    let baseline = bases.next();
    let more_bases: Vec<Cell> = bases.collect();
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
            trials_log: None,
        },
    };
    let pace = &mut x.book.summary.pace;
    pace.bring_up = t0.elapsed().as_secs_f64();
    pace.cells = n;
    pace.budget = options.budget.as_secs_f64();
    pace.shrink_share = options.shrink_share;
    pace.share = Some(options.share);
    let admitting = Instant::now();
    let mut materials = vec![];
    // The words refusals named for each subject's fields, by subject ([`Subject::with_named`]).
    let mut named = Named::new();
    // Admission has its share of the budget when behaviour trials follow, else all of it.
    let share = match options.modes.contains(&Mode::Behaviour) {
        true => ADMISSION_SHARE,
        false => 1.0,
    };
    // Each subject's weight in the phase (0: gated off or not served, it takes no time).
    let served = |s: &Subject| {
        let group = s.api_version.split('/').next().unwrap_or_default();
        let on = !s
            .gates
            .iter()
            .any(|g| options.gates.controller.get(*g) == Some(&false));
        crds.get(&format!("{group}/{}", s.kind)).filter(|_| on)
    };
    let weights: Vec<usize> = subjects
        .iter()
        .map(|s| served(s).map_or(0, |crd| weight(s, crd, &doc, options.seed)))
        .collect();
    // Subjects reached once the phase's share is spent get their seed object alone (see
    // `admission_deadline`); that floor, a namespace and a target or two each, is mostly
    // waiting on the cell, and over a couple of hundred subjects on a loaded machine it
    // outlasted the whole budget. So they run it side by side, and are judged in order.
    let share_end = x.book.started + options.budget.mul_f64(share);
    let mut tail: Vec<(&Subject, &Value)> = vec![];
    for (i, s) in subjects.iter().enumerate() {
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
        if Instant::now() >= share_end {
            tail.push((s, crd));
            continue;
        }
        say(format!("{}: admission trials", s.name));
        let deadline = admission_deadline(
            x.book.started,
            Instant::now(),
            options.budget,
            share,
            weights[i],
            weights[i..].iter().sum(),
        );
        let a = x.admission(s, crd, &doc, deadline).await?;
        materials.push((named.apply(s, a.named), a.values));
        if x.book.left().is_zero() {
            break;
        }
    }
    if !tail.is_empty() && !x.book.left().is_zero() {
        say(format!(
            "admission's share is spent: the {} subject(s) left try their seed objects alone, \
             {TAIL_SIDE_BY_SIDE} at once",
            tail.len()
        ));
        // The seed objects may take half of what the share left, no more: on a loaded
        // machine a couple of hundred of them outlasted a short budget, and no behaviour
        // trial ran. They run a few at once, and those are judged (twins compared, findings
        // confirmed) before the next few start: judging is part of their half, which it
        // outlasted when every seed object was judged only after all had run. One not
        // started by then is left out, as the share leaves trials out.
        let tail_end =
            share_end + (x.book.started + options.budget).saturating_duration_since(share_end) / 2;
        let mut left_out: Vec<&str> = vec![];
        for few in tail.chunks(TAIL_SIDE_BY_SIDE) {
            if Instant::now() >= tail_end || x.book.left().is_zero() {
                left_out.extend(few.iter().map(|(s, _)| s.name.as_str()));
                continue;
            }
            let (ex, doc_ref) = (&x, &doc);
            let ran: Vec<anyhow::Result<admission::Ran>> =
                futures::future::join_all(few.iter().map(|(s, crd)| async move {
                    ex.run_singles(s, crd, doc_ref, share_end).await
                }))
                .await;
            for ((s, crd), ran) in few.iter().zip(ran) {
                say(format!("{}: admission trials (its seed object)", s.name));
                let a = x.judge_singles(s, crd, &doc, share_end, ran?).await?;
                materials.push((named.apply(s, a.named), a.values));
            }
        }
        if !left_out.is_empty() {
            say(format!(
                "the seed objects' half of what admission's share left is spent: {} subject(s) \
                 not tried ({})",
                left_out.len(),
                left_out.join(", ")
            ));
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
    // Behaviour trials, the subjects taking turns (see `Turns`), on a pool whose width
    // adapts (see `pool`, `pace::Pacer`), until the budget.
    let (materials, refused): (Vec<_>, Vec<_>) = materials
        .into_iter()
        .partition(|(s, admitted)| takes_turns(s, admitted, &x.book.summary.reach));
    let pools = pools(&materials);
    let prepared: Vec<Prepared> = materials
        .into_iter()
        .zip(&pools)
        .map(|((s, admitted), pool)| prepare(s, admitted, pool, options.seed))
        .collect();
    if !refused.is_empty() && options.modes.contains(&Mode::Behaviour) {
        let names: Vec<&str> = refused.iter().map(|(s, _)| s.name.as_str()).collect();
        say(format!(
            "behaviour: {} subject(s) whose seed object is refused, and nothing admitted \
             alone, take no turns (their kinds' turns go to the others; see reach.md): {}",
            names.len(),
            names.join(", ")
        ));
    }
    x.book.summary.pace.admission = admitting.elapsed().as_secs_f64();
    let behaving = Instant::now();
    let behave = options.modes.contains(&Mode::Behaviour);
    if behave && !prepared.is_empty() && !x.book.left().is_zero() {
        // A lane of the pool a cell, each with its baseline's.
        let base_name = x.base_name.as_deref();
        let lanes: Vec<Cells> = std::iter::once(&x.cell)
            .chain(&more)
            .enumerate()
            .map(|(i, cell)| Cells {
                cell,
                baseline: match i {
                    0 => x.baseline.as_ref(),
                    i => more_bases.get(i - 1),
                }
                .zip(base_name),
            })
            .collect();
        let calm = latency(&x.cell.client).await;
        let cap = options.parallel.max(pace::MAX_WIDTH);
        let offers = offers(&prepared, &x.book.summary.reach);
        let mut jobs = Behaviour {
            book: &mut x.book,
            prepared: &prepared,
            perturbations: &perturbations,
            clients: lanes.iter().map(|c| c.cell.client.clone()).collect(),
            pacer: pace::Pacer::new(options.parallel, cap, calm),
            turns: Turns::new(
                options.share,
                &prepared.iter().map(|(s, ..)| groups(s)).collect::<Vec<_>>(),
            ),
            carried: prepared.iter().map(|_| Default::default()).collect(),
            put_back: vec![],
            offers,
            started: behaving,
            queue: Default::default(),
            shrinking: false,
        };
        let (runs, confirm) = (options.shrink_runs, options.confirm);
        let lanes = &lanes;
        pool(&mut jobs, |job, lane| match job {
            Job::Trial(st) => async move {
                let cells = lanes[lane];
                let (s, t, carried) = *st;
                let at = Instant::now();
                let out = run_compared(cells, &s, &t, exec::Settling::EndKnown).await;
                let seconds = at.elapsed().as_secs_f64();
                Done::Trial(Box::new(Ran {
                    s,
                    t,
                    out,
                    seconds,
                    lane,
                    carried,
                }))
            }
            .boxed_local(),
            Job::Shrink(p, plan) => async move {
                let cells = lanes[lane];
                Done::Shrunk(Box::new(shrink(cells, *p, plan, runs, confirm).await))
            }
            .boxed_local(),
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
    drop(more);
    drop(more_bases);
    drop(base_sessions);
    drop(sessions);
    Ok(summary)
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
        Some(_) => fires(cells, &s, &r.trial, &r.finding, exec::Settling::Bound)
            .await
            .hit
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
    // Replay shrinks within the budget and confirms whatever shrinking took.
    let plan = Plan {
        left: options.budget,
        side_by_side: if global { 1 } else { SIDE_BY_SIDE },
        confirm_at_once: !global,
        always_confirm: true,
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
    use std::path::PathBuf;
    use std::time::Duration;
    use trial::{Fields, Material, Step, Walk};

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
            own_updates: 0,
            settled_first: 0,
            walk: Walk::ALONE,
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
                    Step::Settle => {}
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
            cells: 1,
            settle: Duration::from_secs(1),
            confirm: 1,
            shrink_runs: 1,
            shrink_share: SHRINK_SHARE,
            share: Share::default(),
            dir: PathBuf::new(),
            baseline: None,
            gates: Gates::default(),
            known: vec![],
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
}
