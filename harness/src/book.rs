//! The book's reference pages, rendered from the code so that no fact the code knows is typed
//! twice: start with [`pages`], every generated page of `docs/` with the function that renders
//! it — [`cli_reference`] from the CLI's clap definition, [`scenarios`] from the catalog,
//! [`ledger`] from `suites/ledger.yaml`, [`layers`] from [`crate::layers::MODULES`]. Each is a
//! pure function returning Markdown whose first line says it is generated and by what;
//! `harness/tests/book.rs` compares each with its committed page (`HARNESS_UPDATE_GOLDEN=1`
//! rewrites them), builds the book with mdBook and checks its links.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::run::ledger::{KnownBug, Ledger, Range};
use crate::scenario::{Requirements, Scenario};

/// The command that regenerates the pages.
pub const UPDATE_COMMAND: &str = "HARNESS_UPDATE_GOLDEN=1 cargo test -p harness --test book";

/// A generated page of the book.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// Its path from the repository's root.
    pub path: &'static str,
    /// Renders it.
    pub render: fn() -> String,
}

/// Every generated page, in the order of the book's table of contents.
pub fn pages() -> Vec<Page> {
    vec![
        Page {
            path: "docs/reference/cli.md",
            render: cli_reference,
        },
        Page {
            path: "docs/reference/scenarios.md",
            render: scenarios,
        },
        Page {
            path: "docs/reference/ledger.md",
            render: ledger,
        },
        Page {
            path: "docs/reference/layers.md",
            render: layers,
        },
    ]
}

/// The first line of a generated page: what it is generated from, and the command that does it.
fn generated(from: &str) -> String {
    format!(
        "<!-- Generated from {from} by `{UPDATE_COMMAND}`: edit the source, not this page. -->\n"
    )
}

// ---------------------------------------------------------------------------------------------
// Markdown text

/// `text` as Markdown inline text that reads as written: outside its backtick code spans, the
/// characters Markdown or HTML would take as markup are escaped (`<report-dir>` is no HTML
/// tag); code spans are kept. In a table cell (`cell`) a `|` is escaped everywhere, code spans
/// included (the table extension's rule), and line breaks become spaces.
fn inline(text: &str, cell: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let (plain, code) = match rest.find('`') {
            Some(open) => match rest[open + 1..].find('`') {
                Some(len) => (&rest[..open], Some(&rest[open..open + len + 2])),
                None => (rest, None),
            },
            None => (rest, None),
        };
        let chars: Vec<char> = plain.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            // `_` inside a word is no emphasis.
            let word = |at: Option<&char>| at.is_some_and(|c| c.is_alphanumeric());
            let inside_word =
                word(i.checked_sub(1).and_then(|p| chars.get(p))) && word(chars.get(i + 1));
            match c {
                '_' if inside_word => out.push(c),
                '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '&' | '|' => {
                    out.push('\\');
                    out.push(c);
                }
                '\n' if cell => out.push(' '),
                _ => out.push(c),
            }
        }
        rest = &rest[plain.len()..];
        if let Some(code) = code {
            if cell {
                out.push_str(&code.replace('|', "\\|").replace('\n', " "));
            } else {
                out.push_str(code);
            }
            rest = &rest[code.len()..];
        }
    }
    out
}

