//! Shared helpers for tests against real local clusters.
#![allow(dead_code, missing_docs)]

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use harness::cluster::Profile;
use harness::cluster::local::{LocalCluster, LocalOptions, LocalProvider};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};

/// A provider whose clusters live under a fresh temp dir, using the shared binary cache.
pub fn provider() -> (LocalProvider, tempfile::TempDir) {
    let root = tempfile::Builder::new()
        .prefix("harness-test-")
        .tempdir()
        .expect("temp dir");
    let provider = LocalProvider::new(
        Toolchain::new(Cache::from_env(), Progress::plain()),
        LocalOptions {
            clusters_root: root.path().to_path_buf(),
            harness_binary: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
            ..LocalOptions::default()
        },
        Progress::plain(),
    );
    (provider, root)
}

/// Starts a cluster for `profile`.
pub async fn cluster(profile: &Profile) -> (LocalCluster, tempfile::TempDir) {
    use harness::cluster::ClusterProvider;
    let (p, root) = provider();
    let c = p.create("t", profile).await.expect("cluster starts");
    (c, root)
}

/// The default profile.
pub fn default_profile() -> Profile {
    Profile::new(KubeVersion::default_version())
}

/// Bounded wait on a future; on timeout, panics with `describe()`'s view of the last state.
pub async fn within<T, F, D, DF>(what: &str, timeout: Duration, fut: F, describe: D) -> T
where
    F: Future<Output = T>,
    D: FnOnce() -> DF,
    DF: Future<Output = String>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(v) => v,
        Err(_) => panic!(
            "timed out after {timeout:?} waiting for {what}; last seen: {}",
            describe().await
        ),
    }
}
