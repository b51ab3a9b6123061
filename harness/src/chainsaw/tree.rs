//! chainsaw's assertion trees (kyverno-json semantics) and resource templating.
//!
//! Start at [`check`]: it matches an actual object against an expected tree such as the
//! `resource` of an `assert` or `error` operation and returns every [`Mismatch`]. Trees that
//! are checked repeatedly (while polling) can be compiled once with [`Assertion::compile`].
//! [`template`] evaluates the `(…)` values of a resource to apply or create, and [`identity`]
//! (on top of [`template_lookup`]) gives what to get or list before checking candidates.
//!
//! The rules follow kyverno-json's `pkg/core` (assertion, projection, expression, matching):
//!
//! - A map matches key by key. A plain key looks the field up (missing → "field not found");
//!   a key `(expr)` evaluates `expr` against the current actual node. A key may start with the
//!   `~` modifier (`~.(containers)`, `~.containers`, `~name.(…)`) to match every element of
//!   the projected array (`$name` = index) or map (`$name` = key), and may end with `->name` to
//!   bind the projected value as `$name` for the subtree. An empty expected map matches any
//!   non-null value.
//! - An expected array needs an actual array of the same length, matched element-wise.
//! - A scalar `(expr)` is evaluated with `@` = the actual value; the result (or the plain
//!   scalar) must equal the actual value: numbers compare numerically (`1 == 1.0`), an
//!   expected map matches a superset, an expected array element-wise; `\(…)\` escapes.
//! - Comparing values of different types (`"3"` vs `3`), looking a field up in a scalar, or
//!   `~` over a non-collection are errors ([`TreeError`]), as in kyverno-json, where chainsaw
//!   stops polling and fails the operation at once.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Number, Value};

use crate::chainsaw::jp::{Bindings, Expr, JpError};

/// One place where the actual object differs from the expected tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Where, as a path like `spec.template.spec.containers[0].image` or
    /// `status.(length(conditions))` (keys appear as written in the tree, `~` and `->` included).
    pub path: String,
    /// What was expected there (the expected value as JSON, or a description like "field present").
    pub expected: String,
    /// The last value observed there (None when the field is missing).
    pub actual: Option<Value>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = shown(&self.path);
        match &self.actual {
            None => write!(f, "{path}: field not found"),
            Some(actual) => write!(f, "{path}: expected {}, got {actual}", self.expected),
        }
    }
}

/// A tree that cannot be used, or an actual object it cannot be compared with.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// An expression does not parse.
    #[error("{}: invalid expression `{expr}`: {source}", shown(.path))]
    Parse {
        /// Where in the tree.
        path: String,
        /// The expression, without its parentheses.
        expr: String,
        /// Why.
        #[source]
        source: JpError,
    },
    /// An expression fails to evaluate.
    #[error("{}: evaluating `{expr}` failed: {source}", shown(.path))]
    Eval {
        /// Where in the tree.
        path: String,
        /// The expression, without its parentheses.
        expr: String,
        /// Why.
        #[source]
        source: JpError,
    },
    /// Syntax that is not allowed (or not implemented) where it is used.
    #[error("{}: {what} is not supported", shown(.path))]
    Unsupported {
        /// Where in the tree.
        path: String,
        /// What, e.g. "the `~` modifier in a value".
        what: &'static str,
    },
    /// The `~` modifier projected something that is neither an array nor a map.
    #[error("{}: the `~` modifier needs an array or a map, got {}", shown(.path), kind(.actual))]
    NotIterable {
        /// Where in the tree.
        path: String,
        /// What was projected.
        actual: Value,
    },
    /// A plain key was looked up in a scalar or an array (kyverno-json: "projection not recognized").
    #[error("{}: cannot look up a field in {}", shown(.path), kind(.actual))]
    NotAMap {
        /// Where in the tree.
        path: String,
        /// The value the field was looked up in.
        actual: Value,
    },
    /// An expected array met an actual value that is neither an array nor null.
    #[error("{}: expected an array, got {}", shown(.path), kind(.actual))]
    NotAnArray {
        /// Where in the tree.
        path: String,
        /// The actual value.
        actual: Value,
    },
    /// Expected and actual values of types that do not compare (e.g. a string and a number).
    #[error("{}: types are not comparable: expected {} {expected}, got {} {actual}", shown(.path), kind(.expected), kind(.actual))]
    Incomparable {
        /// Where in the tree.
        path: String,
        /// The expected value.
        expected: Value,
        /// The actual value.
        actual: Value,
    },
}

/// Matches `actual` against the assertion tree `expected` with `bindings`; `Ok(vec![])` means
/// it matches. Mismatches come in sorted order of expected keys.
pub fn check(
    expected: &Value,
    actual: &Value,
    bindings: &Bindings,
) -> Result<Vec<Mismatch>, TreeError> {
    Assertion::compile(expected)?.check(actual, bindings)
}

