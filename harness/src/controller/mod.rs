//! Controllers under test. Start with the [`Controller`] trait: what a controller needs built,
//! how it installs into a cluster of any provider (a [`Host`]), and its feature gates per
//! version. An install yields an [`Installation`] of running [`Component`]s (`component`), each
//! checked after every scenario for exits, restarts and RBAC denials in a log [`Window`]
//! (`logs`); the components any controller can use are a [`Manager`] run as a local process
//! (`manager`) and an [`InClusterManager`] (`in_cluster`). A [`ControllerRef`]
//! (`openkruise@v1.9.0`, `reference`) names one on the command line; its [`Family`] (`family`,
//! the registry of controller families) gives its implementation
//! ([`ControllerRef::controller`]). A controller's own end-to-end suite is an [`E2eSuite`]
//! (`suite`); every error is a [`ControllerError`] (`error`). [`openkruise`] is the first
//! controller: its manager, built and installed as it ships.

mod component;
mod error;
mod family;
mod in_cluster;
mod logs;
mod manager;
pub mod manifests;
pub mod openkruise;
mod reference;
mod suite;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use futures::future::BoxFuture;

use crate::cluster::any::AnyCluster;
use crate::cluster::local::LocalCluster;
use crate::toolchain::Toolchain;

pub use component::{Component, Installation, SETTLE_TIMEOUT};
pub use error::ControllerError;
pub use family::{Family, families, family, register};
pub use in_cluster::InClusterManager;
pub use logs::{
    Denial, Window, forbidden_lines, panic_in, panic_stacks_within, panics, panics_within,
};
pub(crate) use manager::check_local_process;
pub use manager::{Manager, delete_lease, http_get_status, service_account_token};
pub use reference::{ControllerKind, ControllerRef, RefError, is_release_tag};
pub use suite::{CiGates, E2eSuite};

/// Where a controller's components can run: what the cluster offers.
pub enum Host<'a> {
    /// Beside a local control plane, as local processes (the local provider).
    Processes(&'a mut LocalCluster),
    /// As pods of the cluster, from release images (kind, k3s).
    Pods(kube::Client),
    /// A cluster the harness did not make (existing): nothing is installed, the controller
    /// must already run there at the version asked for.
    Preinstalled(kube::Client),
}

impl<'a> Host<'a> {
    /// What `cluster` offers.
    pub async fn of(cluster: &'a mut AnyCluster) -> Result<Host<'a>, ControllerError> {
        let client = |e: anyhow::Error| ControllerError::NotInstalled {
            detail: format!("connect to the cluster: {e:#}"),
        };
        Ok(match cluster {
            AnyCluster::Local(c) => Host::Processes(c),
            AnyCluster::Existing(_) => Host::Preinstalled(cluster.client().await.map_err(client)?),
            other => Host::Pods(other.client().await.map_err(client)?),
        })
    }
}

/// A controller under test at one version. Implementations are cheap values; building and
/// installing happen in [`Controller::prepare`] and [`Controller::install`].
pub trait Controller: fmt::Debug + Send + Sync {
    /// What it is: name, version, checkout.
    fn reference(&self) -> &ControllerRef;

    /// Whether this version has controller feature gate `gate` (passing a gate a version does
    /// not know may stop it from starting, so the planner leaves such gates out).
    fn has_gate(&self, gate: &str) -> bool;

    /// The API groups of the resources it serves (its CRDs'), for field coverage.
    fn api_groups(&self) -> &'static [&'static str];

    /// Its CustomResourceDefinitions at this version, read from its sources (a download, no
    /// build), as JSON.
    fn crds<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, ControllerError>>;

    /// Builds (or finds in the cache) everything an install needs, so a matrix can build
    /// ahead of its cells.
    fn prepare<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<(), ControllerError>>;

    /// Installs into `host` with `gates` and waits until ready. Installing over an earlier
    /// install of the same controller replaces it: that is an upgrade (the caller stops the
    /// earlier components first).
    fn install<'a>(
        &'a self,
        host: Host<'a>,
        toolchain: &'a Toolchain,
        gates: &'a BTreeMap<String, bool>,
    ) -> BoxFuture<'a, Result<Installation, ControllerError>>;

    /// The images its in-cluster install runs, built here under the names its manifests give
    /// them, for nodes that pull only from the harness's registry
    /// ([`AnyCluster::pulls_only_from_harness`]: kind's). By default none: the install pulls
    /// what it names.
    fn images<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<Vec<crate::toolchain::BuiltImage>, ControllerError>> {
        let _ = toolchain;
        Box::pin(async { Ok(vec![]) })
    }

    /// The namespace its components run in (where it keeps what it owns cluster-wide, e.g.
    /// revisions of cluster-scoped objects).
    fn namespace(&self) -> &'static str;

    /// The Deployment its manager ships as (namespace, name), for reproduction scripts that
    /// restart it with `kubectl` on a cluster where it runs as pods; `None` if it ships none.
    fn deployment(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// The kinds only its node-level components serve (they act on the node: pull images,
    /// restart containers, probe): on a cell without real nodes, objects of these kinds are
    /// never served.
    fn node_kinds(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its own end-to-end suite, when it ships one the harness can run
    /// (`run --upstream-e2e`); `None` by default.
    fn e2e_suite(&self) -> Option<Box<dyn E2eSuite>> {
        None
    }

    /// The cached builds an install needs (`real_nodes`: with its node components), for the
    /// plan of cold builds a run says before it starts. By default it names none.
    fn builds(&self, real_nodes: bool) -> Vec<crate::toolchain::BuildKey> {
        let _ = real_nodes;
        vec![]
    }

    /// Builds (or finds cached) what `harness toolchain build` asks of it: its manager always,
    /// and the `extras` it has, handing `built` what each is and its path as soon as it is
    /// ready. By default: [`prepare`](Self::prepare), announced without a path.
    fn build_artifacts<'a>(
        &'a self,
        toolchain: &'a Toolchain,
        extras: BuildExtras,
        built: &'a (dyn Fn(String, &Path) + Sync),
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let _ = extras;
        Box::pin(async move {
            self.prepare(toolchain).await?;
            built(self.reference().to_string(), Path::new("-"));
            Ok(())
        })
    }
}

/// What is built of a release beside its manager (`harness toolchain build`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildExtras {
    /// Its node-level components (for real nodes).
    pub node: bool,
    /// Its own end-to-end suite.
    pub e2e: bool,
}
