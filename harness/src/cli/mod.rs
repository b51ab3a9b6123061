//! The command-line layer: parses arguments with clap ([`args`]), calls the library, prints
//! results and maps errors to exit codes. Start with [`main`].
//!
//! Exit codes: 0 success, 1 failure or error, 2 a command line clap refuses, 130 interrupted
//! (Ctrl-C / SIGTERM).

mod args;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;

use self::args::{
    BenchCommand, BundleCommand, ChainsawCommand, Cli, ClusterCommand, Command, ControllerArgs,
    CoverageArgs, ExploreArgs, KindCommand, MatrixArgs, QualifyArgs, ReportCommand, RunArgs,
    ToolchainCommand, UpArgs,
};
use crate::cluster::any::{Provider, providers_root};
use crate::cluster::local::{LocalOptions, LocalProvider};
use crate::progress::Progress;
use crate::toolchain::versions::{KUBERNETES_RELEASES, KWOK_VERSION};
use crate::toolchain::{Cache, KubeVersion, Toolchain};

/// The CLI's clap definition, as `harness --help` prints it (the book's CLI reference is
/// generated from it).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Checks a command line (without the program name) against the CLI's flags and values,
/// without running anything: the error is clap's own message.
pub fn check_args<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    let argv = std::iter::once("harness").chain(args.iter().map(AsRef::as_ref));
    Cli::try_parse_from(argv)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Exit code for an interrupted command.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs the CLI and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // Run for every runc call of a private Docker daemon: straight to runc, with no async
    // runtime, signal handlers or logging set up first.
    if let Command::OciRuntime { runc, args } = &cli.command {
        return oci_runtime(runc, args);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HARNESS_LOG")
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    crate::stop::guard_output();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(async {
        let command = run(cli);
        tokio::pin!(command);
        tokio::select! {
            r = &mut command => match r {
                Ok(code) => code,
                Err(e) => {
                    print_error(&e);
                    ExitCode::FAILURE
                }
            },
            sig = interrupted() => {
                crate::stop::request();
                if crate::stop::salvaging() {
                    eprintln!(
                        "interrupted by {sig}: ending the upstream suite to keep the results of \
                         its specs so far (at most {} s; again to stop at once)",
                        crate::stop::GRACE.as_secs()
                    );
                    tokio::select! {
                        _ = &mut command => {}
                        _ = crate::stop::salvaged() => {}
                        _ = interrupted() => {}
                        _ = tokio::time::sleep(crate::stop::GRACE) => {}
                    }
                }
                eprintln!("interrupted by {sig}: cleaning up");
                ExitCode::from(EXIT_INTERRUPTED)
            }
        }
    });
    // Dropping the runtime drops the interrupted command's future: clusters tear down here.
    drop(rt);
    code
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut hup = signal(SignalKind::hangup()).expect("install SIGHUP handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

fn print_error(e: &anyhow::Error) {
    eprintln!("error: {e}");
    for cause in e.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

fn toolchain() -> Toolchain {
    Toolchain::new(Cache::from_env(), Progress::stderr())
}

fn provider(apiserver_port: Option<u16>) -> LocalProvider {
    LocalProvider::new(
        toolchain(),
        LocalOptions {
            apiserver_port,
            ..LocalOptions::default()
        },
        Progress::stderr(),
    )
}

/// Exit code of a run with regressions or unexpected passes.
pub const EXIT_REGRESSION: u8 = 1;
/// Exit code of a run whose cluster or controller could not start.
pub const EXIT_INFRA: u8 = 3;

async fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    let found = match &args.replay {
        Some(dir) => Some(crate::explore::output::read_finding(dir)?),
        None => None,
    };
    let seed = args
        .seed
        .unwrap_or_else(|| u64::from(rand::random::<u32>()));
    let dir = args.report_dir.join(crate::run::new_id("explore"));
    let options = args.options(found.as_ref(), seed, dir.clone())?;
    let provider = crate::cluster::any::Provider::Local(provider(None));
    if let Some(finding) = &args.replay {
        let (r, fired) = crate::explore::replay(finding, &options, &provider, &toolchain()).await?;
        let again = fired
            .iter()
            .any(|f| f.oracle == r.finding.oracle && f.key == r.finding.key);
        for f in &fired {
            println!("{} {}: {}", f.oracle.short(), f.key, f.observed);
        }
        println!(
            "{}: {} {}",
            finding.display(),
            if again {
                "fires again:"
            } else {
                "no longer fires:"
            },
            r.finding.key
        );
        return Ok(if again {
            ExitCode::from(EXIT_REGRESSION)
        } else {
            ExitCode::SUCCESS
        });
    }
    eprintln!(
        "exploring with seed {seed} for {:?} (findings in {})",
        args.budget,
        dir.display()
    );
    let say = |line: String| eprintln!("{line}");
    let profiles = args.cell_profiles(options.kubernetes);
    if args.gate_sets == "pairwise" || !profiles.is_empty() {
        let cells = crate::explore::gates::explore_cells(
            &options,
            &profiles,
            args.gate_sets == "pairwise",
            &provider,
            &toolchain(),
            &say,
        )
        .await?;
        for c in &cells.cells {
            if let Some(summary) = &c.summary {
                let cell_dir = dir.join(&c.dir);
                let page = cell_dir.join("report.html");
                crate::report::atomic_write(
                    &page,
                    crate::report::explore::html(summary, &cell_dir).as_bytes(),
                )
                .map_err(|e| anyhow::anyhow!("write {}: {e}", page.display()))?;
                print!("{}", crate::explore::output::markdown(summary));
            }
        }
        print!("{}", cells.markdown());
        eprintln!("cells: {}", dir.join("cells.md").display());
        return Ok(
            if args.fail_on_findings && cells.stable().next().is_some() {
                ExitCode::from(EXIT_REGRESSION)
            } else {
                ExitCode::SUCCESS
            },
        );
    }
    let summary = crate::explore::explore(&options, &provider, &toolchain(), &say).await?;
    let page = dir.join("report.html");
    crate::report::atomic_write(
        &page,
        crate::report::explore::html(&summary, &dir).as_bytes(),
    )
    .map_err(|e| anyhow::anyhow!("write {}: {e}", page.display()))?;
    print!("{}", crate::explore::output::markdown(&summary));
    eprintln!("report: {}", page.display());
    Ok(
        if args.fail_on_findings && summary.stable().next().is_some() {
            ExitCode::from(EXIT_REGRESSION)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// Prints a note or warning of the library on stderr.
fn say(line: String) {
    eprintln!("{line}");
}

async fn run_scenarios(args: RunArgs) -> anyhow::Result<ExitCode> {
    use crate::run::drive::{Driven, drive};
    let reporters = crate::report::standard;
    match drive(
        &args.request(),
        provider(None),
        &toolchain(),
        &reporters,
        &say,
    )
    .await?
    {
        Driven::Listed(scenarios) => {
            for s in scenarios {
                println!("{}\t[{}]\t{}", s.name, s.labels.join(","), s.summary);
            }
            Ok(ExitCode::SUCCESS)
        }
        Driven::Planned(plan) => {
            println!("{plan}");
            Ok(ExitCode::SUCCESS)
        }
        Driven::Ran { status, dir } => {
            eprintln!("reports: {}", dir.display());
            crate::report::summary::append_run(&dir)?;
            Ok(exit_code(status))
        }
    }
}

/// The documented exit code of a run's status.
fn exit_code(status: crate::results::Status) -> ExitCode {
    match status {
        crate::results::Status::Passed => ExitCode::SUCCESS,
        crate::results::Status::Failed => ExitCode::from(EXIT_REGRESSION),
        crate::results::Status::InfraError => ExitCode::from(EXIT_INFRA),
    }
}

async fn chainsaw_check(paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let chainsaw = toolchain().chainsaw().await?;
    let files = crate::chainsaw::check(paths, &chainsaw).await?;
    let (mut ok, mut refused) = (0, 0);
    for (path, result) in &files {
        match result {
            Ok(tests) => {
                for t in tests {
                    ok += 1;
                    println!("ok       {}\t{}", t.name, path.display());
                }
            }
            Err(why) => {
                refused += 1;
                println!("refused  {}\t{}", path.display(), why.replace('\n', " "));
            }
        }
    }
    println!("{ok} runnable, {refused} refused, in {} files", files.len());
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Calls the library for one command; errors become exit code 1 in [`main`].
async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run_scenarios(args).await,
        Command::Explore(args) => explore(args).await,
        Command::Matrix(args) => matrix(args).await,
        Command::Coverage(args) => coverage(args).await,
        Command::Chainsaw(ChainsawCommand::Check { paths }) => chainsaw_check(&paths).await,
        Command::Qualify(args) => qualify(args).await,
        Command::Report(ReportCommand::Diff { before, after }) => report_diff(&before, &after),
        Command::Report(ReportCommand::Explain { dir, differences }) => {
            report_explain(&dir, differences.as_deref())
        }
        Command::Report(ReportCommand::Merge { dirs, report_dir }) => {
            report_merge(&dirs, &report_dir)
        }
        Command::Cluster(ClusterCommand::Up(args)) => cluster_up(*args).await,
        Command::Cluster(ClusterCommand::Down { name }) => {
            provider(None).down(&name)?;
            println!("cluster `{name}` removed");
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster(ClusterCommand::Configs { dir, check }) => cluster_configs(dir, check),
        Command::Cluster(ClusterCommand::List) => cluster_list(),
        Command::Bundle(BundleCommand::Install {
            cluster,
            controller,
        }) => bundle_install(cluster, controller).await,
        Command::Gc => gc(),
        Command::Toolchain(ToolchainCommand::Build {
            kubernetes,
            kwokctl,
            chainsaw,
            kubelet,
            controllers,
            daemon,
            upstream_e2e,
        }) => {
            let extras = crate::controller::BuildExtras {
                node: daemon,
                e2e: upstream_e2e,
            };
            let tools = Tools {
                kwokctl,
                chainsaw,
                kubelet,
            };
            toolchain_build(kubernetes, tools, controllers, extras).await
        }
        Command::Toolchain(ToolchainCommand::List) => toolchain_list(),
        Command::Kind(KindCommand::NodeImage { kubernetes }) => {
            let image = toolchain().kind_node_image(kubernetes.parse()?).await?;
            println!("{}\t{}", image.tag, image.archive.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::ClusterUp {
            runs,
            kubernetes,
            nodes,
            real_nodes,
            kind,
        }) => crate::bench::cluster_up(runs, kubernetes.parse()?, nodes, real_nodes, kind).await,
        Command::Bench(BenchCommand::Run { runs }) => crate::bench::run(runs).await,
        Command::Bench(BenchCommand::Soak { runs, report_dir }) => {
            crate::bench::soak(runs, &report_dir).await
        }
        Command::Bench(BenchCommand::Explore(args)) => {
            crate::bench::explore::run(args.request()).await
        }
        Command::Bench(BenchCommand::Flakes(args)) => {
            Ok(crate::bench::flakes::run(args.request()).await?)
        }
        Command::Bench(BenchCommand::Rediscovery(args)) => {
            Ok(crate::bench::rediscovery::run(args.request()).await?)
        }
        Command::Bench(BenchCommand::Bundle { runs, controller }) => {
            crate::bench::bundle(runs, controller.parse()?).await
        }
        Command::OciRuntime { runc, args } => Ok(oci_runtime(&runc, &args)),
        Command::Provisioner {
            kubeconfig,
            volumes_dir,
        } => {
            let client = crate::cluster::admin_client(&kubeconfig).await?;
            crate::cluster::local::provisioner::run(client, volumes_dir).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn coverage(args: CoverageArgs) -> anyhow::Result<ExitCode> {
    use crate::report::{coverage_table, run_coverage, uncovered_list};
    let path = args
        .from
        .clone()
        .unwrap_or_else(|| args.report_dir.join("latest/report.json"));
    let controller = args.controller.as_deref().map(str::parse).transpose()?;
    let run = run_coverage(&args.select.selection().filter(), &path, controller).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&run.coverage)?);
    } else {
        print!(
            "{}\n{}",
            coverage_table(&run.coverage),
            uncovered_list(&run.coverage)
        );
    }
    if !run.missing.is_empty() {
        eprintln!(
            "note: {} selected scenario(s) have no result in {} and count for nothing: {}",
            run.missing.len(),
            path.display(),
            run.missing.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn report_merge(dirs: &[PathBuf], report_dir: &Path) -> anyhow::Result<ExitCode> {
    let merged = crate::qualify::merge(dirs, report_dir)?;
    print_cells(&merged.report);
    eprintln!("reports: {}", merged.dir.display());
    if let Some((baseline, candidate, q)) = &merged.qualification {
        println!("{}", q.summary(baseline, candidate));
        return Ok(exit_code(q.status()));
    }
    Ok(exit_code(crate::results::Status::of(
        merged.report.cells.iter().flat_map(|c| &c.results),
    )))
}

fn report_explain(dir: &Path, differences: Option<&Path>) -> anyhow::Result<ExitCode> {
    use crate::bench::explain::{self, Differences};
    let summary = crate::explore::read_summary(dir).with_context(|| {
        format!(
            "{} is not an exploration's directory (reports/<run>/, which holds its \
             explore.json)",
            dir.display()
        )
    })?;
    let differences = match differences {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("read the differences {}: {e}", p.display()))?;
            Differences::parse(&text, &p.display().to_string())?
        }
        None => Differences::builtin(),
    };
    let list = crate::bench::rediscovery::List::builtin();
    let ledger = crate::run::ledger::Ledger::builtin();
    let rows = explain::explain(&summary, &list, &ledger, &differences);
    let md = explain::markdown(&summary, &rows, &differences);
    print!("{md}");
    crate::report::atomic_write(&dir.join("explained.md"), md.as_bytes())?;
    crate::report::atomic_write(
        &dir.join("explained.json"),
        serde_json::to_string_pretty(&rows)?.as_bytes(),
    )?;
    Ok(if explain::all_explained(&rows) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn report_diff(before: &Path, after: &Path) -> anyhow::Result<ExitCode> {
    use crate::report::diff;
    let d = diff::diff(&diff::load(before)?, &diff::load(after)?);
    print!("{d}");
    crate::report::summary::append(&d.to_string())?;
    Ok(if d.worse() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print_cells(report: &crate::matrix::MatrixReport) {
    println!("{:<10} {:<22} WORST", "KUBERNETES", "RELEASE");
    for c in &report.cells {
        println!(
            "{:<10} {:<22} {}",
            c.kubernetes.to_string(),
            c.controller.to_string(),
            c.worst
        );
    }
}

/// The cells' explorations (`matrix --explore`), a line each and a line per finding; empty
/// when none was made.
fn explored_cells(report: &crate::matrix::MatrixReport) -> String {
    let mut out = vec![];
    for c in &report.cells {
        if let Some(e) = &c.exploration {
            out.extend(e.lines(&format!("Kubernetes {} x {}", c.kubernetes, c.controller)));
        }
    }
    out.join("\n")
}

async fn matrix(args: MatrixArgs) -> anyhow::Result<ExitCode> {
    use crate::matrix::drive::{Driven, drive};
    let local = Provider::Local(provider(None));
    match drive(&args.request(), local, toolchain(), &say).await? {
        Driven::Printed(text) => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Driven::Ran { report, shard } => {
            if let Some(k) = shard {
                eprintln!(
                    "shard {k} done: merge every shard's directory with `harness report merge DIR...`"
                );
            }
            print_cells(&report);
            let explored = explored_cells(&report);
            if !explored.is_empty() {
                println!("{explored}");
            }
            let cells: Vec<(String, &[crate::results::ScenarioResult])> = report
                .cells
                .iter()
                .map(|c| {
                    (
                        format!("{} x {}", c.kubernetes, c.controller),
                        &c.results[..],
                    )
                })
                .collect();
            crate::report::summary::append(&crate::report::summary::markdown(
                &format!("harness matrix {}", report.id),
                &cells,
                Path::new(&report.id),
            ))?;
            if !explored.is_empty() {
                crate::report::summary::append(&format!(
                    "### Explored cells (not judged)\n\n```\n{explored}\n```\n\n"
                ))?;
            }
            Ok(exit_code(crate::results::Status::judged(
                report.cells.iter().flat_map(|c| &c.results),
                args.select.flakes.fail_on_flaky,
            )))
        }
    }
}

async fn qualify(args: QualifyArgs) -> anyhow::Result<ExitCode> {
    use crate::qualify::{Driven, drive};
    let local = Provider::Local(provider(None));
    match drive(&args.request(), local, toolchain(), &say).await? {
        Driven::Printed(text) => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Driven::ShardDone { index, count } => {
            eprintln!(
                "shard {index}/{count} done: the verdict comes from `harness report merge DIR...` \
                 over every shard's directory"
            );
            Ok(ExitCode::SUCCESS)
        }
        Driven::Qualified {
            baseline,
            candidate,
            qualification,
            failed_on_flaky,
        } => {
            let summary = qualification.summary(&baseline, &candidate);
            println!("{summary}");
            crate::report::summary::append(&format!(
                "## harness qualify {baseline} -> {candidate}\n\n```\n{summary}\n```\n\n"
            ))?;
            if failed_on_flaky {
                eprintln!("flaky results fail the qualification (--fail-on-flaky)");
                return Ok(exit_code(crate::results::Status::Failed));
            }
            Ok(exit_code(qualification.status()))
        }
    }
}

fn cluster_configs(dir: PathBuf, check: bool) -> anyhow::Result<ExitCode> {
    let files = crate::run::kind_configs(&crate::suites::all())?;
    let sync = crate::cluster::kind::sync_configs(&dir, &files, check)?;
    for path in &sync.written {
        println!("wrote {}", path.display());
    }
    if sync.stale.is_empty() {
        println!(
            "{} kind configs in {} are current",
            files.len(),
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let stale: Vec<String> = sync.stale.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "out of date (regenerate with `harness cluster configs`): {}",
        stale.join(", ")
    );
    Ok(ExitCode::from(EXIT_REGRESSION))
}

fn cluster_list() -> anyhow::Result<ExitCode> {
    let clusters = provider(None).list();
    if clusters.is_empty() {
        println!("no clusters");
    }
    for s in clusters {
        println!("{}", s.summary());
    }
    Ok(ExitCode::SUCCESS)
}

async fn bundle_install(cluster: String, controller: ControllerArgs) -> anyhow::Result<ExitCode> {
    let Some(choice) = controller.choice()? else {
        bail!(
            "name the controller with --controller, e.g. {}",
            crate::controller::ControllerRef::default_ref()
        );
    };
    if let Some(note) = choice.reference.note() {
        eprintln!("note: {note}");
    }
    let provider = provider(None);
    let mut c = provider.attach(&cluster).await?;
    let installed = choice
        .reference
        .controller()
        .install(
            crate::controller::Host::Processes(&mut c),
            &toolchain(),
            &choice.gates,
        )
        .await?;
    installed
        .settled(&c.client(), crate::up::SETTLE_TIMEOUT)
        .await?;
    c.detach()?;
    let logs: Vec<String> = installed
        .logs()
        .iter()
        .map(|l| l.display().to_string())
        .collect();
    println!(
        "{} ready in cluster `{cluster}` (logs: {})",
        choice.reference,
        logs.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// Replaces this process with runc (see [`crate::cluster::docker::runtime`]); returns only
/// when that fails.
fn oci_runtime(runc: &Path, args: &[std::ffi::OsString]) -> ExitCode {
    let Err(e) = crate::cluster::docker::runtime::exec_runc(runc, args);
    print_error(&e.into());
    ExitCode::FAILURE
}

fn gc() -> anyhow::Result<ExitCode> {
    // The work directories of killed benches, then the providers' leftovers.
    let benches = crate::bench::gc()?.into_iter();
    let mut removed: Vec<String> = benches
        .map(|n| format!("removed bench work directory `{n}`"))
        .collect();
    removed.extend(crate::cluster::any::gc(&provider(None), &toolchain())?);
    if removed.is_empty() {
        println!("nothing to remove");
    }
    for line in removed {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `toolchain build` builds beside Kubernetes and kwok.
struct Tools {
    kwokctl: bool,
    chainsaw: bool,
    kubelet: bool,
}

async fn toolchain_build(
    kubernetes: Vec<String>,
    tools: Tools,
    controllers: Vec<String>,
    extras: crate::controller::BuildExtras,
) -> anyhow::Result<ExitCode> {
    let tc = toolchain();
    let controllers: Vec<crate::controller::ControllerRef> = controllers
        .iter()
        .map(|c| c.parse())
        .collect::<Result<_, _>>()?;
    for c in &controllers {
        if let Some(note) = c.note() {
            eprintln!("note: {note}");
        }
        let print = |what: String, path: &Path| println!("{what}\t{}", path.display());
        c.controller().build_artifacts(&tc, extras, &print).await?;
    }
    if !controllers.is_empty() && kubernetes.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let versions = KubeVersion::parse_list(&kubernetes)?;
    let kwok = tc.kwok().await?;
    println!("kwok {KWOK_VERSION}\t{}", kwok.display());
    if tools.kwokctl {
        println!("kwokctl {KWOK_VERSION}\t{}", tc.kwokctl().await?.display());
    }
    if tools.chainsaw {
        let version = crate::toolchain::CHAINSAW_VERSION;
        println!("chainsaw {version}\t{}", tc.chainsaw().await?.display());
    }
    for v in versions {
        let b = tc.kubernetes(v).await?;
        println!("kubernetes {}\t{}", v.tag(), b.install.dir.display());
        if tools.kubelet {
            println!("kubelet {}\t{}", v.tag(), tc.kubelet(v).await?.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn toolchain_list() -> anyhow::Result<ExitCode> {
    let tc = toolchain();
    println!("supported Kubernetes versions (minor -> pinned release):");
    for r in KUBERNETES_RELEASES {
        let default = if r.minor == crate::toolchain::versions::DEFAULT_KUBERNETES {
            " (default)"
        } else {
            ""
        };
        println!("  {} -> {}{default}", r.minor, r.tag);
    }
    println!("cache: {}", tc.cache().root().display());
    for i in tc.cache().list() {
        println!(
            "  {}\t{}\tbuilt in {}s\t{}",
            i.manifest.key,
            i.manifest.built_with,
            i.manifest.build_seconds,
            i.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn cluster_up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let profile = args.profile.profile()?;
    let controller = args.controller.choice()?;
    if let Some(note) = controller.as_ref().and_then(|c| c.reference.note()) {
        eprintln!("note: {note}");
    }
    let request = args.request();
    request.validate()?;
    let logs = providers_root().join("logs");
    let local = provider(args.apiserver_port);
    if args.dry_run {
        print!("{}", request.dry_run(&profile, &local, &logs).await?);
        return Ok(ExitCode::SUCCESS);
    }
    let provider = request.provider.build(local, &toolchain(), logs)?;
    eprintln!(
        "starting cluster `{}` with the {} provider ...",
        args.name,
        provider.label()
    );
    let mut session = crate::up::Session::start(
        &provider,
        &toolchain(),
        &args.name,
        &profile,
        controller.as_ref(),
    )
    .await?;
    if let Some(i) = &session.installation {
        let logs: Vec<String> = i.logs().iter().map(|l| l.display().to_string()).collect();
        match logs.is_empty() {
            // In-cluster components log to their pods.
            true => eprintln!("{} ready (its pods log in the cluster)", i.reference),
            false => eprintln!("{} ready (logs: {})", i.reference, logs.join(", ")),
        }
    }
    println!("{}", session.cluster.kubeconfig().display());
    session.keep_dir(args.keep_dir);
    if args.detach {
        eprintln!("{}", session.detach()?);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("cluster `{}` is running; Ctrl-C to remove it", args.name);
    Err(session.supervise(Duration::from_millis(500)).await)
}
