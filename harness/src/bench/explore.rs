//! `harness bench explore`: exploration's pace, measured side by side. Start with [`run`].
//!
//! Each binary given (harness executables: this one by default, another commit's to compare
//! with) runs `explore` with the same budget, seed and flags, the binaries taking turns run
//! after run in one sitting. Each run's `explore.json` says what the run made (behaviour
//! trials by subject and, from binaries that keep it, how many were distinct and where their
//! time went: [`crate::explore::pace`]); while it runs, every process it started is sampled
//! from `/proc` each second, and its CPU seconds are summed by class ([`class`]). The
//! medians by binary, and each binary's ratio to the first, go to `bench-explore.md` and
//! `bench-explore.json` with the date, commit, machine and the command that reproduces them,
//! and after them which of the first binary's stable findings each other binary found again
//! ([`sensitivity`]). With `--from`, explorations already made are reported on the same way,
//! none run ([`report_from`]).

pub mod sensitivity;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::explore::Summary;
use crate::process::Stat;

/// What to compare (the flags of `harness bench explore`).
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Harness executables to compare, the first the reference (default: this one).
    pub binaries: Vec<PathBuf>,
    /// Runs of each.
    pub runs: usize,
    /// Each exploration's budget.
    pub budget: Duration,
    /// Each exploration's seed.
    pub seed: u64,
    /// More flags of `explore`, the same for every run.
    pub explore_args: Vec<String>,
    /// Where the report goes (default: `reports/bench-explore-<time>`).
    pub out: Option<PathBuf>,
    /// Explorations already made to report on instead of running any (run directories, or
    /// directories holding them), the first the reference.
    pub from: Vec<PathBuf>,
}

/// One exploration run, as measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// The binary.
    pub binary: String,
    /// Its run number, from 1.
    pub run: usize,
    /// Wall seconds of the whole `explore`.
    pub wall: f64,
    /// Whether it exited 0.
    pub ok: bool,
    /// Behaviour trials by subject (what every binary's `explore.json` says).
    pub behaviour: BTreeMap<String, usize>,
    /// Admission trials.
    pub admission: usize,
    /// Findings reported, and of them those that reproduced every time.
    pub findings: (usize, usize),
    /// The findings, to compare with the other binaries' ([`sensitivity`]).
    #[serde(default)]
    pub seen: Vec<sensitivity::Seen>,
    /// Where its time went, when the binary keeps it.
    pub pace: Option<crate::explore::pace::Pace>,
    /// CPU seconds of its processes by class ([`class`]).
    pub cpu: BTreeMap<String, f64>,
}

impl Sample {
    fn behaviour_trials(&self) -> usize {
        self.behaviour.values().sum()
    }

    /// Distinct behaviour trials per minute of its behaviour phase, when the binary keeps its
    /// pace.
    fn distinct_per_minute(&self) -> Option<f64> {
        self.pace.as_ref().map(|p| p.distinct_per_minute())
    }
}

/// The class of a process, by its command name (`/proc/<pid>/comm`, at most 15 bytes): the
/// control plane's parts, the controller's manager, the harness and the rest.
pub fn class(comm: &str) -> &'static str {
    match comm {
        "kube-apiserver" => "apiserver",
        "etcd" => "etcd",
        "kube-controller" => "kube-controller-manager",
        "kube-scheduler" => "scheduler",
        "kwok" => "kwok",
        // A harness executable is often named after its commit (`harness-083f75d`).
        c if c.starts_with("harness") => "harness",
        c if c.contains("manager") => "controller manager",
        _ => "other",
    }
}

/// `USER_HZ`: the clock ticks a second of `/proc/<pid>/stat`'s CPU times, 100 on every Linux
/// architecture the harness runs on.
const TICKS: f64 = 100.0;

/// A process seen in `/proc`.
#[derive(Debug, Clone, PartialEq)]
struct Proc {
    pid: u32,
    stat: Stat,
}

/// Every process now.
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            Some(Proc {
                pid,
                stat: Stat::of(pid)?,
            })
        })
        .collect()
}

