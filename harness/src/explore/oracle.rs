//! The oracles: rules that judge any trial with no assertion written for it. Start with
//! [`Oracle`] and [`Finding`], keyed by the fields a trial set ([`keyed`]); the pure judges are
//! in the submodules, one per family: [`mod@admission`] (a refusal names a field, the twin
//! answers alike, what is stored is what was sent), [`mod@release`] (O5, against a baseline),
//! [`events`] (repeated failures and refused writes), [`mod@convergence`] (the pods a workload
//! keeps, as far as what [`holds`] it lets them go), [`claims`] (the claims its pods get from
//! its claim templates), [`revisions`] (the history it keeps),
//! [`copies`] (a kind that copies a resource into namespaces) and [`injection`] (what a
//! policy writes into pods). The ones that watch a cluster run in [`super::exec`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::trial::Trial;

pub mod admission;
pub mod claims;
pub mod convergence;
pub mod copies;
pub mod events;
pub mod health;
pub mod holds;
pub mod injection;
pub mod logged;
pub mod release;
pub mod revisions;

pub use admission::{admission, dropped, stored, within};
pub use claims::{ClaimedPod, ClaimsChanged, claims_follow};
pub use convergence::{PodView, UNOBSERVED, convergence, holds_updates};
pub use copies::{
    FORBIDDEN_NAMESPACES, NamespaceView, copies_convergence, selector_matches, selects,
};
pub use events::{by_own_policy, refused_writes, repeated_failures};
pub use health::{denied_request, exit_is_theirs, panics_are_theirs};
pub use logged::logged_refusals;
pub use release::{EndState, release};
pub use revisions::revision_history;

/// Which rule a finding broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Oracle {
    /// O1: what the API admitted can be realized (no repeated failure to create or update
    /// what it asks for), and what it refuses is refused naming a field.
    #[serde(rename = "O1-admitted-means-realizable")]
    Realizable,
    /// O2: the object converges to its declared state within the bound.
    #[serde(rename = "O2-convergence")]
    Convergence,
    /// O3: the monitor's safety rules hold at every instant.
    #[serde(rename = "O3-safety")]
    Safety,
    /// O4: the native twin answers the same (admission).
    #[serde(rename = "O4-native-differential")]
    Native,
    /// O5: the same trial on a baseline release answers and settles alike.
    #[serde(rename = "O5-release-differential")]
    Release,
    /// O6: the controller neither exited, restarted, panicked nor was denied by its RBAC.
    #[serde(rename = "O6-controller-health")]
    Health,
}

impl Oracle {
    /// Its short name (`O4`).
    pub fn short(self) -> &'static str {
        match self {
            Oracle::Realizable => "O1",
            Oracle::Convergence => "O2",
            Oracle::Safety => "O3",
            Oracle::Native => "O4",
            Oracle::Release => "O5",
            Oracle::Health => "O6",
        }
    }
}

/// A rule broken by a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule.
    pub oracle: Oracle,
    /// The subject.
    pub subject: String,
    /// What makes two findings the same (the rule's part and the field or reason it names,
    /// never a name or a number of one run): findings are reported once per key.
    pub key: String,
    /// What was seen.
    pub observed: String,
    /// What the rule wanted.
    pub expected: String,
}

/// One answer to a create or update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "answer", content = "message")]
pub enum Answer {
    /// Admitted.
    Admitted,
    /// Refused, with the message.
    Refused(String),
    /// The API does not have one of the fields (the twin lacks it): nothing to compare.
    UnknownField(String),
}

/// The form of a value, as a finding's key names it: the kind of value, and for numbers and
/// percentages where they stand against 0 and 100 %.
pub fn form(v: &Value) -> &'static str {
    match v {
        Value::Null => "absent",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.as_f64().is_some_and(|x| x < 0.0) => "a negative number",
        Value::Number(n) if n.as_f64() == Some(0.0) => "zero",
        Value::Number(_) => "a positive number",
        Value::String(s) if s.ends_with('%') => match s.trim_end_matches('%').parse::<f64>() {
            Ok(p) if p > 100.0 => "a percentage over 100",
            Ok(p) if p < 0.0 => "a negative percentage",
            Ok(_) => "a percentage",
            Err(_) => "a string",
        },
        Value::String(s) if s.parse::<f64>().is_ok() => "a numeric string",
        Value::String(s) if s.is_empty() => "an empty string",
        Value::String(_) => "a string",
        Value::Array(a) if a.is_empty() => "an empty list",
        Value::Array(_) => "a list",
        Value::Object(o) if o.is_empty() => "an empty object",
        Value::Object(_) => "an object",
    }
}

/// Whether a refusal names the field it refuses (`spec.x`, `metadata.y`, `spec: ...`).
pub fn names_a_field(message: &str) -> bool {
    static FIELD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"(^|[\s:"'(\[.])(spec|metadata)(\.|\[|:|\b)"#).expect("a valid regex")
    });
    FIELD.is_match(message)
}

/// What makes findings on `fields` the same: the fields, each by its path with the form of its
/// value, a template's (a pod's or a job's) as any other: a finding on one template field does
/// not hide a finding on the next. None when no field was set.
pub fn keyed(fields: &[(&str, &Value)]) -> Option<String> {
    let mut keys: Vec<String> = fields
        .iter()
        .map(|(f, v)| format!("{f} as {}", form(v)))
        .collect();
    keys.dedup();
    (!keys.is_empty()).then(|| keys.join(", "))
}
/// The finding key of a convergence difference: its kind without names or numbers.
pub fn convergence_key(difference: &str) -> String {
    let d = difference
        .split_once(": ")
        .map_or(difference, |(head, tail)| {
            if head.starts_with("pod ") { tail } else { head }
        });
    let words: Vec<&str> = d.split_whitespace().take(2).collect();
    format!("does not converge: {}", words.join(" "))
}

/// A finding a trial fired, with the trial.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fired {
    /// The finding.
    pub finding: Finding,
    /// The trial that fired it.
    pub trial: Trial,
}

#[cfg(test)]
mod tests {
    use crate::explore::subject::{Subject, subjects};

    /// The CloneSet subject (the oracle modules' tests share it).
    pub(super) fn cloneset() -> Subject {
        subjects()
            .into_iter()
            .find(|s| s.name == "CloneSet")
            .unwrap()
    }
}
