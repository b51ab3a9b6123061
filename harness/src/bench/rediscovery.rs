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
//! seen), and its fixed release is clean when none of that release's findings does. The table
//! is printed and written as `rediscovery.md` and `rediscovery.json` ([`markdown`]), rewritten
//! after every exploration, with the date, commit, machine and the command that reproduces it.
//! `--dry-run` prints the plan ([`render_plan`]) and runs nothing.
//!
//! Exit codes: 0 when every exploration ran and every fixed release was clean; 1 when an
//! exploration failed (its log says why) or a fixed release showed a bug that should be fixed
//! there; 1 on an error (an unreadable list, a release it does not name).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::explore::oracle::Finding;
use crate::explore::{Reported, Summary};
use crate::toolchain::versions::Version;

/// The checked-in list, `suites/rediscovery.yaml`.
pub const BUILTIN: &str = include_str!("../../../suites/rediscovery.yaml");

/// Where the checked-in list lives in the workspace.
pub const BUILTIN_PATH: &str = "suites/rediscovery.yaml";

/// The default budget of each exploration, as the benchmark is defined
/// (docs/exploration/rediscovery.md).
pub const DEFAULT_BUDGET: &str = "30m";

/// The default seed of each exploration.
pub const DEFAULT_SEED: u64 = 7;

/// How much longer than its budget an exploration may run (bring-up, shrinking and confirming
/// what it found, teardown) before it is stopped as hung.
const OVERRUN: Duration = Duration::from_secs(30 * 60);

/// How long a stopped exploration may take to tear down after SIGINT before it is killed.
const TEARDOWN: Duration = Duration::from_secs(120);

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

/// The list of known bugs (`suites/rediscovery.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct List {
    /// The controller's name in `--controller NAME@TAG` (`openkruise`).
    pub controller: String,
    /// The releases that can be explored (those the Go module proxy serves), oldest first: the
    /// ground a bug's bad and fixed releases are chosen on.
    pub releases: Vec<String>,
    /// The bugs.
    pub bugs: Vec<Bug>,
}

/// One known bug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bug {
    /// Its ledger id (or a name of its own where `ledger` is false).
    pub id: String,
    /// Whether `id` is an entry of `suites/ledger.yaml`.
    #[serde(default = "yes")]
    pub ledger: bool,
    /// The row of the benchmark's table it belongs to (its 14 known bugs), if any.
    #[serde(default)]
    pub benchmark: Option<String>,
    /// The release to find it on: the newest explorable one that has it.
    pub bad: String,
    /// The first explorable release that no longer has it (none: unfixed, or none after).
    #[serde(default)]
    pub fixed: Option<String>,
    /// The finding that counts.
    pub finding: Wanted,
    /// Said with its row.
    #[serde(default)]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

/// The finding that counts for a bug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wanted {
    /// The oracle's short name (`O4`, see [`crate::explore::oracle::Oracle::short`]).
    pub oracle: String,
    /// The subject as `--kinds` names it: a subject (`WorkloadSpread.CloneSet`), or a kind
    /// that names all its subjects (`UnitedDeployment`).
    pub kind: String,
    /// Text the finding's key must contain; `*` stands for any text between two parts.
    pub key: String,
}

impl Wanted {
    /// Whether `f` is this finding: its oracle, a subject `kind` names, and a key
    /// [`key_matches`] the pattern.
    pub fn matches(&self, f: &Finding) -> bool {
        f.oracle.short() == self.oracle
            && kind_names(&self.kind, &f.subject)
            && key_matches(&self.key, &f.key)
    }

    /// The earliest finding of `findings` that is this one.
    pub fn first<'a>(&self, findings: &'a [Reported]) -> Option<&'a Reported> {
        findings
            .iter()
            .filter(|r| self.matches(&r.finding))
            .min_by(|a, b| a.first_seen.total_cmp(&b.first_seen))
    }

    /// `O4 CloneSet "admits * ..."`.
    fn describe(&self) -> String {
        format!("{} {} `{}`", self.oracle, self.kind, self.key)
    }
}

/// Whether `kind` names `subject` as `--kinds` does ([`crate::explore::subject::Subject::selected_by`]),
/// in any case: the subject's name, the start of it up to a `.` or `@`
/// (`UnitedDeployment.cloneSetTemplate` names `UnitedDeployment.cloneSetTemplate@v1beta1`), or
/// its family (`CloneSet` names `CloneSetWithClaims`, `UnitedDeployment` each member).
pub fn kind_names(kind: &str, subject: &str) -> bool {
    let (k, s) = (kind.to_ascii_lowercase(), subject.to_ascii_lowercase());
    s.strip_prefix(&k)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '@']))
        || crate::explore::subject::derive::family_of(subject)
            .is_some_and(|f| f.eq_ignore_ascii_case(kind))
}

