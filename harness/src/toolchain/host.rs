//! Tools that do not come from Go modules. [`Toolchain::kopium`] builds kopium from crates.io
//! into the cache (under the same lock as the Go builds), and [`Toolchain::mdbook`] mdBook;
//! [`Toolchain::debian_binary`] finds a Debian package's binary and, when the harness runs as
//! root, installs the package with `apt-get` (saying so) instead of failing.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::cache::{BuildKey, Manifest};
use super::go::run_streaming;
use super::{Toolchain, ToolchainError};

/// The kopium release the committed OpenKruise types were generated with.
pub const KOPIUM_VERSION: &str = "0.24.1";

/// The mdBook release the book in `docs/` is built with.
pub const MDBOOK_VERSION: &str = "0.5.4";

/// The optimization level mdBook is built at (Cargo's release profile otherwise): `0`, see
/// [`Toolchain::mdbook`].
pub const MDBOOK_OPT_LEVEL: &str = "0";

/// A Debian package and the binaries that stand for it on `PATH` (the first one found wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebianPackage {
    /// The package name.
    pub package: &'static str,
    /// Binary names it installs, in order of preference.
    pub binaries: &'static [&'static str],
}

/// Debian's Chromium, for checking HTML reports in a headless browser.
pub const CHROMIUM: DebianPackage = DebianPackage {
    package: "chromium",
    binaries: &["chromium", "chromium-browser"],
};

/// Debian's static busybox, the base of the busybox images (see [`super::images`]).
pub const BUSYBOX_STATIC: DebianPackage = DebianPackage {
    package: "busybox-static",
    binaries: &["busybox"],
};

/// What to do about a Debian package: pure, so every branch is testable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackagePlan {
    /// A binary is already on `PATH`.
    Found(PathBuf),
    /// Install it with this `apt-get`.
    Install(PathBuf),
    /// It cannot be installed here: the fix for the user.
    Refuse(String),
}

impl DebianPackage {
    /// Decides from what is on `path` and whether the harness runs as root.
    pub fn plan(&self, path: Option<&OsStr>, root: bool) -> PackagePlan {
        if let Some(found) = self.binaries.iter().find_map(|b| find_on_path(path, b)) {
            return PackagePlan::Found(found);
        }
        let by_hand = format!(
            "install Debian's `{p}` package as root (`apt-get update && apt-get install -y {p}`)",
            p = self.package
        );
        match (root, find_on_path(path, "apt-get")) {
            (true, Some(apt)) => PackagePlan::Install(apt),
            (true, None) => PackagePlan::Refuse(format!(
                "there is no apt-get on PATH to install it with; {by_hand} or put one of {:?} on \
                 PATH",
                self.binaries
            )),
            (false, _) => PackagePlan::Refuse(format!(
                "the harness installs it itself only when it runs as root; {by_hand}"
            )),
        }
    }
}

