//! Declarative tests in chainsaw's `Test` format (`chainsaw.kyverno.io/v1alpha1`), run by
//! chainsaw itself as harness scenarios: on harness cells, in matrices, judged by the ledger,
//! watched by the same monitor. Start with [`load`] (test files or directories to
//! [`Test`]s) and [`scenario`] (a test as a [`Scenario`]).
//!
//! - [`test`]: what the harness reads of a test (name, namespace, the harness section); the
//!   rest of the format is chainsaw's.
//! - [`runner`]: one `chainsaw test` per scenario, and its JSON report mapped to the result.
//!
//! The harness section of a test is a set of `harness.io/…` annotations on the Test (so the
//! file stays a valid chainsaw test): `suite`, `labels`, `kubernetes` (`1.29+`, `1.29-1.32`),
//! `feature-gates`, `controller-gates`, `controller-since`, `real-nodes`, `allowed-warnings`,
//! `expected-violations`.

pub mod runner;
pub mod test;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

pub use self::runner::Settings;
pub use self::test::{AskedNamespace, ModelError, Source, Test};
use crate::scenario::{NamespaceMaker, Requirements, Scenario};

/// The label of every chainsaw scenario (the run builds chainsaw for them).
pub const LABEL: &str = "chainsaw";

/// The label of declarative scenarios that run scripts or commands (the run builds kubectl).
pub const KUBECTL_LABEL: &str = "script";

/// The file names chainsaw discovers tests in by default.
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
    /// A test's header or harness section is malformed.
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

/// Reads the tests of one file (every document of kind Test), each found by chainsaw at
/// `source`.
pub fn parse_file(path: &Path, text: &str, source: &Source) -> Result<Vec<Test>, ChainsawError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| ChainsawError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    docs.iter()
        .filter(|d| d["kind"] == "Test")
        .map(|d| {
            test::parse_test(d, source.clone()).map_err(|source| ChainsawError::Test {
                path: path.to_path_buf(),
                source,
            })
        })
        .collect()
}

