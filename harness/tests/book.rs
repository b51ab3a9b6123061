//! The book in `docs/`: its generated reference pages are what the code renders now
//! (`harness::book`; `HARNESS_UPDATE_GOLDEN=1` rewrites them, as it does the other golden
//! files), it builds with the pinned mdBook (built into the harness cache on first use), and
//! every relative link of `README.md` and `docs/**/*.md` resolves to a file, and its anchor to
//! a heading of the Markdown page it points to. The tests run side by side: after a rewrite,
//! run them once more without `HARNESS_UPDATE_GOLDEN` (the build and the link check may have
//! read a page before it was rewritten).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use harness::progress::Progress;
use harness::toolchain::{Cache, Toolchain};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Replaces `path` with `text` in one rename, so a test reading the book meanwhile sees the old
/// page or the new one.
fn write_atomically(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = tempfile::NamedTempFile::new_in(path.parent().unwrap()).unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file.persist(path).unwrap();
}

/// The first line where `expected` and `actual` differ, for the failure message.
fn first_difference(expected: &str, actual: &str) -> String {
    let (mut e, mut a) = (expected.lines(), actual.lines());
    for n in 1.. {
        match (e.next(), a.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (None, None) => break,
            (x, y) => {
                return format!(
                    "line {n}:\n  committed: {}\n  rendered:  {}",
                    x.unwrap_or("(end)"),
                    y.unwrap_or("(end)")
                );
            }
        }
    }
    "the ends of the lines".into()
}

#[test]
fn generated_pages_are_what_the_code_renders() {
    let update = std::env::var_os("HARNESS_UPDATE_GOLDEN").is_some();
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let mut stale = vec![];
    for page in harness::book::pages() {
        let path = root().join(page.path);
        let actual = (page.render)();
        assert!(
            actual.starts_with("<!-- Generated from ")
                && actual
                    .lines()
                    .next()
                    .unwrap()
                    .contains(harness::book::UPDATE_COMMAND),
            "{}: the first line says the page is generated and by what",
            page.path
        );
        if update {
            write_atomically(&path, &actual);
        }
        let in_book = page.path.strip_prefix("docs/").unwrap();
        assert!(
            summary.contains(&format!("]({in_book})")),
            "docs/SUMMARY.md lists {in_book}"
        );
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        if expected != actual {
            stale.push(format!(
                "{}: {}",
                page.path,
                first_difference(&expected, &actual)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "generated pages differ from what the code renders; rerun with HARNESS_UPDATE_GOLDEN=1 \
         (`{}`) if the change is intended:\n{}",
        harness::book::UPDATE_COMMAND,
        stale.join("\n")
    );
}

#[tokio::test]
async fn the_book_builds_with_mdbook() {
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let mdbook = toolchain.mdbook().await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(&mdbook)
        .arg("build")
        .arg(root().join("docs"))
        .arg("-d")
        .arg(out.path())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "mdbook build docs failed:\n{stderr}");
    let warnings: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        warnings.is_empty(),
        "mdbook build docs warned:\n{}",
        warnings.join("\n")
    );
    for page in harness::book::pages() {
        let html = Path::new(page.path.strip_prefix("docs/").unwrap()).with_extension("html");
        assert!(
            out.path().join(&html).is_file(),
            "the book has {}",
            html.display()
        );
    }
}

/// `README.md` and every Markdown file under `docs/`, sorted.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut files);
    files.sort();
    files
}

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(
        text,
        Options::ENABLE_TABLES | Options::ENABLE_HEADING_ATTRIBUTES | Options::ENABLE_FOOTNOTES,
    )
}

/// The link and image targets of a Markdown text.
fn links(text: &str) -> Vec<String> {
    parser(text)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings as mdBook makes them: an explicit `{#id}`, or
/// the heading's text in lower case with spaces as `-` and other punctuation dropped; a
/// repeated one gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut heading: Option<(Option<String>, String)> = None;
    for e in parser(text) {
        match e {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((id.map(|i| i.to_string()), String::new()));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, words)) = &mut heading {
                    words.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let (id, words) = heading.take().unwrap();
                let base = id.unwrap_or_else(|| harness::book::anchor(words.trim()));
                let mut anchor = base.clone();
                for n in 1.. {
                    if !out.contains(&anchor) {
                        break;
                    }
                    anchor = format!("{base}-{n}");
                }
                out.insert(anchor);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn relative_links_of_the_readme_and_the_book_resolve() {
    let files = markdown_files();
    assert!(files.len() > 30, "the scan found the book: {files:?}");
    let mut broken = vec![];
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        for link in links(&text) {
            // An absolute URL (`https:`, `mailto:`) is not the book's to check.
            let scheme = link.split(['/', '#']).next().unwrap_or_default();
            if scheme.contains(':') {
                continue;
            }
            checked += 1;
            let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{shown}: {link}: no such file"));
                continue;
            }
            if fragment.is_empty() || target.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let page = std::fs::read_to_string(&target).unwrap();
            if !anchors(&page).contains(fragment) {
                broken.push(format!("{shown}: {link}: no heading #{fragment}"));
            }
        }
    }
    assert!(checked > 100, "the scan read the links: {checked}");
    assert!(
        broken.is_empty(),
        "relative links that lead nowhere:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_anchor_scan_follows_mdbook() {
    let text = "# The `run` command\n## Twice\n## Twice\n## Own {#mine}\n";
    let got: Vec<_> = anchors(text).into_iter().collect();
    assert_eq!(got, ["mine", "the-run-command", "twice", "twice-1"]);
    assert_eq!(
        links("[a](b.md#c) ![i](x.png) [r]\n\n[r]: https://e.org\n"),
        ["b.md#c", "x.png", "https://e.org"]
    );
}

#[test]
fn the_catalog_page_links_every_suite_to_the_generated_list() {
    let page = std::fs::read_to_string(root().join("docs/catalog/README.md")).unwrap();
    let suites: BTreeSet<String> = harness::suites::all()
        .iter()
        .map(|s| s.suite().to_string())
        .collect();
    let missing: Vec<_> = suites
        .iter()
        .filter(|s| !page.contains(&format!("[`{s}`](../reference/scenarios.md#{s})")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/catalog/README.md says what each suite establishes; it lacks {missing:?}"
    );
}

/// The ledger page shows what `suites/ledger.yaml` says: an unquoted summary or signature reads
/// as written (in a plain YAML value, ` #` starts a comment and silently cuts the rest off).
#[test]
fn the_ledger_reads_as_its_file_is_written() {
    let text = std::fs::read_to_string(root().join("suites/ledger.yaml")).unwrap();
    let ledger = harness::run::ledger::Ledger::builtin();
    let mut cut = vec![];
    let mut read = 0;
    for (n, line) in text.lines().enumerate() {
        for key in ["summary: ", "signature: "] {
            let Some(raw) = line.trim_start().strip_prefix(key) else {
                continue;
            };
            read += 1;
            if raw.starts_with(['"', '\'']) {
                continue;
            }
            if !ledger
                .bugs
                .iter()
                .any(|b| b.summary == raw.trim_end() || b.signature == raw.trim_end())
            {
                cut.push(format!("suites/ledger.yaml:{}: {raw}", n + 1));
            }
        }
    }
    assert_eq!(read, 2 * ledger.bugs.len(), "every entry's lines were read");
    assert!(
        cut.is_empty(),
        "values the YAML parser reads shorter than written (quote them):\n{}",
        cut.join("\n")
    );
}
