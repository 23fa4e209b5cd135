//! One row per (workload, mode, slice, job): the local bench's row (same
//! keys, same medians) plus what slicing adds. A failed cell still has its
//! rows, marked `error`.
use std::fmt::Write as _;

use serde::Serialize;

use crate::bench::local::rows::{Row, num, one_line};

#[derive(Clone, Debug, Serialize)]
pub struct GangRow {
    #[serde(flatten)]
    pub row: Row,
    /// The coordinator's slice; `null` for the local modes (no slices).
    pub slice_ms: Option<u64>,
    /// 99th percentile of the cross-node switch skew over the slices of the
    /// cell's runs (all repetitions), µs; `null` without slices.
    pub switch_skew_p99_us: f64,
    /// Slices behind that percentile.
    pub switch_skew_samples: f64,
    /// Sum over the cell's jobs of their (median) iterations per second:
    /// Paired Gang Scheduling's total progress in barriers per second for the mixes, the
    /// same on every row of a cell.
    pub total_progress_per_s: f64,
    /// CPU used on the machine outside the bench during the runs (median),
    /// % of one CPU: what could have distorted them (runs above
    /// `outside_load::Retry::DEFAULT` were repeated).
    pub outside_cpu_percent: f64,
}

impl GangRow {
    pub fn is_ok(&self) -> bool {
        self.row.is_ok()
    }

    /// `policy` with the slice, as the table and the chart name a column.
    pub fn column(&self) -> String {
        match self.slice_ms {
            Some(ms) => format!("{} {ms}ms", self.row.policy),
            None => self.row.policy.clone(),
        }
    }
}

/// The rows of one cell with their total progress filled in.
pub fn with_total_progress(mut rows: Vec<GangRow>) -> Vec<GangRow> {
    let total = if rows.iter().all(GangRow::is_ok) {
        rows.iter().map(|r| r.row.iterations_per_s).sum()
    } else {
        f64::NAN
    };
    for r in &mut rows {
        r.total_progress_per_s = total;
    }
    rows
}

/// The stdout table, one line per row; an error row ends with its reason.
pub fn table(rows: &[GangRow]) -> String {
    let mut out = format!(
        "{:<5} {:<16} {:>3} {:<13} {:>8} {:>9} {:>9} {:>6} {:>9} {:>8} {:>7} {:>5}\n",
        "work",
        "mode",
        "mpl",
        "job",
        "slowdown",
        "iter/s",
        "total/s",
        "spin%",
        "skew99us",
        "ctx_sw",
        "agent%",
        "out%",
    );
    for r in rows {
        let _ = write!(
            out,
            "{:<5} {:<16} {:>3} {:<13} {:>8} {:>9} {:>9} {:>6} {:>9} {:>8} {:>7} {:>5}",
            r.row.workload,
            r.column(),
            r.row.mpl,
            r.row.job,
            num(r.row.slowdown, 2),
            num(r.row.iterations_per_s, 0),
            num(r.total_progress_per_s, 0),
            num(r.row.spin_fraction * 100.0, 1),
            num(r.switch_skew_p99_us, 0),
            num(r.row.context_switches, 0),
            num(r.row.agent_cpu_percent, 2),
            num(r.outside_cpu_percent, 1),
        );
        if let Some(e) = &r.row.error {
            let _ = write!(out, "  error: {}", one_line(e));
        }
        out.push('\n');
    }
    out
}

/// The local bench's rows with the slice in `policy`, for its chart.
pub fn chart_rows(rows: &[GangRow]) -> Vec<Row> {
    rows.iter()
        .map(|r| Row {
            policy: r.column(),
            ..r.row.clone()
        })
        .collect()
}

/// A measured row for the tests: slowdown and iterations/s only.
#[cfg(test)]
pub fn sample(workload: &str, policy: &str, slice: Option<u64>, job: &str, ips: f64) -> GangRow {
    let mut row = crate::bench::local::rows::sample_row(workload, policy, 2, job, 2.0);
    row.iterations_per_s = ips;
    GangRow {
        row,
        slice_ms: slice,
        switch_skew_p99_us: f64::NAN,
        switch_skew_samples: f64::NAN,
        total_progress_per_s: f64::NAN,
        outside_cpu_percent: f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_local_keys_and_the_slicing_ones() {
        let mut r = sample("mix1", "gang", Some(10), "io-bound-1", 40.0);
        r.switch_skew_p99_us = 120.0;
        let json = serde_json::to_value(&r).unwrap();
        let local = serde_json::to_value(&r.row).unwrap();
        let local_keys: Vec<&String> = local.as_object().unwrap().keys().collect();
        assert!(local_keys.len() > 15, "{local_keys:?}");
        for k in local_keys {
            assert_eq!(json.get(k), local.get(k), "local key {k}");
        }
        for k in ["slice_ms", "switch_skew_p99_us", "total_progress_per_s"] {
            assert!(json.get(k).is_some(), "missing {k}");
        }
        assert_eq!(json["slice_ms"], 10);
        assert_eq!(json["switch_skew_p99_us"], 120.0);
        assert_eq!(json["policy"], "gang");
        assert!(json["total_progress_per_s"].is_null(), "NaN -> null");
        let local = serde_json::to_value(sample("io", "pb", None, "j", 1.0)).unwrap();
        assert!(local["slice_ms"].is_null());
    }

    #[test]
    fn total_progress_is_the_sum_of_the_cell_and_undefined_after_an_error() {
        let cell = vec![
            sample("mix1", "gang", Some(10), "io-bound-1", 40.0),
            sample("mix1", "gang", Some(10), "cpu-bound-1", 50.5),
        ];
        let rows = with_total_progress(cell.clone());
        assert!(rows.iter().all(|r| r.total_progress_per_s == 90.5));
        let mut broken = cell;
        broken[1].row.status = "error".into();
        assert!(
            with_total_progress(broken)
                .iter()
                .all(|r| r.total_progress_per_s.is_nan())
        );
    }

    #[test]
    fn the_column_names_the_slice_and_the_table_has_one_line_per_row() {
        let gang = sample("comm", "paired-gang", Some(50), "fine-spin-1", 15000.0);
        let local = sample("comm", "pb", None, "fine-spin-1", 12000.0);
        assert_eq!(gang.column(), "paired-gang 50ms");
        assert_eq!(local.column(), "pb");
        let text = table(&[gang.clone(), local]);
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().nth(1).unwrap().contains("paired-gang 50ms"));
        assert_eq!(chart_rows(&[gang])[0].policy, "paired-gang 50ms");
    }
}
