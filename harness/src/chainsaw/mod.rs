//! Declarative tests in chainsaw's `Test` format (`chainsaw.kyverno.io/v1alpha1`), run as
//! harness scenarios: on harness cells, in matrices, judged by the ledger, watched by the same
//! invariants. Start with [`load`] (test directories or files to [`model::Test`]s) and
//! [`scenario`] (a test as a [`Scenario`]).
//!
//! - [`model`]: the format, every field checked; what the harness does not implement is
//!   refused by name.
//! - [`jp`]: the JMESPath dialect of expressions (`(…)`), with chainsaw's functions.
//! - [`tree`]: assertion trees (partial matching, `~` iteration, `->` bindings) and templating.
//! - [`run`]: the operations, executed against the cell.
//!
//! The harness section of a test is a set of `harness.io/…` annotations on the Test (so the
//! file stays a valid chainsaw test): `suite`, `labels`, `kubernetes` (`1.29+`, `1.29-1.32`),
//! `feature-gates`, `controller-gates`, `controller-since`, `real-nodes`, `allowed-warnings`,
//! `expected-violations`.

pub mod jp;
pub mod metrics;
pub mod model;
pub mod run;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;

use self::model::{ModelError, OpKind, Test};
use crate::scenario::{Requirements, Scenario};

/// The label of declarative scenarios that run scripts or commands (the run builds kubectl).
pub const KUBECTL_LABEL: &str = "script";

/// The file names chainsaw discovers tests in.
pub const TEST_FILES: &[&str] = &["chainsaw-test.yaml", "chainsaw-test.yml"];

/// Why tests could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ChainsawError {
    /// A path could not be read.
    #[error("read {}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not YAML.
    #[error("parse {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A test is malformed or uses what the harness does not implement.
    #[error("test in {}", path.display())]
    Test {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: ModelError,
    },
    /// A directory holds no test.
    #[error("no chainsaw test (chainsaw-test.yaml with kind Test) under {}", path.display())]
    NoTests {
        /// The directory.
        path: PathBuf,
    },
    /// Two tests share a name.
    #[error("two tests named `{name}`: {} and {}", first.display(), second.display())]
    Duplicate {
        /// The name.
        name: String,
        /// One file.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
}

/// Reads the tests of one file (every document of kind Test).
pub fn parse_file(path: &Path, text: &str) -> Result<Vec<Test>, ChainsawError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| ChainsawError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let dir = path.parent().map(Path::to_path_buf);
    docs.iter()
        .filter(|d| d["kind"] == "Test")
        .map(|d| {
            model::parse_test(d, dir.clone()).map_err(|source| ChainsawError::Test {
                path: path.to_path_buf(),
                source,
            })
        })
        .collect()
}

/// Reads the tests of a file compiled into the harness (no directory: resources inline).
pub fn parse_embedded(path: &str, text: &str) -> Result<Vec<Test>, ChainsawError> {
    let mut tests = parse_file(Path::new(path), text)?;
    for t in &mut tests {
        t.dir = None;
    }
    Ok(tests)
}

/// Reads tests from each path: a test file, or a directory searched recursively for
/// `chainsaw-test.yaml` files. A directory without any is an error; so are two tests with
/// one name.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Test>, ChainsawError> {
    let mut files = vec![];
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| ChainsawError::Read {
            path: p.clone(),
            source,
        })?;
        if meta.is_file() {
            files.push(p.clone());
            continue;
        }
        let before = files.len();
        find(p, &mut files)?;
        if files.len() == before {
            return Err(ChainsawError::NoTests { path: p.clone() });
        }
    }
    let mut tests: Vec<(PathBuf, Test)> = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|source| ChainsawError::Read {
            path: f.clone(),
            source,
        })?;
        let mut in_file: Vec<String> = vec![];
        for mut t in parse_file(&f, &text)? {
            // chainsaw runs two tests of one name in one file; they become `name`, `name-2`.
            let n = in_file.iter().filter(|x| **x == t.name).count();
            in_file.push(t.name.clone());
            if n > 0 {
                t.name = format!("{}-{}", t.name, n + 1);
            }
            if let Some((first, _)) = tests.iter().find(|(_, o)| o.name == t.name) {
                return Err(ChainsawError::Duplicate {
                    name: t.name,
                    first: first.clone(),
                    second: f,
                });
            }
            tests.push((f.clone(), t));
        }
    }
    Ok(tests.into_iter().map(|(_, t)| t).collect())
}

/// A test file and what reading it gave.
pub type Checked = (PathBuf, Result<Vec<Test>, ChainsawError>);

