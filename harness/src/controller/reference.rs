//! What names a controller at a version: start with [`ControllerRef`] (`openkruise@v1.9.0`, a
//! commit, or a local checkout), parsed from the command line and read back from reports;
//! [`ControllerRef::controller`] gives its implementation through its registered family.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::family::first;
use super::{Controller, ControllerError, Family, families, family};
use crate::toolchain::{GoEnv, ToolchainError};

/// Which controller a [`ControllerRef`] names: a registered [`Family`]'s name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ControllerKind(pub(super) String);

impl ControllerKind {
    /// Its name on the command line.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// Its family. Every kind is made from a registered one, so this does not fail.
    pub fn family(&self) -> &'static dyn Family {
        family(&self.0).unwrap_or_else(|| panic!("controller `{}` is registered", self.0))
    }
}

impl Serialize for ControllerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ControllerKind {
    /// A registered name, in any case (reports of earlier versions wrote `OpenKruise`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        match family(&name) {
            Some(f) => Ok(Self(f.name().into())),
            None => Err(serde::de::Error::custom(format!(
                "unknown controller `{name}`; known: {}",
                families().join(", ")
            ))),
        }
    }
}

/// A controller at a release tag (`openkruise@v1.9.0`), a commit (`openkruise@4c2bbcec`) or a
/// local checkout (`openkruise@./kruise`, `openkruise@/src/kruise`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ControllerRef {
    /// Which controller.
    #[serde(rename = "controller")]
    pub kind: ControllerKind,
    /// Release tag (`v1.9.0`) or commit; for a checkout, what `git describe` says of it (or
    /// `checkout`).
    pub version: String,
    /// The local checkout the controller is built from, if it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<PathBuf>,
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
    #[error("parse controller `{given}`: unknown controller `{name}`; known: {known}")]
    Unknown {
        /// Input.
        given: String,
        /// Name part.
        name: String,
        /// The registered names.
        known: String,
    },
    /// A family registered under a name already taken.
    #[error("register controller `{name}`: the name is taken")]
    Taken {
        /// The name.
        name: String,
    },
    /// A path that is not a checkout of the controller's module.
    #[error(
        "parse controller `{given}`: {} is not a checkout of {module} ({why})",
        path.display()
    )]
    NotACheckout {
        /// Input.
        given: String,
        /// The path.
        path: PathBuf,
        /// The module expected.
        module: String,
        /// What is wrong.
        why: String,
    },
    /// A tag that is not a release tag.
    #[error(
        "parse controller `{given}`: `{tag}` is not a release tag like v1.9.0, a commit (7 to 40 \
         hex digits) or a checkout path (starting with `/` or `.`)"
    )]
    BadTag {
        /// Input.
        given: String,
        /// Tag part.
        tag: String,
    },
}

impl ControllerRef {
    /// The default controller under test: the first registered family (OpenKruise) at its
    /// default version.
    pub fn default_ref() -> Self {
        let f = first();
        Self {
            kind: ControllerKind(f.name().into()),
            version: f.default_version().into(),
            checkout: None,
        }
    }

    /// Its family.
    pub fn family(&self) -> &'static dyn Family {
        self.kind.family()
    }

    /// A name safe in file and cluster names: the version, or `checkout-<describe>`.
    pub fn slug(&self) -> String {
        let raw = match &self.checkout {
            Some(_) => format!("checkout-{}", self.version),
            None => self.version.clone(),
        };
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }

    /// Whether it names a release tag (not a commit or a checkout).
    pub fn is_release(&self) -> bool {
        self.checkout.is_none() && is_release_tag(&self.version)
    }

    /// A note for the user about this release, if any (e.g. a tag that aliases another).
    pub fn note(&self) -> Option<String> {
        self.family().note(&self.version)
    }

    /// The releases of this controller: the versions of its Go module the module proxy lists.
    pub async fn releases(&self, go: &GoEnv) -> Result<Vec<String>, ToolchainError> {
        self.family().releases(go).await
    }

    /// The feature gates this version knows, read from its sources (sorted).
    pub async fn known_gates(&self, go: &GoEnv) -> Result<Vec<String>, ControllerError> {
        self.family().known_gates(go, self).await
    }

    /// The feature gates this version registers, each with its default, read from its sources.
    pub async fn gate_defaults(
        &self,
        go: &GoEnv,
    ) -> Result<BTreeMap<String, bool>, ControllerError> {
        self.family().gate_defaults(go, self).await
    }

    /// Its implementation.
    pub fn controller(&self) -> Box<dyn Controller> {
        self.family().controller(self, false)
    }

    /// Its implementation, whose manager talks to the apiserver through a proxy
    /// ([`crate::cluster::proxy`], exposed by [`Installation::proxy`]) when installed on the
    /// local provider; on other hosts the same as [`ControllerRef::controller`].
    pub fn controller_behind_proxy(&self) -> Box<dyn Controller> {
        self.family().controller(self, true)
    }

    /// The same controller at `version` (a release tag or commit).
    pub fn at(&self, version: &str) -> Result<Self, RefError> {
        format!("{}@{version}", self.kind.name()).parse()
    }
}