/// The tests of a tree compiled into the harness: `files` are paths relative to the tree's
/// root and their contents. A file at the root whose name ends in `.yaml` is a test file of
/// its own; a directory with a `chainsaw-test.yaml` is a test directory, all its files
/// with it.
pub fn parse_embedded(
    root: &str,
    files: &[(&'static str, &'static [u8])],
) -> Result<Vec<Test>, ChainsawError> {
    let mut tests = vec![];
    for (path, bytes) in files {
        let (dir, name) = match path.rsplit_once('/') {
            Some((dir, name)) => (Some(dir), name),
            None => (None, *path),
        };
        let own: Vec<(String, &'static [u8])> = match dir {
            None if name.ends_with(".yaml") || name.ends_with(".yml") => {
                vec![(name.to_string(), *bytes)]
            }
            Some(dir) if TEST_FILES.contains(&name) => files
                .iter()
                .filter_map(|(p, b)| {
                    p.strip_prefix(dir)
                        .and_then(|r| r.strip_prefix('/'))
                        .map(|r| (r.to_string(), *b))
                })
                .collect(),
            _ => continue,
        };
        let source = Source::Embedded {
            file: name.to_string(),
            files: own,
        };
        let shown = PathBuf::from(format!("{root}/{path}"));
        let text = String::from_utf8_lossy(bytes);
        tests.extend(parse_file(&shown, &text, &source)?);
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
        for t in read_file(&f)? {
            // chainsaw runs two tests of one name in one file one after the other (the second
            // as `name#01`); one scenario runs and judges both.
            if tests.iter().any(|(p, o)| *p == f && o.name == t.name) {
                continue;
            }
            let mut t = t;
            if tests.iter().any(|(_, o)| o.name == t.name) {
                // Another directory's test has this name (chainsaw runs both): this one's
                // scenario is named with its directory.
                t.qualifier = f
                    .parent()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned());
            }
            let id = |t: &Test| (t.qualifier.clone(), t.name.clone());
            if let Some((first, _)) = tests.iter().find(|(_, o)| id(o) == id(&t)) {
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

/// The tests of the file at `path`, found by chainsaw in its directory.
fn read_file(path: &Path) -> Result<Vec<Test>, ChainsawError> {
    let text = std::fs::read_to_string(path).map_err(|source| ChainsawError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let absolute = std::path::absolute(path).map_err(|source| ChainsawError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let source = Source::Disk {
        dir: absolute
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/")),
        file: absolute
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    parse_file(path, &text, &source)
}

/// The test files under `paths` (files as given, directories searched).
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ChainsawError> {
    let mut files = vec![];
    for p in paths {
        if p.is_file() {
            files.push(p.clone());
        } else {
            find(p, &mut files)?;
        }
    }
    Ok(files)
}

/// A test file and what checking it gave: its tests, or why it cannot run.
pub type Checked = (PathBuf, Result<Vec<Test>, String>);

/// Each test file under `paths` with what checking it gave: its tests, or why they cannot
/// run — chainsaw's own check of the format (`chainsaw lint test`, with `chainsaw`), then the
/// harness's reading of the header and the harness section.
pub async fn check(paths: &[PathBuf], chainsaw: &Path) -> anyhow::Result<Vec<Checked>> {
    let mut out = vec![];
    for f in files(paths)? {
        let result = match runner::lint(chainsaw, &f).await? {
            Err(lint) => Err(lint),
            Ok(()) => read_file(&f).map_err(|e| {
                std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
                    .skip(1)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join(": ")
            }),
        };
        out.push((f, result));
    }
    Ok(out)
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

/// `test` as a scenario named `<suite>/<test name>` (suite `chainsaw` unless the harness
/// section names one), with the requirements of its harness section, run by chainsaw with
/// `settings`.
pub fn scenario(test: Test, settings: &Settings) -> Scenario {
    let h = &test.harness;
    let suite = h.suite.clone().unwrap_or_else(|| "chainsaw".into());
    let name = match &test.qualifier {
        Some(q) => format!("{suite}/{q}/{}", test.name),
        None => format!("{suite}/{}", test.name),
    };
    let summary = test
        .description
        .clone()
        .unwrap_or_else(|| format!("chainsaw test {}", test.name))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut labels = vec![LABEL.to_string()];
    labels.extend(h.labels.iter().cloned());
    if test.runs_commands {
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
        alone: false,
        skip: test.skip.then(|| "the test says skip: true".to_string()),
        // chainsaw makes the test's namespace, as it would on its own: the scenario's, from
        // the configuration's template, or the one the test names or templates.
        namespace: NamespaceMaker::Body {
            name: match &test.namespace {
                AskedNamespace::Given => None,
                AskedNamespace::Named(n) | AskedNamespace::Template(Some(n)) => Some(n.clone()),
                AskedNamespace::Template(None) => None,
            },
        },
    };
    let allowed = h.allowed_warnings.clone();
    // A test's own pods and PVCs have no owner (the orphan check still counts objects whose
    // owner is gone).
    let mut expected = h.expected_violations.clone();
    expected.push(crate::scenario::invariants::BARE_OBJECTS.into());
    let test = Arc::new(test);
    let settings = Arc::new(settings.clone());
    Scenario::new(name, summary, labels, move |ctx| {
        let (test, settings) = (test.clone(), settings.clone());
        async move { runner::run_test(&test, &settings, &ctx).await }
    })
    .requiring(requires)
    .allowing(allowed)
    .expecting(expected)
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
        let source = Source::Disk {
            dir: "/x".into(),
            file: "chainsaw-test.yaml".into(),
        };
        let tests = parse_file(Path::new("/x/chainsaw-test.yaml"), TWO, &source).unwrap();
        assert_eq!(tests.len(), 1);
        assert_eq!(tests[0].source, source);
        let s = scenario(tests[0].clone(), &Settings::default());
        assert_eq!(s.name, "daemonset/first");
        assert_eq!(s.suite(), "daemonset");
        assert_eq!(s.summary, "a first test");
        assert!(s.has_label("smoke"));
        assert!(s.has_label(LABEL));
        assert!(s.has_label(KUBECTL_LABEL));
        assert_eq!(s.requires.namespace, NamespaceMaker::Body { name: None });
    }

    #[test]
    fn directories_are_searched_and_bad_input_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join("chainsaw-test.yaml"), TWO).unwrap();
        let tests = load(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(tests.len(), 1);
        assert_eq!(
            tests[0].source,
            Source::Disk {
                dir: a.clone(),
                file: "chainsaw-test.yaml".into()
            }
        );
        let empty = tempfile::tempdir().unwrap();
        let e = load(&[empty.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("no chainsaw test"), "{e}");
        // A second directory's test of the same name is named with its directory.
        let b = dir.path().join("b");
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("chainsaw-test.yaml"), TWO).unwrap();
        let tests = load(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(tests[1].qualifier.as_deref(), Some("b"));
        let s = scenario(tests[1].clone(), &Settings::default());
        assert_eq!(s.name, "daemonset/b/first");
        // A third in another directory `b` cannot be told apart.
        let xb = dir.path().join("x/b");
        std::fs::create_dir_all(&xb).unwrap();
        std::fs::write(xb.join("chainsaw-test.yaml"), TWO).unwrap();
        let e = load(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("two tests named `first`"), "{e}");
        let e = load(&[dir.path().join("missing")]).unwrap_err();
        assert!(e.to_string().contains("read"), "{e}");
        // Two tests of one name in one file are one scenario (chainsaw runs both).
        let c = dir.path().join("c.yaml");
        std::fs::write(&c, format!("{TWO}---\n{TWO}")).unwrap();
        assert_eq!(load(&[c]).unwrap().len(), 1);
        let e = load(&[dir.path().join("missing")]).unwrap_err();
        assert!(e.to_string().contains("read"), "{e}");
    }

    #[test]
    fn an_embedded_tree_gives_file_tests_and_directory_tests_with_their_files() {
        let files: &[(&str, &[u8])] = &[
            ("one.yaml", TWO.as_bytes()),
            ("README.md", b"not a test"),
            (
                "dir/chainsaw-test.yaml",
                TWO.replace("first", "second").leak().as_bytes(),
            ),
            ("dir/resources.yaml", b"kind: ConfigMap"),
        ];
        let tests = parse_embedded("suites/chainsaw", files).unwrap();
        assert_eq!(tests.len(), 2);
        assert_eq!(
            tests[0].source,
            Source::Embedded {
                file: "one.yaml".into(),
                files: vec![("one.yaml".into(), TWO.as_bytes())],
            }
        );
        match &tests[1].source {
            Source::Embedded { file, files } => {
                assert_eq!(file, "chainsaw-test.yaml");
                let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(names, ["chainsaw-test.yaml", "resources.yaml"]);
            }
            other => panic!("{other:?}"),
        }
    }
}
