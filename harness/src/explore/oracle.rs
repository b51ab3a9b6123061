//! The oracles: rules that judge any trial with no assertion written for it. Start with
//! [`Oracle`] and [`Finding`]; the pure judges are here ([`names_a_field`], [`admission`],
//! [`repeated_failures`], [`copies_convergence`]) and in the submodules: [`mod@convergence`] (the
//! pods a workload keeps, as far as what [`holds`] it lets them go) and [`injection`] (what a
//! policy writes into pods). The ones that watch a cluster run in [`super::exec`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::subject::{Subject, get};
use super::trial::Trial;
use crate::scenario::steps::zero;

pub mod convergence;
pub mod holds;
pub mod injection;

pub use convergence::{PodView, convergence, holds_updates};

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

/// How a trial ended, as two releases are compared on it (O5): each step's answer
/// (admitted or refused), and for a behaviour trial what it settled on — the kinds of
/// difference from the declared state left and the number of live pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndState {
    /// Each create's and update's answer: true when admitted.
    pub admitted: Vec<bool>,
    /// The kinds of difference left once settled ([`convergence_key`]), sorted.
    pub unsettled: Vec<String>,
    /// Live pods once settled (behaviour trials).
    pub live: Option<usize>,
}

/// O5: the trial ended otherwise on the candidate (`ours`) than on the baseline release
/// (`theirs`, named `baseline`): one finding, keyed by the first thing that differs.
pub fn release(
    subject: &Subject,
    fields: &[(&str, &Value)],
    ours: &EndState,
    theirs: &EndState,
    baseline: &str,
) -> Option<Finding> {
    let what = keyed(fields).unwrap_or_else(|| "the seed object".into());
    let key = if let Some(i) = (0..ours.admitted.len().min(theirs.admitted.len()))
        .find(|&i| ours.admitted[i] != theirs.admitted[i])
    {
        let verdict = if ours.admitted[i] {
            "admits"
        } else {
            "refuses"
        };
        format!(
            "{verdict} at step {} ({what}) what {baseline} does not",
            i + 1
        )
    } else if ours.unsettled != theirs.unsettled {
        format!("settles otherwise than {baseline} ({what})")
    } else if ours.live != theirs.live {
        format!("keeps another number of live pods than {baseline} ({what})")
    } else {
        return None;
    };
    Some(Finding {
        oracle: Oracle::Release,
        subject: subject.name.clone(),
        key,
        observed: format!("{ours:?}"),
        expected: format!("as on {baseline}: {theirs:?}"),
    })
}

