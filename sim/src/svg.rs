//! A small SVG plot: the distribution (CDF) of job slowdowns of each run,
//! log-scaled, one line per run.

use std::fmt::Write;

use crate::metrics::Report;

const W: f64 = 640.0;
const H: f64 = 400.0;
const M: f64 = 50.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// CDF of per-job slowdown (x: log10 slowdown from 1, y: share of jobs).
pub fn slowdown_cdf(reports: &[Report]) -> String {
    let max = reports
        .iter()
        .flat_map(|r| r.job_records.iter().map(|j| j.slowdown))
        .fold(2.0f64, f64::max);
    let x_max = max.log10().ceil().max(1.0);
    let x = |v: f64| M + (v.max(1.0).log10() / x_max) * (W - 2.0 * M);
    let y = |q: f64| H - M - q * (H - 2.0 * M);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<line x1="{M}" y1="{0}" x2="{1}" y2="{0}" stroke="black"/><line x1="{M}" y1="{M}" x2="{M}" y2="{0}" stroke="black"/>"#,
        H - M,
        W - M
    );
    for decade in 0..=x_max as u32 {
        let px = x(10f64.powi(decade as i32));
        let _ = writeln!(
            out,
            r#"<text x="{px}" y="{}" text-anchor="middle">{}</text>"#,
            H - M + 16.0,
            10u64.pow(decade)
        );
    }
    for q in [0.0, 0.5, 1.0] {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{q}</text>"#,
            M - 6.0,
            y(q) + 4.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">job slowdown (log)</text><text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">share of jobs</text>"#,
        W / 2.0,
        H - 12.0,
        H / 2.0,
        H / 2.0
    );
    for (i, report) in reports.iter().enumerate() {
        let mut v: Vec<f64> = report.job_records.iter().map(|j| j.slowdown).collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let points: Vec<String> = v
            .iter()
            .enumerate()
            .map(|(k, s)| format!("{:.1},{:.1}", x(*s), y((k + 1) as f64 / n)))
            .collect();
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" fill="{colour}">{} (mean {:.2})</text>"#,
            W - M - 200.0,
            M + 16.0 * i as f64,
            report.label,
            report.slowdown.mean
        );
    }
    out.push_str("</svg>\n");
    out
}
