//! The OCI image format as pure functions: start with [`Image::build`], which turns an
//! [`ImageConfig`] and the [`Entry`]s of one layer into content-addressed blobs (a gzip'ed tar
//! layer, a config, a manifest). [`write_layout`] stores them as an OCI image layout directory
//! and [`read_layout`] reads one back; [`archive`] packs a layout into the tarball that
//! `ctr images import` reads.
//!
//! Everything is reproducible: entries are sorted, every mtime is the epoch, owners are root,
//! and gzip carries no timestamp, so the same inputs always give the same digests.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Media type of an image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of an image index (`index.json`).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// Media type of an image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of a gzip'ed tar layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The annotation containerd reads an imported image's full name from.
pub const CONTAINERD_NAME_ANNOTATION: &str = "io.containerd.image.name";
/// The OCI annotation naming a manifest of a layout (its tag).
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";
/// The contents of a layout's `oci-layout` file.
pub const OCI_LAYOUT: &str = "{\"imageLayoutVersion\":\"1.0.0\"}";
/// Creation time recorded in every config (images are reproducible, so it is the epoch).
pub const EPOCH: &str = "1970-01-01T00:00:00Z";

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for b in d.as_ref() {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// A reference to a blob: media type, digest, size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Media type.
    #[serde(rename = "mediaType")]
    pub media_type: String,
    /// `sha256:<hex>` of the blob.
    pub digest: String,
    /// Size of the blob in bytes.
    pub size: u64,
    /// Annotations (in `index.json`: the image's name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Self {
        Self {
            media_type: media_type.to_string(),
            digest: sha256(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }

    /// The hex part of the digest (the blob's file name in a layout).
    pub fn hex(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }
}

/// One file system entry of a layer. Paths are absolute (`/bin/sh`); parents must be listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir {
        /// Path.
        path: String,
        /// Permission bits.
        mode: u32,
    },
    /// A regular file.
    File {
        /// Path.
        path: String,
        /// Permission bits.
        mode: u32,
        /// Contents.
        data: Vec<u8>,
    },
    /// A symbolic link.
    Symlink {
        /// Path.
        path: String,
        /// What it points to.
        target: String,
    },
}

impl Entry {
    /// Its path.
    pub fn path(&self) -> &str {
        match self {
            Entry::Dir { path, .. } | Entry::File { path, .. } | Entry::Symlink { path, .. } => {
                path
            }
        }
    }

    /// Feeds everything that makes this entry into `h` (for cache keys).
    pub fn fingerprint(&self, h: &mut ring::digest::Context) {
        let (kind, mode, body): (&[u8], u32, &[u8]) = match self {
            Entry::Dir { mode, .. } => (b"d", *mode, b""),
            Entry::File { mode, data, .. } => (b"f", *mode, data),
            Entry::Symlink { target, .. } => (b"l", 0o777, target.as_bytes()),
        };
        h.update(kind);
        h.update(self.path().as_bytes());
        h.update(&mode.to_le_bytes());
        h.update(&(body.len() as u64).to_le_bytes());
        h.update(body);
    }
}

/// The uncompressed tar of `entries`, sorted by path, every mtime the epoch, owned by root.
pub fn layer_tar(entries: &[Entry]) -> std::io::Result<Vec<u8>> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path().cmp(b.path()));
    let mut tar = tar::Builder::new(Vec::new());
    for e in sorted {
        let name = e.path().trim_start_matches('/');
        let mut h = tar::Header::new_ustar();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("root")?;
        h.set_groupname("root")?;
        match e {
            Entry::Dir { mode, .. } => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_size(0);
                tar.append_data(&mut h, format!("{name}/"), std::io::empty())?;
            }
            Entry::File { mode, data, .. } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                tar.append_data(&mut h, name, data.as_slice())?;
            }
            Entry::Symlink { target, .. } => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, name, target)?;
            }
        }
    }
    tar.into_inner()
}

/// `bytes` gzip'ed with no name and no timestamp in the header.
pub fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes)?;
    enc.finish()
}

/// What an image runs: the `config` part of an OCI image config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `NAME=value` pairs.
    #[serde(rename = "Env", default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// The entrypoint.
    #[serde(rename = "Entrypoint", default, skip_serializing_if = "Vec::is_empty")]
    pub entrypoint: Vec<String>,
    /// The default command (arguments to the entrypoint).
    #[serde(rename = "Cmd", default, skip_serializing_if = "Vec::is_empty")]
    pub cmd: Vec<String>,
    /// The working directory.
    #[serde(
        rename = "WorkingDir",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub working_dir: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ConfigFile {
    created: String,
    architecture: String,
    os: String,
    config: ImageConfig,
    rootfs: RootFs,
}