/// Each test file under `paths` with what reading it gave: its tests, or why they cannot run
/// here (what `harness chainsaw check` prints).
pub fn check(paths: &[PathBuf]) -> Result<Vec<Checked>, ChainsawError> {
    let mut files = vec![];
    for p in paths {
        if p.is_file() {
            files.push(p.clone());
        } else {
            find(p, &mut files)?;
        }
    }
    Ok(files
        .into_iter()
        .map(|f| {
            let tests = std::fs::read_to_string(&f)
                .map_err(|source| ChainsawError::Read {
                    path: f.clone(),
                    source,
                })
                .and_then(|text| parse_file(&f, &text));
            (f, tests)
        })
        .collect())
}

fn find(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ChainsawError> {
    let read = |source| ChainsawError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            find(&p, out)?;
        } else if p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| TEST_FILES.contains(&n))
        {
            out.push(p);
        }
    }
    Ok(())
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn leak_list(v: Vec<String>) -> &'static [&'static str] {
    Box::leak(
        v.into_iter()
            .map(leak)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// Whether any operation of `test` runs a script or a command.
pub fn runs_commands(test: &Test) -> bool {
    test.steps
        .iter()
        .flat_map(|s| {
            s.try_
                .iter()
                .chain(&s.catch)
                .chain(&s.finally)
                .chain(&s.cleanup)
        })
        .chain(&test.catch)
        .any(|o| matches!(o.kind, OpKind::Script { .. } | OpKind::Command { .. }))
}

/// `test` as a scenario named `<suite>/<test name>` (suite `chainsaw` unless the harness
/// section names one), with the requirements of its harness section. A CLI loads tests once,
/// so the scenario's texts live as long as the process.
pub fn scenario(test: Test) -> Scenario {
    let h = &test.harness;
    let suite = h.suite.clone().unwrap_or_else(|| "chainsaw".into());
    let name = leak(format!("{suite}/{}", test.name));
    let summary = leak(
        test.description
            .clone()
            .unwrap_or_else(|| format!("chainsaw test {}", test.name))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    );
    let mut labels = vec!["chainsaw".to_string()];
    labels.extend(h.labels.iter().cloned());
    if runs_commands(&test) {
        labels.push(KUBECTL_LABEL.into());
    }
    let (min, max) = h.kubernetes.unwrap_or((None, None));
    let requires = Requirements {
        min_kubernetes: min,
        max_kubernetes: max,
        apiserver_gates: h.feature_gates.clone(),
        controller_gates: h.controller_gates.clone(),
        upgrade: false,
        min_controller: h.controller_since.clone(),
        real_nodes: h.real_nodes,
        skip: test.skip.then(|| "the test says skip: true".to_string()),
    };
    let allowed = leak_list(h.allowed_warnings.clone());
    // A test's own pods and PVCs have no owner (the orphan check still counts objects whose
    // owner is gone).
    let mut expected = h.expected_violations.clone();
    expected.push(crate::scenario::invariants::BARE_OBJECTS.into());
    let expected = leak_list(expected);
    let test = Arc::new(test);
    Scenario {
        name,
        suite: leak(suite),
        summary,
        labels: leak_list(labels),
        requires,
        allowed_warnings: allowed,
        expected_violations: expected,
        body: Arc::new(move |ctx| {
            let test = test.clone();
            async move { run::run_test(&test, &ctx).await }.boxed()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "\
apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata:
  name: first
  annotations:
    harness.io/suite: daemonset
    harness.io/labels: smoke
spec:
  description: a first test
  steps:
  - try:
    - script:
        content: kubectl get pods
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-test}
";

    #[test]
    fn a_file_gives_its_tests_and_a_scenario_each() {
        let tests = parse_file(Path::new("/x/chainsaw-test.yaml"), TWO).unwrap();
        assert_eq!(tests.len(), 1);
        assert_eq!(tests[0].dir.as_deref(), Some(Path::new("/x")));
        let s = scenario(tests[0].clone());
        assert_eq!(s.name, "daemonset/first");
        assert_eq!(s.suite, "daemonset");
        assert_eq!(s.summary, "a first test");
        assert!(s.labels.contains(&"smoke"));
        assert!(s.labels.contains(&KUBECTL_LABEL));
    }

    #[test]
    fn directories_are_searched_and_bad_input_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join("chainsaw-test.yaml"), TWO).unwrap();
        assert_eq!(load(&[dir.path().to_path_buf()]).unwrap().len(), 1);
        let empty = tempfile::tempdir().unwrap();
        let e = load(&[empty.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("no chainsaw test"), "{e}");
        let b = dir.path().join("b");
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("chainsaw-test.yaml"), TWO).unwrap();
        let e = load(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("two tests named `first`"), "{e}");
        let e = load(&[dir.path().join("missing")]).unwrap_err();
        assert!(e.to_string().contains("read"), "{e}");
    }
}
