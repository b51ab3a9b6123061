//! The library's layers only point down: a module never uses a module of a layer above it
//! (unit tests at the end of a file aside), and imports go one way: no two modules of one
//! layer, nor two parts of one module (files or directories side by side, e.g. `cluster::any`
//! and `cluster::kind`), import each other, directly or round through others. A source scan,
//! no compiler needed; the layers are the library's table, `harness::layers::MODULES`. And
//! rooms stay small: no source file of `harness/src` over 900 lines but generated types.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A top-level module's layer: the table is the library's own (`harness::layers::MODULES`),
/// which the book's layers page is generated from.
fn layer(module: &str) -> Option<u8> {
    harness::layers::layer(module)
}

/// The top-level module a source file belongs to.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    module_path(root, file).and_then(|at| at.into_iter().next())
}

/// The module a source file is: `["cluster", "kind"]` for `harness/src/cluster/kind/mod.rs`,
/// `["cluster", "any"]` for `harness/src/cluster/any.rs`, `["suites", "cloneset"]` for
/// `suites/cloneset.rs` (compiled in as `harness::suites`).
fn module_path(root: &Path, file: &Path) -> Option<Vec<String>> {
    let (mut at, rel) = match file.strip_prefix(root.join("suites")) {
        Ok(rel) => (vec!["suites".to_string()], rel),
        Err(_) => (vec![], file.strip_prefix(root.join("harness/src")).ok()?),
    };
    for part in rel.components() {
        at.push(
            part.as_os_str()
                .to_str()?
                .trim_end_matches(".rs")
                .to_string(),
        );
    }
    if at.last().is_some_and(|l| l == "mod") {
        at.pop();
    }
    Some(at)
}

/// The top-level modules named as `crate::<module>` (or reached with `super::`) in the code of
/// `text`, the source of module `at` (comments and the trailing test module skipped).
fn uses(text: &str, at: &[String]) -> Vec<(usize, String)> {
    paths(text, at)
        .into_iter()
        .filter_map(|(line, path)| Some((line, path.into_iter().next()?)))
        .collect()
}

/// The code of `text` (comments and the trailing test module, or a whole file of test code
/// marked `#![cfg(test)]`, left out), line by line.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") || code.starts_with("#![cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        out.push((i + 1, line));
    }
    out
}

/// The code of `text`, the source of module `at`, line by line with the module each line is
/// in: comments, trailing comments and the trailing test module left out, and the lines of an
/// inline `mod x {` (rustfmt's layout: its `}` alone at its indentation) in `at::x`.
fn code_in_modules(text: &str, at: &[String]) -> Vec<(usize, Vec<String>, String)> {
    let mut out = vec![];
    let mut inline: Vec<(String, String)> = vec![];
    for (n, line) in code_lines(text) {
        let indent = &line[..line.len() - line.trim_start().len()];
        if inline
            .last()
            .is_some_and(|(i, _)| line.trim_end() == format!("{i}}}"))
        {
            inline.pop();
        }
        let here = at
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, m)| m.clone()))
            .collect();
        let code = line.split("//").next().unwrap_or_default();
        if let [.., "mod", name, "{"] = code.split_whitespace().collect::<Vec<_>>().as_slice() {
            inline.push((indent.to_string(), name.to_string()));
        }
        out.push((n, here, code.to_string()));
    }
    out
}

/// The crate's paths that the code of `text`, the source of module `at`, names from `crate::`,
/// `super::` or `self::` — in a `use` or in place, groups spread over one line or several —
/// each made absolute (`["cluster", "kind", "KindProvider"]`), with its line.
fn paths(text: &str, at: &[String]) -> Vec<(usize, Vec<String>)> {
    let lines = code_in_modules(text, at);
    // The code as one run of characters, each with the index of its line.
    let mut chars = vec![];
    let mut line_of = vec![];
    for (k, (_, _, code)) in lines.iter().enumerate() {
        for c in code.chars().chain(std::iter::once('\n')) {
            chars.push(c);
            line_of.push(k);
        }
    }
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        let after_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let starts = ["crate::", "super::", "self::"].iter().any(|k| {
            let k: Vec<char> = k.chars().collect();
            chars[i..].starts_with(&k)
        });
        if after_word || !starts {
            i += 1;
            continue;
        }
        let (line, here, _) = &lines[line_of[i]];
        let mut found = vec![];
        tree(&chars, &mut i, vec![], &mut found);
        out.extend(found.into_iter().map(|p| (*line, absolute(here, &p))));
    }
    out
}

