//! Who runs the next behaviour trial: [`Turns`], the subjects' shares of the behaviour trials
//! by their [`groups`], and the trials carried to a subject from another of its kind.

use super::options::Share;
use super::subject::{CLAIMS, Subject};
#[cfg(doc)]
use super::trial;

/// The groups `s` shares behaviour trials in ([`Share::Kinds`]), the widest first: its kind,
/// then what it differs in next within its kind: a policy's target kind, else its name with
/// the versions and the claim templates left out (a union's member).
pub(super) fn groups(s: &Subject) -> [String; 2] {
    let next = match &s.target {
        Some(t) => t.family.to_string(),
        None => s
            .name
            .split('.')
            .map(|part| {
                let part = part.split('@').next().unwrap_or_default();
                part.strip_suffix(CLAIMS).unwrap_or(part)
            })
            .collect::<Vec<_>>()
            .join("."),
    };
    [s.family.to_string(), next]
}

/// Who runs the next behaviour trial: each subject runs its trial numbers 0, 1, 2, … in
/// order, each once, and the subject whose turns so far are the fewest for its share goes
/// next (the earliest in the subjects' order when two are even), so every subject runs one
/// trial before any runs a second, and past that the trials follow the shares. The turns
/// share trials, not time: a subject whose trials take longer to settle uses more of the
/// budget.
///
/// A subject with trials carried to it ([`trial::carried`]: another subject's trial that
/// fired a new finding, its steps on this one) runs one of them in a turn of its own, at
/// most every other turn: they take its share, not others', and never more than half of it;
/// its trial numbers still run each once, in order, in the other turns.
#[derive(Debug, Clone)]
pub(super) struct Turns {
    /// The inverse of each subject's share, up to a factor common to all: with
    /// [`Share::Kinds`], its group's number of subjects times its kind's number of groups.
    cost: Vec<u64>,
    /// The trials each subject has started, carried ones included.
    started: Vec<u64>,
    /// Of them, the carried ones.
    carried: Vec<u64>,
}

/// A subject's turn ([`Turns::next_or_carried`]): its next trial number, or a trial `T`
/// carried to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn<T> {
    /// Trial `number` of the subject at `at` ([`trial::behaviour`]'s `index`).
    Number { at: usize, number: u64 },
    /// A trial carried to the subject at `at`.
    Carried { at: usize, trial: T },
}

impl Turns {
    /// Turns for subjects in the groups `groups` (one entry each, in the subjects' order).
    pub(super) fn new(share: Share, groups: &[[String; 2]]) -> Self {
        let cost: Vec<u64> = groups
            .iter()
            .map(|g| match share {
                Share::Subjects => 1,
                Share::Kinds => {
                    let in_group = groups.iter().filter(|o| *o == g).count();
                    let in_kind: std::collections::BTreeSet<&String> = groups
                        .iter()
                        .filter(|o| o[0] == g[0])
                        .map(|o| &o[1])
                        .collect();
                    (in_group * in_kind.len()) as u64
                }
            })
            .collect();
        let started = vec![0; cost.len()];
        let carried = started.clone();
        Turns {
            cost,
            started,
            carried,
        }
    }

    /// The next trial, none carried: the position of its subject and its trial number
    /// ([`trial::behaviour`]'s `index`); none without subjects.
    #[cfg(test)]
    pub(super) fn next(&mut self) -> Option<(usize, u64)> {
        match self.next_or_carried(|_| None::<()>)? {
            Turn::Number { at, number } => Some((at, number)),
            Turn::Carried { .. } => None,
        }
    }

