//! The node image as the file `docker load` reads: a docker archive
//! ([`write_docker_archive`]: `manifest.json`, the image config, one `layer.tar` per layer),
//! whose added layer [`LayerWriter`] writes from files on disk. Streams throughout, hashing on
//! the way: no layer is held in memory.
//!
//! Layers are reproducible where their inputs are: entries in the order written (sorted where
//! they come from a directory), every mtime the epoch, owned by root.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;

use super::super::oci::EPOCH;

/// A writer that hashes what goes through it (sha256).
pub struct HashingWriter<W> {
    inner: W,
    hash: ring::digest::Context,
    len: u64,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hash: ring::digest::Context::new(&ring::digest::SHA256),
            len: 0,
        }
    }

    /// The inner writer, `sha256:<hex>` of everything written, and its length.
    pub fn finish(self) -> (W, String, u64) {
        (
            self.inner,
            super::digest_string(self.hash.finish()),
            self.len,
        )
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h
}

/// Writes a layer tar to a file, entry by entry, and gives its diff id (the sha256 of the
/// uncompressed tar) at the end.
pub struct LayerWriter {
    tar: tar::Builder<HashingWriter<BufWriter<File>>>,
}

impl LayerWriter {
    /// A layer at `path`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = BufWriter::new(File::create(path)?);
        Ok(Self {
            tar: tar::Builder::new(HashingWriter::new(file)),
        })
    }

    /// A directory (`/usr/bin`).
    pub fn dir(&mut self, path: &str, mode: u32) -> std::io::Result<()> {
        let mut h = header(tar::EntryType::Directory, mode, 0);
        let name = format!("{}/", path.trim_start_matches('/'));
        self.tar.append_data(&mut h, name, std::io::empty())
    }

    /// A file with `data`.
    pub fn bytes(&mut self, path: &str, mode: u32, data: &[u8]) -> std::io::Result<()> {
        let mut h = header(tar::EntryType::Regular, mode, data.len() as u64);
        self.tar
            .append_data(&mut h, path.trim_start_matches('/'), data)
    }

    /// A file with the contents of `src` (streamed).
    pub fn file(&mut self, path: &str, mode: u32, src: &Path) -> std::io::Result<()> {
        let f = File::open(src)?;
        let mut h = header(tar::EntryType::Regular, mode, f.metadata()?.len());
        self.tar
            .append_data(&mut h, path.trim_start_matches('/'), f)
    }

    /// A symbolic link.
    pub fn symlink(&mut self, path: &str, target: &str) -> std::io::Result<()> {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        self.tar
            .append_link(&mut h, path.trim_start_matches('/'), target)
    }

    /// The tree at `src` as `path` (its directories, files and links, sorted, with their
    /// modes); anything else in it is refused.
    pub fn tree(&mut self, path: &str, src: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(src)?;
        let mode = meta.permissions().mode() & 0o7777;
        let kind = meta.file_type();
        if kind.is_symlink() {
            return self.symlink(path, &std::fs::read_link(src)?.display().to_string());
        }
        if kind.is_file() {
            return self.file(path, mode, src);
        }
        if !kind.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is neither a file, a directory nor a link",
                    src.display()
                ),
            ));
        }
        self.dir(path, mode)?;
        let mut names: Vec<_> = std::fs::read_dir(src)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for n in names {
            let child = format!("{}/{}", path.trim_end_matches('/'), n.to_string_lossy());
            self.tree(&child, &src.join(&n))?;
        }
        Ok(())
    }

    /// Ends the tar; its diff id (`sha256:<hex>`).
    pub fn finish(self) -> std::io::Result<String> {
        let hashing = self.tar.into_inner()?;
        let (mut file, digest, _) = hashing.finish();
        file.flush()?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(digest)
    }
}

/// What the node container runs: the `config` of its image config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunConfig {
    /// `NAME=value` pairs.
    #[serde(rename = "Env")]
    pub env: Vec<String>,
    /// The entrypoint.
    #[serde(rename = "Entrypoint")]
    pub entrypoint: Vec<String>,
    /// The signal that stops it.
    #[serde(rename = "StopSignal")]
    pub stop_signal: String,
}

