//! The container images real nodes run, built here because no registry is reachable. Start
//! with [`Toolchain::images`]: it returns every image of [`HARNESS_IMAGES`] as a
//! [`BuiltImage`] (an OCI image layout in the cache), building what is not cached yet.
//!
//! - `harness.local/pause:3.10`, the sandbox image: a static Go program that sleeps, reaps
//!   zombies and exits on SIGTERM/SIGINT ([`PAUSE_GO`]).
//! - `harness.local/busybox:v1` and `:v2`: Debian's static busybox with its applet links and a
//!   default command that sleeps until SIGTERM; they differ in `/etc/harness-image` and
//!   `HARNESS_IMAGE_VERSION`, so they have different digests.
//! - `harness.local/health:v1`: a static Go HTTP server for probe tests ([`HEALTH_GO`]).
//!
//! What goes into each image is a pure [`ImageRecipe`] ([`pause`], [`busybox`], [`health`]);
//! the OCI format itself is in [`super::oci`]. Images are cached under a key that hashes every
//! input, so a changed binary or recipe gives a new image and an unchanged one is never
//! rebuilt. [`write_oci_archive`] packs an image for `ctr images import`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::cache::{BuildKey, Installed, Manifest};
use super::host::BUSYBOX_STATIC;
use super::oci::{self, Descriptor, Entry, ImageConfig};
use super::{Toolchain, ToolchainError, recipes};

/// The registry host of every harness image.
pub const IMAGE_HOST: &str = "harness.local";
/// The sandbox (pod infra) image.
pub const PAUSE_IMAGE: &str = "harness.local/pause:3.10";
/// A long-running busybox image.
pub const BUSYBOX_V1_IMAGE: &str = "harness.local/busybox:v1";
/// The same busybox image with a different digest (for image updates).
pub const BUSYBOX_V2_IMAGE: &str = "harness.local/busybox:v2";
/// The HTTP server for probe tests.
pub const HEALTH_IMAGE: &str = "harness.local/health:v1";
/// Every image the harness builds, in the order [`Toolchain::images`] returns them.
pub const HARNESS_IMAGES: &[&str] = &[
    PAUSE_IMAGE,
    BUSYBOX_V1_IMAGE,
    BUSYBOX_V2_IMAGE,
    HEALTH_IMAGE,
];

/// Source of the sandbox image's program.
pub const PAUSE_GO: &str = include_str!("images/pause.go");
/// Source of the health image's program.
pub const HEALTH_GO: &str = include_str!("images/health.go");

/// The busybox applets linked in `/bin` of the busybox images.
pub const BUSYBOX_APPLETS: &[&str] = &[
    "[",
    "ash",
    "awk",
    "base64",
    "basename",
    "cat",
    "chmod",
    "cp",
    "cut",
    "date",
    "dd",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "env",
    "expr",
    "false",
    "find",
    "free",
    "grep",
    "gunzip",
    "gzip",
    "head",
    "hostname",
    "httpd",
    "id",
    "ifconfig",
    "ip",
    "kill",
    "killall",
    "less",
    "ln",
    "ls",
    "md5sum",
    "mkdir",
    "mktemp",
    "more",
    "mount",
    "mv",
    "nc",
    "netstat",
    "nproc",
    "nslookup",
    "pidof",
    "ping",
    "printf",
    "ps",
    "pwd",
    "readlink",
    "realpath",
    "rm",
    "rmdir",
    "sed",
    "seq",
    "sh",
    "sha256sum",
    "sleep",
    "sort",
    "stat",
    "sync",
    "tail",
    "tar",
    "tee",
    "test",
    "timeout",
    "top",
    "touch",
    "tr",
    "true",
    "umount",
    "uname",
    "uniq",
    "vi",
    "watch",
    "wc",
    "wget",
    "which",
    "whoami",
    "xargs",
    "yes",
];

/// Bumped whenever the way recipes become images changes, so cached images are rebuilt.
const FORMAT: &str = "1";

/// `host/repo:tag`, split.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageName {
    /// Registry host (`harness.local`).
    pub host: String,
    /// Repository inside the registry (`busybox`).
    pub repo: String,
    /// Tag (`v1`).
    pub tag: String,
}

