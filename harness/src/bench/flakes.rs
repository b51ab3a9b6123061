//! `harness bench flakes`: a flake count anyone can rerun. Start with [`run`] and its
//! [`Request`].
//!
//! Cargo integration test targets of the `harness` package run over and over
//! (`cargo test -p harness --test NAME -- --test-threads=T`, interleaved, in the workspace the
//! harness was built from), optionally under a CPU burner ([`load`]); and the README's test
//! command (`cargo test --workspace`, as `.ci/run` runs it) runs in fresh clones of the
//! commit. Each run's output is kept as a log and read ([`libtest`]), each test's results are
//! counted ([`tally`]), and the count is printed and written as `flakes.json` and `flakes.md`
//! ([`render`]), with the date, commit, machine and the command that reproduces it.
//!
//! Exit codes: 0 when no test failed in any run, 1 when one did, when a run failed outside
//! any test (a build error, a crashed test binary), or on an error.

pub mod libtest;
pub mod load;
pub mod render;
pub mod tally;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};
use std::time::Instant;

use self::render::Rows;
use self::tally::{Header, Machine, RunRecord, Tally};
use crate::progress::Progress;

/// The README's test command, as `.ci/run` runs it (Cargo's arguments): what a fresh clone
/// runs.
pub const README_TEST_COMMAND: [&str; 2] = ["test", "--workspace"];

/// The package whose test targets `--test` names.
const PACKAGE: &str = "harness";

/// What to run and where the report goes (the flags of `harness bench flakes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// Integration test targets of the `harness` package to run, in order.
    pub tests: Vec<String>,
    /// Runs of each target.
    pub runs: usize,
    /// libtest's `--test-threads` (default: the CPUs available).
    pub test_threads: Option<usize>,
    /// Whether to keep every CPU busy during the runs.
    pub load: bool,
    /// Fresh clones to run the README's test command in.
    pub fresh_clones: usize,
    /// Where the report goes (default: `reports/flakes-<time>`).
    pub out: Option<PathBuf>,
}

impl Request {
    /// Checks the request against the package's test targets (`known`).
    fn validate(&self, known: &[String]) -> Result<(), FlakesError> {
        if self.tests.is_empty() && self.fresh_clones == 0 {
            return Err(FlakesError::NothingToRun);
        }
        if !self.tests.is_empty() && self.runs == 0 {
            return Err(FlakesError::NoRuns);
        }
        if self.test_threads == Some(0) {
            return Err(FlakesError::NoThreads);
        }
        if let Some(name) = self.tests.iter().find(|t| !known.contains(t)) {
            return Err(FlakesError::UnknownTarget {
                name: name.clone(),
                known: known.join(", "),
            });
        }
        Ok(())
    }

    /// The command line that reproduces this request with `threads` test threads (the
    /// output directory left out).
    pub fn command(&self, threads: usize) -> String {
        let mut args: Vec<String> = ["cargo", "run", "--locked", "-p", PACKAGE, "--"]
            .into_iter()
            .chain(["bench", "flakes"])
            .map(String::from)
            .collect();
        for t in &self.tests {
            args.extend(["--test".into(), t.clone()]);
        }
        if !self.tests.is_empty() {
            args.extend(["--runs".into(), self.runs.to_string()]);
            args.extend(["--test-threads".into(), threads.to_string()]);
        }
        if self.load {
            args.push("--load".into());
        }
        if self.fresh_clones > 0 {
            args.extend(["--fresh-clones".into(), self.fresh_clones.to_string()]);
        }
        shell_line(&args)
    }

    /// What each run runs, as command lines.
    fn each_run(&self, threads: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .tests
            .iter()
            .map(|t| format!("cargo {}", shell_line(&test_args(t, threads))))
            .collect();
        if self.fresh_clones > 0 {
            out.push(format!(
                "git clone --no-local of the commit, then cargo {} in the clone",
                README_TEST_COMMAND.join(" ")
            ));
        }
        out
    }
}