#[derive(Serialize)]
struct ConfigFile<'a> {
    architecture: &'a str,
    os: &'a str,
    created: &'a str,
    config: &'a RunConfig,
    rootfs: RootFs<'a>,
}

#[derive(Serialize)]
struct RootFs<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    diff_ids: &'a [String],
}

/// The image config of a linux/amd64 image running `config` over layers `diff_ids`.
pub fn config_json(config: &RunConfig, diff_ids: &[String]) -> Vec<u8> {
    serde_json::to_vec(&ConfigFile {
        architecture: "amd64",
        os: "linux",
        created: EPOCH,
        config,
        rootfs: RootFs {
            kind: "layers",
            diff_ids,
        },
    })
    .expect("the config serializes")
}

#[derive(Serialize)]
struct ManifestEntry<'a> {
    #[serde(rename = "Config")]
    config: &'a str,
    #[serde(rename = "RepoTags")]
    repo_tags: [&'a str; 1],
    #[serde(rename = "Layers")]
    layers: &'a [String],
}

/// `manifest.json` of a docker archive holding one image tagged `tag`.
pub fn manifest_json(config: &str, tag: &str, layers: &[String]) -> Vec<u8> {
    serde_json::to_vec(&[ManifestEntry {
        config,
        repo_tags: [tag],
        layers,
    }])
    .expect("the manifest serializes")
}

/// A layer for [`write_docker_archive`]: the tar and its diff id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The uncompressed layer tar.
    pub path: std::path::PathBuf,
    /// `sha256:<hex>` of it.
    pub diff_id: String,
}

