//! [`ControllerError`]: what installing or watching a controller fails with.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::local::LocalError;
use crate::cluster::proxy::ProxyError;
use crate::toolchain::ToolchainError;

/// Errors of installing or watching a controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Building the manager failed.
    #[error("build the controller")]
    Toolchain(#[from] ToolchainError),
    /// The cluster could not do something asked of it.
    #[error("use the cluster")]
    Cluster(#[from] LocalError),
    /// A version's sources could not be had.
    #[error("fetch the sources of {reference}")]
    Sources {
        /// The controller and version.
        reference: String,
        /// Cause.
        #[source]
        source: ToolchainError,
    },
    /// A release's feature gates could not be read from its sources.
    #[error("read the feature gates of {}: it registers none the harness can read", file.display())]
    NoGates {
        /// The file that should declare them.
        file: PathBuf,
    },
    /// The release's manifests did not render.
    #[error("render {}: {detail}", dir.display())]
    Render {
        /// The kustomization.
        dir: PathBuf,
        /// kubectl's message.
        detail: String,
    },
    /// An API call failed.
    #[error("{action}")]
    Kube {
        /// What was being done.
        action: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A wait did not end well.
    #[error(transparent)]
    Wait(#[from] crate::wait::WaitError),
    /// Not ready in time.
    #[error("wait for {what}: not ready after {timeout:?}; last seen: {last}")]
    NotReady {
        /// What.
        what: String,
        /// Bound.
        timeout: Duration,
        /// Last observation.
        last: String,
    },
    /// The manager (or another component running as a local process, e.g. a node daemon)
    /// exited.
    #[error("{name} {version} exited ({how}); last lines of {}:\n{tail}", log.display())]
    ManagerExited {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// How it ended, as far as known (its exit status or signal), and what followed: first
        /// in the message, where a shortened message still shows it.
        how: String,
        /// Its log.
        log: PathBuf,
        /// The log's tail.
        tail: String,
    },
    /// The manager (or another component) was denied by the RBAC it ships.
    #[error("{name} {version} is denied by its RBAC ({count} times); first: {first}")]
    ManagerForbidden {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// How many denials its log shows.
        count: usize,
        /// The first denial.
        first: String,
    },
    /// A component's log shows a panic (recovered or not) and its goroutine stack.
    #[error("{name} {version} panicked ({count} times); first:\n{first}")]
    ManagerPanicked {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// How many panics its log shows.
        count: usize,
        /// The first panic, with the lines that follow it.
        first: String,
    },
    /// The controller is not installed as the run needs (existing provider).
    #[error("use the installed controller: {detail}")]
    NotInstalled {
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// The in-cluster manager restarted or its pod is gone.
    #[error("{name} {version}: {detail}")]
    ManagerRestarted {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// Which pod, how often, and the last termination.
        detail: String,
    },
    /// A file operation failed.
    #[error("access {}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The apiserver proxy in front of the manager did not start.
    #[error("start the apiserver proxy for the manager")]
    Proxy(#[from] ProxyError),
}

impl ControllerError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_says_how_it_ended_before_the_log_that_may_be_cut() {
        let e = ControllerError::ManagerExited {
            name: "kruise-manager".into(),
            version: "v1.9.0".into(),
            how: "signal: 9 (SIGKILL); started again".into(),
            log: PathBuf::from("/x/manager.log"),
            tail: "a line\n".repeat(400),
        };
        let text = e.to_string();
        let head: String = text.chars().take(120).collect();
        assert!(
            head.starts_with("kruise-manager v1.9.0 exited (signal: 9 (SIGKILL); started again)"),
            "{head}"
        );
        assert!(text.ends_with("a line\n"));
    }
}
