//! The binary cache: [`Cache`] keeps one directory per built component and version, installed
//! atomically and guarded by a per-key file lock.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ToolchainError;

/// Names a cached build: `kubernetes` + `v1.32.5`, `kwok` + `v0.7.0`, ...
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BuildKey {
    /// Component family.
    pub component: String,
    /// Version or tag.
    pub version: String,
}

impl BuildKey {
    /// A key.
    pub fn new(component: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            version: version.into(),
        }
    }

    fn slug(&self) -> String {
        format!("{}-{}", self.component, self.version)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

impl std::fmt::Display for BuildKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.component, self.version)
    }
}

/// What is recorded next to an installed build; its presence marks the install complete.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// The key.
    pub key: BuildKey,
    /// The binaries in the directory.
    pub binaries: Vec<String>,
    /// What built them (`Go 1.26.8`, `cargo 1.91.0`, `apt-get`); older caches recorded only
    /// the Go version.
    #[serde(alias = "go_version")]
    pub built_with: String,
    /// Seconds the build took.
    pub build_seconds: u64,
}

/// An installed build.
#[derive(Debug, Clone)]
pub struct Installed {
    /// Directory holding the binaries.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
}

impl Installed {
    /// Path of one binary.
    pub fn binary(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

const MANIFEST: &str = "manifest.json";

/// The cache root and its layout: `builds/<component>-<version>/`, `locks/`, `work/`.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// A held exclusive lock on one key; released on drop.
#[derive(Debug)]
pub struct BuildLock {
    _file: File,
}

/// A build's staging directory (`bin/` for the binaries, `src/` for the generated module),
/// removed when dropped: a build that fails, panics or is cancelled (its future dropped
/// mid-way, as when a sibling build fails first) leaves nothing behind. Only a killed process
/// leaves one, and the next build of the same key removes it.
#[derive(Debug)]
pub struct Staging {
    path: PathBuf,
}

impl Staging {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = make_writable_and_remove(&self.path);
    }
}

impl Cache {
    /// A cache at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `HARNESS_CACHE_DIR`, else `$XDG_CACHE_HOME/harness`, else `~/.cache/harness`.
    pub fn from_env() -> Self {
        Self::new(default_root())
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn final_dir(&self, key: &BuildKey) -> PathBuf {
        self.root.join("builds").join(key.slug())
    }

    /// The installed build for `key`, if complete.
    pub fn lookup(&self, key: &BuildKey) -> Option<Installed> {
        let dir = self.final_dir(key);
        let manifest: Manifest =
            serde_json::from_slice(&fs::read(dir.join(MANIFEST)).ok()?).ok()?;
        if manifest.key != *key || !manifest.binaries.iter().all(|b| dir.join(b).is_file()) {
            return None;
        }
        Some(Installed { dir, manifest })
    }

    /// Takes the lock for `key`, waiting for another holder; `on_wait` is called once if the
    /// lock is busy.
    pub fn lock(
        &self,
        key: &BuildKey,
        on_wait: impl FnOnce(),
    ) -> Result<BuildLock, ToolchainError> {
        let dir = self.root.join("locks");
        fs::create_dir_all(&dir).map_err(|e| ToolchainError::io(&dir, e))?;
        let path = dir.join(format!("{}.lock", key.slug()));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| ToolchainError::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                on_wait();
                file.lock().map_err(|e| ToolchainError::io(&path, e))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(ToolchainError::io(&path, e)),
        }
        Ok(BuildLock { _file: file })
    }

