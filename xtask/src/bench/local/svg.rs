//! `--svg`: a grouped bar chart of slowdown by policy (bars) per workload
//! (groups), one panel per MPL, with the ideal slowdown (= MPL: each of MPL
//! jobs gets 1/MPL of every CPU and loses nothing else) as a dashed line.
//! Written by hand: a few dozen elements do not need a plotting crate.
//! A bar is the geometric mean slowdown of its cell's jobs (as in the
//! summary); failed cells have no bar. The axis stops at 4 × the ideal so
//! one pathological policy does not flatten all the others: taller bars are
//! cut at the top and labelled with their value.
use std::fmt::Write as _;

use super::{metrics::geometric_mean, rows::Row};

const LEFT: f64 = 70.0;
const RIGHT: f64 = 90.0;
/// Where the first panel starts with a one-line legend.
const TOP: f64 = 60.0;
/// Height of each further legend line.
const LEGEND_LINE_H: f64 = 18.0;
const PANEL_H: f64 = 320.0;
const PLOT_TOP: f64 = 34.0;
const PLOT_H: f64 = 220.0;
const BAR_W: f64 = 14.0;
/// A group is at least this wide, so workload names never overlap.
const MIN_GROUP_W: f64 = 90.0;
const GROUP_GAP: f64 = 30.0;
/// Wide enough for the title.
const MIN_WIDTH: f64 = 640.0;
/// A legend item is at least this wide, more for long names.
const LEGEND_ITEM_W: f64 = 90.0;
/// Width of a character of the legend (12 px sans-serif), generously.
const CHAR_W: f64 = 7.5;
/// The axis ends at most at this multiple of the ideal slowdown.
const AXIS_CAP_TIMES_IDEAL: f64 = 4.0;
const COLOURS: [&str; 8] = [
    "#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
];

/// What the chart shows, taken from the rows.
struct Chart {
    /// Workloads per MPL (a panel shows only the workloads run at its MPL).
    workloads: Vec<(u32, Vec<String>)>,
    policies: Vec<String>,
    mpls: Vec<u32>,
}

impl Chart {
    fn of(rows: &[Row]) -> Self {
        let mut chart = Chart {
            workloads: Vec::new(),
            policies: Vec::new(),
            mpls: Vec::new(),
        };
        for r in rows {
            push_new(&mut chart.policies, &r.policy);
            if !chart.mpls.contains(&r.mpl) {
                chart.mpls.push(r.mpl);
                chart.workloads.push((r.mpl, Vec::new()));
            }
            let at_mpl = chart.workloads.iter_mut().find(|(m, _)| *m == r.mpl);
            push_new(&mut at_mpl.expect("added above").1, &r.workload);
        }
        chart.mpls.sort_unstable();
        chart
    }

    fn workloads_at(&self, mpl: u32) -> &[String] {
        self.workloads
            .iter()
            .find(|(m, _)| *m == mpl)
            .map_or(&[], |(_, w)| w.as_slice())
    }

    fn legend_item_w(&self) -> f64 {
        let longest = self.policies.iter().map(|p| p.chars().count()).max();
        (16.0 + CHAR_W * longest.unwrap_or(0) as f64 + 10.0).max(LEGEND_ITEM_W)
    }

    fn bars_w(&self) -> f64 {
        self.policies.len() as f64 * BAR_W
    }

    fn group_w(&self) -> f64 {
        self.bars_w().max(MIN_GROUP_W)
    }

    /// The plot of the panel with the most workloads.
    fn plot_w(&self) -> f64 {
        let groups = self
            .workloads
            .iter()
            .map(|(_, w)| w.len())
            .max()
            .unwrap_or(0) as f64;
        groups * self.group_w() + (groups + 1.0) * GROUP_GAP
    }

    /// The plot's width (at least the title's), which the legend wraps at.
    fn width(&self) -> f64 {
        (LEFT + self.plot_w() + RIGHT).max(MIN_WIDTH)
    }