/// Of `all`, `root` and every process under it.
fn descendants(root: u32, all: &[Proc]) -> Vec<&Proc> {
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in all {
        children.entry(p.stat.ppid).or_default().push(p);
    }
    let mut out: Vec<&Proc> = all.iter().filter(|p| p.pid == root).collect();
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i].pid) {
            out.extend(c.iter().copied());
        }
        i += 1;
    }
    out
}

/// The CPU of a process tree, sampled each second until stopped: each process's last ticks
/// seen, kept after it ends (what it used in its last second is lost).
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<HashMap<(u32, u64), (String, u64)>>,
}

impl Sampler {
    fn start(root: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen: HashMap<(u32, u64), (String, u64)> = HashMap::new();
            while !flag.load(Ordering::Relaxed) {
                let all = processes();
                for p in descendants(root, &all) {
                    seen.insert(
                        (p.pid, p.stat.start_time),
                        (p.stat.comm.clone(), p.stat.ticks),
                    );
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            seen
        });
        Self { stop, thread }
    }

    /// CPU seconds by class.
    fn stop(self) -> BTreeMap<String, f64> {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().unwrap_or_default();
        let mut out = BTreeMap::new();
        for (comm, ticks) in seen.values() {
            *out.entry(class(comm).to_string()).or_default() += *ticks as f64 / TICKS;
        }
        out
    }
}

/// The one directory `explore` made under `dir`.
pub(super) fn run_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("explore.json").is_file() || p.join("cells.json").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
        .with_context(|| format!("no explore.json or cells.json under {}", dir.display()))
}

/// Reads what a run wrote into `sample`; the exploration's own seconds.
fn read(sample: &mut Sample, dir: &Path) -> anyhow::Result<f64> {
    let path = run_dir(dir)?.join("explore.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let seconds = v["seconds"].as_f64().unwrap_or(0.0);
    // What every binary wrote: trials by mode and subject, the findings.
    for (k, n) in v["trials"].as_object().into_iter().flatten() {
        let n = n.as_u64().unwrap_or(0) as usize;
        match k.strip_prefix("behaviour ") {
            Some(s) => *sample.behaviour.entry(s.to_string()).or_default() += n,
            None => sample.admission += n,
        }
    }
    let findings = v["findings"].as_array().cloned().unwrap_or_default();
    let stable = findings.iter().filter(|f| f["stable"] == true).count();
    sample.findings = (findings.len(), stable);
    sample.seen = sensitivity::Seen::read(&findings);
    // What binaries that keep their pace wrote.
    if v.get("pace").is_some() {
        let s: Summary = serde_json::from_value(v)?;
        sample.pace = Some(s.pace);
    }
    Ok(seconds)
}

/// Runs `binary explore` once into `dir`, its output to `log`.
async fn explore_once(
    binary: &Path,
    request: &Request,
    dir: &Path,
    log: &Path,
) -> anyhow::Result<(f64, bool, BTreeMap<String, f64>)> {
    let out = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let err = out.try_clone()?;
    let budget = format!("{}s", request.budget.as_secs());
    let seed = request.seed.to_string();
    let t = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .args([
            "explore",
            "--budget",
            &budget,
            "--seed",
            &seed,
            "--report-dir",
        ])
        .arg(dir)
        .args(&request.explore_args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("start {}", binary.display()))?;
    let mut stop = super::ChildHarness::watch(&child);
    let sampler = Sampler::start(child.id().unwrap_or(0));
    let status = child.wait().await;
    stop.ended();
    let cpu = sampler.stop();
    let status = status?;
    if !status.success() {
        // How it ended (an exit code, or the signal that ended it), in the run's log and here:
        // a report written and then a failure says nothing else.
        let how = format!("bench: the exploration ended with {status}");
        println!("  {how}");
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
            use std::io::Write;
            let _ = writeln!(f, "{how}");
        }
    }
    Ok((t.elapsed().as_secs_f64(), status.success(), cpu))
}

