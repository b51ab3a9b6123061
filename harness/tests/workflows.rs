//! The GitHub Actions workflows in `.github/workflows/`: actionlint (built with the harness's own
//! toolchain and cached like the Kubernetes binaries) finds nothing in them, and every
//! `harness` command line they run parses with the CLI's own flags.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use harness::progress::Progress;
use harness::toolchain::{Cache, Toolchain};

const ACTIONLINT_MODULE: &str = "github.com/rhysd/actionlint";
const ACTIONLINT_VERSION: &str = "v1.7.12";

/// How a workflow runs the harness; the rest of the line is its arguments.
const INVOCATION: &str = "cargo run --locked -p harness -- ";

fn workflows_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.github/workflows")
}

/// The workflow files, sorted.
fn workflows() -> Vec<PathBuf> {
    let dir = workflows_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no workflows in {}", dir.display());
    files
}

async fn actionlint() -> PathBuf {
    Toolchain::new(Cache::from_env(), Progress::plain())
        .go_install(
            ACTIONLINT_MODULE,
            &format!("{ACTIONLINT_MODULE}/cmd/actionlint"),
            ACTIONLINT_VERSION,
            "actionlint",
        )
        .await
        .unwrap_or_else(|e| panic!("build actionlint {ACTIONLINT_VERSION}: {e}"))
}

/// Runs actionlint on `files`, without the shellcheck and pyflakes integrations (they are
/// not part of the toolchain).
fn lint(actionlint: &Path, files: &[PathBuf]) -> Output {
    Command::new(actionlint)
        .args(["-no-color", "-shellcheck=", "-pyflakes="])
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", actionlint.display()))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn actionlint_finds_nothing_in_the_workflows() {
    let actionlint = actionlint().await;
    let files = workflows();
    let out = lint(&actionlint, &files);
    assert!(
        out.status.success(),
        "actionlint {ACTIONLINT_VERSION} on {files:?} exited with {}:\n{}",
        out.status,
        text(&out)
    );
}

#[tokio::test]
async fn actionlint_fails_on_a_broken_workflow() {
    let actionlint = actionlint().await;
    let dir = tempfile::Builder::new()
        .prefix("harness-workflows-")
        .tempdir()
        .expect("temp dir");
    let broken = dir.path().join("broken.yml");
    std::fs::write(
        &broken,
        "name: broken\n\
         on: push\n\
         jobs:\n  \
           test:\n    \
             runs-on: ubuntu-latest\n    \
             needs: [build]\n    \
             steps:\n      \
               - run: cargo test\n",
    )
    .expect("write workflow");
    let out = lint(&actionlint, &[broken]);
    let output = text(&out);
    assert_eq!(out.status.code(), Some(1), "{output}");
    assert!(output.contains("\"build\""), "{output}");
}

/// A plausible value for `flag` where the workflow has a placeholder (an expression or an
/// environment variable).
fn placeholder(flag: &str) -> &'static str {
    match flag {
        "--k8s" => "1.32",
        "--controller" | "--candidate" => "openkruise@v1.9.0",
        "--baseline" => "v1.8.3",
        "--shard" => "1/4",
        "--seed" => "7",
        "--perturbations" => "all",
        "--gate-sets" => "pairwise",
        _ => "x",
    }
}

/// Splits a shell command line on whitespace, keeping quoted words together.
fn split(line: &str) -> Vec<String> {
    let mut words = vec![];
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "unbalanced quotes in `{line}`");
    if in_word {
        words.push(word);
    }
    words
}

/// The arguments of one harness invocation, with each `${{ ... }}` expression and `$VAR`
/// reference replaced by a plausible value for the flag before it.
fn arguments(line: &str) -> Vec<String> {
    let mut rest = line.to_string();
    while let Some(start) = rest.find("${{") {
        let end = rest[start..]
            .find("}}")
            .unwrap_or_else(|| panic!("unterminated expression in `{line}`"));
        rest.replace_range(start..start + end + 2, "$EXPR");
    }
    let mut args: Vec<String> = vec![];
    // The harness's arguments end where the shell's pipes, redirections and lists begin.
    for word in split(&rest)
        .into_iter()
        .take_while(|w| !matches!(w.as_str(), "|" | ">" | ">>" | "&&" | "||" | ";"))
    {
        let word = if let Some((flag, value)) = word.split_once('=')
            && flag.starts_with("--")
            && value.starts_with('$')
        {
            format!("{flag}={}", placeholder(flag))
        } else if word.starts_with('$') {
            placeholder(args.last().map_or("", String::as_str)).to_string()
        } else {
            word
        };
        args.push(word);
    }
    args
}

