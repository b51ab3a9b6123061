//! `harness matrix` from start to end, and what `harness qualify` shares with it: a
//! [`Setup`] made from the selection ([`Select`]) runs the cells; [`sharding`] splits the
//! units of work as `--shard`, `--plan` and `--binaries` ask ([`ShardOptions`]); [`drive`]
//! runs a whole [`Request`].

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::shard::{ShardInfo, Unit};
use super::{Costs, MatrixReport, Shard};
use crate::cluster::any::Provider;
use crate::controller::ControllerRef;
use crate::progress::Progress;
use crate::run::ledger::Ledger;
use crate::run::select::Selection;
use crate::run::upstream::Choice;
use crate::run::{Env, Filter, RunOptions};
use crate::scenario::Scenario;
use crate::toolchain::{KubeVersion, Toolchain};

/// The selection and pace of `matrix` and `qualify`.
#[derive(Debug, Clone)]
pub struct Select {
    /// Which scenarios.
    pub selection: Selection,
    /// Scenarios at once per cluster.
    pub parallel: usize,
    /// Cells at once.
    pub cells_parallel: usize,
    /// Tries after a failure.
    pub retries: usize,
    /// Whether a flaky result fails the run.
    pub fail_on_flaky: bool,
    /// Where reports go (`<dir>/<id>/`, `<dir>/latest`).
    pub report_dir: PathBuf,
}

/// How a matrix is split over CI runners.
#[derive(Debug, Clone)]
pub struct ShardOptions {
    /// Run only this shard.
    pub shard: Option<Shard>,
    /// A report to take expected costs from (estimates without it).
    pub costs: Option<PathBuf>,
    /// Describe the split and run nothing.
    pub plan: bool,
    /// Name the binaries the shard needs and run nothing.
    pub binaries: bool,
    /// The wall time a shard should stay under, for the plan.
    pub target_minutes: u64,
}

impl ShardOptions {
    /// The expected costs: from the report given, or estimates.
    pub fn costs(&self) -> anyhow::Result<Costs> {
        Ok(match &self.costs {
            Some(p) => Costs::load(p)?,
            None => Costs::estimate(),
        })
    }
}

/// What a matrix or a qualification runs with, from its selection.
pub struct Setup {
    /// The scenarios to select from.
    pub scenarios: Vec<Scenario>,
    /// Known bugs.
    pub ledger: Ledger,
    /// Which scenarios.
    pub filter: Filter,
    /// Makes clusters.
    pub provider: Provider,
    /// Builds binaries.
    pub toolchain: Toolchain,
    /// How each cell runs.
    pub options: RunOptions,
    /// The upstream suite the cells run instead of scenarios.
    pub upstream: Option<Choice>,
}

impl Setup {
    /// Checks `select` and reads what it selects; cells run on `provider`.
    pub fn new(
        select: &Select,
        provider: Provider,
        toolchain: Toolchain,
        say: &dyn Fn(String),
    ) -> anyhow::Result<Self> {
        if select.parallel == 0 || select.cells_parallel == 0 {
            bail!("--parallel and --cells-parallel must be at least 1");
        }
        let upstream = select.selection.upstream()?;
        let scenarios = select.selection.catalog()?;
        let inject_failures = crate::run::select::injected_failures_from_env(&scenarios, say)?;
        let filter = select.selection.filter();
        if upstream.is_none() && !scenarios.iter().any(|s| filter.selects(s)) {
            bail!("select scenarios: the filters match none (see `harness run --list`)");
        }
        Ok(Self {
            scenarios,
            ledger: Ledger::builtin(),
            filter,
            provider,
            toolchain,
            options: RunOptions {
                parallel: select.parallel,
                // Cells already run side by side (--cells-parallel); each runs its clusters
                // one after another.
                clusters_parallel: 1,
                retries: select.retries,
                inject_failures,
                ..Default::default()
            },
            upstream,
        })
    }