    /// The next turn, `take(i)` taking a trial carried to subject `i` if one waits: the
    /// subject whose turns are the fewest for its share, and a carried trial when the carried
    /// ones would stay at most half of its turns and one waits, else its trial number. None
    /// without subjects.
    pub(super) fn next_or_carried<T>(
        &mut self,
        mut take: impl FnMut(usize) -> Option<T>,
    ) -> Option<Turn<T>> {
        let at = (0..self.cost.len()).min_by_key(|&i| (self.started[i] * self.cost[i], i))?;
        self.started[at] += 1;
        if (self.carried[at] + 1) * 2 <= self.started[at]
            && let Some(trial) = take(at)
        {
            self.carried[at] += 1;
            return Some(Turn::Carried { at, trial });
        }
        let number = self.started[at] - self.carried[at] - 1;
        Some(Turn::Number { at, number })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The groups of subjects named as `--kinds` names them, the way [`groups`] reads them.
    fn grouped(names: &[&str]) -> Vec<[String; 2]> {
        let plain = |part: &str| {
            let part = part.split('@').next().unwrap();
            part.strip_suffix(CLAIMS).unwrap_or(part).to_string()
        };
        names
            .iter()
            .map(|n| {
                let (kind, rest) = n.split_once('.').unwrap_or((n, ""));
                [plain(kind), plain(rest)]
            })
            .collect()
    }

    /// Subjects as `--kinds` names them: a workload kind in two versions, one alone, a policy
    /// over three target kinds in several variants, a union of two members.
    const NAMES: [&str; 13] = [
        "A",
        "A@v2",
        "B",
        "P.A",
        "P.AWithClaims",
        "P@v2.A",
        "P@v2.AWithClaims",
        "P.B",
        "P.C",
        "P.C@v2",
        "U.x",
        "U.xWithClaims",
        "U.y",
    ];

    fn run(turns: &mut Turns, trials: usize) -> Vec<(usize, u64)> {
        (0..trials).map(|_| turns.next().unwrap()).collect()
    }

    #[test]
    fn every_subject_runs_its_numbers_once_each_in_order_and_each_once_before_any_twice() {
        let names = NAMES;
        for share in [Share::Kinds, Share::Subjects] {
            let mut turns = Turns::new(share, &grouped(&names));
            let ran = run(&mut turns, 500);
            let first: Vec<usize> = ran[..names.len()].iter().map(|(at, _)| *at).collect();
            assert_eq!(first, (0..names.len()).collect::<Vec<_>>(), "{share:?}");
            for (s, name) in names.iter().enumerate() {
                let numbers: Vec<u64> = ran
                    .iter()
                    .filter(|(at, _)| *at == s)
                    .map(|(_, n)| *n)
                    .collect();
                let expected: Vec<u64> = (0..numbers.len() as u64).collect();
                assert_eq!(numbers, expected, "{share:?}: subject {name}");
            }
        }
        assert_eq!(Turns::new(Share::Kinds, &[]).next(), None);
    }

    #[test]
    fn carried_trials_take_at_most_every_other_turn_of_their_subject_and_no_number() {
        let names = NAMES;
        let mut plain = Turns::new(Share::Kinds, &grouped(&names));
        let mut turns = Turns::new(Share::Kinds, &grouped(&names));
        // "P.B" has three trials carried to it waiting.
        let b = names.iter().position(|n| *n == "P.B").unwrap();
        let mut waiting = vec![0; names.len()];
        waiting[b] = 3;
        let mut seen = vec![];
        for _ in 0..600 {
            let turn = turns
                .next_or_carried(|at| (waiting[at] > 0).then(|| waiting[at] -= 1))
                .unwrap();
            seen.push(turn);
        }
        // Every subject's turns as without them: the carried trials are in P.B's.
        let whose = |t: &Turn<()>| match *t {
            Turn::Number { at, .. } | Turn::Carried { at, .. } => at,
        };
        let plain: Vec<usize> = run(&mut plain, 600).iter().map(|(at, _)| *at).collect();
        assert_eq!(seen.iter().map(whose).collect::<Vec<_>>(), plain);
        let of_b: Vec<Turn<()>> = seen.into_iter().filter(|t| whose(t) == b).collect();
        let carried = |t: &Turn<()>| matches!(t, Turn::Carried { .. });
        assert_eq!(of_b.iter().filter(|t| carried(t)).count(), 3);
        assert!(!carried(&of_b[0]), "its first turn is its trial 0");
        for (i, pair) in of_b.windows(2).enumerate() {
            assert!(
                !(carried(&pair[0]) && carried(&pair[1])),
                "turns {i}, {}",
                i + 1
            );
        }
        let numbers: Vec<u64> = of_b
            .iter()
            .filter_map(|t| match *t {
                Turn::Number { number, .. } => Some(number),
                Turn::Carried { .. } => None,
            })
            .collect();
        let expected: Vec<u64> = (0..numbers.len() as u64).collect();
        assert_eq!(numbers, expected, "its numbers once each, in order");
    }

    #[test]
    fn behaviour_trials_are_shared_by_kind_then_by_what_the_kind_differs_in() {
        let names = NAMES;
        let count = |ran: &[(usize, u64)], pick: &dyn Fn(&str) -> bool| {
            ran.iter().filter(|(at, _)| pick(names[*at])).count()
        };
        let trials = 1200;
        let ran = run(&mut Turns::new(Share::Kinds, &grouped(&names)), trials);
        // Each of the four kinds a quarter, within one subject's turn of it.
        for kind in ["A", "B", "P", "U"] {
            let n = count(&ran, &|name| name.split(['.', '@']).next() == Some(kind));
            assert!(n.abs_diff(trials / 4) <= 4, "{kind}: {n} of {trials}");
        }
        // Within the policy, each target kind a third, whatever its variants.
        for target in ["A", "B", "C"] {
            let n = count(&ran, &|name| {
                name.starts_with('P') && name.split('.').nth(1).unwrap().starts_with(target)
            });
            assert!(n.abs_diff(trials / 12) <= 4, "P over {target}: {n}");
        }
        // Within a target kind, each variant alike.
        let over_a: Vec<usize> = ["P.A", "P.AWithClaims", "P@v2.A", "P@v2.AWithClaims"]
            .iter()
            .map(|v| count(&ran, &|name| name == *v))
            .collect();
        assert!(
            over_a.iter().all(|n| n.abs_diff(trials / 48) <= 1),
            "{over_a:?}"
        );
        // Shared by subject, the policy's seven subjects take seven of the thirteen turns.
        let ran = run(&mut Turns::new(Share::Subjects, &grouped(&names)), 1300);
        assert_eq!(count(&ran, &|name| name.starts_with('P')), 700);
        assert_eq!(count(&ran, &|name| name == "B"), 100);
    }

    #[test]
    fn a_subject_is_grouped_by_its_kind_then_its_target_kind_or_member() {
        let (crds, doc) = crate::explore::subject::derive::tests::cell();
        let served = crate::explore::subject::derive::served(&crds, &doc);
        let g = |n: &str| groups(served.iter().find(|s| s.name == n).expect(n));
        assert_eq!(g("CloneSet"), ["CloneSet".to_string(), "CloneSet".into()]);
        assert_eq!(g("CloneSetWithClaims"), g("CloneSet"));
        assert_eq!(
            g("WorkloadSpread.CloneSet"),
            ["WorkloadSpread".to_string(), "CloneSet".into()]
        );
        assert_eq!(
            g("WorkloadSpread.CloneSetWithClaims"),
            g("WorkloadSpread.CloneSet")
        );
        assert_eq!(
            g("UnitedDeployment.cloneSetTemplateWithClaims"),
            [
                "UnitedDeployment".to_string(),
                "UnitedDeployment.cloneSetTemplate".into()
            ]
        );
        assert_ne!(
            g("UnitedDeployment.cloneSetTemplate"),
            g("UnitedDeployment.deploymentTemplate")
        );
    }
}
