//! Lists the declarative tests under `suites/chainsaw/` (every file, recursively) for the
//! catalog to compile in: a test added there is discovered, not listed by hand.

use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).expect("under the root").to_path_buf());
        }
    }
}

fn main() {
    // Read when the script runs, not baked in when it is compiled: a target directory shared
    // by two checkouts runs the same compiled script for both.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../suites/chainsaw");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = vec![];
    walk(&root, &root, &mut files);
    let mut code = String::from("&[\n");
    for f in files {
        let rel = f.to_string_lossy();
        let abs = root.join(&f).canonicalize().expect("an existing file");
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?}) as &[u8]),\n",
            abs.to_string_lossy()
        ));
    }
    code.push_str("]\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("declarative.rs"), code).expect("write declarative.rs");
}