/// Whether `key` holds the parts of `pattern` between its `*`s, in order.
pub fn key_matches(pattern: &str, key: &str) -> bool {
    let mut rest = key;
    for part in pattern.split('*').filter(|p| !p.is_empty()) {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

impl List {
    /// Parses and checks a list read from `path`.
    pub fn parse(text: &str, path: &str) -> Result<Self, RediscoveryError> {
        let error = |detail: String| RediscoveryError::List {
            path: path.into(),
            detail,
        };
        let list: Self = serde_saphyr::from_str(text).map_err(|e| error(e.to_string()))?;
        list.check().map_err(error)?;
        Ok(list)
    }

    /// Reads `path`, or the checked-in list when none.
    pub fn load(path: Option<&Path>) -> Result<Self, RediscoveryError> {
        match path {
            None => Self::parse(BUILTIN, BUILTIN_PATH),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| RediscoveryError::Read {
                    path: p.display().to_string(),
                    source,
                })?;
                Self::parse(&text, &p.display().to_string())
            }
        }
    }

    /// The checked-in list.
    pub fn builtin() -> Self {
        Self::load(None).expect("the checked-in rediscovery list parses")
    }

    /// What is wrong with it, if anything: ids twice, releases not among `releases` (or not
    /// a fixed release after the bad one), oracles and kinds the explorer does not have.
    fn check(&self) -> Result<(), String> {
        let mut ids = BTreeSet::new();
        let oracles: Vec<&str> = crate::explore::oracles().map(|o| o.short()).to_vec();
        let release = |r: &str| -> Result<Version, String> {
            if !self.releases.iter().any(|x| x == r) {
                return Err(format!("{r} is not among `releases`"));
            }
            let v: Version = r.parse().map_err(|e| format!("{r}: {e}"))?;
            format!("{}@{r}", self.controller)
                .parse::<crate::controller::ControllerRef>()
                .map_err(|e| e.to_string())?;
            Ok(v)
        };
        for b in &self.bugs {
            let at = |e: String| format!("bug `{}`: {e}", b.id);
            if !ids.insert(b.id.as_str()) {
                return Err(at("listed twice".into()));
            }
            let bad = release(&b.bad).map_err(at)?;
            if let Some(fixed) = &b.fixed
                && release(fixed).map_err(at)? <= bad
            {
                return Err(at(format!("fixed {fixed} is not after bad {}", b.bad)));
            }
            let w = &b.finding;
            if !oracles.contains(&w.oracle.as_str()) {
                return Err(at(format!(
                    "oracle `{}`: the oracles are {}",
                    w.oracle,
                    oracles.join(", ")
                )));
            }
            crate::explore::select(std::slice::from_ref(&w.kind))
                .map_err(|e| at(format!("{e:#}")))?;
            if w.key.replace('*', "").trim().is_empty() {
                return Err(at("an empty key".into()));
            }
        }
        Ok(())
    }
}

/// What to run (the flags of `harness bench rediscovery`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The list (default: the checked-in one).
    pub list: Option<PathBuf>,
    /// Each exploration's budget.
    pub budget: Duration,
    /// Each exploration's seed.
    pub seed: u64,
    /// Only these releases (default: every one the list names).
    pub releases: Vec<String>,
    /// Where the report goes (default: `reports/rediscovery-<time>`).
    pub out: Option<PathBuf>,
    /// Print the plan and run nothing.
    pub dry_run: bool,
    /// More flags of `explore`, the same for every exploration.
    pub explore_args: Vec<String>,
}

/// One exploration of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exploration {
    /// The release.
    pub release: String,
    /// The bugs to find there (indexes into [`List::bugs`]).
    pub find: Vec<usize>,
    /// The bugs fixed there, whose findings it must not show.
    pub clean: Vec<usize>,
}

