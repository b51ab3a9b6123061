//! The versions the toolchain knows how to build: [`KubeVersion`] and the pinned release table.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One Kubernetes release the harness can build and boot.
///
/// Each minor is pinned to one patch release: the newest one whose complete set of staging
/// modules (`k8s.io/api`, `k8s.io/kube-scheduler`, ...) is served by the Go module proxy, so
/// that the generated `go.mod` resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeRelease {
    /// `1.32`
    pub minor: &'static str,
    /// `v1.32.5`
    pub tag: &'static str,
}

/// The Kubernetes releases the harness supports, oldest first. The default is marked by
/// [`DEFAULT_KUBERNETES`].
pub const KUBERNETES_RELEASES: &[KubeRelease] = &[
    KubeRelease {
        minor: "1.29",
        tag: "v1.29.15",
    },
    KubeRelease {
        minor: "1.32",
        tag: "v1.32.5",
    },
    KubeRelease {
        minor: "1.37",
        tag: "v1.37.1",
    },
];

/// The minor used when none is named.
pub const DEFAULT_KUBERNETES: &str = "1.32";

/// The kwok release that simulates nodes and pods.
pub const KWOK_VERSION: &str = "v0.7.0";

/// The CNCF distribution registry release that serves images to real nodes.
pub const REGISTRY_VERSION: &str = "v3.1.2";

/// A version string that names no known release.
#[derive(Debug, thiserror::Error)]
#[error("unknown Kubernetes version `{given}`: known versions are {known}")]
pub struct UnknownVersion {
    given: String,
    known: String,
}

/// A supported Kubernetes version, as `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KubeVersion {
    /// Always 1.
    pub major: u32,
    /// The minor, e.g. 32.
    pub minor: u32,
    /// The pinned patch.
    pub patch: u32,
}

impl KubeVersion {
    /// The default version ([`DEFAULT_KUBERNETES`]).
    pub fn default_version() -> Self {
        DEFAULT_KUBERNETES
            .parse()
            .expect("the default version is in the release table")
    }

    /// Every supported version, oldest first.
    pub fn supported() -> Vec<Self> {
        KUBERNETES_RELEASES
            .iter()
            .map(|r| r.tag.parse().expect("release table entries parse"))
            .collect()
    }

    /// The git tag, e.g. `v1.32.5`.
    pub fn tag(&self) -> String {
        format!("v{}.{}.{}", self.major, self.minor, self.patch)
    }

    /// The version of the staging modules released with it, e.g. `v0.32.5`.
    pub fn staging_tag(&self) -> String {
        format!("v0.{}.{}", self.minor, self.patch)
    }

    /// `1.32`
    pub fn minor_string(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    fn parse_loose(s: &str) -> Option<(u32, u32, Option<u32>)> {
        let s = s.trim().trim_start_matches('v');
        let mut parts = s.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            Some(p) => Some(p.parse().ok()?),
            None => None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some((major, minor, patch))
    }
}

impl FromStr for KubeVersion {
    type Err = UnknownVersion;

    /// Accepts `1.32`, `v1.32`, `1.32.5` or `v1.32.5`; only pinned releases are accepted.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownVersion {
            given: s.to_string(),
            known: KUBERNETES_RELEASES
                .iter()
                .map(|r| format!("{} ({})", r.minor, r.tag))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let (major, minor, patch) = Self::parse_loose(s).ok_or_else(unknown)?;
        let release = KUBERNETES_RELEASES
            .iter()
            .find(|r| r.minor == format!("{major}.{minor}"))
            .ok_or_else(unknown)?;
        let (_, _, pinned) = Self::parse_loose(release.tag).expect("table tags parse");
        let pinned = pinned.expect("table tags carry a patch");
        if patch.is_some_and(|p| p != pinned) {
            return Err(unknown());
        }
        Ok(Self {
            major,
            minor,
            patch: pinned,
        })
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Parses `v1.7.4`, `1.32` or `1.32.5` into comparable numbers.
pub fn version_key(v: &str) -> Vec<u64> {
    v.trim()
        .trim_start_matches('v')
        .split(['.', '-'])
        .map_while(|p| p.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1.32", "v1.32.5")]
    #[case("v1.32", "v1.32.5")]
    #[case("1.32.5", "v1.32.5")]
    #[case("v1.29.15", "v1.29.15")]
    fn parses_known_versions(#[case] given: &str, #[case] tag: &str) {
        assert_eq!(given.parse::<KubeVersion>().unwrap().tag(), tag);
    }

    #[rstest]
    #[case("1.19")]
    #[case("1.32.4")]
    #[case("banana")]
    #[case("1.32.5.1")]
    fn refuses_unknown_versions_and_lists_the_known_ones(#[case] given: &str) {
        let err = given.parse::<KubeVersion>().unwrap_err().to_string();
        assert!(err.contains(given), "{err}");
        assert!(err.contains("1.32 (v1.32.5)"), "{err}");
    }

    #[test]
    fn default_is_supported() {
        assert!(KubeVersion::supported().contains(&KubeVersion::default_version()));
        assert_eq!(KubeVersion::default_version().staging_tag(), "v0.32.5");
    }
}