/// The median of `xs` (0 when empty).
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n % 2 {
        1 => xs[n / 2],
        _ => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The report: what was run, on what, and the samples.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// When (RFC 3339, UTC).
    pub date: String,
    /// The commit of the binary that ran the bench (see [`super::commit`]).
    pub commit: String,
    /// CPUs and memory.
    pub machine: super::flakes::tally::Machine,
    /// The command that reproduces it.
    pub command: String,
    /// Every run.
    pub samples: Vec<Sample>,
}

/// The report as Markdown: a table of medians by binary (the first the reference of the
/// ratio), then one row a run, then what the first binary found that the others did not.
pub fn markdown(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "## Exploration pace, side by side\n");
    out.push_str(&r.machine.provenance(&r.date, &r.commit, &r.command));
    let mut binaries: Vec<&str> = vec![];
    for s in &r.samples {
        if !binaries.contains(&s.binary.as_str()) {
            binaries.push(&s.binary);
        }
    }
    let classes: Vec<String> = {
        let mut c: Vec<String> = r
            .samples
            .iter()
            .flat_map(|s| s.cpu.keys().cloned())
            .collect();
        c.sort();
        c.dedup();
        c
    };
    let _ = writeln!(
        out,
        "Medians of {} run(s) each. Distinct: behaviour trials whose steps no earlier trial of \
         their subject had; per minute of the behaviour phase. `n/a`: the binary does not keep \
         its pace.\n",
        r.samples.len() / binaries.len().max(1)
    );
    let _ = write!(
        out,
        "| binary | behaviour trials | distinct | distinct / min | ratio | settle s | shrink s | confirm s | bring-up s | findings (stable) |"
    );
    for c in &classes {
        let _ = write!(out, " CPU {c} s |");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---{}|", "|--:".repeat(9 + classes.len()));
    let reference = binaries
        .first()
        .map(|b| per_minute(r, b))
        .unwrap_or_default();
    for b in &binaries {
        let runs: Vec<&Sample> = r.samples.iter().filter(|s| s.binary == *b).collect();
        let m = |f: &dyn Fn(&Sample) -> f64| median(runs.iter().map(|s| f(s)).collect());
        let paced = runs.iter().all(|s| s.pace.is_some());
        let pace = |f: &dyn Fn(&crate::explore::pace::Pace) -> f64| match paced {
            true => format!("{:.1}", m(&|s| s.pace.as_ref().map_or(0.0, f))),
            false => "n/a".into(),
        };
        let rate = per_minute(r, b);
        let ratio = match (rate, reference) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
            _ => "n/a".into(),
        };
        let _ = write!(
            out,
            "| `{b}` | {:.0} | {} | {} | {ratio} | {} | {} | {} | {} | {:.0} ({:.0}) |",
            m(&|s| s.behaviour_trials() as f64),
            pace(&|p| p.distinct() as f64),
            rate.map_or("n/a".into(), |x| format!("{x:.2}")),
            pace(&|p| p.phase("settle")),
            pace(&|p| p.shrinking),
            pace(&|p| p.confirming),
            pace(&|p| p.bring_up),
            m(&|s| s.findings.0 as f64),
            m(&|s| s.findings.1 as f64),
        );
        for c in &classes {
            let _ = write!(
                out,
                " {:.0} |",
                m(&|s| s.cpu.get(c).copied().unwrap_or(0.0))
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "\n| binary | run | wall s | ok | behaviour trials by kind (subjects) |"
    );
    let _ = writeln!(out, "|---|--:|--:|---|---|");
    for s in &r.samples {
        // By kind: a run can have hundreds of subjects (`bench-explore.json` keeps them).
        let mut kinds: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (subject, n) in &s.behaviour {
            let k = kinds.entry(sensitivity::kind(subject)).or_default();
            k.0 += n;
            k.1 += 1;
        }
        let by: Vec<String> = kinds
            .iter()
            .map(|(k, (n, subjects))| format!("{k} {n} ({subjects})"))
            .collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {:.0} | {} | {} |",
            s.binary,
            s.run,
            s.wall,
            if s.ok { "yes" } else { "no" },
            by.join(", ")
        );
    }
    let runs: Vec<(String, Vec<sensitivity::Seen>)> = r
        .samples
        .iter()
        .map(|s| (s.binary.clone(), s.seen.clone()))
        .collect();
    let (wanted, rows) = sensitivity::compare(&runs);
    out.push_str(&sensitivity::markdown(&wanted, &rows));
    out
}

