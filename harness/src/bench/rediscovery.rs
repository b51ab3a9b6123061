//! `harness bench rediscovery`: the rediscovery benchmark anyone can rerun. Start with [`run`],
//! its [`Request`] and the [`List`] it reads.
//!
//! The list (`suites/rediscovery.yaml`, compiled in; `--list` reads another) names each known
//! bug that needs no real node, the release that has it, the release that fixed it, and the
//! finding that counts ([`Wanted`]: an oracle, a kind, text of the key). It is written before any
//! run and read here only: the explorer knows no bug.
//!
//! [`plan`] turns the list into one exploration per release, each with the list's bugs to find
//! there and the bugs it should no longer show; every exploration runs this harness's own
//! `explore` with its defaults, the same budget and seed ([`explore_command`]), one after
//! another. Each `explore.json` is read and [`judge`]d: a bug is found when a finding of its
//! bad release's exploration [`Wanted::matches`] it (the earliest, and when it was first
//! seen), and its fixed release is clean when none of that release's findings does. A finding
//! counts unless its confirming runs never fired it again; one that would count but was written
//! as it fired, unconfirmed, is first replayed to confirm it ([`confirm`]). The table
//! is printed and written as `rediscovery.md` and `rediscovery.json` ([`markdown`]), rewritten
//! after every exploration, with the date, commit, machine and the command that reproduces it.
//! `--dry-run` prints the plan ([`render_plan`]) and runs nothing.
//!
//! Exit codes: 0 when every exploration ran and every fixed release was clean; 1 when an
//! exploration failed (its log says why) or a fixed release showed a bug that should be fixed
//! there; 1 on an error (an unreadable list, a release it does not name).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

pub(crate) mod fixtures;
mod judge;
mod list;
mod plan;
mod render;

pub use self::judge::{Fixed, Found, Outcome, Row, Seen, judge, unconfirmed};
pub use self::list::{BUILTIN, BUILTIN_PATH, Bug, List, Wanted, key_matches, kind_names};
pub use self::plan::{Exploration, Request, command, duration, explore_command, plan, render_plan};
pub use self::render::{Ran, Report, markdown};

/// The default budget of each exploration, as the benchmark is defined
/// (docs/exploration/rediscovery.md).
pub const DEFAULT_BUDGET: &str = "30m";

/// The default seed of each exploration.
pub const DEFAULT_SEED: u64 = 7;

/// The budget of a replay that shrinks and confirms a finding written as it fired
/// ([`confirm`]), and how many such replays an exploration's findings may take.
const REPLAY_BUDGET: Duration = Duration::from_secs(5 * 60);
const REPLAYS: usize = 8;

/// How much longer than its budget an exploration may run (bring-up, shrinking and confirming
/// what it found, teardown) before it is stopped as hung.
const OVERRUN: Duration = Duration::from_secs(30 * 60);

/// What failed.
#[derive(Debug, thiserror::Error)]
pub enum RediscoveryError {
    /// The list file could not be read.
    #[error("read the rediscovery list {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The list does not parse, or says something it cannot mean.
    #[error("read the rediscovery list {path}: {detail}")]
    List {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// `--releases` names a release on which the list has no bug to find or to miss.
    #[error(
        "plan an exploration of {release}: the list has no bug present or fixed there (its releases: {known})"
    )]
    UnknownRelease {
        /// The release asked for.
        release: String,
        /// The releases the list names.
        known: String,
    },
    /// The report directory or a file in it could not be written.
    #[error("write {}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// This harness's executable could not be found.
    #[error("find this harness's executable to run `explore` with")]
    Executable(#[source] std::io::Error),
}

/// The error a harness command printed last in `log` (`error: ...` and its `caused by:`
/// lines, on one line), if any.
pub fn error_of(log: &str) -> Option<String> {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.iter().rposition(|l| l.starts_with("error: "))?;
    let mut out = lines[start].trim_start_matches("error: ").to_string();
    for l in &lines[start + 1..] {
        match l.trim_start().strip_prefix("caused by: ") {
            Some(cause) => {
                out.push_str(": ");
                out.push_str(cause);
            }
            None => break,
        }
    }
    Some(out)
}

