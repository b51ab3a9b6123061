//! The library's layers only point down: a module never uses a module of a layer above it
//! (unit tests at the end of a file aside). A source scan, no compiler needed; the layers are
//! the library's table, `harness::layers::MODULES`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A top-level module's layer: the table is the library's own (`harness::layers::MODULES`),
/// which the book's layers page is generated from.
fn layer(module: &str) -> Option<u8> {
    harness::layers::layer(module)
}

/// The top-level module a source file belongs to.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    if let Ok(rel) = file.strip_prefix(root.join("suites")) {
        return rel.to_str().map(|_| "suites".to_string());
    }
    let rel = file.strip_prefix(root.join("harness/src")).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_string())
}

/// The top-level modules named as `crate::<module>` in the code of `text` (comments and the
/// trailing test module skipped).
fn uses(text: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or_default();
                for part in inner.split(',') {
                    let name: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.push((i + 1, name));
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push((i + 1, name));
            }
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn modules_only_use_layers_below_or_their_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = vec![];
    sources(&root.join("harness/src"), &mut files);
    sources(&root.join("suites"), &mut files);
    files.sort();
    let mut violations = vec![];
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for file in &files {
        let module = module_of(root, file).unwrap();
        if module == "lib" || module == "main" {
            continue;
        }
        let own = layer(&module)
            .unwrap_or_else(|| panic!("{}: module `{module}` has no layer", file.display()));
        *seen.entry(module.clone()).or_default() += 1;
        let text = std::fs::read_to_string(file).unwrap();
        for (line, used) in uses(&text) {
            let Some(theirs) = layer(&used) else {
                panic!("{}:{line}: `crate::{used}` has no layer", file.display());
            };
            if theirs > own {
                violations.push(format!(
                    "{}:{line}: {module} (layer {own}) uses {used} (layer {theirs})",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports that point up:\n{}",
        violations.join("\n")
    );
    assert!(seen.len() >= 10, "the scan read the modules: {seen:?}");
}

#[test]
fn the_scan_sees_grouped_and_plain_uses_and_skips_comments_and_tests() {
    let text = "use crate::{cluster::Profile, run};\n// crate::cli\nlet x = crate::matrix::f(); // crate::bench\n#[cfg(test)]\nuse crate::cli;\n";
    let names: Vec<String> = uses(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["cluster", "run", "matrix"]);
}

/// The names of OpenKruise's implementation: its Go module and controller module, its
/// binaries, its namespace and its components. The APIs it serves (`apps.kruise.io`,
/// `CloneSet`) are what the scenarios test, and are not among them.
const IMPLEMENTATION_NAMES: &[&str] = &[
    "openkruise",
    "kruise-manager",
    "kruise-daemon",
    "kruise-system",
    "kruise-e2e",
    "kruise-controller",
];

/// The code of `text` (comments and the trailing test module left out), line by line.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        out.push((i + 1, line));
    }
    out
}

#[test]
fn above_the_controller_layer_no_code_names_openkruise() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let controller = layer("controller").unwrap();
    let mut files = vec![];
    sources(&root.join("harness/src"), &mut files);
    sources(&root.join("suites"), &mut files);
    files.sort();
    let mut found = vec![];
    let mut read = 0;
    for file in &files {
        let module = module_of(root, file).unwrap();
        if layer(&module).is_none_or(|l| l <= controller) {
            continue;
        }
        read += 1;
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_lines(&text) {
            let lower = line.to_lowercase();
            if let Some(name) = IMPLEMENTATION_NAMES.iter().find(|w| lower.contains(*w)) {
                found.push(format!(
                    "{}:{n}: `{name}` in {}",
                    file.strip_prefix(root).unwrap().display(),
                    line.trim()
                ));
            }
        }
    }
    assert!(
        read > 50,
        "the scan read the files above the controller layer"
    );
    assert!(
        found.is_empty(),
        "OpenKruise is reached only through the Controller trait above its layer:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_name_scan_skips_comments_and_tests() {
    let text = "// openkruise\nlet a = 1;\n#[cfg(test)]\nlet b = \"openkruise\";\n";
    assert_eq!(code_lines(text), [(2, "let a = 1;")]);
}