/// `text` (paragraphs separated by blank lines) as Markdown paragraphs, each line indented by
/// `indent` (to continue a list item).
fn paragraphs(text: &str, indent: &str) -> String {
    text.trim()
        .split("\n\n")
        .map(|p| {
            p.lines()
                .map(|l| {
                    // A line starting with `#` would be a heading.
                    let escape = if l.starts_with('#') { "\\" } else { "" };
                    format!("{indent}{escape}{}", inline(l.trim_end(), false))
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `code` as a code span (with longer fences when it holds backticks), for a table cell if
/// `cell`.
fn code(text: &str, cell: bool) -> String {
    let fence = "`".repeat(text.split(|c| c != '`').map(str::len).max().unwrap_or(0) + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    let span = format!("{fence}{pad}{text}{pad}{fence}");
    if cell { span.replace('|', "\\|") } else { span }
}

/// The anchor mdBook gives a heading of plain words: lower case, spaces as `-`, other
/// punctuation dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The CLI

/// The CLI reference page: every subcommand of `harness`, with its usage, what it does and each
/// argument with its help and default, from the CLI's clap definition.
pub fn cli_reference() -> String {
    render_cli(crate::cli::command(), "`harness/src/cli/args/`")
}

/// The CLI reference page of the clap command `root`, whose definition is in `from`: every
/// subcommand (depth first, in the definition's order), hidden ones and `--help` left out.
pub fn render_cli(mut root: clap::Command, from: &str) -> String {
    root.build();
    let mut commands = vec![];
    walk(&root, 0, &mut commands);
    let name = root.get_name().to_string();
    let mut out = generated(from);
    let _ = writeln!(out, "# CLI reference\n");
    let _ = writeln!(
        out,
        "Every command of `{name}`, as `{name} <command> --help` prints it (without `-h`, \
         `--help`). An option's default is the value it has when the option is not given.\n"
    );
    for (depth, c) in &commands {
        let title = title(c);
        let _ = writeln!(
            out,
            "{}- [{title}](#{})",
            "  ".repeat(*depth),
            anchor(&title)
        );
    }
    for (depth, c) in &commands {
        out.push('\n');
        command_section(&mut out, c, *depth);
    }
    out
}

/// `cmd` and its visible subcommands, depth first.
fn walk<'a>(cmd: &'a clap::Command, depth: usize, out: &mut Vec<(usize, &'a clap::Command)>) {
    out.push((depth, cmd));
    for sub in cmd.get_subcommands() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            walk(sub, depth + 1, out);
        }
    }
}

/// A command's heading: its full name (`harness cluster up`).
fn title(cmd: &clap::Command) -> String {
    cmd.get_bin_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

fn command_section(out: &mut String, cmd: &clap::Command, depth: usize) {
    let _ = writeln!(out, "{} {}\n", "#".repeat((depth + 2).min(6)), title(cmd));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", paragraphs(&about.to_string(), ""));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    let _ = writeln!(out, "```text\n{}\n```", usage.trim_end());
    let subcommands: Vec<_> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subcommands.is_empty() {
        let _ = writeln!(out, "\nCommands:\n");
        for s in subcommands {
            let about = s.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "- [`{}`](#{}): {}",
                s.get_name(),
                anchor(&title(s)),
                inline(about.trim(), false)
            );
        }
    }
    let shown =
        |a: &&clap::Arg| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version");
    let positionals: Vec<_> = cmd.get_positionals().filter(shown).collect();
    let options: Vec<_> = cmd
        .get_arguments()
        .filter(|a| !a.is_positional())
        .filter(shown)
        .collect();
    for (heading, args) in [("Arguments", positionals), ("Options", options)] {
        if args.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{heading}:\n");
        for a in args {
            let _ = writeln!(out, "{}", argument(a));
        }
    }
}

/// One argument as a list item: its form, what it takes and its help.
fn argument(arg: &clap::Arg) -> String {
    let mut form = arg.to_string();
    if let (Some(short), Some(_)) = (arg.get_short(), arg.get_long()) {
        form = format!("-{short}, {form}");
    }
    let mut facts = vec![];
    let takes_values = arg.get_num_args().is_some_and(|n| n.takes_values());
    if arg.is_required_set() {
        facts.push("required".to_string());
    }
    if matches!(
        arg.get_action(),
        clap::ArgAction::Append | clap::ArgAction::Count
    ) {
        facts.push("repeatable".to_string());
    }
    if takes_values && !arg.is_hide_possible_values_set() {
        let values: Vec<_> = arg
            .get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| code(v.get_name(), false))
            .collect();
        if !values.is_empty() {
            facts.push(format!("one of {}", values.join(", ")));
        }
    }
    let defaults = arg.get_default_values();
    if takes_values && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        let values: Vec<_> = defaults
            .iter()
            .map(|v| code(&v.to_string_lossy(), false))
            .collect();
        facts.push(format!("default {}", values.join(", ")));
    }
    if let Some(env) = arg.get_env().filter(|_| !arg.is_hide_env_set()) {
        facts.push(format!("env {}", code(&env.to_string_lossy(), false)));
    }
    let mut item = format!("- {}", code(&form, false));
    if !facts.is_empty() {
        let _ = write!(item, " ({})", facts.join("; "));
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    if !help.trim().is_empty() {
        let text = paragraphs(&help, "  ");
        let _ = write!(item, ":\n{text}");
    }
    item
}

// ---------------------------------------------------------------------------------------------
// The scenarios

/// The scenarios page: every scenario of the catalog `harness run --list` lists, by suite,
/// with its labels and requirements, and the counts.
pub fn scenarios() -> String {
    let catalog = crate::run::select::Selection::default()
        .catalog()
        .expect("the built-in catalog needs no files");
    render_scenarios(&catalog)
}

/// The scenarios page of `catalog`.
pub fn render_scenarios(catalog: &[Scenario]) -> String {
    // Suites in the catalog's order, each with its scenarios in that order.
    let mut suites: Vec<(&str, Vec<&Scenario>)> = vec![];
    for s in catalog {
        match suites.iter_mut().find(|(name, _)| *name == s.suite()) {
            Some((_, list)) => list.push(s),
            None => suites.push((s.suite(), vec![s])),
        }
    }
    let real = |s: &&Scenario| s.requires.real_nodes > 0;
    let count = |f: &dyn Fn(&&Scenario) -> bool| catalog.iter().filter(|s| f(s)).count();
    let mut out = generated("the catalog (`suites/`, `harness::suites::all`)");
    let _ = writeln!(out, "# Scenarios\n");
    let _ = writeln!(
        out,
        "The catalog holds {} scenarios in {} suites: {} of them on real nodes, {} chainsaw \
         tests (label `{}`) and {} run only by `harness qualify` (across a controller upgrade). \
         `harness run --list` lists them too; `--suites`, `--focus` and `--labels` select \
         among them.\n",
        catalog.len(),
        suites.len(),
        count(&real),
        count(&|s| s.has_label(crate::chainsaw::LABEL)),
        crate::chainsaw::LABEL,
        count(&|s| s.requires.upgrade),
    );
    let _ = writeln!(out, "| suite | scenarios | on real nodes |\n|---|---|---|");
    for (suite, list) in &suites {
        let _ = writeln!(
            out,
            "| [`{suite}`](#{}) | {} | {} |",
            anchor(suite),
            list.len(),
            list.iter().filter(|s| real(s)).count()
        );
    }
    for (suite, list) in &suites {
        let _ = writeln!(out, "\n## {suite}\n");
        let _ = writeln!(
            out,
            "| scenario | what it establishes | labels | needs |\n|---|---|---|---|"
        );
        for s in list {
            let labels: Vec<_> = s.labels.iter().map(|l| code(l, true)).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                code(&s.name, true),
                inline(&s.summary, true),
                labels.join(" "),
                inline(&needs(&s.requires), true)
            );
        }
    }
    out
}

/// What a scenario needs, in words (empty when any cell will do).
fn needs(r: &Requirements) -> String {
    let mut out = vec![];
    let minor = |v: (u32, u32)| format!("{}.{}", v.0, v.1);
    match (r.min_kubernetes, r.max_kubernetes) {
        (Some(min), Some(max)) => out.push(format!("Kubernetes {} to {}", minor(min), minor(max))),
        (Some(min), None) => out.push(format!("Kubernetes {} or later", minor(min))),
        (None, Some(max)) => out.push(format!("Kubernetes {} or earlier", minor(max))),
        (None, None) => {}
    }
    let gates = |g: &BTreeMap<String, bool>| {
        g.iter()
            .map(|(k, v)| format!("`{k}={v}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !r.apiserver_gates.is_empty() {
        out.push(format!("apiserver gates {}", gates(&r.apiserver_gates)));
    }
    if !r.controller_gates.is_empty() {
        out.push(format!("controller gates {}", gates(&r.controller_gates)));
    }
    if let Some(since) = &r.min_controller {
        out.push(format!("controller {since} or later"));
    }
    match r.real_nodes {
        0 => {}
        1 => out.push("a real node".into()),
        n => out.push(format!("{n} real nodes")),
    }
    if r.alone {
        out.push("no other scenario beside it (it may take the controller down)".into());
    }
    if r.upgrade {
        out.push("a controller upgrade (`harness qualify` only)".into());
    }
    if let Some(why) = &r.skip {
        out.push(format!("skipped: {why}"));
    }
    out.join("; ")
}

// ---------------------------------------------------------------------------------------------
// The ledger

/// The ledger page: every known bug of the built-in ledger (`suites/ledger.yaml`).
pub fn ledger() -> String {
    let repo = crate::controller::ControllerRef::default_ref()
        .family()
        .module()
        .strip_prefix("github.com/")
        .map(str::to_string);
    render_ledger(&Ledger::builtin(), repo.as_deref())
}

/// The ledger page of `ledger`, whose bugs are those of the controller in GitHub repository
/// `repo` (`owner/name`), if it is one: its issue numbers become links.
pub fn render_ledger(ledger: &Ledger, repo: Option<&str>) -> String {
    let mut out = generated("`suites/ledger.yaml`");
    let _ = writeln!(out, "# Ledger\n");
    let scenarios: std::collections::BTreeSet<_> =
        ledger.bugs.iter().map(|b| b.scenario.as_str()).collect();
    let _ = writeln!(
        out,
        "The {} known bugs of `suites/ledger.yaml`, over {} scenarios. A scenario failing on a \
         cell inside a bug's ranges with the bug's signature in its failure is an expected \
         failure; passing there is an unexpected pass. Ranges are inclusive, and Kubernetes \
         ranges compare minors. The upstream column is read from each entry's summary (a \
         release that fixed it, the upstream issues and pull requests it names). What each bug \
         is and where it was seen is told in [Known bugs](../catalog/known-bugs.md).\n",
        ledger.bugs.len(),
        scenarios.len()
    );
    let _ = writeln!(
        out,
        "| bug | scenario | controller | Kubernetes | upstream |\n|---|---|---|---|---|"
    );
    for b in &ledger.bugs {
        let suite = b.scenario.split('/').next().unwrap_or_default();
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | [{}](scenarios.md#{}) | {} | {} | {} |",
            b.id,
            anchor(&b.id),
            code(&b.scenario, true),
            anchor(suite),
            range(&b.controller),
            range(&b.kubernetes),
            upstream(&b.summary, repo)
        );
    }
    let _ = writeln!(out, "\n## The entries");
    for b in &ledger.bugs {
        entry(&mut out, b);
    }
    out
}

fn entry(out: &mut String, b: &KnownBug) {
    let _ = writeln!(out, "\n### {}\n", b.id);
    let _ = writeln!(out, "{}\n", inline(&b.summary, false));
    let _ = writeln!(
        out,
        "Scenario {}; controller {}, Kubernetes {}; signature {}.",
        code(&b.scenario, false),
        range(&b.controller),
        range(&b.kubernetes),
        code(&b.signature, false)
    );
}

/// An inclusive range in words.
fn range(r: &Range) -> String {
    match (&r.min, &r.max) {
        (Some(min), Some(max)) if min == max => min.clone(),
        (Some(min), Some(max)) => format!("{min} to {max}"),
        (Some(min), None) => format!("{min} on"),
        (None, Some(max)) => format!("up to {max}"),
        (None, None) => "any".into(),
    }
}

/// What a ledger summary says of the bug upstream: the release that fixed it (`fixed in
/// v1.8.0`, `fixed by v1.8.2`, `refused from v1.9.0 on`), the issues and pull requests of the
/// controller's repository `repo` it names (`#2111`, `owner/name#1943`; another repository's
/// are context, not this bug's; all of them when `repo` is unknown), and `not reported
/// upstream`.
fn upstream(summary: &str, repo: Option<&str>) -> String {
    static FIXED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\b(?:fixed (?:in|by)|refused from) (v\d+(?:\.\d+)+)").expect("valid")
    });
    static REFERENCE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?:\b([\w.-]+/[\w.-]+))?#(\d+)\b").expect("valid")
    });
    let mut parts = vec![];
    if let Some(c) = FIXED.captures(summary) {
        parts.push(format!("fixed in {}", &c[1]));
    }
    let mut refs: Vec<String> = vec![];
    for c in REFERENCE.captures_iter(summary) {
        let theirs = c.get(1).map(|m| m.as_str());
        let link = match (repo, theirs) {
            (Some(repo), Some(theirs)) if theirs != repo => continue,
            (Some(repo), _) => format!("[#{n}](https://github.com/{repo}/issues/{n})", n = &c[2]),
            (None, _) => c[0].to_string(),
        };
        if !refs.contains(&link) {
            refs.push(link);
        }
    }
    if !refs.is_empty() {
        parts.push(refs.join(", "));
    }
    if summary.contains("not reported upstream") {
        parts.push("not reported upstream".into());
    }
    if parts.is_empty() {
        "—".into()
    } else {
        parts.join("; ")
    }
}