    fn legend_per_line(&self) -> usize {
        (((self.width() - LEFT) / self.legend_item_w()) as usize).max(1)
    }

    /// Where the first panel starts, below the legend's lines.
    fn top(&self) -> f64 {
        let lines = self.policies.len().div_ceil(self.legend_per_line()).max(1);
        TOP + (lines - 1) as f64 * LEGEND_LINE_H
    }
}

fn push_new(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|i| i == item) {
        list.push(item.to_string());
    }
}

/// Geometric mean slowdown of the successful rows of one cell; `None`
/// without any.
fn cell_value(rows: &[Row], workload: &str, policy: &str, mpl: u32) -> Option<f64> {
    let v = geometric_mean(
        rows.iter()
            .filter(|r| r.workload == workload && r.policy == policy && r.mpl == mpl)
            .filter(|r| r.is_ok())
            .map(|r| r.slowdown),
    );
    v.is_finite().then_some(v)
}

/// The smallest of 1, 2, 5 × 10^k that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The whole chart as a standalone SVG document.
pub fn slowdown_chart(rows: &[Row]) -> String {
    titled_slowdown_chart(
        rows,
        "Slowdown by local policy (dedicated iter/s ÷ shared iter/s; lower is better)",
    )
}

/// The chart with another title (bars are still the rows' `policy`).
pub fn titled_slowdown_chart(rows: &[Row], title: &str) -> String {
    let chart = Chart::of(rows);
    let title = escape(title);
    let width = chart.width();
    let height = chart.top() + chart.mpls.len().max(1) as f64 * PANEL_H;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12" style="background:#ffffff">
<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{title}</text>"#
    );
    legend(&mut svg, &chart);
    for (i, &mpl) in chart.mpls.iter().enumerate() {
        panel(
            &mut svg,
            &chart,
            rows,
            mpl,
            chart.top() + i as f64 * PANEL_H,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn legend(svg: &mut String, chart: &Chart) {
    let per_line = chart.legend_per_line();
    for (i, p) in chart.policies.iter().enumerate() {
        let x = LEFT + (i % per_line) as f64 * chart.legend_item_w();
        let y = 42.0 + (i / per_line) as f64 * LEGEND_LINE_H;
        let _ = writeln!(
            svg,
            r#"<circle cx="{cx:.1}" cy="{y:.1}" r="6" fill="{c}"/><text x="{tx:.1}" y="{ty:.1}">{p}</text>"#,
            ty = y + 4.0,
            cx = x + 6.0,
            c = COLOURS[i % COLOURS.len()],
            tx = x + 16.0,
            p = escape(p),
        );
    }
}

fn panel(svg: &mut String, chart: &Chart, rows: &[Row], mpl: u32, y0: f64) {
    let top = y0 + PLOT_TOP;
    let bottom = top + PLOT_H;
    let right = LEFT + chart.plot_w();
    let workloads = chart.workloads_at(mpl);
    let values: Vec<f64> = workloads
        .iter()
        .flat_map(|w| {
            chart
                .policies
                .iter()
                .filter_map(move |p| cell_value(rows, w, p, mpl))
        })
        .collect();
    let ideal = f64::from(mpl);
    let peak = values
        .iter()
        .copied()
        .fold(ideal, f64::max)
        .min(ideal * AXIS_CAP_TIMES_IDEAL);
    let step = nice_step(peak * 1.1 / 5.0);
    let y_max = (peak * 1.1 / step).ceil() * step;
    let y = |v: f64| bottom - v.min(y_max) / y_max * PLOT_H;

    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{t:.1}" font-size="14" font-weight="bold">MPL {mpl}</text>"#,
        t = y0 + 20.0
    );
    // Grid, ticks and the axes.
    let mut v = 0.0;
    while v <= y_max * (1.0 + 1e-9) {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{right:.1}" y2="{yy:.1}" stroke="#e0e0e0"/><text x="{lx:.1}" y="{ty:.1}" text-anchor="end">{label}</text>"##,
            yy = y(v),
            lx = LEFT - 6.0,
            ty = y(v) + 4.0,
            label = format_tick(v, step),
        );
        v += step;
    }
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{top:.1}" x2="{LEFT}" y2="{bottom:.1}" stroke="black"/>
<line x1="{LEFT}" y1="{bottom:.1}" x2="{right:.1}" y2="{bottom:.1}" stroke="black"/>
<text x="20" y="{my:.1}" text-anchor="middle" transform="rotate(-90 20 {my:.1})">slowdown</text>
<text x="{mx:.1}" y="{xl:.1}" text-anchor="middle">workload</text>"#,
        my = (top + bottom) / 2.0,
        mx = (LEFT + right) / 2.0,
        xl = bottom + 42.0,
    );
    // Bars, grouped by workload.
    for (g, w) in workloads.iter().enumerate() {
        let gx = LEFT + GROUP_GAP + g as f64 * (chart.group_w() + GROUP_GAP);
        let _ = writeln!(
            svg,
            r#"<text x="{cx:.1}" y="{ty:.1}" text-anchor="middle">{w}</text>"#,
            cx = gx + chart.group_w() / 2.0,
            ty = bottom + 18.0,
            w = escape(w),
        );
        for (i, p) in chart.policies.iter().enumerate() {
            let Some(value) = cell_value(rows, w, p, mpl) else {
                continue;
            };
            let x = gx + (chart.group_w() - chart.bars_w()) / 2.0 + i as f64 * BAR_W;
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{ry:.1}" width="{BAR_W}" height="{h:.1}" fill="{c}"><title>{tw} / {tp} / MPL {mpl}: slowdown {value:.2}</title></rect>"#,
                ry = y(value),
                h = bottom - y(value),
                c = COLOURS[i % COLOURS.len()],
                tw = escape(w),
                tp = escape(p),
            );
            if value > y_max {
                let _ = writeln!(
                    svg,
                    r#"<text x="{cx:.1}" y="{ty:.1}" text-anchor="middle" font-size="10">{value:.0}</text>"#,
                    cx = x + BAR_W / 2.0,
                    ty = top - 4.0,
                );
            }
        }
    }
    // The ideal: MPL jobs sharing perfectly.
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{iy:.1}" x2="{right:.1}" y2="{iy:.1}" stroke="black" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{tx:.1}" y="{ty:.1}">ideal = {mpl}</text>"#,
        iy = y(f64::from(mpl)),
        tx = right + 6.0,
        ty = y(f64::from(mpl)) + 4.0,
    );
}