    /// A fresh staging directory for `key` (the caller holds the lock); stale staging dirs
    /// from killed builds of the same key are removed first.
    pub fn staging(&self, key: &BuildKey, _lock: &BuildLock) -> Result<Staging, ToolchainError> {
        let builds = self.root.join("builds");
        fs::create_dir_all(&builds).map_err(|e| ToolchainError::io(&builds, e))?;
        let prefix = format!(".tmp-{}-", key.slug());
        if let Ok(entries) = fs::read_dir(&builds) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = make_writable_and_remove(&e.path());
                }
            }
        }
        let staging = Staging {
            path: builds.join(format!("{prefix}{}", std::process::id())),
        };
        for sub in ["bin", "src"] {
            fs::create_dir_all(staging.path.join(sub))
                .map_err(|e| ToolchainError::io(&staging.path, e))?;
        }
        Ok(staging)
    }

    /// Moves `staging/bin` into place after writing its manifest, then removes `staging`.
    /// The rename is the commit point: a killed build never leaves a trusted directory.
    pub fn install(
        &self,
        staging: &Staging,
        manifest: Manifest,
        _lock: &BuildLock,
    ) -> Result<Installed, ToolchainError> {
        let bin = staging.path.join("bin");
        for b in &manifest.binaries {
            if !bin.join(b).is_file() {
                return Err(ToolchainError::MissingOutput {
                    key: manifest.key.clone(),
                    binary: b.clone(),
                });
            }
        }
        let body = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        fs::write(bin.join(MANIFEST), body).map_err(|e| ToolchainError::io(&bin, e))?;
        let dest = self.final_dir(&manifest.key);
        if dest.exists() {
            make_writable_and_remove(&dest).map_err(|e| ToolchainError::io(&dest, e))?;
        }
        fs::rename(&bin, &dest).map_err(|e| ToolchainError::io(&dest, e))?;
        make_writable_and_remove(&staging.path)
            .map_err(|e| ToolchainError::io(&staging.path, e))?;
        Ok(Installed {
            dir: dest,
            manifest,
        })
    }

    /// Every complete install, sorted by key.
    pub fn list(&self) -> Vec<Installed> {
        let mut out = Vec::new();
        if let Ok(entries) = fs::read_dir(self.root.join("builds")) {
            for e in entries.flatten() {
                let Ok(bytes) = fs::read(e.path().join(MANIFEST)) else {
                    continue;
                };
                if let Ok(manifest) = serde_json::from_slice::<Manifest>(&bytes)
                    && let Some(i) = self.lookup(&manifest.key)
                {
                    out.push(i);
                }
            }
        }
        out.sort_by(|a, b| a.manifest.key.cmp(&b.manifest.key));
        out
    }
}

/// Removes a tree even where Go left read-only files (its module cache does).
pub fn make_writable_and_remove(path: &Path) -> std::io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            chmod_writable(path);
            fs::remove_dir_all(path)
        }
    }
}

fn chmod_writable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::symlink_metadata(path)
        && meta.is_dir()
    {
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o755));
        if let Ok(entries) = fs::read_dir(path) {
            for e in entries.flatten() {
                chmod_writable(&e.path());
            }
        }
    }
}

fn default_root() -> PathBuf {
    if let Some(p) = std::env::var_os("HARNESS_CACHE_DIR") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(p).join("harness");
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(".cache")
        .join("harness")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(key: &BuildKey) -> Manifest {
        Manifest {
            key: key.clone(),
            binaries: vec!["tool".into()],
            built_with: "Go 1.26.8".into(),
            build_seconds: 1,
        }
    }

    #[test]
    fn a_killed_build_leaves_nothing_trusted_and_is_cleaned_by_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let key = BuildKey::new("kwok", "v0.7.0");
        let lock = cache.lock(&key, || {}).unwrap();
        let staging = cache.staging(&key, &lock).unwrap();
        let first = staging.path().to_path_buf();
        fs::write(first.join("bin/tool"), b"half").unwrap();
        // The process is killed here: no install, and no drop to remove the staging dir.
        std::mem::forget(staging);
        drop(lock);
        assert!(cache.lookup(&key).is_none());

        let lock = cache.lock(&key, || {}).unwrap();
        let staging2 = cache.staging(&key, &lock).unwrap();
        assert!(!first.exists() || first == staging2.path());
        assert!(!staging2.path().join("bin/tool").exists());
        fs::write(staging2.path().join("bin/tool"), b"whole").unwrap();
        let installed = cache.install(&staging2, manifest(&key), &lock).unwrap();
        assert_eq!(fs::read(installed.binary("tool")).unwrap(), b"whole");
        assert!(!staging2.path().exists());
        assert_eq!(cache.list().len(), 1);
    }

    #[test]
    fn install_refuses_a_build_missing_a_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let key = BuildKey::new("kwok", "v0.7.0");
        let lock = cache.lock(&key, || {}).unwrap();
        let staging = cache.staging(&key, &lock).unwrap();
        let dir = staging.path().to_path_buf();
        let err = cache.install(&staging, manifest(&key), &lock).unwrap_err();
        assert!(err.to_string().contains("tool"), "{err}");
        assert!(cache.lookup(&key).is_none());
        drop(staging);
        assert!(!dir.exists(), "a refused build's staging dir is removed");
    }

    #[test]
    fn a_second_locker_waits_for_the_first() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let key = BuildKey::new("kubernetes", "v1.32.5");
        let first = cache.lock(&key, || {}).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let c2 = cache.clone();
        let k2 = key.clone();
        let waiter = std::thread::spawn(move || {
            let waited = std::cell::Cell::new(false);
            let _l = c2.lock(&k2, || waited.set(true)).unwrap();
            tx.send(waited.get()).unwrap();
        });
        // The waiter cannot get the lock while we hold it.
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err()
        );
        drop(first);
        assert!(rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap());
        waiter.join().unwrap();
    }
}