    /// What the runner needs of it.
    pub fn env(&self) -> Env<'_> {
        Env {
            scenarios: &self.scenarios,
            ledger: &self.ledger,
            provider: &self.provider,
            toolchain: &self.toolchain,
            options: &self.options,
        }
    }

    /// The units of work of a matrix (its cells, and for a qualification its upgrade checks),
    /// in grid order, with their expected seconds.
    pub fn units(
        &self,
        versions: &[KubeVersion],
        controllers: &[ControllerRef],
        upgrade: Option<(&ControllerRef, &ControllerRef)>,
        costs: &Costs,
    ) -> Vec<(Unit, f64)> {
        let mut units: Vec<(Unit, f64)> = super::cell_units(versions, controllers)
            .into_iter()
            .map(|u| {
                let Unit::Cell {
                    kubernetes,
                    controller,
                } = &u
                else {
                    unreachable!("cell_units gives cells")
                };
                let plan = match &self.upstream {
                    // The cost of a suite run is its cluster's: no scenario times to add.
                    Some(choice) => crate::run::upstream::plan(
                        *kubernetes,
                        controller,
                        choice.suite(controller),
                        vec![],
                    ),
                    None => {
                        crate::run::plan(&self.scenarios, &self.filter, *kubernetes, controller)
                    }
                };
                let cost = costs.plan(&plan, self.options.parallel);
                (u, cost)
            })
            .collect();
        if let Some((baseline, candidate)) = upgrade {
            for v in versions {
                let every = Filter::default();
                let plan =
                    crate::run::plan_upgrade(&self.scenarios, &every, *v, baseline, candidate);
                let cost = costs.plan(&plan, self.options.parallel);
                units.push((Unit::Upgrade { kubernetes: *v }, cost));
            }
        }
        units
    }

    /// Runs the cells (every version with every controller, or those of `shard`) into
    /// `<report dir>/<id>/`, pointing `<report dir>/latest` at it.
    pub async fn cells(
        &self,
        select: &Select,
        versions: Vec<KubeVersion>,
        controllers: Vec<ControllerRef>,
        prefix: &str,
        shard: Option<ShardInfo>,
        say: &dyn Fn(String),
    ) -> anyhow::Result<MatrixReport> {
        for note in controllers.iter().filter_map(|c| c.note()) {
            say(format!("note: {note}"));
        }
        let progress = Progress::stderr();
        let id = crate::run::new_id(prefix);
        let dir = select.report_dir.join(&id);
        let env = super::MatrixEnv {
            scenarios: &self.scenarios,
            filter: &self.filter,
            ledger: &self.ledger,
            provider: &self.provider,
            toolchain: &self.toolchain,
            options: &self.options,
            progress: &progress,
            cells_parallel: select.cells_parallel,
            upstream: self.upstream.as_ref(),
        };
        let report = super::run_matrix(env, &versions, &controllers, &id, &dir, shard)
            .await
            .with_context(|| format!("write reports in {}", dir.display()))?;
        point_latest(&select.report_dir, &id);
        say(format!("reports: {}", dir.display()));
        Ok(report)
    }
}

/// Points `<report dir>/latest` at `id`, as well as it can.
pub fn point_latest(report_dir: &Path, id: &str) {
    let latest = report_dir.join("latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(id, &latest);
}

/// Merges the shards' outputs in `dirs` into `<report dir>/<new id>/` (nothing half-written on
/// failure) and points `<report dir>/latest` at it; the id says `qualify` when the shards
/// are a qualification's.
pub fn merge_shards(
    dirs: &[PathBuf],
    report_dir: &Path,
) -> Result<(super::shard::Merged, PathBuf), super::shard::MergeError> {
    // The kind of run comes from the first shard; the merge checks the rest.
    let first = dirs.first().map(|d| d.join("matrix.json"));
    let qualify = first
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<MatrixReport>(&b).ok())
        .and_then(|r| r.shard)
        .is_some_and(|s| s.qualify.is_some());
    let id = crate::run::new_id(if qualify { "qualify" } else { "matrix" });
    let out = report_dir.join(&id);
    let merged = match super::shard::merge(dirs, &out, &id) {
        Ok(m) => m,
        Err(e) => {
            // Nothing half-written.
            let _ = std::fs::remove_dir_all(&out);
            return Err(e);
        }
    };
    point_latest(report_dir, &id);
    Ok((merged, out))
}

/// What `--shard`, `--plan` and `--binaries` make of a matrix.
#[derive(Debug, Clone, PartialEq)]
pub enum Sharding {
    /// Run every unit.
    Whole,
    /// Run this shard's units.
    Shard(ShardInfo),
    /// Run nothing; print this (the split, or the binaries needed).
    Print(String),
}

/// Splits `units` as `options` ask, or describes the split or the binaries needed.
pub fn sharding(
    options: &ShardOptions,
    units: Vec<(Unit, f64)>,
    cells_parallel: usize,
    upstream: Option<&Choice>,
) -> Sharding {
    let count = options.shard.map_or(1, |s| s.count);
    let split = super::shard::split(units, count);
    let index = options.shard.map_or(1, |s| s.index);
    if options.binaries {
        return Sharding::Print(format!(
            "{}\n",
            super::shard::binaries(&split, index, upstream).join(",")
        ));
    }
    if options.plan {
        return Sharding::Print(super::shard::plan_table(
            &split,
            count,
            cells_parallel,
            options.target_minutes,
        ));
    }
    match options.shard {
        None => Sharding::Whole,
        Some(s) => Sharding::Shard(ShardInfo {
            index: s.index,
            count: s.count,
            units: split,
            qualify: None,
        }),
    }
}

