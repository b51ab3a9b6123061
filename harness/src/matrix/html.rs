//! The matrix grid as a self-contained HTML page: [`matrix_html`].

use std::collections::BTreeMap;

use super::MatrixReport;
use crate::controller::ControllerRef;
use crate::report::esc;
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
                    let mut bugs: Vec<String> = vec![];
                    for x in &cell.results {
                        *counts.entry(x.outcome.label()).or_default() += 1;
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
                    grid.push_str(&format!(
                        "<td class=\"{class}\"><a href=\"{}/report.html\">{}</a><br><small>{}</small><ul>{}</ul></td>",
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
</style></head><body><h1>compatibility matrix {id}</h1>
<table>{grid}</table></body></html>\n",
        id = esc(&r.id)
    )
}
