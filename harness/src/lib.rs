//! A conformance test harness for Kubernetes workload controllers.
//!
//! Layers, from the bottom: [`process`] runs processes described as data, [`toolchain`] builds
//! pinned binaries from Go modules, [`cluster`] brings up clusters from a [`cluster::Profile`]
//! (start with [`cluster::local::LocalCluster`], the embedded default), and [`cli`] is the thin
//! command-line layer over them. [`layers`] has every module's layer; [`book`], above them all,
//! renders the book's reference pages from the code.

// The harness's own output never ends it. `std`'s print macros panic when a write fails, and
// a write to a pipe whose reader is gone (a test that started the harness killed, a pipe to
// `head` closed) fails: the next line printed after that (a stop's "cleaning up", a
// teardown's progress) would panic, and a second panic while unwinding aborts before the
// clusters are torn down. These macros, in scope in every module below them, shadow `std`'s
// and write the same text, a failed write going nowhere. (Asynchronous quieting of a gone
// stream, by a thread that notices the hang-up, is a race with the next line printed.)

/// Writes `args` to `out`, a failed write ignored: the crate's print macros.
fn write_unchecked(mut out: impl std::io::Write, args: std::fmt::Arguments<'_>) {
    let _ = out.write_fmt(args);
}

/// `std::print!`, a failed write ignored.
macro_rules! print {
    ($($arg:tt)*) => { $crate::write_unchecked(std::io::stdout().lock(), format_args!($($arg)*)) };
}

/// `std::println!`, a failed write ignored.
macro_rules! println {
    () => { print!("\n") };
    ($($arg:tt)*) => { print!("{}\n", format_args!($($arg)*)) };
}

/// `std::eprint!`, a failed write ignored.
macro_rules! eprint {
    ($($arg:tt)*) => { $crate::write_unchecked(std::io::stderr().lock(), format_args!($($arg)*)) };
}

/// `std::eprintln!`, a failed write ignored.
macro_rules! eprintln {
    () => { eprint!("\n") };
    ($($arg:tt)*) => { eprint!("{}\n", format_args!($($arg)*)) };
}

pub mod bench;
pub mod book;
pub mod chainsaw;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod explore;
pub mod kruise;
pub mod layers;
pub mod matrix;
pub mod process;
pub mod progress;
pub mod qualify;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod stop;
pub mod suites;
pub mod toolchain;
pub mod up;
pub mod wait;

/// What unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::{Path, PathBuf};

    /// Writes an executable `sh` script `name` with `body` (after the `#!/bin/sh` line) into
    /// `dir`: a stand-in for a binary the code under test runs.
    ///
    /// A child process writes it: a file this process held open for writing could be
    /// inherited by a child another test thread forks at that moment, and executing the script
    /// would then fail with "Text file busy" until that child execs.
    pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::io::Write;
        let path = dir.join(name);
        let mut child = std::process::Command::new("sh")
            .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("#!/bin/sh\n{body}").as_bytes())
            .unwrap();
        drop(stdin);
        assert!(child.wait().unwrap().success(), "write {}", path.display());
        path
    }
}