/// What `harness matrix` asks for.
#[derive(Debug, Clone)]
pub struct Request {
    /// Kubernetes versions, a range or a list (default: from the matrix file).
    pub kubernetes: Option<String>,
    /// Releases (default: from the matrix file).
    pub controllers: Option<String>,
    /// The matrix file with the defaults.
    pub matrix_file: PathBuf,
    /// Selection and pace.
    pub select: Select,
    /// Sharding.
    pub shards: ShardOptions,
    /// An exploration of every cell to make as well, after the cells ran.
    pub explore: Option<crate::explore::Exploring>,
}

impl Request {
    /// The versions and releases of the grid: as given, else from the matrix file.
    pub fn grid(&self) -> anyhow::Result<(Vec<KubeVersion>, Vec<ControllerRef>)> {
        let file = if self.kubernetes.is_none() || self.controllers.is_none() {
            Some(super::MatrixFile::load(&self.matrix_file)?)
        } else {
            None
        };
        let versions = super::parse_versions(
            self.kubernetes
                .as_deref()
                .unwrap_or_else(|| &file.as_ref().expect("loaded").kubernetes),
        )?;
        let controllers = super::parse_controllers(
            self.controllers
                .as_deref()
                .unwrap_or_else(|| &file.as_ref().expect("loaded").controllers),
        )?;
        Ok((versions, controllers))
    }
}