/// Runs this executable with `args`, its output to `log`, within `bound`: past it the child is
/// interrupted (SIGINT: it tears its cell down) and killed if it has not ended
/// [`crate::bench::CHILD_TEARDOWN`] later. Returns how it exited (none: interrupted at the
/// bound), or why it could not run.
async fn child(
    binary: &Path,
    args: &[String],
    log: &Path,
    bound: Duration,
) -> Result<Option<std::process::ExitStatus>, String> {
    let out = std::fs::File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("open {}: {e}", log.display()))?;
    let mut child = tokio::process::Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("start {}: {e}", binary.display()))?;
    let mut stop = crate::bench::ChildHarness::watch(&child);
    let status = match tokio::time::timeout(bound, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGINT,
                );
            }
            if tokio::time::timeout(crate::bench::CHILD_TEARDOWN, child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
            stop.ended();
            return Ok(None);
        }
    };
    stop.ended();
    status
        .map(Some)
        .map_err(|e| format!("wait for {}: {e}", binary.display()))
}

/// Runs `explore` (this executable) with `args`, its output to `log`, within `bound` (its
/// budget and [`OVERRUN`]; [`child`]). Returns why it failed, if it did.
async fn explore(binary: &Path, args: &[String], log: &Path, bound: Duration) -> Option<String> {
    match child(binary, args, log, bound).await {
        Ok(Some(s)) if s.success() => None,
        Ok(Some(s)) => {
            let said = std::fs::read_to_string(log)
                .ok()
                .and_then(|l| error_of(&l))
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            Some(format!("explore exited with {s}{said}"))
        }
        Ok(None) => Some(format!(
            "did not end within {} (its budget and {} more): interrupted",
            duration(bound),
            duration(OVERRUN)
        )),
        Err(why) => Some(why),
    }
}

/// Confirms the findings of exploration `e` that would count for its bugs (to find, or to be
/// clean of) but were written as they fired ([`unconfirmed`]): each is replayed
/// (`explore --replay`, which shrinks and confirms it in its directory, [`REPLAY_BUDGET`]) and
/// read again, the earliest for each bug first, until every counting finding is confirmed or
/// [`REPLAYS`] ran. A finding its confirming runs never fire again then counts for nothing
/// ([`crate::explore::Reported::refuted`]) and the next one may. Returns the replays run and,
/// of them, those refuted.
async fn confirm(
    binary: &Path,
    list: &List,
    e: &Exploration,
    summary: &mut crate::explore::Summary,
    logs: &Path,
) -> (usize, usize) {
    let bugs: Vec<usize> = e.find.iter().chain(&e.clean).copied().collect();
    let mut tried = std::collections::BTreeSet::new();
    let mut refuted = 0;
    while tried.len() < REPLAYS {
        let next = unconfirmed(list, &bugs, &summary.findings, &tried);
        let Some(&i) = next.first() else { break };
        let dir = summary.findings[i].dir.clone();
        tried.insert(dir.clone());
        let log = logs.join(format!("{}-replay-{}.log", e.release, tried.len()));
        println!(
            "  replaying {} ({} `{}`, written as it fired; log: {})",
            dir.display(),
            summary.findings[i].finding.subject,
            summary.findings[i].finding.key,
            log.display()
        );
        let args: Vec<String> = [
            "explore",
            "--replay",
            &dir.display().to_string(),
            "--budget",
            &duration(REPLAY_BUDGET),
            "--report-dir",
            &logs.display().to_string(),
        ]
        .map(String::from)
        .to_vec();
        let ran = child(binary, &args, &log, REPLAY_BUDGET + OVERRUN).await;
        match crate::explore::output::read_finding(&dir) {
            Ok(again) if again.confirmed() => {
                println!(
                    "    fired again in {} of {} runs",
                    again.reproduced, again.confirm_runs
                );
                refuted += usize::from(again.refuted());
                summary.findings[i] = crate::explore::Reported { dir, ..again };
            }
            _ => {
                let why = match ran {
                    Ok(Some(status)) => format!("the replay exited with {status}"),
                    Ok(None) => format!(
                        "the replay did not end within {}",
                        duration(REPLAY_BUDGET + OVERRUN)
                    ),
                    Err(why) => why,
                };
                println!("    not confirmed ({why}): it counts as written");
            }
        }
    }
    (tried.len(), refuted)
}

/// Writes the report as `rediscovery.md` and `rediscovery.json` in `out`; returns the Markdown.
fn write(out: &Path, report: &Report) -> Result<String, RediscoveryError> {
    let md = markdown(report);
    let json = serde_json::to_string_pretty(report).expect("a report serializes");
    for (name, text) in [("rediscovery.md", &md), ("rediscovery.json", &json)] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|source| RediscoveryError::Write { path, source })?;
    }
    Ok(md)
}

