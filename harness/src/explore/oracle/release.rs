//! The release differential (O5): [`release`] compares how a trial ended ([`EndState`]) on the
//! controller under test and on a baseline release.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Finding, Oracle, keyed};
use crate::explore::subject::Subject;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::tests::cloneset;
    use serde_json::json;

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
}