/// An assertion tree with its keys parsed and expressions compiled (kyverno-json parses the
/// whole tree first, so a bad expression fails even where the actual object has no such field).
#[derive(Debug, Clone)]
pub struct Assertion {
    root: Node,
}

impl Assertion {
    /// Compiles `expected`; fails on a bad expression or a modifier where none is allowed.
    pub fn compile(expected: &Value) -> Result<Self, TreeError> {
        Ok(Self {
            root: compile("", expected)?,
        })
    }

    /// Matches `actual` against the tree; `Ok(vec![])` means it matches.
    pub fn check(&self, actual: &Value, bindings: &Bindings) -> Result<Vec<Mismatch>, TreeError> {
        let mut out = Vec::new();
        self.root.assert("", actual, bindings, &mut out)?;
        Ok(out)
    }
}

/// Templating: returns `value` with every string that is an expression `(…)` replaced by its
/// result evaluated with `bindings` (current node null), recursively through maps and arrays.
/// As in chainsaw's `mutate`, map keys are left alone, and so are escaped `\(…)\` strings
/// (backslashes included).
pub fn template(value: &Value, bindings: &Bindings) -> Result<Value, TreeError> {
    template_at("", value, bindings)
}

/// chainsaw's `ResourceRef` for `assert` and `error`: when `expected` has a non-empty
/// `apiVersion` and `kind`, returns it with only the lookup fields templated (`apiVersion`,
/// `kind`, `metadata.name`, `metadata.namespace` and the string values of `metadata.labels`);
/// everything else stays an assertion. Otherwise returns it unchanged.
pub fn template_lookup(expected: &Value, bindings: &Bindings) -> Result<Value, TreeError> {
    let mut out = expected.clone();
    let Value::Object(root) = &mut out else {
        return Ok(out);
    };
    if non_empty_str(root.get("apiVersion")).is_none() || non_empty_str(root.get("kind")).is_none()
    {
        return Ok(out);
    }
    template_field(root, "", "apiVersion", bindings)?;
    template_field(root, "", "kind", bindings)?;
    if let Some(Value::Object(meta)) = root.get_mut("metadata") {
        template_field(meta, "metadata", "name", bindings)?;
        template_field(meta, "metadata", "namespace", bindings)?;
        if let Some(Value::Object(labels)) = meta.get_mut("labels") {
            for (key, value) in labels.iter_mut() {
                if let Value::String(s) = value {
                    *value = template_string(&format!("metadata.labels.{key}"), s, bindings)?;
                }
            }
        }
    }
    Ok(out)
}

/// The parts of an expected tree that identify the objects to fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// `apiVersion` (empty when absent).
    pub api_version: String,
    /// `kind` (empty when absent).
    pub kind: String,
    /// `metadata.name`: get this object; None → list.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// The string-valued `metadata.labels`, as a label selector.
    pub labels: BTreeMap<String, String>,
}

impl Identity {
    /// Whether the tree names a resource type; chainsaw checks a tree without one against null.
    pub fn is_resource(&self) -> bool {
        !self.api_version.is_empty() && !self.kind.is_empty()
    }
}

/// apiVersion, kind, metadata.name, metadata.namespace and metadata.labels of `expected`, each
/// only if present as a plain (non-expression, non-empty) string after [`template_lookup`].
pub fn identity(expected: &Value, bindings: &Bindings) -> Result<Identity, TreeError> {
    let tree = template_lookup(expected, bindings)?;
    let plain = |v: Option<&Value>| {
        non_empty_str(v)
            .filter(|s| !matches!(statement(s), Statement::Expr { .. }))
            .map(str::to_owned)
    };
    let meta = tree.get("metadata");
    let labels = match meta.and_then(|m| m.get("labels")) {
        Some(Value::Object(labels)) => labels
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), plain(Some(v))?)))
            .collect(),
        _ => BTreeMap::new(),
    };
    Ok(Identity {
        api_version: plain(tree.get("apiVersion")).unwrap_or_default(),
        kind: plain(tree.get("kind")).unwrap_or_default(),
        name: plain(meta.and_then(|m| m.get("name"))),
        namespace: plain(meta.and_then(|m| m.get("namespace"))),
        labels,
    })
}

