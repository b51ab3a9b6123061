//! chainsaw's `Test` format as the harness reads it: [`Test`] (steps of [`Op`]s with try, catch,
//! finally and cleanup), parsed from YAML with every field checked. A field the harness does
//! not implement is refused with a [`ModelError::Unsupported`] naming it, never ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

/// The API version of chainsaw tests.
pub const API_VERSION: &str = "chainsaw.kyverno.io/v1alpha1";

/// The annotation prefix of the harness section of a test.
pub const HARNESS_PREFIX: &str = "harness.io/";

/// Why a test could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A field holds a value of the wrong shape.
    #[error("{at}: {what}")]
    Invalid {
        /// Where (e.g. `spec.steps[1].try[0].apply`).
        at: String,
        /// What is wrong.
        what: String,
    },
    /// A field chainsaw has and the harness does not implement.
    #[error("{at}: `{field}` is not supported by the harness{}", hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Unsupported {
        /// Where.
        at: String,
        /// The field.
        field: String,
        /// What to do instead, if anything.
        hint: Option<String>,
    },
    /// A field neither chainsaw nor the harness knows.
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

fn unsupported(at: &str, field: &str, hint: Option<&str>) -> ModelError {
    ModelError::Unsupported {
        at: at.into(),
        field: field.into(),
        hint: hint.map(Into::into),
    }
}

/// chainsaw's default timeouts, overridden per test, step and operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// apply, create, patch, update.
    pub apply: Duration,
    /// assert and wait.
    pub assert: Duration,
    /// Cleanup.
    pub cleanup: Duration,
    /// delete.
    pub delete: Duration,
    /// error.
    pub error: Duration,
    /// script and command.
    pub exec: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            apply: Duration::from_secs(5),
            assert: Duration::from_secs(30),
            cleanup: Duration::from_secs(30),
            delete: Duration::from_secs(15),
            error: Duration::from_secs(30),
            exec: Duration::from_secs(5),
        }
    }
}

impl Timeouts {
    /// These with the ones `v` (a `timeouts` object) sets.
    fn overridden(mut self, v: Option<&Value>, at: &str) -> Result<Self, ModelError> {
        let Some(v) = v else { return Ok(self) };
        let m = object(v, at)?;
        for (k, v) in m {
            let d = duration(v, &format!("{at}.{k}"))?;
            match k.as_str() {
                "apply" => self.apply = d,
                "assert" => self.assert = d,
                "cleanup" => self.cleanup = d,
                "delete" => self.delete = d,
                "error" => self.error = d,
                "exec" => self.exec = d,
                _ => {
                    return Err(ModelError::Unknown {
                        at: at.into(),
                        field: k.clone(),
                    });
                }
            }
        }
        Ok(self)
    }
}

/// A binding: `$name` for what follows, its value templated when it is read.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// Name, without `$`.
    pub name: String,
    /// Value (may be an expression).
    pub value: Value,
}

/// Where the resources of an operation come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Resources {
    /// Given inline.
    Inline(Value),
    /// A file (relative to the test's directory), one or more YAML documents.
    File(String),
}

/// An expectation on an operation's outcome (`expect`): when `matches` (if any) matches the
/// resource, `check` must hold, with `$error` bound to the error (null if none).
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    /// Which resources it is about.
    pub matches: Option<Value>,
    /// The assertion tree.
    pub check: Value,
}

/// A named value an operation makes available to the operations after it in the step.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Name, without `$`.
    pub name: String,
    /// Its value (an expression over the operation's result, `@`).
    pub value: Value,
    /// Which of the operation's objects it is taken from (the first if none).
    pub matches: Option<Value>,
}

/// The objects an operation refers to (`delete.ref`, `wait`, `describe`, `get`, `podLogs`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObjectRef {
    /// API version.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name, if one.
    pub name: Option<String>,
    /// Namespace, if not the test's.
    pub namespace: Option<String>,
    /// A label selector (`a=b,c=d`).
    pub selector: Option<String>,
    /// Container (podLogs).
    pub container: Option<String>,
}

