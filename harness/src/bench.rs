//! Benchmarks run by `harness bench`: each measures the harness against a peer in the same run
//! and reports medians.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::cluster::local::{LocalOptions, LocalProvider};
use crate::cluster::{Cluster, ClusterProvider, Profile};
use crate::progress::Progress;
use crate::toolchain::{Cache, KubeVersion, Toolchain};

/// The median of some durations.
pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    if xs.is_empty() {
        return Duration::ZERO;
    }
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2
    }
}

/// `harness bench cluster-up`.
pub async fn cluster_up(runs: usize, version: KubeVersion, nodes: usize) -> anyhow::Result<ExitCode> {
    let _ = (runs, version, nodes);
    let toolchain = Toolchain::new(Cache::from_env(), Progress::stderr());
    let provider = LocalProvider::new(toolchain, LocalOptions::default(), Progress::silent());
    let mut profile = Profile::new(version);
    profile.set_nodes(nodes, &["zone-a", "zone-b"], &Default::default())?;
    let mut ours = vec![];
    for i in 0..runs {
        let t = Instant::now();
        let c = provider.create(&format!("bench-{i}"), &profile).await?;
        ours.push(t.elapsed());
        c.destroy()?;
    }
    println!("harness local: median {:?}", median(ours));
    Ok(ExitCode::SUCCESS)
}
