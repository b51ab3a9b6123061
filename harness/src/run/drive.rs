//! `harness run` from start to end: [`drive`] checks a [`Request`], lists or plans the
//! selected scenarios, or runs them on clusters of the chosen provider with reports under
//! `<report dir>/<run id>/`, and says what came of it ([`Driven`]).

use std::path::{Path, PathBuf};

use anyhow::bail;

use super::ledger::Ledger;
use super::select::Selection;
use super::{Env, Reporter, RunOptions};
use crate::cluster::any::ProviderConfig;
use crate::cluster::local::LocalProvider;
use crate::controller::ControllerRef;
use crate::results::Status;
use crate::toolchain::{KubeVersion, Toolchain};

/// What `harness run` asks for.
#[derive(Debug, Clone)]
pub struct Request {
    /// Kubernetes version of the cell.
    pub kubernetes: String,
    /// Controller under test (`NAME@TAG`).
    pub controller: String,
    /// Which scenarios.
    pub select: Selection,
    /// List the selected scenarios and run nothing.
    pub list: bool,
    /// Describe the plan and run nothing.
    pub dry_run: bool,
    /// Every scenario this many times.
    pub repeat: usize,
    /// Tries after a failure.
    pub retries: usize,
    /// Whether a flaky result fails the run.
    pub fail_on_flaky: bool,
    /// Scenarios at once per cluster.
    pub parallel: usize,
    /// Clusters at once.
    pub clusters_parallel: usize,
    /// Leave a cluster running if one of its scenarios failed.
    pub keep_cluster_on_failure: bool,
    /// Where reports go.
    pub report_dir: PathBuf,
    /// A ledger of known bugs instead of the built-in one.
    pub ledger: Option<PathBuf>,
    /// An earlier run's report whose times order the work.
    pub costs: Option<PathBuf>,
    /// Where clusters come from.
    pub provider: ProviderConfig,
}

impl Request {
    /// The Kubernetes version and the controller.
    pub fn cell(&self) -> anyhow::Result<(KubeVersion, ControllerRef)> {
        Ok((self.kubernetes.parse()?, self.controller.parse()?))
    }

    /// Refuses counts of zero.
    pub fn check_counts(&self) -> anyhow::Result<()> {
        if self.parallel == 0 || self.repeat == 0 || self.clusters_parallel == 0 {
            bail!("--parallel, --clusters-parallel and --repeat must be at least 1");
        }
        Ok(())
    }
}

/// A selected scenario, as `--list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub name: crate::scenario::Text,
    /// Its labels.
    pub labels: Vec<crate::scenario::Text>,
    /// What it establishes.
    pub summary: crate::scenario::Text,
}

/// What came of a [`Request`].
#[derive(Debug)]
pub enum Driven {
    /// The selected scenarios (`--list`).
    Listed(Vec<Listed>),
    /// The plan described (`--dry-run`).
    Planned(String),
    /// The run's status and its report directory.
    Ran {
        /// Judged as the request asks (flaky results failing the run or not).
        status: Status,
        /// `<report dir>/<run id>`.
        dir: PathBuf,
    },
}

/// Where a run's events go: given the report directory and the run id, the run's own
/// directory and its reporters.
pub type MakeReporters<'a> =
    &'a dyn Fn(&Path, &str) -> anyhow::Result<(PathBuf, Vec<Box<dyn Reporter>>)>;

/// Lists, plans or runs what `request` asks; notes and warnings go to `say` as they come.
/// `local` is the local provider to use, `toolchain` builds what is missing, `reporters`
/// makes the run's reporters once the provider is checked.
pub async fn drive(
    request: &Request,
    local: LocalProvider,
    toolchain: &Toolchain,
    reporters: MakeReporters<'_>,
    say: &dyn Fn(String),
) -> anyhow::Result<Driven> {
    let (kubernetes, controller) = request.cell()?;
    if let Some(note) = controller.note() {
        say(format!("note: {note}"));
    }
    request.check_counts()?;
    let ledger = match &request.ledger {
        Some(p) => Ledger::load(p)?,
        None => Ledger::builtin(),
    };
    let upstream = request.select.upstream()?;
    if upstream.is_some() && request.list {
        bail!(
            "--list lists harness scenarios; the upstream suite's specs are listed by its own binary"
        );
    }
    let all = request.select.catalog()?;
    let inject_failures = super::select::injected_failures_from_env(&all, say)?;
    let filter = request.select.filter();
    filter.check_suites(&all)?;
    if request.list {
        return Ok(Driven::Listed(
            all.iter()
                .filter(|s| filter.selects(s))
                .map(|s| Listed {
                    name: s.name.clone(),
                    labels: s.labels.clone(),
                    summary: s.summary.clone(),
                })
                .collect(),
        ));
    }
    let preflight = super::preflight::Request {
        kubernetes,
        controller: &controller,
        scenarios: &all,
        filter: &filter,
        upstream: upstream.as_ref(),
    };
    for warning in super::preflight::check(&preflight).await? {
        say(format!("warning: {warning}"));
    }
    let plan = match &upstream {
        Some(choice) => choice.plan(kubernetes, &controller, toolchain).await?,
        None => super::plan(&all, &filter, kubernetes, &controller),
    };
    if plan.clusters.is_empty() && plan.skipped.is_empty() {
        bail!("select scenarios: the filters match none (see `harness run --list`)");
    }
    request.provider.validate()?;
    if request.dry_run {
        return Ok(Driven::Planned(plan.describe(request.provider.label())));
    }
    let costs = match &request.costs {
        Some(p) => super::costs::Costs::load(p)?,
        None => {
            let newest = request.report_dir.join("latest").join("report.json");
            super::costs::Costs::load(&newest).unwrap_or_default()
        }
    };
    let run_id = super::new_id("");
    // The provider is checked before anything is written.
    let provider = request.provider.build(
        local,
        toolchain,
        request.report_dir.join(&run_id).join("cluster-logs"),
    )?;
    if let Some(reason) = upstream
        .as_ref()
        .filter(|u| u.real_nodes > 0)
        .and_then(|_| provider.no_real_nodes())
    {
        bail!("--upstream-real-nodes: the suite's cluster {reason}");
    }
    let cold = toolchain.cold(&builds(&plan, &all, &provider));
    if !cold.is_empty() {
        say(crate::toolchain::estimate::plan_text(&cold));
    }
    let (dir, mut reporters) = reporters(&request.report_dir, &run_id)?;
    let options = RunOptions {
        parallel: request.parallel,
        clusters_parallel: request.clusters_parallel,
        repeat: request.repeat,
        retries: request.retries,
        inject_failures,
        keep_cluster_on_failure: request.keep_cluster_on_failure,
        logs_dir: Some(dir.join("cluster-logs")),
        costs,
        ..Default::default()
    };
    let env = Env {
        scenarios: &all,
        ledger: &ledger,
        provider: &provider,
        toolchain,
        options: &options,
    };
    let plan = options
        .costs
        .balance(&plan, options.parallel, options.clusters_parallel);
    let results = super::execute(&plan, env, &run_id, &mut reporters).await;
    Ok(Driven::Ran {
        status: Status::judged(&results, request.fail_on_flaky),
        dir,
    })
}

