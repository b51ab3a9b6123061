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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_guides_example_passes_through_the_runner_on_the_default_cell() {
    let scenarios = vec![example::partition_keeps_old_pods()];
    // Through the planner and the runner, on a cluster of its own, which the run removes.
    let reference: ControllerRef = format!("openkruise@{DEFAULT_VERSION}").parse().unwrap();
    let results = common::run_scenarios(scenarios, &reference, "scenario-guide").await;

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
}