/// The admission oracles for one create or update that set `fields`: a refusal names a field
/// (O1), and the twin (when it has every field and none is a documented difference) answers
/// the same (O4).
pub fn admission(
    subject: &Subject,
    verb: &str,
    fields: &[(&str, &Value)],
    ours: &Answer,
    twin: Option<&Answer>,
) -> Vec<Finding> {
    let mut out = vec![];
    let what = if fields.is_empty() {
        "the seed object".to_string()
    } else {
        fields
            .iter()
            .map(|(f, v)| format!("{f}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let keyed = keyed(fields).unwrap_or_else(|| what.clone());
    if let Answer::Refused(m) = ours
        && !names_a_field(m)
    {
        out.push(Finding {
            oracle: Oracle::Realizable,
            subject: subject.name.clone(),
            key: format!("{verb} refused without naming a field"),
            observed: format!("{verb} setting {what} refused: {m}"),
            expected: "a refusal that names the field it refuses".into(),
        });
    }
    let Some(twin) = twin else {
        return out;
    };
    let Some(t) = subject.twin.as_deref() else {
        return out;
    };
    let disagree = matches!(
        (ours, twin),
        (Answer::Admitted, Answer::Refused(_)) | (Answer::Refused(_), Answer::Admitted)
    );
    if disagree {
        let side = |a: &Answer| match a {
            Answer::Admitted => "admitted".to_string(),
            Answer::Refused(m) => format!("refused ({m})"),
            Answer::UnknownField(m) => format!("unknown field ({m})"),
        };
        let verdict = if matches!(ours, Answer::Admitted) {
            "admits"
        } else {
            "refuses"
        };
        out.push(Finding {
            oracle: Oracle::Native,
            subject: subject.name.clone(),
            key: format!(
                "{verdict} on {verb} of {keyed} what {} does not",
                t.describe()
            ),
            observed: format!("{} {verb} setting {what}: {}", subject.name, side(ours)),
            expected: format!("as {} {}: {}", t.api_version, t.describe(), side(twin)),
        });
    }
    out
}

/// Whether `want` is in `got`: equal scalars, objects whose every key of `want` is in `got`
/// (defaulting may add keys) unless its value is a zero one, lists of the same length item
/// by item.
pub fn within(want: &Value, got: &Value) -> bool {
    match (want, got) {
        // A zero value may be left out (`omitempty`).
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, v)| match g.get(k) {
            Some(x) => within(v, x),
            None => zero_deep(v),
        }),
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| within(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => want == got,
    }
}

/// O1 for an admitted create: every non-zero field it set is in the object the API answered
/// with (what was admitted is what is kept; a schema or a webhook that drops it silently
/// admits what it will not realize).
pub fn stored(subject: &Subject, set: &BTreeMap<String, Value>, answered: &Value) -> Vec<Finding> {
    set.iter()
        .filter(|(_, v)| !zero(v))
        .filter(|(k, v)| !within(v, get(answered, k)))
        .map(|(k, v)| Finding {
            oracle: Oracle::Realizable,
            subject: subject.name.clone(),
            key: format!("drops {k} admitted on create"),
            observed: format!("{k} sent as {v}, answered as {}", get(answered, k)),
            expected: "an admitted field is kept as sent (or refused)".into(),
        })
        .collect()
}

/// Warning events of the subject's objects ([`Subject::event_kinds`]) whose reason begins
/// with `Failed`, seen at least twice: the controller keeps failing to realize what was admitted (O1). `events` are
/// (involved kind, reason, count, message).
pub fn repeated_failures(
    subject: &Subject,
    name: &str,
    events: &[(String, String, i32, String)],
) -> Vec<Finding> {
    let kinds = subject.event_kinds();
    let mut by_reason: BTreeMap<&str, (i32, &str)> = BTreeMap::new();
    for (kind, reason, count, message) in events {
        // A refusal is [`refused_writes`]'s, however often it repeats; one by the trial's own
        // policy is what the policy declares ([`by_own_policy`]).
        if kinds.contains(&kind.as_str())
            && reason.starts_with("Failed")
            && !refusal(message)
            && !by_own_policy(subject, name, message)
        {
            let e = by_reason.entry(reason.as_str()).or_insert((0, message));
            e.0 += (*count).max(1);
        }
    }
    by_reason
        .into_iter()
        .filter(|(_, (n, _))| *n >= 2)
        .map(|(reason, (n, message))| Finding {
            oracle: Oracle::Realizable,
            subject: subject.name.clone(),
            key: format!("repeated {reason}"),
            observed: format!("{n} Warning events {reason}: {message}"),
            expected: "an admitted object is realized without repeated failures".into(),
        })
        .collect()
}

/// Whether an event's message is a refusal by the policy object `name` of `subject` itself
/// (`<kind>.<group> "<name>" is forbidden: ...`): the policy enforcing what it declares (a
/// budget that allows no more pods to go, say), which holds its target where it stands.
pub fn by_own_policy(subject: &Subject, name: &str, message: &str) -> bool {
    if subject.target.is_none() {
        return false;
    }
    let group = subject.api_version.split('/').next().unwrap_or_default();
    let message = message.to_lowercase();
    let kind = subject.kind.to_lowercase();
    [format!("{kind}.{group}"), format!("{kind}s.{group}")]
        .iter()
        .any(|r| message.contains(&format!("{r} \"{name}\" is forbidden: ")))
}

/// Whether an event's message carries the API's refusal of an object's content (`is
/// invalid:`, or `is forbidden:` for another cause than its namespace: being deleted, or so
/// new that its default service account is not there yet, which the ServiceAccount admission
/// plugin waits for and the controller's retry meets).
fn refusal(message: &str) -> bool {
    message.contains(" is invalid: ")
        || (message.contains(" is forbidden: ")
            && !message.contains("because it is being terminated")
            && !(message.contains("error looking up service account")
                && message.contains("/default: serviceaccount \"default\" not found")))
}

/// The writes the controller made that the API refused for their content, once each, settled
/// or not: a `Failed*` Warning event of the subject's kinds (see [`Subject::event_kinds`])
/// carrying a refusal, other than one by the trial's own policy object `name`
/// ([`by_own_policy`]). A controller that builds an object the API refuses realizes its spec
/// only where it happens to build another.
pub fn refused_writes(
    subject: &Subject,
    name: &str,
    events: &[(String, String, i32, String)],
) -> Vec<Finding> {
    let kinds = subject.event_kinds();
    let mut by_reason: BTreeMap<&str, &str> = BTreeMap::new();
    for (kind, reason, _, message) in events {
        if kinds.contains(&kind.as_str())
            && reason.starts_with("Failed")
            && refusal(message)
            && !by_own_policy(subject, name, message)
        {
            by_reason.entry(reason.as_str()).or_insert(message);
        }
    }
    by_reason
        .into_iter()
        .map(|(reason, message)| Finding {
            oracle: Oracle::Realizable,
            subject: subject.name.clone(),
            key: format!("{reason} refused by the API"),
            observed: format!("Warning {reason}: {message}"),
            expected: "the objects the controller writes for an admitted object are admitted"
                .into(),
        })
        .collect()
}

/// Whether every leaf of `v` is a zero value ([`zero`]).
fn zero_deep(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.values().all(zero_deep),
        other => zero(other),
    }
}

/// O2 on the revision history of a workload once settled, from its ControllerRevisions
/// (name, number): each revision has a number of its own, and no more are kept than
/// `spec.revisionHistoryLimit` declares besides the (at most two) in use. Returns what
/// differs.
pub fn revision_history(obj: &Value, revisions: &[(String, i64)]) -> Vec<String> {
    let mut out = vec![];
    let mut by_number: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for (name, n) in revisions {
        by_number.entry(*n).or_default().push(name);
    }
    for (n, names) in by_number.iter().filter(|(_, v)| v.len() > 1) {
        out.push(format!(
            "revision numbers: {} revisions share number {n} ({}); want one number each",
            names.len(),
            names.join(", ")
        ));
    }
    if let Some(limit) = obj["spec"]["revisionHistoryLimit"].as_i64()
        && limit >= 0
        && revisions.len() as i64 > limit + 2
    {
        out.push(format!(
            "revisions kept: want at most {} (spec.revisionHistoryLimit {limit} and those in use), got {}",
            limit + 2,
            revisions.len()
        ));
    }
    out
}

/// Namespaces no copy goes to, whatever the targets say: the targets' documentation names
/// them ("except some forbidden namespaces, such as kube-system and kube-public").
pub const FORBIDDEN_NAMESPACES: &[&str] = &["kube-system", "kube-public"];

/// A namespace, as the copy oracle sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceView {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Whether it is being deleted (nothing can be made in it; what it holds goes with it).
    pub terminating: bool,
}

