//! The conformance scenarios, grouped by feature area. [`all`] lists every scenario.
//!
//! These files are compiled into the harness crate (see `harness/src/suites.rs`).

pub mod advancedcronjob;
pub mod broadcastjob;
pub mod cloneset;
pub mod common;
pub mod daemonset;
pub mod sidecarset;
pub mod statefulset;
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
    v.extend(statefulset::scenarios());
    v.extend(broadcastjob::scenarios());
    v.extend(advancedcronjob::scenarios());
    v.extend(upgrade::scenarios());
    v
}
