//! The charts of `bench rt`, laid out like the paper's Figures 5 and 6:
//! one row of panels per workload mix (and per admission setting), each
//! row (i) BE mean response time against delivered BE throughput, (ii) RT
//! miss rate against the arrival rate, (iii) the fraction of RT jobs
//! rejected against the arrival rate; one line per column.
use std::fmt::Write as _;

use super::{columns::Admission, rows::RtRow};

const PANEL_W: f64 = 300.0;
const PANEL_H: f64 = 210.0;
const LEFT: f64 = 56.0;
const TOP: f64 = 40.0;
const GAP_X: f64 = 40.0;
const GAP_Y: f64 = 70.0;
const PLOT_W: f64 = PANEL_W - LEFT - 10.0;
const PLOT_H: f64 = PANEL_H - 50.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A line's name: the column, and the admission rule when a group mixes
/// rules.
fn series_name(r: &RtRow) -> String {
    match r.admission {
        Admission::Statistical => format!("{} (statistical)", r.column.label()),
        Admission::Probabilistic => format!("{} (probabilistic)", r.column.label()),
        _ => r.column.label().to_string(),
    }
}

/// The panel groups: (mix, no admission | with admission).
fn groups(rows: &[RtRow]) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for r in rows {
        let g = (r.mix.clone(), r.admission != Admission::None);
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

type Point = (f64, f64);

struct Panel<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    series: Vec<(String, Vec<Point>)>,
}

fn axis_max(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if m <= 0.0 {
        return 1.0;
    }
    let step = 10f64.powf(m.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|k| k * step)
        .find(|v| *v >= m)
        .unwrap_or(10.0 * step)
}

fn panel(svg: &mut String, p: &Panel, x0: f64, y0: f64, colour_of: &dyn Fn(&str) -> &'static str) {
    let xmax = axis_max(p.series.iter().flat_map(|s| s.1.iter().map(|q| q.0)));
    let ymax = axis_max(p.series.iter().flat_map(|s| s.1.iter().map(|q| q.1)));
    let (px, py) = (x0 + LEFT, y0 + 24.0);
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" font-weight="bold">{}</text>"#,
        x0 + LEFT,
        y0 + 14.0,
        escape(p.title)
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{px:.1}" y="{py:.1}" width="{PLOT_W:.1}" height="{PLOT_H:.1}" fill="none" stroke="#444"/>"##
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = py + PLOT_H * (1.0 - f);
        let x = px + PLOT_W * f;
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            px + PLOT_W,
            px - 4.0,
            y + 3.0,
            tick(ymax * f)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
            py + PLOT_H + 13.0,
            tick(xmax * f)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
        px + PLOT_W / 2.0,
        py + PLOT_H + 27.0,
        escape(p.x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        x0 + 12.0,
        py + PLOT_H / 2.0,
        x0 + 12.0,
        py + PLOT_H / 2.0,
        escape(p.y_label)
    );
    for (name, points) in &p.series {
        let mut pts: Vec<Point> = points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let colour = colour_of(name);
        let coords: Vec<String> = pts
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    px + PLOT_W * x / xmax,
                    py + PLOT_H * (1.0 - y / ymax)
                )
            })
            .collect();
        if coords.len() > 1 {
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.8"/>"#,
                coords.join(" ")
            );
        }
        for c in &coords {
            let (x, y) = c.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                svg,
                r#"<circle cx="{x}" cy="{y}" r="2.8" fill="{colour}"><title>{}</title></circle>"#,
                escape(name)
            );
        }
    }
}