/// The median distinct behaviour trials per minute of binary `b`, when it keeps its pace.
fn per_minute(r: &Report, b: &str) -> Option<f64> {
    let rates: Option<Vec<f64>> = r
        .samples
        .iter()
        .filter(|s| s.binary == b)
        .map(Sample::distinct_per_minute)
        .collect();
    rates.map(median)
}

/// The command that reproduces `request`.
fn command(request: &Request) -> String {
    let mut words = vec!["harness".to_string(), "bench".into(), "explore".into()];
    if !request.from.is_empty() {
        for d in &request.from {
            words.extend(["--from".into(), d.display().to_string()]);
        }
        return words.join(" ");
    }
    for b in &request.binaries {
        words.extend(["--binary".into(), b.display().to_string()]);
    }
    words.extend([
        "--runs".into(),
        request.runs.to_string(),
        "--budget".into(),
        format!("{}s", request.budget.as_secs()),
        "--seed".into(),
        request.seed.to_string(),
    ]);
    if !request.explore_args.is_empty() {
        words.push("--".into());
        words.extend(request.explore_args.iter().cloned());
    }
    words.join(" ")
}

/// Runs the bench: each binary's explorations, interleaved, then the report (printed and
/// written). Exit 1 when a run did not exit 0 (its log says why).
pub async fn run(mut request: Request) -> anyhow::Result<ExitCode> {
    if !request.from.is_empty() {
        return report_from(&request);
    }
    if request.binaries.is_empty() {
        request.binaries.push(std::env::current_exe()?);
    }
    for b in &request.binaries {
        anyhow::ensure!(
            b.is_file(),
            "--binary {}: no such file; give a harness executable (e.g. target/debug/harness of \
             another commit's build)",
            b.display()
        );
    }
    let (mut report, out) = begin(&request);
    std::fs::create_dir_all(out.join("logs"))
        .with_context(|| format!("create {}", out.display()))?;
    println!("{}", report.command);
    let mut failed = false;
    for run in 1..=request.runs.max(1) {
        for (i, b) in request.binaries.iter().enumerate() {
            let label = format!("{}-{i}-run-{run}", stem(b));
            let dir = std::fs::canonicalize(&out)?.join(&label);
            let log = out.join("logs").join(format!("{label}.log"));
            println!(
                "run {run}/{} of {}: explore --budget {}s --seed {} (log: {})",
                request.runs.max(1),
                b.display(),
                request.budget.as_secs(),
                request.seed,
                log.display()
            );
            let (wall, ok, cpu) = explore_once(b, &request, &dir, &log).await?;
            let mut sample = Sample {
                binary: b.display().to_string(),
                run,
                wall,
                ok,
                cpu,
                ..Sample::default()
            };
            if let Err(e) = read(&mut sample, &dir) {
                println!("  its explore.json was not read: {e:#}");
                sample.ok = false;
            }
            failed |= !sample.ok;
            println!(
                "  {:.0} s: {} behaviour trials{}",
                wall,
                sample.behaviour_trials(),
                sample
                    .pace
                    .as_ref()
                    .map(|p| format!(
                        ", {} distinct ({:.2} a minute)",
                        p.distinct(),
                        p.distinct_per_minute()
                    ))
                    .unwrap_or_default()
            );
            report.samples.push(sample);
        }
    }
    finish(&report, &out)?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Reports on the explorations `request.from` names, running none: each read as a run's
/// sample (its wall time the exploration's own, no CPU sampled).
fn report_from(request: &Request) -> anyhow::Result<ExitCode> {
    let (mut report, out) = begin(request);
    for d in &request.from {
        let mut sample = Sample {
            binary: d.display().to_string(),
            run: 1,
            ok: true,
            ..Sample::default()
        };
        sample.wall = read(&mut sample, d).with_context(|| {
            format!(
                "--from {}: not an exploration's run directory (one holding explore.json, or \
                 a directory holding such runs)",
                d.display()
            )
        })?;
        report.samples.push(sample);
    }
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    finish(&report, &out)?;
    Ok(ExitCode::SUCCESS)
}

/// A report of `request` with no sample yet, and where it goes (default:
/// `reports/bench-explore-<time>`).
fn begin(request: &Request) -> (Report, PathBuf) {
    let (date, stamp) = super::flakes::now();
    let out = request
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("reports/bench-explore-{stamp}")));
    let report = Report {
        date,
        commit: super::commit(),
        machine: super::flakes::machine(),
        command: command(request),
        samples: vec![],
    };
    (report, out)
}

