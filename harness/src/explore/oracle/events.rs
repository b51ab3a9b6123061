//! The oracles on a trial's warning events: [`repeated_failures`] (O1: what the API admitted
//! fails again and again), [`refused_writes`] (a write the API refused for its content), and
//! [`by_own_policy`], a refusal the trial's own policy declares.

use std::collections::BTreeMap;

use super::{Finding, Oracle};
use crate::explore::subject::Subject;

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
pub(super) fn refusal(message: &str) -> bool {
    message.contains(" is invalid: ")
        || (message.contains(" is forbidden: ")
            && !message.contains("because it is being terminated")
            && !(message.contains("error looking up service account")
                && message.contains("/default: serviceaccount \"default\" not found")))
}

/// The words after a refused object's name that begin the API's refusal of it.
pub(super) const REFUSALS: [&str; 2] = [" is forbidden: ", " is invalid: "];

/// What a refusal refused for, as the API said it: its message from the refusal on (`is
/// forbidden:` or `is invalid:`, after the refused object's name), up to the object the
/// controller logs after it (`, pod: {`), a quoted name of the trial's objects (one of
/// `names`, or one they made: `x-target-5vs69`) written alike, so that two objects refused
/// for one cause have the same one.
pub(super) fn refused_for(message: &str, names: &[&str]) -> Option<String> {
    let at = REFUSALS.iter().filter_map(|m| message.find(m)).min()?;
    let mut cause = &message[at..];
    if let Some(end) = cause.find(", pod: {") {
        cause = &cause[..end];
    }
    let ours = |quoted: &str| {
        names
            .iter()
            .any(|n| quoted == *n || quoted.starts_with(&format!("{n}-")))
    };
    let parts: Vec<&str> = cause
        .split('"')
        .enumerate()
        .map(|(i, part)| match i % 2 == 1 && ours(part) {
            true => "<name>",
            false => part,
        })
        .collect();
    Some(parts.join("\"").trim().to_string())
}

/// What a refusal's cause ([`refused_for`]) comes to in a finding's key. A refusal of the
/// object's content (`is invalid:`) is one cause, whatever field it names: the controller
/// wrote what the API's validation refuses (its first refusal is the finding's observation).
/// A refusal by an admission plugin (`is forbidden:`) is the plugin's, in its words: the
/// field path it names and its last words ([`cause`]), or its last words without what they
/// quote (`RuntimeClass not found`), so that one plugin met first does not hide another.
pub(super) fn in_words(cause: &str) -> String {
    if !cause.starts_with("is forbidden: ") {
        return "the object is invalid".into();
    }
    if let Some((path, last)) = self::cause(cause) {
        return format!("{path}: {last}");
    }
    unquoted(&last_words(cause).unwrap_or_default())
}

/// `words` without what they quote, their spaces made single (`RuntimeClass "r" not found`:
/// `RuntimeClass not found`).
pub fn unquoted(words: &str) -> String {
    let outside: Vec<&str> = words.split('"').step_by(2).collect();
    outside
        .concat()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The writes the controller made that the API refused for their content, once for each
/// reason and cause ([`in_words`]: a refusal met first does not hide another), settled or
/// not: a `Failed*` Warning event of the subject's kinds (see [`Subject::event_kinds`]) carrying
/// a refusal, other than one by the trial's own policy object `name`
/// ([`by_own_policy`]), and other than one the trial's native twin (object `tname`, through
/// the same steps) met for the same cause ([`refused_for`]) in `twin`, its warning events:
/// the API refusing what the trial asked for (a reference to nothing, say) whichever
/// controller writes it. A controller that builds an object the API refuses realizes its spec
/// only where it happens to build another.
pub fn refused_writes(
    subject: &Subject,
    (name, tname): (&str, &str),
    events: &[(String, String, i32, String)],
    twin: &[(String, String, i32, String)],
) -> Vec<Finding> {
    let kinds = subject.event_kinds();
    let names = [name, tname];
    let twin_met: Vec<String> = twin
        .iter()
        .filter(|(_, reason, _, m)| reason.starts_with("Failed") && refusal(m))
        .filter_map(|(.., m)| refused_for(m, &names))
        .collect();
    let mut by_cause: BTreeMap<(&str, String), &str> = BTreeMap::new();
    for (kind, reason, _, message) in events {
        if !kinds.contains(&kind.as_str())
            || !reason.starts_with("Failed")
            || !refusal(message)
            || by_own_policy(subject, name, message)
        {
            continue;
        }
        if let Some(cause) = refused_for(message, &names)
            && !twin_met.contains(&cause)
        {
            by_cause
                .entry((reason.as_str(), in_words(&cause)))
                .or_insert(message);
        }
    }
    by_cause
        .into_iter()
        .map(|((reason, words), message)| Finding {
            oracle: Oracle::Realizable,
            subject: subject.name.clone(),
            key: format!("{reason} refused by the API: {words}"),
            observed: format!("Warning {reason}: {message}"),
            expected: "the objects the controller writes for an admitted object are admitted"
                .into(),
        })
        .collect()
}

/// The cause a refusal gives: the first field path it names and its last words (`spec.template`
/// and `field is immutable` of `Job.batch "t1" is invalid: spec.template: Invalid value:
/// core.PodTemplateSpec{…}: field is immutable`), without the value between them; none when
/// it names no field.
pub fn cause(message: &str) -> Option<(String, String)> {
    static PATH: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?:^|[\s\[])((?:spec|metadata)(?:[.\[][A-Za-z0-9_\-\]\[.]*)?): ")
            .expect("a valid regex")
    });
    let path = PATH.captures(message)?.get(1)?.as_str().to_string();
    Some((path, last_words(message)?))
}

