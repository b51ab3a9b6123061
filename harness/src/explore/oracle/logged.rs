//! O1 on what the controller logs: [`logged_refusals`], a write of the trial's objects the API
//! refused for its content that the controller reported only in its log, with no event.

use std::collections::BTreeSet;

use super::events::{REFUSALS, by_own_policy, in_words, refusal, refused_for};
use super::{Finding, Oracle};
use crate::explore::subject::Subject;

/// The object a refusal names (`Pod "x-1" is invalid: ...`: `x-1`), its quotes unescaped.
fn refused_object(line: &str) -> Option<&str> {
    let at = REFUSALS.iter().filter_map(|m| line.find(m)).min()?;
    let before = line[..at].strip_suffix('"')?;
    let start = before.rfind('"')? + 1;
    Some(&before[start..])
}

/// A log line as the refusal in it reads: a structured line's value holding it (its quotes
/// escaped) up to the value's end, unescaped; any other line as it is.
fn as_read(line: &str) -> String {
    let escaped = REFUSALS
        .iter()
        .filter_map(|m| line.find(&format!("\\\"{m}")))
        .min();
    let Some(at) = escaped else {
        return line.to_string();
    };
    let rest = &line[at + 2..];
    let end = rest
        .char_indices()
        .find(|&(i, c)| c == '"' && !rest[..i].ends_with('\\'))
        .map_or(line.len(), |(i, _)| at + 2 + i);
    line[..end].replace("\\\"", "\"")
}

/// Whether `object` is one of the trial's objects `names` or one made from them (`x-target-0`
/// of `x`).
fn of(object: &str, names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| object == *n || object.starts_with(&format!("{n}-")))
}

/// The writes the controller logged as refused by the API for their content (`log`, its log
/// over the trial's window, as [`refused_writes`](super::refused_writes) reads events): a line
/// naming the trial's namespace `ns` whose refusal (`is invalid:`, or `is forbidden:` for
/// another cause than RBAC, a namespace being deleted or too new: [`refusal`]) names one of
/// the trial's objects (`name` or one made from it), other than one by the trial's own policy
/// ([`by_own_policy`]); once for each cause ([`in_words`]), and none for a cause the trial's
/// native twin (`tname`, in the same log) met too or an event of the trial already carries
/// (`events`: messages of the warning events [`refused_writes`](super::refused_writes) judged).
/// A controller that reports a refused write only in its log (retrying it, say, with no
/// event) realizes its spec no better than one whose event says so.
pub fn logged_refusals(
    subject: &Subject,
    (name, tname): (&str, &str),
    ns: &str,
    log: &str,
    events: &[String],
) -> Vec<Finding> {
    let names = [name, tname];
    let lines: Vec<String> = log
        .lines()
        .filter(|l| l.contains(ns))
        .map(as_read)
        .filter(|l| refusal(l) && super::denied_request(l).is_none())
        .collect();
    let words = |line: &str| refused_for(line, &names).map(|c| in_words(&c));
    let known: BTreeSet<String> = lines
        .iter()
        .filter(|l| refused_object(l).is_some_and(|o| of(o, &[tname])))
        .map(String::as_str)
        .chain(events.iter().filter(|m| refusal(m)).map(String::as_str))
        .filter_map(words)
        .collect();
    let mut seen = BTreeSet::new();
    let mut out = vec![];
    for line in &lines {
        let Some(object) = refused_object(line) else {
            continue;
        };
        if !of(object, &[name]) || by_own_policy(subject, name, line) {
            continue;
        }
        let Some(w) = words(line) else { continue };
        if known.contains(&w) || !seen.insert(w.clone()) {
            continue;
        }
        out.push(Finding {
            oracle: Oracle::Realizable,
            subject: subject.name.clone(),
            key: format!("a write logged refused by the API: {w}"),
            observed: format!("the controller logged: {}", line.trim()),
            expected: "the objects the controller writes for an admitted object are admitted"
                .into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::tests::cloneset;

    const NS: &str = "x-cloneset-12-ab";

    fn line(object: &str, rest: &str) -> String {
        format!(
            "E1208 00:47:41.067 1 processor.go:183] update error, ns:{NS}, err:Pod \"{object}\" is {rest}"
        )
    }

    #[test]
    fn a_refused_write_the_controller_only_logged_is_a_finding_once_for_each_cause() {
        let cs = cloneset();
        let invalid = "invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`";
        let log = [
            line("x-1", invalid),
            line("x-2", invalid),
            // Escaped, as a structured log writes it.
            format!(
                "E1208 1 controller.go:329] \"msg\"=\"Reconciler error\" \"error\"=\"Pod \\\"x-3\\\" is forbidden: exceeded quota: q\" \"namespace\"=\"{NS}\""
            ),
            // Another trial's namespace; another trial's object; no refusal; an RBAC denial.
            line("x-1", invalid).replace(NS, "y-other-1-cd"),
            line("z-1", invalid),
            format!("I1208 1 processor.go:1] updated pod x-1 in {NS}"),
            format!(
                "E1208 1 reflector.go:1] pods \"x-1\" is forbidden: User \"system:serviceaccount:kruise-system:kruise-manager\" cannot list resource \"pods\" in API group \"\" in the namespace \"{NS}\""
            ),
        ]
        .join("\n");
        let f = logged_refusals(&cs, ("x", "t"), NS, &log, &[]);
        let keys: Vec<&str> = f.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "a write logged refused by the API: the object is invalid",
                "a write logged refused by the API: q",
            ],
            "{f:?}"
        );
        assert!(f[0].observed.contains("Pod \"x-1\""), "{}", f[0].observed);
        // An event of the trial, or the twin's write, that met the same cause: none.
        let event = vec!["pods \"x-9\" is invalid: spec.x: Required value".to_string()];
        let f = logged_refusals(&cs, ("x", "t"), NS, &log, &event);
        assert_eq!(f.len(), 1, "{f:?}");
        let twin = format!("{log}\n{}", line("t-1", invalid));
        let f = logged_refusals(&cs, ("x", "t"), NS, &twin, &[]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(logged_refusals(&cs, ("x", "t"), NS, "", &[]).is_empty());
    }
}
