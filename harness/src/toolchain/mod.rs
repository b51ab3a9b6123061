//! Pinned binaries built from Go modules. Start with [`Toolchain`]: it returns the directory of
//! a component's binaries at a version, building them with Go on first use.
//!
//! Builds are described as data ([`go::GoRecipe`], made by [`recipes`]) and cached per
//! component and version by [`cache::Cache`], with a file lock so two runs never build the same
//! thing twice and an atomic install so a killed build is never trusted.

pub mod cache;
pub mod estimate;
pub mod go;
pub mod host;
pub mod images;
pub mod kind_node;
pub mod oci;
pub mod recipes;
pub mod versions;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use cache::{BuildKey, Cache, Installed};
pub use go::{GoEnv, GoVersion};
pub use images::BuiltImage;
pub use kind_node::{KindConfigAdditions, KindNodeError, KindNodeImage, kind_config_additions};
pub use versions::{CHAINSAW_VERSION, KWOK_VERSION, KubeVersion, REGISTRY_VERSION};

use crate::progress::Progress;

/// Errors of the toolchain.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// `go` could not be run.
    #[error(
        "run `{}`: Go is needed to build the Kubernetes binaries; install Go 1.23 or newer \
         (e.g. `apt-get install golang` or from your distribution) and put it on PATH, \
         or point HARNESS_GO at a go binary",
        go.display()
    )]
    GoMissing {
        /// The binary tried.
        go: PathBuf,
        /// Why it could not run.
        #[source]
        source: std::io::Error,
    },
    /// `go env GOVERSION` printed something unexpected.
    #[error("read the version of `{}`: it printed {output:?}", go.display())]
    GoUnreadable {
        /// The binary.
        go: PathBuf,
        /// What it printed.
        output: String,
    },
    /// The Go found is older than a module requires.
    #[error(
        "build {what}: it needs Go {needed} or newer but Go {found} was found; \
         install a newer Go or point HARNESS_GO at one"
    )]
    GoTooOld {
        /// Found version.
        found: GoVersion,
        /// Needed version.
        needed: GoVersion,
        /// What was to be built.
        what: String,
    },
    /// The module proxy does not serve a module.
    #[error("download {module} from the Go module proxy: {detail}")]
    ModuleUnavailable {
        /// module@version
        module: String,
        /// The go command's message.
        detail: String,
    },
    /// The module proxy did not list a module's versions.
    #[error("list the versions of {module} the Go module proxy serves: {detail}")]
    ModuleVersions {
        /// The module.
        module: String,
        /// The go command's message.
        detail: String,
    },
    /// A subprocess could not start.
    #[error("start {what}")]
    Spawn {
        /// The command.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `go build` failed.
    #[error("{what} exited with {status}; last lines:\n{tail}")]
    BuildFailed {
        /// The command.
        what: String,
        /// Its exit status.
        status: String,
        /// Its last output lines.
        tail: String,
    },
    /// A build finished without one of its binaries.
    #[error("build {key}: it produced no `{binary}`")]
    MissingOutput {
        /// The build.
        key: BuildKey,
        /// The missing binary.
        binary: String,
    },
    /// A tool the harness needs is missing and cannot be installed from here.
    #[error("find {tool}: it is not installed; {fix}")]
    ToolMissing {
        /// The tool.
        tool: String,
        /// How to install it.
        fix: String,
    },
    /// A file operation in the cache failed.
    #[error("access {}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl ToolchainError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The Kubernetes control-plane binaries of one version.
#[derive(Debug, Clone)]
pub struct KubeBinaries {
    /// The version.
    pub version: KubeVersion,
    /// Where they are.
    pub install: Installed,
}

impl KubeBinaries {
    /// Path of one binary (`kube-apiserver`, `etcd`, `kubectl`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.install.binary(name)
    }
}

/// Builds and caches pinned binaries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Toolchain {
    cache: Cache,
    progress: Progress,
}

impl Toolchain {
    /// A toolchain over `cache`, reporting build progress to `progress`.
    pub fn new(cache: Cache, progress: Progress) -> Self {
        Self { cache, progress }
    }

    /// The cache it uses.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The Kubernetes binaries and etcd at `version`, built if not cached.
    pub async fn kubernetes(&self, version: KubeVersion) -> Result<KubeBinaries, ToolchainError> {
        let install = self
            .build_in_kubernetes_graph("kubernetes", version, recipes::kubernetes)
            .await?;
        Ok(KubeBinaries { version, install })
    }

