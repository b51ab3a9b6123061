//! The single-file HTML report for a person: start with [`html`], which renders the page's
//! template (`report/page.html`, an askama template: its markup, style and filter script) with
//! a summary strip, what needs a look first, a timeline, the filtered results table, field
//! coverage and each failure's diagnostics. The template escapes every value it is given;
//! [`esc`] is the escape of the SVG drawn in code (timeline, plots).

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;

use super::terminal::summary_line;
use super::{JsonReport, plot, timeline};
use crate::results::{Diagnostics, Outcome, ScenarioResult, Verdict};
use crate::run::Plan;
use crate::scenario::coverage::Coverage;

/// `s` as HTML text or a double-quoted attribute value: `&`, `<`, `>` and `"` escaped. The
/// escape of markup drawn in code (the SVG of the timeline and the plots); templates escape
/// their own values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The class of a result on the page: `pass`, `xfail`, `flaky`, `skip` or `fail` (a failure,
/// an unexpected pass, an infrastructure error).
pub fn class_of(o: &Outcome) -> &'static str {
    match o {
        Outcome::Judged(Verdict::Pass) => "pass",
        Outcome::Judged(Verdict::ExpectedFail { .. }) => "xfail",
        Outcome::Flaky { .. } => "flaky",
        Outcome::Skipped { .. } => "skip",
        Outcome::Judged(Verdict::Fail | Verdict::UnexpectedPass { .. })
        | Outcome::InfraError { .. } => "fail",
    }
}

/// The classes of results in the order the page shows them: what needs a look first.
const CLASSES: [(&str, &str); 5] = [
    ("fail", "failed"),
    ("flaky", "flaky"),
    ("xfail", "expected-fail"),
    ("pass", "passed"),
    ("skip", "skipped"),
];

/// The page (`report/page.html`): every value it shows, as text the template escapes, or as
/// SVG drawn in code (`timeline`, a detail's `plots`).
#[derive(Template)]
#[template(path = "report/page.html")]
struct Page<'a> {
    id: &'a str,
    strip: Strip,
    counts: String,
    attention: Vec<Attention<'a>>,
    timeline: Option<String>,
    classes: &'static [(&'static str, &'static str)],
    suites: BTreeSet<&'a str>,
    rows: Vec<Row<'a>>,
    coverage: Option<Vec<KindCoverage<'a>>>,
    details: Vec<Detail<'a>>,
}

/// The summary strip: one bar of the results by class, then the count, the duration and the
/// cell.
struct Strip {
    segments: Vec<Segment>,
    results: usize,
    took: String,
    cell: String,
}

/// One class's part of the strip's bar.
struct Segment {
    class: &'static str,
    name: &'static str,
    count: usize,
}

/// A failed or flaky result in "Needs a look", linked to its details.
struct Attention<'a> {
    index: usize,
    class: &'static str,
    scenario: &'a str,
    label: &'static str,
    first: String,
}

/// A row of the results table.
struct Row<'a> {
    class: &'static str,
    suite: &'a str,
    scenario: &'a str,
    profile: &'a str,
    label: &'static str,
    seconds: String,
    note: String,
    details: Option<usize>,
}

/// One failure's diagnostics: a failed try's, or the last try's.
struct Detail<'a> {
    anchor: Option<usize>,
    scenario: &'a str,
    title: String,
    failure: &'a str,
    plots: Vec<String>,
    steps: Vec<StepLine<'a>>,
    again: Option<String>,
    events: String,
    objects: String,
    log_lines: usize,
    log: String,
    cluster_logs: Vec<(&'a str, &'a str)>,
}

/// A named step of a failure's last try: when it started, how long it ran or that it never
/// ended, failed ones marked.
struct StepLine<'a> {
    class: &'static str,
    name: &'a str,
    start: String,
    ran: String,
}

/// A kind's row of the coverage table.
struct KindCoverage<'a> {
    group: &'a str,
    kind: &'a str,
    version: &'a str,
    covered: usize,
    total: usize,
    percent: String,
    uncovered: &'a BTreeSet<String>,
    templates: Vec<(&'a str, &'a BTreeSet<String>)>,
}

/// The summary strip of `r`.
fn strip(r: &JsonReport) -> Strip {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for x in &r.results {
        *by.entry(class_of(&x.outcome)).or_default() += 1;
    }
    let segments = CLASSES
        .iter()
        .filter_map(|(class, name)| {
            Some(Segment {
                class,
                name,
                count: *by.get(class)?,
            })
        })
        .collect();
    let cell = r
        .plan
        .as_ref()
        .map(|p| {
            format!(
                "Kubernetes {} · {} · {} cluster(s)",
                p.kubernetes,
                p.controller,
                p.clusters.len()
            )
        })
        .unwrap_or_default();
    let took = match (r.finished, r.seconds) {
        (true, Some(s)) => format!("{s:.0} s"),
        _ => "in progress".into(),
    };
    Strip {
        segments,
        results: r.results.len(),
        took,
        cell,
    }
}