/// What a `wait` waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitFor {
    /// A status condition with a value (default "true").
    Condition {
        /// Condition type.
        name: String,
        /// Status, compared case-insensitively.
        value: String,
    },
    /// The objects are gone.
    Deletion,
    /// A field (`{.status.phase}`) has a value.
    JsonPath {
        /// The path.
        path: String,
        /// The value.
        value: String,
    },
}

/// One operation.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// Create, or merge-patch an existing object.
    Apply(Resources, Vec<Expect>),
    /// Create (an existing object is an error).
    Create(Resources, Vec<Expect>),
    /// Merge-patch an existing object.
    Patch(Resources, Vec<Expect>),
    /// Replace an existing object.
    Update(Resources, Vec<Expect>),
    /// Delete and wait until gone.
    Delete(DeleteTarget, Vec<Expect>),
    /// Some object matches the tree (waits until one does).
    Assert(Resources),
    /// No object matches the tree (waits until none does).
    Error(Resources),
    /// Waits for a condition, a deletion or a field value.
    Wait(ObjectRef, WaitFor),
    /// Sleeps.
    Sleep(Duration),
    /// A shell script (`sh -c`), with the toolchain's kubectl first on PATH.
    Script {
        /// Its text.
        content: String,
        /// Extra environment.
        env: Vec<Binding>,
        /// An assertion tree over `$stdout`, `$stderr` and `$error`; without it a non-zero
        /// exit fails.
        check: Option<Value>,
    },
    /// kubectl with arguments (the only command the harness runs).
    Command {
        /// Arguments.
        args: Vec<String>,
        /// Extra environment.
        env: Vec<Binding>,
        /// As for scripts.
        check: Option<Value>,
    },
    /// The namespace's events (collected into the report).
    Events(ObjectRef),
    /// Objects' YAML (collected into the report).
    Describe(ObjectRef),
    /// Pods' logs (collected into the report).
    PodLogs(ObjectRef),
}

/// What a `delete` deletes.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteTarget {
    /// By reference.
    Ref(ObjectRef),
    /// The objects of a tree.
    Resources(Resources),
}

/// An operation with its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// What it does.
    pub kind: OpKind,
    /// Its own timeout, if set.
    pub timeout: Option<Duration>,
    /// Bindings for it.
    pub bindings: Vec<Binding>,
    /// Whether its resources are templated (default: the test's).
    pub template: Option<bool>,
    /// Outputs.
    pub outputs: Vec<Output>,
    /// Where it is, for messages (`step-1 try[0] apply`).
    pub at: String,
}

/// A step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Name (`step-<n>` if none).
    pub name: String,
    /// Bindings.
    pub bindings: Vec<Binding>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Operations; the first failure ends the step.
    pub try_: Vec<Op>,
    /// Run when the step failed.
    pub catch: Vec<Op>,
    /// Run after the step whatever happened.
    pub finally: Vec<Op>,
    /// Run at the end of the test, last registered first.
    pub cleanup: Vec<Op>,
}

/// An inclusive range of Kubernetes minors, either end open: `((1, 29), (1, 32))`.
pub type MinorRange = (Option<(u32, u32)>, Option<(u32, u32)>);

/// What the harness needs to know about a test beyond chainsaw's format: annotations under
/// `harness.io/` on the Test (so the file stays a valid chainsaw test).
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

/// A chainsaw test.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    /// `metadata.name`.
    pub name: String,
    /// Its directory (where `file:` paths are read), if it came from one.
    pub dir: Option<PathBuf>,
    /// `spec.description`.
    pub description: Option<String>,
    /// `spec.skip`.
    pub skip: bool,
    /// `spec.bindings`.
    pub bindings: Vec<Binding>,
    /// `spec.steps`.
    pub steps: Vec<Step>,
    /// `spec.catch`: run, after the step's own, when any step fails.
    pub catch: Vec<Op>,
    /// `spec.template` (default true): resources are templated.
    pub template: bool,
    /// `spec.namespace`: a fixed namespace instead of the scenario's own.
    pub namespace: Option<String>,
    /// The harness section.
    pub harness: HarnessSection,
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, ModelError> {
    v.as_object()
        .ok_or_else(|| invalid(at, format!("expected an object, got {}", short(v))))
}