/// Whether a label selector selects `labels`: every `matchLabels` pair and every
/// `matchExpressions` requirement holds. An empty or absent selector selects nothing, as the
/// targets' documentation says ("if NamespaceLabelSelector is not empty").
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector["matchLabels"].as_object();
    let exprs = selector["matchExpressions"].as_array();
    if pairs.is_none_or(|p| p.is_empty()) && exprs.is_none_or(|e| e.is_empty()) {
        return false;
    }
    let pairs_hold = pairs
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let exprs_hold = exprs.into_iter().flatten().all(|e| {
        let value = e["key"].as_str().and_then(|k| labels.get(k));
        let among = || {
            value.is_some_and(|v| {
                e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|x| x.as_str() == Some(v.as_str()))
            })
        };
        match e["operator"].as_str() {
            Some("In") => among(),
            Some("NotIn") => !among(),
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    });
    pairs_hold && exprs_hold
}

/// Whether `targets` (a copying object's `spec.targets`) select namespace `ns`: never a
/// forbidden or an excluded one; else every one with `allNamespaces`, an included one, or one
/// the namespace selector (`namespaceLabelSelector`, `namespaceSelector` in later versions)
/// selects.
pub fn selects(targets: &Value, ns: &NamespaceView) -> bool {
    let listed = |list: &Value| {
        list["list"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|i| i["name"].as_str() == Some(ns.name.as_str()))
    };
    if FORBIDDEN_NAMESPACES.contains(&ns.name.as_str()) || listed(&targets["excludedNamespaces"]) {
        return false;
    }
    targets["allNamespaces"] == true
        || listed(&targets["includedNamespaces"])
        || ["namespaceLabelSelector", "namespaceSelector"]
            .iter()
            .any(|k| selector_matches(&targets[*k], &ns.labels))
}