/// How a string of a tree reads: kyverno-json's escape (`^\\(.+)\\$`) and engine
/// (`^\((?:(\w+);)?(.+)\)$`) rules, where `.` does not match a newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Statement<'a> {
    /// Not an expression.
    Plain(&'a str),
    /// `\…\`: the inner text, taken literally.
    Escaped(&'a str),
    /// `(src)` or `(engine;src)`.
    Expr {
        engine: Option<&'a str>,
        src: &'a str,
    },
}

fn statement(s: &str) -> Statement<'_> {
    let inner = |open: char, close: char| {
        s.strip_prefix(open)
            .and_then(|r| r.strip_suffix(close))
            .filter(|i| !i.is_empty() && !i.contains('\n'))
    };
    if let Some(inner) = inner('\\', '\\') {
        return Statement::Escaped(inner);
    }
    let Some(inner) = inner('(', ')') else {
        return Statement::Plain(s);
    };
    let word = word_len(inner);
    match inner[word..].strip_prefix(';') {
        Some(src) if word > 0 && !src.is_empty() => Statement::Expr {
            engine: Some(&inner[..word]),
            src,
        },
        _ => Statement::Expr {
            engine: None,
            src: inner,
        },
    }
}

/// The length of the leading run of `\w` characters.
fn word_len(s: &str) -> usize {
    s.bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count()
}

/// Which expression engine a statement names (chainsaw's default engine is JMESPath).
enum Engine {
    Jp,
    Cel,
    /// No such engine: kyverno-json then takes the statement literally.
    Unknown,
}

fn engine(name: Option<&str>) -> Engine {
    match name {
        None | Some("jp" | "default") => Engine::Jp,
        Some("cel") => Engine::Cel,
        Some(_) => Engine::Unknown,
    }
}

/// A key (or scalar) split like kyverno-json's `expression.Parse`: `~name.` foreach prefix,
/// `->name` binding suffix, then the statement.
struct KeySyntax<'a> {
    foreach: bool,
    foreach_name: Option<&'a str>,
    binding: Option<&'a str>,
    rest: Statement<'a>,
}

fn key_syntax(key: &str) -> KeySyntax<'_> {
    let (mut foreach, mut foreach_name, mut rest) = (false, None, key);
    if let Some(after) = key.strip_prefix('~') {
        let word = word_len(after);
        if let Some(r) = after[word..].strip_prefix('.') {
            foreach = true;
            foreach_name = (word > 0).then(|| &after[..word]);
            rest = r;
        }
    }
    let mut binding = None;
    if let Some(pos) = rest.rfind("->") {
        let name = rest[pos + 2..].trim_start();
        if !name.is_empty() && word_len(name) == name.len() {
            binding = Some(name);
            // kyverno-json keeps the blanks before `->` (so `(x) -> y` stops being an
            // expression there); they are trimmed here.
            rest = rest[..pos].trim_end();
        }
    }
    KeySyntax {
        foreach,
        foreach_name,
        binding,
        rest: statement(rest),
    }
}

#[derive(Debug, Clone)]
enum Node {
    Map(Vec<Entry>),
    Array(Vec<Node>),
    Scalar(Expected),
}

#[derive(Debug, Clone)]
struct Entry {
    key: String,
    projection: Projection,
    foreach: bool,
    foreach_name: Option<String>,
    binding: Option<String>,
    node: Node,
}

#[derive(Debug, Clone)]
enum Projection {
    Field(String),
    Expr(Expr, String),
}

#[derive(Debug, Clone)]
enum Expected {
    Value(Value),
    Expr(Expr, String),
}

fn compile(path: &str, expected: &Value) -> Result<Node, TreeError> {
    match expected {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut entries = Vec::with_capacity(keys.len());
            for key in keys {
                let at = child(path, key);
                let syntax = key_syntax(key);
                let projection = match syntax.rest {
                    Statement::Plain(s) | Statement::Escaped(s) => Projection::Field(s.to_owned()),
                    Statement::Expr { engine: e, src } => match engine(e) {
                        Engine::Jp => Projection::Expr(parse(&at, src)?, src.to_owned()),
                        Engine::Cel => return Err(cel(at)),
                        Engine::Unknown => Projection::Field(src.to_owned()),
                    },
                };
                entries.push(Entry {
                    projection,
                    foreach: syntax.foreach,
                    foreach_name: syntax.foreach_name.map(str::to_owned),
                    binding: syntax.binding.map(str::to_owned),
                    node: compile(&at, &map[key])?,
                    key: key.clone(),
                });
            }
            Ok(Node::Map(entries))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| compile(&format!("{path}[{i}]"), item))
            .collect::<Result<_, _>>()
            .map(Node::Array),
        Value::String(s) => {
            let syntax = key_syntax(s);
            let unsupported = |what| TreeError::Unsupported {
                path: path.to_owned(),
                what,
            };
            if syntax.foreach {
                return Err(unsupported("the `~` modifier in a value"));
            }
            if syntax.binding.is_some() {
                return Err(unsupported("a `->` binding in a value"));
            }
            Ok(Node::Scalar(match syntax.rest {
                Statement::Plain(s) | Statement::Escaped(s) => Expected::Value(s.into()),
                Statement::Expr { engine: e, src } => match engine(e) {
                    Engine::Jp => Expected::Expr(parse(path, src)?, src.to_owned()),
                    Engine::Cel => return Err(cel(path.to_owned())),
                    Engine::Unknown => Expected::Value(src.into()),
                },
            }))
        }
        other => Ok(Node::Scalar(Expected::Value(other.clone()))),
    }
}