impl ImageName {
    /// Parses `host/repo:tag` (the repository may contain slashes; the tag is required).
    pub fn parse(s: &str) -> Option<Self> {
        let (host, rest) = s.split_once('/')?;
        let (repo, tag) = rest.rsplit_once(':')?;
        (!host.is_empty() && !repo.is_empty() && !tag.is_empty() && !tag.contains('/')).then(|| {
            Self {
                host: host.into(),
                repo: repo.into(),
                tag: tag.into(),
            }
        })
    }

    fn known(s: &str) -> Self {
        Self::parse(s).expect("the harness's own image names parse")
    }
}

impl std::fmt::Display for ImageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.host, self.repo, self.tag)
    }
}

/// What goes into one image: its name, what it runs and its files (one layer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecipe {
    /// The image's name.
    pub name: ImageName,
    /// Env, entrypoint and command.
    pub config: ImageConfig,
    /// The files of its only layer.
    pub entries: Vec<Entry>,
}

impl ImageRecipe {
    /// The cache key: `image-<repo>` at `<tag>-<hash of every input>`.
    pub fn key(&self) -> BuildKey {
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        h.update(FORMAT.as_bytes());
        h.update(self.name.to_string().as_bytes());
        h.update(&serde_json::to_vec(&self.config).expect("config serializes"));
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        entries.sort_by(|a, b| a.path().cmp(b.path()));
        for e in entries {
            e.fingerprint(&mut h);
        }
        let hex: String = h.finish().as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        BuildKey::new(
            format!("image-{}", self.name.repo),
            format!("{}-{hex}", self.name.tag),
        )
    }
}

fn dir(path: &str, mode: u32) -> Entry {
    Entry::Dir {
        path: path.into(),
        mode,
    }
}

fn file(path: &str, mode: u32, data: impl Into<Vec<u8>>) -> Entry {
    Entry::File {
        path: path.into(),
        mode,
        data: data.into(),
    }
}

/// The sandbox image around the static `pause` program.
pub fn pause(program: Vec<u8>) -> ImageRecipe {
    ImageRecipe {
        name: ImageName::known(PAUSE_IMAGE),
        config: ImageConfig {
            env: vec!["PATH=/".into()],
            entrypoint: vec!["/pause".into()],
            ..ImageConfig::default()
        },
        entries: vec![file("/pause", 0o755, program)],
    }
}

/// The default command of the busybox images: sleep until SIGTERM or SIGINT (as PID 1 a shell
/// without a trap would ignore them), then exit 0.
pub const BUSYBOX_COMMAND: &str =
    "trap 'exit 0' TERM INT; while true; do sleep 3600 & wait $!; done";

/// A busybox image around the static `busybox` binary; `version` (`v1`, `v2`) is its tag and
/// what `/etc/harness-image` and `HARNESS_IMAGE_VERSION` say.
pub fn busybox(binary: Vec<u8>, version: &str) -> ImageRecipe {
    let mut entries = vec![
        dir("/bin", 0o755),
        dir("/dev", 0o755),
        dir("/etc", 0o755),
        dir("/proc", 0o755),
        dir("/root", 0o700),
        dir("/sys", 0o755),
        dir("/tmp", 0o1777),
        dir("/var", 0o755),
        file("/bin/busybox", 0o755, binary),
        file(
            "/etc/passwd",
            0o644,
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        ),
        file("/etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n"),
        file("/etc/harness-image", 0o644, format!("{version}\n")),
    ];
    entries.extend(BUSYBOX_APPLETS.iter().map(|a| Entry::Symlink {
        path: format!("/bin/{a}"),
        target: "busybox".into(),
    }));
    ImageRecipe {
        name: ImageName {
            host: IMAGE_HOST.into(),
            repo: "busybox".into(),
            tag: version.into(),
        },
        config: ImageConfig {
            env: vec![
                "PATH=/bin".into(),
                format!("HARNESS_IMAGE_VERSION={version}"),
            ],
            cmd: vec!["sh".into(), "-c".into(), BUSYBOX_COMMAND.into()],
            working_dir: "/".into(),
            ..ImageConfig::default()
        },
        entries,
    }
}