/// Every exploration to run, oldest release first.
pub fn plan(list: &List, only: &[String]) -> Result<Vec<Exploration>, RediscoveryError> {
    let mut by: BTreeMap<Version, Exploration> = BTreeMap::new();
    for (i, b) in list.bugs.iter().enumerate() {
        let roles = std::iter::once((&b.bad, true)).chain(b.fixed.iter().map(|f| (f, false)));
        for (release, bad) in roles {
            // Checked by `List::check`: every release of a bug parses.
            let v: Version = release.parse().expect("a checked release");
            let e = by.entry(v).or_insert_with(|| Exploration {
                release: release.clone(),
                find: vec![],
                clean: vec![],
            });
            match bad {
                true => e.find.push(i),
                false => e.clean.push(i),
            }
        }
    }
    let all: Vec<Exploration> = by.into_values().collect();
    for r in only {
        if !all.iter().any(|e| &e.release == r) {
            return Err(RediscoveryError::UnknownRelease {
                release: r.clone(),
                known: all
                    .iter()
                    .map(|e| e.release.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(all
        .into_iter()
        .filter(|e| only.is_empty() || only.contains(&e.release))
        .collect())
}

/// A duration as the CLI takes it: `30m`, `1h`, `90s`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        _ if s > 0 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s > 0 && s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// The arguments of the harness's `explore` for `release` into `dir`: the defaults, with the
/// request's budget, seed and extra flags.
pub fn explore_command(list: &List, release: &str, request: &Request, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "explore".to_string(),
        "--controller".into(),
        format!("{}@{release}", list.controller),
        "--budget".into(),
        duration(request.budget),
        "--seed".into(),
        request.seed.to_string(),
        "--report-dir".into(),
        dir.display().to_string(),
    ]
    .to_vec();
    args.extend(request.explore_args.iter().cloned());
    args
}

/// The command that reproduces `request`.
pub fn command(request: &Request) -> String {
    let mut words = vec!["harness".to_string(), "bench".into(), "rediscovery".into()];
    if let Some(l) = &request.list {
        words.extend(["--list".into(), l.display().to_string()]);
    }
    words.extend([
        "--budget".into(),
        duration(request.budget),
        "--seed".into(),
        request.seed.to_string(),
    ]);
    if !request.releases.is_empty() {
        words.extend(["--releases".into(), request.releases.join(",")]);
    }
    if !request.explore_args.is_empty() {
        words.push("--".into());
        words.extend(request.explore_args.iter().cloned());
    }
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

/// The plan as text: each exploration's command, the bugs to find and those to miss.
pub fn render_plan(list: &List, plan: &[Exploration], request: &Request, out: &Path) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let listed = request
        .list
        .as_ref()
        .map_or(format!("{BUILTIN_PATH} (built in)"), |p| {
            p.display().to_string()
        });
    let bugs: BTreeSet<usize> = plan
        .iter()
        .flat_map(|e| e.find.iter().chain(&e.clean))
        .copied()
        .collect();
    let _ = writeln!(s, "{}", command(request));
    let _ = writeln!(
        s,
        "list: {listed}; {} of its {} bugs, {} exploration(s) of {} each ({} of exploring, bring-up aside); report: {}",
        bugs.len(),
        list.bugs.len(),
        plan.len(),
        duration(request.budget),
        duration(request.budget * plan.len() as u32),
        out.display()
    );
    for e in plan {
        let dir = out.join(&e.release);
        let args = explore_command(list, &e.release, request, &dir);
        let _ = writeln!(
            s,
            "\n{}: harness {}",
            e.release,
            shlex::try_join(args.iter().map(String::as_str)).unwrap_or_else(|_| args.join(" "))
        );
        match e.find.len() {
            0 => s.push_str("  find: none\n"),
            n => {
                let _ = writeln!(s, "  find ({n}):");
            }
        }
        for &i in &e.find {
            let b = &list.bugs[i];
            let _ = writeln!(s, "    {}: {}", b.id, b.finding.describe());
        }
        if !e.clean.is_empty() {
            let _ = writeln!(s, "  fixed here, must not show ({}):", e.clean.len());
            for &i in &e.clean {
                let b = &list.bugs[i];
                let _ = writeln!(s, "    {} (bad on {})", b.id, b.bad);
            }
        }
    }
    s
}

/// Whether a bug was found on its bad release.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Found {
    /// A finding that counts.
    Found(Seen),
    /// The exploration ran and showed none.
    NotFound,
    /// The exploration did not run to its end.
    NotRun {
        /// Why.
        why: String,
    },
    /// Its release was not asked for (`--releases`).
    NotAsked,
}

/// Whether a bug's fixed release is clean of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Fixed {
    /// The list names no fixed release.
    Unfixed,
    /// The exploration ran and showed no finding that counts.
    Clean,
    /// It showed one.
    Seen(Seen),
    /// The exploration did not run to its end.
    NotRun {
        /// Why.
        why: String,
    },
    /// Its release was not asked for (`--releases`).
    NotAsked,
}

/// A finding that counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seen {
    /// Seconds into the exploration when it was first seen.
    pub after: f64,
    /// Its subject.
    pub subject: String,
    /// Its key.
    pub key: String,
    /// Whether every confirming run fired it.
    pub stable: bool,
    /// Confirming runs that fired it, of `confirm_runs`.
    pub reproduced: usize,
    /// Confirming runs.
    pub confirm_runs: usize,
    /// Its directory.
    pub dir: PathBuf,
}

impl From<&Reported> for Seen {
    fn from(r: &Reported) -> Self {
        Self {
            after: r.first_seen,
            subject: r.finding.subject.clone(),
            key: r.finding.key.clone(),
            stable: r.stable,
            reproduced: r.reproduced,
            confirm_runs: r.confirm_runs,
            dir: r.dir.clone(),
        }
    }
}

/// One bug's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The bug, as listed.
    pub bug: Bug,
    /// On its bad release.
    pub found: Found,
    /// On its fixed release.
    pub fixed: Fixed,
}

/// What an exploration left: its summary, or why there is none.
pub type Outcome = Result<Summary, String>;

