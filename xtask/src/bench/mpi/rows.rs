//! The rows of `bench mpi` (one per library, workload, MPL and column; the
//! dedicated run is the row with MPL 1), the table, and the rows the
//! slowdown chart of `bench local` draws.
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{
    columns::Column,
    matrix::{Key, Plan, Samples, dedicated_key},
    run::RunResult,
};
use crate::bench::local::{
    metrics::median_finite,
    rows::{Row, num, one_line, sample_chart_row},
};
use crate::bench::{
    common::{nan_if_null, nans_if_null},
    gang::skew::Histogram,
};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MpiRow {
    pub lib: String,
    pub workload: String,
    pub mpl: u32,
    pub column: String,
    /// `ok`, `error` (no run succeeded) or `not-run` (the column cannot run
    /// for this library yet; `error` says why).
    pub status: String,
    pub error: Option<String>,
    /// Successful repetitions behind the medians.
    pub reps: usize,
    /// Runs that failed (an error, or a job hung past the timeout) and were
    /// repeated or given up; not in the medians.
    pub failed_runs: u32,
    /// Median over repetitions of the jobs' mean time per iteration ÷ the
    /// median dedicated time per iteration (HPCC: whole runs).
    #[serde(deserialize_with = "nan_if_null")]
    pub slowdown: f64,
    /// The same for the slowest job of each run.
    #[serde(deserialize_with = "nan_if_null")]
    pub slowdown_worst: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub per_iteration_s: f64,
    /// Each successful run's mean time per iteration over its jobs, in the
    /// order run: the spread behind the median (for the dedicated row, the
    /// runs that bracket every MPL block).
    #[serde(deserialize_with = "nans_if_null")]
    pub per_iteration_runs_s: Vec<f64>,
    /// Each successful run's slowest job's time per iteration, in the same
    /// order (reports older than this field have none).
    #[serde(default, deserialize_with = "nans_if_null")]
    pub worst_per_iteration_runs_s: Vec<f64>,
    #[serde(deserialize_with = "nan_if_null")]
    pub dedicated_per_iteration_s: f64,
    /// The latest any job reached the common start (s; 0: all on time).
    #[serde(deserialize_with = "nan_if_null")]
    pub late_start_s: f64,
    /// Per job, medians: what the agents saw and did.
    #[serde(deserialize_with = "nan_if_null")]
    pub messages_observed: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub cpu_seconds: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub spin_seconds: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub context_switches: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub boosts: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub actions: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub agent_cpu_percent: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub outside_cpu_percent: f64,
    /// Coordinator columns: the coordinator's slice-switch skew over every
    /// run of the cell (one histogram), µs; NaN (null) elsewhere.
    #[serde(deserialize_with = "nan_if_null")]
    pub skew_p50_us: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub skew_p99_us: f64,
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Median over runs of the per-run value `f`.
fn med(runs: &[RunResult], f: impl Fn(&RunResult) -> f64) -> f64 {
    median_finite(runs.iter().map(f))
}

/// Median over runs of the mean over jobs of `f`.
fn med_jobs(runs: &[RunResult], f: impl Fn(&super::run::JobRun) -> f64) -> f64 {
    med(runs, |r| mean(r.jobs.iter().map(&f)))
}

/// A run's slowest job's time per iteration.
fn slowest_job_per_iteration_s(r: &RunResult) -> f64 {
    r.jobs
        .iter()
        .map(|j| j.per_iteration_s)
        .fold(f64::NAN, f64::max)
}

/// Every row of the plan, in the table's order.
pub fn rows(plan: &Plan, s: &Samples) -> Vec<MpiRow> {
    let mut out = Vec::new();
    for (lib, w) in plan.pairs() {
        let dedicated = s.runs.get(&dedicated_key(lib, w)).map(Vec::as_slice);
        let dedicated_per_iteration_s =
            dedicated.map_or(f64::NAN, |r| med_jobs(r, |j| j.per_iteration_s));
        out.push(row(
            dedicated_key(lib, w),
            None,
            s,
            dedicated_per_iteration_s,
            None,
        ));
        for &mpl in &plan.mpls {
            for col in &plan.columns {
                let key: Key = (lib, w, mpl, col.label());
                out.push(row(
                    key,
                    Some(col),
                    s,
                    dedicated_per_iteration_s,
                    col.not_runnable(lib),
                ));
            }
        }
    }
    out
}

fn row(
    key: Key,
    _col: Option<&Column>,
    s: &Samples,
    dedicated_per_iteration_s: f64,
    not_run: Option<String>,
) -> MpiRow {
    let runs = s.runs.get(&key).map(Vec::as_slice).unwrap_or(&[]);
    let error = not_run.clone().or_else(|| s.errors.get(&key).cloned());
    let status = if not_run.is_some() {
        "not-run"
    } else if runs.is_empty() {
        "error"
    } else {
        "ok"
    };
    let per_iteration_s = med_jobs(runs, |j| j.per_iteration_s);
    let mut skew = Histogram::default();
    runs.iter()
        .filter_map(|r| r.skew.as_ref())
        .for_each(|h| skew.add(h));
    let worst_runs: Vec<f64> = runs.iter().map(slowest_job_per_iteration_s).collect();
    let worst = median_finite(worst_runs.iter().copied());
    MpiRow {
        lib: key.0.as_str().into(),
        workload: key.1.as_str().into(),
        mpl: key.2,
        column: key.3.clone(),
        status: status.into(),
        error,
        reps: runs.len(),
        failed_runs: s.failed_runs.get(&key).copied().unwrap_or(0),
        slowdown: per_iteration_s / dedicated_per_iteration_s,
        slowdown_worst: worst / dedicated_per_iteration_s,
        per_iteration_s,
        per_iteration_runs_s: runs
            .iter()
            .map(|r| mean(r.jobs.iter().map(|j| j.per_iteration_s)))
            .collect(),
        worst_per_iteration_runs_s: worst_runs,
        dedicated_per_iteration_s,
        late_start_s: med(runs, |r| {
            r.jobs.iter().map(|j| j.late_start_s).fold(0.0, f64::max)
        }),
        messages_observed: med_jobs(runs, |j| j.stats.messages_observed as f64),
        cpu_seconds: med_jobs(runs, |j| j.stats.cpu_seconds),
        spin_seconds: med_jobs(runs, |j| j.stats.spin_seconds),
        context_switches: med_jobs(runs, |j| {
            (j.stats.switches_voluntary + j.stats.switches_preempted) as f64
        }),
        boosts: med_jobs(runs, |j| j.stats.boosts as f64),
        actions: med_jobs(runs, |j| j.stats.actions as f64),
        agent_cpu_percent: med(runs, |r| r.agent_cpu_percent),
        outside_cpu_percent: med(runs, |r| r.outside_cpu_percent),
        skew_p50_us: skew.quantile(0.5) * 1e6,
        skew_p99_us: skew.quantile(0.99) * 1e6,
    }
}

#[cfg(test)]
impl MpiRow {
    /// A measured row for tests: `runs` per-iteration times (each run's
    /// slowest job 10 % slower), slowdown against `dedicated`, counters 0.
    pub fn measured(lib: &str, w: &str, mpl: u32, col: &str, runs: &[f64], dedicated: f64) -> Self {
        let per_iteration_s = median_finite(runs.iter().copied());
        let worst: Vec<f64> = runs.iter().map(|t| t * 1.1).collect();
        MpiRow {
            lib: lib.into(),
            workload: w.into(),
            mpl,
            column: col.into(),
            status: "ok".into(),
            error: None,
            reps: runs.len(),
            failed_runs: 0,
            slowdown: per_iteration_s / dedicated,
            slowdown_worst: median_finite(worst.iter().copied()) / dedicated,
            per_iteration_s,
            per_iteration_runs_s: runs.to_vec(),
            worst_per_iteration_runs_s: worst,
            dedicated_per_iteration_s: dedicated,
            late_start_s: 0.0,
            messages_observed: 0.0,
            cpu_seconds: 0.0,
            spin_seconds: 0.0,
            context_switches: 0.0,
            boosts: 0.0,
            actions: 0.0,
            agent_cpu_percent: 0.0,
            outside_cpu_percent: 0.0,
            skew_p50_us: f64::NAN,
            skew_p99_us: f64::NAN,
        }
    }
}

/// The stdout table.
pub fn table(rows: &[MpiRow]) -> String {
    let mut out = format!(
        "{:<8} {:<10} {:>3} {:<17} {:>8} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}\n",
        "lib",
        "workload",
        "mpl",
        "column",
        "slowdown",
        "worst",
        "iter_us",
        "late_ms",
        "msgs",
        "ctx_sw",
        "boosts",
        "agent%",
        "other%"
    );
    for r in rows {
        let _ = write!(
            out,
            "{:<8} {:<10} {:>3} {:<17} {:>8} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}",
            r.lib,
            r.workload,
            r.mpl,
            r.column,
            num(r.slowdown, 2),
            num(r.slowdown_worst, 2),
            num(r.per_iteration_s * 1e6, 1),
            num(r.late_start_s * 1e3, 0),
            num(r.messages_observed, 0),
            num(r.context_switches, 0),
            num(r.boosts, 0),
            num(r.agent_cpu_percent, 2),
            num(r.outside_cpu_percent, 1),
        );
        if r.status != "ok"
            && let Some(e) = &r.error
        {
            let _ = write!(out, "  {}: {}", r.status, one_line(e));
        }
        out.push('\n');
    }
    out
}

/// The rows as `bench local`'s chart draws them: one panel per MPL, a
/// group per library and workload, a bar per measured column.
pub fn chart_rows(rows: &[MpiRow]) -> Vec<Row> {
    rows.iter()
        .filter(|r| r.status == "ok" && r.mpl > 1)
        .map(|r| {
            sample_chart_row(
                &format!("{} {}", r.lib, r.workload),
                &r.column,
                r.mpl,
                &r.column,
                r.slowdown,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        bench::mpi::{run::JobRun, workloads::MpiWorkload},
        mpi::Library,
    };

    fn run(times: &[f64]) -> RunResult {
        RunResult {
            jobs: times
                .iter()
                .map(|&t| JobRun {
                    per_iteration_s: t,
                    ..JobRun::default()
                })
                .collect(),
            ..RunResult::default()
        }
    }

    #[test]
    fn slowdown_is_the_median_mean_time_over_the_median_dedicated_time() {
        let plan = Plan {
            libs: vec![Library::Mpich],
            workloads: vec![MpiWorkload::Pingpong, MpiWorkload::Hpcc],
            mpls: vec![2],
            columns: vec![Column::Policy("local".into()), Column::Yield],
            reps: 3,
        };
        let mut s = Samples::default();
        let d = dedicated_key(Library::Mpich, MpiWorkload::Pingpong);
        s.runs
            .insert(d, vec![run(&[1.0]), run(&[1.2]), run(&[0.9])]);
        let k = (
            Library::Mpich,
            MpiWorkload::Pingpong,
            2,
            "local".to_string(),
        );
        s.runs.insert(
            k,
            vec![run(&[2.0, 3.0]), run(&[2.0, 2.0]), run(&[3.0, 3.0])],
        );
        let rows = rows(&plan, &s);
        // HPCC is not packaged for MPICH: no rows for it.
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].mpl, rows[0].column.as_str()), (1, "dedicated"));
        assert_eq!(rows[0].slowdown, 1.0);
        assert_eq!(rows[1].status, "ok");
        assert_eq!(rows[1].slowdown, 2.5);
        assert_eq!(rows[1].slowdown_worst, 3.0);
        assert_eq!(rows[2].status, "not-run");
        assert!(rows[2].error.as_deref().unwrap().contains("no yield mode"));
        let text = table(&rows);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert_eq!(chart_rows(&rows).len(), 1);
    }

    #[test]
    fn a_gang_cell_pools_its_runs_skew_and_keeps_every_runs_time() {
        let plan = Plan {
            libs: vec![Library::Mpich],
            workloads: vec![MpiWorkload::Pingpong],
            mpls: vec![2],
            columns: vec![Column::Coordinator {
                policy: "gang",
                slice_ms: 10,
                paired_ahead: false,
            }],
            reps: 2,
        };
        let mut s = Samples::default();
        s.runs.insert(
            dedicated_key(Library::Mpich, MpiWorkload::Pingpong),
            vec![run(&[1.0]), run(&[1.1])],
        );
        // Two runs: 90 slices within 10 µs and 10 within 1 ms, then 100
        // within 10 µs: pooled, the 95th of 200 is within 10 µs, the
        // 199th beyond it.
        let with_skew = |t: f64, fast: f64, slow: f64| RunResult {
            skew: Some(Histogram {
                buckets: vec![
                    (10e-6, fast),
                    (1e-3, fast + slow),
                    (f64::INFINITY, fast + slow),
                ],
            }),
            ..run(&[t])
        };
        let k = (
            Library::Mpich,
            MpiWorkload::Pingpong,
            2,
            "gang@10ms".to_string(),
        );
        s.runs.insert(
            k,
            vec![with_skew(2.0, 90.0, 10.0), with_skew(2.2, 100.0, 0.0)],
        );
        let rows = rows(&plan, &s);
        assert_eq!(rows[0].per_iteration_runs_s, [1.0, 1.1]);
        assert!(
            rows[0].skew_p50_us.is_nan(),
            "no skew without a coordinator"
        );
        assert_eq!(rows[1].per_iteration_runs_s, [2.0, 2.2]);
        assert!(rows[1].skew_p50_us <= 10.0, "{}", rows[1].skew_p50_us);
        assert!(rows[1].skew_p99_us > 10.0, "{}", rows[1].skew_p99_us);
    }

    #[test]
    fn a_cell_whose_runs_hung_reports_them_apart_from_its_medians() {
        let plan = Plan {
            libs: vec![Library::Mpich],
            workloads: vec![MpiWorkload::Allreduce],
            mpls: vec![2],
            columns: vec![Column::Policy("local".into())],
            reps: 2,
        };
        let mut s = Samples::default();
        s.runs.insert(
            dedicated_key(Library::Mpich, MpiWorkload::Allreduce),
            vec![run(&[1.0])],
        );
        let k = (
            Library::Mpich,
            MpiWorkload::Allreduce,
            2,
            "local".to_string(),
        );
        // Two repetitions kept, one run hung and was repeated.
        s.runs.insert(k.clone(), vec![run(&[2.0]), run(&[4.0])]);
        s.failed_runs.insert(k, 1);
        let rows = rows(&plan, &s);
        assert_eq!(rows[0].failed_runs, 0);
        assert_eq!((rows[1].reps, rows[1].failed_runs), (2, 1));
        assert_eq!(rows[1].slowdown, 3.0);
    }
}
