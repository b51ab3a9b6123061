//! The images a node preloads, named `harness.local/...` with the tags kubeadm asks for: start
//! with [`Toolchain::kind_images`], which builds them all as OCI archives (what
//! `ctr images import` reads) under one [`BuildKey`]. What goes into each is a pure
//! [`ImageRecipe`]: the control plane and etcd ([`binary_image`]), kube-proxy with Debian's
//! iptables from the node's own root file system ([`kube_proxy_image`]), CoreDNS
//! ([`coredns_image`]) and the harness's pause image.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::super::cache::{BuildKey, Installed, Manifest};
use super::super::images::{IMAGE_HOST, ImageName, ImageRecipe};
use super::super::oci::{self, Entry, ImageConfig};
use super::super::{KubeVersion, Toolchain, ToolchainError};
use super::rootfs::Rootfs;
use super::rootfs_tar::RootfsTar;
use super::{NodeRecipe, hex_prefix, install_identity};

/// `PATH` of the images whose binaries the static pods run by bare name.
pub const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The control-plane images, named after their binaries.
pub const CONTROL_PLANE: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// kube-proxy's `iptables` ([`iptables-wrapper.sh`](iptables-wrapper.sh)): on first use it
/// picks the backend (nft or legacy) the node uses, links the iptables commands to it, and
/// runs it.
pub const IPTABLES_WRAPPER: &str = include_str!("iptables-wrapper.sh");

/// What kube-proxy's image takes from the node's root file system, with the libraries they
/// load: both iptables backends, `nft` (kube-proxy cleans nftables rules up even in iptables
/// mode), `conntrack`, and the files their libraries read.
pub const KUBE_PROXY_TOOLS: &[&str] = &[
    "/usr/sbin/xtables-nft-multi",
    "/usr/sbin/xtables-legacy-multi",
    "/usr/sbin/nft",
    "/usr/sbin/conntrack",
    "/etc/ld.so.cache",
    "/etc/protocols",
    "/etc/services",
    "/etc/ethertypes",
];

/// Where iptables keeps its extensions (loaded with `dlopen`, so listed nowhere).
pub const XTABLES_DIR: &str = "/usr/lib/x86_64-linux-gnu/xtables";

/// Where the loader looks for a library it is not told the path of, in its order.
pub const LIBRARY_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// Bumped whenever the way the images are made changes.
const FORMAT: &str = "1";

fn dir(path: &str, mode: u32) -> Entry {
    Entry::Dir {
        path: path.into(),
        mode,
    }
}

fn file(path: &str, mode: u32, data: Vec<u8>) -> Entry {
    Entry::File {
        path: path.into(),
        mode,
        data,
    }
}

fn symlink(path: &str, target: &str) -> Entry {
    Entry::Symlink {
        path: path.into(),
        target: target.into(),
    }
}

fn name(repo: &str, tag: &str) -> ImageName {
    ImageName {
        host: IMAGE_HOST.into(),
        repo: repo.into(),
        tag: tag.into(),
    }
}

/// An image of one static binary at `/usr/local/bin/<repo>`, with `PATH` (the static pods run
/// `kube-apiserver`, `etcd`, ... by bare name) and a `/tmp`.
pub fn binary_image(repo: &str, tag: &str, binary: Vec<u8>) -> ImageRecipe {
    ImageRecipe {
        name: name(repo, tag),
        config: ImageConfig {
            env: vec![PATH_ENV.into()],
            ..ImageConfig::default()
        },
        entries: vec![
            dir("/usr", 0o755),
            dir("/usr/local", 0o755),
            dir("/usr/local/bin", 0o755),
            file(&format!("/usr/local/bin/{repo}"), 0o755, binary),
            dir("/tmp", 0o1777),
        ],
    }
}