fn array<'a>(v: &'a Value, at: &str) -> Result<&'a Vec<Value>, ModelError> {
    v.as_array()
        .ok_or_else(|| invalid(at, format!("expected a list, got {}", short(v))))
}

fn string(v: &Value, at: &str) -> Result<String, ModelError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(invalid(at, format!("expected a string, got {}", short(v)))),
    }
}

fn boolean(v: &Value, at: &str) -> Result<bool, ModelError> {
    v.as_bool()
        .ok_or_else(|| invalid(at, format!("expected true or false, got {}", short(v))))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// A Go duration (`300ms`, `5s`, `1m30s`, `1h`).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..n_end].parse().ok()?;
        rest = &rest[n_end..];
        let u_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..u_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * unit;
        rest = &rest[u_end..];
    }
    Some(Duration::from_secs_f64(total))
}

fn duration(v: &Value, at: &str) -> Result<Duration, ModelError> {
    let s = string(v, at)?;
    parse_duration(&s)
        .ok_or_else(|| invalid(at, format!("`{s}` is not a duration like 5s or 1m30s")))
}

/// Checks that `m` has only `known` keys; `refused` keys get an Unsupported error with a hint.
fn only(
    m: &Map<String, Value>,
    at: &str,
    known: &[&str],
    refused: &[(&str, &str)],
) -> Result<(), ModelError> {
    for k in m.keys() {
        if let Some((_, hint)) = refused.iter().find(|(f, _)| f == k) {
            return Err(unsupported(at, k, (!hint.is_empty()).then_some(*hint)));
        }
        if !known.contains(&k.as_str()) {
            return Err(ModelError::Unknown {
                at: at.into(),
                field: k.clone(),
            });
        }
    }
    Ok(())
}

fn bindings(v: Option<&Value>, at: &str) -> Result<Vec<Binding>, ModelError> {
    let Some(v) = v else { return Ok(vec![]) };
    array(v, at)?
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let at = format!("{at}[{i}]");
            let m = object(b, &at)?;
            only(m, &at, &["name", "value"], &[COMPILER])?;
            Ok(Binding {
                name: string(
                    m.get("name")
                        .ok_or_else(|| invalid(&at, "a binding needs a name"))?,
                    &at,
                )?,
                value: m.get("value").cloned().unwrap_or(Value::Null),
            })
        })
        .collect()
}

fn outputs(v: Option<&Value>, at: &str) -> Result<Vec<Output>, ModelError> {
    let Some(v) = v else { return Ok(vec![]) };
    array(v, at)?
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let at = format!("{at}[{i}]");
            let m = object(o, &at)?;
            only(m, &at, &["name", "value", "match"], &[COMPILER])?;
            Ok(Output {
                name: string(
                    m.get("name")
                        .ok_or_else(|| invalid(&at, "an output needs a name"))?,
                    &at,
                )?,
                value: m.get("value").cloned().unwrap_or(Value::Null),
                matches: m.get("match").cloned(),
            })
        })
        .collect()
}

/// The `compiler` field chainsaw has for CEL expressions.
const COMPILER: (&str, &str) = ("compiler", "only JMESPath expressions are supported");

fn expects(v: Option<&Value>, at: &str) -> Result<Vec<Expect>, ModelError> {
    let Some(v) = v else { return Ok(vec![]) };
    array(v, at)?
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let at = format!("{at}[{i}]");
            let m = object(e, &at)?;
            only(m, &at, &["match", "check"], &[])?;
            Ok(Expect {
                matches: m.get("match").cloned(),
                check: m
                    .get("check")
                    .cloned()
                    .ok_or_else(|| invalid(&at, "an expectation needs a check"))?,
            })
        })
        .collect()
}