/// What needs a look first: the failed and flaky results.
fn attention(r: &JsonReport) -> Vec<Attention<'_>> {
    r.results
        .iter()
        .enumerate()
        .filter(|(_, x)| matches!(class_of(&x.outcome), "fail" | "flaky"))
        .map(|(index, x)| {
            let first = x
                .failure
                .as_deref()
                .or_else(|| x.failed_tries.first().and_then(|t| t.failure.as_deref()))
                .and_then(|f| f.lines().next())
                .unwrap_or_default();
            Attention {
                index,
                class: class_of(&x.outcome),
                scenario: &x.scenario,
                label: x.outcome.label(),
                first: first.chars().take(200).collect(),
            }
        })
        .collect()
}

/// The note of a result in the table: its known bug, why it was skipped or not judged, on
/// which try a flaky one passed, or which way a pass went.
fn note(x: &ScenarioResult) -> String {
    match &x.outcome {
        Outcome::Judged(Verdict::ExpectedFail { bug })
        | Outcome::Judged(Verdict::UnexpectedPass { bug }) => bug.clone(),
        Outcome::Skipped { reason } | Outcome::InfraError { reason } => reason.clone(),
        Outcome::Flaky { .. } => format!("passed on try {} of {}", x.tries(), x.tries()),
        Outcome::Judged(Verdict::Pass) => crate::scenario::steps::Steps::ways(&x.steps).join("; "),
        Outcome::Judged(Verdict::Fail) => String::new(),
    }
}

/// The failures of result `x` (the `i`th), the failed tries first, then the last try's.
fn details<'a>(r: &'a JsonReport, i: usize, x: &'a ScenarioResult) -> Vec<Detail<'a>> {
    let mut failures: Vec<(String, &str, Diagnostics)> = x
        .failed_tries
        .iter()
        .enumerate()
        .map(|(n, t)| {
            (
                format!(
                    "try {} of {}: {}",
                    n + 1,
                    x.tries(),
                    Outcome::Judged(t.verdict.clone()).label()
                ),
                t.failure.as_deref().unwrap_or("(no failure text)"),
                t.diagnostics.clone().unwrap_or_default(),
            )
        })
        .collect();
    if let Some(f) = &x.failure {
        failures.push((
            x.outcome.label().to_string(),
            f,
            x.diagnostics.clone().unwrap_or_default(),
        ));
    }
    let cluster_logs: Vec<(&str, &str)> = r
        .cluster_logs
        .get(&x.profile)
        .map(|files| {
            files
                .iter()
                .map(|f| (f.as_str(), f.rsplit('/').next().unwrap_or(f)))
                .collect()
        })
        .unwrap_or_default();
    let count = failures.len();
    failures
        .into_iter()
        .enumerate()
        .map(|(n, (title, failure, d))| {
            // The named steps of the last try, the failed one marked, and how to run it again.
            let last = n + 1 == count;
            Detail {
                anchor: (n == 0).then_some(i),
                scenario: &x.scenario,
                title,
                failure,
                plots: d.plots.iter().map(plot::svg).collect(),
                steps: if last { steps(&x.steps) } else { vec![] },
                again: r
                    .plan
                    .as_ref()
                    .filter(|_| last)
                    .and_then(|p| rerun_command(p, x)),
                events: d.events.join("\n"),
                log_lines: d.manager_log.lines().count(),
                objects: d.objects,
                log: d.manager_log,
                cluster_logs: cluster_logs.clone(),
            }
        })
        .collect()
}

/// The single-file HTML report.
pub fn html(r: &JsonReport) -> String {
    let mut rows = vec![];
    let mut all_details = vec![];
    for (i, x) in r.results.iter().enumerate() {
        let class = class_of(&x.outcome);
        let details = details(r, i, x);
        rows.push(Row {
            class,
            suite: &x.suite,
            scenario: &x.scenario,
            profile: &x.profile,
            label: x.outcome.label(),
            seconds: format!("{:.1}", x.seconds),
            note: note(x),
            details: (!details.is_empty()).then_some(i),
        });
        all_details.extend(details);
    }
    let page = Page {
        id: &r.run_id,
        strip: strip(r),
        counts: summary_line(&r.counts),
        attention: attention(r),
        timeline: (!r.timeline.is_empty()).then(|| timeline::svg(&r.timeline)),
        classes: &CLASSES,
        suites: r.results.iter().map(|x| x.suite.as_str()).collect(),
        rows,
        coverage: r.coverage.as_ref().map(coverage),
        details: all_details,
    };
    let mut out = page.render().unwrap_or_else(|e| {
        format!("<!doctype html>\n<p>the report page failed to render: {e}</p>")
    });
    out.push('\n');
    out
}

/// The coverage table: a row per kind with its uncovered fields and the template fields set.
fn coverage(c: &Coverage) -> Vec<KindCoverage<'_>> {
    c.kinds
        .iter()
        .map(|k| KindCoverage {
            group: &k.group,
            kind: &k.kind,
            version: &k.version,
            covered: k.covered.len(),
            total: k.total(),
            percent: format!("{:.0}", k.percent()),
            uncovered: &k.uncovered,
            templates: k
                .template_fields
                .iter()
                .map(|(t, fields)| (t.as_str(), fields))
                .collect(),
        })
        .collect()
}

