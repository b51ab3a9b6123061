//! Where a run's time went: a [`Bar`] per cluster bring-up and per scenario, on the lane of
//! its cluster (recorded by the report as the events arrive), drawn as one SVG ([`svg`]) in
//! which slowness and parallelism can be seen.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::esc;

/// The class of a cluster's bring-up bar (a scenario's is its result's).
pub const BRING_UP: &str = "up";

/// One stretch of a run's time on a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// The cluster (its profile).
    pub lane: String,
    /// What ran: `bring-up`, or the scenario.
    pub label: String,
    /// Seconds into the run when it started.
    pub start: f64,
    /// How long it ran.
    pub seconds: f64,
    /// [`BRING_UP`], or the result's class (`pass`, `fail`, `flaky`, `xfail`, `skip`).
    pub class: String,
}

/// Each bar's lane (in order of the lanes' first bars) and row within the lane: the first row
/// on which it overlaps no bar placed before it (bars placed by start).
pub fn layout(bars: &[Bar]) -> (Vec<String>, Vec<(usize, usize)>) {
    let mut order: Vec<usize> = (0..bars.len()).collect();
    order.sort_by(|&a, &b| bars[a].start.total_cmp(&bars[b].start));
    let mut lanes: Vec<String> = vec![];
    // Per lane, where each row is free from.
    let mut free: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut out = vec![(0, 0); bars.len()];
    for i in order {
        let b = &bars[i];
        let lane = match lanes.iter().position(|l| *l == b.lane) {
            Some(l) => l,
            None => {
                lanes.push(b.lane.clone());
                lanes.len() - 1
            }
        };
        let rows = free.entry(lane).or_default();
        let end = b.start + b.seconds;
        let row = match rows.iter().position(|f| *f <= b.start) {
            Some(r) => {
                rows[r] = end;
                r
            }
            None => {
                rows.push(end);
                rows.len() - 1
            }
        };
        out[i] = (lane, row);
    }
    (lanes, out)
}

/// A tick spacing that gives about eight ticks over `total` seconds.
fn tick(total: f64) -> f64 {
    [5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0]
        .into_iter()
        .find(|t| total / t <= 8.0)
        .unwrap_or(3600.0)
}

/// The timeline as an inline SVG: a lane per cluster, labelled, each bar a rectangle of its
/// class whose title says what it was, when it started and how long it ran; an axis in seconds.
/// Empty when there are no bars.
pub fn svg(bars: &[Bar]) -> String {
    if bars.is_empty() {
        return String::new();
    }
    const LABEL: f64 = 200.0;
    const WIDTH: f64 = 900.0;
    const ROW: f64 = 11.0;
    const GAP: f64 = 8.0;
    const AXIS: f64 = 18.0;
    let total = bars
        .iter()
        .map(|b| b.start + b.seconds)
        .fold(1.0_f64, f64::max);
    let x = |s: f64| LABEL + WIDTH * s / total;
    let (lanes, placed) = layout(bars);
    let mut rows = vec![1usize; lanes.len()];
    for &(lane, row) in &placed {
        rows[lane] = rows[lane].max(row + 1);
    }
    let mut tops = vec![AXIS];
    for r in &rows {
        tops.push(tops.last().unwrap() + *r as f64 * ROW + GAP);
    }
    let height = *tops.last().unwrap();
    let mut out = format!(
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\" aria-label=\"timeline of the run\">\n",
        LABEL + WIDTH + 10.0
    );
    let step = tick(total);
    let mut t = 0.0;
    while t <= total {
        out.push_str(&format!(
            "<line class=\"tick\" x1=\"{0:.1}\" y1=\"{AXIS}\" x2=\"{0:.1}\" y2=\"{height}\"/><text class=\"axis\" x=\"{0:.1}\" y=\"12\">{1} s</text>\n",
            x(t),
            t
        ));
        t += step;
    }
    for (i, lane) in lanes.iter().enumerate() {
        // Long profile names are cut to the label column; the title has the whole name.
        let shown: String = match lane.chars().count() > 30 {
            true => lane.chars().take(29).chain(['…']).collect(),
            false => lane.clone(),
        };
        out.push_str(&format!(
            "<text class=\"lane\" x=\"0\" y=\"{:.1}\"><title>{}</title>{}</text>\n",
            tops[i] + ROW - 2.0,
            esc(lane),
            esc(&shown)
        ));
    }
    for (b, &(lane, row)) in bars.iter().zip(&placed) {
        out.push_str(&format!(
            "<rect class=\"tl-{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{}\"><title>{} — {} — {:.1} s from {:.1} s</title></rect>\n",
            esc(&b.class),
            x(b.start),
            tops[lane] + row as f64 * ROW,
            (WIDTH * b.seconds / total).max(1.0),
            ROW - 1.0,
            esc(&b.label),
            esc(&b.lane),
            b.seconds,
            b.start
        ));
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(lane: &str, label: &str, start: f64, seconds: f64) -> Bar {
        Bar {
            lane: lane.into(),
            label: label.into(),
            start,
            seconds,
            class: "pass".into(),
        }
    }

    #[test]
    fn overlapping_bars_of_a_lane_take_rows_and_a_free_row_is_reused() {
        let bars = [
            bar("b", "bring-up", 0.0, 5.0),
            bar("a", "bring-up", 1.0, 4.0),
            bar("a", "x", 5.0, 10.0),
            bar("a", "y", 6.0, 2.0),
            bar("a", "z", 9.0, 1.0),
            bar("b", "w", 5.0, 1.0),
        ];
        let (lanes, placed) = layout(&bars);
        assert_eq!(lanes, ["b", "a"]);
        assert_eq!(
            placed,
            [(0, 0), (1, 0), (1, 0), (1, 1), (1, 1), (0, 0)],
            "y overlaps x; z starts after y ended and takes its row"
        );
    }

    #[test]
    fn the_svg_draws_every_bar_with_its_title_and_escapes_names() {
        let bars = [
            bar("r-0", "bring-up", 0.0, 10.0),
            Bar {
                class: "fail".into(),
                ..bar("r-0", "s/<x>", 10.0, 30.0)
            },
        ];
        let svg = svg(&bars);
        assert_eq!(svg.matches("<rect ").count(), 2, "{svg}");
        assert!(svg.contains("class=\"tl-fail\""), "{svg}");
        assert!(svg.contains("<title>s/&lt;x&gt; — r-0 — 30.0 s from 10.0 s</title>"));
        assert!(
            svg.contains(">0 s</text>") && svg.contains(">40 s</text>"),
            "{svg}"
        );
        assert!(super::svg(&[]).is_empty());
    }
}
