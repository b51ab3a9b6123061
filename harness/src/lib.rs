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
pub mod kruise;
pub mod matrix;
pub mod progress;
pub mod qualify;
pub mod report;
pub mod run;
pub mod scenario;
pub mod suites;
pub mod toolchain;
pub mod up;
pub mod wait;
