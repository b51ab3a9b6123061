//! The terminal's reporter: [`Terminal`], progress lines while running and a summary table at
//! the end, on stderr.

use std::collections::BTreeMap;

use super::{Key, coverage_of, coverage_table, key};
use crate::results::{Outcome, ScenarioResult, Verdict};
use crate::run::{Event, Reporter};
use crate::scenario::coverage::ApiFields;

/// Progress lines while running and a summary table at the end, on stderr.
#[derive(Debug, Default)]
pub struct Terminal {
    results: BTreeMap<Key, ScenarioResult>,
    api_fields: Option<Vec<ApiFields>>,
    /// Upstream suites' tables by area, by cluster.
    areas: Vec<(String, String)>,
}

impl Reporter for Terminal {
    fn event(&mut self, e: &Event) {
        match e {
            Event::RunStarted { run_id, plan } => {
                eprintln!(
                    "run {run_id}: Kubernetes {}, {}, {} cluster(s), {} skipped",
                    plan.kubernetes,
                    plan.controller,
                    plan.clusters.len(),
                    plan.skipped.len()
                );
            }
            Event::ClusterStarting { profile } => eprintln!("cluster {profile}: starting"),
            Event::ClusterReady { profile, seconds } => {
                eprintln!("cluster {profile}: ready with the controller in {seconds:.1}s")
            }
            Event::ScenarioStarted { .. } => {}
            Event::ScenarioRetrying {
                scenario,
                next_try,
                reason,
                ..
            } => eprintln!("  {:<16} {scenario} (try {next_try}): {reason}", "retry"),
            Event::ApiFields(fields) => self.api_fields = Some(fields.clone()),
            Event::ClusterLogs { profile, dir } => {
                eprintln!("cluster {profile}: logs kept in {}", dir.display())
            }
            Event::UpstreamAreas { profile, table } => {
                self.areas.push((profile.clone(), table.clone()))
            }
            Event::ScenarioFinished(r) => {
                eprintln!(
                    "  {:<16} {} ({:.1}s)",
                    r.outcome.label(),
                    r.scenario,
                    r.seconds
                );
                // What went wrong, for a failure and for an infrastructure error alike: a
                // cell that could not start says why where the run is watched.
                let why = match &r.outcome {
                    Outcome::Judged(Verdict::Fail) => r.failure.as_deref(),
                    Outcome::InfraError { reason } => Some(reason.as_str()),
                    _ => None,
                };
                for l in why.into_iter().flat_map(|f| f.lines().take(6)) {
                    eprintln!("      {l}");
                }
                self.results.insert(key(r), r.clone());
            }
            Event::RunFinished { seconds } => {
                eprintln!("\n{:<16} {:<64} {:>8}", "RESULT", "SCENARIO", "SECONDS");
                for r in self.results.values() {
                    let note = match &r.outcome {
                        Outcome::Judged(Verdict::ExpectedFail { bug })
                        | Outcome::Judged(Verdict::UnexpectedPass { bug }) => format!(" [{bug}]"),
                        Outcome::Skipped { reason } => format!(" [{reason}]"),
                        Outcome::Flaky { .. } => {
                            format!(" [passed on try {} of {}]", r.tries(), r.tries())
                        }
                        Outcome::Judged(Verdict::Pass) => {
                            let ways = crate::scenario::steps::Steps::ways(&r.steps);
                            match ways.is_empty() {
                                true => String::new(),
                                false => format!(" [{}]", ways.join("; ")),
                            }
                        }
                        Outcome::Judged(Verdict::Fail) | Outcome::InfraError { .. } => {
                            String::new()
                        }
                    };
                    eprintln!(
                        "{:<16} {:<64} {:>8.1}{note}",
                        r.outcome.label(),
                        r.scenario,
                        r.seconds
                    );
                }
                for (profile, table) in &self.areas {
                    eprintln!(
                        "\nUPSTREAM SPECS BY AREA (cluster {profile})\n{}",
                        table.trim_end()
                    );
                }
                let rates = failure_rates(self.results.values());
                if !rates.is_empty() {
                    eprintln!("\n{}", rates.trim_end());
                }
                if let Some(fields) = &self.api_fields {
                    let c = coverage_of(fields, self.results.values());
                    eprintln!("\n{}", coverage_table(&c).trim_end());
                }
                let counts = counts(self.results.values());
                eprintln!("\n{} in {seconds:.0}s", summary_line(&counts));
            }
        }
    }
}

pub(super) fn counts<'a>(
    rs: impl Iterator<Item = &'a ScenarioResult>,
) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::new();
    for r in rs {
        *c.entry(r.outcome.label()).or_insert(0) += 1;
    }
    c
}

pub(super) fn summary_line(c: &BTreeMap<&'static str, usize>) -> String {
    let get = |k| c.get(k).copied().unwrap_or(0);
    format!(
        "{} passed, {} failed, {} flaky, {} expected-fail, {} unexpected-pass, {} skipped, {} \
         infra-error",
        get("pass"),
        get("FAIL"),
        get("FLAKY"),
        get("expected-fail"),
        get("UNEXPECTED-PASS"),
        get("skipped"),
        get("INFRA-ERROR")
    )
}

/// How often each scenario failed, when some ran more than once (`--repeat`): one line per
/// scenario that ran, failures counted per try (a flaky result counts its failed tries);
/// empty when every scenario ran once.
pub fn failure_rates<'a>(results: impl Iterator<Item = &'a ScenarioResult>) -> String {
    let mut by: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut repeated = false;
    for r in results {
        if matches!(
            r.outcome,
            Outcome::Skipped { .. } | Outcome::InfraError { .. }
        ) {
            continue;
        }
        repeated |= r.attempt > 1;
        let e = by.entry(r.scenario.as_str()).or_default();
        e.0 += r.tries();
        e.1 += r.failed_tries.len() + usize::from(r.outcome.fails_run(false));
        e.2 += usize::from(matches!(r.outcome, Outcome::Flaky { .. }));
    }
    if !repeated {
        return String::new();
    }
    let mut out = format!(
        "{:<64} {:>5} {:>7} {:>6} {:>8}\n",
        "FAILURE RATE (per try)", "TRIES", "FAILED", "FLAKY", "RATE"
    );
    for (scenario, (tries, failed, flaky)) in by {
        out.push_str(&format!(
            "{scenario:<64} {tries:>5} {failed:>7} {flaky:>6} {:>7.0}%\n",
            100.0 * failed as f64 / tries.max(1) as f64
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{flaky, result};

    #[test]
    fn failure_rates_appear_only_when_a_scenario_ran_more_than_once() {
        let once = [result("a", Outcome::Judged(Verdict::Pass), None)];
        assert_eq!(failure_rates(once.iter()), "");
        let mut second = flaky("a");
        second.attempt = 2;
        let mut third = result("a", Outcome::Judged(Verdict::Fail), Some("x"));
        third.attempt = 3;
        let rs = [
            result("a", Outcome::Judged(Verdict::Pass), None),
            second,
            third,
        ];
        let table = failure_rates(rs.iter());
        let line = table.lines().nth(1).unwrap();
        // Four tries: a pass, a failed try then a pass, a failure.
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["a", "4", "2", "1", "50%"]
        );
    }
}
