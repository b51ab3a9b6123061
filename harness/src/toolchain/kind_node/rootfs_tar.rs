//! Reading a root file system's tar without unpacking it: [`RootfsTar`] indexes its headers,
//! resolves paths through its symbolic links as the kernel would inside it, and reads single
//! files by seeking to them.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// One entry of a [`RootfsTar`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory with its mode.
    Dir(u32),
    /// A regular file: mode, where its data starts in the tar, its size.
    File {
        /// Permission bits.
        mode: u32,
        /// Offset of its data in the tar.
        offset: u64,
        /// Its size.
        size: u64,
    },
    /// A symbolic link and its target.
    Symlink(String),
    /// A hard link to another path of the tar.
    Hardlink(String),
}

/// An index of a root file system's tar, to read single files without unpacking it. Paths
/// are absolute (`/usr/sbin/nft`).
#[derive(Debug, Clone, Default)]
pub struct RootfsTar {
    /// The tar (empty for an index built in memory).
    pub path: PathBuf,
    /// Every entry by path.
    pub nodes: BTreeMap<String, Node>,
}

/// `./usr/bin/` and `usr/bin` as `/usr/bin`.
fn absolute(p: &str) -> String {
    let trimmed = p
        .trim_start_matches("./")
        .trim_start_matches('/')
        .trim_end_matches('/');
    format!("/{trimmed}")
}