/// Every harness invocation of a workflow, as arguments.
fn invocations(workflow: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(workflow)
        .unwrap_or_else(|e| panic!("read {}: {e}", workflow.display()));
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        let at = format!("{}:{}", workflow.display(), n + 1);
        // Running the harness (not building or linting it).
        if !(line.contains("-p harness") && line.contains("cargo run")) {
            continue;
        }
        let (_, args) = line
            .split_once(INVOCATION)
            .unwrap_or_else(|| panic!("{at}: run the harness as `{INVOCATION}<args>`: {line}"));
        assert!(
            !args.trim_end().ends_with('\\'),
            "{at}: keep the invocation on one line"
        );
        out.push(arguments(args));
    }
    out
}

/// The value given to `flag`, if any.
fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[test]
fn every_harness_invocation_in_the_workflows_parses() {
    let mut seen: Vec<(String, Vec<Vec<String>>)> = vec![];
    for workflow in workflows() {
        let name = workflow
            .file_stem()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let all = invocations(&workflow);
        assert!(
            !all.is_empty(),
            "{} runs no `{INVOCATION}...`",
            workflow.display()
        );
        for args in &all {
            if let Err(e) = harness::cli::check_args(args) {
                panic!(
                    "{}: `harness {}` is refused:\n{e}",
                    workflow.display(),
                    args.join(" ")
                );
            }
            if let Some(k8s) = value(args, "--k8s") {
                harness::matrix::parse_versions(k8s)
                    .unwrap_or_else(|e| panic!("{}: {e}", workflow.display()));
            }
            for flag in ["--controller", "--candidate"] {
                if let Some(c) = value(args, flag) {
                    harness::matrix::parse_controllers(c)
                        .unwrap_or_else(|e| panic!("{}: {e}", workflow.display()));
                }
            }
        }
        seen.push((name, all));
    }
    let runs = |workflow: &str, command: &str, provider: Option<&str>| {
        seen.iter()
            .filter(|(name, _)| name == workflow)
            .flat_map(|(_, all)| all)
            .any(|args| {
                args.first().is_some_and(|c| c == command)
                    && provider.is_none_or(|p| value(args, "--provider") == Some(p))
            })
    };
    for (workflow, command, provider) in [
        ("pr", "run", Some("local")),
        ("nightly", "matrix", None),
        ("nightly", "report", None),
        ("nightly", "run", Some("kind")),
        ("nightly", "explore", None),
        ("release-qualification", "qualify", None),
        ("release-qualification", "explore", None),
        ("release-qualification", "report", None),
    ] {
        assert!(
            runs(workflow, command, provider),
            "{workflow}.yml does not run `harness {command}`{}; it runs {:?}",
            provider.map_or(String::new(), |p| format!(" --provider {p}")),
            seen.iter().find(|(n, _)| n == workflow).map(|(_, a)| a)
        );
    }
}

#[test]
fn invocations_are_extracted_and_checked() {
    assert_eq!(
        arguments(
            r#"qualify --candidate "$CANDIDATE" --baseline "${{ inputs.baseline }}" --k8s ${{ matrix.k8s }} --report-dir reports"#
        ),
        [
            "qualify",
            "--candidate",
            "openkruise@v1.9.0",
            "--baseline",
            "v1.8.3",
            "--k8s",
            "1.32",
            "--report-dir",
            "reports"
        ]
    );
    assert_eq!(
        arguments(r#"matrix --shard "${{ matrix.shard }}/$SHARDS" --binaries | tee binaries.txt"#),
        ["matrix", "--shard", "1/4", "--binaries"]
    );
    assert!(harness::cli::check_args(&["run", "--provider", "local"]).is_ok());
    let e = harness::cli::check_args(&["run", "--provider", "local", "--no-such-flag"])
        .expect_err("an unknown flag is refused");
    assert!(e.contains("--no-such-flag"), "{e}");
    assert!(harness::cli::check_args(&["run", "--provider", "docker"]).is_err());
}
