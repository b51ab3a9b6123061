//! The counter behind a monitor violation, drawn: a [`Plot`] (the counter and its bound each
//! time either changed) as a small step chart ([`svg`]) in which the stretch over the bound is
//! marked, so the moment a rollout broke its bound is seen with what came before and after.

use crate::scenario::monitor::Plot;

use super::esc;

/// The stretches `(from, to)` in milliseconds during which the counter was over its bound; the
/// last one runs to `end`.
pub fn over(points: &[(u64, i64, i64)], end: u64) -> Vec<(u64, u64)> {
    let mut out = vec![];
    let mut since = None;
    for &(t, value, bound) in points {
        match (value > bound, since) {
            (true, None) => since = Some(t),
            (false, Some(s)) => {
                out.push((s, t));
                since = None;
            }
            _ => {}
        }
    }
    if let Some(s) = since {
        out.push((s, end.max(s)));
    }
    out
}

/// The plot as an inline SVG: the counter as a solid step line, its bound dashed, the time over
/// the bound shaded; the axes in seconds and counts. Empty when there are no points.
pub fn svg(p: &Plot) -> String {
    let Some(&(last, _, _)) = p.points.last() else {
        return String::new();
    };
    const LEFT: f64 = 30.0;
    const WIDTH: f64 = 480.0;
    const TOP: f64 = 10.0;
    const HEIGHT: f64 = 100.0;
    // The last value holds for a tenth of the span more, so the end of the line is seen.
    let end = last + (last / 10).max(1000);
    let top = p
        .points
        .iter()
        .map(|&(_, v, b)| v.max(b))
        .max()
        .unwrap_or(0)
        .max(1)
        + 1;
    let x = |t: u64| LEFT + WIDTH * t as f64 / end as f64;
    let y = |v: i64| TOP + HEIGHT - HEIGHT * v.clamp(0, top) as f64 / top as f64;
    let steps = |pick: &dyn Fn(&(u64, i64, i64)) -> i64| -> String {
        let mut d = String::new();
        for (i, pt) in p.points.iter().enumerate() {
            let v = pick(pt);
            if i == 0 {
                d.push_str(&format!("M{:.1},{:.1}", x(pt.0), y(v)));
            } else {
                d.push_str(&format!(" H{:.1} V{:.1}", x(pt.0), y(v)));
            }
        }
        d.push_str(&format!(" H{:.1}", x(end)));
        d
    };
    let mut out = format!(
        "<figure class=\"plot\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{} of {} against {}\">\n",
        LEFT + WIDTH + 10.0,
        TOP + HEIGHT + 20.0,
        esc(&p.counter),
        esc(&p.object),
        esc(&p.bound)
    );
    for (from, to) in over(&p.points, end) {
        out.push_str(&format!(
            "<rect class=\"over\" x=\"{:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{HEIGHT}\"><title>over {} from {:.1} s to {:.1} s</title></rect>\n",
            x(from),
            (x(to) - x(from)).max(1.0),
            esc(&p.bound),
            from as f64 / 1000.0,
            to as f64 / 1000.0
        ));
    }
    out.push_str(&format!(
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\"/><text x=\"{LEFT}\" y=\"{2}\">0 s</text><text x=\"{3:.1}\" y=\"{2}\" text-anchor=\"end\">{4:.1} s</text><text x=\"0\" y=\"{5:.1}\">{top}</text><text x=\"0\" y=\"{0}\">0</text>\n",
        TOP + HEIGHT,
        LEFT + WIDTH,
        TOP + HEIGHT + 14.0,
        LEFT + WIDTH,
        end as f64 / 1000.0,
        TOP + 10.0
    ));
    out.push_str(&format!(
        "<path class=\"bound\" d=\"{}\"><title>{}</title></path>\n<path class=\"counter\" d=\"{}\"><title>{}</title></path>\n",
        steps(&|pt| pt.2),
        esc(&p.bound),
        steps(&|pt| pt.1),
        esc(&p.counter)
    ));
    out.push_str(&format!(
        "</svg><figcaption>{} of {} (solid) against {} (dashed); shaded while over it</figcaption></figure>\n",
        esc(&p.counter),
        esc(&p.object),
        esc(&p.bound)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot(points: Vec<(u64, i64, i64)>) -> Plot {
        Plot {
            rule: "max-unavailable".into(),
            object: "CloneSet web".into(),
            counter: "unavailable pods".into(),
            bound: "maxUnavailable".into(),
            points,
        }
    }

    #[test]
    fn stretches_over_the_bound_end_where_the_counter_comes_back() {
        let pts = [
            (0, 0, 1),
            (1000, 2, 1),
            (1500, 3, 1),
            (2000, 1, 1),
            (3000, 2, 1),
        ];
        assert_eq!(over(&pts, 5000), vec![(1000, 2000), (3000, 5000)]);
        assert!(over(&[(0, 1, 1), (10, 0, 1)], 20).is_empty());
    }

    #[test]
    fn the_svg_draws_both_lines_and_shades_the_breach() {
        let s = svg(&plot(vec![(0, 0, 1), (2000, 3, 1), (4000, 0, 1)]));
        assert!(s.contains("class=\"counter\" d=\"M30.0,"), "{s}");
        assert!(s.contains("class=\"bound\""), "{s}");
        assert_eq!(s.matches("class=\"over\"").count(), 1, "{s}");
        assert!(s.contains("over maxUnavailable from 2.0 s to 4.0 s"), "{s}");
        // 3 is the highest count: the axis goes to 4.
        assert!(s.contains(">4</text>"), "{s}");
        assert!(s.contains("unavailable pods of CloneSet web"), "{s}");
        assert_eq!(svg(&plot(vec![])), "");
    }
}