/// Each bug of `plan` judged from the explorations' outcomes by release (a release missing
/// from `outcomes` has not run yet).
pub fn judge(list: &List, plan: &[Exploration], outcomes: &BTreeMap<String, Outcome>) -> Vec<Row> {
    let asked = |r: &str| plan.iter().any(|e| e.release == r);
    let touched: BTreeSet<usize> = plan
        .iter()
        .flat_map(|e| e.find.iter().chain(&e.clean))
        .copied()
        .collect();
    let not_run = |r: &str| match outcomes.get(r) {
        Some(Err(why)) => why.clone(),
        _ => "not run yet".into(),
    };
    touched
        .into_iter()
        .map(|i| {
            let b = &list.bugs[i];
            let found = match outcomes.get(&b.bad) {
                _ if !asked(&b.bad) => Found::NotAsked,
                Some(Ok(s)) => match b.finding.first(&s.findings) {
                    Some(r) => Found::Found(r.into()),
                    None => Found::NotFound,
                },
                _ => Found::NotRun {
                    why: not_run(&b.bad),
                },
            };
            let fixed = match &b.fixed {
                None => Fixed::Unfixed,
                Some(f) if !asked(f) => Fixed::NotAsked,
                Some(f) => match outcomes.get(f) {
                    Some(Ok(s)) => match b.finding.first(&s.findings) {
                        Some(r) => Fixed::Seen(r.into()),
                        None => Fixed::Clean,
                    },
                    _ => Fixed::NotRun { why: not_run(f) },
                },
            };
            Row {
                bug: b.clone(),
                found,
                fixed,
            }
        })
        .collect()
}

/// One exploration as it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ran {
    /// The release.
    pub release: String,
    /// Its command line (the harness's arguments).
    pub command: String,
    /// Wall seconds, bring-up and teardown included.
    pub wall: f64,
    /// Whether it exited 0 and its `explore.json` was read.
    pub ok: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    /// Trials run.
    pub trials: usize,
    /// Findings reported, and of them the stable ones.
    pub findings: (usize, usize),
    /// Its directory (`explore.json`, `findings/`).
    pub dir: Option<PathBuf>,
    /// Its output.
    pub log: PathBuf,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// When (RFC 3339, UTC).
    pub date: String,
    /// The commit of the workspace the bench ran in.
    pub commit: String,
    /// CPUs and memory.
    pub machine: super::flakes::tally::Machine,
    /// The command that reproduces it.
    pub command: String,
    /// Each exploration's budget, seconds.
    pub budget: u64,
    /// Each exploration's seed.
    pub seed: u64,
    /// The explorations, in the order they ran.
    pub explorations: Vec<Ran>,
    /// Each bug.
    pub bugs: Vec<Row>,
}

/// A Markdown table cell: no `|` or line break breaks the row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The report as Markdown: what ran, a summary strip, the table (bug, bad release, found,
/// oracle, after, fixed release, clean), then what counted and each row's note.
pub fn markdown(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "## Rediscovery\n");
    out.push_str(&r.machine.provenance(&r.date, &r.commit, &r.command));
    let judged: Vec<&Row> = r
        .bugs
        .iter()
        .filter(|b| matches!(b.found, Found::Found(_) | Found::NotFound))
        .collect();
    let found = judged
        .iter()
        .filter(|b| matches!(b.found, Found::Found(_)))
        .count();
    let mut rows: BTreeMap<&str, bool> = BTreeMap::new();
    for b in &judged {
        if let Some(row) = &b.bug.benchmark {
            *rows.entry(row).or_default() |= matches!(b.found, Found::Found(_));
        }
    }
    let checked: Vec<&Row> = r
        .bugs
        .iter()
        .filter(|b| matches!(b.fixed, Fixed::Clean | Fixed::Seen(_)))
        .collect();
    let clean = checked
        .iter()
        .filter(|b| matches!(b.fixed, Fixed::Clean))
        .count();
    let _ = writeln!(
        out,
        "**Found {found} of {}** bugs on their bad release · **the benchmark's rows: {} of {}** \
         · **fixed releases clean: {clean} of {}** · {} exploration(s) of {} each, seed {}\n",
        judged.len(),
        rows.values().filter(|f| **f).count(),
        rows.len(),
        checked.len(),
        r.explorations.len(),
        duration(Duration::from_secs(r.budget)),
        r.seed
    );
    let _ = writeln!(
        out,
        "| bug | bad release | found | oracle | after | fixed release | clean |"
    );
    let _ = writeln!(out, "|---|---|---|---|--:|---|---|");
    for row in &r.bugs {
        let b = &row.bug;
        let (found, after) = match &row.found {
            Found::Found(s) => (
                match (s.confirm_runs, s.stable) {
                    (0, _) => "**yes** (not confirmed)".to_string(),
                    (_, true) => "**yes**".to_string(),
                    _ => format!("**yes** (unstable, {}/{})", s.reproduced, s.confirm_runs),
                },
                format!("{:.0} s", s.after),
            ),
            Found::NotFound => ("no".into(), "—".into()),
            Found::NotRun { .. } => ("not run".into(), "—".into()),
            Found::NotAsked => ("not asked".into(), "—".into()),
        };
        let clean = match &row.fixed {
            Fixed::Unfixed => "unfixed".to_string(),
            Fixed::Clean => "yes".into(),
            Fixed::Seen(s) => format!("**no**: after {:.0} s", s.after),
            Fixed::NotRun { .. } => "not run".into(),
            Fixed::NotAsked => "not asked".into(),
        };
        let id = match &b.benchmark {
            Some(row) => format!("`{}` ({})", b.id, cell(row)),
            None => format!("`{}`", b.id),
        };
        let _ = writeln!(
            out,
            "| {id} | {} | {found} | {} {} | {after} | {} | {clean} |",
            b.bad,
            b.finding.oracle,
            cell(&b.finding.kind),
            b.fixed.as_deref().unwrap_or("—"),
        );
    }
    let mut notes = vec![];
    for row in &r.bugs {
        let b = &row.bug;
        let seen = |what: &str, s: &Seen| {
            format!(
                "`{}` {what}: {} `{}` (`{}`)",
                b.id,
                cell(&s.subject),
                cell(&s.key),
                s.dir.display()
            )
        };
        if let Found::Found(s) = &row.found {
            notes.push(seen(&format!("on {}", b.bad), s));
        }
        if let Fixed::Seen(s) = &row.fixed {
            notes.push(seen(
                &format!(
                    "on {}, where it is fixed",
                    b.fixed.as_deref().unwrap_or("?")
                ),
                s,
            ));
        }
        if let Some(n) = &b.note {
            notes.push(format!("`{}`: {}", b.id, cell(n)));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\nWhat counted, and notes:\n");
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = writeln!(
        out,
        "\n| release | wall s | ran | trials | findings (stable) | log |"
    );
    let _ = writeln!(out, "|---|--:|---|--:|--:|---|");
    for e in &r.explorations {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {} ({}) | `{}` |",
            e.release,
            e.wall,
            match &e.error {
                None => "yes".to_string(),
                Some(why) => format!("**no**: {}", cell(why)),
            },
            e.trials,
            e.findings.0,
            e.findings.1,
            e.log.display()
        );
    }
    out
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

/// Runs `explore` (this executable) with `args`, its output to `log`, within `bound`: past it
/// the exploration is interrupted (SIGINT: it tears its cell down) and killed if it has not
/// ended [`TEARDOWN`] later. Returns why it failed, if it did.
async fn explore(binary: &Path, args: &[String], log: &Path, bound: Duration) -> Option<String> {
    let out = match std::fs::File::create(log) {
        Ok(f) => f,
        Err(e) => return Some(format!("create {}: {e}", log.display())),
    };
    let err = match out.try_clone() {
        Ok(f) => f,
        Err(e) => return Some(format!("open {}: {e}", log.display())),
    };
    let mut child = match tokio::process::Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Some(format!("start {}: {e}", binary.display())),
    };
    let status = match tokio::time::timeout(bound, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGINT,
                );
            }
            if tokio::time::timeout(TEARDOWN, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            return Some(format!(
                "did not end within {} (its budget and {} more): interrupted",
                duration(bound),
                duration(OVERRUN)
            ));
        }
    };
    match status {
        Ok(s) if s.success() => None,
        Ok(s) => {
            let said = std::fs::read_to_string(log)
                .ok()
                .and_then(|l| error_of(&l))
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            Some(format!("explore exited with {s}{said}"))
        }
        Err(e) => Some(format!("wait for explore: {e}")),
    }
}