/// Runs the benchmark (or, with `dry_run`, prints its plan): each release's exploration in
/// turn, the report rewritten after each, then printed.
pub async fn run(request: Request) -> Result<ExitCode, RediscoveryError> {
    let list = List::load(request.list.as_deref())?;
    let plan = plan(&list, &request.releases)?;
    let (date, stamp) = super::flakes::now();
    let out = request
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("reports/rediscovery-{stamp}")));
    if request.dry_run {
        print!("{}", render_plan(&list, &plan, &request, &out));
        return Ok(ExitCode::SUCCESS);
    }
    let binary = std::env::current_exe().map_err(RediscoveryError::Executable)?;
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).map_err(|source| RediscoveryError::Write {
        path: logs.clone(),
        source,
    })?;
    let absolute = std::fs::canonicalize(&out).map_err(|source| RediscoveryError::Write {
        path: out.clone(),
        source,
    })?;
    let mut report = Report {
        date,
        commit: super::commit(),
        machine: super::flakes::machine(),
        command: command(&request),
        budget: request.budget.as_secs(),
        seed: request.seed,
        explorations: vec![],
        bugs: judge(&list, &plan, &BTreeMap::new()),
    };
    println!("{}", report.command);
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    for (n, e) in plan.iter().enumerate() {
        let dir = absolute.join(&e.release);
        let log = logs.join(format!("{}.log", e.release));
        let args = explore_command(&list, &e.release, &request, &dir);
        println!(
            "exploration {}/{}: {}@{} for {}, seed {}: {} bug(s) to find, {} fixed here (log: {})",
            n + 1,
            plan.len(),
            list.controller,
            e.release,
            duration(request.budget),
            request.seed,
            e.find.len(),
            e.clean.len(),
            log.display()
        );
        let t = Instant::now();
        let failed = explore(&binary, &args, &log, request.budget + OVERRUN).await;
        let mut ran = Ran {
            release: e.release.clone(),
            command: shlex::try_join(args.iter().map(String::as_str))
                .unwrap_or_else(|_| args.join(" ")),
            wall: t.elapsed().as_secs_f64(),
            log: log.clone(),
            ..Ran::default()
        };
        let outcome: Outcome = match failed {
            Some(why) => Err(why),
            None => super::explore::run_dir(&dir)
                .and_then(|d| {
                    ran.dir = Some(d.clone());
                    crate::explore::read_summary(&d)
                })
                .map_err(|e| format!("{e:#}")),
        };
        let mut outcome = outcome;
        if let Ok(s) = &mut outcome {
            ran.replayed = confirm(&binary, &list, e, s, &logs).await;
        }
        match &outcome {
            Ok(s) => {
                ran.ok = true;
                ran.trials = s.trials.values().sum();
                ran.findings = (s.findings.len(), s.stable().count());
            }
            Err(why) => ran.error = Some(why.clone()),
        }
        match &outcome {
            Ok(_) => println!(
                "  {:.0} s: {} trials, {} findings ({} stable)",
                ran.wall, ran.trials, ran.findings.0, ran.findings.1
            ),
            Err(why) => println!("  {:.0} s: {why}", ran.wall),
        }
        outcomes.insert(e.release.clone(), outcome);
        report.explorations.push(ran);
        report.bugs = judge(&list, &plan, &outcomes);
        write(&out, &report)?;
    }
    let md = write(&out, &report)?;
    println!("\n{md}");
    println!("written: {}", out.join("rediscovery.md").display());
    let failed = report.explorations.iter().any(|e| !e.ok)
        || report
            .bugs
            .iter()
            .any(|b| matches!(b.fixed, Fixed::Seen(_)));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_exploration_says_the_error_its_log_ends_with() {
        let log = "exploring with seed 7\nerror: an earlier one\nCloneSet: admission trials\n\
                   error: bring up the cell\n  caused by: build openkruise@v1.7.0\n  \
                   caused by: go: no such module\nafter\n";
        assert_eq!(
            error_of(log).as_deref(),
            Some("bring up the cell: build openkruise@v1.7.0: go: no such module")
        );
        assert_eq!(error_of("all fine\n"), None);
    }
}