/// What an object holds besides its identity and status: its top-level fields but
/// `apiVersion`, `kind`, `metadata` and `status`.
fn content(o: &Value) -> BTreeMap<String, Value> {
    o.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// O2 for a subject that copies a resource into namespaces ([`super::subject::Makes::Copies`]),
/// once settled: its status has observed its generation and counts the namespaces that hold
/// their copy; each namespace its targets select (and that is not being deleted) holds one
/// copy it owns, named as the resource, holding what the resource holds as the API stores it
/// (`stored`: the resource as a dry-run create answers, or the resource itself) and its labels
/// and annotations; no other namespace holds a copy it owns; `status.succeeded` counts the
/// selected namespaces that hold their copy. `copies` are the objects of the
/// resource's kind it owns, everywhere. Returns what differs.
pub fn copies_convergence(
    obj: &Value,
    stored: &Value,
    namespaces: &[NamespaceView],
    copies: &[Value],
) -> Vec<String> {
    let mut out = vec![];
    let generation = obj["metadata"]["generation"].as_i64();
    let observed = obj["status"]["observedGeneration"].as_i64();
    if observed.is_none() || observed < generation {
        out.push(format!(
            "status.observedGeneration: want {}, got {}",
            generation.unwrap_or_default(),
            observed.map_or("none".into(), |o| o.to_string())
        ));
    }
    let resource = &obj["spec"]["resource"];
    let name = resource["metadata"]["name"].as_str().unwrap_or_default();
    let want = content(stored);
    let targets = &obj["spec"]["targets"];
    let mut holding = 0;
    let mut terminating_with_copy = 0;
    for ns in namespaces {
        let copy = copies.iter().find(|c| {
            c["metadata"]["namespace"].as_str() == Some(ns.name.as_str())
                && c["metadata"]["name"].as_str() == Some(name)
        });
        if ns.terminating {
            terminating_with_copy += usize::from(copy.is_some());
            continue;
        }
        if !selects(targets, ns) {
            if copy.is_some() {
                out.push(format!(
                    "copy left: in namespace {}, which its targets do not select",
                    ns.name
                ));
            }
            continue;
        }
        let Some(copy) = copy else {
            out.push(format!(
                "copy missing: namespace {} is selected by its targets and holds no copy {name}",
                ns.name
            ));
            continue;
        };
        holding += 1;
        let got = content(copy);
        for k in want
            .keys()
            .chain(got.keys())
            .collect::<std::collections::BTreeSet<_>>()
        {
            if want.get(k) != got.get(k) {
                out.push(format!(
                    "copy {k}: in namespace {}, want {} (the resource's), got {}",
                    ns.name,
                    want.get(k).map_or("none".into(), Value::to_string),
                    got.get(k).map_or("none".into(), Value::to_string)
                ));
            }
        }
        for m in ["labels", "annotations"] {
            for (k, v) in resource["metadata"][m].as_object().into_iter().flatten() {
                if copy["metadata"][m][k] != *v {
                    out.push(format!(
                        "copy {m}: in namespace {}, {k} want {v} (the resource's), got {}",
                        ns.name, copy["metadata"][m][k]
                    ));
                }
            }
        }
    }
    // A namespace being deleted may still hold a copy the controller counts.
    if let Some(succeeded) = obj["status"]["succeeded"].as_i64() {
        let (low, high) = (holding as i64, (holding + terminating_with_copy) as i64);
        if !(low..=high).contains(&succeeded) {
            out.push(format!(
                "status.succeeded: want {low} (the selected namespaces holding their copy), got {succeeded}"
            ));
        }
    }
    out
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
    use super::*;
    use crate::explore::subject::subjects;
    use serde_json::json;

    /// The CloneSet subject (the oracle modules' tests share it).
    pub(super) fn cloneset() -> Subject {
        subjects()
            .into_iter()
            .find(|s| s.name == "CloneSet")
            .unwrap()
    }

    #[test]
    fn a_refusal_must_name_a_field_and_the_twin_must_agree() {
        let cs = cloneset();
        let named = Answer::Refused(
            "CloneSet.apps.kruise.io \"a\" is invalid: spec.replicas: Invalid value".into(),
        );
        let bare = Answer::Refused("Internal error occurred: failed calling webhook".into());
        assert!(names_a_field(
            "\"x\" is invalid: .spec.replicas: Invalid value: -1"
        ));
        assert!(
            admission(
                &cs,
                "create",
                &[("spec.replicas", &json!(-1))],
                &named,
                Some(&named)
            )
            .is_empty()
        );
        let f = admission(&cs, "create", &[("spec.x", &json!(1))], &bare, None);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].oracle, Oracle::Realizable);
        let f = admission(
            &cs,
            "create",
            &[("spec.minReadySeconds", &json!(-1))],
            &Answer::Admitted,
            Some(&named),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].oracle, Oracle::Native);
        assert_eq!(
            f[0].key,
            "admits on create of spec.minReadySeconds as a negative number what Deployment does not"
        );
        let inner = |f: &str| {
            admission(
                &cs,
                "update",
                &[(f, &json!("x"))],
                &named,
                Some(&Answer::Admitted),
            )[0]
            .key
            .clone()
        };
        assert_ne!(
            inner("spec.template.spec.priorityClassName"),
            inner("spec.template.metadata.labels"),
            "each field of a template is a finding of its own"
        );
        assert_eq!(
            inner("spec.template.jobTemplate.spec.template.spec.containers[0].resources"),
            "refuses on update of spec.template.jobTemplate.spec.template.spec.containers[0].\
             resources as a string what Deployment does not"
        );
        let unknown = Answer::UnknownField("unknown field".into());
        assert!(
            admission(
                &cs,
                "create",
                &[("spec.scatter", &json!([]))],
                &Answer::Admitted,
                Some(&unknown)
            )
            .is_empty()
        );
    }

    #[test]
    fn repeated_failure_events_of_the_subject_are_findings() {
        let cs = cloneset();
        let ev = |kind: &str, reason: &str, n| {
            (kind.to_string(), reason.to_string(), n, "m".to_string())
        };
        let events = [
            ev("CloneSet", "FailedCreate", 3),
            ev("Pod", "FailedScheduling", 5),
            ev("CloneSet", "FailedUpdate", 1),
        ];
        let f = repeated_failures(&cs, "x", &events);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].key, "repeated FailedCreate");
    }

    #[test]
    fn a_write_the_api_refuses_is_a_finding_once_and_a_namespace_deleted_or_too_new_is_not_a_refusal()
     {
        let cs = cloneset();
        let ev = |kind: &str, reason: &str, m: &str| {
            (kind.to_string(), reason.to_string(), 1, m.to_string())
        };
        let events = [
            ev(
                "CloneSet",
                "FailedCreate",
                "failed to create pod: pods \"x-1\" is forbidden: the value computed differs",
            ),
            ev(
                "CloneSet",
                "FailedCreate",
                "failed to create pod: pods \"x-2\" is forbidden: the value computed differs",
            ),
            ev(
                "CloneSet",
                "FailedUpdate",
                "pods \"x-1\" is forbidden: unable to create new content in namespace n because it is being terminated",
            ),
            ev(
                "CloneSet",
                "FailedCreate",
                "failed to create pod: pods \"x-3\" is forbidden: error looking up service account n/default: serviceaccount \"default\" not found",
            ),
            ev("CloneSet", "FailedDelete", "the object has been modified"),
            ev("Pod", "FailedMount", "pods \"x-1\" is invalid: something"),
        ];
        let f = refused_writes(&cs, "x", &events);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].key, "FailedCreate refused by the API");
        assert!(f[0].observed.contains("x-1"), "{}", f[0].observed);
        // Refusals are not counted again as repeated failures.
        assert!(repeated_failures(&cs, "x", &events).is_empty());
    }

    #[test]
    fn a_refusal_by_the_trials_own_policy_is_what_it_declares_and_no_finding() {
        let policy = subjects()
            .into_iter()
            .find(|s| s.target.is_some() && s.kind == "WorkloadSpread")
            .unwrap();
        let ev = |m: &str| {
            [(
                "CloneSet".to_string(),
                "FailedDelete".to_string(),
                3,
                m.to_string(),
            )]
        };
        let own = ev(
            "failed to delete pod x-target-1: admission webhook \"v.kb.io\" denied \
             the request: workloadspread.apps.kruise.io \"x\" is forbidden: no room",
        );
        assert!(by_own_policy(&policy, "x", &own[0].3));
        assert!(refused_writes(&policy, "x", &own).is_empty());
        assert!(repeated_failures(&policy, "x", &own).is_empty());
        // Another object of the kind, another kind, or a subject that is no policy: a finding.
        for (subject, name) in [(&policy, "y"), (&cloneset(), "x")] {
            assert!(!by_own_policy(subject, name, &own[0].3));
        }
        let other = ev("failed to delete pod x-target-1: pods \"x\" is forbidden: no room");
        assert!(!by_own_policy(&policy, "x", &other[0].3));
        assert_eq!(refused_writes(&policy, "x", &other).len(), 1);
    }

    #[test]
    fn revisions_have_numbers_of_their_own_and_no_more_than_the_declared_history() {
        let obj = json!({"spec": {"revisionHistoryLimit": 1}});
        let r = |n: &[(&str, i64)]| -> Vec<(String, i64)> {
            n.iter().map(|(a, b)| (a.to_string(), *b)).collect()
        };
        assert!(revision_history(&obj, &r(&[("a", 1), ("b", 2), ("c", 3)])).is_empty());
        let alike = revision_history(&obj, &r(&[("a", 1), ("b", 1)]));
        assert_eq!(alike.len(), 1);
        assert_eq!(
            convergence_key(&alike[0]),
            "does not converge: revision numbers"
        );
        let kept = revision_history(&obj, &r(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)]));
        assert_eq!(
            convergence_key(&kept[0]),
            "does not converge: revisions kept"
        );
        assert!(
            revision_history(
                &json!({"spec": {}}),
                &r(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)])
            )
            .is_empty(),
            "no declared limit, no bound"
        );
    }

    #[test]
    fn a_release_differs_by_the_first_answer_then_what_it_settled_on() {
        let cs = cloneset();
        let v = json!(-1);
        let fields = [("spec.minReadySeconds", &v)];
        let end = |admitted: Vec<bool>, unsettled: &[&str], live| EndState {
            admitted,
            unsettled: unsettled.iter().map(|s| s.to_string()).collect(),
            live,
        };
        let same = end(vec![true, true], &[], Some(2));
        assert_eq!(release(&cs, &fields, &same, &same.clone(), "b"), None);
        let f = release(
            &cs,
            &fields,
            &end(vec![true, false], &[], Some(2)),
            &same,
            "b",
        )
        .unwrap();
        assert_eq!(f.oracle, Oracle::Release);
        assert_eq!(
            f.key,
            "refuses at step 2 (spec.minReadySeconds as a negative number) what b does not"
        );
        let f = release(
            &cs,
            &fields,
            &end(vec![true, true], &["does not converge: live pods"], None),
            &same,
            "b",
        )
        .unwrap();
        assert!(f.key.starts_with("settles otherwise than b"), "{}", f.key);
        let f = release(
            &cs,
            &fields,
            &end(vec![true, true], &[], Some(3)),
            &same,
            "b",
        )
        .unwrap();
        assert!(
            f.key.starts_with("keeps another number of live pods"),
            "{}",
            f.key
        );
    }

    #[test]
    fn a_zero_value_left_out_is_kept() {
        let cs = cloneset();
        let sent = BTreeMap::from([(
            "spec.selector".to_string(),
            json!({"matchExpressions": [], "matchLabels": {"a": "b"}}),
        )]);
        let answered = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}});
        assert!(stored(&cs, &sent, &answered).is_empty());
        let dropped = json!({"spec": {"selector": {}}});
        assert_eq!(stored(&cs, &sent, &dropped).len(), 1);
    }

    fn ns(name: &str, labels: &[(&str, &str)], terminating: bool) -> NamespaceView {
        NamespaceView {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            terminating,
        }
    }

    #[test]
    fn a_selector_holds_every_pair_and_requirement_and_an_empty_one_selects_nothing() {
        let labels = BTreeMap::from([("a".to_string(), "1".to_string())]);
        assert!(selector_matches(
            &json!({"matchLabels": {"a": "1"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"a": "2"}}),
            &labels
        ));
        let expr = |op: &str, values: &[&str]| json!({"matchExpressions": [{"key": "a", "operator": op, "values": values}]});
        assert!(selector_matches(&expr("In", &["0", "1"]), &labels));
        assert!(!selector_matches(&expr("NotIn", &["1"]), &labels));
        assert!(selector_matches(&expr("Exists", &[]), &labels));
        assert!(!selector_matches(&expr("DoesNotExist", &[]), &labels));
        assert!(!selector_matches(&expr("Sideways", &[]), &labels));
        assert!(!selector_matches(&json!({}), &labels));
        assert!(!selector_matches(&json!({"matchExpressions": []}), &labels));
    }

    #[test]
    fn copies_are_judged_in_every_selected_namespace_and_nowhere_else() {
        let resource = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "r", "labels": {"l": "v"}}, "data": {"k": "v"}});
        let mut obj = json!({"metadata": {"generation": 2, "uid": "u"},
            "spec": {"resource": resource.clone(), "targets": {
                "includedNamespaces": {"list": [{"name": "in"}, {"name": "gone"}]},
                "excludedNamespaces": {"list": [{"name": "out"}]},
                "namespaceLabelSelector": {"matchLabels": {"t": "x"}}}},
            "status": {"observedGeneration": 2, "succeeded": 2}});
        let namespaces = [
            ns("in", &[], false),
            ns("picked", &[("t", "x")], false),
            ns("out", &[("t", "x")], false),
            ns("kube-system", &[("t", "x")], false),
            ns("other", &[], false),
            ns("ending", &[("t", "x")], true),
        ];
        let copy = |ns: &str, data: Value| {
            json!({"metadata": {"namespace": ns, "name": "r", "labels": {"l": "v"}},
                   "data": data})
        };
        let copies = vec![
            copy("in", json!({"k": "v"})),
            copy("picked", json!({"k": "v"})),
        ];
        assert!(
            copies_convergence(&obj, &resource, &namespaces, &copies).is_empty(),
            "{:?}",
            copies_convergence(&obj, &resource, &namespaces, &copies)
        );
        // A copy in a namespace being deleted may still be counted.
        let mut with_ending = copies.clone();
        with_ending.push(copy("ending", json!({"k": "v"})));
        obj["status"]["succeeded"] = json!(3);
        assert!(copies_convergence(&obj, &resource, &namespaces, &with_ending).is_empty());
        obj["status"]["succeeded"] = json!(2);

        let keys = |copies: &[Value], obj: &Value| -> Vec<String> {
            let mut k: Vec<String> = copies_convergence(obj, &resource, &namespaces, copies)
                .iter()
                .map(|d| convergence_key(d))
                .collect();
            k.dedup();
            k
        };
        let stale = vec![
            copy("in", json!({"k": "old"})),
            copy("picked", json!({"k": "v"})),
        ];
        assert_eq!(keys(&stale, &obj), ["does not converge: copy data"]);
        let missing = vec![copy("in", json!({"k": "v"}))];
        assert_eq!(
            keys(&missing, &obj),
            [
                "does not converge: copy missing",
                "does not converge: status.succeeded"
            ]
        );
        let mut extra = copies.clone();
        extra.push(copy("out", json!({"k": "v"})));
        assert_eq!(keys(&extra, &obj), ["does not converge: copy left"]);
        let unlabelled = vec![
            json!({"metadata": {"namespace": "in", "name": "r"}, "data": {"k": "v"}}),
            copy("picked", json!({"k": "v"})),
        ];
        assert_eq!(keys(&unlabelled, &obj), ["does not converge: copy labels"]);
        obj["status"]["observedGeneration"] = json!(1);
        assert_eq!(
            keys(&copies, &obj),
            ["does not converge: status.observedGeneration"]
        );
        // Every namespace but the forbidden and the excluded ones, with allNamespaces.
        let all = json!({"metadata": {"generation": 1}, "spec": {"resource": resource.clone(),
            "targets": {"allNamespaces": true, "excludedNamespaces": {"list": [{"name": "out"}]}}},
            "status": {"observedGeneration": 1}});
        let everywhere: Vec<Value> = ["in", "picked", "other"]
            .iter()
            .map(|n| copy(n, json!({"k": "v"})))
            .collect();
        assert!(copies_convergence(&all, &resource, &namespaces, &everywhere).is_empty());
    }
}
