//! Assembling the node image: the root file system as it is, and the added layer (the
//! Kubernetes binaries, `/kind`, the preloaded content store), written as a docker archive under
//! a key that hashes every input. [`Toolchain::kind_node_image`] drives it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::super::cache::{BuildKey, Installed, Manifest};
use super::super::images::IMAGE_HOST;
use super::super::{KubeVersion, Toolchain, ToolchainError};
use super::archive::{self, Layer, LayerWriter, RunConfig};
use super::images::{KindImages, preload_names};
use super::rootfs::{self, Rootfs};
use super::rootfs_tar::RootfsTar;
use super::{KindNodeImage, NODE_REPOSITORY, NodeRecipe, containerd, hex_prefix, install_identity};

/// The provisioner of the image's default StorageClass: the harness's own
/// (`cluster::local::provisioner::PROVISIONER`), kind's local-path-provisioner not being in
/// the image.
pub const STORAGE_PROVISIONER: &str = "harness.local/hostpath";

/// `/kind/manifests/default-storage.yaml`, which kind applies at create: the default class
/// `standard`, as the harness's provisioner serves it.
pub const STORAGE_MANIFEST: &str = "# The default StorageClass; the harness's provisioner makes its volumes.\n\
apiVersion: storage.k8s.io/v1\n\
kind: StorageClass\n\
metadata:\n  name: standard\n  annotations:\n    storageclass.kubernetes.io/is-default-class: \"true\"\n\
provisioner: harness.local/hostpath\n\
reclaimPolicy: Delete\n\
volumeBindingMode: WaitForFirstConsumer\n\
allowVolumeExpansion: false\n";

/// Bumped whenever the way the node image is assembled changes.
const FORMAT: &str = "1";

/// What the node build records beside the archive.
const IMAGE_JSON: &str = "image.json";
/// The archive's file name.
const ARCHIVE: &str = "kind-node.tar";

/// Everything the node image is assembled from.
#[derive(Debug, Clone)]
pub(super) struct NodeInputs {
    pub(super) version: KubeVersion,
    pub(super) recipe: &'static NodeRecipe,
    pub(super) kubernetes: Installed,
    pub(super) kubelet: Installed,
    pub(super) kubeadm: Installed,
    pub(super) images_key: BuildKey,
    pub(super) rootfs: Rootfs,
}

/// What the node container runs: kind's base-image settings.
pub fn run_config() -> RunConfig {
    RunConfig {
        env: rootfs::IMAGE_ENV.iter().map(|s| s.to_string()).collect(),
        entrypoint: rootfs::IMAGE_ENTRYPOINT
            .iter()
            .map(|s| s.to_string())
            .collect(),
        stop_signal: rootfs::IMAGE_STOP_SIGNAL.into(),
    }
}

