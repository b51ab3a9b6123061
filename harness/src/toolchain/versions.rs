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

/// The chainsaw release that runs declarative tests (`harness run --chainsaw`).
pub const CHAINSAW_VERSION: &str = "v0.2.12";

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

    /// The versions a list names: every supported one for `all`, the default one for an empty
    /// list, else each parsed.
    pub fn parse_list<S: AsRef<str>>(list: &[S]) -> Result<Vec<Self>, UnknownVersion> {
        if list.iter().any(|k| k.as_ref() == "all") {
            Ok(Self::supported())
        } else if list.is_empty() {
            Ok(vec![Self::default_version()])
        } else {
            list.iter().map(|k| k.as_ref().parse()).collect()
        }
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

/// A string that is not a version.
#[derive(Debug, thiserror::Error)]
#[error("`{given}` is not a version like v1.9.0, v1.9.0-rc.1 or 1.32")]
pub struct InvalidVersion {
    given: String,
    #[source]
    source: Option<semver::Error>,
}

/// A version as release tags, flags and ledger bounds spell it: `v1.9.0`, `v1.9.0-rc.1`,
/// `1.32.5`, or a prefix such as `1.32`.
///
/// Versions order as semver orders them: a pre-release before its release
/// (`v1.9.0-rc.1 < v1.9.0`), and the numbers it does not give count as 0 (`1.32` is `1.32.0`).
/// To ask whether a version lies within a bound that may be a prefix, use
/// [`Version::cmp_within`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    /// The version, its missing numbers 0.
    semver: semver::Version,
    /// How many numbers were given: 1 to 3.
    parts: usize,
}

impl Version {
    /// How many numbers it gives: 3 for `v1.9.0`, 2 for `1.32`.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// `(major, minor)`
    pub fn major_minor(&self) -> (u64, u64) {
        (self.semver.major, self.semver.minor)
    }

    /// Whether it is a pre-release (`v1.9.0-rc.1`).
    pub fn is_prerelease(&self) -> bool {
        !self.semver.pre.is_empty()
    }

    /// Compares with `bound` over as many numbers as the bound gives: `1.32.5` is within `1.32`
    /// and `v1.9.0-rc.1` is a `1.9`. A complete bound (`v1.9.0`) compares as semver does, so
    /// `v1.9.0-rc.1` is below it.
    pub fn cmp_within(&self, bound: &Version) -> std::cmp::Ordering {
        if bound.parts == 3 {
            return self.semver.cmp_precedence(&bound.semver);
        }
        let numbers = |v: &Version| [v.semver.major, v.semver.minor, v.semver.patch];
        numbers(self)[..bound.parts].cmp(&numbers(bound)[..bound.parts])
    }
}

impl FromStr for Version {
    type Err = InvalidVersion;

    /// Accepts an optional `v`, then one to three numbers; a pre-release (`-rc.1`) only after
    /// all three.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |source| InvalidVersion {
            given: s.to_string(),
            source,
        };
        let text = s.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        // A comparator also reads the prefixes semver's versions refuse (`1.32`); anything
        // that is not a bare version (an operator, a wildcard) is refused.
        if !text.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(invalid(None));
        }
        let c = semver::Comparator::parse(text).map_err(|e| invalid(Some(e)))?;
        if c.op != semver::Op::Caret {
            return Err(invalid(None));
        }
        let parts = 1 + usize::from(c.minor.is_some()) + usize::from(c.patch.is_some());
        let mut semver = semver::Version::new(c.major, c.minor.unwrap_or(0), c.patch.unwrap_or(0));
        semver.pre = c.pre;
        Ok(Self { semver, parts })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.semver
            .cmp(&other.semver)
            .then(self.parts.cmp(&other.parts))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts {
            1 => write!(f, "{}", self.semver.major),
            2 => write!(f, "{}.{}", self.semver.major, self.semver.minor),
            _ => write!(f, "{}", self.semver),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_version_list_is_all_the_default_or_each_one() {
        assert_eq!(
            KubeVersion::parse_list(&["all"]).unwrap(),
            KubeVersion::supported()
        );
        assert_eq!(
            KubeVersion::parse_list::<&str>(&[]).unwrap(),
            [KubeVersion::default_version()]
        );
        let two = KubeVersion::parse_list(&["1.32", "v1.37"]).unwrap();
        assert_eq!(two.iter().map(|v| v.minor).collect::<Vec<_>>(), [32, 37]);
        assert!(KubeVersion::parse_list(&["1.2"]).is_err());
    }

    use super::*;
    use rstest::rstest;
    use std::cmp::Ordering;

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

    #[rstest]
    #[case("v1.9.0-rc.1", "v1.9.0")]
    #[case("v1.9.0-alpha.1", "v1.9.0-rc.1")]
    #[case("v1.9.0-rc.1", "v1.9.0-rc.2")]
    #[case("v1.8.3", "v1.9.0-rc.1")]
    #[case("1.32", "1.32.5")]
    #[case("v1.7.4", "v1.10.0")]
    fn orders_pre_releases_before_their_release(#[case] lower: &str, #[case] higher: &str) {
        let (lower, higher): (Version, Version) = (lower.parse().unwrap(), higher.parse().unwrap());
        assert!(lower < higher, "{lower} < {higher}");
        assert_ne!(lower, higher);
    }

    #[rstest]
    #[case("v1.9.0-rc.1", "v1.9.0", Ordering::Less)]
    #[case("v1.9.0", "v1.9.0", Ordering::Equal)]
    #[case("v1.9.0-rc.1", "1.9", Ordering::Equal)]
    #[case("1.32.5", "1.32", Ordering::Equal)]
    #[case("1.33.0", "1.32", Ordering::Greater)]
    #[case("v1.8.3", "v1.8", Ordering::Equal)]
    #[case("v1.10.0", "v1.9.9", Ordering::Greater)]
    #[case("1.32", "1.32.5", Ordering::Less)]
    fn compares_within_a_bound_over_the_numbers_it_gives(
        #[case] v: &str,
        #[case] bound: &str,
        #[case] expected: Ordering,
    ) {
        let (v, bound): (Version, Version) = (v.parse().unwrap(), bound.parse().unwrap());
        assert_eq!(v.cmp_within(&bound), expected, "{v} against {bound}");
    }

    #[rstest]
    #[case("v1.9.0", 3, false)]
    #[case("1.9.0-rc.1", 3, true)]
    #[case(" v1.32 ", 2, false)]
    #[case("1", 1, false)]
    fn parses_tags_and_prefixes(#[case] given: &str, #[case] parts: usize, #[case] pre: bool) {
        let v: Version = given.parse().unwrap();
        assert_eq!((v.parts(), v.is_prerelease()), (parts, pre), "{given}");
    }

    #[rstest]
    #[case("")]
    #[case("banana")]
    #[case("4c2bbcec")]
    #[case("1.32.5.1")]
    #[case("1.*")]
    #[case(">=1.2")]
    #[case("^1.2")]
    #[case("1.9-rc.1")]
    fn refuses_what_is_not_a_version(#[case] given: &str) {
        let err = given.parse::<Version>().unwrap_err().to_string();
        assert!(err.contains("is not a version"), "{given}: {err}");
    }

    #[test]
    fn default_is_supported() {
        assert!(KubeVersion::supported().contains(&KubeVersion::default_version()));
        assert_eq!(KubeVersion::default_version().staging_tag(), "v0.32.5");
    }
}
