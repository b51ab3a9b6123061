//! The scenarios. They live in the top-level `suites/` directory, a file or a directory per
//! feature area, and are compiled into this crate.

#[path = "../../suites/mod.rs"]
mod all;

pub use all::*;