/// Cargo's arguments for one run of test target `name`.
pub fn test_args(name: &str, threads: usize) -> Vec<String> {
    target_args(name, ["--".into(), format!("--test-threads={threads}")])
}

/// Cargo's arguments that build test target `name` without running it.
fn build_args(name: &str) -> Vec<String> {
    target_args(name, ["--no-run".into()])
}

/// `cargo test` of test target `name` of the package, then `rest`.
fn target_args<const N: usize>(name: &str, rest: [String; N]) -> Vec<String> {
    ["test", "-p", PACKAGE, "--test", name]
        .into_iter()
        .map(String::from)
        .chain(rest)
        .collect()
}

/// Words joined into a shell command line, quoted (by shlex) where needed: a word of only
/// letters, digits and `_-.,/:=@%+` stays as it is (shlex would quote `--test-threads=2`).
fn shell_line(words: &[String]) -> String {
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.,/:=@%+".contains(c))
    };
    words
        .iter()
        .map(|w| match plain(w) {
            true => w.clone(),
            false => shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned()),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why the flake count could not be made.
#[derive(Debug, thiserror::Error)]
pub enum FlakesError {
    /// Neither a test target nor a fresh clone was asked for.
    #[error(
        "choose what to run: name a test target with --test NAME (e.g. --test upstream_e2e), or ask for --fresh-clones K"
    )]
    NothingToRun,
    /// `--runs 0` with test targets.
    #[error("run each test target zero times: use --runs 1 or more")]
    NoRuns,
    /// `--test-threads 0`.
    #[error("run tests on zero threads: use --test-threads 1 or more")]
    NoThreads,
    /// A `--test` name the package has no target for.
    #[error(
        "find test target `{name}` of the harness package: name one of its targets with --test ({known})"
    )]
    UnknownTarget {
        /// The name given.
        name: String,
        /// The package's test targets.
        known: String,
    },
    /// The workspace the binary was built from is gone.
    #[error(
        "find the workspace this harness was built from at {}: run the bench from a checkout of the harness (`cargo run -p harness -- bench flakes ...`)",
        .0.display()
    )]
    NoWorkspace(PathBuf),
    /// cargo cannot be run.
    #[error(
        "run cargo (`{program} --version`): install Rust with rustup, or set CARGO to the path of cargo"
    )]
    CargoMissing {
        /// The program tried (`$CARGO`, else `cargo` on PATH).
        program: String,
        /// Why it could not run.
        #[source]
        source: std::io::Error,
    },
    /// git cannot be run.
    #[error("run git: install git (it reads the commit the report names, and makes the clones)")]
    GitMissing(#[source] std::io::Error),
    /// The workspace is not a git repository (or git cannot read it).
    #[error(
        "read the commit of {} (`git rev-parse HEAD`: {stderr}): run the bench from a git clone of the harness, whose commit the report names",
        root.display()
    )]
    NoRepository {
        /// The workspace.
        root: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// A git command failed.
    #[error("run `git {args}` in {}: {status}: {stderr}", dir.display())]
    Git {
        /// Its arguments.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// How it ended.
        status: ExitStatus,
        /// What it said.
        stderr: String,
    },
    /// A test target did not build.
    #[error(
        "build test target `{name}` (`cargo {command}`): {status}; fix the build first (the end of {}):\n{tail}",
        log.display()
    )]
    Build {
        /// The target.
        name: String,
        /// Cargo's arguments.
        command: String,
        /// How cargo ended.
        status: ExitStatus,
        /// Its log.
        log: PathBuf,
        /// The end of the log.
        tail: String,
    },
    /// The work directory of the fresh clones could not be made.
    #[error("create a work directory for the fresh clones")]
    WorkDir(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// `--load` could not start its threads.
    #[error("start the CPU burner of --load")]
    Load(#[source] std::io::Error),
    /// A file or directory could not be written or read.
    #[error("{what} {}", path.display())]
    Io {
        /// What was done (`write`, `read`, `create`).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The CI job summary could not be appended to.
    #[error("append the flake count to the job summary")]
    Summary(#[source] Box<dyn std::error::Error + Send + Sync>),
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FlakesError {
    let path = path.to_path_buf();
    move |source| FlakesError::Io { what, path, source }
}

/// The workspace this binary was built from.
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The integration test targets of the package at `root/harness`: `tests/<name>.rs` and
/// `tests/<name>/main.rs`, sorted.
fn test_targets(root: &Path) -> Vec<String> {
    let dir = root.join(PACKAGE).join("tests");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = path.file_stem()?.to_string_lossy().into_owned();
            let is_target = (path.extension().is_some_and(|x| x == "rs") && path.is_file())
                || path.join("main.rs").is_file();
            is_target.then_some(name)
        })
        .collect();
    names.sort();
    names
}

/// Runs cargo: `$CARGO` (set when the harness runs under `cargo run`), else `cargo` on PATH,
/// with the user's `CARGO_TARGET_DIR` (made absolute, so that a clone shares it) when set.
struct Cargo {
    program: OsString,
    target_dir: Option<PathBuf>,
}

impl Cargo {
    /// Finds cargo and checks that it runs.
    async fn find() -> Result<Self, FlakesError> {
        let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let missing = |source| FlakesError::CargoMissing {
            program: program.to_string_lossy().into_owned(),
            source,
        };
        let out = tokio::process::Command::new(&program)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(missing)?;
        if !out.status.success() {
            return Err(missing(std::io::Error::other(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
        let target_dir = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|t| !t.is_empty())
            .map(|t| std::path::absolute(&t).unwrap_or_else(|_| PathBuf::from(t)));
        Ok(Self {
            program,
            target_dir,
        })
    }

    /// Runs cargo with `args` in `cwd`, its output (stdout and stderr, interleaved as
    /// printed) into `log`; its process group is killed when this returns or is dropped. On a
    /// stop the group gets SIGTERM first and the stop waits for it (a [`crate::stop::Salvage`],
    /// up to [`crate::stop::GRACE`]): a harness the tests started tears its clusters down.
    async fn run(
        &self,
        cwd: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<ExitStatus, FlakesError> {
        let file = std::fs::File::create(log).map_err(io("create", log))?;
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(args)
            .current_dir(cwd)
            .env("CARGO_TERM_COLOR", "never");
        if let Some(t) = &self.target_dir {
            command.env("CARGO_TARGET_DIR", t);
        }
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(set_by_cargo_run) {
                command.env_remove(name);
            }
        }
        let missing = |source| FlakesError::CargoMissing {
            program: self.program.to_string_lossy().into_owned(),
            source,
        };
        let (mut child, _group) = crate::stop::spawn_group(&mut command, file).map_err(missing)?;
        let _salvage = crate::stop::Salvage::begin();
        tokio::select! {
            status = child.wait() => status.map_err(io("wait for cargo in", cwd)),
            () = crate::stop::requested() => {
                let pid = child.id();
                if let Some(pid) = pid {
                    let group = nix::unistd::Pid::from_raw(pid as i32);
                    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
                }
                let status = child.wait().await.map_err(io("wait for cargo in", cwd));
                // Cargo and the test binaries end at once; a harness a test started goes on
                // tearing its clusters down: the group is killed only once they are down (or
                // after the grace), not with cargo.
                if let Some(pid) = pid {
                    settle_group(pid, crate::stop::GRACE).await;
                }
                status
            }
        }
    }
}

/// Waits, up to `grace`, until no process of group `group` lives (each ends on its own, as a
/// harness does once its clusters are down).
async fn settle_group(group: u32, grace: std::time::Duration) {
    let deadline = Instant::now() + grace;
    while !crate::stop::group_members(group).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Whether `cargo run` sets environment variable `name` for the harness it runs (the
/// package's manifest and metadata). They are kept from the cargo the bench runs: build
/// scripts that watch them (ring's watches `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`) would
/// see them change and rebuild their crate, and again at the next plain `cargo` command.
fn set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "OUT_DIR",
        ]
        .contains(&name)
}

/// Runs git with `args` in `dir`; its stdout.
async fn git(dir: &Path, args: &[&str]) -> Result<String, FlakesError> {
    let out = tokio::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(FlakesError::GitMissing)?;
    if !out.status.success() {
        return Err(FlakesError::Git {
            args: args.join(" "),
            dir: dir.to_path_buf(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The machine: its CPUs and memory.
pub(crate) fn machine() -> Machine {
    Machine {
        cpus: cpus(),
        memory_kib: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| tally::mem_total_kib(&m)),
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Now, UTC: RFC 3339 for the report, compact for the default directory.
pub(crate) fn now() -> (String, String) {
    use time::format_description::well_known::Rfc3339;
    let t = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    let date = t.format(&Rfc3339).unwrap_or_default();
    let stamp = t
        .format(time::macros::format_description!(
            "[year][month][day]-[hour][minute][second]"
        ))
        .unwrap_or_default();
    (date, stamp)
}

/// Where a report and its logs go.
struct Out {
    dir: PathBuf,
}

impl Out {
    fn create(dir: PathBuf) -> Result<Self, FlakesError> {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(io("create", &logs))?;
        Ok(Self { dir })
    }

    /// Writes `flakes.json` and `flakes.md` (again after each run: a stopped or timed-out
    /// bench keeps the runs it made).
    fn write(&self, report: &tally::Report) -> Result<(), FlakesError> {
        let json = self.dir.join("flakes.json");
        let text = serde_json::to_string_pretty(report).map_err(|e| FlakesError::Io {
            what: "serialize",
            path: json.clone(),
            source: e.into(),
        })?;
        std::fs::write(&json, text + "\n").map_err(io("write", &json))?;
        let md = self.dir.join("flakes.md");
        std::fs::write(&md, render::markdown(report, Rows::All)).map_err(io("write", &md))
    }
}

/// One bench: what it runs with, the counts so far, where they go.
struct Bench {
    cargo: Cargo,
    header: Header,
    out: Out,
    tally: Tally,
    progress: Progress,
}

impl Bench {
    /// Runs cargo with `args` in `cwd` as the run `label`, its log `logs/<log>.log`; counts
    /// its results, prints its line and writes the report so far.
    async fn run(
        &mut self,
        cwd: &Path,
        args: &[String],
        label: String,
        log: &str,
    ) -> Result<(), FlakesError> {
        let log = format!("logs/{log}.log");
        let path = self.out.dir.join(&log);
        let started = Instant::now();
        let status = self.cargo.run(cwd, args, &path).await?;
        let seconds = started.elapsed().as_secs_f64();
        let bytes = std::fs::read(&path).map_err(io("read", &path))?;
        let text = String::from_utf8_lossy(&bytes);
        let counts = self.tally.add(&label, &libtest::parse(&text));
        let record = RunRecord {
            label,
            log,
            seconds,
            exit_code: status.code(),
            counts,
            outside_tests: tally::outside_tests(status.success(), &counts, &text),
        };
        self.progress.line(&render::progress_line(&record));
        self.tally.record(record);
        self.out.write(&self.tally.report(&self.header))
    }

    /// Builds test target `name` (so that the runs time the tests, not the build).
    async fn build(&self, root: &Path, name: &str) -> Result<(), FlakesError> {
        let args = build_args(name);
        let log = self.out.dir.join(format!("logs/build-{name}.log"));
        self.progress.line(&format!(
            "building test target {name} (cargo {})",
            args.join(" ")
        ));
        let status = self.cargo.run(root, &args, &log).await?;
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read(&log).unwrap_or_default();
        Err(FlakesError::Build {
            name: name.to_string(),
            command: args.join(" "),
            status,
            tail: libtest::tail(&String::from_utf8_lossy(&text)),
            log,
        })
    }

    /// Clones `root` at `commit` into `dir` and runs the README's test command there, as the
    /// run `k` of `of`; removes the clone afterwards.
    async fn fresh_clone(
        &mut self,
        root: &Path,
        commit: &str,
        dir: &Path,
        (k, of): (usize, usize),
    ) -> Result<(), FlakesError> {
        let label = format!("fresh clone {k}/{of}");
        self.progress.line(&format!(
            "{label}: git clone --no-local {} {}",
            root.display(),
            dir.display()
        ));
        let ran = async {
            let (root_s, dir_s) = (root.to_string_lossy(), dir.to_string_lossy());
            git(root, &["clone", "--quiet", "--no-local", &root_s, &dir_s]).await?;
            git(dir, &["checkout", "--quiet", "--detach", commit]).await?;
            let args: Vec<String> = README_TEST_COMMAND.map(String::from).to_vec();
            self.run(dir, &args, label.clone(), &format!("fresh-clone-{k}"))
                .await
        }
        .await;
        // Whatever happened: a clone with its target directory is gigabytes.
        if let Err(e) = crate::toolchain::cache::make_writable_and_remove(dir) {
            self.progress.line(&format!(
                "warning: {label}: remove {}: {e} (remove it by hand, or run `harness gc` once this bench is over)",
                dir.display()
            ));
        }
        ran
    }
}

/// `harness bench flakes`: runs what `request` asks for, prints the per-test table, writes
/// `flakes.json` and `flakes.md` (and appends the failing tests to the CI job summary); exit
/// 1 when any test failed in any run, or a run failed outside any test.
pub async fn run(request: Request) -> Result<ExitCode, FlakesError> {
    let root = workspace_root();
    if !root.join("Cargo.toml").is_file() {
        return Err(FlakesError::NoWorkspace(root));
    }
    request.validate(&test_targets(&root))?;
    let cargo = Cargo::find().await?;
    let commit = git(&root, &["rev-parse", "HEAD"])
        .await
        .map_err(|e| match e {
            FlakesError::Git { stderr, .. } => FlakesError::NoRepository {
                root: root.clone(),
                stderr,
            },
            other => other,
        })?;
    let uncommitted_changes = !git(&root, &["status", "--porcelain"]).await?.is_empty();
    let machine = machine();
    let threads = request.test_threads.unwrap_or(machine.cpus);
    let (date, stamp) = now();
    let dir = request
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("reports").join(format!("flakes-{stamp}")));
    let cpus = machine.cpus;
    let mut bench = Bench {
        header: Header {
            date,
            commit: commit.clone(),
            uncommitted_changes,
            machine,
            command: request.command(threads),
            each_run: request.each_run(threads),
        },
        cargo,
        out: Out::create(dir)?,
        tally: Tally::default(),
        progress: Progress::stderr(),
    };
    bench.progress.line(&format!(
        "flake count of commit {commit}{}: {}",
        if uncommitted_changes {
            " (with uncommitted changes, which the --test runs include and fresh clones do not)"
        } else {
            ""
        },
        bench.header.command
    ));
    for name in &request.tests {
        bench.build(&root, name).await?;
    }
    let burner = match request.load {
        true => Some(load::Burner::start(cpus).map_err(FlakesError::Load)?),
        false => None,
    };
    if let Some(b) = &burner {
        bench.progress.line(&format!(
            "--load: {} busy thread(s) until the runs end",
            b.threads()
        ));
    }
    let width = request.runs.to_string().len();
    for i in 1..=request.runs {
        for name in &request.tests {
            let label = format!("run {i}/{} of {name}", request.runs);
            let args = test_args(name, threads);
            bench
                .run(&root, &args, label, &format!("{name}-run-{i:0width$}"))
                .await?;
        }
    }
    if request.fresh_clones > 0 {
        let work = super::work_dir("flakes").map_err(|e| FlakesError::WorkDir(e.into()))?;
        for k in 1..=request.fresh_clones {
            let dir = work.path().join(format!("clone-{k}"));
            bench
                .fresh_clone(&root, &commit, &dir, (k, request.fresh_clones))
                .await?;
        }
    }
    drop(burner);
    let report = bench.tally.report(&bench.header);
    print!("{}", render::table(&report));
    bench.out.write(&report)?;
    crate::report::summary::append(&render::markdown(&report, Rows::Failing))
        .map_err(|e| FlakesError::Summary(e.into()))?;
    println!("reports: {}", bench.out.dir.display());
    Ok(match bench.tally.failed() {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tests: &[&str]) -> Request {
        Request {
            tests: tests.iter().map(|t| t.to_string()).collect(),
            runs: 30,
            ..Request::default()
        }
    }

    #[test]
    fn the_command_reproduces_the_request() {
        let r = Request {
            load: true,
            ..request(&["upstream_e2e", "ginkgo_fixture"])
        };
        assert_eq!(
            r.command(2),
            "cargo run --locked -p harness -- bench flakes --test upstream_e2e --test ginkgo_fixture --runs 30 --test-threads 2 --load"
        );
        assert_eq!(
            r.each_run(2),
            [
                "cargo test -p harness --test upstream_e2e -- --test-threads=2",
                "cargo test -p harness --test ginkgo_fixture -- --test-threads=2"
            ]
        );
        let clones = Request {
            fresh_clones: 3,
            ..Request::default()
        };
        assert_eq!(
            clones.command(2),
            "cargo run --locked -p harness -- bench flakes --fresh-clones 3"
        );
        assert_eq!(
            build_args("upstream_e2e").join(" "),
            "test -p harness --test upstream_e2e --no-run"
        );
        assert_eq!(
            shell_line(&["a b".into(), "--x=1".into(), "".into()]),
            "'a b' --x=1 ''"
        );
        assert_eq!(
            clones.each_run(2),
            ["git clone --no-local of the commit, then cargo test --workspace in the clone"]
        );
    }

    #[test]
    fn a_request_names_something_to_run_and_known_targets() {
        let known = vec!["ginkgo_fixture".to_string(), "upstream_e2e".to_string()];
        assert!(request(&["upstream_e2e"]).validate(&known).is_ok());
        assert!(matches!(
            Request::default().validate(&known),
            Err(FlakesError::NothingToRun)
        ));
        assert!(matches!(
            Request {
                runs: 0,
                ..request(&["upstream_e2e"])
            }
            .validate(&known),
            Err(FlakesError::NoRuns)
        ));
        let e = request(&["upstream"]).validate(&known).unwrap_err();
        assert_eq!(
            e.to_string(),
            "find test target `upstream` of the harness package: name one of its targets with --test (ginkgo_fixture, upstream_e2e)"
        );
    }

    #[test]
    fn what_cargo_run_sets_is_kept_from_the_runs_and_the_user_s_settings_are_not() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_PRE",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_run(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_TERM_COLOR",
            "PATH",
        ] {
            assert!(!set_by_cargo_run(name), "{name}");
        }
    }

    #[test]
    fn the_package_s_test_targets_are_listed() {
        let targets = test_targets(&workspace_root());
        for t in ["ginkgo_fixture", "upstream_e2e"] {
            assert!(targets.iter().any(|x| x == t), "{t} in {targets:?}");
        }
        assert!(!targets.iter().any(|x| x == "common"), "{targets:?}");
    }

    /// The fresh clones run what `.ci/run` runs.
    #[test]
    fn the_fresh_clone_command_is_the_one_ci_runs() {
        let ci = std::fs::read_to_string(workspace_root().join(".ci/run")).unwrap();
        let line = format!("cargo {}", README_TEST_COMMAND.join(" "));
        assert!(
            ci.lines().any(|l| l.trim() == line),
            "`{line}` is not a line of .ci/run:\n{ci}"
        );
    }
}