fn format_tick(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::sample_row;
    use super::*;

    /// Checks that every element is closed in order (enough XML to be sure a
    /// browser or an XML parser reads the file); returns the element names
    /// seen.
    fn check_balanced(svg: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut seen = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let end = rest[start..].find('>').expect("unterminated tag") + start;
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            if tag.starts_with('?') || tag.starts_with('!') {
                continue;
            }
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.trim()),
                    "mismatched </{name}>"
                );
                continue;
            }
            let name = tag.split_whitespace().next().unwrap().trim_end_matches('/');
            seen.push(name.to_string());
            if !tag.ends_with('/') {
                stack.push(name.to_string());
            }
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert!(!rest.contains('>'), "stray >");
        seen
    }

    fn rows() -> Vec<Row> {
        let mut failed = sample_row("mix", "sb", 2, "fine-spin-1", f64::NAN);
        failed.status = "error".into();
        vec![
            sample_row("fine-spin", "local", 2, "fine-spin-1", 4.4),
            sample_row("fine-spin", "local", 2, "fine-spin-2", 4.6),
            sample_row("fine-spin", "dcs", 2, "fine-spin-1", 2.2),
            sample_row("mix", "local", 2, "fine-spin-1", 3.0),
            failed,
            sample_row("fine-spin", "local", 3, "fine-spin-1", 9.0),
        ]
    }

    #[test]
    fn one_rect_per_bar_and_balanced_tags() {
        let svg = slowdown_chart(&rows());
        let names = check_balanced(&svg);
        assert_eq!(names.first().map(String::as_str), Some("svg"));
        // MPL 2: fine-spin/local, fine-spin/dcs, mix/local (mix/sb failed);
        // MPL 3: fine-spin/local.
        assert_eq!(names.iter().filter(|n| *n == "rect").count(), 4);
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            2,
            "one ideal line per panel"
        );
        assert!(svg.contains("ideal = 2") && svg.contains("ideal = 3"));
        assert!(svg.contains("MPL 2") && svg.contains("MPL 3"));
        assert!(svg.contains(">slowdown</text>") && svg.contains(">workload</text>"));
        assert!(
            svg.contains("slowdown 4.50"),
            "bar is the geometric mean of the cell's jobs"
        );
    }

    #[test]
    fn legend_names_every_policy_once() {
        let svg = slowdown_chart(&rows());
        for p in ["local", "dcs", "sb"] {
            assert!(svg.contains(&format!(">{p}</text>")), "{p}");
        }
        assert_eq!(svg.matches("<circle").count(), 3);
    }

    #[test]
    fn text_is_escaped_and_empty_input_is_still_a_document() {
        let svg = slowdown_chart(&[sample_row("a<b", "p&q", 2, "j", 1.0)]);
        check_balanced(&svg);
        assert!(svg.contains("a&lt;b") && svg.contains("p&amp;q"));
        check_balanced(&slowdown_chart(&[]));
    }

    #[test]
    fn a_pathological_bar_is_cut_and_labelled_not_scaling_the_axis() {
        let rows = vec![
            sample_row("fine-spin", "local", 2, "j", 3.0),
            sample_row("fine-spin", "dcs", 2, "j", 600.0),
        ];
        let svg = slowdown_chart(&rows);
        check_balanced(&svg);
        assert!(svg.contains(">600</text>"), "value of the cut bar");
        assert!(
            svg.contains(">10</text>") && !svg.contains(">100</text>"),
            "{svg}"
        );
    }

    #[test]
    fn panels_show_only_their_workloads_and_the_legend_fits_long_names() {
        let rows = vec![
            sample_row("comm", "paired-gang 10ms", 2, "j", 2.0),
            sample_row("mix1", "paired-gang 10ms", 4, "j", 3.0),
            sample_row("mix1", "local", 4, "j", 3.5),
        ];
        let svg = slowdown_chart(&rows);
        check_balanced(&svg);
        assert_eq!(svg.matches(">comm</text>").count(), 1, "only in MPL 2");
        assert_eq!(svg.matches(">mix1</text>").count(), 1, "only in MPL 4");
        // The second legend item starts after the first one's long name.
        let second = svg.find(">local</text>").unwrap();
        let x: f64 = svg[..second]
            .rsplit("<text x=\"")
            .next()
            .and_then(|t| t.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(x > LEFT + 16.0 + 16.0 * CHAR_W, "{x}");
    }

    #[test]
    fn a_long_legend_wraps_within_the_chart() {
        let rows: Vec<Row> = (0..8)
            .map(|i| sample_row("comm", &format!("paired-gang {i}0ms"), 2, "j", 2.0))
            .collect();
        let svg = slowdown_chart(&rows);
        check_balanced(&svg);
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert_eq!(width, MIN_WIDTH, "the legend does not widen the chart");
        let circles: Vec<f64> = svg
            .split("<circle cx=\"")
            .skip(1)
            .filter_map(|t| t.split('"').next()?.parse().ok())
            .collect();
        assert_eq!(circles.len(), 8);
        assert!(circles.iter().all(|x| *x < width), "{circles:?}");
        assert!(svg.contains("cy=\"60.0\""), "a second legend line");
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.9), 1.0);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(0.0), 1.0);
    }
}