fn resources(m: &Map<String, Value>, at: &str) -> Result<Resources, ModelError> {
    match (m.get("resource"), m.get("file")) {
        (Some(r), None) => {
            object(r, &format!("{at}.resource"))?;
            Ok(Resources::Inline(r.clone()))
        }
        (None, Some(f)) => {
            let f = string(f, &format!("{at}.file"))?;
            if f.contains("://") {
                return Err(unsupported(
                    at,
                    "file",
                    Some("a URL; the harness reads files from the test's directory only"),
                ));
            }
            Ok(Resources::File(f))
        }
        (Some(_), Some(_)) => Err(invalid(at, "give either `resource` or `file`, not both")),
        (None, None) => Err(invalid(at, "needs `resource` or `file`")),
    }
}

fn object_ref(m: &Map<String, Value>, at: &str) -> Result<ObjectRef, ModelError> {
    let get = |k: &str| -> Result<Option<String>, ModelError> {
        m.get(k)
            .map(|v| string(v, &format!("{at}.{k}")))
            .transpose()
    };
    let selector = match m.get("selector") {
        Some(Value::Object(sel)) => Some(
            sel.iter()
                .map(|(k, v)| Ok(format!("{k}={}", string(v, at)?)))
                .collect::<Result<Vec<_>, ModelError>>()?
                .join(","),
        ),
        Some(v) => Some(string(v, &format!("{at}.selector"))?),
        None => match m.get("labels") {
            Some(Value::Object(l)) => Some(
                l.iter()
                    .map(|(k, v)| Ok(format!("{k}={}", string(v, at)?)))
                    .collect::<Result<Vec<_>, ModelError>>()?
                    .join(","),
            ),
            _ => None,
        },
    };
    Ok(ObjectRef {
        api_version: get("apiVersion")?.unwrap_or_default(),
        kind: get("kind")?.unwrap_or_default(),
        name: get("name")?,
        namespace: get("namespace")?,
        selector,
        container: get("container")?,
    })
}

/// Keys every operation may carry.
const COMMON: &[&str] = &["description", "timeout", "bindings", "template", "outputs"];

/// Keys every operation may carry that the harness refuses.
const COMMON_REFUSED: &[(&str, &str)] = &[
    (
        "cluster",
        "tests run on the harness's cell; multi-cluster tests are not supported",
    ),
    (
        "clusters",
        "tests run on the harness's cell; multi-cluster tests are not supported",
    ),
];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    COMMON.iter().chain(extra).copied().collect()
}

