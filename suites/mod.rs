//! The conformance scenarios, grouped by feature area. [`all`] lists every scenario.
//!
//! These files are compiled into the harness crate (see `harness/src/suites.rs`).

pub mod advancedcronjob;
pub mod broadcastjob;
pub mod cloneset;
pub mod cloneset_lifecycle;
pub mod common;
pub mod daemonset;
pub mod daemonset_lifecycle;
pub mod node_daemon;
pub mod parity;
pub mod persistentpodstate;
pub mod podunavailablebudget;
pub mod real_node;
pub mod resourcedistribution;
pub mod sidecarset;
pub mod sidecarset_injection;
pub mod sidecarset_lifecycle;
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
    v.extend(cloneset_lifecycle::scenarios());
    v.extend(sidecarset::scenarios());
    v.extend(sidecarset_lifecycle::scenarios());
    v.extend(sidecarset_injection::scenarios());
    v.extend(daemonset::scenarios());
    v.extend(daemonset_lifecycle::scenarios());
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

/// The declarative scenarios: chainsaw tests in `suites/chainsaw/`, compiled in (resources
/// inline, no `file:`).
pub fn declarative() -> Vec<Scenario> {
    static TESTS: std::sync::OnceLock<Vec<Scenario>> = std::sync::OnceLock::new();
    TESTS
        .get_or_init(|| {
            [(
                "suites/chainsaw/daemonset-selector-is-immutable.yaml",
                include_str!("chainsaw/daemonset-selector-is-immutable.yaml"),
            )]
            .iter()
            .flat_map(|(path, text)| {
                crate::chainsaw::parse_embedded(path, text)
                    .unwrap_or_else(|e| panic!("{path}: {e:#}"))
            })
            .map(crate::chainsaw::scenario)
            .collect()
        })
        .clone()
}