impl NodeInputs {
    /// `kind-node` at `<version>-<hash>`; the same hash ends the image's tag.
    pub(super) fn key(&self) -> BuildKey {
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        let run = serde_json::to_string(&run_config()).expect("serializes");
        for part in [
            FORMAT,
            &self.version.tag(),
            self.recipe.kind_release,
            &self.images_key.to_string(),
            &self.rootfs.digest,
            STORAGE_MANIFEST,
            &run,
            &containerd::DISABLED_PLUGINS.join(","),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        for i in [&self.kubernetes, &self.kubelet, &self.kubeadm] {
            install_identity(&mut h, i);
        }
        BuildKey::new(
            NODE_REPOSITORY,
            format!("{}-{}", self.version.tag(), hex_prefix(h.finish())),
        )
    }

    fn tag(&self) -> String {
        let key = self.key();
        format!("{IMAGE_HOST}/{}:{}", key.component, key.version)
    }

    /// The added layer at `path`: the Kubernetes binaries, `/kind`, and the content store at
    /// `store` as `/var/lib/containerd`, directories with the root file system's modes.
    fn write_layer(
        &self,
        rootfs: &RootfsTar,
        store: &Path,
        path: &Path,
    ) -> std::io::Result<String> {
        let mut w = LayerWriter::create(path)?;
        for d in ["/usr", "/usr/bin"] {
            w.dir(d, rootfs.dir_mode(d))?;
        }
        w.file("/usr/bin/kubeadm", 0o755, &self.kubeadm.binary("kubeadm"))?;
        w.file("/usr/bin/kubelet", 0o755, &self.kubelet.binary("kubelet"))?;
        w.file(
            "/usr/bin/kubectl",
            0o755,
            &self.kubernetes.binary("kubectl"),
        )?;
        w.dir("/kind", rootfs.dir_mode("/kind"))?;
        w.bytes("/kind/version", 0o644, self.version.tag().as_bytes())?;
        w.dir("/kind/manifests", 0o755)?;
        w.bytes(
            "/kind/manifests/default-storage.yaml",
            0o644,
            STORAGE_MANIFEST.as_bytes(),
        )?;
        for d in ["/var", "/var/lib"] {
            w.dir(d, rootfs.dir_mode(d))?;
        }
        w.tree("/var/lib/containerd", store)?;
        w.finish()
    }
}

fn blocking_io<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> impl std::future::Future<Output = Result<T, ToolchainError>> {
    let path = path.to_path_buf();
    async move {
        tokio::task::spawn_blocking(f)
            .await
            .expect("file work does not panic")
            .map_err(|e| ToolchainError::io(&path, e))
    }
}

impl Toolchain {
    /// Assembles the node image of `node` with `images` preloaded, or finds it in the cache.
    pub(super) async fn kind_node(
        &self,
        node: NodeInputs,
        images: &KindImages,
    ) -> Result<KindNodeImage, ToolchainError> {
        let key = node.key();
        let (key, node) = (&key, &node);
        let install = self
            .ensure_built(key, |staging| async move {
                let started = Instant::now();
                let task = self
                    .progress
                    .timed(&format!("building {key}"), self.estimate(key).time);
                let src = staging.join("src");
                let tar = node.rootfs.tar();
                let rootfs = blocking_io(&tar, {
                    let tar = tar.clone();
                    move || RootfsTar::open(&tar)
                })
                .await?;
                task.set("importing the images into the root file system's containerd");
                let store = src.join("containerd");
                let names = containerd::preload(&rootfs, &store, &images.archives()).await?;
                let expected = preload_names(&node.version, node.recipe);
                if names != expected {
                    return Err(ToolchainError::BuildFailed {
                        what: "the preload".into(),
                        status: "a different set of images".into(),
                        tail: format!("expected {expected:?}, containerd has {names:?}"),
                    });
                }
                task.set("writing the added layer");
                let layer = src.join("layer.tar");
                let diff_id = {
                    // The layer is written on a blocking thread from owned copies.
                    let (rootfs, store, layer) = (rootfs.clone(), store.clone(), layer.clone());
                    let inputs = node.clone();
                    blocking_io(&src, move || inputs.write_layer(&rootfs, &store, &layer)).await?
                };
                task.set("writing the docker archive");
                let out = staging.join("bin");
                let archive = out.join(ARCHIVE);
                let layers = vec![
                    Layer {
                        path: tar,
                        diff_id: node.rootfs.digest.clone(),
                    },
                    Layer {
                        path: layer.clone(),
                        diff_id: diff_id.clone(),
                    },
                ];
                let tag = node.tag();
                let id = blocking_io(&archive, {
                    let (archive, tag) = (archive.clone(), tag.clone());
                    move || archive::write_docker_archive(&archive, &tag, &run_config(), &layers)
                })
                .await?;
                let _ = std::fs::remove_file(&layer);
                let size = std::fs::metadata(&archive)
                    .map_err(|e| ToolchainError::io(&archive, e))?
                    .len();
                let image = KindNodeImage {
                    archive: PathBuf::from(ARCHIVE),
                    tag,
                    kubernetes: node.version,
                    kind_release: node.recipe.kind_release.into(),
                    images: names,
                    id,
                    size,
                };
                let json = out.join(IMAGE_JSON);
                std::fs::write(
                    &json,
                    serde_json::to_vec_pretty(&image).expect("serializes"),
                )
                .map_err(|e| ToolchainError::io(&json, e))?;
                task.finish(&format!(
                    "built {key} in {:.0?} ({} MB)",
                    Duration::from_secs(started.elapsed().as_secs()),
                    size / 1_000_000
                ));
                Ok(Manifest {
                    key: key.clone(),
                    binaries: vec![ARCHIVE.into(), IMAGE_JSON.into()],
                    built_with: format!("harness {}", env!("CARGO_PKG_VERSION")),
                    build_seconds: started.elapsed().as_secs(),
                })
            })
            .await?;
        let json = install.binary(IMAGE_JSON);
        let bytes = std::fs::read(&json).map_err(|e| ToolchainError::io(&json, e))?;
        let mut image: KindNodeImage = serde_json::from_slice(&bytes).map_err(|e| {
            ToolchainError::io(
                &json,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        image.archive = install.binary(ARCHIVE);
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_class_is_the_one_the_harness_provisioner_serves() {
        use crate::cluster::local::provisioner;
        assert_eq!(STORAGE_PROVISIONER, provisioner::PROVISIONER);
        let ours: k8s_openapi::api::storage::v1::StorageClass =
            serde_saphyr::from_str(STORAGE_MANIFEST).unwrap();
        assert_eq!(ours, provisioner::default_storage_class());
    }

    #[test]
    fn the_node_runs_kind_s_entrypoint_and_stops_on_sigrtmin_3() {
        let c = run_config();
        assert_eq!(c.entrypoint, ["/usr/local/bin/entrypoint", "/sbin/init"]);
        assert_eq!(c.stop_signal, "SIGRTMIN+3");
        assert!(c.env.contains(&"container=docker".to_string()));
    }
}
