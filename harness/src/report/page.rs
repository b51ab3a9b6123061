//! The single-file HTML report for a person: start with [`html`], which fills the page's
//! template (`report/page.html`: its markup, style and filter script) with a summary strip,
//! what needs a look first, a timeline, the filtered results table, field coverage and each
//! failure's diagnostics. [`esc`] is the one escape of every HTML page the harness writes.

use std::collections::{BTreeMap, BTreeSet};

use super::terminal::summary_line;
use super::{JsonReport, plot, timeline};
use crate::results::{Diagnostics, Outcome, ScenarioResult, Verdict};
use crate::run::Plan;
use crate::scenario::coverage::Coverage;

/// The page: its markup, style and the script of its filters, with a `{{name}}` for each
/// part [`html`] fills in.
const PAGE: &str = include_str!("page.html");

/// `template` with each `{{name}}` replaced by the value `parts` gives `name`, in one pass (a
/// value that holds `{{...}}` stays as it is); a name `parts` lacks is left in place.
fn fill(template: &str, parts: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + parts.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find("}}").and_then(|end| {
            parts
                .iter()
                .find(|(n, _)| *n == &after[..end])
                .map(|(_, v)| (end, v))
        }) {
            Some((end, value)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `s` as HTML text or a double-quoted attribute value: `&`, `<`, `>` and `"` escaped. The one
/// escape of every HTML page the harness writes.
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

/// The summary strip: one bar of the results by class, then the cell and the duration.
fn strip(r: &JsonReport) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for x in &r.results {
        *by.entry(class_of(&x.outcome)).or_default() += 1;
    }
    let parts: String = CLASSES
        .iter()
        .filter_map(|(c, name)| {
            let n = *by.get(c)?;
            Some(format!(
                "<span class=\"seg {c}\" style=\"flex:{n}\" title=\"{n} {name}\">{n} {name}</span>",
            ))
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
    format!(
        "<div class=\"strip\"><div class=\"bar\">{parts}</div><p>{} results · {took} · {}</p></div>\n",
        r.results.len(),
        esc(&cell)
    )
}

/// What needs a look first: the failed and flaky results, each linked to its details.
fn attention(r: &JsonReport) -> String {
    let items: String = r
        .results
        .iter()
        .enumerate()
        .filter(|(_, x)| matches!(class_of(&x.outcome), "fail" | "flaky"))
        .map(|(i, x)| {
            let first = x
                .failure
                .as_deref()
                .or_else(|| x.failed_tries.first().and_then(|t| t.failure.as_deref()))
                .and_then(|f| f.lines().next())
                .unwrap_or_default();
            format!(
                "<li class=\"{}\"><a href=\"#d{i}\">{}</a> <span class=\"res\">{}</span> {}</li>",
                class_of(&x.outcome),
                esc(&x.scenario),
                x.outcome.label(),
                esc(&first.chars().take(200).collect::<String>())
            )
        })
        .collect();
    if items.is_empty() {
        return String::new();
    }
    format!("<h2>Needs a look</h2><ul id=\"attention\">{items}</ul>\n")
}

/// The filters over the results table: by result, suite and text. Hidden until the script
/// that runs them shows them: the page reads the same without it.
fn filters(r: &JsonReport) -> String {
    let suites: BTreeSet<&str> = r.results.iter().map(|x| x.suite.as_str()).collect();
    let options: String = suites
        .iter()
        .map(|s| format!("<option>{}</option>", esc(s)))
        .collect();
    let boxes: String = CLASSES
        .iter()
        .map(|(c, name)| {
            format!("<label><input type=\"checkbox\" value=\"{c}\" checked> {name}</label> ")
        })
        .collect();
    format!(
        "<div id=\"filters\" hidden>{boxes}<select><option value=\"\">every suite</option>{options}</select> <input type=\"search\" placeholder=\"search scenarios\"> <span id=\"shown\"></span></div>\n"
    )
}

/// The single-file HTML report.
pub fn html(r: &JsonReport) -> String {
    let mut rows = String::new();
    let mut details = String::new();
    for (i, x) in r.results.iter().enumerate() {
        let class = class_of(&x.outcome);
        let note = match &x.outcome {
            Outcome::Judged(Verdict::ExpectedFail { bug })
            | Outcome::Judged(Verdict::UnexpectedPass { bug }) => bug.clone(),
            Outcome::Skipped { reason } | Outcome::InfraError { reason } => reason.clone(),
            Outcome::Flaky { .. } => format!("passed on try {} of {}", x.tries(), x.tries()),
            Outcome::Judged(Verdict::Pass | Verdict::Fail) => String::new(),
        };
        // The failed tries first, then the last try's failure.
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
        let link = if failures.is_empty() {
            String::new()
        } else {
            format!("<a href=\"#d{i}\">details</a>")
        };
        rows.push_str(&format!(
            "<tr class=\"{class}\" data-result=\"{class}\" data-suite=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"res\">{}</td><td>{:.1}</td><td>{}</td><td>{link}</td></tr>\n",
            esc(&x.suite),
            esc(&x.suite),
            esc(&x.scenario),
            esc(&x.profile),
            x.outcome.label(),
            x.seconds,
            esc(&note)
        ));
        for (n, (title, f, d)) in failures.iter().enumerate() {
            let id = if n == 0 {
                format!(" id=\"d{i}\"")
            } else {
                String::new()
            };
            // The named steps of the last try, the failed one marked, and how to run it again.
            let last = n + 1 == failures.len();
            let steps = if last && !x.steps.is_empty() {
                steps_html(&x.steps)
            } else {
                String::new()
            };
            let again = match (last, r.plan.as_ref()) {
                (true, Some(p)) => rerun_html(p, x),
                _ => String::new(),
            };
            let plots: String = d.plots.iter().map(plot::svg).collect();
            details.push_str(&format!(
                "<section{id} class=\"diag\"><h3>{} — {}</h3><h4>Failure</h4><pre class=\"failure\">{}</pre>{plots}{steps}{again}<h4>Events</h4><pre>{}</pre><h4>Objects</h4><details><summary>YAML</summary><pre>{}</pre></details><h4>Controller log (scenario window)</h4><details><summary>{} lines</summary><pre>{}</pre></details>{}</section>\n",
                esc(&x.scenario),
                esc(title),
                esc(f),
                esc(&d.events.join("\n")),
                esc(&d.objects),
                d.manager_log.lines().count(),
                esc(&d.manager_log),
                log_links(r.cluster_logs.get(&x.profile))
            ));
        }
    }
    let counts = summary_line(&r.counts);
    let timeline = match r.timeline.is_empty() {
        true => String::new(),
        false => format!(
            "<h2>Timeline</h2><p>Each cluster's bring-up and each scenario on its cluster, by \
             result; hover a bar for its name and times.</p>{}",
            timeline::svg(&r.timeline)
        ),
    };
    let (id, strip, attention, filters) = (esc(&r.run_id), strip(r), attention(r), filters(r));
    let coverage = r.coverage.as_ref().map(coverage_html).unwrap_or_default();
    fill(
        PAGE,
        &[
            ("id", &id),
            ("strip", &strip),
            ("counts", &counts),
            ("attention", &attention),
            ("timeline", &timeline),
            ("filters", &filters),
            ("rows", &rows),
            ("coverage", &coverage),
            ("details", &details),
        ],
    )
}

/// The coverage section of the HTML report: a table per kind with its uncovered fields and
/// the template fields set.
fn coverage_html(c: &Coverage) -> String {
    let list = |items: &mut dyn Iterator<Item = &String>| -> String {
        items
            .map(|f| format!("<li><code>{}</code></li>", esc(f)))
            .collect()
    };
    let mut rows = String::new();
    for k in &c.kinds {
        let templates: String = k
            .template_fields
            .iter()
            .map(|(t, fields)| {
                format!(
                    "<details><summary>{} fields set in <code>{}</code></summary><ul>{}</ul></details>",
                    fields.len(),
                    esc(t),
                    list(&mut fields.iter())
                )
            })
            .collect();
        rows.push_str(&format!(
            "<tr class=\"cov\" data-kind=\"{kind}\"><td>{group}/{kind}</td><td>{version}</td><td>{covered}/{total}</td><td><span class=\"cbar\"><span style=\"width:{pct:.0}%\"></span></span> {pct:.0}%</td><td><details><summary>{n} uncovered</summary><ul class=\"uncovered\">{uncovered}</ul></details></td><td>{templates}</td></tr>\n",
            group = esc(&k.group),
            kind = esc(&k.kind),
            version = esc(&k.version),
            covered = k.covered.len(),
            total = k.total(),
            pct = k.percent(),
            n = k.uncovered.len(),
            uncovered = list(&mut k.uncovered.iter()),
        ));
    }
    format!(
        "<h2>API field coverage</h2><p>Own spec fields of each API of the controller under test set by the scenarios (template internals listed apart).</p>\n<table id=\"coverage\"><thead><tr><th>kind</th><th>version</th><th>fields</th><th>covered</th><th>uncovered fields</th><th>template fields set</th></tr></thead><tbody>\n{rows}</tbody></table>\n"
    )
}

/// A scenario's named steps as an ordered list: each with when it started and how long it ran
/// (or that it never ended), the failed ones marked.
fn steps_html(steps: &[crate::scenario::StepRecord]) -> String {
    let items: String = steps
        .iter()
        .map(|s| {
            let (class, ran) = match (s.failed, s.seconds) {
                (true, Some(t)) => ("failed", format!("failed after {t:.1} s")),
                (false, Some(t)) => ("ok", format!("{t:.1} s")),
                (_, None) => ("failed", "never ended".to_string()),
            };
            format!(
                "<li class=\"{class}\">{} <span class=\"when\">at {:.1} s, {ran}</span></li>",
                esc(&s.name),
                s.start
            )
        })
        .collect();
    format!("<h4>Steps</h4><ol class=\"steps\">{items}</ol>")
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

fn rerun_html(plan: &Plan, x: &ScenarioResult) -> String {
    rerun_command(plan, x)
        .map(|c| {
            format!(
                "<h4>Run it again</h4><pre class=\"again\">{}</pre>",
                esc(&c)
            )
        })
        .unwrap_or_default()
}

/// The "Cluster logs" list of a failure: links to its cluster's exported log files.
fn log_links(files: Option<&Vec<String>>) -> String {
    let Some(files) = files.filter(|f| !f.is_empty()) else {
        return String::new();
    };
    let items: String = files
        .iter()
        .map(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            format!("<li><a href=\"{}\">{}</a></li>", esc(f), esc(name))
        })
        .collect();
    format!("<h4>Cluster logs</h4><ul class=\"cluster-logs\">{items}</ul>")
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
        assert!(h.contains("timed out &lt;first&gt;"));
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
            },
            crate::scenario::StepRecord {
                name: "lower the partition".into(),
                start: 2.5,
                seconds: Some(12.4),
                failed: true,
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
        assert!(h.contains("x &lt;y&gt;"));
        assert!(h.contains("href=\"#d0\""));
        assert!(h.contains("Warning FailedCreate &lt;boom&gt;"));
        // The failed scenario's steps, the failed one marked.
        assert!(
            h.contains(
                "<li class=\"ok\">make &lt;it&gt; <span class=\"when\">at 0.5 s, 2.0 s</span></li>"
            ),
            "{h}"
        );
        assert!(h.contains("<li class=\"failed\">lower the partition <span class=\"when\">at 2.5 s, failed after 12.4 s</span></li>"));
    }

    #[test]
    fn the_template_is_filled_once_and_every_part_of_the_page_is_given() {
        assert_eq!(
            fill("<p>{{a}} {{b}} {{c}}</p>", &[("a", "{{b}}"), ("b", "x")]),
            "<p>{{b}} x {{c}}</p>",
            "a value is not read again; an unknown name stays"
        );
        let page = html(&JsonReport {
            run_id: "r".into(),
            plan: None,
            finished: false,
            seconds: None,
            counts: BTreeMap::new(),
            results: vec![],
            cluster_logs: BTreeMap::new(),
            clusters: BTreeMap::new(),
            coverage: None,
            timeline: vec![],
        });
        assert!(!page.contains("{{"), "{page}");
        assert!(page.starts_with(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>harness r</title>"
        ));
        assert!(page.ends_with("})();</script>\n</body></html>\n"), "{page}");
    }
}