/// CoreDNS at `/coredns` as its entrypoint (kubeadm's Deployment passes only `-conf`).
pub fn coredns_image(tag: &str, binary: Vec<u8>) -> ImageRecipe {
    ImageRecipe {
        name: name("coredns", tag),
        config: ImageConfig {
            entrypoint: vec!["/coredns".into()],
            ..ImageConfig::default()
        },
        entries: vec![
            file("/coredns", 0o755, binary),
            dir("/etc", 0o755),
            dir("/tmp", 0o1777),
        ],
    }
}

/// The interpreter and the libraries (`DT_NEEDED`) of an ELF file; `None` for anything else.
pub fn elf_needs(data: &[u8]) -> Option<(Option<String>, Vec<String>)> {
    use object::read::elf::{FileHeader, ProgramHeader};
    type Elf = object::elf::FileHeader64<object::Endianness>;
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let interpreter = header
        .program_headers(endian, data)
        .ok()?
        .iter()
        .find_map(|ph| ph.interpreter(endian, data).ok().flatten())
        .map(|b| String::from_utf8_lossy(b).into_owned());
    let table = header
        .sections(endian, data)
        .ok()?
        .dynamic_table(endian, data)
        .ok()?;
    let needed = table
        .iter()
        .filter(|d| d.tag == object::elf::DT_NEEDED)
        .filter_map(|d| table.string(d).ok())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    Some((interpreter, needed))
}

/// `paths` of `rootfs` with everything they need to run: each as the regular file it leads
/// to, every symbolic link on the way, the parent directories, and (for ELF files) the
/// interpreter and the libraries they load, found as the loader finds them.
pub fn copy_with_libraries(
    rootfs: &RootfsTar,
    paths: &[String],
) -> std::io::Result<BTreeMap<String, Entry>> {
    let missing = |what: String| std::io::Error::new(std::io::ErrorKind::NotFound, what);
    let mut out: BTreeMap<String, Entry> = BTreeMap::new();
    let parents = |out: &mut BTreeMap<String, Entry>, path: &str| {
        let mut at = 0;
        while let Some(i) = path[at + 1..].find('/') {
            at += i + 1;
            let p = &path[..at];
            out.entry(p.to_string())
                .or_insert_with(|| dir(p, rootfs.dir_mode(p)));
        }
    };
    let mut queue: VecDeque<String> = paths.iter().cloned().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some(p) = queue.pop_front() {
        let (canonical, links) = rootfs
            .resolve(&p)
            .ok_or_else(|| missing(format!("{p} in the root file system")))?;
        for (link, target) in links {
            parents(&mut out, &link);
            out.insert(link.clone(), symlink(&link, &target));
        }
        if out.contains_key(&canonical) {
            continue;
        }
        let (mode, data) = rootfs.read(&canonical)?;
        parents(&mut out, &canonical);
        if let Some((interpreter, needed)) = elf_needs(&data) {
            if let Some(i) = interpreter.filter(|i| seen.insert(i.clone())) {
                queue.push_back(i);
            }
            for soname in needed.into_iter().filter(|s| seen.insert(s.clone())) {
                let found = LIBRARY_DIRS
                    .iter()
                    .map(|d| format!("{d}/{soname}"))
                    .find(|c| rootfs.resolve(c).is_some_and(|(p, _)| rootfs.is_file(&p)))
                    .ok_or_else(|| missing(format!("{soname}, which {canonical} loads")))?;
                queue.push_back(found);
            }
        }
        out.insert(canonical.clone(), file(&canonical, mode, data));
    }
    Ok(out)
}

