//! The matrix grid as a self-contained HTML page: [`matrix_html`], which renders the page's
//! askama template (`matrix/page.html`).

use std::collections::BTreeMap;

use askama::Template;

use super::MatrixReport;
use crate::controller::ControllerRef;
use crate::explore::Explored;
use crate::report::class_of;
use crate::results::Outcome;
use crate::results::Verdict;
use crate::toolchain::KubeVersion;

/// The page (`matrix/page.html`): every value it shows, as text the template escapes.
#[derive(Template)]
#[template(path = "matrix/page.html")]
struct Page<'a> {
    id: &'a str,
    controllers: Vec<ControllerRef>,
    rows: Vec<Row<'a>>,
}

/// A Kubernetes version's row: a cell per release, or none where the matrix has no cell.
struct Row<'a> {
    kubernetes: KubeVersion,
    cells: Vec<Option<Cell<'a>>>,
}

/// One cell: coloured by its worst result, its results by class as one bar, the known bugs
/// seen there, its exploration if any, linked to its own report.
struct Cell<'a> {
    class: &'static str,
    dir: &'a str,
    worst: &'a str,
    bar: Vec<(&'static str, usize)>,
    counts: String,
    bugs: Vec<String>,
    explored: Option<&'a Explored>,
}

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
    let rows = versions
        .iter()
        .map(|v| Row {
            kubernetes: *v,
            cells: controllers
                .iter()
                .map(|c| {
                    r.cells
                        .iter()
                        .find(|x| x.kubernetes == *v && &x.controller == c)
                        .map(cell)
                })
                .collect(),
        })
        .collect();
    let page = Page {
        id: &r.id,
        controllers,
        rows,
    };
    let mut out = page.render().unwrap_or_else(|e| {
        format!("<!doctype html>\n<p>the matrix page failed to render: {e}</p>")
    });
    out.push('\n');
    out
}

/// A cell of the grid, from its report.
fn cell(cell: &super::CellReport) -> Cell<'_> {
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
    Cell {
        class,
        dir: &cell.dir,
        worst: &cell.worst,
        // The cell's results by class as one bar: how much of it is what.
        bar: ["fail", "flaky", "xfail", "pass", "skip"]
            .into_iter()
            .filter_map(|c| Some((c, *classes.get(c)?)))
            .collect(),
        counts: counts
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        bugs,
        // The cell's exploration (`--explore`): its findings, linked, not judged.
        explored: cell.exploration.as_ref(),
    }
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
            page.contains("<a href=\"explore/cells/a/report.html\">explored: 12 trials, 1 finding(s)</a><ul><li>O4 CloneSet: &#60;x&#62; (3/3)</li></ul>"),
            "{page}"
        );
    }
}
