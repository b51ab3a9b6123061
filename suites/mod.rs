//! The conformance scenarios, grouped by feature area: a suite is a file (`workloadspread.rs`)
//! or, when it grows, a directory of files, one concept each (`cloneset/`). [`all`] lists
//! every scenario.
//!
//! These files are compiled into the harness crate (see `harness/src/suites.rs`).

pub mod advancedcronjob;
pub mod broadcastjob;
pub mod cloneset;
pub mod common;
pub mod daemonset;
pub mod node_daemon;
pub mod parity;
pub mod persistentpodstate;
pub mod podunavailablebudget;
pub mod real_node;
pub mod resourcedistribution;
pub mod sidecarset;
pub mod statefulset;
pub mod uniteddeployment;
pub mod upgrade;
pub mod workloadspread;

use crate::scenario::Scenario;

/// Every scenario, in a stable order.
pub fn all() -> Vec<Scenario> {
    let mut v = vec![];
    v.extend(workloadspread::scenarios());
    v.extend(cloneset::scenarios());
    v.extend(sidecarset::scenarios());
    v.extend(daemonset::scenarios());
    v.extend(parity::scenarios());
    v.extend(uniteddeployment::scenarios());
    v.extend(podunavailablebudget::scenarios());
    v.extend(resourcedistribution::scenarios());
    v.extend(persistentpodstate::scenarios());
    v.extend(statefulset::scenarios());
    v.extend(broadcastjob::scenarios());
    v.extend(advancedcronjob::scenarios());
    v.extend(real_node::scenarios());
    v.extend(node_daemon::scenarios());
    v.extend(upgrade::scenarios());
    v.extend(declarative());
    v
}

/// The declarative scenarios: the chainsaw tests under `suites/chainsaw/` (test files, or
/// directories with a `chainsaw-test.yaml`), discovered by the build and compiled in; each
/// run writes a test's files to a directory of its own for chainsaw.
pub fn declarative() -> Vec<Scenario> {
    /// Every file under `suites/chainsaw/` (path relative to it, contents).
    const FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/declarative.rs"));
    static TESTS: std::sync::OnceLock<Vec<Scenario>> = std::sync::OnceLock::new();
    TESTS
        .get_or_init(|| {
            crate::chainsaw::parse_embedded("suites/chainsaw", FILES)
                .unwrap_or_else(|e| panic!("suites/chainsaw: {e:#}"))
                .into_iter()
                .map(|t| crate::chainsaw::scenario(t, &crate::chainsaw::Settings::default()))
                .collect()
        })
        .clone()
}