/// Reads the path or `use` tree at `chars[*i..]` (`a::b`, `a::{b, c::{d, e}}`, `a::*`; spaces
/// and line breaks allowed around `::`, braces and commas) into `out`, each path after
/// `prefix`.
fn tree(chars: &[char], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_space = |i: &mut usize| {
        while chars.get(*i).is_some_and(|c| c.is_whitespace()) {
            *i += 1;
        }
    };
    let mut path = prefix;
    loop {
        skip_space(i);
        match chars.get(*i) {
            Some('{') => {
                *i += 1;
                loop {
                    skip_space(i);
                    match chars.get(*i) {
                        Some('}') => {
                            *i += 1;
                            return;
                        }
                        Some(',') => *i += 1,
                        Some(_) => {
                            let before = *i;
                            tree(chars, i, path.clone(), out);
                            if *i == before {
                                return;
                            }
                        }
                        None => return,
                    }
                }
            }
            Some('*') => {
                *i += 1;
                path.push("*".into());
                out.push(path);
                return;
            }
            Some(c) if c.is_alphabetic() || *c == '_' => {
                let mut word = String::new();
                while let Some(c) = chars.get(*i).filter(|c| c.is_alphanumeric() || **c == '_') {
                    word.push(*c);
                    *i += 1;
                }
                path.push(word);
                let mut next = *i;
                skip_space(&mut next);
                if chars[next..].starts_with(&[':', ':']) {
                    *i = next + 2;
                } else {
                    out.push(path);
                    return;
                }
            }
            _ => {
                if !path.is_empty() {
                    out.push(path);
                }
                return;
            }
        }
    }
}