#[derive(Debug, Serialize, Deserialize)]
struct RootFs {
    #[serde(rename = "type")]
    kind: String,
    diff_ids: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestFile {
    schema_version: u32,
    media_type: String,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexFile {
    schema_version: u32,
    media_type: String,
    manifests: Vec<Descriptor>,
}

/// A built image: its blobs by digest and the descriptors that tie them together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The manifest's descriptor (its digest is the image's digest).
    pub manifest: Descriptor,
    /// The config's descriptor.
    pub config: Descriptor,
    /// The layers' descriptors, base first.
    pub layers: Vec<Descriptor>,
    /// Every blob (manifest, config, layers) by digest.
    pub blobs: BTreeMap<String, Vec<u8>>,
}

impl Image {
    /// Builds a linux/amd64 image of one layer holding `entries`, running `config`.
    pub fn build(config: &ImageConfig, entries: &[Entry]) -> std::io::Result<Self> {
        let tar = layer_tar(entries)?;
        let diff_id = sha256(&tar);
        let layer = gzip(&tar)?;
        let config_bytes = serde_json::to_vec(&ConfigFile {
            created: EPOCH.into(),
            architecture: "amd64".into(),
            os: "linux".into(),
            config: config.clone(),
            rootfs: RootFs {
                kind: "layers".into(),
                diff_ids: vec![diff_id],
            },
        })
        .expect("config serializes");
        let config_desc = Descriptor::of(CONFIG_MEDIA_TYPE, &config_bytes);
        let layer_desc = Descriptor::of(LAYER_MEDIA_TYPE, &layer);
        let manifest_bytes = serde_json::to_vec(&ManifestFile {
            schema_version: 2,
            media_type: MANIFEST_MEDIA_TYPE.into(),
            config: config_desc.clone(),
            layers: vec![layer_desc.clone()],
        })
        .expect("manifest serializes");
        let manifest = Descriptor::of(MANIFEST_MEDIA_TYPE, &manifest_bytes);
        let blobs = BTreeMap::from([
            (manifest.digest.clone(), manifest_bytes),
            (config_desc.digest.clone(), config_bytes),
            (layer_desc.digest.clone(), layer),
        ]);
        Ok(Self {
            manifest,
            config: config_desc,
            layers: vec![layer_desc],
            blobs,
        })
    }
}

/// The `index.json` of a layout holding one manifest named `name` (`host/repo:tag`) with tag
/// `tag`.
pub fn index_json(manifest: &Descriptor, name: &str, tag: &str) -> Vec<u8> {
    let mut m = manifest.clone();
    m.annotations = BTreeMap::from([
        (CONTAINERD_NAME_ANNOTATION.to_string(), name.to_string()),
        (REF_NAME_ANNOTATION.to_string(), tag.to_string()),
    ]);
    serde_json::to_vec(&IndexFile {
        schema_version: 2,
        media_type: INDEX_MEDIA_TYPE.into(),
        manifests: vec![m],
    })
    .expect("index serializes")
}

/// Writes `image` as an OCI image layout under `dir` (`oci-layout`, `index.json`,
/// `blobs/sha256/<hex>`) and returns the files written, relative to `dir`.
pub fn write_layout(
    dir: &Path,
    image: &Image,
    name: &str,
    tag: &str,
) -> std::io::Result<Vec<String>> {
    let blobs = dir.join("blobs").join("sha256");
    fs::create_dir_all(&blobs)?;
    fs::write(dir.join("oci-layout"), OCI_LAYOUT)?;
    fs::write(
        dir.join("index.json"),
        index_json(&image.manifest, name, tag),
    )?;
    let mut files = vec!["oci-layout".to_string(), "index.json".to_string()];
    for (digest, bytes) in &image.blobs {
        let hex = digest.trim_start_matches("sha256:");
        fs::write(blobs.join(hex), bytes)?;
        files.push(format!("blobs/sha256/{hex}"));
    }
    Ok(files)
}

/// What [`read_layout`] finds in a layout of one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The layout directory.
    pub dir: PathBuf,
    /// The manifest (with the annotations of `index.json`).
    pub manifest: Descriptor,
    /// The config.
    pub config: Descriptor,
    /// The layers, base first.
    pub layers: Vec<Descriptor>,
}

impl Layout {
    /// Where a blob lives.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        self.dir
            .join("blobs")
            .join("sha256")
            .join(digest.trim_start_matches("sha256:"))
    }
}

/// Reads the single image of the layout at `dir`.
pub fn read_layout(dir: &Path) -> std::io::Result<Layout> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let index: IndexFile = serde_json::from_slice(&fs::read(dir.join("index.json"))?)
        .map_err(|e| bad(format!("index.json: {e}")))?;
    let [manifest] = index.manifests.as_slice() else {
        return Err(bad(format!(
            "index.json lists {} manifests, not one",
            index.manifests.len()
        )));
    };
    let path = dir.join("blobs").join("sha256").join(manifest.hex());
    let body: ManifestFile =
        serde_json::from_slice(&fs::read(&path)?).map_err(|e| bad(format!("manifest: {e}")))?;
    Ok(Layout {
        dir: dir.to_path_buf(),
        manifest: manifest.clone(),
        config: body.config,
        layers: body.layers,
    })
}

