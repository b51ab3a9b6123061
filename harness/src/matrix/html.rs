//! The matrix grid as a self-contained HTML page: [`matrix_html`].

use std::collections::BTreeMap;

use super::MatrixReport;
use crate::controller::ControllerRef;
use crate::report::{class_of, esc};
use crate::results::Outcome;
use crate::results::Verdict;
use crate::toolchain::KubeVersion;

/// The grid: Kubernetes versions down, releases across, each cell coloured by its worst
/// result, naming the known bugs seen there and linking to its own report.
pub fn matrix_html(r: &MatrixReport) -> String {
    let mut versions: Vec<KubeVersion> = r.cells.iter().map(|c| c.kubernetes).collect();
    versions.sort();
    versions.dedup();
    let mut controllers: Vec<ControllerRef> = vec![];
    for c in &r.cells {
        if !controllers.contains(&c.controller) {
            controllers.push(c.controller.clone());
        }
    }
    let mut grid = String::from("<tr><th>Kubernetes \\ release</th>");
    for c in &controllers {
        grid.push_str(&format!("<th>{}</th>", esc(&c.to_string())));
    }
    grid.push_str("</tr>\n");
    for v in &versions {
        grid.push_str(&format!("<tr><th>{v}</th>"));
        for c in &controllers {
            match r
                .cells
                .iter()
                .find(|x| x.kubernetes == *v && &x.controller == c)
            {
                Some(cell) => {
                    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                    let mut classes: BTreeMap<&str, usize> = BTreeMap::new();
                    let mut bugs: Vec<String> = vec![];
                    for x in &cell.results {
                        *counts.entry(x.outcome.label()).or_default() += 1;
                        *classes.entry(class_of(&x.outcome)).or_default() += 1;
                        if let Outcome::Judged(Verdict::ExpectedFail { bug }) = &x.outcome {
                            bugs.push(format!("{} ({})", bug, x.scenario));
                        }
                    }
                    let class = match cell.worst.as_str() {
                        "pass" => "pass",
                        "expected-fail" => "xfail",
                        "FLAKY" => "flaky",
                        "skipped" | "empty" => "skip",
                        "INFRA-ERROR" => "infra",
                        _ => "fail",
                    };
                    // The cell's results by class as one bar: how much of it is what.
                    let bar: String = ["fail", "flaky", "xfail", "pass", "skip"]
                        .iter()
                        .filter_map(|c| {
                            let n = classes.get(c)?;
                            Some(format!(
                                "<span class=\"seg {c}\" style=\"flex:{n}\"></span>"
                            ))
                        })
                        .collect();
                    // The cell's exploration (`--explore`): its findings, linked, not judged.
                    let explored = cell.exploration.as_ref().map_or(String::new(), |e| {
                        format!(
                            "<div class=\"explored\"><a href=\"{}/report.html\">explored: {} trials, {} finding(s)</a><ul>{}</ul></div>",
                            esc(&e.dir.display().to_string()),
                            e.trials,
                            e.findings.len(),
                            e.findings.iter().map(|f| format!("<li>{}</li>", esc(f))).collect::<String>()
                        )
                    });
                    grid.push_str(&format!(
                        "<td class=\"{class}\"><a href=\"{}/report.html\">{}</a><div class=\"mini\">{bar}</div><small>{}</small><ul>{}</ul>{explored}</td>",
                        esc(&cell.dir),
                        esc(&cell.worst),
                        esc(&counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")),
                        bugs.iter().map(|b| format!("<li>{}</li>", esc(b))).collect::<String>()
                    ));
                }
                None => grid.push_str("<td></td>"),
            }
        }
        grid.push_str("</tr>\n");
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>matrix {id}</title><style>
body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:6px 10px;vertical-align:top}}
td.pass{{background:#cfc}}td.xfail{{background:#ffd}}td.flaky{{background:#fd9}}td.skip{{background:#eee}}td.fail{{background:#fcc}}td.infra{{background:#fc9}}
.mini{{display:flex;width:160px;height:8px;margin:4px 0;border:1px solid #fff}}.seg.pass{{background:#7c7}}.seg.fail{{background:#d55}}.seg.flaky{{background:#fa3}}.seg.xfail{{background:#cc5}}.seg.skip{{background:#bbb}}
</style></head><body><h1>compatibility matrix {id}</h1>
<table>{grid}</table></body></html>\n",
        id = esc(&r.id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::CellReport;
    use crate::results::ScenarioResult;

    #[test]
    fn each_cell_links_its_report_and_shows_its_results_as_a_bar() {
        let k = KubeVersion::default_version();
        let pass = Outcome::Judged(Verdict::Pass);
        let fail = Outcome::Judged(Verdict::Fail);
        let cell = CellReport {
            kubernetes: k,
            controller: ControllerRef::default_ref(),
            dir: "cells/a".into(),
            worst: "FAIL".into(),
            results: vec![
                ScenarioResult::fixture("s/a", pass.clone(), 1.0, None),
                ScenarioResult::fixture("s/b", pass, 1.0, None),
                ScenarioResult::fixture("s/c", fail, 1.0, Some("x")),
            ],
            exploration: Some(crate::explore::Explored {
                dir: "explore/cells/a".into(),
                seed: 7,
                trials: 12,
                findings: vec!["O4 CloneSet: <x> (3/3)".into()],
            }),
        };
        let page = matrix_html(&MatrixReport {
            id: "m".into(),
            cells: vec![cell],
            shard: None,
        });
        assert!(
            page.contains("<td class=\"fail\"><a href=\"cells/a/report.html\">FAIL</a>"),
            "{page}"
        );
        assert!(
            page.contains("<div class=\"mini\"><span class=\"seg fail\" style=\"flex:1\"></span><span class=\"seg pass\" style=\"flex:2\"></span></div>"),
            "{page}"
        );
        // The exploration beside the cell: linked, its findings listed (escaped).
        assert!(
            page.contains("<a href=\"explore/cells/a/report.html\">explored: 12 trials, 1 finding(s)</a><ul><li>O4 CloneSet: &lt;x&gt; (3/3)</li></ul>"),
            "{page}"
        );
    }
}