// ---------------------------------------------------------------------------------------------
// The layers

/// The layers page: the library's modules by layer ([`crate::layers::MODULES`]), the table
/// `harness/tests/layers.rs` enforces.
pub fn layers() -> String {
    let mut out = generated("`harness/src/layers.rs`");
    let _ = writeln!(out, "# Layers\n");
    let _ = writeln!(
        out,
        "The library's top-level modules by layer, from the bottom. A module uses only modules \
         of its own layer or of a layer below, and imports go one way: \
         `harness/tests/layers.rs` fails on any import of a layer above, and on any circle of \
         imports between modules of one layer or between the parts (files or directories side \
         by side) of one module. How the layers work together is told in \
         [Inside the harness](../architecture.md).\n"
    );
    let _ = writeln!(out, "| layer | module | what it holds |\n|---|---|---|");
    for m in crate::layers::MODULES {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} |",
            m.layer,
            m.name,
            inline(m.what, true)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_text_escapes_markup_and_keeps_code_spans() {
        assert_eq!(
            inline("see <report-dir>/x_y and _a `a|b <c>`", false),
            "see \\<report-dir>/x_y and \\_a `a|b <c>`"
        );
        assert_eq!(inline("a|b `c|d`\ne", true), "a\\|b `c\\|d` e");
        assert_eq!(inline("an odd ` tick", false), "an odd \\` tick");
        assert_eq!(code("a`b", false), "``a`b``");
        assert_eq!(code("`x", false), "`` `x ``");
    }

    #[test]
    fn anchors_are_mdbooks() {
        assert_eq!(anchor("harness cluster up"), "harness-cluster-up");
        assert_eq!(anchor("kruise-x_y"), "kruise-x_y");
        assert_eq!(anchor("The `entries`!"), "the-entries");
    }

    #[test]
    fn the_cli_page_has_every_visible_command_and_option() {
        let root = clap::Command::new("tool")
            .about("A tool.")
            .subcommand(
                clap::Command::new("go")
                    .about("Go somewhere.")
                    .long_about("Go somewhere.\n\nFar <away>.")
                    .arg(
                        clap::Arg::new("speed")
                            .long("speed")
                            .short('s')
                            .help("How fast.")
                            .default_value("1"),
                    )
                    .arg(
                        clap::Arg::new("to")
                            .help("Where.")
                            .required(true)
                            .value_parser(["north", "south"]),
                    )
                    .arg(clap::Arg::new("secret").long("secret").hide(true)),
            )
            .subcommand(clap::Command::new("hidden").hide(true));
        let page = render_cli(root, "a test");
        assert!(page.starts_with("<!-- Generated from a test by "), "{page}");
        assert!(page.contains("- [tool go](#tool-go)"), "{page}");
        assert!(
            page.contains("### tool go\n\nGo somewhere.\n\nFar \\<away>.\n"),
            "{page}"
        );
        assert!(
            page.contains("```text\ntool go [OPTIONS] <to>\n```"),
            "{page}"
        );
        assert!(
            page.contains("- `<to>` (required; one of `north`, `south`):\n  Where."),
            "{page}"
        );
        assert!(
            page.contains("- `-s, --speed <speed>` (default `1`):\n  How fast."),
            "{page}"
        );
        assert!(
            !page.contains("secret") && !page.contains("hidden"),
            "{page}"
        );
        assert!(!page.contains("- `-h, --help`"), "{page}");
    }

    #[test]
    fn needs_say_every_requirement() {
        let mut r = Requirements {
            min_kubernetes: Some((1, 29)),
            max_kubernetes: Some((1, 32)),
            min_controller: Some("v1.9.0".into()),
            real_nodes: 2,
            alone: true,
            upgrade: true,
            ..Default::default()
        };
        r.apiserver_gates.insert("A".into(), true);
        r.controller_gates.insert("B".into(), false);
        assert_eq!(
            needs(&r),
            "Kubernetes 1.29 to 1.32; apiserver gates `A=true`; controller gates `B=false`; \
             controller v1.9.0 or later; 2 real nodes; no other scenario beside it (it may take \
             the controller down); a controller upgrade (`harness qualify` \
             only)"
        );
        assert_eq!(needs(&Requirements::default()), "");
    }

    #[test]
    fn the_upstream_column_keeps_the_fix_and_the_controllers_references() {
        let repo = Some("o/c");
        assert_eq!(
            upstream("x (fixed in v1.8.0 by the update (#1896, #1924))", repo),
            "fixed in v1.8.0; [#1896](https://github.com/o/c/issues/1896), \
             [#1924](https://github.com/o/c/issues/1924)"
        );
        assert_eq!(
            upstream(
                "skips them since k/k#118716; not reported upstream, unfixed",
                repo
            ),
            "not reported upstream"
        );
        assert_eq!(
            upstream("panics (o/c#1943; fixed by v1.8.2)", None),
            "fixed in v1.8.2; o/c#1943"
        );
        assert_eq!(
            upstream("not reported upstream, unfixed in v1.9.1", repo),
            "not reported upstream"
        );
        assert_eq!(upstream("refused from v1.9.0 on", repo), "fixed in v1.9.0");
        assert_eq!(upstream("the same bug", repo), "—");
    }

    #[test]
    fn ranges_read_as_words() {
        let r = |min: Option<&str>, max: Option<&str>| Range {
            min: min.map(Into::into),
            max: max.map(Into::into),
        };
        assert_eq!(range(&r(None, None)), "any");
        assert_eq!(range(&r(Some("1.27"), None)), "1.27 on");
        assert_eq!(range(&r(None, Some("v1.7.4"))), "up to v1.7.4");
        assert_eq!(
            range(&r(Some("v1.8.0"), Some("v1.8.3"))),
            "v1.8.0 to v1.8.3"
        );
    }

    #[test]
    fn the_pages_of_the_built_in_catalog_and_ledger_render() {
        let page = scenarios();
        assert!(page.contains("\n## cloneset\n"), "{page}");
        let page = ledger();
        assert!(page.contains("kruise-workloadspread-vct-volumes"), "{page}");
        let page = layers();
        assert!(page.contains("| 12 | `book` |"), "{page}");
    }
}
