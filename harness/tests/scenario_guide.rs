//! The book's scenario guide, run: its worked example (`docs/examples/partition.rs`, shown
//! on the page `docs/writing-a-scenario.md`) compiled here and run through the planner and the
//! runner, as the catalog's scenarios are, on a local cluster with the default OpenKruise
//! release.

mod common;

#[path = "../../docs/examples/partition.rs"]
mod example;

use harness::controller::ControllerRef;
use harness::controller::openkruise::DEFAULT_VERSION;
use harness::results::{Outcome, Verdict};
use harness::run::plan::{Filter, plan};
use harness::toolchain::{Cache, KubeVersion, Toolchain};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_guides_example_passes_through_the_runner_on_the_default_cell() {
    let scenarios = vec![example::partition_keeps_old_pods()];
    let reference: ControllerRef = format!("openkruise@{DEFAULT_VERSION}").parse().unwrap();
    let plan = plan(
        &scenarios,
        &Filter::default(),
        KubeVersion::default_version(),
        &reference,
    );
    assert_eq!(plan.clusters.len(), 1, "{plan:?}");
    let (provider, root) = common::provider();
    let toolchain = Toolchain::new(Cache::from_env(), harness::progress::Progress::plain());
    let provider = harness::cluster::any::Provider::Local(provider);
    let ledger = harness::run::ledger::Ledger::builtin();
    let options = harness::run::RunOptions::default();
    let env = harness::run::Env {
        scenarios: &scenarios,
        ledger: &ledger,
        provider: &provider,
        toolchain: &toolchain,
        options: &options,
    };
    let results = harness::run::execute(&plan, env, "scenario-guide", &mut []).await;

    assert_eq!(results.len(), 1, "{results:?}");
    let r = &results[0];
    assert!(
        matches!(r.outcome, Outcome::Judged(Verdict::Pass)),
        "{}: {:?}: {}",
        r.scenario,
        r.outcome,
        r.failure.as_deref().unwrap_or_default()
    );
    let steps: Vec<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        steps,
        [
            "two pods run the old image",
            "a new image with a partition of 1 updates one pod",
            "a partition of 0 updates the other"
        ]
    );
    // The run removed its cluster.
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