    /// The kubelet at `version` (for real nodes), built if not cached.
    pub async fn kubelet(&self, version: KubeVersion) -> Result<PathBuf, ToolchainError> {
        let install = self
            .build_in_kubernetes_graph("kubelet", version, recipes::kubelet)
            .await?;
        Ok(install.binary("kubelet"))
    }

    /// The build `component` at `version` from `k8s.io/kubernetes`'s module graph, made by
    /// `recipe` from the release's own `go.mod`.
    async fn build_in_kubernetes_graph(
        &self,
        component: &str,
        version: KubeVersion,
        recipe: fn(&KubeVersion, &str) -> go::GoRecipe,
    ) -> Result<Installed, ToolchainError> {
        let key = BuildKey::new(component, version.tag());
        self.ensure(&key, |go, dir| async move {
            let upstream = go
                .module_go_mod(&dir, "k8s.io/kubernetes", &version.tag(), false)
                .await?;
            let text =
                std::fs::read_to_string(&upstream).map_err(|e| ToolchainError::io(&upstream, e))?;
            Ok(recipe(&version, &text))
        })
        .await
    }

    /// A binary installed with `go install <package>@<version>` (kwok, kwokctl).
    pub async fn go_install(
        &self,
        module: &str,
        package: &str,
        version: &str,
        binary: &str,
    ) -> Result<PathBuf, ToolchainError> {
        let key = BuildKey::new(binary, version);
        let (module, package, version, binary_s) = (
            module.to_string(),
            package.to_string(),
            version.to_string(),
            binary.to_string(),
        );
        let install = self
            .ensure(&key, |go, dir| async move {
                let upstream = go.module_go_mod(&dir, &module, &version, false).await?;
                let text = std::fs::read_to_string(&upstream)
                    .map_err(|e| ToolchainError::io(&upstream, e))?;
                Ok(recipes::go_install(
                    &module, &package, &version, &binary_s, &text,
                ))
            })
            .await?;
        Ok(install.binary(binary))
    }

    /// A controller manager whose main package is the module root, e.g.
    /// `github.com/openkruise/kruise` at `v1.9.0`, as `binary`. `nosum` skips the checksum
    /// database for the module (for modules it does not know).
    pub async fn module_main(
        &self,
        module: &str,
        version: &str,
        binary: &str,
        nosum: bool,
    ) -> Result<PathBuf, ToolchainError> {
        self.module_package(module, module, version, binary, nosum)
            .await
    }

    /// [`module_main`](Self::module_main) for a main package elsewhere in the module, e.g.
    /// `github.com/openkruise/kruise/cmd/daemon` at `v1.9.0` as `kruise-daemon`; cached under
    /// `binary` and `version`.
    pub async fn module_package(
        &self,
        module: &str,
        package: &str,
        version: &str,
        binary: &str,
        nosum: bool,
    ) -> Result<PathBuf, ToolchainError> {
        self.module_build(module, package, version, binary, nosum, false)
            .await
    }

    /// The test binary of package `package` of `module` at `version` (`go test -c`), as
    /// `binary`: a controller's own end-to-end suite; cached under `binary` and `version`.
    pub async fn module_test(
        &self,
        module: &str,
        package: &str,
        version: &str,
        binary: &str,
        nosum: bool,
    ) -> Result<PathBuf, ToolchainError> {
        self.module_build(module, package, version, binary, nosum, true)
            .await
    }