/// The probe-test image around the static `health` program.
pub fn health(program: Vec<u8>) -> ImageRecipe {
    let name = ImageName::known(HEALTH_IMAGE);
    ImageRecipe {
        config: ImageConfig {
            env: vec![
                "PATH=/".into(),
                format!("HARNESS_IMAGE_VERSION={}", name.tag),
            ],
            entrypoint: vec!["/health".into()],
            ..ImageConfig::default()
        },
        name,
        entries: vec![dir("/tmp", 0o1777), file("/health", 0o755, program)],
    }
}

/// Whether `elf` is an ELF executable without a program interpreter (statically linked).
pub fn is_static_elf(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    // 64-bit little-endian ELF only (the images are linux/amd64).
    if elf.get(0..6) != Some(b"\x7fELF\x02\x01") {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    (0..phnum as usize).all(|i| {
        let at = phoff as usize + i * phentsize as usize;
        u32_at(at).is_some_and(|t| t != PT_INTERP)
    })
}

/// An image reference as a registry mirror is asked for it: the repository path without the
/// host, and the tag. Short names get what container runtimes give them: `busybox:1.32` is
/// `library/busybox:1.32` (of the default host), `openkruise/x` is `openkruise/x:latest`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// The reference as written (`nginx:1.14.2`).
    pub given: String,
    /// The repository path inside its registry (`library/nginx`).
    pub path: String,
    /// The tag (`1.14.2`).
    pub tag: String,
}

impl Reference {
    /// Parses a reference by tag; `None` for one by digest (a stand-in cannot have the digest
    /// it names) or one that is not a reference.
    pub fn parse(given: &str) -> Option<Self> {
        if given.contains('@') || given.is_empty() || given.contains(char::is_whitespace) {
            return None;
        }
        let slash = given.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match given[slash..].rfind(':') {
            Some(i) => (&given[..slash + i], &given[slash + i + 1..]),
            None => (given, "latest"),
        };
        let (first, rest) = match name.split_once('/') {
            Some((f, r)) => (f, Some(r)),
            None => (name, None),
        };
        // The first component is a host when it has a dot or a port, or is `localhost`.
        let is_host = first.contains('.') || first.contains(':') || first == "localhost";
        let path = match (is_host, rest) {
            (true, Some(r)) => r.to_string(),
            (true, None) => return None,
            (false, Some(_)) => name.to_string(),
            (false, None) => format!("library/{name}"),
        };
        let valid = |s: &str, extra: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(c))
        };
        (valid(&path, "._-/")
            && tag.len() <= 128
            && !tag.is_empty()
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        .then(|| Self {
            given: given.to_string(),
            path,
            tag: tag.to_string(),
        })
    }

    /// The reference with its host and tag spelled out, as a container runtime stores and a
    /// kubelet reports it (`nginx:1.25` is `docker.io/library/nginx:1.25`).
    pub fn qualified(&self) -> String {
        let first = self.given.split('/').next().unwrap_or_default();
        let has_host = self.given.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        let host = if has_host { first } else { "docker.io" };
        format!("{host}/{}:{}", self.path, self.tag)
    }
}

/// Upstream images whose stand-in must do something else than serve: the last path component
/// and the command. `exit` images are what a sidecar is switched to so that it exits; busybox
/// images run `sh`, as busybox's own do, which ends at once without a terminal (specs switch a
/// container to busybox to make it crash).
pub const STAND_IN_COMMANDS: &[(&str, &[&str])] = &[("exit", &["true"]), ("busybox", &["sh"])];

/// `/bin/bash` of a stand-in: busybox's shell (`read -p`, `-c`, ...) under bash's name.
pub const STAND_IN_BASH: &str = "#!/bin/sh\nexec /bin/sh \"$@\"\n";