/// kube-proxy with iptables from the node's own root file system, so the pod and the node run
/// the same iptables build: both backends behind [`IPTABLES_WRAPPER`] (a busybox shell script),
/// `nft`, `conntrack`, their libraries and extensions, in a merged-`/usr` layout.
pub fn kube_proxy_image(
    tag: &str,
    kube_proxy: Vec<u8>,
    busybox: Vec<u8>,
    rootfs: &RootfsTar,
) -> std::io::Result<ImageRecipe> {
    let mut paths: Vec<String> = KUBE_PROXY_TOOLS.iter().map(|s| s.to_string()).collect();
    paths.extend(
        rootfs
            .list(XTABLES_DIR)
            .into_iter()
            .filter(|p| p.ends_with(".so")),
    );
    let mut entries = copy_with_libraries(rootfs, &paths)?;
    let mut add = |e: Entry| {
        entries.insert(e.path().to_string(), e);
    };
    for (d, mode) in [
        ("/usr", 0o755),
        ("/usr/bin", 0o755),
        ("/usr/sbin", 0o755),
        ("/usr/lib", 0o755),
        ("/usr/lib64", 0o755),
        ("/usr/local", 0o755),
        ("/usr/local/bin", 0o755),
        ("/etc", 0o755),
        ("/run", 0o755),
        ("/var", 0o755),
        ("/var/run", 0o755),
        ("/tmp", 0o1777),
    ] {
        add(dir(d, mode));
    }
    for d in ["bin", "sbin", "lib", "lib64"] {
        add(symlink(&format!("/{d}"), &format!("usr/{d}")));
    }
    add(file("/usr/local/bin/kube-proxy", 0o755, kube_proxy));
    add(file("/usr/bin/busybox", 0o755, busybox));
    add(symlink("/usr/bin/sh", "busybox"));
    add(file(
        "/usr/sbin/iptables-wrapper",
        0o755,
        IPTABLES_WRAPPER.as_bytes().to_vec(),
    ));
    for t in ["iptables", "ip6tables"] {
        for s in ["", "-save", "-restore"] {
            add(symlink(&format!("/usr/sbin/{t}{s}"), "iptables-wrapper"));
            for m in ["nft", "legacy"] {
                add(symlink(
                    &format!("/usr/sbin/{t}-{m}{s}"),
                    &format!("xtables-{m}-multi"),
                ));
            }
        }
    }
    Ok(ImageRecipe {
        name: name("kube-proxy", tag),
        config: ImageConfig {
            env: vec![PATH_ENV.into()],
            ..ImageConfig::default()
        },
        entries: entries.into_values().collect(),
    })
}

/// The images a node of `version` preloads, by name, sorted: what
/// `kubeadm config images list --image-repository harness.local` prints for it.
pub fn preload_names(version: &KubeVersion, recipe: &NodeRecipe) -> Vec<String> {
    let tag = version.tag();
    let mut names: Vec<String> = CONTROL_PLANE
        .iter()
        .chain(&["kube-proxy"])
        .map(|c| name(c, &tag).to_string())
        .collect();
    names.push(name("etcd", recipe.etcd_tag).to_string());
    names.push(name("coredns", recipe.coredns).to_string());
    names.push(super::super::images::PAUSE_IMAGE.to_string());
    names.sort();
    names
}

/// What the images are made of.
#[derive(Debug, Clone)]
pub struct ImageInputs {
    /// The Kubernetes version.
    pub version: KubeVersion,
    /// Its node recipe.
    pub recipe: NodeRecipe,
    /// The control plane and etcd.
    pub kubernetes: Installed,
    /// kubeadm and kube-proxy.
    pub kubeadm: Installed,
    /// CoreDNS.
    pub coredns: Installed,
    /// The `pause` program (the harness's image programs).
    pub programs: Installed,
    /// A static busybox (kube-proxy's shell).
    pub busybox: PathBuf,
    /// The node's root file system (kube-proxy's iptables).
    pub rootfs: Rootfs,
}