fn tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The whole figure.
pub fn chart(rows: &[RtRow]) -> String {
    let rows: Vec<&RtRow> = rows.iter().filter(|r| r.is_ok()).collect();
    let owned: Vec<RtRow> = rows.iter().map(|r| (*r).clone()).collect();
    let groups = groups(&owned);
    let mut names: Vec<String> = Vec::new();
    for r in &rows {
        let n = series_name(r);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let colour_of = |name: &str| -> &'static str {
        let i = names.iter().position(|n| n == name).unwrap_or(0);
        COLOURS[i % COLOURS.len()]
    };
    let width = LEFT / 2.0 + 3.0 * PANEL_W + 2.0 * GAP_X + 20.0;
    let legend_h = 24.0;
    let height = TOP + legend_h + groups.len() as f64 * (PANEL_H + GAP_Y);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif">"#
    );
    svg.push('\n');
    let _ = writeln!(
        svg,
        r#"<text x="20" y="22" font-size="15" font-weight="bold">cosched bench rt: BE and RT jobs together (the BE/RT paper's Fig. 5 and 6, scaled down)</text>"#
    );
    for (i, n) in names.iter().enumerate() {
        let x = 20.0 + i as f64 * 150.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.0}" y="{:.0}" width="12" height="12" fill="{}"/><text x="{:.0}" y="{:.0}" font-size="11">{}</text>"#,
            TOP - 4.0,
            colour_of(n),
            x + 16.0,
            TOP + 6.0,
            escape(n)
        );
    }
    for (gi, (mix, admission)) in groups.iter().enumerate() {
        let y0 = TOP + legend_h + gi as f64 * (PANEL_H + GAP_Y);
        let in_group: Vec<&&RtRow> = rows
            .iter()
            .filter(|r| &r.mix == mix && (r.admission != Admission::None) == *admission)
            .collect();
        let series = |f: &dyn Fn(&RtRow) -> Point| -> Vec<(String, Vec<Point>)> {
            let mut out: Vec<(String, Vec<Point>)> = Vec::new();
            for r in &in_group {
                let n = series_name(r);
                match out.iter_mut().find(|s| s.0 == n) {
                    Some(s) => s.1.push(f(r)),
                    None => out.push((n, vec![f(r)])),
                }
            }
            out
        };
        let what = if *admission {
            "with admission control"
        } else {
            "no admission control"
        };
        let t1 = format!("RT:BE {mix}, {what}: (i) BE response");
        let t2 = format!("(ii) RT miss rate, {mix}");
        let t3 = format!("(iii) RT jobs rejected, {mix}");
        let panels = [
            Panel {
                title: &t1,
                x_label: "BE throughput (jobs/s)",
                y_label: "BE mean response (s)",
                series: series(&|r| (r.be_throughput_per_s, r.be_mean_response_s)),
            },
            Panel {
                title: &t2,
                x_label: "arrival rate (jobs/s)",
                y_label: "miss rate (%)",
                series: series(&|r| (r.rate_per_s, r.rt_miss_rate * 100.0)),
            },
            Panel {
                title: &t3,
                x_label: "arrival rate (jobs/s)",
                y_label: "rejected (%)",
                series: series(&|r| (r.rate_per_s, r.rt_rejection_ratio * 100.0)),
            },
        ];
        for (pi, p) in panels.iter().enumerate() {
            let x0 = LEFT / 2.0 + pi as f64 * (PANEL_W + GAP_X) - 20.0;
            panel(&mut svg, p, x0.max(0.0), y0, &colour_of);
        }
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rt::{cell::CellRun, columns::Column, rows::Key, stream::Mix};

    #[test]
    fn one_row_of_panels_per_group_and_a_line_per_column() {
        let row = |column, admission, rate| {
            RtRow::of(
                Key {
                    mix: Mix { rt: 9, be: 1 },
                    rate_per_s: rate,
                    column,
                    admission,
                },
                &CellRun::default(),
                2,
                5.0,
            )
        };
        let rows = vec![
            row(Column::Tdm, Admission::None, 1.0),
            row(Column::Tdm, Admission::None, 2.0),
            row(Column::Tdm, Admission::Statistical, 2.0),
            row(Column::Fifo, Admission::Deterministic, 2.0),
        ];
        assert_eq!(groups(&rows).len(), 2);
        let svg = chart(&rows);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("2dcs-tdm (statistical)"));
        assert!(svg.contains("with admission control"));
        assert_eq!(svg.matches("(ii) RT miss rate").count(), 2);
        assert_eq!(axis_max([0.3, 0.7].into_iter()), 1.0);
        assert_eq!(axis_max([12.0].into_iter()), 20.0);
        assert_eq!(axis_max([f64::NAN].into_iter()), 1.0);
    }
}
