//! `cargo xtask demo`: what cosched does, in one table, on a fresh machine.
//!
//! The same two fine-grain spinning jobs (one rank on each of 2 nodes, the
//! papers' worst case for plain Linux) measured alone (dedicated), then
//! together under plain Linux, under the best local policy and under gang
//! scheduling through the coordinator (10 ms slices), in one run on one
//! cluster: the rows of `bench gang`'s `comm` workload for those three
//! columns, with a one-line reading of each. The cluster is torn down
//! afterwards, also on error.
use std::path::PathBuf;

use super::gang::{self, GangOptions, modes::Mode, rows::GangRow, workloads::GangWorkload};
use crate::{progress::say, workspace::Workspace};

pub struct DemoOptions {
    /// The local policy of the "best local" column.
    pub best_local: String,
    pub duration_s: f64,
    pub reps: usize,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    /// Where each column's timeline goes (None: none recorded).
    pub timeline: Option<gang::timeline::Capture>,
}

impl DemoOptions {
    fn gang_options(&self) -> GangOptions {
        GangOptions {
            reps: self.reps,
            duration_s: self.duration_s,
            slices_ms: vec![gang::MIN_SLICE_MS],
            best_local: self.best_local.clone(),
            workloads: vec![GangWorkload::Comm],
            modes: vec![Mode::Local, Mode::BestLocal, Mode::Gang],
            stop_inactive: true,
            json: self.json.clone(),
            svg: self.svg.clone(),
            build: true,
            timeline: self.timeline.clone(),
        }
    }
}

/// Runs the demo and prints its reading; the rows are `bench gang`'s.
pub fn run(workspace: &Workspace, opts: &DemoOptions) -> anyhow::Result<Vec<GangRow>> {
    let report = gang::run(workspace, &opts.gang_options())?;
    for line in reading(&report.rows) {
        say("demo", line);
    }
    Ok(report.rows)
}

/// One sentence per column: how much slower than dedicated the two jobs
/// ran (the median over both jobs' slowdowns).
fn reading(rows: &[GangRow]) -> Vec<String> {
    let mut columns: Vec<String> = Vec::new();
    for r in rows {
        let column = r.column();
        if !columns.contains(&column) {
            columns.push(column);
        }
    }
    columns
        .iter()
        .map(|column| {
            let slowdowns: Vec<f64> = rows
                .iter()
                .filter(|r| &r.column() == column && r.is_ok())
                .map(|r| r.row.slowdown)
                .collect();
            if slowdowns.is_empty() {
                return format!("{column}: failed (see the table)");
            }
            let median = super::local::metrics::median_finite(slowdowns);
            format!("{column}: two jobs together run {median:.2}x slower than each alone")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_measures_plain_linux_the_best_local_policy_and_gang_on_one_workload() {
        let o = DemoOptions {
            best_local: "dcs".into(),
            duration_s: 3.0,
            reps: 1,
            json: None,
            svg: None,
            timeline: None,
        }
        .gang_options();
        assert_eq!(o.workloads, [GangWorkload::Comm]);
        assert_eq!(o.modes, [Mode::Local, Mode::BestLocal, Mode::Gang]);
        assert_eq!(o.slices_ms, [10]);
        o.validate().unwrap();
    }

    #[test]
    fn reading_gives_one_line_per_column_with_the_median_slowdown() {
        let rows = [
            gang::rows::sample("comm", "local", None, "A", 1.0),
            gang::rows::sample("comm", "gang", Some(10), "A", 1.0),
        ];
        let lines = reading(&rows);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with(&rows[0].column()), "{lines:?}");
    }
}
