//! A controller's own end-to-end suite: start with [`E2eSuite`], what the harness needs of it
//! to build and run it against a cell as the controller's CI does, with the [`CiGates`] that
//! CI gives.

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures::future::BoxFuture;

use super::ControllerRef;
use crate::toolchain::Toolchain;

/// A controller's own end-to-end suite (a Ginkgo suite built from its module), run against a
/// cell as the controller's CI runs it. Everything is read from the suite's release: a
/// suite may be another release's than the controller under test's.
pub trait E2eSuite: Send + Sync {
    /// Whose suite it is.
    fn reference(&self) -> &ControllerRef;

    /// Builds (or finds cached) the suite's test binary.
    fn build<'a>(&'a self, toolchain: &'a Toolchain) -> BoxFuture<'a, anyhow::Result<PathBuf>>;

    /// Builds (or finds cached) the `ginkgo` command at the version the suite is built with,
    /// which runs it in parallel processes.
    fn ginkgo<'a>(&'a self, toolchain: &'a Toolchain) -> BoxFuture<'a, anyhow::Result<PathBuf>>;

    /// The images its specs run, as far as its sources say (real nodes pull stand-ins).
    fn images(&self) -> BoxFuture<'_, anyhow::Result<Vec<crate::toolchain::images::Reference>>>;

    /// What its CI creates before the controller is installed (its e2e configuration, the
    /// StorageClasses its specs use): seeded into the cluster.
    fn seed_objects(&self) -> BoxFuture<'_, anyhow::Result<Vec<serde_json::Value>>>;

    /// What its CI applies after the controller is up and before the suite (from other
    /// projects), in order.
    fn before_suite(&self) -> BoxFuture<'_, anyhow::Result<Vec<serde_json::Value>>>;

    /// The feature gates its CI gives the controller under test `manager` and the cluster.
    fn ci_gates<'a>(&'a self, manager: &'a ControllerRef)
    -> BoxFuture<'a, anyhow::Result<CiGates>>;
}

/// The feature gates a controller's CI runs its suite with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiGates {
    /// The controller's (its manager's and its node components').
    pub controller: BTreeMap<String, bool>,
    /// The cluster's (its components' `--feature-gates`).
    pub cluster: BTreeMap<String, bool>,
}