/// The commit of the workspace the bench runs in.
fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown (not run in a git clone)".into())
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
        commit: commit(),
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
    use crate::explore::oracle::Oracle;
    use crate::explore::trial::{Mode, Trial};

    fn finding(oracle: Oracle, subject: &str, key: &str) -> Finding {
        Finding {
            oracle,
            subject: subject.into(),
            key: key.into(),
            observed: "o".into(),
            expected: "e".into(),
        }
    }

    fn reported(f: Finding, first_seen: f64, stable: bool) -> Reported {
        let trial = Trial {
            subject: f.subject.clone(),
            mode: Mode::Admission,
            seed: 7,
            index: 0,
            steps: vec![],
        };
        Reported {
            finding: f,
            original: trial.clone(),
            trial,
            reproduced: if stable { 3 } else { 1 },
            confirm_runs: 3,
            stable,
            first_seen,
            dir: "findings/1".into(),
            controller: "openkruise@v1.7.0".into(),
            kubernetes: "1.32.5".into(),
            baseline: None,
            gates: Default::default(),
        }
    }

    fn wanted(oracle: &str, kind: &str, key: &str) -> Wanted {
        Wanted {
            oracle: oracle.into(),
            kind: kind.into(),
            key: key.into(),
        }
    }

    #[test]
    fn a_finding_counts_only_with_its_oracle_kind_and_key() {
        let w = wanted(
            "O4",
            "CloneSet",
            "admits * spec.minReadySeconds as a negative number",
        );
        let key = "admits on create of spec.minReadySeconds as a negative number what Deployment does not";
        assert!(w.matches(&finding(Oracle::Native, "CloneSet", key)));
        // Paired with another field, at update: still the same field's form.
        assert!(w.matches(&finding(
            Oracle::Native,
            "CloneSet",
            "admits on update of spec.replicas as zero, spec.minReadySeconds as a negative number what Deployment does not"
        )));
        // Another oracle.
        assert!(!w.matches(&finding(Oracle::Realizable, "CloneSet", key)));
        // Another kind.
        assert!(!w.matches(&finding(Oracle::Native, "AdvancedStatefulSet", key)));
        // Another key: another form, another field, the other verdict.
        for other in [
            "admits on create of spec.minReadySeconds as a positive number what Deployment does not",
            "admits on create of spec.revisionHistoryLimit as a negative number what Deployment does not",
            "refuses on create of spec.minReadySeconds as a negative number what Deployment does not",
        ] {
            assert!(
                !w.matches(&finding(Oracle::Native, "CloneSet", other)),
                "{other}"
            );
        }
    }

    #[test]
    fn a_kind_names_its_subjects_as_kinds_does() {
        let names = |k: &str, s: &str| kind_names(k, s);
        assert!(names(
            "UnitedDeployment",
            "UnitedDeployment.cloneSetTemplate"
        ));
        assert!(names(
            "uniteddeployment",
            "UnitedDeployment.cloneSetTemplate"
        ));
        assert!(names("WorkloadSpread.CloneSet", "WorkloadSpread.CloneSet"));
        assert!(names("CloneSet", "CloneSetWithClaims@v1beta1"));
        assert!(names("CloneSet", "CloneSet@v1beta1"));
        assert!(!names(
            "WorkloadSpread.CloneSet",
            "WorkloadSpread.CloneSetWithClaims"
        ));
        assert!(!names("CloneSet", "WorkloadSpread.CloneSet"));
        assert!(!names("CloneSet", "CloneSetX"));
        assert!(!names(
            "AdvancedCronJob.broadcastJobTemplate",
            "AdvancedCronJob"
        ));
    }

    #[test]
    fn a_key_pattern_is_its_parts_in_order() {
        let key = "refuses on create of spec.subsets[1].patch as an object what WorkloadSpread over a Deployment does not";
        assert!(key_matches("refuses * spec.subsets*.patch", key));
        assert!(key_matches("spec.subsets", key));
        assert!(!key_matches("admits * spec.subsets*.patch", key));
        // In order: the parts may not be found backwards.
        assert!(!key_matches(".patch*spec.subsets", key));
        assert!(key_matches("*", key));
    }

    #[test]
    fn the_earliest_finding_that_counts_is_the_one_reported() {
        let w = wanted("O6", "WorkloadSpread", "controller panicked");
        let findings = vec![
            reported(
                finding(Oracle::Health, "CloneSet", "controller panicked"),
                5.0,
                true,
            ),
            reported(
                finding(
                    Oracle::Health,
                    "WorkloadSpread.Deployment",
                    "controller panicked",
                ),
                90.0,
                true,
            ),
            reported(
                finding(
                    Oracle::Health,
                    "WorkloadSpread.CloneSet",
                    "controller panicked",
                ),
                40.0,
                false,
            ),
        ];
        let first = w.first(&findings).unwrap();
        assert_eq!(first.finding.subject, "WorkloadSpread.CloneSet");
        assert_eq!(first.first_seen, 40.0);
        assert!(w.first(&findings[..1]).is_none());
    }

    #[test]
    fn the_checked_in_list_parses_and_names_the_benchmarks_14_rows() {
        let list = List::builtin();
        let rows: BTreeSet<&str> = list
            .bugs
            .iter()
            .filter_map(|b| b.benchmark.as_deref())
            .collect();
        assert_eq!(rows.len(), 14, "{rows:?}");
        assert_eq!(list.controller, "openkruise");
    }

    #[test]
    fn the_list_has_every_ledger_entry_that_needs_no_real_node_at_the_releases_of_its_range() {
        let list = List::builtin();
        let ledger = crate::run::ledger::Ledger::builtin();
        let scenarios = crate::suites::all();
        let real = |name: &str| {
            let s = scenarios
                .iter()
                .find(|s| *s.name == *name)
                .unwrap_or_else(|| panic!("ledger scenario {name} is in the catalog"));
            s.requires.real_nodes > 0
        };
        let served: Vec<Version> = list.releases.iter().map(|r| r.parse().unwrap()).collect();
        for k in &ledger.bugs {
            let listed = list.bugs.iter().find(|b| b.id == k.id);
            if real(&k.scenario) {
                assert!(listed.is_none(), "{} needs a real node", k.id);
                continue;
            }
            let b = listed.unwrap_or_else(|| panic!("{} is in the list", k.id));
            assert!(b.ledger, "{}", k.id);
            // The newest served release inside the range, and the first after it.
            let inside: Vec<&String> = list
                .releases
                .iter()
                .filter(|r| k.controller.contains(r))
                .collect();
            assert_eq!(Some(&&b.bad), inside.last(), "{}: bad release", k.id);
            let after = k.controller.max.as_ref().and_then(|max| {
                let max: Version = max.parse().unwrap();
                served
                    .iter()
                    .position(|v| v.cmp_within(&max).is_gt())
                    .map(|i| list.releases[i].clone())
            });
            assert_eq!(b.fixed, after, "{}: fixed release", k.id);
        }
        for b in list.bugs.iter().filter(|b| b.ledger) {
            assert!(
                ledger.bugs.iter().any(|k| k.id == b.id),
                "{} is a ledger id (or says `ledger: false`)",
                b.id
            );
        }
    }

    #[test]
    fn nothing_the_explorer_runs_names_a_listed_bug() {
        fn files(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/explore");
        let mut all = vec![root.with_extension("rs")];
        files(&root, &mut all);
        let list = List::builtin();
        for f in all.iter().filter(|f| f.is_file()) {
            let text = std::fs::read_to_string(f).unwrap();
            for b in &list.bugs {
                assert!(!text.contains(&b.id), "{} names {}", f.display(), b.id);
            }
        }
    }

    #[test]
    fn a_list_that_says_something_impossible_is_refused_with_the_reason() {
        let head = "controller: openkruise\nreleases: [v1.7.0, v1.8.0]\nbugs:\n";
        let bug = |bad: &str, fixed: &str, oracle: &str, kind: &str| {
            format!(
                "{head}- id: x\n  bad: {bad}\n  fixed: {fixed}\n  finding: {{oracle: {oracle}, kind: {kind}, key: k}}\n"
            )
        };
        assert!(List::parse(&bug("v1.7.0", "v1.8.0", "O4", "CloneSet"), "l").is_ok());
        for (text, says) in [
            (
                bug("v1.7.1", "v1.8.0", "O4", "CloneSet"),
                "v1.7.1 is not among",
            ),
            (
                bug("v1.8.0", "v1.7.0", "O4", "CloneSet"),
                "is not after bad",
            ),
            (bug("v1.7.0", "v1.8.0", "O9", "CloneSet"), "oracle `O9`"),
            (bug("v1.7.0", "v1.8.0", "O4", "Widget"), "kind `Widget`"),
            (format!("{head}- id: x\n  bad: v1.7.0\n  typo: 1\n"), "typo"),
        ] {
            let e = List::parse(&text, "l").unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    fn request(releases: &[&str]) -> Request {
        Request {
            list: None,
            budget: Duration::from_secs(1800),
            seed: 7,
            releases: releases.iter().map(|r| r.to_string()).collect(),
            out: None,
            dry_run: true,
            explore_args: vec![],
        }
    }

    fn small() -> List {
        let text = "controller: openkruise\nreleases: [v1.5.5, v1.6.0, v1.7.0, v1.8.0, v1.9.1]\nbugs:\n\
            - id: a\n  bad: v1.7.0\n  fixed: v1.8.0\n  finding: {oracle: O4, kind: CloneSet, key: \"admits * spec.x\"}\n\
            - id: b\n  bad: v1.5.5\n  fixed: v1.7.0\n  benchmark: B\n  finding: {oracle: O1, kind: UnitedDeployment, key: drops}\n\
            - id: c\n  bad: v1.9.1\n  finding: {oracle: O6, kind: AdvancedDaemonSet, key: controller denied}\n";
        List::parse(text, "small").unwrap()
    }

    #[test]
    fn the_plan_explores_each_release_once_oldest_first_for_what_it_finds_and_misses() {
        let list = small();
        let p = plan(&list, &[]).unwrap();
        let by: Vec<(&str, &[usize], &[usize])> = p
            .iter()
            .map(|e| (e.release.as_str(), &e.find[..], &e.clean[..]))
            .collect();
        assert_eq!(
            by,
            [
                ("v1.5.5", &[1][..], &[][..]),
                ("v1.7.0", &[0][..], &[1][..]),
                ("v1.8.0", &[][..], &[0][..]),
                ("v1.9.1", &[2][..], &[][..]),
            ]
        );
        let only = plan(&list, &["v1.7.0".into()]).unwrap();
        assert_eq!(only.len(), 1);
        let e = plan(&list, &["v1.6.0".into()]).unwrap_err().to_string();
        assert!(
            e.contains("v1.6.0") && e.contains("v1.5.5, v1.7.0, v1.8.0, v1.9.1"),
            "{e}"
        );
    }

    #[test]
    fn the_dry_run_prints_each_exploration_s_command_and_its_bugs() {
        let list = small();
        let mut r = request(&["v1.7.0", "v1.8.0"]);
        r.explore_args = vec!["--kinds".into(), "CloneSet".into()];
        let p = plan(&list, &r.releases).unwrap();
        let text = render_plan(&list, &p, &r, Path::new("reports/x"));
        assert_eq!(
            text,
            "harness bench rediscovery --budget 30m --seed 7 --releases 'v1.7.0,v1.8.0' -- --kinds CloneSet\n\
             list: suites/rediscovery.yaml (built in); 2 of its 3 bugs, 2 exploration(s) of 30m each (1h of exploring, bring-up aside); report: reports/x\n\
             \n\
             v1.7.0: harness explore --controller openkruise@v1.7.0 --budget 30m --seed 7 --report-dir reports/x/v1.7.0 --kinds CloneSet\n  \
               find (1):\n    \
                 a: O4 CloneSet `admits * spec.x`\n  \
               fixed here, must not show (1):\n    \
                 b (bad on v1.5.5)\n\
             \n\
             v1.8.0: harness explore --controller openkruise@v1.8.0 --budget 30m --seed 7 --report-dir reports/x/v1.8.0 --kinds CloneSet\n  \
               find: none\n  \
               fixed here, must not show (1):\n    \
                 a (bad on v1.7.0)\n"
        );
    }

    #[test]
    fn the_dry_run_of_the_checked_in_list_plans_every_release_it_names() {
        let list = List::builtin();
        let p = plan(&list, &[]).unwrap();
        let releases: Vec<&str> = p.iter().map(|e| e.release.as_str()).collect();
        assert_eq!(
            releases,
            [
                "v1.5.5", "v1.6.0", "v1.7.0", "v1.8.0", "v1.8.3", "v1.9.0", "v1.9.1"
            ]
        );
        let text = render_plan(&list, &p, &request(&[]), Path::new("out"));
        assert!(text.contains(&format!(
            "{} of its {} bugs, 7 exploration(s) of 30m each (210m of exploring",
            list.bugs.len(),
            list.bugs.len()
        )));
        assert!(text.contains(
            "v1.7.0: harness explore --controller openkruise@v1.7.0 --budget 30m --seed 7 --report-dir out/v1.7.0\n"
        ));
    }

    #[test]
    fn each_bug_is_judged_on_its_bad_and_its_fixed_release() {
        let list = small();
        let p = plan(&list, &[]).unwrap();
        let summary = |findings: Vec<Reported>| Summary {
            findings,
            ..Summary::default()
        };
        let outcomes: BTreeMap<String, Outcome> = [
            // b found (unstable), a not found yet present in its bad release.
            (
                "v1.5.5".to_string(),
                Ok(summary(vec![reported(
                    finding(
                        Oracle::Realizable,
                        "UnitedDeployment.statefulSetTemplate",
                        "drops spec.x admitted on create",
                    ),
                    12.0,
                    false,
                )])),
            ),
            ("v1.7.0".to_string(), Ok(summary(vec![]))),
            // a's fixed release shows it.
            (
                "v1.8.0".to_string(),
                Ok(summary(vec![reported(
                    finding(
                        Oracle::Native,
                        "CloneSet",
                        "admits on update of spec.x as zero what Deployment does not",
                    ),
                    30.0,
                    true,
                )])),
            ),
            (
                "v1.9.1".to_string(),
                Err("explore exited with 1".to_string()),
            ),
        ]
        .into();
        let rows = judge(&list, &p, &outcomes);
        let by = |id: &str| rows.iter().find(|r| r.bug.id == id).unwrap();
        assert_eq!(by("a").found, Found::NotFound);
        assert!(matches!(&by("a").fixed, Fixed::Seen(s) if s.after == 30.0));
        assert!(matches!(&by("b").found, Found::Found(s) if !s.stable && s.after == 12.0));
        assert_eq!(by("b").fixed, Fixed::Clean);
        assert_eq!(
            by("c").found,
            Found::NotRun {
                why: "explore exited with 1".into()
            }
        );
        assert_eq!(by("c").fixed, Fixed::Unfixed);
        // Asked for one release: the other side is not asked; a release yet to run is not run.
        let only = plan(&list, &["v1.7.0".into()]).unwrap();
        let rows = judge(&list, &only, &BTreeMap::new());
        assert_eq!(rows.len(), 2);
        assert!(matches!(rows[0].found, Found::NotRun { .. }));
        assert_eq!(rows[0].fixed, Fixed::NotAsked);
        assert_eq!(rows[1].found, Found::NotAsked);

        let report = Report {
            date: "d".into(),
            commit: "c".into(),
            machine: super::super::flakes::tally::Machine {
                cpus: 2,
                memory_kib: Some(1024 * 1024),
            },
            command: command(&request(&[])),
            budget: 1800,
            seed: 7,
            explorations: vec![Ran {
                release: "v1.9.1".into(),
                error: Some("explore exited with 1".into()),
                log: "logs/v1.9.1.log".into(),
                ..Ran::default()
            }],
            bugs: judge(&list, &p, &outcomes),
        };
        let md = markdown(&report);
        assert!(
            md.contains("**Found 1 of 2** bugs on their bad release · **the benchmark's rows: 1 of 1** · **fixed releases clean: 1 of 2**"),
            "{md}"
        );
        assert!(
            md.contains("| `a` | v1.7.0 | no | O4 CloneSet | — | v1.8.0 | **no**: after 30 s |"),
            "{md}"
        );
        assert!(
            md.contains("| `b` (B) | v1.5.5 | **yes** (unstable, 1/3) | O1 UnitedDeployment | 12 s | v1.7.0 | yes |"),
            "{md}"
        );
        assert!(
            md.contains("| `c` | v1.9.1 | not run | O6 AdvancedDaemonSet | — | — | unfixed |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| v1.9.1 | 0 | **no**: explore exited with 1 | 0 | 0 (0) | `logs/v1.9.1.log` |"
            ),
            "{md}"
        );
    }

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

    #[test]
    fn durations_read_as_the_cli_takes_them() {
        assert_eq!(duration(Duration::from_secs(1800)), "30m");
        assert_eq!(duration(Duration::from_secs(7200)), "2h");
        assert_eq!(duration(Duration::from_secs(90)), "90s");
        assert_eq!(duration(Duration::ZERO), "0s");
    }
}