/// A stand-in for an image the harness cannot fetch (real nodes pull only from the cluster's
/// registry): busybox's applets (`sh`, `sleep`, `ls`, ...), its shell as `/bin/bash`, and the
/// `health` program, which by
/// default serves HTTP on port 80 until SIGTERM, as a web server or a long-running service
/// would: `/healthz`, `/readyz`, and the files of nginx's document root as nginx serves them
/// (`/usr/share/nginx/html/index.html`, which specs move away to fail a probe: then 404, as on
/// nginx, not a redirect to a listing that a probe would take for ready); when another
/// container of the pod has the port, it runs without serving. Its config names
/// the reference (`HARNESS_STAND_IN`), so each reference has its own digest, as different
/// upstream images do, while all share one layer.
pub fn stand_in(reference: &Reference, busybox_binary: Vec<u8>, health: Vec<u8>) -> ImageRecipe {
    let mut recipe = busybox(busybox_binary, "stand-in");
    recipe.entries.push(file("/bin/health", 0o755, health));
    // Specs run `/bin/bash -c ...` in images that have bash; busybox's shell stands in.
    recipe.entries.push(file("/bin/bash", 0o755, STAND_IN_BASH));
    for d in ["/usr", "/usr/share", "/usr/share/nginx", STAND_IN_DOCROOT] {
        recipe.entries.push(dir(d, 0o755));
    }
    recipe.entries.push(file(
        &format!("{STAND_IN_DOCROOT}/index.html"),
        0o644,
        "stand-in\n",
    ));
    let last = reference.path.rsplit('/').next().unwrap_or_default();
    let command = STAND_IN_COMMANDS
        .iter()
        .find(|(name, _)| *name == last)
        .map_or_else(
            || vec!["/bin/health".to_string()],
            |(_, c)| c.iter().map(|s| s.to_string()).collect(),
        );
    recipe.name = ImageName {
        host: STAND_IN_HOST.into(),
        repo: reference.path.clone(),
        tag: reference.tag.clone(),
    };
    recipe.config = ImageConfig {
        env: vec![
            "PATH=/bin".into(),
            "PORT=80".into(),
            format!("DOCROOT={STAND_IN_DOCROOT}"),
            "SERVE_OPTIONAL=1".into(),
            format!("HARNESS_STAND_IN={}", reference.given),
        ],
        cmd: command,
        working_dir: "/".into(),
        ..ImageConfig::default()
    };
    recipe
}

/// A stand-in's web root: nginx's.
pub const STAND_IN_DOCROOT: &str = "/usr/share/nginx/html";

/// The host in a stand-in's [`ImageName`]: a registry mirror serves every host by path, so the
/// stand-in is pushed by path and tag only.
pub const STAND_IN_HOST: &str = "stand-in";

/// An image in the cache, as an OCI image layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltImage {
    /// Its name (`harness.local/busybox:v1`).
    pub name: ImageName,
    /// Its layout directory, manifest, config and layers.
    pub layout: oci::Layout,
}

impl BuiltImage {
    /// The manifest digest (what a registry and containerd call the image's digest).
    pub fn digest(&self) -> &str {
        &self.layout.manifest.digest
    }

    /// The config and layer descriptors (the blobs a push uploads before the manifest).
    pub fn blobs(&self) -> Vec<&Descriptor> {
        std::iter::once(&self.layout.config)
            .chain(&self.layout.layers)
            .collect()
    }

    /// Where a blob of this image lives.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        self.layout.blob_path(digest)
    }

    /// Reads a blob.
    pub fn read_blob(&self, digest: &str) -> Result<Vec<u8>, ToolchainError> {
        let path = self.blob_path(digest);
        std::fs::read(&path).map_err(|e| ToolchainError::io(&path, e))
    }

    fn open(name: ImageName, install: &Installed) -> Result<Self, ToolchainError> {
        let layout =
            oci::read_layout(&install.dir).map_err(|e| ToolchainError::io(&install.dir, e))?;
        Ok(Self { name, layout })
    }
}

/// Writes `image` as an OCI archive at `path` (`oci-layout`, `index.json`, `blobs/sha256/…`),
/// the file `ctr images import` reads; the image is named by its `io.containerd.image.name`
/// annotation.
pub fn write_oci_archive(image: &BuiltImage, path: &Path) -> Result<(), ToolchainError> {
    oci::archive(&image.layout.dir, path).map_err(|e| ToolchainError::io(path, e))
}

