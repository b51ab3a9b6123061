//! What the harness reads of a chainsaw `Test` before chainsaw runs it: its name, where it
//! lives, whether it is skipped, which namespace it asks for, whether it runs commands, and
//! the harness section (`harness.io/…` annotations, so the file stays a valid chainsaw test).
//! Everything else — steps, operations, expressions — is chainsaw's, read and validated by
//! chainsaw itself.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

/// The API version of chainsaw tests.
pub const API_VERSION: &str = "chainsaw.kyverno.io/v1alpha1";

/// The annotation prefix of the harness section of a test.
pub const HARNESS_PREFIX: &str = "harness.io/";

/// Why a test's header could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A field holds a value of the wrong shape.
    #[error("{at}: {what}")]
    Invalid {
        /// Where (e.g. `metadata.annotations.harness.io/kubernetes`).
        at: String,
        /// What is wrong.
        what: String,
    },
    /// An annotation under `harness.io/` the harness does not know.
    #[error("{at}: unknown field `{field}`")]
    Unknown {
        /// Where.
        at: String,
        /// The field.
        field: String,
    },
}

fn invalid(at: &str, what: impl Into<String>) -> ModelError {
    ModelError::Invalid {
        at: at.into(),
        what: what.into(),
    }
}

/// An inclusive range of Kubernetes minors, either end open: `((1, 29), (1, 32))`.
pub type MinorRange = (Option<(u32, u32)>, Option<(u32, u32)>);

/// What the harness needs to know about a test beyond chainsaw's format: annotations under
/// `harness.io/` on the Test.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HarnessSection {
    /// `harness.io/suite`: the suite (default `chainsaw`).
    pub suite: Option<String>,
    /// `harness.io/labels`: comma-separated labels.
    pub labels: Vec<String>,
    /// `harness.io/kubernetes`: `1.29+`, `-1.32` or `1.29-1.32`.
    pub kubernetes: Option<MinorRange>,
    /// `harness.io/feature-gates`: apiserver feature gates, `A=true,B=false`.
    pub feature_gates: BTreeMap<String, bool>,
    /// `harness.io/controller-gates`: controller feature gates.
    pub controller_gates: BTreeMap<String, bool>,
    /// `harness.io/controller-since`: the oldest controller release that has what it tests.
    pub controller_since: Option<String>,
    /// `harness.io/real-nodes`: real nodes it needs.
    pub real_nodes: usize,
    /// `harness.io/allowed-warnings`: Warning event reasons it expects.
    pub allowed_warnings: Vec<String>,
    /// `harness.io/expected-violations`: invariant rules it breaks on purpose.
    pub expected_violations: Vec<String>,
}

/// Where chainsaw finds a test: `--test-dir` and `--test-file`.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A file on disk (`dir/file`); `file:` paths in it are read from `dir`.
    Disk {
        /// The directory.
        dir: PathBuf,
        /// The file name in it.
        file: String,
    },
    /// Compiled into the harness: `files` (paths relative to the test's directory, and
    /// contents) are written to a directory of their own for each run.
    Embedded {
        /// The test file's name among `files`.
        file: String,
        /// The test's directory.
        files: Vec<(String, &'static [u8])>,
    },
}

/// The namespace a test asks chainsaw for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskedNamespace {
    /// None: chainsaw uses the one it is given (the harness gives the scenario's own).
    Given,
    /// `spec.namespace`: this one.
    Named(String),
    /// `spec.namespaceTemplate`: one made from the template, named by it if it names one.
    Template(Option<String>),
}

/// A chainsaw test, as far as the harness reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    /// `metadata.name`.
    pub name: String,
    /// Set when another test of the run has the same name: the name of this one's
    /// directory, which the scenario's name then carries (`<suite>/<dir>/<name>`).
    pub qualifier: Option<String>,
    /// Where it lives.
    pub source: Source,
    /// `spec.description`.
    pub description: Option<String>,
    /// `spec.skip`.
    pub skip: bool,
    /// `spec.namespace` or `spec.namespaceTemplate`.
    pub namespace: AskedNamespace,
    /// Whether any operation runs a script or a command (they get the toolchain's kubectl).
    pub runs_commands: bool,
    /// The harness section.
    pub harness: HarnessSection,
}