/// A scenario's named steps: each with when it started and how long it ran (or that it never
/// ended), the failed ones marked.
fn steps(steps: &[crate::scenario::StepRecord]) -> Vec<StepLine<'_>> {
    steps
        .iter()
        .map(|s| {
            let (class, ran) = match (s.failed, s.seconds) {
                (true, Some(t)) => ("failed", format!("failed after {t:.1} s")),
                (false, Some(t)) => ("ok", format!("{t:.1} s")),
                (_, None) => ("failed", "never ended".to_string()),
            };
            StepLine {
                class,
                name: &s.name,
                start: format!("{:.1}", s.start),
                ran,
            }
        })
        .collect()
}

/// The command that runs scenario `x` alone again on the cell of `plan` (none for a spec of the
/// controller's own suite, which its suite's focus selects).
pub fn rerun_command(plan: &Plan, x: &ScenarioResult) -> Option<String> {
    if x.suite == crate::run::upstream::SUITE {
        return None;
    }
    let quote = |s: &str| shlex::try_quote(s).map(|q| q.into_owned()).ok();
    let c = &plan.controller;
    let controller = match &c.checkout {
        Some(dir) => format!("{}@{}", c.kind.name(), dir.display()),
        None => c.to_string(),
    };
    Some(format!(
        "harness run --k8s {} --controller {} --focus {}",
        plan.kubernetes,
        quote(&controller)?,
        quote(&x.scenario)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{flaky, result};
    use crate::report::terminal::counts;

    #[test]
    fn a_flaky_result_is_counted_shown_and_its_failed_tries_detailed() {
        let rs = vec![flaky("a")];
        let c = counts(rs.iter());
        assert_eq!(c.get("FLAKY"), Some(&1));
        assert!(summary_line(&c).contains("1 flaky"));
        let h = html(&JsonReport {
            run_id: "r".into(),
            plan: None,
            finished: true,
            seconds: Some(1.0),
            counts: c,
            results: rs,
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            coverage: None,
            timeline: vec![],
        });
        assert!(
            h.contains("<tr class=\"flaky\" data-result=\"flaky\""),
            "{h}"
        );
        assert!(h.contains("passed on try 2 of 2"));
        assert!(h.contains("try 1 of 2: FAIL"));
        assert!(h.contains("timed out &#60;first&#62;"));
        assert!(h.contains("href=\"#d0\""));
    }

    #[test]
    fn html_escapes_and_links_failures_to_diagnostics() {
        let mut failed = result("b", Outcome::Judged(Verdict::Fail), Some("x <y>"));
        failed.steps = vec![
            crate::scenario::StepRecord {
                name: "make <it>".into(),
                start: 0.5,
                seconds: Some(2.0),
                failed: false,
                way: None,
            },
            crate::scenario::StepRecord {
                name: "lower the partition".into(),
                start: 2.5,
                seconds: Some(12.4),
                failed: true,
                way: None,
            },
        ];
        let rs = vec![failed];
        let h = html(&JsonReport {
            run_id: "r".into(),
            plan: None,
            finished: true,
            seconds: Some(1.0),
            counts: counts(rs.iter()),
            results: rs,
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            coverage: None,
            timeline: vec![],
        });
        assert!(h.contains("x &#60;y&#62;"));
        assert!(h.contains("href=\"#d0\""));
        assert!(h.contains("Warning FailedCreate &#60;boom&#62;"));
        // The failed scenario's steps, the failed one marked.
        assert!(
            h.contains(
                "<li class=\"ok\">make &#60;it&#62; <span class=\"when\">at 0.5 s, 2.0 s</span></li>"
            ),
            "{h}"
        );
        assert!(h.contains("<li class=\"failed\">lower the partition <span class=\"when\">at 2.5 s, failed after 12.4 s</span></li>"));
    }

    #[test]
    fn the_page_renders_from_its_template_with_every_part_given() {
        let mut passed = result("c", Outcome::Judged(Verdict::Pass), None);
        passed.steps = vec![crate::scenario::StepRecord {
            name: "refused <or> admitted".into(),
            start: 0.0,
            seconds: Some(1.0),
            failed: false,
            way: Some("refused".into()),
        }];
        let page = html(&JsonReport {
            run_id: "r".into(),
            plan: None,
            finished: false,
            seconds: None,
            counts: BTreeMap::new(),
            results: vec![passed],
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            coverage: None,
            timeline: vec![],
        });
        assert!(!page.contains("{{") && !page.contains("{%"), "{page}");
        assert!(page.starts_with(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>harness r</title>"
        ));
        assert!(page.ends_with("})();</script>\n</body></html>\n"), "{page}");
        // A pass that went one of two ways says which, in its note.
        assert!(
            page.contains("<td>refused &#60;or&#62; admitted: refused</td>"),
            "{page}"
        );
        assert!(page.contains("in progress"), "{page}");
    }
}
