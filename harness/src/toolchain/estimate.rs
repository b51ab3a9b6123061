//! How long a cold build will take, said before it starts: [`Toolchain::cold`] lists the builds
//! of a set of [`BuildKey`]s that are not cached, each with an [`Estimate`] — the median of the
//! earlier builds of the same component on this machine (their manifests keep how long they
//! took), or else the [`TYPICAL`] time on a 2-core machine; [`plan_text`] says it in a few
//! lines. The build's progress bar counts down the same estimate.

use std::time::Duration;

use super::{BuildKey, Toolchain};
use crate::progress::minutes;

/// Seconds a cold build of each component typically takes on a 2-core machine with an empty
/// Go build cache: between the two cold runs measured on new machines (Kubernetes 341 s and
/// 737 s, kwok 187 s and 369 s, ...; see docs/benchmarks.md). A component missing here takes
/// [`UNKNOWN`]; those that share a module graph built just before them (the kubelet, the node
/// daemon) take seconds.
pub const TYPICAL: &[(&str, u64)] = &[
    ("kubernetes", 600),
    ("kubelet", 60),
    ("kwok", 300),
    ("kwokctl", 40),
    ("registry", 120),
    ("chainsaw", 200),
    ("ginkgo", 10),
    ("kopium", 200),
    ("kruise-manager", 300),
    ("kruise-daemon", 30),
    ("kruise-e2e.test", 100),
    ("kubeadm", 60),
    ("coredns", 330),
    ("crictl", 70),
    ("kind-rootfs", 90),
    ("kind-images", 45),
    ("kind-node", 15),
];

/// The estimate for a component [`TYPICAL`] does not list.
pub const UNKNOWN: u64 = 300;

/// What an estimate rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The median of this many earlier builds of the component on this machine.
    Measured(usize),
    /// [`TYPICAL`] (or [`UNKNOWN`]).
    Typical,
}

/// How long a build is expected to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// The expected duration.
    pub time: Duration,
    /// Where it comes from.
    pub basis: Basis,
}

/// The estimate for `component` from the durations (seconds) of its earlier builds here.
pub fn estimate(component: &str, earlier: &[u64]) -> Estimate {
    if earlier.is_empty() {
        let secs = TYPICAL
            .iter()
            .find(|(c, _)| *c == component)
            .map_or(UNKNOWN, |(_, s)| *s);
        return Estimate {
            time: Duration::from_secs(secs),
            basis: Basis::Typical,
        };
    }
    let mut sorted = earlier.to_vec();
    sorted.sort_unstable();
    Estimate {
        time: Duration::from_secs(sorted[sorted.len() / 2].max(1)),
        basis: Basis::Measured(sorted.len()),
    }
}

/// A build that is not cached yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdBuild {
    /// What will be built.
    pub key: BuildKey,
    /// How long it is expected to take.
    pub estimate: Estimate,
}

/// The cold builds in a few lines: each with its estimate and its basis, then the total.
/// Empty when nothing is cold.
pub fn plan_text(cold: &[ColdBuild]) -> String {
    if cold.is_empty() {
        return String::new();
    }
    let total: Duration = cold.iter().map(|c| c.estimate.time).sum();
    let mut out = format!(
        "{} cold build(s) first (Go, cached afterwards; estimates from this machine's earlier \
         builds, or typical 2-core times with an empty Go build cache):\n",
        cold.len()
    );
    for c in cold {
        let basis = match c.estimate.basis {
            Basis::Measured(n) => format!("median of {n} earlier build(s) here"),
            Basis::Typical => "typical".into(),
        };
        out.push_str(&format!(
            "  {:<32} ~{} ({basis})\n",
            c.key.to_string(),
            minutes(c.estimate.time)
        ));
    }
    out.push_str(&format!(
        "  about {} of building in all; builds of different components run side by side",
        minutes(total)
    ));
    out
}

impl Toolchain {
    /// The estimate for building `key` here.
    pub fn estimate(&self, key: &BuildKey) -> Estimate {
        let earlier: Vec<u64> = self
            .cache()
            .list()
            .iter()
            .filter(|i| i.manifest.key.component == key.component && i.manifest.key != *key)
            .map(|i| i.manifest.build_seconds)
            .collect();
        estimate(&key.component, &earlier)
    }

    /// The builds among `keys` that are not cached, each once, in the order given.
    pub fn cold(&self, keys: &[BuildKey]) -> Vec<ColdBuild> {
        let mut out: Vec<ColdBuild> = vec![];
        for k in keys {
            if out.iter().any(|c| c.key == *k) || self.cache().lookup(k).is_some() {
                continue;
            }
            out.push(ColdBuild {
                key: k.clone(),
                estimate: self.estimate(k),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_builds_here_beat_the_typical_time() {
        let typical = estimate("kubernetes", &[]);
        assert_eq!(typical.basis, Basis::Typical);
        assert_eq!(typical.time, Duration::from_secs(600));
        assert_eq!(estimate("something-new", &[]).time.as_secs(), UNKNOWN);
        let here = estimate("kruise-manager", &[1346, 393, 520, 512]);
        assert_eq!(here.basis, Basis::Measured(4));
        assert_eq!(here.time, Duration::from_secs(520));
    }

    #[test]
    fn the_plan_lists_each_cold_build_and_the_total() {
        let cold = [
            ColdBuild {
                key: BuildKey::new("kubernetes", "v1.32.5"),
                estimate: estimate("kubernetes", &[]),
            },
            ColdBuild {
                key: BuildKey::new("kruise-manager", "v1.8.3"),
                estimate: estimate("kruise-manager", &[500, 540]),
            },
        ];
        let text = plan_text(&cold);
        assert!(text.starts_with("2 cold build(s) first"), "{text}");
        assert!(text.contains("~10 min (typical)"), "{text}");
        assert!(
            text.contains("~9 min (median of 2 earlier build(s) here)"),
            "{text}"
        );
        assert!(text.contains("about 19 min of building in all"), "{text}");
        assert_eq!(plan_text(&[]), "");
    }

    #[test]
    fn a_cached_build_is_not_cold() {
        let dir = tempfile::tempdir().unwrap();
        let tc = Toolchain::new(
            super::super::Cache::new(dir.path()),
            crate::progress::Progress::silent(),
        );
        let k = BuildKey::new("kwok", "v0.7.0");
        let cold = tc.cold(&[k.clone(), k.clone()]);
        assert_eq!(cold.len(), 1, "each once");
        assert_eq!(cold[0].estimate.basis, Basis::Typical);
    }
}