/// The cache key of the image programs: their sources' hash.
pub(super) fn programs_key() -> BuildKey {
    let recipe = recipes::image_programs();
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [recipe.go_mod.as_str(), PAUSE_GO, HEALTH_GO, &recipe.ldflags] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let hex: String = h.finish().as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    BuildKey::new("image-programs", format!("src-{hex}"))
}

impl Toolchain {
    /// Every image of [`HARNESS_IMAGES`], in that order: built on first use (the Go programs
    /// with the Go toolchain, busybox from Debian's `busybox-static`, installed with apt-get
    /// when the harness runs as root) and cached.
    pub async fn images(&self) -> Result<Vec<BuiltImage>, ToolchainError> {
        let [pause_program, busybox_binary, health_program] = self.image_inputs().await?;
        let recipes = [
            pause(pause_program),
            busybox(busybox_binary.clone(), "v1"),
            busybox(busybox_binary, "v2"),
            health(health_program),
        ];
        let mut out = Vec::with_capacity(recipes.len());
        for r in recipes {
            out.push(self.image(r).await?);
        }
        Ok(out)
    }

    /// What the images are made of: the `pause` program, the static busybox and the `health`
    /// program, built or found.
    async fn image_inputs(&self) -> Result<[Vec<u8>; 3], ToolchainError> {
        let programs = self.image_programs().await?;
        let read = |p: PathBuf| std::fs::read(&p).map_err(|e| ToolchainError::io(&p, e));
        Ok([
            read(programs.binary("pause"))?,
            read(self.static_busybox().await?)?,
            read(programs.binary("health"))?,
        ])
    }

    /// A [`stand_in`] for each of `references`, from the cache or built into it.
    pub async fn stand_ins(
        &self,
        references: &[Reference],
    ) -> Result<Vec<BuiltImage>, ToolchainError> {
        let [_, busybox_binary, health] = self.image_inputs().await?;
        let mut out = Vec::with_capacity(references.len());
        for r in references {
            out.push(
                self.image(stand_in(r, busybox_binary.clone(), health.clone()))
                    .await?,
            );
        }
        Ok(out)
    }

    /// The image `recipe` describes, from the cache or built into it.
    pub async fn image(&self, recipe: ImageRecipe) -> Result<BuiltImage, ToolchainError> {
        let key = recipe.key();
        let name = recipe.name.clone();
        let name_out = name.clone();
        let install = self
            .ensure_built(&key, |staging| async move {
                let started = Instant::now();
                let out = staging.join("bin");
                let image = oci::Image::build(&recipe.config, &recipe.entries)
                    .map_err(|e| ToolchainError::io(&out, e))?;
                let files = oci::write_layout(&out, &image, &name.to_string(), &name.tag)
                    .map_err(|e| ToolchainError::io(&out, e))?;
                Ok(Manifest {
                    key: recipe.key(),
                    binaries: files,
                    built_with: format!("harness {}", env!("CARGO_PKG_VERSION")),
                    build_seconds: started.elapsed().as_secs(),
                })
            })
            .await?;
        BuiltImage::open(name_out, &install)
    }

    /// The static `pause` and `health` programs ([`PAUSE_GO`], [`HEALTH_GO`]), built with Go
    /// (cgo off) on first use.
    pub async fn image_programs(&self) -> Result<Installed, ToolchainError> {
        self.ensure(&programs_key(), |_go, src| async move {
            for (dir, source) in [("pause", PAUSE_GO), ("health", HEALTH_GO)] {
                let d = src.join(dir);
                std::fs::create_dir_all(&d).map_err(|e| ToolchainError::io(&d, e))?;
                let f = d.join("main.go");
                std::fs::write(&f, source).map_err(|e| ToolchainError::io(&f, e))?;
            }
            Ok(recipes::image_programs())
        })
        .await
    }

