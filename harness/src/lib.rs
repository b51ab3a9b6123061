//! A conformance test harness for Kubernetes workload controllers.
//!
//! Layers, from the bottom: [`toolchain`] builds pinned binaries from Go modules, [`cluster`]
//! brings up clusters from a [`cluster::Profile`] (start with [`cluster::local::LocalCluster`],
//! the embedded default), and [`cli`] is the thin command-line layer over them.

pub mod bench;
pub mod chainsaw;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod explore;
pub mod kruise;
pub mod matrix;
pub mod progress;
pub mod qualify;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod stop;
pub mod suites;
pub mod toolchain;
pub mod up;
pub mod wait;

/// What unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::{Path, PathBuf};

    /// Writes an executable `sh` script `name` with `body` (after the `#!/bin/sh` line) into
    /// `dir`: a stand-in for a binary the code under test runs.
    pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}