impl ImageInputs {
    /// The cache key: `kind-images` at `<version>-<hash>`, the hash over the recipes' code and
    /// every input (cached builds by identity, the root file system and busybox by content).
    pub fn key(&self) -> Result<BuildKey, ToolchainError> {
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [
            FORMAT,
            &self.version.tag(),
            &preload_names(&self.version, &self.recipe).join(","),
            IPTABLES_WRAPPER,
            &KUBE_PROXY_TOOLS.join(","),
            &self.rootfs.digest,
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        for i in [
            &self.kubernetes,
            &self.kubeadm,
            &self.coredns,
            &self.programs,
        ] {
            install_identity(&mut h, i);
        }
        let busybox =
            super::sha256_file(&self.busybox).map_err(|e| ToolchainError::io(&self.busybox, e))?;
        h.update(busybox.as_bytes());
        Ok(BuildKey::new(
            "kind-images",
            format!("{}-{}", self.version.tag(), hex_prefix(h.finish())),
        ))
    }

    /// Every image's recipe, in [`preload_names`] order.
    fn recipes(&self) -> std::io::Result<Vec<ImageRecipe>> {
        let read = |p: PathBuf| std::fs::read(p);
        let tag = self.version.tag();
        let rootfs = RootfsTar::open(&self.rootfs.tar())?;
        let mut recipes: Vec<ImageRecipe> = CONTROL_PLANE
            .iter()
            .map(|c| Ok(binary_image(c, &tag, read(self.kubernetes.binary(c))?)))
            .collect::<std::io::Result<_>>()?;
        recipes.push(binary_image(
            "etcd",
            self.recipe.etcd_tag,
            read(self.kubernetes.binary("etcd"))?,
        ));
        recipes.push(kube_proxy_image(
            &tag,
            read(self.kubeadm.binary("kube-proxy"))?,
            read(self.busybox.clone())?,
            &rootfs,
        )?);
        recipes.push(coredns_image(
            self.recipe.coredns,
            read(self.coredns.binary("coredns"))?,
        ));
        recipes.push(super::super::images::pause(read(
            self.programs.binary("pause"),
        )?));
        recipes.sort_by_key(|r| r.name.to_string());
        Ok(recipes)
    }
}

/// One preloaded image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreloadedImage {
    /// `harness.local/kube-apiserver:v1.32.5`
    pub name: String,
    /// Its OCI archive's file name in the build.
    pub archive: String,
    /// Its manifest digest.
    pub digest: String,
}

/// The built images.
#[derive(Debug, Clone)]
pub struct KindImages {
    /// The install holding the archives.
    pub install: Installed,
    /// The images, sorted by name.
    pub images: Vec<PreloadedImage>,
}

/// The list of a [`KindImages`] build.
const LIST: &str = "images.json";