impl Node {
    fn assert(
        &self,
        path: &str,
        actual: &Value,
        bindings: &Bindings,
        out: &mut Vec<Mismatch>,
    ) -> Result<(), TreeError> {
        match self {
            Node::Map(entries) => assert_map(entries, path, actual, bindings, out),
            Node::Array(items) => match actual {
                Value::Array(values) if values.len() == items.len() => (items.iter().zip(values))
                    .enumerate()
                    .try_for_each(|(i, (item, value))| {
                        item.assert(&format!("{path}[{i}]"), value, bindings, out)
                    }),
                Value::Array(_) | Value::Null => {
                    let expected = format!("an array of length {}", items.len());
                    out.push(mismatch(path, expected, actual));
                    Ok(())
                }
                other => Err(TreeError::NotAnArray {
                    path: path.to_owned(),
                    actual: other.clone(),
                }),
            },
            Node::Scalar(expected) => {
                let want = match expected {
                    Expected::Value(v) => Cow::Borrowed(v),
                    Expected::Expr(expr, src) => {
                        Cow::Owned(eval(path, expr, src, actual, bindings)?)
                    }
                };
                if !matches(path, &want, actual)? {
                    out.push(mismatch(path, want.to_string(), actual));
                }
                Ok(())
            }
        }
    }
}

fn assert_map(
    entries: &[Entry],
    path: &str,
    actual: &Value,
    bindings: &Bindings,
    out: &mut Vec<Mismatch>,
) -> Result<(), TreeError> {
    if entries.is_empty() {
        if actual.is_null() {
            out.push(mismatch(path, "a non-null value".into(), actual));
        }
        return Ok(());
    }
    for entry in entries {
        let at = child(path, &entry.key);
        let projected = match &entry.projection {
            Projection::Field(name) => match actual {
                Value::Null => None,
                Value::Object(map) => map.get(name).map(Cow::Borrowed),
                other => {
                    return Err(TreeError::NotAMap {
                        path: at,
                        actual: other.clone(),
                    });
                }
            },
            Projection::Expr(expr, src) => {
                Some(Cow::Owned(eval(&at, expr, src, actual, bindings)?))
            }
        };
        let Some(projected) = projected else {
            out.push(Mismatch {
                path: at,
                expected: "field present".into(),
                actual: None,
            });
            continue;
        };
        let bound;
        let bindings = match &entry.binding {
            Some(name) => {
                bound = bind(bindings, name, projected.clone().into_owned());
                &bound
            }
            None => bindings,
        };
        if !entry.foreach {
            entry.node.assert(&at, &projected, bindings, out)?;
            continue;
        }
        let elements: Vec<(String, &Value, Value)> = match &*projected {
            Value::Array(items) => (items.iter().enumerate())
                .map(|(i, item)| (format!("{at}[{i}]"), item, i.into()))
                .collect(),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                (keys.into_iter())
                    .map(|key| (format!("{at}[{key}]"), &map[key], key.as_str().into()))
                    .collect()
            }
            other => {
                return Err(TreeError::NotIterable {
                    path: at,
                    actual: other.clone(),
                });
            }
        };
        for (at, element, name) in elements {
            match &entry.foreach_name {
                Some(n) => entry
                    .node
                    .assert(&at, element, &bind(bindings, n, name), out)?,
                None => entry.node.assert(&at, element, bindings, out)?,
            }
        }
    }
    Ok(())
}

/// kyverno-json's `matching.Match`: expected maps match a superset, arrays element-wise, the
/// rest by [`equal`].
fn matches(path: &str, expected: &Value, actual: &Value) -> Result<bool, TreeError> {
    match (expected, actual) {
        (Value::Array(want), Value::Array(got)) => {
            if want.len() != got.len() {
                return Ok(false);
            }
            for (w, g) in want.iter().zip(got) {
                if !matches(path, w, g)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Value::Object(want), Value::Object(got)) => {
            for (key, w) in want {
                match got.get(key) {
                    Some(g) if matches(path, w, g)? => {}
                    _ => return Ok(false),
                }
            }
            Ok(true)
        }
        (Value::Array(_) | Value::Object(_), _) => Err(incomparable(path, expected, actual)),
        _ => equal(path, expected, actual),
    }
}

/// kyverno-json's `matching.Equal` on JSON values: null equals only null, numbers compare by
/// value across integers and floats, other types must agree.
fn equal(path: &str, expected: &Value, actual: &Value) -> Result<bool, TreeError> {
    Ok(match (expected, actual) {
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Bool(e), Value::Bool(a)) => e == a,
        (Value::String(e), Value::String(a)) => e == a,
        (Value::Number(e), Value::Number(a)) => numbers_equal(e, a),
        _ => return Err(incomparable(path, expected, actual)),
    })
}

