//! Where an exploration's time went ([`Pace`], kept in `explore.json`): the seconds of
//! bring-up, admission, behaviour, shrinking and confirming, and per subject its behaviour
//! trials, how many of them were distinct (a trial with the same steps as an earlier one of
//! its subject is a repeat: waste to count), and the seconds of each phase of a trial
//! ([`PHASES`]). `harness bench explore` compares these between binaries or settings.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::trial::Trial;

/// The phases of a behaviour trial, in order: its namespace made (with the objects its fields
/// name), its steps sent (perturbations included), the subject settled, the twin settled
/// (when the two are compared), and the end judged (undo, events, oracles).
pub const PHASES: [&str; 5] = ["namespace", "steps", "settle", "twin", "judge"];

/// Where an exploration's time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    /// Seconds to bring the cell (and a baseline cell) up and read what it serves.
    pub bring_up: f64,
    /// Seconds of admission trials, their findings' shrinking and confirming included.
    pub admission: f64,
    /// Seconds from the first behaviour trial to the last one's end, their findings'
    /// shrinking and confirming included.
    pub behaviour: f64,
    /// Seconds spent shrinking findings (the candidate trials), of either mode.
    pub shrinking: f64,
    /// Seconds spent confirming shrunk findings, of either mode.
    pub confirming: f64,
    /// Behaviour trials by subject.
    pub subjects: BTreeMap<String, SubjectPace>,
    /// The trials seen, as their subject and steps: what makes a trial a repeat.
    #[serde(skip)]
    seen: BTreeSet<String>,
}

/// The behaviour trials of one subject.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubjectPace {
    /// Behaviour trials run (shrinking and confirming aside).
    pub trials: usize,
    /// Of them, those whose steps no earlier trial of the subject had.
    pub distinct: usize,
    /// Their seconds, summed (trials run side by side each count their own).
    pub seconds: f64,
    /// Their seconds by phase ([`PHASES`]), summed.
    pub phases: BTreeMap<String, f64>,
}

impl Pace {
    /// Counts behaviour trial `trial`, which took `seconds`, `phases` of them by phase.
    pub fn behaviour_trial(&mut self, trial: &Trial, seconds: f64, phases: &[(&str, Duration)]) {
        let key = serde_json::to_string(&(&trial.subject, &trial.steps)).unwrap_or_default();
        let new = self.seen.insert(key);
        let s = self.subjects.entry(trial.subject.clone()).or_default();
        s.trials += 1;
        s.distinct += usize::from(new);
        s.seconds += seconds;
        for (p, d) in phases {
            *s.phases.entry((*p).to_string()).or_default() += d.as_secs_f64();
        }
    }

    /// Behaviour trials run, every subject's.
    pub fn trials(&self) -> usize {
        self.subjects.values().map(|s| s.trials).sum()
    }

    /// Distinct behaviour trials, every subject's.
    pub fn distinct(&self) -> usize {
        self.subjects.values().map(|s| s.distinct).sum()
    }

    /// Distinct behaviour trials per minute of the behaviour phase (0 without one).
    pub fn distinct_per_minute(&self) -> f64 {
        match self.behaviour > 0.0 {
            true => self.distinct() as f64 * 60.0 / self.behaviour,
            false => 0.0,
        }
    }

    /// Seconds of phase `phase` summed over every subject's trials.
    pub fn phase(&self, phase: &str) -> f64 {
        self.subjects
            .values()
            .filter_map(|s| s.phases.get(phase))
            .sum()
    }
}

/// The phases of one trial as it runs: [`Phases::next`] closes the phase under way and names
/// the one starting.
#[derive(Debug)]
pub struct Phases {
    at: std::time::Instant,
    current: &'static str,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    /// Phase `first` starts now.
    pub fn start(first: &'static str) -> Self {
        Self {
            at: std::time::Instant::now(),
            current: first,
            done: vec![],
        }
    }

    /// The phase under way ends now and `next` starts.
    pub fn next(&mut self, next: &'static str) {
        let now = std::time::Instant::now();
        self.done.push((self.current, now - self.at));
        self.at = now;
        self.current = next;
    }

    /// Every phase, the one under way ending now.
    pub fn end(mut self) -> Vec<(&'static str, Duration)> {
        self.next("");
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::trial::{Mode, Step};

    fn trial(subject: &str, index: u64, replicas: i64) -> Trial {
        let set = [("spec.replicas".to_string(), serde_json::json!(replicas))].into();
        Trial {
            subject: subject.into(),
            mode: Mode::Behaviour,
            seed: 1,
            index,
            steps: vec![Step::Create { set }],
        }
    }

    #[test]
    fn a_trial_with_the_steps_of_an_earlier_one_of_its_subject_is_a_repeat() {
        let mut p = Pace {
            behaviour: 120.0,
            ..Pace::default()
        };
        let phases = [("settle", Duration::from_secs(3))];
        p.behaviour_trial(&trial("CloneSet", 0, 1), 5.0, &phases);
        // Another number, the same steps: a repeat.
        p.behaviour_trial(&trial("CloneSet", 1, 1), 5.0, &phases);
        p.behaviour_trial(&trial("CloneSet", 2, 2), 4.0, &phases);
        // The same steps on another subject: distinct.
        p.behaviour_trial(&trial("StatefulSet", 0, 1), 6.0, &phases);
        assert_eq!(p.trials(), 4);
        assert_eq!(p.distinct(), 3);
        assert_eq!(p.subjects["CloneSet"].distinct, 2);
        assert_eq!(p.subjects["CloneSet"].seconds, 14.0);
        assert_eq!(p.phase("settle"), 12.0);
        assert_eq!(p.distinct_per_minute(), 1.5);
        // What makes a repeat is not written; a read pace counts on from what it says.
        let read: Pace = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(read.distinct(), 3);
    }

    #[test]
    fn phases_follow_each_other_and_the_last_ends_with_the_trial() {
        let mut ph = Phases::start("namespace");
        ph.next("steps");
        ph.next("settle");
        let done = ph.end();
        let names: Vec<&str> = done.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["namespace", "steps", "settle"]);
    }
}
