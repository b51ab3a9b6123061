//! Test fixtures of the rediscovery benchmark, shared by its files' unit tests and `explain`'s:
//! a finding, a reported finding, a request and a small list of known bugs. Test code only.

#![cfg(test)]

use std::time::Duration;

use super::{List, Request};
use crate::explore::Reported;
use crate::explore::oracle::{Finding, Oracle};
use crate::explore::trial::{Mode, Trial};

pub(crate) fn finding(oracle: Oracle, subject: &str, key: &str) -> Finding {
    Finding {
        oracle,
        subject: subject.into(),
        key: key.into(),
        observed: "o".into(),
        expected: "e".into(),
    }
}

pub(crate) fn reported(f: Finding, first_seen: f64, stable: bool) -> Reported {
    let trial = Trial {
        subject: f.subject.clone(),
        mode: Mode::Admission,
        seed: 7,
        index: 0,
        steps: vec![],
    };
    Reported {
        finding: f,
        original: trial.clone(),
        trial,
        reproduced: if stable { 3 } else { 1 },
        confirm_runs: 3,
        stable,
        first_seen,
        dir: "findings/1".into(),
        controller: "openkruise@v1.7.0".into(),
        kubernetes: "1.32.5".into(),
        baseline: None,
        gates: Default::default(),
        also: vec![],
    }
}

pub(super) fn request(releases: &[&str]) -> Request {
    Request {
        list: None,
        budget: Duration::from_secs(1800),
        seed: 7,
        releases: releases.iter().map(|r| r.to_string()).collect(),
        out: None,
        dry_run: true,
        explore_args: vec![],
    }
}

pub(super) fn small() -> List {
    let text = "controller: openkruise\nreleases: [v1.5.5, v1.6.0, v1.7.0, v1.8.0, v1.9.1]\nbugs:\n\
        - id: a\n  bad: v1.7.0\n  fixed: v1.8.0\n  finding: {oracle: O4, kind: CloneSet, key: \"admits * spec.x\"}\n\
        - id: b\n  bad: v1.5.5\n  fixed: v1.7.0\n  benchmark: B\n  finding: {oracle: O1, kind: UnitedDeployment, key: drops}\n\
        - id: c\n  bad: v1.9.1\n  finding: {oracle: O6, kind: AdvancedDaemonSet, key: controller denied}\n";
    List::parse(text, "small").unwrap()
}