/// Whether two JSON numbers are equal: exactly as integers, else as floats.
pub fn numbers_equal(a: &Number, b: &Number) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x == y;
    }
    a.as_f64() == b.as_f64()
}

fn template_at(path: &str, value: &Value, bindings: &Bindings) -> Result<Value, TreeError> {
    Ok(match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), template_at(&child(path, k), v, bindings)?)))
                .collect::<Result<Map<_, _>, TreeError>>()?,
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| template_at(&format!("{path}[{i}]"), v, bindings))
                .collect::<Result<_, _>>()?,
        ),
        Value::String(s) => template_string(path, s, bindings)?,
        other => other.clone(),
    })
}

/// One string through chainsaw's templating (`mutate` scalar node); chainsaw evaluates with `@`
/// = the string itself, here `@` is null.
fn template_string(path: &str, s: &str, bindings: &Bindings) -> Result<Value, TreeError> {
    match statement(s) {
        Statement::Expr { engine: e, src } => match engine(e) {
            Engine::Jp => eval(path, &parse(path, src)?, src, &Value::Null, bindings),
            Engine::Cel => Err(cel(path.to_owned())),
            Engine::Unknown => Ok(s.into()),
        },
        Statement::Plain(_) | Statement::Escaped(_) => Ok(s.into()),
    }
}

