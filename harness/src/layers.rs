//! The library's layers, as data: [`MODULES`] gives every top-level module its layer, from the
//! bottom, and what it holds. A module uses only modules of its own layer or of a layer below,
//! and no imports go round: neither two modules of one layer nor two parts (files or
//! directories side by side) of one module import each other, directly or through others.
//! `harness/tests/layers.rs` enforces both with a scan of the sources, and the book's layers
//! page (`docs/reference/layers.md`, [`crate::book::layers`]) is generated from this table.

/// A top-level module of the library and its place among the layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Module {
    /// Its name (`cluster` for `harness::cluster`; `suites` covers the top-level `suites/`).
    pub name: &'static str,
    /// Its layer: 0 at the bottom.
    pub layer: u8,
    /// What it holds, in a line.
    pub what: &'static str,
}

const fn module(name: &'static str, layer: u8, what: &'static str) -> Module {
    Module { name, layer, what }
}

/// Every top-level module, by layer from the bottom.
pub const MODULES: &[Module] = &[
    module("progress", 0, "progress output"),
    module(
        "process",
        0,
        "local processes: a `ComponentSpec` run with its log, ended TERM then KILL, and a `Supervisor` that starts it again when it exits",
    ),
    module("kruise", 0, "the generated OpenKruise types"),
    module(
        "wait",
        0,
        "the one way to wait: conditions with combinators over watched objects",
    ),
    module(
        "stop",
        0,
        "a stop the user asked for (Ctrl-C, SIGTERM) and the work that keeps its results through it",
    ),
    module("layers", 0, "this table"),
    module(
        "toolchain",
        1,
        "pinned binaries built from Go modules (and kopium, mdBook, Debian packages), cached",
    ),
    module(
        "cluster",
        2,
        "`Profile`, the `ClusterProvider` trait, local / kind / k3s / existing, the apiserver proxy for stale views (`cluster::proxy`); in `cluster::local`, the registry client and real nodes (`node`: the node, `node::probe` what the host offers, `node::teardown` what a node leaves on it)",
    ),
    module(
        "controller",
        3,
        "the `Controller` trait, the registry of controller families, what any controller's install uses (`controller::manifests`, ServiceAccount tokens), and OpenKruise, its first implementation (`controller::openkruise`: `build`, `manifests`, `local`, `in_cluster` and `ready`, its node daemon and its own e2e suite)",
    ),
    module(
        "scenario",
        4,
        "`Scenario`, `Ctx`, invariants, the typed workload vocabulary (`scenario::workload`), what scenarios send (`scenario::record`) and field coverage (`scenario::coverage`)",
    ),
    module(
        "results",
        5,
        "the result model (`ScenarioResult`, `Outcome`, `Verdict`, `Status`, `UpgradeReport`): written by `run`, read by `report`, `matrix`, `qualify`, `explore`",
    ),
    module(
        "chainsaw",
        5,
        "chainsaw tests found, their harness section read, and run by chainsaw as scenarios (the runner and the report mapping)",
    ),
    module(
        "suites",
        5,
        "the scenarios (the top-level `suites/`, compiled in)",
    ),
    module(
        "run",
        6,
        "planner (`run::plan`), executor, ledger, events, the `harness run` driver (`run::drive`)",
    ),
    module("up", 6, "a cluster kept up for a person"),
    module(
        "explore",
        7,
        "trials generated from the CRDs, the oracles, shrinking, findings",
    ),
    module("report", 8, "terminal, JUnit, JSON and HTML reporters"),
    module(
        "matrix",
        9,
        "cells and grids, sharding and merging shards (`matrix::drive`, `matrix::shard`)",
    ),
    module("bench", 9, "benchmarks"),
    module(
        "qualify",
        10,
        "qualification: a matrix of both releases compared, the upgrade checks, the verdict (also of merged shards), and on request an exploration of the candidate against the baseline",
    ),
    module(
        "cli",
        11,
        "parses (`cli::args`), calls the library, prints, maps errors to exit codes",
    ),
    module(
        "book",
        12,
        "the book's reference pages rendered from the code (the CLI's definition, the catalog, the ledger, this table)",
    ),
];

/// The layer of top-level module `name`, if it has one.
pub fn layer(name: &str) -> Option<u8> {
    MODULES.iter().find(|m| m.name == name).map(|m| m.layer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_named_once_and_listed_from_the_bottom() {
        let mut names: Vec<_> = MODULES.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MODULES.len(), "a module is named twice");
        assert!(MODULES.windows(2).all(|w| w[0].layer <= w[1].layer));
        assert_eq!(layer("cluster"), Some(2));
        assert_eq!(layer("nowhere"), None);
    }
}
