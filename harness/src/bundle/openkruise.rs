//! OpenKruise: the manager built from `github.com/openkruise/kruise@<tag>` and its release's own
//! manifests.

use std::path::PathBuf;

use crate::toolchain::{Toolchain, ToolchainError};

/// The Go module.
pub const MODULE: &str = "github.com/openkruise/kruise";
/// The default release.
pub const DEFAULT_VERSION: &str = "v1.9.0";
/// The binary name in the cache.
pub const BINARY: &str = "kruise-manager";

/// What to tell a user who asks for `tag`.
pub fn tag_note(tag: &str) -> Option<String> {
    (tag == "v1.7.5").then(|| {
        "OpenKruise tag v1.7.5 points at the same commit as v1.8.3: it is a 1.8 release, not \
         a 1.7 one (v1.7.4 is the last real 1.7)"
            .to_string()
    })
}

/// Builds (or finds) the manager at `tag`.
pub async fn build(toolchain: &Toolchain, tag: &str) -> Result<PathBuf, ToolchainError> {
    toolchain.module_main(MODULE, tag, BINARY, true).await
}
