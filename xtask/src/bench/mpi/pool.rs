//! `cargo xtask bench mpi-pool`: several `bench mpi` reports pooled into
//! one, so a verdict rests on every run measured instead of on one
//! invocation's.
//!
//! Why: a cell's slowdown divides its median time by the same invocation's
//! median dedicated time, and the dedicated runs of one invocation sit 2–4 %
//! apart from another's. Gang on OpenMPI ping-pong measured 2.04–2.14 at
//! MPL 2 over six invocations for the same gang times, around a target of
//! 2.1: one invocation's verdict is a coin toss, the pooled one is not.
//!
//! Pooled: every run's time of a cell (all invocations), the dedicated time
//! as the median of every dedicated run, the slowdowns from those; counters
//! (context switches, boosts, agent CPU, …), which the reports keep only
//! as medians, as the mean of the invocations' medians weighted by their
//! repetitions; skew p50 likewise, skew p99 the largest of them (the
//! histograms are not in the reports).
use std::collections::HashMap;

use super::{rows::MpiRow, targets};
use crate::bench::local::metrics::median_finite;

/// A cell: library, workload, MPL, column.
type CellKey = (String, String, u32, String);

fn key(r: &MpiRow) -> CellKey {
    (r.lib.clone(), r.workload.clone(), r.mpl, r.column.clone())
}

/// The rows of every report pooled per cell, in the order cells first
/// appear. A cell measured in only some reports pools those.
pub fn pool(reports: &[Vec<MpiRow>]) -> Vec<MpiRow> {
    let mut order: Vec<CellKey> = Vec::new();
    let mut cells: HashMap<CellKey, Vec<&MpiRow>> = HashMap::new();
    for row in reports.iter().flatten() {
        let k = key(row);
        if !cells.contains_key(&k) {
            order.push(k.clone());
        }
        cells.entry(k).or_default().push(row);
    }
    let dedicated: HashMap<(String, String), f64> = order
        .iter()
        .filter(|k| k.2 == 1)
        .map(|k| {
            let runs = ok(&cells[k]).flat_map(|r| r.per_iteration_runs_s.iter().copied());
            ((k.0.clone(), k.1.clone()), median_finite(runs))
        })
        .collect();
    order
        .iter()
        .map(|k| {
            let d = dedicated
                .get(&(k.0.clone(), k.1.clone()))
                .copied()
                .unwrap_or(f64::NAN);
            pooled(&cells[k], d)
        })
        .collect()
}

fn ok<'a>(rows: &'a [&'a MpiRow]) -> impl Iterator<Item = &'a MpiRow> + 'a {
    rows.iter().copied().filter(|r| r.status == "ok")
}

/// The mean of `f` over the rows that measured it, weighted by their
/// repetitions.
fn weighted(rows: &[&MpiRow], f: impl Fn(&MpiRow) -> f64) -> f64 {
    let (sum, weight) = ok(rows)
        .map(|r| (f(r), r.reps as f64))
        .filter(|(v, _)| v.is_finite())
        .fold((0.0, 0.0), |(s, w), (v, n)| (s + v * n, w + n));
    if weight > 0.0 { sum / weight } else { f64::NAN }
}

fn largest(rows: &[&MpiRow], f: impl Fn(&MpiRow) -> f64) -> f64 {
    ok(rows)
        .map(f)
        .filter(|v| v.is_finite())
        .fold(f64::NAN, f64::max)
}

fn pooled(rows: &[&MpiRow], dedicated_per_iteration_s: f64) -> MpiRow {
    let first = rows[0];
    let measured: Vec<&MpiRow> = ok(rows).collect();
    let Some(&template) = measured.first() else {
        // No report measured the cell: keep the first one's status and why.
        return MpiRow {
            reps: 0,
            failed_runs: rows.iter().map(|r| r.failed_runs).sum(),
            ..first.clone()
        };
    };
    let runs: Vec<f64> = measured
        .iter()
        .flat_map(|r| r.per_iteration_runs_s.iter().copied())
        .collect();
    // Older reports kept no per-run slowest job: pooled only when every
    // report has it.
    let worst_runs: Vec<f64> = if measured
        .iter()
        .all(|r| r.worst_per_iteration_runs_s.len() == r.per_iteration_runs_s.len())
    {
        measured
            .iter()
            .flat_map(|r| r.worst_per_iteration_runs_s.iter().copied())
            .collect()
    } else {
        Vec::new()
    };
    let per_iteration_s = median_finite(runs.iter().copied());
    let worst = median_finite(worst_runs.iter().copied());
    MpiRow {
        status: "ok".into(),
        error: None,
        reps: runs.len(),
        failed_runs: rows.iter().map(|r| r.failed_runs).sum(),
        slowdown: per_iteration_s / dedicated_per_iteration_s,
        slowdown_worst: worst / dedicated_per_iteration_s,
        per_iteration_s,
        per_iteration_runs_s: runs,
        worst_per_iteration_runs_s: worst_runs,
        dedicated_per_iteration_s,
        late_start_s: largest(rows, |r| r.late_start_s),
        messages_observed: weighted(rows, |r| r.messages_observed),
        cpu_seconds: weighted(rows, |r| r.cpu_seconds),
        spin_seconds: weighted(rows, |r| r.spin_seconds),
        context_switches: weighted(rows, |r| r.context_switches),
        boosts: weighted(rows, |r| r.boosts),
        actions: weighted(rows, |r| r.actions),
        agent_cpu_percent: weighted(rows, |r| r.agent_cpu_percent),
        outside_cpu_percent: weighted(rows, |r| r.outside_cpu_percent),
        skew_p50_us: weighted(rows, |r| r.skew_p50_us),
        skew_p99_us: largest(rows, |r| r.skew_p99_us),
        ..template.clone()
    }
}

