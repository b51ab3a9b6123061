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
    commit(Path::new(&manifest));
}

/// Names the commit the binary is built from (`HARNESS_COMMIT`, for the reports of benches
/// run with a binary built before its checkout moved on), and has the script run again when
/// the checkout's commit changes; nothing outside a git checkout.
fn commit(dir: &Path) {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "HEAD"]) else {
        return;
    };
    println!("cargo:rustc-env=HARNESS_COMMIT={head}");
    // The files a commit or a checkout changes: HEAD, the branch it names, the packed refs
    // (only those that exist: a path that does not exist would run the script every build).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