/// `path` (starting with `crate`, `super` or `self`), named in module `here`, from the crate's
/// root.
fn absolute(here: &[String], path: &[String]) -> Vec<String> {
    let mut out = here.to_vec();
    for (k, segment) in path.iter().enumerate() {
        match segment.as_str() {
            "crate" if k == 0 => out.clear(),
            "super" => {
                out.pop();
            }
            "self" => {}
            _ => out.push(segment.clone()),
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

/// A source file of the library: where it is (from the repository's root), the module it is,
/// its text.
struct Source {
    file: String,
    at: Vec<String>,
    text: String,
}

/// Every source file of the library (`harness/src` and `suites/`) but the crate's root files
/// (`lib.rs`, `main.rs`), in order.
fn library(root: &Path) -> Vec<Source> {
    let mut files = vec![];
    sources(&root.join("harness/src"), &mut files);
    sources(&root.join("suites"), &mut files);
    files.sort();
    files
        .iter()
        .map(|f| Source {
            file: f.strip_prefix(root).unwrap().display().to_string(),
            at: module_path(root, f).unwrap(),
            text: std::fs::read_to_string(f).unwrap(),
        })
        .filter(|s| s.at != ["lib"] && s.at != ["main"])
        .collect()
}

#[test]
fn modules_only_use_layers_below_or_their_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut violations = vec![];
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for source in library(root) {
        let (file, module) = (&source.file, &source.at[0]);
        let own = layer(module).unwrap_or_else(|| panic!("{file}: module `{module}` has no layer"));
        *seen.entry(module.clone()).or_default() += 1;
        for (line, used) in uses(&source.text, &source.at) {
            let Some(theirs) = layer(&used) else {
                panic!("{file}:{line}: `crate::{used}` has no layer");
            };
            if theirs > own {
                violations.push(format!(
                    "{file}:{line}: {module} (layer {own}) uses {used} (layer {theirs})"
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

/// The most lines a source file of `harness/src` may have, its unit tests included: a room
/// holds one concept.
const MOST_LINES: usize = 900;

/// Whether `text` is generated code (kopium's types say so on their first line).
fn generated(text: &str) -> bool {
    text.lines()
        .next()
        .is_some_and(|l| l.starts_with("// WARNING: generated by"))
}

#[test]
fn no_source_file_is_over_the_size_of_one_concept() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = vec![];
    sources(&root.join("harness/src"), &mut files);
    files.sort();
    assert!(
        files.len() > 100,
        "the scan read the sources: {}",
        files.len()
    );
    let over: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let n = text.lines().count();
            (n > MOST_LINES && !generated(&text))
                .then(|| format!("{}: {n} lines", f.strip_prefix(root).unwrap().display()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "files over {MOST_LINES} lines (split them along their concepts):\n{}",
        over.join("\n")
    );
    assert!(generated(
        "// WARNING: generated by kopium - manual changes will be overwritten\n"
    ));
    assert!(!generated("//! A module.\n"));
}

#[test]
fn the_scan_sees_grouped_and_plain_uses_and_skips_comments_and_tests() {
    let text = "use crate::{cluster::Profile, run};\n// crate::cli\nlet x = crate::matrix::f(); // crate::bench\n#[cfg(test)]\nuse crate::cli;\n";
    let names: Vec<String> = uses(text, &["up".into()])
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(names, ["cluster", "run", "matrix"]);
}

#[test]
fn the_scan_reads_groups_over_lines_and_paths_from_super_and_inline_modules() {
    let at = ["cluster".to_string(), "k3s".to_string()];
    let text = "use super::kind::{\n    KindError,\n    registry::{self, Mirror},\n};\nuse super::super::run as r;\nfn f() -> crate::cluster::docker::DockerHost { self::g() }\nmod container {\n    use super::super::{Cluster, any::*};\n}\n";
    let found: Vec<(usize, String)> = paths(text, &at)
        .into_iter()
        .map(|(line, p)| (line, p.join("::")))
        .collect();
    let expected = [
        (1, "cluster::kind::KindError"),
        (1, "cluster::kind::registry"),
        (1, "cluster::kind::registry::Mirror"),
        (5, "run"),
        (6, "cluster::docker::DockerHost"),
        (6, "cluster::k3s::g"),
        (8, "cluster::Cluster"),
        (8, "cluster::any::*"),
    ];
    let expected: Vec<(usize, String)> =
        expected.iter().map(|(l, p)| (*l, p.to_string())).collect();
    assert_eq!(found, expected);
}

/// An import that makes part `from` of a module (or a top-level module) depend on its sibling
/// `to`.
#[derive(Debug)]
struct Edge {
    /// The module both are parts of (empty: the crate, whose parts are the top-level modules).
    scope: Vec<String>,
    from: String,
    to: String,
    /// Where (`file:line`).
    at: String,
}

/// The imports between siblings: between two top-level modules, and between two parts (files
/// or directories side by side) of any module, e.g. `cluster::any` → `cluster::kind`. A
/// module's own front (its `mod.rs`, with its declarations and re-exports) is none of its
/// parts: it uses them and they use what it defines. A path is taken as written: one through a
/// front's re-export (`super::KindProvider` for `super::kind::KindProvider`) reaches the front.
fn sibling_imports(sources: &[Source]) -> Vec<Edge> {
    let mut parts: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for s in sources {
        for d in 0..s.at.len() {
            parts
                .entry(s.at[..d].to_vec())
                .or_default()
                .insert(s.at[d].clone());
        }
    }
    let mut out = vec![];
    for s in sources {
        for (line, path) in paths(&s.text, &s.at) {
            let d = s.at.iter().zip(&path).take_while(|(a, b)| a == b).count();
            if d >= s.at.len() || d >= path.len() {
                continue;
            }
            let scope = s.at[..d].to_vec();
            if parts.get(&scope).is_some_and(|p| p.contains(&path[d])) {
                out.push(Edge {
                    scope,
                    from: s.at[d].clone(),
                    to: path[d].clone(),
                    at: format!("{}:{line}", s.file),
                });
            }
        }
    }
    out
}

/// An import graph: for each part, the parts it imports and where it first does.
type Graph<'a> = BTreeMap<&'a str, BTreeMap<&'a str, &'a str>>;

/// The shortest way in `graph` from `from` to `to`, as the parts it passes after `from`.
fn way<'a>(graph: &Graph<'a>, from: &'a str, to: &'a str) -> Option<Vec<&'a str>> {
    let mut came: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(n) = queue.pop_front() {
        for next in graph.get(n).into_iter().flat_map(|m| m.keys().copied()) {
            if came.contains_key(next) {
                continue;
            }
            came.insert(next, n);
            if next == to {
                let mut way = vec![to];
                let mut at = to;
                while came[at] != from {
                    at = came[at];
                    way.push(at);
                }
                way.reverse();
                return Some(way);
            }
            queue.push_back(next);
        }
    }
    None
}

/// The import circles among `edges`: one line for each set of siblings that import each other
/// round, with the shortest circle through its first member and where each import is.
fn circles(edges: &[Edge]) -> Vec<String> {
    let mut graphs: BTreeMap<&[String], Graph> = BTreeMap::new();
    for e in edges {
        graphs
            .entry(&e.scope)
            .or_default()
            .entry(&e.from)
            .or_default()
            .entry(&e.to)
            .or_insert(&e.at);
    }
    let mut out = vec![];
    for (scope, graph) in graphs {
        let mut placed: BTreeSet<&str> = BTreeSet::new();
        for &first in graph.keys() {
            if placed.contains(first) {
                continue;
            }
            let Some(round) = way(&graph, first, first) else {
                continue;
            };
            // Everything on a circle with `first` is reported with it.
            let with: Vec<&str> = graph
                .keys()
                .copied()
                .filter(|n| way(&graph, first, n).is_some() && way(&graph, n, first).is_some())
                .collect();
            placed.extend(&with);
            let mut text = format!(
                "{}: {first}",
                match scope.is_empty() {
                    true => "the top-level modules".to_string(),
                    false => format!("inside `{}`", scope.join("::")),
                }
            );
            let mut from = first;
            for &to in &round {
                text += &format!(" → {to} ({})", graph[from][to]);
                from = to;
            }
            let others: Vec<&str> = with
                .into_iter()
                .filter(|n| *n != first && !round.contains(n))
                .collect();
            if !others.is_empty() {
                text += &format!("; {} is on a circle with them too", others.join(", "));
            }
            out.push(text);
        }
    }
    out
}

#[test]
fn no_modules_of_one_layer_nor_parts_of_one_module_import_each_other_round() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let edges = sibling_imports(&library(root));
    let inside = |scope: &[&str]| edges.iter().filter(|e| e.scope == scope).count();
    assert!(
        inside(&[]) > 50
            && inside(&["cluster"]) > 10
            && inside(&["run"]) > 5
            && inside(&["cluster", "local"]) > 5,
        "the scan found the imports: {} in all",
        edges.len()
    );
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "imports that go round (move what both use to the lower one, or to a part both use):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_made_up_circle_is_refused() {
    let source = |file: &str, at: &[&str], text: &str| Source {
        file: file.into(),
        at: at.iter().map(|s| s.to_string()).collect(),
        text: text.into(),
    };
    let mut tree = vec![
        // A module's front uses its parts, and they what it defines: no circle.
        source(
            "a/mod.rs",
            &["a"],
            "mod x;\nmod y;\npub use x::G;\nuse crate::b;\n",
        ),
        source(
            "a/x.rs",
            &["a", "x"],
            "use super::y::f;\nuse super::Front;\n",
        ),
        source("a/y/mod.rs", &["a", "y"], "use super::Front;\nmod z;\n"),
        source(
            "a/y/z.rs",
            &["a", "y", "z"],
            "use crate::a::{\n    Front,\n    y::w,\n};\n",
        ),
        source("b.rs", &["b"], "use crate::c::X;\n"),
        source(
            "c/mod.rs",
            &["c"],
            "fn f() {}\n#[cfg(test)]\nuse crate::b;\n",
        ),
    ];
    assert_eq!(circles(&sibling_imports(&tree)), Vec::<String>::new());
    // Two top-level modules, two parts of one, and two parts of a part, each pair both ways.
    tree.push(source(
        "c/k.rs",
        &["c", "k"],
        "fn g() { super::super::b::h() }\n",
    ));
    tree.push(source(
        "a/y/v.rs",
        &["a", "y", "v"],
        "const V: u8 = crate::a::x::G;\n",
    ));
    tree.push(source("a/y/w.rs", &["a", "y", "w"], "use super::z::Z;\n"));
    assert_eq!(
        circles(&sibling_imports(&tree)),
        [
            "the top-level modules: b → c (b.rs:1) → b (c/k.rs:1)",
            "inside `a`: x → y (a/x.rs:1) → x (a/y/v.rs:1)",
            "inside `a::y`: w → z (a/y/w.rs:1) → w (a/y/z.rs:1)",
        ]
    );
    // A longer circle names who else is on it.
    tree.push(source("d.rs", &["d"], "use crate::b::B;\n"));
    tree.push(source("c/j.rs", &["c", "j"], "use crate::d::D;\n"));
    assert_eq!(
        circles(&sibling_imports(&tree))[0],
        "the top-level modules: b → c (b.rs:1) → b (c/k.rs:1); d is on a circle with them too"
    );
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