fn string(v: &Value, at: &str) -> Result<String, ModelError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(invalid(at, format!("expected a string, got {v}"))),
    }
}

/// Whether `v` holds, at any depth, an operation that runs a script or a command.
fn has_commands(v: &Value) -> bool {
    match v {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| ((k == "script" || k == "command") && v.is_object()) || has_commands(v)),
        Value::Array(a) => a.iter().any(has_commands),
        _ => false,
    }
}

/// Reads a Test's header from one YAML document (already parsed).
pub fn parse_test(doc: &Value, source: Source) -> Result<Test, ModelError> {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    if api != API_VERSION || kind != "Test" {
        return Err(invalid(
            "test",
            format!("expected apiVersion {API_VERSION} and kind Test, got `{api}` `{kind}`"),
        ));
    }
    let name = string(
        doc.pointer("/metadata/name")
            .ok_or_else(|| invalid("metadata", "a test needs a name"))?,
        "metadata.name",
    )?;
    let spec = &doc["spec"];
    if !spec.is_object() {
        return Err(invalid("test", "a test needs a spec"));
    }
    let namespace = match (spec.get("namespace"), spec.get("namespaceTemplate")) {
        (Some(n), _) => AskedNamespace::Named(string(n, "spec.namespace")?),
        (None, Some(t)) => AskedNamespace::Template(
            t.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        (None, None) => AskedNamespace::Given,
    };
    Ok(Test {
        name,
        qualifier: None,
        source,
        description: spec
            .get("description")
            .map(|d| string(d, "spec.description"))
            .transpose()?,
        skip: match spec.get("skip") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(invalid(
                    "spec.skip",
                    format!("expected true or false, got {v}"),
                ));
            }
        },
        namespace,
        runs_commands: has_commands(spec),
        harness: harness_section(doc.pointer("/metadata/annotations"))?,
    })
}

fn gates(s: &str, at: &str) -> Result<BTreeMap<String, bool>, ModelError> {
    s.split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| {
            let (k, v) = g.split_once('=').unwrap_or((g, "true"));
            let v = v
                .trim()
                .parse()
                .map_err(|_| invalid(at, format!("`{g}` is not Gate=true or Gate=false")))?;
            Ok((k.trim().to_string(), v))
        })
        .collect()
}

