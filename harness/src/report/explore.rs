//! The page of an exploration: `report.html` beside `explore.json`, one self-contained file
//! listing the findings by oracle and kind, each with what was seen and wanted, how often it
//! reproduced, its shrunk trial, and links to its reproduction files. Start with [`html`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::esc;
use crate::explore::oracle::Oracle;
use crate::explore::{Reported, Summary};

/// The page of `summary`, whose findings' directories are linked relative to `dir` (where
/// the page is written).
pub fn html(summary: &Summary, dir: &Path) -> String {
    let total: usize = summary.trials.values().sum();
    let stable = summary.stable().count();
    let unstable = summary.findings.iter().filter(|r| r.confirmed()).count() - stable;
    let unconfirmed = summary.findings.iter().filter(|r| !r.confirmed()).count();
    let mut by_oracle: BTreeMap<Oracle, BTreeMap<&str, Vec<&Reported>>> = BTreeMap::new();
    for r in &summary.findings {
        by_oracle
            .entry(r.finding.oracle)
            .or_default()
            .entry(r.finding.subject.as_str())
            .or_default()
            .push(r);
    }
    let mut toc = String::new();
    let mut body = String::new();
    for (oracle, kinds) in &by_oracle {
        let short = oracle.short();
        let name = serde_json::to_value(oracle)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let n: usize = kinds.values().map(Vec::len).sum();
        let _ = write!(toc, "<li><a href=\"#{short}\">{}</a>: {n}</li>", esc(&name));
        let _ = write!(body, "<h2 id=\"{short}\">{}</h2>", esc(&name));
        for (kind, findings) in kinds {
            let _ = write!(body, "<h3>{}</h3>", esc(kind));
            for r in findings {
                body.push_str(&finding(r, dir));
            }
        }
    }
    if !summary.reach.subjects.is_empty() {
        body.push_str(&reach(summary));
    }
    let trials = summary
        .trials
        .iter()
        .map(|(k, v)| format!("{} {v}", esc(k)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>exploration of {controller}</title><style>
body{{font-family:sans-serif;margin:2em;max-width:80em}}
.strip span{{display:inline-block;padding:4px 10px;margin-right:6px;border-radius:4px;background:#eee}}
.strip .stable{{background:#fcc}}.strip .unstable{{background:#fd9}}
.finding{{border:1px solid #ccc;border-radius:4px;padding:8px 12px;margin:8px 0}}
.finding.unstable{{border-style:dashed}}
dt{{font-weight:bold}}pre{{background:#f6f6f6;padding:8px;overflow:auto;max-height:30em}}
</style></head><body>
<h1>Exploration of {controller} on Kubernetes {kubernetes}{against}</h1>
<p class=\"strip\"><span>seed {seed}</span><span>{total} trials in {seconds:.0} s</span><span class=\"stable\">{stable} stable finding(s)</span><span class=\"unstable\">{unstable} unstable</span><span class=\"unstable\">{unconfirmed} not confirmed</span></p>
<p>{trials}</p>
<ul>{toc}</ul>
{body}</body></html>\n",
        controller = esc(&summary.controller),
        kubernetes = esc(&summary.kubernetes),
        seed = summary.seed,
        seconds = summary.seconds,
        against = summary
            .baseline
            .as_ref()
            .map(|b| format!(", against {}", esc(b)))
            .unwrap_or_default()
            + &if summary.gates.is_empty() {
                String::new()
            } else {
                format!(", {}", esc(&summary.gates.to_string()))
            },
    )
}

/// The reach table ([`crate::explore::reach`]): a row per subject.
fn reach(summary: &Summary) -> String {
    let mut out = String::from(
        "<h2 id=\"reach\">Reach</h2><p>Of what each subject's schema offers, what some trial \
         set; rows tried at create (behaviour creates of two or more fields); steps by kind; \
         trials (distinct) by mode.</p><table><tr><th>subject</th><th>fields</th><th>values</th>\
         <th>beyond</th><th>rows</th><th>steps</th><th>trials</th></tr>",
    );
    for (name, r) in &summary.reach.subjects {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            r.fields.show(),
            r.values.show(),
            r.beyond,
            r.rows,
            r.row_creates,
            esc(&r.steps_text()),
            esc(&r.trials_text())
        );
    }
    out.push_str("</table>");
    out
}

fn finding(r: &Reported, dir: &Path) -> String {
    let at = r
        .dir
        .strip_prefix(dir)
        .unwrap_or(&r.dir)
        .display()
        .to_string();
    let link = |file: &str| format!("<a href=\"{}/{file}\">{file}</a>", esc(&at));
    format!(
        "<div class=\"finding{unstable}\"><p><b>{key}</b></p><dl>
<dt>observed</dt><dd>{observed}</dd><dt>expected</dt><dd>{expected}</dd>
<dt>reproduced</dt><dd>{reproduction}, first seen after {seen:.0} s on {controller}, Kubernetes {kubernetes}</dd></dl>
<details><summary>shrunk trial: {steps} step(s)</summary><pre>{trial}</pre></details>
<p>{chainsaw} · {trial_file} · {log} · {ledger} · replay: <code>harness explore --replay {at}</code></p></div>\n",
        unstable = if r.stable { "" } else { " unstable" },
        key = esc(&r.finding.key),
        observed = esc(&r.finding.observed),
        expected = esc(&r.finding.expected),
        reproduction = esc(&r.reproduction()),
        seen = r.first_seen,
        controller = esc(&r.controller),
        kubernetes = esc(&r.kubernetes),
        steps = r.trial.steps.len(),
        trial = esc(&r.trial.to_yaml()),
        chainsaw = link("chainsaw-test.yaml"),
        trial_file = link("trial.yaml"),
        log = link("manager.log"),
        ledger = link("ledger.yaml"),
        at = esc(&r.dir.display().to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::Finding;
    use crate::explore::trial::{Mode, Step, Trial};

    fn reported(oracle: Oracle, subject: &str, key: &str, stable: bool) -> Reported {
        let trial = Trial {
            subject: subject.into(),
            mode: Mode::Admission,
            seed: 1,
            index: 0,
            steps: vec![Step::Create {
                set: [("spec.x".to_string(), serde_json::json!("<b>"))].into(),
            }],
        };
        Reported {
            finding: Finding {
                oracle,
                subject: subject.into(),
                key: key.into(),
                observed: "seen <script>".into(),
                expected: "wanted".into(),
            },
            original: trial.clone(),
            trial,
            reproduced: if stable { 3 } else { 1 },
            confirm_runs: 3,
            stable,
            first_seen: 12.0,
            dir: format!("/r/run/findings/01-{}", oracle.short()).into(),
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32".into(),
            baseline: None,
            gates: Default::default(),
        }
    }

    #[test]
    fn findings_are_grouped_by_oracle_then_kind_escaped_and_linked_relative_to_the_page() {
        let summary = Summary {
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32".into(),
            seed: 7,
            trials: [("admission CloneSet".to_string(), 40)].into(),
            findings: vec![
                reported(Oracle::Native, "CloneSet", "admits a", true),
                reported(Oracle::Realizable, "BroadcastJob", "drops b", false),
                reported(Oracle::Native, "BroadcastJob", "admits c", true),
            ],
            seconds: 60.0,
            baseline: Some("openkruise@v1.8.0".into()),
            gates: crate::explore::Gates {
                cluster: [("InPlacePodVerticalScaling".to_string(), true)].into(),
                controller: Default::default(),
            },
            pace: Default::default(),
            reach: Default::default(),
        };
        let page = html(&summary, Path::new("/r/run"));
        assert!(page.contains("cluster InPlacePodVerticalScaling=true"));
        let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} in the page"));
        assert!(at("id=\"O1\"") < at("id=\"O4\""), "oracles in order");
        assert!(
            at("admits c") < at("admits a"),
            "kinds in order within an oracle"
        );
        assert!(page.contains("2 stable finding(s)") && page.contains("1 unstable"));
        assert!(page.contains("href=\"findings/01-O4/chainsaw-test.yaml\""));
        assert!(!page.contains("<script>") && page.contains("&lt;script&gt;"));
        assert!(page.contains("40 trials in 60 s"));
        assert!(page.contains("against openkruise@v1.8.0"));
    }

    #[test]
    fn a_finding_written_unconfirmed_is_said_so_not_counted_unstable() {
        let mut unconfirmed = reported(Oracle::Native, "CloneSet", "admits a", false);
        (unconfirmed.reproduced, unconfirmed.confirm_runs) = (0, 0);
        assert_eq!(
            unconfirmed.reproduction(),
            "not confirmed (`--replay` confirms it)"
        );
        let unstable = reported(Oracle::Native, "CloneSet", "admits b", false);
        assert_eq!(unstable.reproduction(), "1/3 (unstable)");
        let stable = reported(Oracle::Native, "CloneSet", "admits c", true);
        assert_eq!(stable.reproduction(), "3/3");
        let summary = Summary {
            findings: vec![unconfirmed, unstable, stable],
            ..Summary::default()
        };
        let page = html(&summary, Path::new("/r/run"));
        assert!(page.contains("1 stable finding(s)"), "{page}");
        assert!(page.contains(">1 unstable<"), "{page}");
        assert!(page.contains(">1 not confirmed<"), "{page}");
        assert!(!page.contains("0/0"), "{page}");
        assert!(!page.contains("id=\"reach\""), "no reach, no table: {page}");
        let mut summary = summary;
        summary.reach.offer(
            "CloneSet",
            &[[("spec.replicas".to_string(), serde_json::json!(0))].into()],
        );
        let page = html(&summary, Path::new("/r/run"));
        assert!(
            page.contains("<td>CloneSet</td><td>0/1 (0 %)</td><td>0/1 (0 %)</td>"),
            "{page}"
        );
    }
}