/// The first executable file called `name` in the directories of `path` (a `PATH` value).
pub fn find_on_path(path: Option<&OsStr>, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn cargo_binary() -> PathBuf {
    // Under `cargo test` and `cargo run`, CARGO names the cargo that is running.
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

impl Toolchain {
    /// kopium at [`KOPIUM_VERSION`], built with `cargo install --locked` into the cache on
    /// first use.
    pub async fn kopium(&self) -> Result<PathBuf, ToolchainError> {
        let key = BuildKey::new("kopium", KOPIUM_VERSION);
        let install = self
            .ensure_built(&key, |staging| {
                self.cargo_install(&key, staging, "kopium", &[], None)
            })
            .await?;
        Ok(install.binary("kopium"))
    }

    /// mdBook at [`MDBOOK_VERSION`], built with `cargo install --locked` into the cache on
    /// first use; without its `serve` and `watch` features (a web server and a file watcher
    /// the book's check does not use, and most of the build), and unoptimized
    /// ([`MDBOOK_OPT_LEVEL`]): its build is a first run of the test command's, which renders the
    /// book once (the two builds and renders compared: docs/benchmarks.md).
    pub async fn mdbook(&self) -> Result<PathBuf, ToolchainError> {
        let key = BuildKey::new("mdbook", MDBOOK_VERSION);
        let features = ["--no-default-features", "--features", "search"];
        let install = self
            .ensure_built(&key, |staging| {
                self.cargo_install(&key, staging, "mdbook", &features, Some(MDBOOK_OPT_LEVEL))
            })
            .await?;
        Ok(install.binary("mdbook"))
    }

    async fn cargo_install(
        &self,
        key: &BuildKey,
        staging: PathBuf,
        binary: &str,
        args: &[&str],
        opt_level: Option<&str>,
    ) -> Result<Manifest, ToolchainError> {
        let cargo = cargo_binary();
        let version = Command::new(&cargo)
            .arg("--version")
            .output()
            .await
            .map_err(|_| ToolchainError::ToolMissing {
                tool: format!("cargo (`{}`)", cargo.display()),
                fix: "install Rust with cargo (e.g. rustup) and put cargo on PATH".into(),
            })?;
        let built_with = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let started = Instant::now();
        let task = self
            .progress
            .task(&format!("building {key} with {built_with}"));
        let root = staging.join("cargo");
        let mut cmd = Command::new(&cargo);
        cmd.args(["install", "--locked", "--quiet", "--version", &key.version])
            .args(args)
            .arg("--root")
            .arg(&root)
            .arg(&key.component)
            .env("CARGO_TARGET_DIR", staging.join("target"))
            .kill_on_drop(true)
            .stdin(Stdio::null());
        if let Some(level) = opt_level {
            cmd.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", level);
        }
        let what = format!("cargo install {} {}", key.component, key.version);
        run_streaming(cmd, &what, 40, |line| task.set(line)).await?;
        let from = root.join("bin").join(binary);
        let to = staging.join("bin").join(binary);
        std::fs::rename(&from, &to).map_err(|e| ToolchainError::io(&from, e))?;
        task.finish(&format!(
            "built {key} in {:.0?}",
            Duration::from_secs(started.elapsed().as_secs())
        ));
        Ok(Manifest {
            key: key.clone(),
            binaries: vec![binary.to_string()],
            built_with,
            build_seconds: started.elapsed().as_secs(),
        })
    }

    /// The binary of a Debian package: found on `PATH`, or — when the harness runs as root —
    /// installed with `apt-get` under a cache lock (so parallel tests install it once).
    pub async fn debian_binary(&self, package: DebianPackage) -> Result<PathBuf, ToolchainError> {
        self.debian_binary_in(package, &[]).await
    }

    /// [`Toolchain::debian_binary`], looking in `dirs` first (e.g. `/usr/lib/cni`, or
    /// `/usr/sbin` when it is not on `PATH`).
    pub async fn debian_binary_in(
        &self,
        package: DebianPackage,
        dirs: &[&str],
    ) -> Result<PathBuf, ToolchainError> {
        self.debian_binary_with(package, dirs, true).await
    }

    /// [`Toolchain::debian_binary_in`], installing the package without the packages it only
    /// recommends (`--no-install-recommends`).
    pub async fn debian_binary_without_recommends(
        &self,
        package: DebianPackage,
        dirs: &[&str],
    ) -> Result<PathBuf, ToolchainError> {
        self.debian_binary_with(package, dirs, false).await
    }

    async fn debian_binary_with(
        &self,
        package: DebianPackage,
        dirs: &[&str],
        recommends: bool,
    ) -> Result<PathBuf, ToolchainError> {
        // `dirs` first: they are where the package puts what is asked for.
        let mut paths: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
        if let Some(p) = std::env::var_os("PATH") {
            paths.extend(std::env::split_paths(&p));
        }
        let path = std::env::join_paths(paths).ok();
        let root = nix::unistd::geteuid().is_root();
        let apt = match package.plan(path.as_deref(), root) {
            PackagePlan::Found(p) => return Ok(p),
            PackagePlan::Refuse(fix) => return Err(missing(package, fix)),
            PackagePlan::Install(apt) => apt,
        };
        // One lock for every package: dpkg takes one install at a time, and two clusters
        // that start side by side on a new machine each install theirs.
        let _lock = self.lock(&BuildKey::new("apt", "dpkg")).await?;
        // Another process may have installed it while we waited.
        if let PackagePlan::Found(p) = package.plan(path.as_deref(), root) {
            return Ok(p);
        }
        let task = self.progress.task(&format!(
            "installing Debian's `{}` package with apt-get (running as root)",
            package.package
        ));
        apt_get(&apt, &["update", "-qq", DPKG_LOCK_TIMEOUT], &task).await?;
        apt_get(&apt, &install_args(package, recommends), &task).await?;
        match package.plan(path.as_deref(), root) {
            PackagePlan::Found(p) => {
                task.finish(&format!("installed `{}`: {}", package.package, p.display()));
                Ok(p)
            }
            _ => Err(missing(
                package,
                format!(
                    "apt-get installed `{}` but none of {:?} is on PATH",
                    package.package, package.binaries
                ),
            )),
        }
    }
}

/// How long `apt-get` waits for dpkg's lock held by a process outside the harness (another
/// apt-get, an unattended upgrade) before it gives up, instead of failing at once.
const DPKG_LOCK_TIMEOUT: &str = "-oDPkg::Lock::Timeout=600";

/// The arguments of `apt-get` that install `package`, with the packages it recommends or
/// without.
fn install_args(package: DebianPackage, recommends: bool) -> Vec<&'static str> {
    let mut args = vec!["install", "-y", "-qq", DPKG_LOCK_TIMEOUT];
    if !recommends {
        args.push("--no-install-recommends");
    }
    args.push(package.package);
    args
}

fn missing(package: DebianPackage, fix: String) -> ToolchainError {
    ToolchainError::ToolMissing {
        tool: format!(
            "{} (Debian package `{}`)",
            package.binaries[0], package.package
        ),
        fix,
    }
}

async fn apt_get(
    apt: &Path,
    args: &[&str],
    task: &crate::progress::Task,
) -> Result<(), ToolchainError> {
    let mut cmd = Command::new(apt);
    cmd.args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .kill_on_drop(true)
        .stdin(Stdio::null());
    let what = format!("apt-get {}", args.join(" "));
    run_streaming(cmd, &what, 40, |line| task.set(line)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin_dir(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for n in names {
            crate::testing::script(dir.path(), n, "");
        }
        dir
    }

    #[test]
    fn a_binary_on_path_is_used_as_it_is() {
        let dir = bin_dir(&["chromium-browser", "apt-get"]);
        let path = dir.path().as_os_str();
        assert_eq!(
            CHROMIUM.plan(Some(path), false),
            PackagePlan::Found(dir.path().join("chromium-browser"))
        );
    }

    #[test]
    fn root_with_apt_installs_and_anyone_else_is_told_how() {
        let dir = bin_dir(&["apt-get"]);
        let path = dir.path().as_os_str();
        assert_eq!(
            CHROMIUM.plan(Some(path), true),
            PackagePlan::Install(dir.path().join("apt-get"))
        );
        let PackagePlan::Refuse(fix) = CHROMIUM.plan(Some(path), false) else {
            panic!("not root: refused");
        };
        assert!(fix.contains("apt-get install -y chromium"), "{fix}");
        let empty = bin_dir(&[]);
        let PackagePlan::Refuse(fix) = CHROMIUM.plan(Some(empty.path().as_os_str()), true) else {
            panic!("no apt-get: refused");
        };
        assert!(fix.contains("no apt-get"), "{fix}");
    }

    #[test]
    fn a_missing_busybox_is_installed_by_root_and_named_for_anyone_else() {
        let dir = bin_dir(&["apt-get"]);
        let path = dir.path().as_os_str();
        assert_eq!(
            BUSYBOX_STATIC.plan(Some(path), true),
            PackagePlan::Install(dir.path().join("apt-get"))
        );
        let PackagePlan::Refuse(fix) = BUSYBOX_STATIC.plan(Some(path), false) else {
            panic!("not root: refused");
        };
        assert!(fix.contains("apt-get install -y busybox-static"), "{fix}");
        let err = missing(BUSYBOX_STATIC, fix).to_string();
        assert!(
            err.starts_with("find busybox (Debian package `busybox-static`)"),
            "{err}"
        );
    }

    #[test]
    fn a_package_installs_with_or_without_what_it_recommends() {
        assert_eq!(
            install_args(BUSYBOX_STATIC, true),
            ["install", "-y", "-qq", DPKG_LOCK_TIMEOUT, "busybox-static"]
        );
        // A lock held elsewhere is waited for, as apt spells it.
        assert!(DPKG_LOCK_TIMEOUT.starts_with("-oDPkg::Lock::Timeout="));
        assert_eq!(
            install_args(BUSYBOX_STATIC, false),
            [
                "install",
                "-y",
                "-qq",
                DPKG_LOCK_TIMEOUT,
                "--no-install-recommends",
                "busybox-static"
            ]
        );
    }

    #[test]
    fn a_file_that_is_not_executable_is_not_a_binary() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("chromium"), "").unwrap();
        assert_eq!(find_on_path(Some(dir.path().as_os_str()), "chromium"), None);
    }
}