fn minor(s: &str, at: &str) -> Result<(u32, u32), ModelError> {
    let bad = || invalid(at, format!("`{s}` is not a Kubernetes minor like 1.29"));
    let (a, b) = s.trim().split_once('.').ok_or_else(bad)?;
    Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn harness_section(annotations: Option<&Value>) -> Result<HarnessSection, ModelError> {
    let mut h = HarnessSection::default();
    let Some(Value::Object(a)) = annotations else {
        return Ok(h);
    };
    for (k, v) in a {
        let Some(key) = k.strip_prefix(HARNESS_PREFIX) else {
            continue;
        };
        let at = format!("metadata.annotations.{k}");
        let v = string(v, &at)?;
        match key {
            "suite" => h.suite = Some(v.trim().into()),
            "labels" => h.labels = list(&v),
            "kubernetes" => {
                let v = v.trim();
                h.kubernetes = Some(if let Some(lo) = v.strip_suffix('+') {
                    (Some(minor(lo, &at)?), None)
                } else if let Some(hi) = v.strip_prefix('-') {
                    (None, Some(minor(hi, &at)?))
                } else if let Some((lo, hi)) = v.split_once('-') {
                    (Some(minor(lo, &at)?), Some(minor(hi, &at)?))
                } else {
                    let m = minor(v, &at)?;
                    (Some(m), Some(m))
                });
            }
            "feature-gates" => h.feature_gates = gates(&v, &at)?,
            "controller-gates" => h.controller_gates = gates(&v, &at)?,
            "controller-since" => h.controller_since = Some(v.trim().into()),
            "real-nodes" => {
                h.real_nodes = v
                    .trim()
                    .parse()
                    .map_err(|_| invalid(&at, format!("`{v}` is not a number of nodes")))?
            }
            "allowed-warnings" => h.allowed_warnings = list(&v),
            "expected-violations" => h.expected_violations = list(&v),
            _ => {
                return Err(ModelError::Unknown {
                    at: "metadata.annotations".into(),
                    field: k.clone(),
                });
            }
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn disk() -> Source {
        Source::Disk {
            dir: "/t".into(),
            file: "chainsaw-test.yaml".into(),
        }
    }

    #[test]
    fn the_header_and_the_harness_section_are_read() {
        let doc = json!({
            "apiVersion": API_VERSION, "kind": "Test",
            "metadata": {"name": "t", "annotations": {
                "harness.io/suite": "daemonset",
                "harness.io/labels": "seed, smoke",
                "harness.io/kubernetes": "1.29-1.32",
                "harness.io/feature-gates": "A=true,B=false",
                "harness.io/real-nodes": "1",
                "other.io/x": "ignored"}},
            "spec": {"description": "d", "steps": [{"try": [{"script": {"content": "true"}}]}]}
        });
        let t = parse_test(&doc, disk()).unwrap();
        assert_eq!(t.name, "t");
        assert_eq!(t.description.as_deref(), Some("d"));
        assert!(t.runs_commands && !t.skip);
        assert_eq!(t.namespace, AskedNamespace::Given);
        let h = t.harness;
        assert_eq!(h.suite.as_deref(), Some("daemonset"));
        assert_eq!(h.labels, ["seed", "smoke"]);
        assert_eq!(h.kubernetes, Some((Some((1, 29)), Some((1, 32)))));
        assert_eq!(h.feature_gates.get("B"), Some(&false));
        assert_eq!(h.real_nodes, 1);
    }

    #[test]
    fn the_namespace_a_test_asks_for_is_read() {
        let with = |spec: Value| {
            let doc = json!({"apiVersion": API_VERSION, "kind": "Test",
                "metadata": {"name": "t"}, "spec": spec});
            parse_test(&doc, disk()).unwrap().namespace
        };
        assert_eq!(
            with(json!({"namespace": "fixed", "steps": []})),
            AskedNamespace::Named("fixed".into())
        );
        assert_eq!(
            with(json!({"namespaceTemplate": {"metadata": {"name": "foo"}}, "steps": []})),
            AskedNamespace::Template(Some("foo".into()))
        );
        assert_eq!(
            with(json!({"namespaceTemplate": {"metadata": {"labels": {"a": "b"}}}})),
            AskedNamespace::Template(None)
        );
        // A `command` key that is not an operation (a binding's value) is not a command.
        let doc = json!({"apiVersion": API_VERSION, "kind": "Test", "metadata": {"name": "t"},
            "spec": {"bindings": [{"name": "command", "value": "x"}], "steps": []}});
        assert!(!parse_test(&doc, disk()).unwrap().runs_commands);
    }

    #[test]
    fn bad_headers_are_named() {
        let e = parse_test(&json!({"apiVersion": "v1", "kind": "ConfigMap"}), disk()).unwrap_err();
        assert!(e.to_string().contains("expected apiVersion"), "{e}");
        let doc = json!({"apiVersion": API_VERSION, "kind": "Test",
            "metadata": {"name": "t", "annotations": {"harness.io/kubernetes": "one"}},
            "spec": {"steps": []}});
        let e = parse_test(&doc, disk()).unwrap_err();
        assert!(e.to_string().contains("not a Kubernetes minor"), "{e}");
        let doc = json!({"apiVersion": API_VERSION, "kind": "Test",
            "metadata": {"name": "t", "annotations": {"harness.io/nope": "x"}},
            "spec": {"steps": []}});
        let e = parse_test(&doc, disk()).unwrap_err();
        assert!(
            e.to_string().contains("unknown field `harness.io/nope`"),
            "{e}"
        );
    }
}
