//! A kind node image built offline: no registry, no prebuilt download. Start with
//! [`Toolchain::kind_node_image`]: it returns a [`KindNodeImage`], a docker archive in the cache
//! tagged `harness.local/kind-node:<version>-<hash>`, building what is not cached yet; and
//! [`kind_config_additions`] says what a kind config needs to run it.
//!
//! The image is two layers. The first is the root file system of kind's base image made from
//! Debian packages ([`rootfs`], from the host's apt sources, [`apt`]: systemd, containerd,
//! runc, the CNI plugins, kind's own files from the kind module, crictl built from its
//! module). The second is what `kind build node-image` adds ([`node`]): kubeadm, kubelet and
//! kubectl, `/kind/version`, a default StorageClass, and `/var/lib/containerd` with the images
//! kubeadm asks for ([`images`]), imported by the root file system's own containerd run on
//! this host ([`containerd`], which reads it out of the tar with [`rootfs_tar`]). The archive
//! is written by [`archive`]; [`config`] has the kind config additions.
//!
//! Every step is a cached build with its own [`BuildKey`]: kubeadm and kube-proxy
//! ([`Toolchain::kubeadm`]), CoreDNS, crictl, the root file system, the images and the node
//! image, each keyed on a hash of its inputs (generated files by content, cached builds by
//! their identity: a cached build never changes, a rebuild replaces its files).

pub mod apt;
pub mod archive;
pub mod config;
pub mod containerd;
pub mod images;
pub mod node;
pub mod rootfs;
pub mod rootfs_tar;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};

pub use self::config::{KindConfigAdditions, kind_config_additions};
use self::images::{ImageInputs, preload_names};
use self::node::NodeInputs;
use self::rootfs::Rootfs;
use super::cache::{BuildKey, Installed};
use super::images::IMAGE_HOST;
use super::{KubeVersion, Toolchain, ToolchainError, recipes};

/// What a node image of one Kubernetes minor is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRecipe {
    /// `1.32`
    pub minor: &'static str,
    /// The kind release whose base-image files and layout the image follows.
    pub kind_release: &'static str,
    /// The CoreDNS release kubeadm deploys (`github.com/coredns/coredns`).
    pub coredns: &'static str,
    /// kubeadm's tag of the etcd image (the etcd binary is the one of the Kubernetes build).
    pub etcd_tag: &'static str,
    /// The crictl release (`sigs.k8s.io/cri-tools`); Debian has none.
    pub crictl: &'static str,
}

/// The Kubernetes minors a node image can be built for.
pub const NODE_RECIPES: &[NodeRecipe] = &[NodeRecipe {
    minor: "1.32",
    kind_release: "v0.29.0",
    coredns: "v1.11.3",
    etcd_tag: "3.5.16-0",
    crictl: "v1.34.0",
}];

/// The module of CoreDNS (its main package is the module root).
pub const COREDNS_MODULE: &str = "github.com/coredns/coredns";

/// The module of kind, whose `images/base/files` the root file system takes.
pub const KIND_MODULE: &str = "sigs.k8s.io/kind";

/// The repository of the node image.
pub const NODE_REPOSITORY: &str = "kind-node";

/// Errors of the node image.
#[derive(Debug, thiserror::Error)]
pub enum KindNodeError {
    /// No recipe for the version.
    #[error(
        "build a kind node image for Kubernetes {given}: there is no recipe for it; known: {known}"
    )]
    NoRecipe {
        /// The version asked for.
        given: String,
        /// The minors there are recipes for.
        known: String,
    },
    /// A step needs root and the harness does not run as root.
    #[error(
        "{step}: it needs root (mmdebstrap installs packages, containerd preloads the images); run the harness as root"
    )]
    NeedsRoot {
        /// The step.
        step: String,
    },
    /// The host's apt configuration names no Debian mirror.
    #[error(
        "find a Debian mirror for {suite} in the host's apt sources (/etc/apt/sources.list, \
         /etc/apt/sources.list.d): none serves it; add one"
    )]
    NoMirror {
        /// The suite.
        suite: String,
    },
    /// kubeadm asks for other images than the ones the image preloads.
    #[error(
        "match kubeadm's images: it lists {} but the node image preloads {}; update NODE_RECIPES",
        kubeadm.join(", "), preloaded.join(", ")
    )]
    ImageList {
        /// What kubeadm lists.
        kubeadm: Vec<String>,
        /// What the recipe preloads.
        preloaded: Vec<String>,
    },
    /// A build failed.
    #[error("build the kind node image")]
    Toolchain(#[from] ToolchainError),
}