/// A refusal's last words: what follows its last `: `, closing brackets aside.
pub fn last_words(message: &str) -> Option<String> {
    let m = message
        .trim_end()
        .trim_end_matches(')')
        .trim_end_matches(']');
    Some(m.rsplit(": ").next()?.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::tests::cloneset;
    use crate::explore::subject::subjects;

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
        let f = refused_writes(&cs, ("x", "t"), &events, &[]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].key,
            "FailedCreate refused by the API: the value computed differs"
        );
        assert!(f[0].observed.contains("x-1"), "{}", f[0].observed);
        // Refusals are not counted again as repeated failures.
        assert!(repeated_failures(&cs, "x", &events).is_empty());
    }

    #[test]
    fn refusals_are_one_finding_an_admission_plugins_cause_and_one_for_invalid_content() {
        let cs = cloneset();
        let ev =
            |reason: &str, m: &str| ("CloneSet".to_string(), reason.to_string(), 1, m.to_string());
        let port = |pod: &str, value: i64| {
            format!(
                "create Pod {pod} failed error: Pod \"{pod}\" is invalid: \
                 spec.containers[0].livenessProbe.httpGet.port: Invalid value: {value}: must be \
                 between 1 and 65535, inclusive"
            )
        };
        let events = [
            ev("FailedCreate", &port("x-0", 0)),
            ev("FailedCreate", &port("x-1", 70000)),
            ev(
                "FailedCreate",
                "create Pod x-2 failed error: Pod \"x-2\" is invalid: spec.dnsConfig.options[0]: \
                 Required value: must not be empty",
            ),
            ev(
                "FailedCreate",
                "failed to create pod: pods \"x-2bc9d\" is forbidden: pod rejected: \
                 RuntimeClass \"r-none\" not found, pod: {\"metadata\":{}}",
            ),
            ev(
                "FailedCreate",
                "failed to create pod: pods \"x-7kq2p\" is forbidden: pod rejected: \
                 RuntimeClass \"other\" not found, pod: {\"metadata\":{}}",
            ),
            ev(
                "FailedCreate",
                "failed to create pod: pods \"x-5mm2c\" is forbidden: no PriorityClass \
                 with name p-none was found",
            ),
            ev(
                "FailedUpdate",
                "failed to update pod: pods \"x-5mm2c\" is forbidden: no PriorityClass \
                 with name p-none was found",
            ),
        ];
        let keys: Vec<String> = refused_writes(&cs, ("x", "t"), &events, &[])
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(
            keys,
            [
                "FailedCreate refused by the API: RuntimeClass not found",
                "FailedCreate refused by the API: no PriorityClass with name p-none was found",
                "FailedCreate refused by the API: the object is invalid",
                "FailedUpdate refused by the API: no PriorityClass with name p-none was found",
            ],
            "a plugin's cause each (the objects' names aside), every invalid content one, by \
             reason"
        );
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
        assert!(refused_writes(&policy, ("x", "t"), &own, &[]).is_empty());
        assert!(repeated_failures(&policy, "x", &own).is_empty());
        // Another object of the kind, another kind, or a subject that is no policy: a finding.
        for (subject, name) in [(&policy, "y"), (&cloneset(), "x")] {
            assert!(!by_own_policy(subject, name, &own[0].3));
        }
        let other = ev("failed to delete pod x-target-1: pods \"x\" is forbidden: no room");
        assert!(!by_own_policy(&policy, "x", &other[0].3));
        assert_eq!(refused_writes(&policy, ("x", "t"), &other, &[]).len(), 1);
    }

    #[test]
    fn a_refusal_the_native_twin_met_for_the_same_cause_is_the_apis_answer_to_the_trial() {
        let policy = subjects()
            .into_iter()
            .find(|s| s.target.is_some() && s.kind == "WorkloadSpread")
            .unwrap();
        let ev = |kind: &str, m: &str| {
            (
                kind.to_string(),
                "FailedCreate".to_string(),
                2,
                m.to_string(),
            )
        };
        let ours = [ev(
            "CloneSet",
            "failed to create pod: pods \"x-target-5vs69\" is forbidden: pod rejected: \
             RuntimeClass \"none\" not found, pod: {\"metadata\":{\"name\":\"x-target-5vs69\"}}",
        )];
        let twin_alike = [ev(
            "ReplicaSet",
            "Error creating: pods \"t-target-7d9f-abcde\" is forbidden: pod rejected: \
             RuntimeClass \"none\" not found",
        )];
        let twin_other = [ev(
            "ReplicaSet",
            "Error creating: pods \"t-target-7d9f-abcde\" is forbidden: pod rejected: \
             RuntimeClass \"other\" not found",
        )];
        assert!(refused_writes(&policy, ("x", "t"), &ours, &twin_alike).is_empty());
        assert_eq!(
            refused_writes(&policy, ("x", "t"), &ours, &twin_other).len(),
            1
        );
        assert_eq!(refused_writes(&policy, ("x", "t"), &ours, &[]).len(), 1);
        // A name of the trial's objects inside the cause is written alike; another is not.
        let named = |who: &str| {
            refused_for(
                &format!("pods \"{who}-1\" is invalid: spec.x: Invalid value: \"{who}-target-2\""),
                &["x", "t"],
            )
        };
        assert_eq!(named("x"), named("t"));
        assert_ne!(named("x"), named("y"));
        assert_eq!(refused_for("the object has been modified", &["x"]), None);
    }
}