/// Reads the reports, pools them, and judges issue 12's targets on the
/// pooled rows.
pub fn pool_files(
    paths: &[std::path::PathBuf],
) -> anyhow::Result<(Vec<MpiRow>, Vec<targets::Target>)> {
    use anyhow::Context as _;
    if paths.len() < 2 {
        anyhow::bail!("mpi-pool needs at least two reports (got {})", paths.len());
    }
    let reports = paths
        .iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<Vec<MpiRow>>(&text)
                .with_context(|| format!("{} is not a `bench mpi` report", p.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let rows = pool(&reports);
    let targets = targets::evaluate(&rows);
    Ok((rows, targets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mpl: u32, column: &str, runs: &[f64], dedicated: f64) -> MpiRow {
        MpiRow::measured("openmpi", "pingpong", mpl, column, runs, dedicated)
    }

    /// One invocation ran its dedicated runs fast (gang 2.14 there), the
    /// other slow (2.02): each verdict alone flips; pooled, every run of
    /// both divides by the median of every dedicated run.
    #[test]
    fn two_invocations_whose_dedicated_runs_differ_are_judged_on_every_run() {
        let a = vec![
            row(1, "dedicated", &[37.0, 37.5, 37.5], 37.5),
            row(2, "gang@10ms", &[80.0, 80.5], 37.5),
        ];
        let b = vec![
            row(1, "dedicated", &[39.5, 39.5, 40.0], 39.5),
            row(2, "gang@10ms", &[79.5, 80.0], 39.5),
        ];
        assert!(a[1].slowdown > 2.1 && b[1].slowdown < 2.1);
        let pooled = pool(&[a, b]);
        assert_eq!(pooled.len(), 2);
        assert_eq!(pooled[0].reps, 6);
        assert_eq!(pooled[0].dedicated_per_iteration_s, 38.5);
        let gang = &pooled[1];
        assert_eq!(gang.per_iteration_runs_s, [80.0, 80.5, 79.5, 80.0]);
        assert_eq!(gang.per_iteration_s, 80.0);
        assert!((gang.slowdown - 80.0 / 38.5).abs() < 1e-12);
        assert!((gang.slowdown_worst - 88.0 / 38.5).abs() < 1e-9);
        assert_eq!(gang.reps, 4);
    }

    #[test]
    fn counters_are_weighted_by_repetitions_and_skew_p99_is_the_largest() {
        let mut a = row(2, "dcs", &[1.0], 1.0);
        a.skew_p50_us = 50.0;
        a.context_switches = 100.0;
        a.skew_p99_us = 300.0;
        let mut b = row(2, "dcs", &[1.0, 1.0, 1.0], 1.0);
        b.context_switches = 200.0;
        b.skew_p99_us = 200.0;
        let pooled = pool(&[vec![a], vec![b]]);
        assert_eq!(pooled[0].context_switches, 175.0);
        // A report without a skew (NaN) does not pull the pooled one to 0.
        assert_eq!(pooled[0].skew_p50_us, 50.0);
        assert_eq!(pooled[0].skew_p99_us, 300.0);
        // No dedicated row in either report: no slowdown, not a guess.
        assert!(pooled[0].slowdown.is_nan());
    }

    #[test]
    fn a_cell_that_failed_in_one_report_pools_the_others_runs() {
        let a = vec![
            row(1, "dedicated", &[1.0], 1.0),
            row(2, "sb", &[2.0, 2.2], 1.0),
        ];
        let mut failed = row(2, "sb", &[], 1.0);
        failed.status = "error".into();
        failed.error = Some("launch failed".into());
        failed.failed_runs = 3;
        let b = vec![row(1, "dedicated", &[1.0], 1.0), failed];
        let pooled = pool(&[b, a]);
        assert_eq!(pooled[1].status, "ok");
        assert_eq!(pooled[1].error, None);
        assert_eq!((pooled[1].reps, pooled[1].failed_runs), (2, 3));
        assert!((pooled[1].slowdown - 2.1).abs() < 1e-12);
    }

    #[test]
    fn a_report_without_per_run_slowest_jobs_leaves_the_pooled_worst_unknown() {
        let a = vec![row(1, "dedicated", &[1.0], 1.0), row(2, "sy", &[2.0], 1.0)];
        let mut old = row(2, "sy", &[2.4], 1.0);
        old.worst_per_iteration_runs_s.clear();
        let b = vec![row(1, "dedicated", &[1.0], 1.0), old];
        let pooled = pool(&[a, b]);
        assert!((pooled[1].slowdown - 2.2).abs() < 1e-12);
        assert!(pooled[1].slowdown_worst.is_nan());
    }

    #[test]
    fn a_report_round_trips_through_json_with_its_nans() {
        let r = row(2, "gang@10ms", &[2.0], 1.0);
        let text = serde_json::to_string(&vec![r]).unwrap();
        assert!(text.contains("\"skew_p50_us\":null"), "{text}");
        let back: Vec<MpiRow> = serde_json::from_str(&text).unwrap();
        assert!(back[0].skew_p50_us.is_nan());
        assert_eq!(back[0].per_iteration_runs_s, [2.0]);
    }
}