/// The recipe for `version`'s minor.
pub fn node_recipe(version: KubeVersion) -> Result<&'static NodeRecipe, KindNodeError> {
    let minor = version.minor_string();
    NODE_RECIPES
        .iter()
        .find(|r| r.minor == minor)
        .ok_or_else(|| KindNodeError::NoRecipe {
            given: minor,
            known: NODE_RECIPES
                .iter()
                .map(|r| format!("{} (kind {})", r.minor, r.kind_release))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// A built node image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindNodeImage {
    /// The docker archive (`docker load -i`).
    pub archive: PathBuf,
    /// Its tag, `harness.local/kind-node:v1.32.5-<hash>` (refer to it by tag: a loaded archive
    /// has no registry digest).
    pub tag: String,
    /// Its Kubernetes version.
    pub kubernetes: KubeVersion,
    /// The kind release it is made for.
    pub kind_release: String,
    /// The preloaded images, sorted.
    pub images: Vec<String>,
    /// The image id (the digest of its config).
    pub id: String,
    /// The archive's size in bytes.
    pub size: u64,
}

/// The first 12 hex digits of a digest.
fn hex_prefix(d: ring::digest::Digest) -> String {
    d.as_ref()[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:<hex>` of a digest.
fn digest_string(d: ring::digest::Digest) -> String {
    let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `sha256:<hex>` of a file, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(digest_string(h.finish()));
        }
        h.update(&buf[..n]);
    }
}

/// Feeds a cached build's identity into `h`: its key, its manifest, and each file's size and
/// modification time (an install never changes; a rebuild writes new files).
fn install_identity(h: &mut ring::digest::Context, install: &Installed) {
    use std::os::unix::fs::MetadataExt;
    h.update(&serde_json::to_vec(&install.manifest).expect("a manifest serializes"));
    for b in &install.manifest.binaries {
        h.update(b.as_bytes());
        if let Ok(m) = std::fs::metadata(install.binary(b)) {
            h.update(&m.len().to_le_bytes());
            h.update(&m.mtime().to_le_bytes());
            h.update(&m.mtime_nsec().to_le_bytes());
        }
    }
}

/// The directory of the kind module at `release` in Go's module cache (downloaded if missing).
async fn kind_module(release: &str) -> Result<PathBuf, ToolchainError> {
    let go = super::GoEnv::detect().await?;
    let dir = tempfile::tempdir().map_err(|e| ToolchainError::io(&std::env::temp_dir(), e))?;
    Ok(go
        .download(dir.path(), KIND_MODULE, release, false)
        .await?
        .dir)
}

/// The image kubeadm at `kubeadm` lists for `version` with repository `harness.local`, sorted.
pub async fn kubeadm_images(
    kubeadm: &Path,
    version: KubeVersion,
) -> Result<Vec<String>, ToolchainError> {
    let out = tokio::process::Command::new(kubeadm)
        .args(["config", "images", "list", "--image-repository", IMAGE_HOST])
        .args(["--kubernetes-version", &version.tag()])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| ToolchainError::Spawn {
            what: "kubeadm config images list".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(ToolchainError::BuildFailed {
            what: "kubeadm config images list".into(),
            status: out.status.to_string(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    names.sort();
    Ok(names)
}

impl Toolchain {
    /// kubeadm and kube-proxy at `version`, from the same module graph as the control plane.
    pub async fn kubeadm(&self, version: KubeVersion) -> Result<Installed, ToolchainError> {
        self.build_in_kubernetes_graph("kubeadm", version, recipes::kubeadm)
            .await
    }

    /// CoreDNS at `version` (`go install github.com/coredns/coredns@<version>`).
    pub async fn coredns(&self, version: &str) -> Result<Installed, ToolchainError> {
        let key = BuildKey::new("coredns", version);
        let v = version.to_string();
        self.ensure(&key, |go, dir| async move {
            let upstream = go.module_go_mod(&dir, COREDNS_MODULE, &v, false).await?;
            let text =
                std::fs::read_to_string(&upstream).map_err(|e| ToolchainError::io(&upstream, e))?;
            Ok(recipes::go_install(
                COREDNS_MODULE,
                COREDNS_MODULE,
                &v,
                "coredns",
                &text,
            ))
        })
        .await
    }

    /// crictl at `version`, stamped with it.
    pub async fn crictl(&self, version: &str) -> Result<Installed, ToolchainError> {
        let key = BuildKey::new("crictl", version);
        let v = version.to_string();
        self.ensure(&key, |go, dir| async move {
            let upstream = go
                .module_go_mod(&dir, recipes::CRI_TOOLS_MODULE, &v, false)
                .await?;
            let text =
                std::fs::read_to_string(&upstream).map_err(|e| ToolchainError::io(&upstream, e))?;
            Ok(recipes::crictl(&v, &text))
        })
        .await
    }

    /// The builds behind [`kind_node_image`](Self::kind_node_image) for `version`, for
    /// [`Toolchain::cold`]: the Go builds, then the root file system, the images and the node
    /// image, each under its real key once its inputs are cached (before that, under the
    /// version alone: it is cold either way).
    pub async fn kind_node_builds(
        &self,
        version: KubeVersion,
    ) -> Result<Vec<BuildKey>, KindNodeError> {
        let recipe = node_recipe(version)?;
        let tag = version.tag();
        let lookup = |k: &BuildKey| self.cache().lookup(k);
        let go = [
            BuildKey::new("kubernetes", &tag),
            BuildKey::new("kubelet", &tag),
            BuildKey::new("kubeadm", &tag),
            BuildKey::new("coredns", recipe.coredns),
            BuildKey::new("crictl", recipe.crictl),
        ];
        let mut keys = go.to_vec();
        let rootfs_key = match lookup(&go[4]) {
            Some(crictl) => Some(self.rootfs_plan(recipe.kind_release, crictl).await?.key()),
            None => None,
        };
        keys.push(
            rootfs_key
                .clone()
                .unwrap_or_else(|| BuildKey::new("kind-rootfs", rootfs::SUITE)),
        );
        let inputs = match (
            rootfs_key.and_then(|k| lookup(&k)),
            lookup(&go[0]),
            lookup(&go[1]),
            lookup(&go[2]),
            lookup(&go[3]),
            lookup(&super::images::programs_key()),
            super::host::BUSYBOX_STATIC.plan(std::env::var_os("PATH").as_deref(), false),
        ) {
            (
                Some(rootfs),
                Some(kubernetes),
                Some(kubelet),
                Some(kubeadm),
                Some(coredns),
                Some(programs),
                super::host::PackagePlan::Found(busybox),
            ) => {
                let images = ImageInputs {
                    version,
                    recipe: *recipe,
                    kubernetes: kubernetes.clone(),
                    kubeadm: kubeadm.clone(),
                    coredns,
                    programs,
                    busybox,
                    rootfs: Rootfs::open(rootfs)?,
                };
                let images_key = images.key()?;
                let node = NodeInputs {
                    version,
                    recipe,
                    kubernetes,
                    kubelet,
                    kubeadm,
                    images_key: images_key.clone(),
                    rootfs: images.rootfs.clone(),
                };
                Some((images_key, node.key()))
            }
            _ => None,
        };
        match inputs {
            Some((images, node)) => keys.extend([images, node]),
            None => keys.extend([
                BuildKey::new("kind-images", &tag),
                BuildKey::new(NODE_REPOSITORY, &tag),
            ]),
        }
        Ok(keys)
    }

    /// The kind node image for `version`, from the cache or built into it; the builds still
    /// to do are said first, each with an estimate. Building the root file system or the
    /// image needs root.
    pub async fn kind_node_image(
        &self,
        version: KubeVersion,
    ) -> Result<KindNodeImage, KindNodeError> {
        let recipe = node_recipe(version)?;
        let cold = self.cold(&self.kind_node_builds(version).await?);
        if let Some(c) = cold
            .iter()
            .find(|c| matches!(c.key.component.as_str(), "kind-rootfs" | NODE_REPOSITORY))
            && !nix::unistd::geteuid().is_root()
        {
            return Err(KindNodeError::NeedsRoot {
                step: format!("build {}", c.key),
            });
        }
        if !cold.is_empty() {
            self.progress.line(&super::estimate::plan_text(&cold));
        }
        // The Kubernetes graph in order (its builds share Go's build cache), beside CoreDNS
        // and beside crictl and the root file system.
        let kube = async {
            let kubernetes = self.kubernetes(version).await?.install;
            let kubelet = self
                .build_in_kubernetes_graph("kubelet", version, recipes::kubelet)
                .await?;
            let kubeadm = self.kubeadm(version).await?;
            Ok::<_, KindNodeError>((kubernetes, kubelet, kubeadm))
        };
        let coredns = async { Ok::<_, KindNodeError>(self.coredns(recipe.coredns).await?) };
        let rootfs = async {
            let crictl = self.crictl(recipe.crictl).await?;
            let plan = self.rootfs_plan(recipe.kind_release, crictl).await?;
            self.kind_rootfs(&plan).await
        };
        let ((kubernetes, kubelet, kubeadm), coredns, rootfs) =
            tokio::try_join!(kube, coredns, rootfs)?;
        let listed = kubeadm_images(&kubeadm.binary("kubeadm"), version).await?;
        let preloaded = preload_names(&version, recipe);
        if listed != preloaded {
            return Err(KindNodeError::ImageList {
                kubeadm: listed,
                preloaded,
            });
        }
        let inputs = ImageInputs {
            version,
            recipe: *recipe,
            kubernetes: kubernetes.clone(),
            kubeadm: kubeadm.clone(),
            coredns,
            programs: self.image_programs().await?,
            busybox: self.static_busybox().await?,
            rootfs: rootfs.clone(),
        };
        let images = self.kind_images(&inputs).await?;
        let node = NodeInputs {
            version,
            recipe,
            kubernetes,
            kubelet,
            kubeadm,
            images_key: images.install.manifest.key.clone(),
            rootfs,
        };
        Ok(self.kind_node(node, &images).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_minors_have_a_recipe() {
        let v: KubeVersion = "1.32".parse().unwrap();
        assert_eq!(node_recipe(v).unwrap().kind_release, "v0.29.0");
        let old: KubeVersion = "1.29".parse().unwrap();
        let err = node_recipe(old).unwrap_err().to_string();
        assert_eq!(
            err,
            "build a kind node image for Kubernetes 1.29: there is no recipe for it; known: 1.32 (kind v0.29.0)"
        );
    }

    #[tokio::test]
    async fn on_an_empty_cache_every_step_is_cold_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let tc = Toolchain::new(
            super::super::Cache::new(dir.path()),
            crate::progress::Progress::silent(),
        );
        let v: KubeVersion = "1.32".parse().unwrap();
        let keys = tc.kind_node_builds(v).await.unwrap();
        let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            names,
            [
                "kubernetes v1.32.5",
                "kubelet v1.32.5",
                "kubeadm v1.32.5",
                "coredns v1.11.3",
                "crictl v1.34.0",
                "kind-rootfs bookworm",
                "kind-images v1.32.5",
                "kind-node v1.32.5",
            ]
        );
        assert_eq!(tc.cold(&keys).len(), keys.len());
        for k in &keys {
            assert!(
                super::super::estimate::TYPICAL
                    .iter()
                    .any(|(c, _)| *c == k.component),
                "{k} has a typical time"
            );
        }
        let old: KubeVersion = "1.29".parse().unwrap();
        assert!(matches!(
            tc.kind_node_builds(old).await,
            Err(KindNodeError::NoRecipe { .. })
        ));
    }

    #[test]
    fn a_file_hash_is_its_content_s() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(sha256_file(&p).unwrap(), super::super::oci::sha256(b"abc"));
    }
}
