//! The admission oracles: [`admission`] (start there) judges a subject's answer to a create
//! or an update against its twin's (O1: a refusal names a field; O4: the twin answers
//! alike), and [`stored`] what the API stored against what was sent.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Answer, Finding, Oracle, keyed, names_a_field};
use crate::explore::subject::{Subject, get};
use crate::scenario::steps::zero;

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

/// The first non-zero field of `set` that an admitted write did not keep: `answered` (the
/// object the API answered with) lacks it at the path `path` gives (a field with no path is
/// not asked for). A twin that admits a field by dropping it (a field whose feature gate is
/// off) has not accepted it: its answer is not one to compare with.
pub fn dropped<'f>(
    set: &'f BTreeMap<String, Value>,
    answered: &Value,
    path: impl Fn(&str) -> Option<String>,
) -> Option<&'f str> {
    set.iter()
        .filter(|(_, v)| !zero(v))
        .find(|(k, v)| path(k).is_some_and(|p| !within(v, get(answered, &p))))
        .map(|(k, _)| k.as_str())
}

/// Whether every leaf of `v` is a zero value ([`zero`]).
fn zero_deep(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.values().all(zero_deep),
        other => zero(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::tests::cloneset;
    use serde_json::json;

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
    fn a_zero_value_left_out_is_kept() {
        let cs = cloneset();
        let sent = BTreeMap::from([(
            "spec.selector".to_string(),
            json!({"matchExpressions": [], "matchLabels": {"a": "b"}}),
        )]);
        let answered = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}});
        assert!(stored(&cs, &sent, &answered).is_empty());
        let dropped_it = json!({"spec": {"selector": {}}});
        assert_eq!(stored(&cs, &sent, &dropped_it).len(), 1);
        // The same, at another path (a twin's), and a field without one is not asked for.
        let at = |k: &str| Some(k.replace("spec.", "spec.twin."));
        let twin_kept = json!({"spec": {"twin": {"selector": {"matchLabels": {"a": "b"}}}}});
        assert_eq!(dropped(&sent, &twin_kept, at), None);
        assert_eq!(dropped(&sent, &answered, at), Some("spec.selector"));
        assert_eq!(dropped(&sent, &answered, |_| None), None);
    }
}
