//! Build recipes over the Go toolchain: [`GoRecipe`] describes a build as data, [`GoEnv`]
//! finds and checks the `go` binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{LazyLock, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::ToolchainError;

/// A Go version, e.g. `1.26.8` as `(1, 26, 8)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoVersion(pub u32, pub u32, pub u32);

impl GoVersion {
    /// Parses `go1.26.8`, `1.23.0`, `1.23` or `go1.22rc1` (the pre-release suffix is dropped).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().trim_start_matches("go");
        let mut nums = s.split('.').map(|p| {
            let digits: String = p.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse::<u32>().ok()
        });
        let major = nums.next()??;
        let minor = nums.next().flatten().unwrap_or(0);
        let patch = nums.next().flatten().unwrap_or(0);
        Some(Self(major, minor, patch))
    }
}

impl std::fmt::Display for GoVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The `go` binary to build with and its version.
#[derive(Debug, Clone)]
pub struct GoEnv {
    /// Path or name of the `go` binary (`HARNESS_GO`, else `go` on `PATH`).
    pub go: PathBuf,
    /// Its version.
    pub version: GoVersion,
}

impl GoEnv {
    /// Finds `go` (`HARNESS_GO` overrides the one on `PATH`) and reads its version.
    pub async fn detect() -> Result<Self, ToolchainError> {
        let go = std::env::var_os("HARNESS_GO")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("go"));
        let out = Command::new(&go)
            .args(["env", "GOVERSION"])
            .env("GOTOOLCHAIN", "local")
            .output()
            .await
            .map_err(|source| ToolchainError::GoMissing {
                go: go.clone(),
                source,
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = GoVersion::parse(&text).ok_or_else(|| ToolchainError::GoUnreadable {
            go: go.clone(),
            output: format!("{}{}", text, String::from_utf8_lossy(&out.stderr)),
        })?;
        Ok(Self { go, version })
    }

    /// Fails with [`ToolchainError::GoTooOld`] unless this Go is at least `needed`.
    pub fn require(&self, needed: GoVersion, what: &str) -> Result<(), ToolchainError> {
        if self.version < needed {
            return Err(ToolchainError::GoTooOld {
                found: self.version,
                needed,
                what: what.to_string(),
            });
        }
        Ok(())
    }

    /// A `go` command with the environment every build uses: no automatic toolchain
    /// download, modules on, no VCS stamping, cgo off (static binaries).
    pub fn command(&self, dir: &Path) -> Command {
        let mut cmd = Command::new(&self.go);
        cmd.current_dir(dir)
            .env("GOTOOLCHAIN", "local")
            .env("GO111MODULE", "on")
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=mod -buildvcs=false")
            .kill_on_drop(true)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `go mod download -json <module>@<version>` and returns the path of its `go.mod`.
    pub async fn module_go_mod(
        &self,
        dir: &Path,
        module: &str,
        version: &str,
        nosum: bool,
    ) -> Result<PathBuf, ToolchainError> {
        Ok(self.download(dir, module, version, nosum).await?.go_mod)
    }

    /// The versions of `module` the Go module proxy lists (`go list -m -versions`), in semver
    /// order; pseudo-versions are not listed.
    pub async fn module_versions(
        &self,
        dir: &Path,
        module: &str,
    ) -> Result<Vec<String>, ToolchainError> {
        let out = self
            .command(dir)
            .args(["list", "-m", "-versions", module])
            .output()
            .await
            .map_err(|source| ToolchainError::Spawn {
                what: "go list -m -versions".into(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut words = stdout.split_whitespace();
        if !out.status.success() || words.next() != Some(module) {
            return Err(ToolchainError::ModuleVersions {
                module: module.into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(words.map(String::from).collect())
    }

    /// Whether the Go module proxy serves `module@version` (`go list -m -json`, which reads
    /// only its `.info`): `Ok(None)` when it does, `Ok(Some(why))` when the go command says it
    /// does not (an unknown or refused version), an error when the command could not start.
    pub async fn module_version_info(
        &self,
        dir: &Path,
        module: &str,
        version: &str,
    ) -> Result<Option<String>, ToolchainError> {
        let out = self
            .command(dir)
            .args(["list", "-m", "-json", &format!("{module}@{version}")])
            .output()
            .await
            .map_err(|source| ToolchainError::Spawn {
                what: "go list -m -json".into(),
                source,
            })?;
        Ok(
            (!out.status.success())
                .then(|| String::from_utf8_lossy(&out.stderr).trim().to_string()),
        )
    }

    /// Downloads `module@version` into the module cache and says where its files are. A
    /// module version's files never change, so a process asks `go` once for each and answers
    /// again from memory while its `go.mod` is still there (one upstream cell reads seven files
    /// of the release module).
    pub async fn download(
        &self,
        dir: &Path,
        module: &str,
        version: &str,
        nosum: bool,
    ) -> Result<ModuleFiles, ToolchainError> {
        let key = (self.go.clone(), module.to_string(), version.to_string());
        let known = DOWNLOADED.lock().expect("poisoned").get(&key).cloned();
        if let Some(files) = known.filter(|f| f.go_mod.exists()) {
            return Ok(files);
        }
        let files = self.go_mod_download(dir, module, version, nosum).await?;
        DOWNLOADED
            .lock()
            .expect("poisoned")
            .insert(key, files.clone());
        Ok(files)
    }

    async fn go_mod_download(
        &self,
        dir: &Path,
        module: &str,
        version: &str,
        nosum: bool,
    ) -> Result<ModuleFiles, ToolchainError> {
        let mut cmd = self.command(dir);
        cmd.args(["mod", "download", "-json", &format!("{module}@{version}")]);
        if nosum {
            cmd.env("GOSUMDB", "off");
        }
        let out = cmd.output().await.map_err(|source| ToolchainError::Spawn {
            what: "go mod download".into(),
            source,
        })?;
        let parsed: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        let unavailable = |detail: String| ToolchainError::ModuleUnavailable {
            module: format!("{module}@{version}"),
            detail,
        };
        if let Some(err) = parsed.get("Error").and_then(|e| e.as_str()) {
            return Err(unavailable(err.to_string()));
        }
        let field = |k: &str| parsed.get(k).and_then(|e| e.as_str()).map(PathBuf::from);
        match (field("GoMod"), field("Dir")) {
            (Some(go_mod), Some(dir)) => Ok(ModuleFiles { go_mod, dir }),
            _ => Err(unavailable(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            )),
        }
    }
}

/// The modules this process has downloaded, by `go` binary, module and version.
type Downloads = HashMap<(PathBuf, String, String), ModuleFiles>;
static DOWNLOADED: LazyLock<Mutex<Downloads>> = LazyLock::new(Default::default);

/// Where a downloaded module's files are.
#[derive(Debug, Clone)]
pub struct ModuleFiles {
    /// Its `go.mod`.
    pub go_mod: PathBuf,
    /// Its extracted source tree (read-only).
    pub dir: PathBuf,
}

/// One `go build` invocation of a recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoBuildStep {
    /// Import paths to build.
    pub packages: Vec<String>,
    /// `-o` argument: a directory (ending in `/`) or a file name, relative to the output dir.
    pub output: String,
    /// A test binary (`go test -c`) of the one package, rather than `go build`.
    pub test: bool,
}

/// A build described as data: the generated `go.mod`, the `go build` steps and ldflags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoRecipe {
    /// Contents of the generated `go.mod`.
    pub go_mod: String,
    /// `go build` invocations, in order.
    pub steps: Vec<GoBuildStep>,
    /// `-ldflags` value.
    pub ldflags: String,
    /// The binaries the build must leave in the output dir.
    pub outputs: Vec<String>,
    /// Modules whose checksums are not in the public checksum database.
    pub nosum: Vec<String>,
    /// The Go version the module requires.
    pub min_go: GoVersion,
}

/// Reads the `go` directive of a `go.mod`.
pub fn go_directive(go_mod: &str) -> Option<GoVersion> {
    go_mod
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("go "))
        .and_then(GoVersion::parse)
}

/// Streams a command's combined progress: calls `on_line` for each stderr line and returns the
/// last `keep` lines with the exit status.
pub async fn run_streaming(
    mut cmd: Command,
    what: &str,
    keep: usize,
    mut on_line: impl FnMut(&str),
) -> Result<(), ToolchainError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| ToolchainError::Spawn {
        what: what.to_string(),
        source,
    })?;
    let stderr = child.stderr.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stderr).lines();
    let mut tail: std::collections::VecDeque<String> = Default::default();
    let out_task = tokio::spawn(async move {
        let mut s = String::new();
        let mut r = BufReader::new(stdout);
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut r, &mut s).await;
        s
    });
    while let Ok(Some(line)) = lines.next_line().await {
        on_line(&line);
        if tail.len() == keep {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    let status = child.wait().await.map_err(|source| ToolchainError::Spawn {
        what: what.to_string(),
        source,
    })?;
    let stdout = out_task.await.unwrap_or_default();
    if !status.success() {
        let mut log: Vec<String> = tail.into_iter().collect();
        log.extend(stdout.lines().rev().take(5).map(str::to_string));
        return Err(ToolchainError::BuildFailed {
            what: what.to_string(),
            status: status.to_string(),
            tail: log.join("\n"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_module_version_is_downloaded_once_a_process() {
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls");
        let module = dir.path().join("mod");
        std::fs::create_dir(&module).unwrap();
        std::fs::write(module.join("go.mod"), "module example.com/m\n").unwrap();
        // A `go` that counts its calls and answers as `go mod download -json` does.
        let go = crate::testing::script(
            dir.path(),
            "go",
            &format!(
                "echo x >> {calls}\nprintf '{{\"Dir\":\"{m}\",\"GoMod\":\"{m}/go.mod\"}}'\n",
                calls = calls.display(),
                m = module.display()
            ),
        );
        let env = GoEnv {
            go,
            version: GoVersion(1, 26, 0),
        };
        let count = || std::fs::read_to_string(&calls).unwrap().lines().count();
        for _ in 0..3 {
            let files = env
                .download(dir.path(), "example.com/m", "v1.0.0", true)
                .await
                .unwrap();
            assert_eq!(files.go_mod, module.join("go.mod"));
        }
        assert_eq!(
            count(),
            1,
            "go was asked again for a module version it gave"
        );
        env.download(dir.path(), "example.com/m", "v1.0.1", true)
            .await
            .unwrap();
        assert_eq!(count(), 2, "another version is another download");
        // A module cache cleaned in the meantime: go is asked again.
        std::fs::remove_file(module.join("go.mod")).unwrap();
        let _ = env
            .download(dir.path(), "example.com/m", "v1.0.0", true)
            .await;
        assert_eq!(count(), 3);
    }

    #[tokio::test]
    async fn module_versions_are_listed_or_the_failure_said() {
        let dir = tempfile::tempdir().unwrap();
        let env = |body: &str, name: &str| GoEnv {
            go: crate::testing::script(dir.path(), name, body),
            version: GoVersion(1, 26, 0),
        };
        let listing = env(
            "echo 'example.com/m v1.0.0 v1.1.0-rc.1 v1.1.0'\n",
            "go-list",
        );
        assert_eq!(
            listing
                .module_versions(dir.path(), "example.com/m")
                .await
                .unwrap(),
            ["v1.0.0", "v1.1.0-rc.1", "v1.1.0"]
        );
        let refused = env(
            "echo 'reading the list: 403 Forbidden' >&2\nexit 1\n",
            "go-403",
        );
        let err = refused
            .module_versions(dir.path(), "example.com/m")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("versions of example.com/m") && err.contains("403 Forbidden"),
            "{err}"
        );
    }

    #[test]
    fn parses_go_versions() {
        assert_eq!(GoVersion::parse("go1.26.8\n"), Some(GoVersion(1, 26, 8)));
        assert_eq!(GoVersion::parse("1.23.0"), Some(GoVersion(1, 23, 0)));
        assert_eq!(GoVersion::parse("1.22"), Some(GoVersion(1, 22, 0)));
        assert_eq!(GoVersion::parse("go1.22rc1"), Some(GoVersion(1, 22, 0)));
        assert_eq!(GoVersion::parse("devel"), None);
        assert!(GoVersion(1, 26, 8) > GoVersion(1, 23, 0));
    }

    #[test]
    fn reads_the_go_directive() {
        let m = "module x\n\ngo 1.23.0\n\ntoolchain go1.23.4\n";
        assert_eq!(go_directive(m), Some(GoVersion(1, 23, 0)));
    }
}
