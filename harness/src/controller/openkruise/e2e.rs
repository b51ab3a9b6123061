//! OpenKruise's own end-to-end suite (`test/e2e` of the release module, Ginkgo specs): built
//! as a test binary from the same module graph as the manager, cached by release. Start with
//! [`build`]. What upstream's CI gives the suite beside the cluster is here too:
//! [`E2E_CONFIG`], the objects it creates before the manager starts.

use std::path::PathBuf;

use super::MODULE;
use crate::controller::ControllerRef;
use crate::toolchain::go::GoEnv;
use crate::toolchain::{Toolchain, ToolchainError};

/// The suite's package in the release module (the same path from v1.5.0 to v1.9.x).
pub const PACKAGE: &str = "github.com/openkruise/kruise/test/e2e";
/// The test binary's name in the cache.
pub const BINARY: &str = "kruise-e2e.test";
/// The file of the release module upstream's CI applies before it installs the manager (the
/// `kruise-configuration` ConfigMap: the WorkloadSpread custom-workload whitelist its specs
/// use); the harness seeds it ([`crate::cluster::Profile::objects`]).
pub const E2E_CONFIG: &str = "test/kruise-e2e-config.yaml";

/// Builds (or finds) the suite of release `tag` (a cold build takes minutes: the suite
/// compiles much of Kubernetes' e2e framework).
pub async fn build(toolchain: &Toolchain, tag: &str) -> Result<PathBuf, ToolchainError> {
    toolchain
        .module_test(MODULE, PACKAGE, tag, BINARY, true)
        .await
}

/// The suite of `reference`: releases and commits from the module proxy; a checkout is refused
/// (its suite is built with `go test -c ./test/e2e` in the checkout).
pub async fn build_ref(
    toolchain: &Toolchain,
    reference: &ControllerRef,
) -> anyhow::Result<PathBuf> {
    match &reference.checkout {
        Some(dir) => anyhow::bail!(
            "the harness builds the upstream e2e suite of releases and commits only; for the \
             checkout {} build it there with `go test -c ./test/e2e`",
            dir.display()
        ),
        None => Ok(build(toolchain, &reference.version).await?),
    }
}

/// The objects of [`E2E_CONFIG`] in the suite's release module (downloaded into the Go module
/// cache if needed); none for a release that has no such file.
pub async fn config_objects(reference: &ControllerRef) -> anyhow::Result<Vec<serde_json::Value>> {
    let dir = match &reference.checkout {
        Some(dir) => dir.clone(),
        None => {
            let go = GoEnv::detect().await?;
            let scratch = tempfile::tempdir()?;
            go.download(scratch.path(), MODULE, &reference.version, true)
                .await?
                .dir
        }
    };
    let file = dir.join(E2E_CONFIG);
    if !file.exists() {
        return Ok(vec![]);
    }
    Ok(crate::cluster::seed::load(&[file])?)
}