/// Templates `map[key]` in place when it is a non-empty string.
fn template_field(
    map: &mut Map<String, Value>,
    parent: &str,
    key: &str,
    bindings: &Bindings,
) -> Result<(), TreeError> {
    if let Some(s) = non_empty_str(map.get(key)) {
        let value = template_string(&child(parent, key), s, bindings)?;
        map.insert(key.to_owned(), value);
    }
    Ok(())
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn parse(path: &str, src: &str) -> Result<Expr, TreeError> {
    Expr::parse(src).map_err(|source| TreeError::Parse {
        path: path.to_owned(),
        expr: src.to_owned(),
        source,
    })
}

fn eval(
    path: &str,
    expr: &Expr,
    src: &str,
    current: &Value,
    bindings: &Bindings,
) -> Result<Value, TreeError> {
    expr.eval(current, bindings)
        .map_err(|source| TreeError::Eval {
            path: path.to_owned(),
            expr: src.to_owned(),
            source,
        })
}

fn bind(bindings: &Bindings, name: &str, value: Value) -> Bindings {
    let mut out = bindings.clone();
    out.insert(name.to_owned(), value);
    out
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn mismatch(path: &str, expected: String, actual: &Value) -> Mismatch {
    Mismatch {
        path: path.to_owned(),
        expected,
        actual: Some(actual.clone()),
    }
}

fn incomparable(path: &str, expected: &Value, actual: &Value) -> TreeError {
    TreeError::Incomparable {
        path: path.to_owned(),
        expected: expected.clone(),
        actual: actual.clone(),
    }
}

fn cel(path: String) -> TreeError {
    TreeError::Unsupported {
        path,
        what: "the `cel` engine",
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "(root)" } else { path }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_bindings() -> Bindings {
        Bindings::new()
    }

    fn bindings(pairs: &[(&str, Value)]) -> Bindings {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn mismatches(expected: Value, actual: Value) -> Vec<String> {
        check(&expected, &actual, &no_bindings())
            .expect("tree checks")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn error(expected: Value, actual: Value) -> TreeError {
        check(&expected, &actual, &no_bindings()).expect_err("tree fails")
    }

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
            "spec": {"replicas": 3, "containers": [
                {"name": "a", "image": "nginx:1", "idx": "0"},
                {"name": "b", "image": "nginx:2", "idx": "1"},
            ]},
            "status": {"items": [1, 2], "ready": true, "phase": null},
        })
    }

    #[test]
    fn partial_maps_match_and_all_mismatches_are_reported_in_key_order() {
        assert!(mismatches(json!({"kind": "Pod", "spec": {"replicas": 3}}), pod()).is_empty());
        let found = check(
            &json!({"spec": {"replicas": 2}, "metadata": {"name": "db", "uid": "x"}}),
            &pod(),
            &no_bindings(),
        )
        .unwrap();
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                r#"metadata.name: expected "db", got "web""#,
                "metadata.uid: field not found",
                "spec.replicas: expected 2, got 3",
            ]
        );
        assert_eq!(found[1].actual, None);
        assert_eq!(found[1].expected, "field present");
        assert_eq!(found[2].actual, Some(json!(3)));
    }

    #[test]
    fn missing_parents_and_null_parents_report_the_first_missing_field() {
        assert_eq!(
            mismatches(json!({"data": {"foo": "bar"}}), json!({})),
            ["data: field not found"]
        );
        assert_eq!(
            mismatches(
                json!({"metadata": {"annotations": {"foo": "bar"}}}),
                json!({"metadata": {"annotations": null}})
            ),
            ["metadata.annotations.foo: field not found"]
        );
    }

    #[test]
    fn null_and_empty_maps_follow_kyverno_json() {
        // expected null matches only a present null
        assert!(mismatches(json!({"status": {"phase": null}}), pod()).is_empty());
        assert_eq!(
            mismatches(json!({"status": {"gone": null}}), pod()),
            ["status.gone: field not found"]
        );
        assert_eq!(
            mismatches(json!({"status": {"ready": null}}), pod()),
            ["status.ready: expected null, got true"]
        );
        // a null actual differs from any non-null expected scalar
        assert_eq!(
            mismatches(json!({"status": {"phase": "Running"}}), pod()),
            [r#"status.phase: expected "Running", got null"#]
        );
        // an empty map matches anything present and non-null, even a scalar
        assert!(mismatches(json!({"spec": {}, "status": {"ready": {}}}), pod()).is_empty());
        assert_eq!(
            mismatches(json!({"status": {"phase": {}}}), pod()),
            ["status.phase: expected a non-null value, got null"]
        );
        assert_eq!(
            mismatches(json!({"nope": {}}), pod()),
            ["nope: field not found"]
        );
    }

    #[test]
    fn arrays_match_by_length_then_element() {
        assert!(mismatches(json!({"status": {"items": [1, 2]}}), pod()).is_empty());
        assert_eq!(
            mismatches(json!({"status": {"items": [1]}}), pod()),
            ["status.items: expected an array of length 1, got [1,2]"]
        );
        assert_eq!(
            mismatches(
                json!({"spec": {"containers": [{"name": "a"}, {"image": "nginx:3"}]}}),
                pod()
            ),
            [r#"spec.containers[1].image: expected "nginx:3", got "nginx:2""#]
        );
        assert_eq!(
            mismatches(json!({"status": {"phase": []}}), pod()),
            ["status.phase: expected an array of length 0, got null"]
        );
        let err = error(json!({"spec": {"replicas": [3]}}), pod());
        assert!(
            matches!(&err, TreeError::NotAnArray { path, .. } if path == "spec.replicas"),
            "{err}"
        );
    }

    #[test]
    fn foreach_checks_every_element_and_names_the_index() {
        let tree = json!({"spec": {"~.(containers)": {"image": "nginx:1"}}});
        assert_eq!(
            mismatches(tree, pod()),
            [r#"spec.~.(containers)[1].image: expected "nginx:1", got "nginx:2""#]
        );
        let tree = json!({"spec": {"~.containers": {"name": "a", "image": "x"}}});
        assert_eq!(mismatches(tree, pod()).len(), 3);
        // a named foreach binds the index
        let tree = json!({"spec": {"~i.(containers)": {"idx": "(to_string($i))"}}});
        assert!(mismatches(tree, pod()).is_empty());
        // over a map, the name binds the key
        let tree = json!({"metadata": {"~k.labels": "($k)"}});
        assert_eq!(
            mismatches(tree, pod()),
            [
                r#"metadata.~k.labels[app]: expected "app", got "web""#,
                r#"metadata.~k.labels[tier]: expected "tier", got "front""#
            ]
        );
        // nested: the outer index stays bound inside the inner foreach
        let actual = json!({"groups": [
            {"members": [{"g": "0"}, {"g": "0"}]},
            {"members": [{"g": "1"}, {"g": "0"}]},
        ]});
        let tree = json!({"~o.groups": {"~.members": {"g": "(to_string($o))"}}});
        assert_eq!(
            mismatches(tree, actual),
            [r#"~o.groups[1].~.members[1].g: expected "1", got "0""#]
        );
    }

    #[test]
    fn foreach_over_a_scalar_is_an_error_naming_the_path() {
        let err = error(json!({"spec": {"~.replicas": {"x": 1}}}), pod());
        assert!(
            matches!(&err, TreeError::NotIterable { path, actual } if path == "spec.~.replicas" && *actual == json!(3))
        );
        assert_eq!(
            err.to_string(),
            "spec.~.replicas: the `~` modifier needs an array or a map, got a number"
        );
        let err = error(json!({"status": {"~.(phase)": {}}}), pod());
        assert!(matches!(err, TreeError::NotIterable { .. }));
    }

    #[test]
    fn expression_keys_project_the_current_node() {
        assert!(
            mismatches(
                json!({"status": {"(length(items))": 2, "(ready)": true}}),
                pod()
            )
            .is_empty()
        );
        assert_eq!(
            mismatches(json!({"status": {"(length(items))": 3}}), pod()),
            ["status.(length(items)): expected 3, got 2"]
        );
        // an expression that yields null is "found": the subtree sees null
        assert_eq!(
            mismatches(json!({"status": {"(nothing)": 1}}), pod()),
            ["status.(nothing): expected 1, got null"]
        );
        // `@` is the current node; an expression key reaching into a labels value
        let tree = json!({"metadata": {"labels": {"app": {"(@ == 'web')": true}}}});
        assert!(mismatches(tree, pod()).is_empty());
    }

    #[test]
    fn bindings_on_keys_reach_the_subtree() {
        let tree =
            json!({"spec": {"(containers)->cs": {"(length($cs))": 2}, "replicas->r": "($r)"}});
        assert!(mismatches(tree, pod()).is_empty());
        // the assertion-tree example: a parent bound for the `~` children
        let tree = json!({"(spec)->specBinding": {"~.(containers)": {"($specBinding.securityContext != null || securityContext != null)": true}}});
        assert_eq!(mismatches(tree, pod()).len(), 2);
        // rebinding a name is seen by descendants only (kyverno-json docs)
        let actual = json!({"foo": {"bar": 4, "bat": 6}});
        let tree = json!({"foo": {"(bar + bat)->sum": {"($sum + $sum)->sum": {"($sum)": 20}, "($sum)": 10}}});
        assert!(mismatches(tree, actual.clone()).is_empty());
        // blanks around `->`
        assert!(mismatches(json!({"foo": {"(bar) -> b": "($b)"}}), actual).is_empty());
    }

    #[test]
    fn expression_values_use_bindings_and_compare_numbers_by_value() {
        let actual = json!({"data": {"foo": "3", "n": 3, "f": 1.0}});
        let b = bindings(&[("c", json!(3))]);
        let tree = json!({"data": {"foo": "(to_string($c))", "n": "($c)", "f": 1}});
        assert_eq!(check(&tree, &actual, &b).unwrap(), []);
        let tree = json!({"data": {"n": "($c + `1`)"}});
        let found = check(&tree, &actual, &b).unwrap();
        assert_eq!(
            (found[0].path.as_str(), &found[0].actual),
            ("data.n", &Some(json!(3)))
        );
        assert!(matches!(found[0].expected.as_str(), "4" | "4.0"));
        assert!(numbers_equal(
            &Number::from(1),
            &Number::from_f64(1.0).unwrap()
        ));
        assert!(!numbers_equal(&Number::from(u64::MAX), &Number::from(-1)));
        // a literal string via an expression
        assert!(mismatches(json!({"metadata": {"name": "('web')"}}), pod()).is_empty());
    }

    #[test]
    fn expected_maps_and_arrays_from_expressions_match_like_kyverno_json() {
        let b = bindings(&[("want", json!({"replicas": 3.0})), ("items", json!([1, 2]))]);
        let tree = json!({"spec": "($want)", "status": {"items": "($items)"}});
        assert_eq!(check(&tree, &pod(), &b).unwrap(), []);
        let b = bindings(&[
            ("want", json!({"replicas": 3, "paused": true})),
            ("items", json!([2, 1])),
        ]);
        assert_eq!(check(&tree, &pod(), &b).unwrap().len(), 2);
    }

    #[test]
    fn values_of_different_types_are_not_comparable() {
        let err = error(json!({"spec": {"replicas": "3"}}), pod());
        assert_eq!(
            err.to_string(),
            r#"spec.replicas: types are not comparable: expected a string "3", got a number 3"#
        );
        assert!(matches!(
            error(json!({"spec": "x"}), pod()),
            TreeError::Incomparable { .. }
        ));
        let err = error(json!({"spec": {"replicas": {"x": 1}}}), pod());
        assert!(
            matches!(&err, TreeError::NotAMap { path, .. } if path == "spec.replicas.x"),
            "{err}"
        );
    }

    #[test]
    fn escapes_and_engines() {
        let actual = json!({"(bar)": "(x)", "baz": 1});
        assert!(mismatches(json!({r"\(bar)\": r"\(x)\"}), actual.clone()).is_empty());
        assert!(mismatches(json!({"(jp;baz)": "(default;@)"}), actual.clone()).is_empty());
        assert!(mismatches(json!({"(bar)": null}), actual).is_empty());
        assert_eq!(
            statement("(a;)"),
            Statement::Expr {
                engine: None,
                src: "a;"
            }
        );
        assert_eq!(statement("()"), Statement::Plain("()"));
        assert_eq!(statement("(a\nb)"), Statement::Plain("(a\nb)"));
        assert_eq!(statement(" (a)"), Statement::Plain(" (a)"));
        let k = key_syntax("~idx.(spec)->s");
        assert!(k.foreach && k.foreach_name == Some("idx") && k.binding == Some("s"));
        assert_eq!(
            k.rest,
            Statement::Expr {
                engine: None,
                src: "spec"
            }
        );
        let k = key_syntax("~a-b.c");
        assert!(!k.foreach && k.binding.is_none());
        assert!(matches!(
            error(json!({"(cel;object.spec)": 1}), pod()),
            TreeError::Unsupported { .. }
        ));
    }

    #[test]
    fn modifiers_in_values_and_bad_expressions_are_errors_naming_the_path() {
        let err = error(json!({"foo": {"bar": "~.(`42`)"}}), json!({}));
        assert_eq!(
            err.to_string(),
            "foo.bar: the `~` modifier in a value is not supported"
        );
        assert!(matches!(
            error(json!({"foo": "a->b"}), json!({})),
            TreeError::Unsupported { .. }
        ));
        // parse errors surface before matching, even under a missing field
        let err = error(json!({"gone": {"spec": {"(length(items)": 1}}}), pod());
        assert!(
            matches!(&err, TreeError::Parse { path, expr, .. } if path == "gone.spec.(length(items)" && expr == "length(items"),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
        let err = error(json!({"metadata": {"name": "($missing)"}}), pod());
        assert!(
            matches!(&err, TreeError::Eval { path, .. } if path == "metadata.name"),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("metadata.name: evaluating `$missing` failed: ")
        );
    }

    #[test]
    fn a_compiled_assertion_checks_many_objects() {
        let tree = Assertion::compile(&json!({"spec": {"replicas": 3}})).unwrap();
        assert!(tree.check(&pod(), &no_bindings()).unwrap().is_empty());
        let other = json!({"spec": {"replicas": 1}});
        assert_eq!(tree.check(&other, &no_bindings()).unwrap().len(), 1);
        // a tree without a resource is checked against null (chainsaw's `values` example)
        let values = bindings(&[("values", json!({"foo": "bar"}))]);
        let tree = json!({"($values.foo)": "bar"});
        assert_eq!(check(&tree, &Value::Null, &values).unwrap(), []);
        // a scalar tree at the root
        assert_eq!(
            mismatches(json!(1), json!(2)),
            ["(root): expected 1, got 2"]
        );
    }

    #[test]
    fn template_replaces_expression_strings_recursively() {
        let b = bindings(&[("namespace", json!("chainsaw-x")), ("n", json!(2))]);
        let resource = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "($namespace)", "labels": {"(key)": "v"}},
            "data": {"foo": "($namespace)", "list": ["a", "($n)", {"deep": "(to_string($n))"}], "lit": r"\(x)\", "num": 5, "none": null},
        });
        assert_eq!(
            template(&resource, &b).unwrap(),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "chainsaw-x", "labels": {"(key)": "v"}},
                "data": {"foo": "chainsaw-x", "list": ["a", 2, {"deep": "2"}], "lit": r"\(x)\", "num": 5, "none": null},
            })
        );
        let err = template(&json!({"data": {"list": ["($nope)"]}}), &b).unwrap_err();
        assert!(
            matches!(&err, TreeError::Eval { path, .. } if path == "data.list[0]"),
            "{err}"
        );
    }

    #[test]
    fn identity_templates_only_the_lookup_fields() {
        let b = bindings(&[("namespace", json!("ns-1")), ("foo", json!("ns-1-foo"))]);
        let tree = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "($foo)", "namespace": "($namespace)", "labels": {"app": "($namespace)", "type": {"(@ == 'x')": true}}},
            "data": {"foo": "($namespace)"},
        });
        let looked_up = template_lookup(&tree, &b).unwrap();
        assert_eq!(looked_up["metadata"]["name"], "ns-1-foo");
        assert_eq!(looked_up["data"]["foo"], "($namespace)");
        assert_eq!(
            identity(&tree, &b).unwrap(),
            Identity {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: Some("ns-1-foo".into()),
                namespace: Some("ns-1".into()),
                labels: [("app".to_owned(), "ns-1".to_owned())].into(),
            }
        );
        // a name-less tree lists; without apiVersion/kind nothing is templated or fetched
        let id = identity(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": {"k8s-app": "kube-dns"}}}), &b).unwrap();
        assert!(id.is_resource() && id.name.is_none() && id.labels.len() == 1);
        let bare = json!({"metadata": {"name": "($foo)"}});
        assert_eq!(template_lookup(&bare, &b).unwrap(), bare);
        let id = identity(&bare, &b).unwrap();
        assert!(!id.is_resource() && id.name.is_none());
    }
}
