//! Controllers under test: a [`ControllerRef`] names one at a release; start with
//! [`openkruise`] for how OpenKruise is built and installed as it ships.

pub mod openkruise;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::local::process::{ProcRecord, log_tail};
use crate::cluster::local::{LocalCluster, LocalError};
use crate::toolchain::ToolchainError;

/// Errors of installing or watching a controller.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Building the manager failed.
    #[error("build the controller")]
    Toolchain(#[from] ToolchainError),
    /// The cluster could not do something asked of it.
    #[error("use the cluster")]
    Cluster(#[from] LocalError),
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
    /// A watch failed.
    #[error("watch: {0}")]
    Wait(String),
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
    /// The manager exited.
    #[error("{name} {version} exited; last lines of {}:\n{tail}", log.display())]
    ManagerExited {
        /// Process name.
        name: String,
        /// Release.
        version: String,
        /// Its log.
        log: PathBuf,
        /// The log's tail.
        tail: String,
    },
    /// The manager was denied by the RBAC it ships.
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
    /// A file operation failed.
    #[error("access {}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl BundleError {
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

/// A running controller manager installed into a cluster.
#[derive(Debug, Clone)]
pub struct Manager {
    /// Process name (`kruise-manager`).
    pub name: String,
    /// Release tag.
    pub version: String,
    /// The process.
    pub record: ProcRecord,
    /// Its log file.
    pub log: PathBuf,
    /// Its webhook port.
    pub webhook_port: u16,
    /// Its health-probe port.
    pub health_port: u16,
    /// Its feature gates.
    pub gates: BTreeMap<String, bool>,
}

impl Manager {
    /// Fails if the manager exited (with its log tail) or its log shows RBAC denials of its own
    /// ServiceAccount.
    pub fn check(&self, _cluster: &LocalCluster) -> Result<(), BundleError> {
        if !self.record.alive() {
            return Err(BundleError::ManagerExited {
                name: self.name.clone(),
                version: self.version.clone(),
                log: self.log.clone(),
                tail: log_tail(&self.log, 20),
            });
        }
        let denials = forbidden_lines(&std::fs::read_to_string(&self.log).unwrap_or_default());
        if let Some(first) = denials.first() {
            return Err(BundleError::ManagerForbidden {
                name: self.name.clone(),
                version: self.version.clone(),
                count: denials.len(),
                first: first.clone(),
            });
        }
        Ok(())
    }
}

/// Log lines where the API server refused the manager's ServiceAccount.
pub fn forbidden_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("forbidden") && l.contains("system:serviceaccount:"))
        .map(|l| l.chars().take(400).collect())
        .collect()
}

/// A controller the harness knows how to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Controller {
    /// OpenKruise (github.com/openkruise/kruise).
    OpenKruise,
}

impl Controller {
    /// Its name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Controller::OpenKruise => "openkruise",
        }
    }
}

/// A controller at a release tag: `openkruise@v1.9.0`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ControllerRef {
    /// Which controller.
    pub controller: Controller,
    /// Release tag, e.g. `v1.9.0`.
    pub version: String,
}

/// A controller reference that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    /// Not `name@tag`.
    #[error("parse controller `{given}`: expected NAME@TAG, e.g. openkruise@v1.9.0")]
    Malformed {
        /// Input.
        given: String,
    },
    /// Unknown controller name.
    #[error("parse controller `{given}`: unknown controller `{name}`; known: openkruise")]
    Unknown {
        /// Input.
        given: String,
        /// Name part.
        name: String,
    },
    /// A tag that is not a release tag.
    #[error("parse controller `{given}`: `{tag}` is not a release tag like v1.9.0")]
    BadTag {
        /// Input.
        given: String,
        /// Tag part.
        tag: String,
    },
}

impl ControllerRef {
    /// The default controller under test: OpenKruise v1.9.0.
    pub fn default_ref() -> Self {
        Self {
            controller: Controller::OpenKruise,
            version: openkruise::DEFAULT_VERSION.into(),
        }
    }

    /// A note for the user about this release, if any (e.g. a tag that aliases another).
    pub fn note(&self) -> Option<String> {
        match self.controller {
            Controller::OpenKruise => openkruise::tag_note(&self.version),
        }
    }
}

impl FromStr for ControllerRef {
    type Err = RefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, tag) = s
            .split_once('@')
            .ok_or_else(|| RefError::Malformed { given: s.into() })?;
        let controller = match name {
            "openkruise" | "kruise" => Controller::OpenKruise,
            _ => {
                return Err(RefError::Unknown {
                    given: s.into(),
                    name: name.into(),
                });
            }
        };
        let valid = tag.strip_prefix('v').is_some_and(|rest| {
            let core = rest.split('-').next().unwrap_or("");
            let parts: Vec<&str> = core.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        });
        if !valid {
            return Err(RefError::BadTag {
                given: s.into(),
                tag: tag.into(),
            });
        }
        Ok(Self {
            controller,
            version: tag.into(),
        })
    }
}

impl fmt::Display for ControllerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.controller.name(), self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_refs_and_refuses_bad_ones() {
        let r: ControllerRef = "openkruise@v1.9.0".parse().unwrap();
        assert_eq!(r.to_string(), "openkruise@v1.9.0");
        assert!(
            "openkruise"
                .parse::<ControllerRef>()
                .unwrap_err()
                .to_string()
                .contains("NAME@TAG")
        );
        assert!(
            "argo@v1.0.0"
                .parse::<ControllerRef>()
                .unwrap_err()
                .to_string()
                .contains("unknown controller `argo`")
        );
        assert!(
            "openkruise@main"
                .parse::<ControllerRef>()
                .unwrap_err()
                .to_string()
                .contains("not a release tag")
        );
    }

    #[test]
    fn the_aliased_tag_is_called_out() {
        let r: ControllerRef = "openkruise@v1.7.5".parse().unwrap();
        assert!(r.note().unwrap().contains("v1.8.3"));
        assert!(ControllerRef::default_ref().note().is_none());
    }
}