fn op(v: &Value, at: &str) -> Result<Op, ModelError> {
    let m = object(v, at)?;
    if m.contains_key("compiler") {
        return Err(unsupported(at, COMPILER.0, Some(COMPILER.1)));
    }
    let mut names: Vec<&String> = m
        .keys()
        .filter(|k| !["description"].contains(&k.as_str()))
        .collect();
    if names.len() != 1 {
        // e.g. `- description: x\n  apply: ...` has two keys; pick the operation.
        names.retain(|k| !COMMON.contains(&k.as_str()));
    }
    let [name] = names.as_slice() else {
        return Err(invalid(
            at,
            "an operation has exactly one kind (apply, assert, ...)",
        ));
    };
    let name = name.as_str();
    let at = format!("{at}.{name}");
    let body = &m[name];
    let empty = Map::new();
    let b = if body.is_null() {
        &empty
    } else {
        object(body, &at)?
    };
    let kind = match name {
        "apply" | "create" | "patch" | "update" => {
            only(
                b,
                &at,
                &with(&["resource", "file", "expect"]),
                &[
                    ("dryRun", "dry runs are not supported"),
                    ("force", ""),
                    ("cluster", "multi-cluster tests are not supported"),
                    ("clusters", "multi-cluster tests are not supported"),
                ],
            )?;
            let r = resources(b, &at)?;
            let e = expects(b.get("expect"), &format!("{at}.expect"))?;
            match name {
                "apply" => OpKind::Apply(r, e),
                "create" => OpKind::Create(r, e),
                "patch" => OpKind::Patch(r, e),
                _ => OpKind::Update(r, e),
            }
        }
        "assert" | "error" => {
            only(b, &at, &with(&["resource", "file"]), COMMON_REFUSED)?;
            let r = resources(b, &at)?;
            if name == "assert" {
                OpKind::Assert(r)
            } else {
                OpKind::Error(r)
            }
        }
        "delete" => {
            only(
                b,
                &at,
                &with(&[
                    "ref",
                    "resource",
                    "file",
                    "expect",
                    "deletionPropagationPolicy",
                ]),
                COMMON_REFUSED,
            )?;
            let e = expects(b.get("expect"), &format!("{at}.expect"))?;
            let target = match b.get("ref") {
                Some(r) => {
                    let rm = object(r, &format!("{at}.ref"))?;
                    only(
                        rm,
                        &format!("{at}.ref"),
                        &["apiVersion", "kind", "name", "namespace", "labels"],
                        &[],
                    )?;
                    DeleteTarget::Ref(object_ref(rm, &format!("{at}.ref"))?)
                }
                None => DeleteTarget::Resources(resources(b, &at)?),
            };
            OpKind::Delete(target, e)
        }
        "wait" => {
            only(
                b,
                &at,
                &with(&[
                    "apiVersion",
                    "kind",
                    "name",
                    "namespace",
                    "selector",
                    "for",
                    "format",
                ]),
                COMMON_REFUSED,
            )?;
            let r = object_ref(b, &at)?;
            let f = object(
                b.get("for")
                    .ok_or_else(|| invalid(&at, "needs `for` (condition, deletion or jsonPath)"))?,
                &format!("{at}.for"),
            )?;
            let for_at = format!("{at}.for");
            only(f, &for_at, &["condition", "deletion", "jsonPath"], &[])?;
            let wait_for = if let Some(c) = f.get("condition") {
                let c = object(c, &format!("{for_at}.condition"))?;
                WaitFor::Condition {
                    name: string(
                        c.get("name")
                            .ok_or_else(|| invalid(&for_at, "a condition needs a name"))?,
                        &for_at,
                    )?,
                    value: c
                        .get("value")
                        .map(|v| string(v, &for_at))
                        .transpose()?
                        .unwrap_or_else(|| "true".into()),
                }
            } else if f.contains_key("deletion") {
                WaitFor::Deletion
            } else if let Some(j) = f.get("jsonPath") {
                let j = object(j, &format!("{for_at}.jsonPath"))?;
                let get = |k: &str| {
                    j.get(k)
                        .map(|v| string(v, &for_at))
                        .transpose()?
                        .ok_or_else(|| invalid(&for_at, format!("jsonPath needs `{k}`")))
                };
                WaitFor::JsonPath {
                    path: get("path")?,
                    value: get("value")?,
                }
            } else {
                return Err(invalid(&for_at, "needs condition, deletion or jsonPath"));
            };
            if r.api_version.is_empty() || r.kind.is_empty() {
                return Err(invalid(&at, "needs apiVersion and kind"));
            }
            OpKind::Wait(r, wait_for)
        }
        "sleep" => {
            only(b, &at, &["duration", "description"], &[])?;
            OpKind::Sleep(duration(
                b.get("duration")
                    .ok_or_else(|| invalid(&at, "needs a duration"))?,
                &format!("{at}.duration"),
            )?)
        }
        "script" => {
            only(
                b,
                &at,
                &with(&[
                    "content",
                    "env",
                    "check",
                    "skipLogOutput",
                    "skipCommandOutput",
                ]),
                &[
                    ("workDir", "scripts run in the test's directory"),
                    ("cluster", "multi-cluster tests are not supported"),
                    ("clusters", "multi-cluster tests are not supported"),
                ],
            )?;
            OpKind::Script {
                content: string(
                    b.get("content")
                        .ok_or_else(|| invalid(&at, "needs content"))?,
                    &format!("{at}.content"),
                )?,
                env: bindings(b.get("env"), &format!("{at}.env"))?,
                check: b.get("check").cloned(),
            }
        }
        "command" => {
            only(
                b,
                &at,
                &with(&[
                    "entrypoint",
                    "args",
                    "env",
                    "check",
                    "skipLogOutput",
                    "skipCommandOutput",
                ]),
                COMMON_REFUSED,
            )?;
            let entry = b
                .get("entrypoint")
                .map(|v| string(v, &at))
                .transpose()?
                .unwrap_or_default();
            if entry != "kubectl" {
                return Err(unsupported(
                    &at,
                    &format!("entrypoint {entry}"),
                    Some("the only command the harness runs is the toolchain's kubectl"),
                ));
            }
            let args = match b.get("args") {
                Some(a) => array(a, &format!("{at}.args"))?
                    .iter()
                    .map(|v| string(v, &at))
                    .collect::<Result<_, _>>()?,
                None => vec![],
            };
            OpKind::Command {
                args,
                env: bindings(b.get("env"), &format!("{at}.env"))?,
                check: b.get("check").cloned(),
            }
        }
        "events" | "describe" | "podLogs" | "get" => {
            only(
                b,
                &at,
                &with(&[
                    "apiVersion",
                    "kind",
                    "name",
                    "namespace",
                    "selector",
                    "format",
                    "container",
                    "tail",
                    "showEvents",
                ]),
                COMMON_REFUSED,
            )?;
            let r = object_ref(b, &at)?;
            match name {
                "events" => OpKind::Events(r),
                "podLogs" => OpKind::PodLogs(r),
                _ => OpKind::Describe(r),
            }
        }
        "proxy" => {
            return Err(unsupported(
                &at,
                "proxy",
                Some("service proxies are not reachable through the harness"),
            ));
        }
        "use" => return Err(unsupported(&at, "use", Some("step templates"))),
        other => {
            return Err(ModelError::Unknown {
                at: at.clone(),
                field: other.into(),
            });
        }
    };
    let timeout = b
        .get("timeout")
        .map(|t| duration(t, &format!("{at}.timeout")))
        .transpose()?;
    Ok(Op {
        kind,
        timeout,
        bindings: bindings(b.get("bindings"), &format!("{at}.bindings"))?,
        template: b
            .get("template")
            .map(|t| boolean(t, &format!("{at}.template")))
            .transpose()?,
        outputs: outputs(b.get("outputs"), &format!("{at}.outputs"))?,
        at,
    })
}