    /// Debian's static busybox (package `busybox-static`), installed when missing and the
    /// harness runs as root; a dynamically linked busybox is refused.
    pub async fn static_busybox(&self) -> Result<PathBuf, ToolchainError> {
        let path = self.debian_binary(BUSYBOX_STATIC).await?;
        let bytes = std::fs::read(&path).map_err(|e| ToolchainError::io(&path, e))?;
        if !is_static_elf(&bytes) {
            return Err(ToolchainError::ToolMissing {
                tool: "a statically linked busybox (Debian package `busybox-static`)".into(),
                fix: format!(
                    "`{}` is dynamically linked, so it cannot run alone in an image; install \
                     Debian's `busybox-static` package, which replaces it (`apt-get install -y \
                     busybox-static`)",
                    path.display()
                ),
            });
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_busybox() -> Vec<u8> {
        b"\x7fELF\x02\x01busybox".to_vec()
    }

    fn build(r: &ImageRecipe) -> oci::Image {
        oci::Image::build(&r.config, &r.entries).unwrap()
    }

    #[test]
    fn references_become_the_path_and_tag_a_mirror_is_asked_for() {
        let r = |s: &str| Reference::parse(s).map(|r| (r.path, r.tag));
        let pt = |p: &str, t: &str| Some((p.to_string(), t.to_string()));
        assert_eq!(r("busybox:1.32"), pt("library/busybox", "1.32"));
        assert_eq!(r("busybox"), pt("library/busybox", "latest"));
        assert_eq!(
            r("openkruise/hotupgrade-sample:empty"),
            pt("openkruise/hotupgrade-sample", "empty")
        );
        assert_eq!(r("example.com/e2e/nginx:1.14-4"), pt("e2e/nginx", "1.14-4"));
        assert_eq!(r("localhost:5000/a/b"), pt("a/b", "latest"));
        assert_eq!(r("harness.local/busybox:v1"), pt("busybox", "v1"));
        // By digest, host only, upper case, spaces: not something to stand in for.
        for bad in [
            "busybox@sha256:00",
            "example.com",
            "Busybox:1",
            "a b:1",
            "",
            "x:",
        ] {
            assert_eq!(Reference::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_reference_is_qualified_as_a_runtime_reports_it() {
        let q = |s: &str| Reference::parse(s).unwrap().qualified();
        assert_eq!(q("nginx:1.25"), "docker.io/library/nginx:1.25");
        assert_eq!(
            q("docker.io/library/nginx:1.25"),
            "docker.io/library/nginx:1.25"
        );
        assert_eq!(q("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(
            q("openkruise/kruise-manager:v1.9.0"),
            "docker.io/openkruise/kruise-manager:v1.9.0"
        );
        assert_eq!(q("harness.local/busybox:v1"), "harness.local/busybox:v1");
        assert_eq!(q("localhost:5000/a/b"), "localhost:5000/a/b:latest");
    }

    #[test]
    fn a_stand_in_serves_nginx_s_web_root_on_port_80_and_has_its_own_digest() {
        let reference = Reference::parse("nginx:1.14.2").unwrap();
        let nginx = stand_in(&reference, fake_busybox(), b"health".to_vec());
        assert_eq!(nginx.name.repo, "library/nginx");
        assert_eq!(nginx.name.tag, "1.14.2");
        assert_eq!(nginx.config.cmd, ["/bin/health"]);
        for e in [
            "PORT=80",
            "DOCROOT=/usr/share/nginx/html",
            "HARNESS_STAND_IN=nginx:1.14.2",
        ] {
            assert!(nginx.config.env.iter().any(|x| x == e), "{e}");
        }
        for p in [
            "/bin/sh",
            "/bin/sleep",
            "/bin/bash",
            "/bin/health",
            "/usr/share/nginx/html/index.html",
        ] {
            assert!(nginx.entries.iter().any(|x| x.path() == p), "{p}");
        }
        assert!(STAND_IN_BASH.starts_with("#!/bin/sh\n") && STAND_IN_BASH.contains("\"$@\""));
        let newer = stand_in(
            &Reference::parse("nginx:1.15.1").unwrap(),
            fake_busybox(),
            b"health".to_vec(),
        );
        assert_ne!(build(&nginx).manifest.digest, build(&newer).manifest.digest);
        // An image a sidecar is switched to so that it exits does exit.
        let exit = stand_in(
            &Reference::parse("someone/exit:v1.0").unwrap(),
            fake_busybox(),
            vec![],
        );
        assert_eq!(exit.config.cmd, ["true"]);
        let busybox = stand_in(
            &Reference::parse("e2e-test-images/busybox:1.36.1-1").unwrap(),
            fake_busybox(),
            vec![],
        );
        assert_eq!(busybox.config.cmd, ["sh"]);
    }

    #[test]
    fn image_names_split_into_host_repo_and_tag() {
        let n = ImageName::parse(BUSYBOX_V1_IMAGE).unwrap();
        assert_eq!(
            (n.host.as_str(), n.repo.as_str()),
            ("harness.local", "busybox")
        );
        assert_eq!(n.tag, "v1");
        assert_eq!(n.to_string(), BUSYBOX_V1_IMAGE);
        assert_eq!(
            ImageName::parse("127.0.0.1:5000/a/b:c").unwrap().repo,
            "a/b"
        );
        assert_eq!(ImageName::parse("busybox"), None);
        assert_eq!(ImageName::parse("harness.local/busybox"), None);
        for name in HARNESS_IMAGES {
            assert_eq!(ImageName::parse(name).unwrap().host, IMAGE_HOST);
        }
    }

    #[test]
    fn busybox_v1_and_v2_differ_in_digest_and_in_a_visible_file() {
        let v1 = busybox(fake_busybox(), "v1");
        let v2 = busybox(fake_busybox(), "v2");
        assert_ne!(build(&v1).manifest.digest, build(&v2).manifest.digest);
        assert_ne!(v1.key(), v2.key());
        assert!(
            v2.config
                .env
                .contains(&"HARNESS_IMAGE_VERSION=v2".to_string())
        );
        assert!(
            v2.entries
                .contains(&file("/etc/harness-image", 0o644, "v2\n"))
        );
    }

    #[test]
    fn two_builds_of_a_recipe_give_the_same_digests_and_key() {
        let a = busybox(fake_busybox(), "v1");
        let b = busybox(fake_busybox(), "v1");
        assert_eq!(build(&a), build(&b));
        assert_eq!(a.key(), b.key());
        let mut changed = fake_busybox();
        changed.push(0);
        assert_ne!(busybox(changed, "v1").key(), a.key());
    }

    #[test]
    fn the_busybox_layer_links_every_applet_to_busybox() {
        let img = build(&busybox(fake_busybox(), "v1"));
        let gz = &img.blobs[&img.layers[0].digest];
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&gz[..]));
        let mut links = std::collections::BTreeMap::new();
        let mut files = vec![];
        for e in tar.entries().unwrap() {
            let e = e.unwrap();
            let path = e.path().unwrap().display().to_string();
            match e.header().entry_type() {
                tar::EntryType::Symlink => {
                    let target = e.link_name().unwrap().unwrap().display().to_string();
                    links.insert(path, target);
                }
                tar::EntryType::Regular => files.push(path),
                _ => {}
            }
        }
        for applet in [
            "sh", "sleep", "cat", "ls", "echo", "wget", "httpd", "true", "false",
        ] {
            assert_eq!(
                links.get(&format!("bin/{applet}")).map(String::as_str),
                Some("busybox"),
                "{applet}"
            );
        }
        assert!(files.contains(&"bin/busybox".to_string()));
        assert!(files.contains(&"etc/harness-image".to_string()));
    }

    #[test]
    fn the_go_images_run_their_program() {
        let p = pause(b"p".to_vec());
        assert_eq!(p.config.entrypoint, ["/pause"]);
        assert_eq!(p.name.to_string(), PAUSE_IMAGE);
        let h = health(b"h".to_vec());
        assert_eq!(h.config.entrypoint, ["/health"]);
        assert_eq!(h.name.to_string(), HEALTH_IMAGE);
        assert!(h.entries.iter().any(|e| e.path() == "/tmp"));
    }

    #[test]
    fn only_an_elf_without_an_interpreter_is_static() {
        let bin = std::fs::read("/bin/sh").unwrap_or_default();
        if !bin.is_empty() {
            // Debian's /bin/sh (dash) is dynamically linked.
            assert!(!is_static_elf(&bin));
        }
        assert!(!is_static_elf(b"#!/bin/sh\n"));
        // A minimal ELF64 header with no program headers.
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        assert!(is_static_elf(&elf));
    }
}
