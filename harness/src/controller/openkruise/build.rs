//! Building OpenKruise's manager: a release or commit from the module proxy, or a local
//! checkout ([`build_ref`]), and what `harness toolchain build` asks beside it ([`build_release`]).

use super::*;

/// Builds (or finds) the manager at `tag`.
pub async fn build(toolchain: &Toolchain, tag: &str) -> Result<PathBuf, ToolchainError> {
    toolchain.module_main(MODULE, tag, BINARY, true).await
}

/// Builds the manager from a local checkout, with the checkout's own `go.mod` (read-only: the
/// checkout is not modified), into `<cache>/checkouts/<hash>/kruise-manager`. It is rebuilt
/// every time (Go's build cache makes that cheap), so the binary always matches the tree.
pub async fn build_checkout(toolchain: &Toolchain, dir: &Path) -> Result<PathBuf, ToolchainError> {
    toolchain.build_checkout(dir, ".", BINARY).await
}

/// The manager for `reference`: a release or commit from the module proxy, or a checkout.
pub async fn build_ref(
    toolchain: &Toolchain,
    reference: &crate::controller::ControllerRef,
) -> Result<PathBuf, ToolchainError> {
    match &reference.checkout {
        Some(dir) => build_checkout(toolchain, dir).await,
        None => build(toolchain, &reference.version).await,
    }
}

/// Builds (or finds cached) the manager of `reference` and the `extras`, handing `built` what
/// each is and its path as soon as it is ready.
pub async fn build_release(
    toolchain: &Toolchain,
    reference: &crate::controller::ControllerRef,
    extras: BuildExtras,
    built: &(dyn Fn(String, &Path) + Sync),
) -> anyhow::Result<()> {
    let c = reference;
    built(c.to_string(), &build_ref(toolchain, c).await?);
    if extras.node {
        built(
            format!("{c} daemon"),
            &daemon::build_ref(toolchain, c).await?,
        );
    }
    if extras.e2e {
        built(
            format!("{c} upstream e2e"),
            &e2e::build_ref(toolchain, c).await?,
        );
    }
    Ok(())
}
