//! Controllers under test: a [`ControllerRef`] names one at a release; start with
//! [`openkruise`] for how OpenKruise is built and installed as it ships.

pub mod openkruise;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