/// The cached builds `plan` needs on `provider`, in the order they are first needed: each
/// cluster's from the provider and the controller, and chainsaw for declarative tests.
pub fn builds(
    plan: &super::Plan,
    scenarios: &[crate::scenario::Scenario],
    provider: &crate::cluster::any::Provider,
) -> Vec<crate::toolchain::BuildKey> {
    let controller = plan.controller.controller();
    let mut out = vec![];
    for pc in &plan.clusters {
        out.extend(provider.builds(&pc.profile));
        out.extend(controller.builds(!pc.profile.real_nodes.is_empty()));
        if pc.uses_label(scenarios, crate::chainsaw::LABEL) {
            out.push(crate::toolchain::BuildKey::new(
                "chainsaw",
                crate::toolchain::CHAINSAW_VERSION,
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|k| seen.insert(k.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            kubernetes: "1.32".into(),
            controller: "openkruise@v1.9.0".into(),
            select: Selection::default(),
            list: false,
            dry_run: false,
            repeat: 1,
            retries: 0,
            fail_on_flaky: false,
            parallel: 4,
            clusters_parallel: 2,
            keep_cluster_on_failure: false,
            report_dir: "reports".into(),
            ledger: None,
            costs: None,
            provider: ProviderConfig::default(),
        }
    }

    #[test]
    fn the_builds_of_a_plan_are_named_once_each() {
        use crate::toolchain::BuildKey;
        let all = crate::suites::all();
        let (k, c) = request().cell().unwrap();
        let plan = super::super::plan(&all, &Default::default(), k, &c);
        let tc = Toolchain::new(
            crate::toolchain::Cache::new("/nonexistent"),
            crate::progress::Progress::silent(),
        );
        let local = crate::cluster::any::Provider::Local(LocalProvider::new(
            tc,
            Default::default(),
            crate::progress::Progress::silent(),
        ));
        let keys = builds(&plan, &all, &local);
        let has = |c: &str, v: &str| keys.contains(&BuildKey::new(c, v));
        assert!(has("kubernetes", "v1.32.5") && has("kwok", crate::toolchain::KWOK_VERSION));
        assert!(has("kruise-manager", "v1.9.0"), "{keys:?}");
        // The catalog has real-node scenarios and declarative tests.
        assert!(
            has("kubelet", "v1.32.5") && has("kruise-daemon", "v1.9.0"),
            "{keys:?}"
        );
        assert!(
            has("chainsaw", crate::toolchain::CHAINSAW_VERSION),
            "{keys:?}"
        );
        let unique: std::collections::BTreeSet<&BuildKey> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "{keys:?}");
        assert_eq!(keys[0], BuildKey::new("kubernetes", "v1.32.5"));
    }

    #[test]
    fn the_cell_is_parsed_and_counts_are_at_least_one() {
        let (k, c) = request().cell().unwrap();
        assert_eq!(k, "1.32".parse().unwrap());
        assert_eq!(c.to_string(), "openkruise@v1.9.0");
        for zero in [
            Request {
                parallel: 0,
                ..request()
            },
            Request {
                repeat: 0,
                ..request()
            },
            Request {
                clusters_parallel: 0,
                ..request()
            },
        ] {
            let e = zero.check_counts().unwrap_err().to_string();
            assert!(e.contains("must be at least 1"), "{e}");
        }
        assert!(
            Request {
                kubernetes: "0.1".into(),
                ..request()
            }
            .cell()
            .is_err()
        );
    }
}