fn ops(v: Option<&Value>, at: &str) -> Result<Vec<Op>, ModelError> {
    let Some(v) = v else { return Ok(vec![]) };
    array(v, at)?
        .iter()
        .enumerate()
        .map(|(i, o)| op(o, &format!("{at}[{i}]")))
        .collect()
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

/// Reads a Test from one YAML document (already parsed); `dir` is its directory, if any.
pub fn parse_test(doc: &Value, dir: Option<PathBuf>) -> Result<Test, ModelError> {
    let top = object(doc, "test")?;
    let api = top
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = top.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api != API_VERSION || kind != "Test" {
        return Err(invalid(
            "test",
            format!("expected apiVersion {API_VERSION} and kind Test, got `{api}` `{kind}`"),
        ));
    }
    let meta = object(top.get("metadata").unwrap_or(&Value::Null), "metadata")?;
    let name = string(
        meta.get("name")
            .ok_or_else(|| invalid("metadata", "a test needs a name"))?,
        "metadata.name",
    )?;
    let spec_v = top
        .get("spec")
        .ok_or_else(|| invalid("test", "a test needs a spec"))?;
    let spec = object(spec_v, "spec")?;
    only(
        spec,
        "spec",
        &[
            "steps",
            "bindings",
            "description",
            "timeouts",
            "skip",
            "concurrent",
            "catch",
            "template",
            "namespace",
            "skipDelete",
            "failFast",
            "delayBeforeCleanup",
            "forceTerminationGracePeriod",
            "deletionPropagationPolicy",
        ],
        &[
            ("cluster", "tests run on the harness's cell"),
            ("clusters", "tests run on the harness's cell"),
            (
                "namespaceTemplate",
                "each scenario gets a namespace of its own from the harness",
            ),
            ("scenarios", "run one test per parameter set instead"),
            ("compiler", "only JMESPath expressions are supported"),
        ],
    )?;
    let timeouts = Timeouts::default().overridden(spec.get("timeouts"), "spec.timeouts")?;
    let steps_v = array(
        spec.get("steps")
            .ok_or_else(|| invalid("spec", "a test needs steps"))?,
        "spec.steps",
    )?;
    let mut steps = vec![];
    for (i, s) in steps_v.iter().enumerate() {
        let at = format!("spec.steps[{i}]");
        let m = object(s, &at)?;
        only(
            m,
            &at,
            &[
                "name",
                "description",
                "bindings",
                "timeouts",
                "try",
                "catch",
                "finally",
                "cleanup",
                "skipDelete",
            ],
            &[
                ("use", "step templates are not supported"),
                ("cluster", "tests run on the harness's cell"),
                ("clusters", "tests run on the harness's cell"),
                ("compiler", "only JMESPath expressions are supported"),
            ],
        )?;
        let name = match m.get("name") {
            Some(n) => string(n, &format!("{at}.name"))?,
            None => format!("step-{}", i + 1),
        };
        steps.push(Step {
            bindings: bindings(m.get("bindings"), &format!("{at}.bindings"))?,
            timeouts: timeouts.overridden(m.get("timeouts"), &format!("{at}.timeouts"))?,
            try_: ops(m.get("try"), &format!("{name} try"))?,
            catch: ops(m.get("catch"), &format!("{name} catch"))?,
            finally: ops(m.get("finally"), &format!("{name} finally"))?,
            cleanup: ops(m.get("cleanup"), &format!("{name} cleanup"))?,
            name,
        });
    }
    Ok(Test {
        name,
        dir,
        description: spec
            .get("description")
            .map(|d| string(d, "spec.description"))
            .transpose()?,
        skip: spec
            .get("skip")
            .map(|s| boolean(s, "spec.skip"))
            .transpose()?
            .unwrap_or(false),
        bindings: bindings(spec.get("bindings"), "spec.bindings")?,
        steps,
        catch: ops(spec.get("catch"), "spec.catch")?,
        template: spec
            .get("template")
            .map(|t| boolean(t, "spec.template"))
            .transpose()?
            .unwrap_or(true),
        namespace: spec
            .get("namespace")
            .map(|n| string(n, "spec.namespace"))
            .transpose()?,
        harness: harness_section(meta.get("annotations"))?,
    })
}

/// The step timeouts of `test` apply to this operation kind.
pub fn timeout_of(op: &Op, t: &Timeouts) -> Duration {
    op.timeout.unwrap_or(match &op.kind {
        OpKind::Apply(..) | OpKind::Create(..) | OpKind::Patch(..) | OpKind::Update(..) => t.apply,
        OpKind::Assert(_) | OpKind::Wait(..) => t.assert,
        OpKind::Error(_) => t.error,
        OpKind::Delete(..) => t.delete,
        OpKind::Script { .. } | OpKind::Command { .. } => t.exec,
        OpKind::Sleep(d) => *d,
        OpKind::Events(_) | OpKind::Describe(_) | OpKind::PodLogs(_) => t.assert,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn test(spec: Value) -> Result<Test, ModelError> {
        parse_test(
            &json!({"apiVersion": API_VERSION, "kind": "Test",
                "metadata": {"name": "t"}, "spec": spec}),
            None,
        )
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5"), None);
    }

    #[test]
    fn steps_ops_and_timeouts_are_read() {
        let t = test(json!({
            "timeouts": {"assert": "10s"},
            "steps": [{"try": [
                {"apply": {"resource": {"apiVersion": "v1", "kind": "ConfigMap"}}},
                {"assert": {"file": "a.yaml", "timeout": "3s"}},
                {"sleep": {"duration": "1s"}},
            ], "catch": [{"events": {}}]}]
        }))
        .unwrap();
        let s = &t.steps[0];
        assert_eq!(s.name, "step-1");
        assert_eq!(s.try_.len(), 3);
        assert!(matches!(s.try_[1].kind, OpKind::Assert(Resources::File(_))));
        assert_eq!(timeout_of(&s.try_[0], &s.timeouts), Duration::from_secs(5));
        assert_eq!(timeout_of(&s.try_[1], &s.timeouts), Duration::from_secs(3));
        assert_eq!(s.timeouts.assert, Duration::from_secs(10));
        assert!(matches!(s.catch[0].kind, OpKind::Events(_)));
        assert!(t.template);
    }

    #[test]
    fn unsupported_features_are_refused_by_name() {
        let e = test(json!({"steps": [{"use": {"template": "x.yaml"}}]})).unwrap_err();
        assert!(e.to_string().contains("`use` is not supported"), "{e}");
        let e = test(json!({"clusters": {}, "steps": []})).unwrap_err();
        assert!(e.to_string().contains("`clusters` is not supported"), "{e}");
        let e = test(json!({"steps": [{"try": [{"proxy": {"port": "80"}}]}]})).unwrap_err();
        assert!(e.to_string().contains("`proxy` is not supported"), "{e}");
        let e =
            test(json!({"steps": [{"try": [{"command": {"entrypoint": "echo"}}]}]})).unwrap_err();
        assert!(e.to_string().contains("entrypoint echo"), "{e}");
        let e = test(json!({"steps": [{"try": [{"frobnicate": {}}]}]})).unwrap_err();
        assert!(e.to_string().contains("unknown field `frobnicate`"), "{e}");
        let e = test(json!({"steps": [{"try": [{"apply": {"file": "https://x/y.yaml"}}]}]}))
            .unwrap_err();
        assert!(e.to_string().contains("URL"), "{e}");
    }

    #[test]
    fn the_harness_section_reads_requirements() {
        let t = parse_test(
            &json!({"apiVersion": API_VERSION, "kind": "Test",
                "metadata": {"name": "t", "annotations": {
                    "harness.io/suite": "daemonset",
                    "harness.io/kubernetes": "1.29-1.32",
                    "harness.io/feature-gates": "InPlacePodVerticalScaling=true",
                    "harness.io/controller-since": "v1.6.0",
                    "other.io/x": "kept out"}},
                "spec": {"steps": []}}),
            None,
        )
        .unwrap();
        assert_eq!(t.harness.suite.as_deref(), Some("daemonset"));
        assert_eq!(t.harness.kubernetes, Some((Some((1, 29)), Some((1, 32)))));
        assert!(t.harness.feature_gates["InPlacePodVerticalScaling"]);
        assert_eq!(t.harness.controller_since.as_deref(), Some("v1.6.0"));
        let e = parse_test(
            &json!({"apiVersion": API_VERSION, "kind": "Test",
                "metadata": {"name": "t", "annotations": {"harness.io/kubernetes": "one"}},
                "spec": {"steps": []}}),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a Kubernetes minor"), "{e}");
    }

    #[test]
    fn a_document_that_is_not_a_test_is_refused() {
        let e = parse_test(&json!({"apiVersion": "v1", "kind": "ConfigMap"}), None).unwrap_err();
        assert!(e.to_string().contains("kind Test"), "{e}");
    }
}