/// Explores every cell of `report` (in `<report dir>/<its id>/`) after it ran, one after
/// another, each with `harness explore`'s defaults and the same seed (the same trials on every
/// cell, so that what differs between cells is the cells'), into `explore/<cell>/` beside the
/// cell's reports; rewrites the matrix's reports with them. A cell whose exploration fails
/// says so and the others go on.
async fn explore_cells(
    e: &crate::explore::Exploring,
    setup: &Setup,
    report_dir: &Path,
    report: &mut MatrixReport,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<()> {
    let dir = report_dir.join(&report.id);
    let seed = u64::from(rand::random::<u32>());
    let count = report.cells.len();
    for (i, cell) in report.cells.iter_mut().enumerate() {
        let relative = Path::new("explore").join(&cell.dir);
        let options = e.options(
            cell.kubernetes,
            cell.controller.clone(),
            seed,
            dir.join(&relative),
        );
        say(format!(
            "exploring cell {}/{count} (Kubernetes {} x {}) for {:?} (seed {seed}; {})",
            i + 1,
            cell.kubernetes,
            cell.controller,
            e.budget,
            options.dir.display()
        ));
        match explore_into(&options, &setup.provider, &setup.toolchain, say).await {
            Ok(mut explored) => {
                // Relative to the matrix directory, as the cell's own reports are.
                explored.dir = relative;
                cell.exploration = Some(explored);
            }
            Err(e) => say(format!(
                "Kubernetes {} x {}: the exploration did not run: {e:#}",
                cell.kubernetes, cell.controller
            )),
        }
    }
    super::write_matrix(&dir, report)
        .with_context(|| format!("write matrix.json in {}", dir.display()))
}

/// Explores as `options` say (see [`crate::explore::explore`]) and writes the exploration's `report.html`
/// beside its findings: what a run that explores beside its cells keeps of it.
pub async fn explore_into(
    options: &crate::explore::Options,
    provider: &Provider,
    toolchain: &Toolchain,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<crate::explore::Explored> {
    let summary = crate::explore::explore(options, provider, toolchain, say).await?;
    let page = options.dir.join("report.html");
    crate::report::atomic_write(
        &page,
        crate::report::explore::html(&summary, &options.dir).as_bytes(),
    )
    .with_context(|| format!("write {}", page.display()))?;
    Ok(crate::explore::Explored {
        dir: options.dir.clone(),
        seed: options.seed,
        trials: summary.trials.values().sum(),
        findings: summary
            .findings
            .iter()
            .map(|r| {
                format!(
                    "{} {}: {} ({})",
                    r.finding.oracle.short(),
                    r.finding.subject,
                    r.finding.key,
                    r.reproduction()
                )
            })
            .collect(),
    })
}

/// What came of a matrix [`Request`].
#[derive(Debug)]
pub enum Driven {
    /// Nothing ran; this was printed instead (`--plan`, `--binaries`).
    Printed(String),
    /// The cells ran (of one shard, if `shard` says `K/N`).
    Ran {
        /// The report.
        report: Box<MatrixReport>,
        /// `K/N` when one shard ran.
        shard: Option<String>,
    },
}

/// Runs (or plans) the matrix `request` asks for on `provider`; notes go to `say`.
pub async fn drive(
    request: &Request,
    provider: Provider,
    toolchain: Toolchain,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Driven> {
    let (versions, controllers) = request.grid()?;
    if let Some(e) = &request.explore {
        crate::explore::select(&e.kinds)?;
        if request.shards.shard.is_some() {
            bail!(
                "--explore goes with an unsharded matrix: explore a cell on its own with \
                 `harness explore --controller RELEASE --k8s VERSION --budget DURATION` beside \
                 the shards"
            );
        }
    }
    let mut setup = Setup::new(&request.select, provider, toolchain, say)?;
    let costs = request.shards.costs()?;
    setup.options.costs = costs.clone();
    let units = setup.units(&versions, &controllers, None, &costs);
    let shard = match sharding(
        &request.shards,
        units,
        request.select.cells_parallel,
        setup.upstream.as_ref(),
    ) {
        Sharding::Print(text) => return Ok(Driven::Printed(text)),
        Sharding::Whole => None,
        Sharding::Shard(info) => Some(info),
    };
    let sharded = shard.as_ref().map(|s| format!("{}/{}", s.index, s.count));
    let mut report = setup
        .cells(&request.select, versions, controllers, "matrix", shard, say)
        .await?;
    if let Some(e) = &request.explore {
        explore_cells(e, &setup, &request.select.report_dir, &mut report, say).await?;
    }
    Ok(Driven::Ran {
        report: Box::new(report),
        shard: sharded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(minor: u32, version: &str) -> Unit {
        Unit::Cell {
            kubernetes: format!("1.{minor}").parse().unwrap(),
            controller: format!("openkruise@{version}").parse().unwrap(),
        }
    }

    fn options() -> ShardOptions {
        ShardOptions {
            shard: None,
            costs: None,
            plan: false,
            binaries: false,
            target_minutes: 30,
        }
    }

    fn units() -> Vec<(Unit, f64)> {
        vec![
            (cell(32, "v1.8.3"), 600.0),
            (cell(32, "v1.9.0"), 300.0),
            (
                Unit::Upgrade {
                    kubernetes: "1.32".parse().unwrap(),
                },
                120.0,
            ),
        ]
    }

    #[test]
    fn without_shard_flags_the_whole_matrix_runs() {
        assert_eq!(sharding(&options(), units(), 2, None), Sharding::Whole);
    }

    #[test]
    fn a_shard_records_the_whole_split() {
        let o = ShardOptions {
            shard: Some("2/2".parse().unwrap()),
            ..options()
        };
        let Sharding::Shard(info) = sharding(&o, units(), 2, None) else {
            panic!("a shard");
        };
        assert_eq!((info.index, info.count, info.units.len()), (2, 2, 3));
        assert_eq!(info.mine().count(), 2, "{info:?}");
        assert!(info.qualify.is_none());
    }

    #[test]
    fn plan_and_binaries_print_instead_of_running() {
        let o = ShardOptions {
            shard: Some("1/2".parse().unwrap()),
            binaries: true,
            ..options()
        };
        assert_eq!(
            sharding(&o, units(), 2, None),
            Sharding::Print("k8s-1.32.5,openkruise-v1.8.3\n".into())
        );
        let o = ShardOptions {
            plan: true,
            ..options()
        };
        let Sharding::Print(table) = sharding(&o, units(), 2, None) else {
            panic!("a plan");
        };
        assert!(table.starts_with("UNIT"), "{table}");
    }

    #[test]
    fn the_grid_comes_from_the_flags_before_the_file() {
        let r = Request {
            kubernetes: Some("1.29,1.32".into()),
            controllers: Some("openkruise@v1.8.3,v1.9.0".into()),
            matrix_file: "/no/such/matrix.yaml".into(),
            select: Select {
                selection: Selection::default(),
                parallel: 1,
                cells_parallel: 1,
                retries: 0,
                fail_on_flaky: false,
                report_dir: "reports".into(),
            },
            shards: options(),
            explore: None,
        };
        let (v, c) = r.grid().unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(c.len(), 2);
        let e = Request {
            kubernetes: None,
            ..r
        }
        .grid()
        .unwrap_err();
        assert!(format!("{e:#}").contains("/no/such/matrix.yaml"), "{e:#}");
    }
}