impl RootfsTar {
    /// Reads the index of the tar at `path` (headers only).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let mut archive = tar::Archive::new(std::fs::File::open(path)?);
        let mut nodes = BTreeMap::new();
        for entry in archive.entries_with_seek()? {
            let entry = entry?;
            let name = absolute(&entry.path()?.display().to_string());
            let h = entry.header();
            let mode = h.mode()? & 0o7777;
            let link = || -> std::io::Result<String> {
                Ok(entry
                    .link_name()?
                    .map(|l| l.display().to_string())
                    .unwrap_or_default())
            };
            let node = match h.entry_type() {
                tar::EntryType::Directory => Node::Dir(mode),
                tar::EntryType::Regular | tar::EntryType::Continuous => Node::File {
                    mode,
                    offset: entry.raw_file_position(),
                    size: entry.size(),
                },
                tar::EntryType::Symlink => Node::Symlink(link()?),
                tar::EntryType::Link => Node::Hardlink(absolute(&link()?)),
                _ => continue,
            };
            nodes.insert(name, node);
        }
        Ok(Self {
            path: path.to_path_buf(),
            nodes,
        })
    }

    /// Where `path` leads: the canonical path of what it names, and the symbolic links passed
    /// on the way (`(link, target)`), or `None` if it leads nowhere.
    pub fn resolve(&self, path: &str) -> Option<(String, Vec<(String, String)>)> {
        let mut queue: VecDeque<String> = path.split('/').map(String::from).collect();
        let mut cur = String::new();
        let mut links = vec![];
        while let Some(c) = queue.pop_front() {
            match c.as_str() {
                "" | "." => continue,
                ".." => {
                    cur.truncate(cur.rfind('/').unwrap_or(0));
                    continue;
                }
                _ => {}
            }
            let next = format!("{cur}/{c}");
            match self.nodes.get(&next)? {
                Node::Symlink(target) => {
                    if links.len() > 40 {
                        return None;
                    }
                    links.push((next, target.clone()));
                    if target.starts_with('/') {
                        cur.clear();
                    }
                    for t in target.split('/').rev() {
                        queue.push_front(t.to_string());
                    }
                }
                _ => cur = next,
            }
        }
        Some((if cur.is_empty() { "/".into() } else { cur }, links))
    }

    /// The regular file at canonical `path` (hard links followed): its mode and contents.
    pub fn read(&self, path: &str) -> std::io::Result<(u32, Vec<u8>)> {
        let missing = || std::io::Error::new(std::io::ErrorKind::NotFound, path.to_string());
        match self.nodes.get(path).ok_or_else(missing)? {
            Node::File { mode, offset, size } => {
                let mut f = std::fs::File::open(&self.path)?;
                f.seek(SeekFrom::Start(*offset))?;
                let mut data = vec![0; *size as usize];
                f.read_exact(&mut data)?;
                Ok((*mode, data))
            }
            Node::Hardlink(target) => self.read(target),
            _ => Err(missing()),
        }
    }

    /// Whether canonical `path` is a regular file (or a hard link to one).
    pub fn is_file(&self, path: &str) -> bool {
        match self.nodes.get(path) {
            Some(Node::File { .. }) => true,
            Some(Node::Hardlink(target)) => self.is_file(target),
            _ => false,
        }
    }

    /// The mode of the directory at canonical `path` (0755 when the tar does not list it).
    pub fn dir_mode(&self, path: &str) -> u32 {
        match self.nodes.get(path) {
            Some(Node::Dir(mode)) => *mode,
            _ => 0o755,
        }
    }

    /// The paths directly in directory `dir` (canonical), sorted.
    pub fn list(&self, dir: &str) -> Vec<String> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter(|(p, _)| !p[prefix.len()..].contains('/'))
            .map(|(p, _)| p.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> RootfsTar {
        let file = |size| Node::File {
            mode: 0o644,
            offset: 0,
            size,
        };
        RootfsTar {
            path: PathBuf::new(),
            nodes: BTreeMap::from([
                ("/lib".into(), Node::Symlink("usr/lib".into())),
                ("/lib64".into(), Node::Symlink("usr/lib64".into())),
                ("/usr".into(), Node::Dir(0o755)),
                ("/usr/lib".into(), Node::Dir(0o755)),
                ("/usr/lib64".into(), Node::Dir(0o755)),
                (
                    "/usr/lib64/ld-linux-x86-64.so.2".into(),
                    Node::Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2".into()),
                ),
                ("/usr/lib/x86_64-linux-gnu".into(), Node::Dir(0o755)),
                (
                    "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2".into(),
                    file(1),
                ),
                (
                    "/usr/lib/x86_64-linux-gnu/libmnl.so.0".into(),
                    Node::Symlink("libmnl.so.0.2.0".into()),
                ),
                ("/usr/lib/x86_64-linux-gnu/libmnl.so.0.2.0".into(), file(2)),
                ("/usr/lib/x86_64-linux-gnu/xtables".into(), Node::Dir(0o755)),
                (
                    "/usr/lib/x86_64-linux-gnu/xtables/libxt_a.so".into(),
                    file(3),
                ),
            ]),
        }
    }

    #[test]
    fn paths_resolve_through_every_link_on_the_way() {
        let idx = index();
        let (path, links) = idx.resolve("/lib64/ld-linux-x86-64.so.2").unwrap();
        assert_eq!(path, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
        let names: Vec<&str> = links.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(names, ["/lib64", "/usr/lib64/ld-linux-x86-64.so.2", "/lib"]);
        let (path, links) = idx.resolve("/lib/x86_64-linux-gnu/libmnl.so.0").unwrap();
        assert_eq!(path, "/usr/lib/x86_64-linux-gnu/libmnl.so.0.2.0");
        assert_eq!(links.len(), 2);
        assert_eq!(idx.resolve("/lib/x86_64-linux-gnu/libnone.so.1"), None);
        assert_eq!(
            idx.list("/usr/lib/x86_64-linux-gnu/xtables"),
            ["/usr/lib/x86_64-linux-gnu/xtables/libxt_a.so"]
        );
    }

    #[test]
    fn a_tar_is_indexed_and_its_files_read_without_unpacking() {
        let dir = tempfile::tempdir().unwrap();
        let tar = dir.path().join("rootfs.tar");
        let entries = vec![
            super::super::super::oci::Entry::Dir {
                path: "/usr".into(),
                mode: 0o755,
            },
            super::super::super::oci::Entry::File {
                path: "/usr/tool".into(),
                mode: 0o755,
                data: b"tool bytes".to_vec(),
            },
            super::super::super::oci::Entry::Symlink {
                path: "/tool".into(),
                target: "usr/tool".into(),
            },
        ];
        std::fs::write(&tar, super::super::super::oci::layer_tar(&entries).unwrap()).unwrap();
        let idx = RootfsTar::open(&tar).unwrap();
        let (path, _) = idx.resolve("/tool").unwrap();
        assert_eq!(idx.read(&path).unwrap(), (0o755, b"tool bytes".to_vec()));
        assert_eq!(idx.dir_mode("/usr"), 0o755);
        assert!(idx.read("/usr").is_err());
    }
}
