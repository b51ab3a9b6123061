//! The offline kind node image: built for Kubernetes 1.32 with the real toolchain cache, then
//! read back from its docker archive the way `docker load` reads it, and its content store
//! opened by the node's own containerd.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use harness::progress::Progress;
use harness::toolchain::kind_node::containerd::PrivateContainerd;
use harness::toolchain::kind_node::kubeadm_images;
use harness::toolchain::kind_node::rootfs_tar::RootfsTar;
use harness::toolchain::oci::{self, Entry};
use harness::toolchain::{Cache, KubeVersion, Toolchain};

/// A reader that hashes what it reads (sha256).
struct Hashing<R> {
    inner: R,
    hash: ring::digest::Context,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// What one layer holds: its digest, every path with its kind, the small files' contents, and
/// the content store extracted under `store`.
#[derive(Default)]
struct LayerView {
    digest: String,
    paths: BTreeMap<String, tar::EntryType>,
    small: BTreeMap<String, Vec<u8>>,
}

/// The files read whole (everything else is only listed).
const SMALL: &[&str] = &[
    "kind/version",
    "kind/manifests/default-storage.yaml",
    "etc/containerd/config.toml",
];

/// The binaries taken out of the root file system to open the content store.
const RUNTIME: &[&str] = &["usr/bin/containerd", "usr/bin/ctr"];

fn read_layer(reader: impl Read, store: &Path, runtime: &mut Vec<Entry>) -> LayerView {
    let mut hashing = Hashing {
        inner: reader,
        hash: ring::digest::Context::new(&ring::digest::SHA256),
    };
    let mut view = LayerView::default();
    {
        let mut layer = tar::Archive::new(&mut hashing);
        for entry in layer.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry
                .path()
                .unwrap()
                .display()
                .to_string()
                .trim_start_matches("./")
                .trim_end_matches('/')
                .to_string();
            let kind = entry.header().entry_type();
            if SMALL.contains(&path.as_str()) || RUNTIME.contains(&path.as_str()) {
                let mut data = vec![];
                entry.read_to_end(&mut data).unwrap();
                if RUNTIME.contains(&path.as_str()) {
                    runtime.push(Entry::File {
                        path: format!("/{path}"),
                        mode: 0o755,
                        data,
                    });
                } else {
                    view.small.insert(path.clone(), data);
                }
            } else if let Some(rel) = path.strip_prefix("var/lib/containerd/") {
                entry.unpack(store.join(rel)).unwrap();
            }
            view.paths.insert(path, kind);
        }
    }
    std::io::copy(&mut hashing, &mut std::io::sink()).unwrap();
    let hex: String = hashing
        .hash
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    view.digest = format!("sha256:{hex}");
    view
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "nightly tier: builds the kind node image (minutes cold; needs root, Go and a Debian mirror)"]
async fn the_node_image_holds_kubernetes_and_every_image_kubeadm_asks_for() {
    let tc = Toolchain::new(Cache::from_env(), Progress::plain());
    let version: KubeVersion = "1.32".parse().unwrap();
    let started = Instant::now();
    let image = tc
        .kind_node_image(version)
        .await
        .unwrap_or_else(|e| panic!("the node image builds: {e:?}"));
    eprintln!(
        "node image {} ready in {:.1?} ({} MB): {}",
        image.tag,
        started.elapsed(),
        image.size / 1_000_000,
        image.archive.display()
    );
    let started = Instant::now();
    assert_eq!(tc.kind_node_image(version).await.unwrap(), image);
    eprintln!("cached node image in {:.1?}", started.elapsed());
    assert!(
        image.tag.starts_with("harness.local/kind-node:v1.32.5-"),
        "{}",
        image.tag
    );

    // The archive as `docker load` reads it.
    let tmp = tempfile::Builder::new()
        .prefix("harness-kind-node-test-")
        .tempdir()
        .unwrap();
    let store = tmp.path().join("containerd");
    std::fs::create_dir(&store).unwrap();
    let mut runtime = vec![];
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut layers: BTreeMap<String, LayerView> = BTreeMap::new();
    let mut outer = tar::Archive::new(std::fs::File::open(&image.archive).unwrap());
    for entry in outer.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        if name.ends_with("/layer.tar") {
            let view = read_layer(&mut entry, &store, &mut runtime);
            layers.insert(name, view);
        } else if entry.header().entry_type() == tar::EntryType::Regular {
            let mut data = vec![];
            entry.read_to_end(&mut data).unwrap();
            files.insert(name, data);
        }
    }
    let manifest: serde_json::Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    assert_eq!(manifest[0]["RepoTags"], serde_json::json!([image.tag]));
    let config_name = manifest[0]["Config"].as_str().unwrap();
    let config: serde_json::Value = serde_json::from_slice(&files[config_name]).unwrap();
    assert_eq!(oci::sha256(&files[config_name]), image.id);
    assert_eq!(config["config"]["StopSignal"], "SIGRTMIN+3");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/entrypoint", "/sbin/init"])
    );
    assert!(
        config["config"]["Env"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("container=docker"))
    );
    let order: Vec<&str> = manifest[0]["Layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(order.len(), 2, "the root file system and the added layer");
    for (i, name) in order.iter().enumerate() {
        assert_eq!(
            config["rootfs"]["diff_ids"][i], layers[*name].digest,
            "layer {name} hashes to its diff id"
        );
    }
    let (base, added) = (&layers[order[0]], &layers[order[1]]);
    for p in [
        "usr/local/bin/entrypoint",
        "usr/local/bin/crictl",
        "usr/bin/containerd",
        "usr/sbin/runc",
        "etc/containerd/config.toml",
        "etc/containerd/cri-base.json",
        "etc/systemd/system/kubelet.service",
        "usr/sbin/init",
    ] {
        assert!(base.paths.contains_key(p), "the root file system has /{p}");
    }
    let config_toml = String::from_utf8_lossy(&base.small["etc/containerd/config.toml"]);
    assert!(
        config_toml.contains("sandbox_image = \"harness.local/pause:3.10\""),
        "{config_toml}"
    );
    assert!(config_toml.contains("restrict_oom_score_adj = true"));
    for p in ["usr/bin/kubeadm", "usr/bin/kubelet", "usr/bin/kubectl"] {
        assert_eq!(added.paths.get(p), Some(&tar::EntryType::Regular), "/{p}");
    }
    assert_eq!(added.small["kind/version"], b"v1.32.5");
    assert!(
        String::from_utf8_lossy(&added.small["kind/manifests/default-storage.yaml"])
            .contains("provisioner: harness.local/hostpath")
    );
    assert!(
        added
            .paths
            .contains_key("var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db")
    );

    // The content store, opened by the node's own containerd: every image kubeadm lists,
    // complete and pinned.
    let kubeadm = tc.kubeadm(version).await.unwrap().binary("kubeadm");
    let wanted = kubeadm_images(&kubeadm, version).await.unwrap();
    assert_eq!(wanted.len(), 7, "{wanted:?}");
    for d in ["/usr", "/usr/bin"] {
        runtime.push(Entry::Dir {
            path: d.into(),
            mode: 0o755,
        });
    }
    let runtime_tar = tmp.path().join("runtime.tar");
    std::fs::write(&runtime_tar, oci::layer_tar(&runtime).unwrap()).unwrap();
    let rootfs = RootfsTar::open(&runtime_tar).unwrap();
    let containerd = PrivateContainerd::start(&rootfs, &store).await.unwrap();
    assert_eq!(containerd.images().await.unwrap(), wanted);
    let check = containerd
        .ctr(&["images", "check", "--snapshotter", "native"])
        .await
        .unwrap();
    for name in &wanted {
        let line = check
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in `ctr images check`:\n{check}"));
        assert!(line.contains("complete"), "{line}");
    }
    let listed = containerd.ctr(&["images", "ls"]).await.unwrap();
    for name in &wanted {
        let line = listed
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in `ctr images ls`:\n{listed}"));
        assert!(line.contains("io.cri-containerd.pinned=pinned"), "{line}");
    }
    let dir = containerd.dir().to_path_buf();
    containerd.stop().await.unwrap();
    assert!(!dir.exists(), "the containerd's own dir is removed with it");
}