    /// Builds main package `package` (`.`, `./cmd/daemon`) of the local checkout of a Go
    /// module at `dir`, with the checkout's own `go.mod` (read-only: the checkout is not
    /// modified), into `<cache>/checkouts/<hash of dir>/<binary>`. It is rebuilt every time
    /// (Go's build cache makes that cheap), so the binary always matches the tree.
    pub async fn build_checkout(
        &self,
        dir: &Path,
        package: &str,
        binary: &str,
    ) -> Result<PathBuf, ToolchainError> {
        use std::hash::{Hash, Hasher};
        let go = GoEnv::detect().await?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        dir.hash(&mut h);
        let out = self
            .cache()
            .root()
            .join("checkouts")
            .join(format!("{:016x}", h.finish()));
        std::fs::create_dir_all(&out).map_err(|e| ToolchainError::io(&out, e))?;
        let tmp = out.join(format!(".{binary}.{:08x}.tmp", rand::random::<u32>()));
        let mut cmd = go.command(dir);
        cmd.env("GOFLAGS", "-mod=readonly -buildvcs=false")
            .env("GOSUMDB", "off")
            .args(["build", "-v", "-trimpath", "-o"])
            .arg(&tmp)
            .arg(package);
        eprintln!("building {binary} from {} ...", dir.display());
        let what = format!("go build of {binary} in {}", dir.display());
        let built = go::run_streaming(cmd, &what, 40, |_| {}).await;
        if let Err(e) = built {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let built = out.join(binary);
        std::fs::rename(&tmp, &built).map_err(|e| ToolchainError::io(&built, e))?;
        Ok(built)
    }

    /// [`module_package`](Self::module_package), or with `test` its test binary.
    async fn module_build(
        &self,
        module: &str,
        package: &str,
        version: &str,
        binary: &str,
        nosum: bool,
        test: bool,
    ) -> Result<PathBuf, ToolchainError> {
        let key = BuildKey::new(binary, version);
        let (m, p, v, b) = (
            module.to_string(),
            package.to_string(),
            version.to_string(),
            binary.to_string(),
        );
        let install = self
            .ensure(&key, |go, dir| async move {
                let upstream = go.module_go_mod(&dir, &m, &v, nosum).await?;
                let text = std::fs::read_to_string(&upstream)
                    .map_err(|e| ToolchainError::io(&upstream, e))?;
                Ok(if test {
                    recipes::module_test(&m, &p, &v, &b, &text, nosum)
                } else {
                    recipes::module_package(&m, &p, &v, &b, &text, nosum)
                })
            })
            .await?;
        Ok(install.binary(binary))
    }

    /// kwok at [`KWOK_VERSION`].
    pub async fn kwok(&self) -> Result<PathBuf, ToolchainError> {
        self.go_install(
            "sigs.k8s.io/kwok",
            "sigs.k8s.io/kwok/cmd/kwok",
            KWOK_VERSION,
            "kwok",
        )
        .await
    }

    /// kwokctl at [`KWOK_VERSION`] (used by the bring-up benchmark as the peer).
    pub async fn kwokctl(&self) -> Result<PathBuf, ToolchainError> {
        self.go_install(
            "sigs.k8s.io/kwok",
            "sigs.k8s.io/kwok/cmd/kwokctl",
            KWOK_VERSION,
            "kwokctl",
        )
        .await
    }

    /// chainsaw at [`CHAINSAW_VERSION`], built from its module. Its test runner drives Go's
    /// `testing.MainStart`, whose dependency interface gained `ModulePath` in Go 1.25; the
    /// module's source is copied into the build directory and given that one method
    /// ([`recipes::CHAINSAW_MODULE_PATH_SHIM`]) when this Go needs it.
    pub async fn chainsaw(&self) -> Result<PathBuf, ToolchainError> {
        let key = BuildKey::new("chainsaw", CHAINSAW_VERSION);
        let install = self
            .ensure(&key, |go, dir| async move {
                let files = go
                    .download(&dir, recipes::CHAINSAW_MODULE, CHAINSAW_VERSION, false)
                    .await?;
                let text = std::fs::read_to_string(&files.go_mod)
                    .map_err(|e| ToolchainError::io(&files.go_mod, e))?;
                let local = dir.join(recipes::CHAINSAW_SOURCE_DIR);
                copy_dir(&files.dir, &local).map_err(|e| ToolchainError::io(&local, e))?;
                if go.version >= recipes::CHAINSAW_SHIM_FROM {
                    let shim = local.join(recipes::CHAINSAW_SHIM_FILE);
                    std::fs::write(&shim, recipes::CHAINSAW_MODULE_PATH_SHIM)
                        .map_err(|e| ToolchainError::io(&shim, e))?;
                }
                Ok(recipes::chainsaw(CHAINSAW_VERSION, &text))
            })
            .await?;
        Ok(install.binary("chainsaw"))
    }

    /// The CNCF distribution registry (`registry`) at [`REGISTRY_VERSION`], serving the
    /// harness images to real nodes.
    pub async fn registry(&self) -> Result<PathBuf, ToolchainError> {
        let key = BuildKey::new("registry", REGISTRY_VERSION);
        let install = self
            .ensure(&key, |go, dir| async move {
                let upstream = go
                    .module_go_mod(&dir, recipes::REGISTRY_MODULE, REGISTRY_VERSION, false)
                    .await?;
                let text = std::fs::read_to_string(&upstream)
                    .map_err(|e| ToolchainError::io(&upstream, e))?;
                Ok(recipes::registry(REGISTRY_VERSION, &text))
            })
            .await?;
        Ok(install.binary("registry"))
    }

    /// Returns the install for `key`, running `prepare` + the recipe's Go build under the lock
    /// if it is not cached yet.
    pub async fn ensure<F, Fut>(
        &self,
        key: &BuildKey,
        prepare: F,
    ) -> Result<Installed, ToolchainError>
    where
        F: FnOnce(GoEnv, PathBuf) -> Fut,
        Fut: std::future::Future<Output = Result<go::GoRecipe, ToolchainError>>,
    {
        self.ensure_built(key, |staging| async move {
            let go = GoEnv::detect().await?;
            let src = staging.join("src");
            self.build(key, go, &staging, &src, prepare).await
        })
        .await
    }

    /// Returns the install for `key`; if it is not cached, takes the key's lock and runs
    /// `build` on a fresh staging directory (`bin/` receives the binaries), then installs it
    /// atomically. A failed build leaves nothing behind.
    pub async fn ensure_built<F, Fut>(
        &self,
        key: &BuildKey,
        build: F,
    ) -> Result<Installed, ToolchainError>
    where
        F: FnOnce(PathBuf) -> Fut,
        Fut: std::future::Future<Output = Result<cache::Manifest, ToolchainError>>,
    {
        if let Some(i) = self.cache.lookup(key) {
            return Ok(i);
        }
        let lock = self.lock(key).await?;
        if let Some(i) = self.cache.lookup(key) {
            return Ok(i);
        }
        // Dropped before the lock, on every way out: a failed or cancelled build leaves no
        // staging directory.
        let staging = self.cache.staging(key, &lock)?;
        let manifest = build(staging.path().to_path_buf()).await?;
        self.cache.install(&staging, manifest, &lock)
    }

    /// Takes the cache lock of `key` without blocking the runtime, saying so if it waits.
    pub(crate) async fn lock(&self, key: &BuildKey) -> Result<cache::BuildLock, ToolchainError> {
        let cache = self.cache.clone();
        let k = key.clone();
        let progress = self.progress.clone();
        tokio::task::spawn_blocking(move || {
            cache.lock(&k, || {
                progress.line(&format!("waiting for another build of {k} to finish"))
            })
        })
        .await
        .expect("lock task does not panic")
    }

    async fn build<F, Fut>(
        &self,
        key: &BuildKey,
        go: GoEnv,
        staging: &Path,
        src: &Path,
        prepare: F,
    ) -> Result<cache::Manifest, ToolchainError>
    where
        F: FnOnce(GoEnv, PathBuf) -> Fut,
        Fut: std::future::Future<Output = Result<go::GoRecipe, ToolchainError>>,
    {
        let started = Instant::now();
        let task = self.progress.timed(
            &format!("building {key} with Go {}", go.version),
            self.estimate(key).time,
        );
        let recipe = prepare(go.clone(), src.to_path_buf()).await?;
        go.require(recipe.min_go, &key.to_string())?;
        std::fs::write(src.join("go.mod"), &recipe.go_mod)
            .map_err(|e| ToolchainError::io(src, e))?;
        let bin = staging.join("bin");
        let mut compiled = 0usize;
        let mut last_note = Instant::now();
        for step in &recipe.steps {
            let mut cmd = go.command(src);
            if step.output == "install" {
                // `go install pkg@version` ignores the local go.mod by design.
                cmd.env_remove("GOFLAGS")
                    .env("GOFLAGS", "-buildvcs=false")
                    .env("GOBIN", &bin)
                    .args(["install", "-v", "-trimpath", "-ldflags", &recipe.ldflags]);
            } else if step.test {
                cmd.args(["test", "-c", "-trimpath", "-ldflags", &recipe.ldflags, "-o"])
                    .arg(bin.join(&step.output));
            } else {
                cmd.args([
                    "build",
                    "-v",
                    "-trimpath",
                    "-ldflags",
                    &recipe.ldflags,
                    "-o",
                ])
                .arg(bin.join(&step.output));
            }
            if !recipe.nosum.is_empty() {
                // The checksum database does not know these modules' releases (nor some of
                // the dependency versions they pin), so it is not consulted for this build.
                cmd.env("GOSUMDB", "off");
            }
            cmd.args(&step.packages);
            let what = format!("go build of {key} ({})", step.packages.join(" "));
            go::run_streaming(cmd, &what, 40, |line| {
                if !line.starts_with("go: ") {
                    compiled += 1;
                }
                task.set(&format!("{compiled} packages compiled, last {line}"));
                if last_note.elapsed() > Duration::from_secs(30) {
                    last_note = Instant::now();
                    task.note(&format!("{compiled} packages compiled"));
                }
            })
            .await?;
        }
        task.finish(&format!(
            "built {key} in {:.0?}",
            Duration::from_secs(started.elapsed().as_secs())
        ));
        Ok(cache::Manifest {
            key: key.clone(),
            binaries: recipe.outputs.clone(),
            built_with: format!("Go {}", go.version),
            build_seconds: started.elapsed().as_secs(),
        })
    }
}

/// Copies a directory tree (symbolic links as links; files keep their permissions, the
/// directories made are writable).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&src, &dst)?;
        } else if kind.is_symlink() {
            let _ = std::fs::remove_file(&dst);
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// What `binary --help` prints, standard output then standard error (Go's `flag` package
/// writes its usage to standard error, cobra commands theirs to standard output).
pub async fn help_text(binary: &Path) -> std::io::Result<String> {
    let out = tokio::process::Command::new(binary)
        .arg("--help")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await?;
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Of `gates`, the ones `help` (a Kubernetes component's `--help`) lists as off by default
/// (`Name=true|false (ALPHA - default=false)`, `kube:` before it from 1.32): what turning on changes. A gate the version
/// lacks, or has on already (perhaps locked, or about to be removed), is left out.
pub fn off_by_default(
    help: &str,
    gates: &std::collections::BTreeMap<String, bool>,
) -> std::collections::BTreeMap<String, bool> {
    gates
        .iter()
        .filter(|(name, _)| {
            help.lines().any(|l| {
                // 1.32 and later name the gate's component: `kube:Name=true|false`.
                let l = l.trim_start();
                let l = l.strip_prefix("kube:").unwrap_or(l);
                l.starts_with(&format!("{name}=true|false")) && l.contains("default=false")
            })
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn help_text_is_both_streams() {
        let dir = tempfile::tempdir().unwrap();
        let bin = crate::testing::script(
            dir.path(),
            "tool",
            "echo \"usage $1\"\necho '  --flag string' >&2\n",
        );
        assert_eq!(
            help_text(&bin).await.unwrap(),
            "usage --help\n  --flag string\n"
        );
        assert!(help_text(&dir.path().join("absent")).await.is_err());
    }

    /// The `.tmp-*` staging directories under `builds/`.
    fn staging_dirs(cache: &Cache) -> Vec<String> {
        std::fs::read_dir(cache.root().join("builds"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(".tmp-"))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_cancelled_or_failed_build_leaves_no_staging_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let tc = Toolchain::new(Cache::new(tmp.path()), Progress::plain());
        let key = BuildKey::new("tool", "v1");

        // Cancelled: the build's future is dropped while it runs, as when a sibling build
        // joined with it fails first.
        let (started, mut running) = tokio::sync::oneshot::channel();
        let build = tc.ensure_built(&key, |staging| async move {
            assert!(staging.join("bin").is_dir());
            started.send(()).unwrap();
            std::future::pending::<Result<cache::Manifest, ToolchainError>>().await
        });
        tokio::select! {
            _ = build => unreachable!("the build never ends"),
            _ = &mut running => {}
        }
        assert_eq!(staging_dirs(tc.cache()), Vec::<String>::new());

        // Failed.
        let err = tc
            .ensure_built(&key, |staging| async move {
                Err(ToolchainError::io(
                    &staging,
                    std::io::Error::other("the compiler failed"),
                ))
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains(".tmp-tool-v1-"), "{err}");
        assert_eq!(staging_dirs(tc.cache()), Vec::<String>::new());
        assert!(tc.cache().lookup(&key).is_none());
    }
}