/// Writes `report` into `out` (`bench-explore.md` and `.json`) and prints it.
fn finish(report: &Report, out: &Path) -> anyhow::Result<()> {
    let md = markdown(report);
    std::fs::write(out.join("bench-explore.md"), &md)?;
    std::fs::write(
        out.join("bench-explore.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    println!("\n{md}");
    println!("written: {}", out.join("bench-explore.md").display());
    Ok(())
}

/// A short name of a binary for its directories: its parent directories' names and its own.
fn stem(b: &Path) -> String {
    b.components()
        .rev()
        .take(3)
        .filter_map(|c| c.as_os_str().to_str())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("-")
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_parent_name_start_and_cpu_ticks_even_with_spaces_in_the_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice threads itrealvalue starttime ...
        let line =
            "42 (kube apiserver) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 0 0";
        let p = Stat::parse(line).unwrap();
        assert_eq!(p.ppid, 7);
        assert_eq!(p.comm, "kube apiserver");
        assert_eq!(p.ticks, 300);
        assert_eq!(p.start_time, 12345);
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn the_tree_under_a_process_is_its_children_and_theirs_and_nothing_else() {
        let p = |pid, ppid| Proc {
            pid,
            stat: Stat {
                comm: String::new(),
                state: "S".into(),
                ppid,
                pgrp: 0,
                ticks: 0,
                start_time: 0,
            },
        };
        let all = [p(1, 0), p(10, 1), p(11, 10), p(12, 11), p(20, 1), p(13, 10)];
        let mut under: Vec<u32> = descendants(10, &all).iter().map(|p| p.pid).collect();
        under.sort();
        assert_eq!(under, [10, 11, 12, 13]);
        assert!(descendants(99, &all).is_empty());
    }

    #[test]
    fn processes_are_classed_by_their_command_name() {
        assert_eq!(class("kube-apiserver"), "apiserver");
        assert_eq!(class("kube-controller"), "kube-controller-manager");
        assert_eq!(class("kruise-manager"), "controller manager");
        assert_eq!(class("harness"), "harness");
        assert_eq!(class("harness-083f75d"), "harness");
        assert_eq!(class("sh"), "other");
    }

    #[test]
    fn the_report_gives_medians_by_binary_and_the_ratio_to_the_first() {
        use crate::explore::pace::Pace;
        let pace = |behaviour: f64, n: usize| {
            let mut p = Pace::default();
            p.behaviour = behaviour;
            for i in 0..n {
                let set = [("spec.replicas".to_string(), serde_json::json!(i))].into();
                let t = crate::explore::trial::Trial {
                    subject: "CloneSet".into(),
                    mode: crate::explore::trial::Mode::Behaviour,
                    seed: 1,
                    index: i as u64,
                    steps: vec![crate::explore::trial::Step::Create { set }],
                };
                p.behaviour_trial(0, &t, 1.0, &[]);
            }
            p
        };
        let sample = |binary: &str, run, pace| Sample {
            binary: binary.into(),
            run,
            ok: true,
            behaviour: [("CloneSet".to_string(), 4)].into(),
            pace,
            cpu: [("apiserver".to_string(), 10.0)].into(),
            ..Sample::default()
        };
        let r = Report {
            date: "d".into(),
            commit: "c".into(),
            machine: super::super::flakes::tally::Machine {
                cpus: 2,
                memory_kib: Some(1024 * 1024),
            },
            command: "harness bench explore".into(),
            samples: vec![
                sample("old", 1, None),
                sample("new", 1, Some(pace(60.0, 4))),
                sample("old", 2, None),
                sample("new", 2, Some(pace(60.0, 6))),
            ],
        };
        let md = markdown(&r);
        // The first binary keeps no pace: no rate, no ratio.
        assert!(md.contains("| `old` | 4 | n/a | n/a | n/a |"), "{md}");
        // The second: distinct 4 and 6 in a minute, median 5.
        assert!(md.contains("| `new` | 4 | 5.0 | 5.00 | n/a |"), "{md}");
        assert!(md.contains(" CPU apiserver s |"), "{md}");
        assert!(
            md.contains("| `old` | 1 | 0 | yes | CloneSet 4 (1) |"),
            "{md}"
        );
        assert_eq!(per_minute(&r, "new"), Some(5.0));
        assert_eq!(per_minute(&r, "old"), None);
    }

    #[test]
    fn explorations_already_made_are_reported_and_compared_without_running_any() {
        let root = tempfile::tempdir().unwrap();
        let finding = |key: &str, stable: bool| {
            serde_json::json!({"finding": {"oracle": "O2-convergence", "subject": "CloneSet",
                "key": key, "observed": "", "expected": ""}, "stable": stable})
        };
        let run = |name: &str, findings: Vec<serde_json::Value>| {
            // A directory holding one run, as `--report-dir` leaves it.
            let dir = root.path().join(name).join("explore-20261203-000000-abcd");
            std::fs::create_dir_all(&dir).unwrap();
            let v = serde_json::json!({"seconds": 1200.5, "trials": {"behaviour CloneSet": 4,
                "admission CloneSet": 10}, "findings": findings});
            std::fs::write(dir.join("explore.json"), v.to_string()).unwrap();
            root.path().join(name)
        };
        let old = run(
            "old",
            vec![finding("live pods", true), finding("image", true)],
        );
        let new = run("new", vec![finding("live pods", false)]);
        let out = root.path().join("report");
        let request = Request {
            from: vec![old, new],
            out: Some(out.clone()),
            ..Request::default()
        };
        assert_eq!(report_from(&request).unwrap(), ExitCode::SUCCESS);
        let md = std::fs::read_to_string(out.join("bench-explore.md")).unwrap();
        assert!(md.contains("| 1 | 0 | 0 | 1 |"), "{md}");
        assert!(md.contains("- O2 `CloneSet`: image"), "{md}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("bench-explore.json")).unwrap())
                .unwrap();
        assert_eq!(json["samples"][0]["wall"], 1200.5);
        assert_eq!(json["samples"][0]["admission"], 10);
        // Not an exploration: said so.
        let bad = Request {
            from: vec![root.path().join("report")],
            out: Some(root.path().join("again")),
            ..Request::default()
        };
        let e = report_from(&bad).unwrap_err();
        assert!(
            format!("{e:#}").contains("not an exploration's run directory"),
            "{e:#}"
        );
    }

    #[test]
    fn the_command_reproduces_the_request() {
        let r = Request {
            binaries: vec!["/a/harness".into(), "/b/harness".into()],
            runs: 3,
            budget: Duration::from_secs(1200),
            seed: 1,
            explore_args: vec!["--kinds".into(), "CloneSet".into()],
            out: None,
            from: vec![],
        };
        assert_eq!(
            command(&r),
            "harness bench explore --binary /a/harness --binary /b/harness --runs 3 --budget 1200s --seed 1 -- --kinds CloneSet"
        );
        // Explorations already made: only them.
        let from = Request {
            from: vec!["/runs/old".into(), "/runs/new".into()],
            ..r
        };
        assert_eq!(
            command(&from),
            "harness bench explore --from /runs/old --from /runs/new"
        );
        assert_eq!(
            stem(Path::new("/x/target/debug/harness")),
            "target-debug-harness"
        );
    }
}