impl FromStr for ControllerRef {
    type Err = RefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, tag) = s
            .split_once('@')
            .ok_or_else(|| RefError::Malformed { given: s.into() })?;
        let Some(family) = family(name) else {
            return Err(RefError::Unknown {
                given: s.into(),
                name: name.into(),
                known: families().join(", "),
            });
        };
        let kind = ControllerKind(family.name().into());
        if tag.starts_with('/') || tag.starts_with('.') {
            let module = family.module();
            let not = |why: String| RefError::NotACheckout {
                given: s.into(),
                path: PathBuf::from(tag),
                module: module.into(),
                why,
            };
            let dir = std::fs::canonicalize(tag).map_err(|e| not(e.to_string()))?;
            let go_mod = std::fs::read_to_string(dir.join("go.mod"))
                .map_err(|e| not(format!("read go.mod: {e}")))?;
            let declared = go_mod
                .lines()
                .find_map(|l| l.trim().strip_prefix("module "))
                .map(str::trim)
                .unwrap_or_default();
            if declared != module {
                return Err(not(format!("its go.mod declares `{declared}`")));
            }
            return Ok(Self {
                kind,
                version: describe(&dir),
                checkout: Some(dir),
            });
        }
        let commit = (7..=40).contains(&tag.len())
            && tag
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !is_release_tag(tag) && !commit {
            return Err(RefError::BadTag {
                given: s.into(),
                tag: tag.into(),
            });
        }
        Ok(Self {
            kind,
            version: tag.into(),
            checkout: None,
        })
    }
}

/// `v1.9.0`, `v1.9.0-rc.1`: a release tag (`v` and a semver version).
pub fn is_release_tag(tag: &str) -> bool {
    tag.strip_prefix('v')
        .is_some_and(|rest| semver::Version::parse(rest).is_ok())
}

/// What `git describe --tags --always --dirty` says of a checkout, or `checkout`.
fn describe(dir: &Path) -> String {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["describe", "--tags", "--always", "--dirty"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "checkout".into())
}

impl fmt::Display for ControllerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.checkout {
            Some(dir) => write!(
                f,
                "{}@{} ({})",
                self.kind.name(),
                dir.display(),
                self.version
            ),
            None => write!(f, "{}@{}", self.kind.name(), self.version),
        }
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
        let commit: ControllerRef = "openkruise@4c2bbcec".parse().unwrap();
        assert!(!commit.is_release());
        assert!(r.is_release());
    }

    #[test]
    fn a_checkout_must_be_the_controllers_module() {
        let tmp = tempfile::tempdir().unwrap();
        let given = format!("openkruise@{}", tmp.path().display());
        let e = given.parse::<ControllerRef>().unwrap_err().to_string();
        assert!(e.contains("read go.mod"), "{e}");
        std::fs::write(tmp.path().join("go.mod"), "module example.com/other\n").unwrap();
        let e = given.parse::<ControllerRef>().unwrap_err().to_string();
        assert!(e.contains("declares `example.com/other`"), "{e}");
        std::fs::write(
            tmp.path().join("go.mod"),
            "module github.com/openkruise/kruise\n\ngo 1.23\n",
        )
        .unwrap();
        let r: ControllerRef = given.parse().unwrap();
        assert_eq!(
            r.checkout.as_deref(),
            Some(tmp.path().canonicalize().unwrap().as_path())
        );
        assert_eq!(r.version, "checkout");
        assert_eq!(r.slug(), "checkout-checkout");
        assert!(!r.is_release());
    }

    #[test]
    fn the_aliased_tag_is_called_out() {
        let r: ControllerRef = "openkruise@v1.7.5".parse().unwrap();
        assert!(r.note().unwrap().contains("v1.8.3"));
        assert!(ControllerRef::default_ref().note().is_none());
    }

    #[test]
    fn reports_of_earlier_versions_name_the_controller_in_any_case() {
        let json = serde_json::json!({"controller": "OpenKruise", "version": "v1.9.0"});
        let r: ControllerRef = serde_json::from_value(json).unwrap();
        assert_eq!(r, ControllerRef::default_ref());
        let json = serde_json::json!({"controller": "argo", "version": "v1.0.0"});
        let e = serde_json::from_value::<ControllerRef>(json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown controller `argo`"), "{e}");
    }
}