impl KindImages {
    fn open(install: Installed) -> Result<Self, ToolchainError> {
        let path = install.binary(LIST);
        let bytes = std::fs::read(&path).map_err(|e| ToolchainError::io(&path, e))?;
        let images = serde_json::from_slice(&bytes).map_err(|e| {
            ToolchainError::io(
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        Ok(Self { install, images })
    }

    /// Each image's archive.
    pub fn archives(&self) -> Vec<(String, PathBuf)> {
        self.images
            .iter()
            .map(|i| (i.name.clone(), self.install.binary(&i.archive)))
            .collect()
    }
}

/// Builds `recipe` into the OCI archive `out` (by way of a layout in `work`) and says what it
/// holds.
fn build_archive(recipe: &ImageRecipe, work: &Path, out: &Path) -> std::io::Result<PreloadedImage> {
    let image = oci::Image::build(&recipe.config, &recipe.entries)?;
    oci::write_layout(work, &image, &recipe.name.to_string(), &recipe.name.tag)?;
    oci::archive(work, out)?;
    std::fs::remove_dir_all(work)?;
    Ok(PreloadedImage {
        name: recipe.name.to_string(),
        archive: out
            .file_name()
            .expect("an archive has a name")
            .to_string_lossy()
            .into_owned(),
        digest: image.manifest.digest,
    })
}

impl Toolchain {
    /// The preloaded images of `inputs`, from the cache or built into it (two at a time, each
    /// on a blocking thread: gzip is most of the work).
    pub async fn kind_images(&self, inputs: &ImageInputs) -> Result<KindImages, ToolchainError> {
        let key = inputs.key()?;
        let key = &key;
        let install = self
            .ensure_built(key, |staging| async move {
                let started = Instant::now();
                let task = self
                    .progress
                    .timed(&format!("building {key}"), self.estimate(key).time);
                let recipes = {
                    let (inputs, tar) = (inputs.clone(), inputs.rootfs.tar());
                    tokio::task::spawn_blocking(move || inputs.recipes())
                        .await
                        .expect("reading the inputs does not panic")
                        .map_err(|e| ToolchainError::io(&tar, e))?
                };
                let out = staging.join("bin");
                let jobs = recipes.into_iter().map(|r| {
                    let work = staging.join("src").join(&r.name.repo);
                    let archive = out.join(format!("{}.tar", r.name.repo));
                    let out = out.clone();
                    async move {
                        tokio::task::spawn_blocking(move || build_archive(&r, &work, &archive))
                            .await
                            .expect("building an image does not panic")
                            .map_err(|e| ToolchainError::io(&out, e))
                    }
                });
                let mut images: Vec<PreloadedImage> = {
                    use futures::StreamExt;
                    futures::stream::iter(jobs)
                        .buffer_unordered(2)
                        .collect::<Vec<_>>()
                        .await
                        .into_iter()
                        .collect::<Result<_, _>>()?
                };
                images.sort_by(|a, b| a.name.cmp(&b.name));
                let list = out.join(LIST);
                std::fs::write(
                    &list,
                    serde_json::to_vec_pretty(&images).expect("serializes"),
                )
                .map_err(|e| ToolchainError::io(&list, e))?;
                let mut binaries: Vec<String> = images.iter().map(|i| i.archive.clone()).collect();
                binaries.push(LIST.into());
                task.finish(&format!(
                    "built {key} in {:.0?}",
                    Duration::from_secs(started.elapsed().as_secs())
                ));
                Ok(Manifest {
                    key: key.clone(),
                    binaries,
                    built_with: format!("harness {}", env!("CARGO_PKG_VERSION")),
                    build_seconds: started.elapsed().as_secs(),
                })
            })
            .await?;
        KindImages::open(install)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_picks_the_node_s_backend_and_relinks_every_name() {
        let w = IPTABLES_WRAPPER;
        assert!(w.starts_with("#!/bin/sh\n"));
        for chain in ["KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"] {
            assert!(w.contains(chain), "{chain}");
        }
        assert!(w.contains("if [ \"$(hint nft)\" -gt 0 ]; then mode=nft"));
        assert!(w.contains("elif [ \"$(hint legacy)\" -gt 0 ]; then mode=legacy"));
        assert!(w.contains("for t in iptables ip6tables; do"));
        assert!(w.contains("for s in \"\" -save -restore;"));
        assert!(
            w.contains("exec \"/usr/sbin/xtables-$mode-multi\" \"$($bb basename \"$0\")\" \"$@\"")
        );
    }

    #[test]
    fn static_pod_images_run_their_binary_by_name() {
        let r = binary_image("kube-apiserver", "v1.32.5", b"bin".to_vec());
        assert_eq!(r.name.to_string(), "harness.local/kube-apiserver:v1.32.5");
        assert_eq!(r.config.env, [PATH_ENV]);
        assert!(r.entries.contains(&file(
            "/usr/local/bin/kube-apiserver",
            0o755,
            b"bin".to_vec()
        )));
        let c = coredns_image("v1.11.3", b"dns".to_vec());
        assert_eq!(c.config.entrypoint, ["/coredns"]);
        assert_eq!(c.name.to_string(), "harness.local/coredns:v1.11.3");
    }

    #[test]
    fn the_preloaded_names_are_the_ones_kubeadm_lists() {
        let v: KubeVersion = "1.32".parse().unwrap();
        let r = super::super::node_recipe(v).unwrap();
        assert_eq!(
            preload_names(&v, r),
            [
                "harness.local/coredns:v1.11.3",
                "harness.local/etcd:3.5.16-0",
                "harness.local/kube-apiserver:v1.32.5",
                "harness.local/kube-controller-manager:v1.32.5",
                "harness.local/kube-proxy:v1.32.5",
                "harness.local/kube-scheduler:v1.32.5",
                "harness.local/pause:3.10",
            ]
        );
    }

    /// This machine lacks what a test reads (an x86-64 `/bin/ls` with its loader under
    /// `/lib64`): says so, and fails when CI is set (CI's machines have it).
    fn unsupported(why: &str) {
        assert!(
            std::env::var_os("CI").is_none(),
            "{why} (CI is set, so the test fails instead of skipping)"
        );
        eprintln!("skipped: {why}");
    }

    #[test]
    fn elf_needs_reads_the_interpreter_and_libraries() {
        let Ok(ls) = std::fs::read("/bin/ls") else {
            return unsupported("no readable /bin/ls to read an ELF binary from");
        };
        let (interp, needed) = elf_needs(&ls).expect("/bin/ls is ELF");
        assert!(interp.is_some_and(|i| i.contains("ld-linux")));
        assert!(
            needed.iter().any(|n| n.starts_with("libc.so")),
            "{needed:?}"
        );
        assert_eq!(elf_needs(b"#!/bin/sh\n"), None);
    }

    /// A root file system holding `/bin/ls` as `/usr/sbin/tool`: its loader behind two links
    /// (`/lib64`, then the loader's own), each library it needs behind a link to the real file,
    /// found through `/lib`.
    fn rootfs(tmp: &Path) -> Option<(RootfsTar, Vec<String>)> {
        let ls = std::fs::read("/bin/ls").ok()?;
        let (interp, needed) = elf_needs(&ls)?;
        let interp = interp?.strip_prefix("/lib64/")?.to_string();
        let mut entries = vec![
            symlink("/lib", "usr/lib"),
            symlink("/lib64", "usr/lib64"),
            dir("/usr", 0o755),
            dir("/usr/lib", 0o755),
            dir("/usr/lib64", 0o755),
            dir("/usr/lib/x86_64-linux-gnu", 0o755),
            dir("/usr/sbin", 0o700),
            file("/usr/sbin/tool", 0o755, ls),
            symlink(
                &format!("/usr/lib64/{interp}"),
                "/lib/x86_64-linux-gnu/ld.so",
            ),
            file("/usr/lib/x86_64-linux-gnu/ld.so", 0o755, b"loader".to_vec()),
        ];
        for n in &needed {
            let at = format!("/usr/lib/x86_64-linux-gnu/{n}");
            entries.push(symlink(&at, &format!("{n}.real")));
            entries.push(file(&format!("{at}.real"), 0o644, b"not elf".to_vec()));
        }
        let tar = tmp.join("rootfs.tar");
        std::fs::write(&tar, oci::layer_tar(&entries).unwrap()).unwrap();
        Some((RootfsTar::open(&tar).unwrap(), needed))
    }

    #[test]
    fn a_binary_is_copied_with_its_loader_its_libraries_and_the_links_to_them() {
        let tmp = tempfile::tempdir().unwrap();
        let Some((fs, needed)) = rootfs(tmp.path()) else {
            return unsupported("/bin/ls is not an ELF binary with its loader under /lib64");
        };
        let got = copy_with_libraries(&fs, &["/usr/sbin/tool".into()]).unwrap();
        assert!(matches!(got["/usr/sbin/tool"], Entry::File { .. }));
        assert_eq!(
            got["/usr/sbin"],
            dir("/usr/sbin", 0o700),
            "the rootfs's mode"
        );
        assert!(matches!(
            got["/usr/lib/x86_64-linux-gnu/ld.so"],
            Entry::File { .. }
        ));
        assert_eq!(got["/lib"], symlink("/lib", "usr/lib"));
        assert_eq!(got["/lib64"], symlink("/lib64", "usr/lib64"));
        for n in &needed {
            let link = format!("/usr/lib/x86_64-linux-gnu/{n}");
            assert_eq!(got[&link], symlink(&link, &format!("{n}.real")));
            assert!(matches!(got[&format!("{link}.real")], Entry::File { .. }));
        }
        let err = copy_with_libraries(&fs, &["/usr/sbin/none".into()]).unwrap_err();
        assert!(err.to_string().contains("/usr/sbin/none"), "{err}");
    }
}