/// Packs the layout at `dir` into an uncompressed tar at `out` (what `ctr images import`
/// and `docker load` read), entries sorted, every mtime the epoch.
pub fn archive(dir: &Path, out: &Path) -> std::io::Result<()> {
    let layout = read_layout(dir)?;
    let mut entries = vec![
        Entry::File {
            path: "/oci-layout".into(),
            mode: 0o644,
            data: fs::read(dir.join("oci-layout"))?,
        },
        Entry::File {
            path: "/index.json".into(),
            mode: 0o644,
            data: fs::read(dir.join("index.json"))?,
        },
        Entry::Dir {
            path: "/blobs".into(),
            mode: 0o755,
        },
        Entry::Dir {
            path: "/blobs/sha256".into(),
            mode: 0o755,
        },
    ];
    let mut digests: Vec<&Descriptor> = vec![&layout.manifest, &layout.config];
    digests.extend(&layout.layers);
    for d in digests {
        entries.push(Entry::File {
            path: format!("/blobs/sha256/{}", d.hex()),
            mode: 0o644,
            data: fs::read(layout.blob_path(&d.digest))?,
        });
    }
    let tar = layer_tar(&entries)?;
    let tmp = out.with_extension("tmp");
    fs::write(&tmp, tar)?;
    fs::rename(&tmp, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<Entry> {
        vec![
            Entry::File {
                path: "/bin/tool".into(),
                mode: 0o755,
                data: b"#!binary".to_vec(),
            },
            Entry::Dir {
                path: "/bin".into(),
                mode: 0o755,
            },
            Entry::Symlink {
                path: "/bin/alias".into(),
                target: "tool".into(),
            },
        ]
    }

    fn config() -> ImageConfig {
        ImageConfig {
            env: vec!["PATH=/bin".into()],
            entrypoint: vec!["/bin/tool".into()],
            ..ImageConfig::default()
        }
    }

    #[test]
    fn every_digest_matches_its_blob_and_the_manifest_ties_them() {
        let img = Image::build(&config(), &entries()).unwrap();
        for (digest, bytes) in &img.blobs {
            assert_eq!(&sha256(bytes), digest);
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&img.blobs[&img.manifest.digest]).unwrap();
        assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
        assert_eq!(manifest["config"]["digest"], img.config.digest.as_str());
        assert_eq!(
            manifest["layers"][0]["digest"],
            img.layers[0].digest.as_str()
        );
        assert_eq!(manifest["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
        let cfg: serde_json::Value =
            serde_json::from_slice(&img.blobs[&img.config.digest]).unwrap();
        assert_eq!(cfg["architecture"], "amd64");
        assert_eq!(cfg["os"], "linux");
        assert_eq!(cfg["config"]["Entrypoint"][0], "/bin/tool");
        // The diff id is the digest of the uncompressed layer.
        let mut tar = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&img.blobs[&img.layers[0].digest][..]),
            &mut tar,
        )
        .unwrap();
        assert_eq!(cfg["rootfs"]["diff_ids"][0], sha256(&tar).as_str());
    }

    #[test]
    fn the_same_inputs_in_any_order_give_the_same_digests() {
        let a = Image::build(&config(), &entries()).unwrap();
        let mut reversed = entries();
        reversed.reverse();
        let b = Image::build(&config(), &reversed).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn the_layer_is_sorted_with_epoch_times_and_root_owners() {
        let tar = layer_tar(&entries()).unwrap();
        let mut archive = tar::Archive::new(&tar[..]);
        let mut seen = vec![];
        for e in archive.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            assert_eq!(h.mtime().unwrap(), 0);
            assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
            seen.push(e.path().unwrap().display().to_string());
        }
        assert_eq!(seen, ["bin/", "bin/alias", "bin/tool"]);
    }

    #[test]
    fn a_layout_reads_back_and_archives_with_every_blob() {
        let tmp = tempfile::tempdir().unwrap();
        let img = Image::build(&config(), &entries()).unwrap();
        let files = write_layout(tmp.path(), &img, "harness.local/tool:v1", "v1").unwrap();
        assert_eq!(files.len(), 5);
        let layout = read_layout(tmp.path()).unwrap();
        assert_eq!(layout.manifest.digest, img.manifest.digest);
        assert_eq!(
            layout.manifest.annotations[CONTAINERD_NAME_ANNOTATION],
            "harness.local/tool:v1"
        );
        assert_eq!(layout.config, img.config);
        assert_eq!(layout.layers, img.layers);
        let out = tmp.path().join("tool.tar");
        archive(tmp.path(), &out).unwrap();
        let bytes = fs::read(&out).unwrap();
        let mut names: Vec<String> = tar::Archive::new(&bytes[..])
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        names.sort();
        assert!(names.contains(&"oci-layout".to_string()));
        assert!(names.contains(&"index.json".to_string()));
        for d in img.blobs.keys() {
            let name = format!("blobs/sha256/{}", d.trim_start_matches("sha256:"));
            assert!(names.contains(&name), "{name} in {names:?}");
        }
    }
}