/// Writes the docker archive of an image tagged `tag`, running `config` over `layers` (base
/// first), to `out`: `manifest.json`, `<config digest>.json`, `<diff id>/layer.tar` each. The
/// layers are copied as they are. Returns the config's digest (the image id).
pub fn write_docker_archive(
    out: &Path,
    tag: &str,
    config: &RunConfig,
    layers: &[Layer],
) -> std::io::Result<String> {
    let diff_ids: Vec<String> = layers.iter().map(|l| l.diff_id.clone()).collect();
    let config_bytes = config_json(config, &diff_ids);
    let config_digest = super::super::oci::sha256(&config_bytes);
    let config_name = format!("{}.json", config_digest.trim_start_matches("sha256:"));
    let layer_names: Vec<String> = diff_ids
        .iter()
        .map(|d| format!("{}/layer.tar", d.trim_start_matches("sha256:")))
        .collect();
    let mut tar = tar::Builder::new(BufWriter::new(File::create(out)?));
    let manifest = manifest_json(&config_name, tag, &layer_names);
    let mut h = header(tar::EntryType::Regular, 0o644, manifest.len() as u64);
    tar.append_data(&mut h, "manifest.json", manifest.as_slice())?;
    let mut h = header(tar::EntryType::Regular, 0o644, config_bytes.len() as u64);
    tar.append_data(&mut h, &config_name, config_bytes.as_slice())?;
    for (layer, name) in layers.iter().zip(&layer_names) {
        let dir = name.trim_end_matches("/layer.tar");
        let mut h = header(tar::EntryType::Directory, 0o755, 0);
        tar.append_data(&mut h, format!("{dir}/"), std::io::empty())?;
        let f = File::open(&layer.path)?;
        let mut h = header(tar::EntryType::Regular, 0o644, f.metadata()?.len());
        tar.append_data(&mut h, name, f)?;
    }
    let mut file = tar.into_inner()?;
    file.flush()?;
    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(config_digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::Read;

    fn run_config() -> RunConfig {
        RunConfig {
            env: vec!["container=docker".into()],
            entrypoint: vec!["/usr/local/bin/entrypoint".into(), "/sbin/init".into()],
            stop_signal: "SIGRTMIN+3".into(),
        }
    }

    fn read_tar(path: &Path) -> BTreeMap<String, (tar::EntryType, u32, Vec<u8>)> {
        let mut out = BTreeMap::new();
        let mut a = tar::Archive::new(File::open(path).unwrap());
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let h = e.header().clone();
            assert_eq!(h.mtime().unwrap(), 0, "{name}");
            assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0), "{name}");
            let mut data = vec![];
            e.read_to_end(&mut data).unwrap();
            if h.entry_type() == tar::EntryType::Symlink {
                data = e
                    .link_name()
                    .unwrap()
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes();
            }
            out.insert(name, (h.entry_type(), h.mode().unwrap(), data));
        }
        out
    }

    #[test]
    fn a_layer_holds_what_was_written_and_its_diff_id_is_its_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("io.containerd.content.v1.content/blobs")).unwrap();
        std::fs::write(src.join("meta.db"), b"bolt").unwrap();
        std::fs::write(tmp.path().join("kubeadm"), b"kubeadm binary").unwrap();
        let path = tmp.path().join("layer.tar");
        let mut w = LayerWriter::create(&path).unwrap();
        w.dir("/usr", 0o755).unwrap();
        w.dir("/usr/bin", 0o755).unwrap();
        w.file("/usr/bin/kubeadm", 0o755, &tmp.path().join("kubeadm"))
            .unwrap();
        w.bytes("/kind/version", 0o644, b"v1.32.5").unwrap();
        w.symlink("/usr/bin/k", "kubeadm").unwrap();
        w.tree("/var/lib/containerd", &src).unwrap();
        let diff_id = w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(diff_id, super::super::super::oci::sha256(&bytes));
        let got = read_tar(&path);
        assert_eq!(got["usr/bin/kubeadm"].2, b"kubeadm binary");
        assert_eq!(got["usr/bin/kubeadm"].1, 0o755);
        assert_eq!(got["kind/version"].2, b"v1.32.5");
        assert_eq!(got["usr/bin/k"].2, b"kubeadm");
        assert_eq!(got["var/lib/containerd/meta.db"].2, b"bolt");
        assert_eq!(
            got["var/lib/containerd/io.containerd.content.v1.content/blobs/"].0,
            tar::EntryType::Directory
        );
    }

    #[test]
    fn the_docker_archive_ties_manifest_config_and_layers() {
        let tmp = tempfile::tempdir().unwrap();
        let mut layers = vec![];
        for (i, body) in [&b"base"[..], b"added"].iter().enumerate() {
            let path = tmp.path().join(format!("l{i}.tar"));
            let mut w = LayerWriter::create(&path).unwrap();
            w.bytes(&format!("/f{i}"), 0o644, body).unwrap();
            layers.push(Layer {
                diff_id: w.finish().unwrap(),
                path,
            });
        }
        let out = tmp.path().join("image.tar");
        let id = write_docker_archive(
            &out,
            "harness.local/kind-node:v1.32.5-abc",
            &run_config(),
            &layers,
        )
        .unwrap();
        let got = read_tar(&out);
        let manifest: serde_json::Value = serde_json::from_slice(&got["manifest.json"].2).unwrap();
        let m = &manifest[0];
        assert_eq!(m["RepoTags"][0], "harness.local/kind-node:v1.32.5-abc");
        let config_name = m["Config"].as_str().unwrap();
        assert_eq!(
            config_name,
            format!("{}.json", id.trim_start_matches("sha256:"))
        );
        let config_bytes = &got[config_name].2;
        assert_eq!(super::super::super::oci::sha256(config_bytes), id);
        let config: serde_json::Value = serde_json::from_slice(config_bytes).unwrap();
        assert_eq!(config["config"]["StopSignal"], "SIGRTMIN+3");
        assert_eq!(config["config"]["Env"][0], "container=docker");
        assert_eq!(config["config"]["Entrypoint"][1], "/sbin/init");
        assert_eq!(
            (config["os"].clone(), config["architecture"].clone()),
            ("linux".into(), "amd64".into())
        );
        for (i, layer) in layers.iter().enumerate() {
            let name = m["Layers"][i].as_str().unwrap();
            assert_eq!(
                name,
                format!("{}/layer.tar", layer.diff_id.trim_start_matches("sha256:"))
            );
            let body = &got[name].2;
            assert_eq!(
                body,
                &std::fs::read(&layer.path).unwrap(),
                "copied as it is"
            );
            assert_eq!(super::super::super::oci::sha256(body), layer.diff_id);
            assert_eq!(config["rootfs"]["diff_ids"][i], layer.diff_id.as_str());
        }
        assert_eq!(config["rootfs"]["type"], "layers");
    }
}
