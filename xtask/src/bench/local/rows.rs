//! One result row per (workload, policy, MPL, job): the JSON record and the
//! stdout table. A failed cell still gets its rows, marked `error` with the
//! reason, so a report always shows what was attempted.
use std::fmt::Write as _;

use serde::Serialize;

use super::metrics::{RunMetrics, scheduling_skewness_us, slowdown};

/// What identifies a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowKey {
    pub workload: String,
    pub policy: String,
    pub mpl: u32,
    pub job: String,
}

/// One row. Numbers are medians over `reps` repetitions; undefined ones (and
/// all of an error row's) are NaN, which serde_json writes as `null`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: String,
    pub policy: String,
    pub mpl: u32,
    pub job: String,
    /// `ok` or `error`.
    pub status: String,
    pub error: Option<String>,
    /// Repetitions behind the medians (completed ones for an error row).
    pub reps: usize,
    pub slowdown: f64,
    pub iterations_per_s: f64,
    pub dedicated_iterations_per_s: f64,
    pub spin_fraction: f64,
    pub boosts: f64,
    pub actions: f64,
    pub reaction_latency_p50_us: f64,
    pub reaction_latency_p99_us: f64,
    pub context_switches: f64,
    pub scheduling_skewness_us: f64,
    pub pace_of_progress: f64,
    pub loss_of_cpu: f64,
    pub agent_cpu_percent: f64,
    /// Each repetition's slowdown and pace of progress, in run order (the
    /// medians above hide a repetition in which one job ran ahead of another).
    pub slowdown_runs: Vec<f64>,
    pub pace_runs: Vec<f64>,
}

impl Row {
    /// A measured row: `runs` are the repetitions, `dedicated` the median
    /// of the dedicated runs.
    pub fn ok(key: RowKey, runs: &[RunMetrics], dedicated: &RunMetrics) -> Self {
        let shared = &RunMetrics::median(runs);
        Self {
            status: "ok".into(),
            error: None,
            reps: runs.len(),
            slowdown_runs: runs
                .iter()
                .map(|r| slowdown(dedicated.iterations_per_s, r.iterations_per_s))
                .collect(),
            pace_runs: runs.iter().map(|r| r.pace_of_progress).collect(),
            slowdown: slowdown(dedicated.iterations_per_s, shared.iterations_per_s),
            iterations_per_s: shared.iterations_per_s,
            dedicated_iterations_per_s: dedicated.iterations_per_s,
            spin_fraction: shared.spin_fraction,
            boosts: shared.boosts,
            actions: shared.actions,
            reaction_latency_p50_us: shared.reaction_latency_p50_us,
            reaction_latency_p99_us: shared.reaction_latency_p99_us,
            context_switches: shared.context_switches,
            scheduling_skewness_us: scheduling_skewness_us(shared, dedicated),
            pace_of_progress: shared.pace_of_progress,
            loss_of_cpu: shared.loss_of_cpu,
            agent_cpu_percent: shared.agent_cpu_percent,
            ..Self::empty(key)
        }
    }

    /// A row whose cell failed; `error` is the whole context chain.
    pub fn error(key: RowKey, error: &anyhow::Error, reps: usize) -> Self {
        Self {
            status: "error".into(),
            error: Some(format!("{error:#}")),
            reps,
            ..Self::empty(key)
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }

    fn empty(key: RowKey) -> Self {
        let nan = f64::NAN;
        Self {
            workload: key.workload,
            policy: key.policy,
            mpl: key.mpl,
            job: key.job,
            status: String::new(),
            error: None,
            reps: 0,
            slowdown: nan,
            iterations_per_s: nan,
            dedicated_iterations_per_s: nan,
            spin_fraction: nan,
            boosts: nan,
            actions: nan,
            reaction_latency_p50_us: nan,
            reaction_latency_p99_us: nan,
            context_switches: nan,
            scheduling_skewness_us: nan,
            pace_of_progress: nan,
            loss_of_cpu: nan,
            agent_cpu_percent: nan,
            slowdown_runs: Vec::new(),
            pace_runs: Vec::new(),
        }
    }
}

/// `v` with `decimals`, or `-` when undefined.
pub fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "-".into()
    }
}

/// `text` on one line (whitespace runs, newlines included, become one
/// space): agent errors quote TOML snippets over several lines.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The stdout table, one line per row; an error row ends with its reason.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<11} {:<7} {:>3} {:<13} {:>8} {:>9} {:>6} {:>6} {:>5} {:>8} {:>7} {:>7} {:>7} {:>8} {:>7}\n",
        "workload",
        "policy",
        "mpl",
        "job",
        "slowdown",
        "iter/s",
        "spin%",
        "loss%",
        "pace",
        "skew_us",
        "boosts",
        "p50_us",
        "p99_us",
        "ctx_sw",
        "agent%",
    );
    for r in rows {
        let _ = write!(
            out,
            "{:<11} {:<7} {:>3} {:<13} {:>8} {:>9} {:>6} {:>6} {:>5} {:>8} {:>7} {:>7} {:>7} {:>8} {:>7}",
            r.workload,
            r.policy,
            r.mpl,
            r.job,
            num(r.slowdown, 2),
            num(r.iterations_per_s, 0),
            num(r.spin_fraction * 100.0, 1),
            num(r.loss_of_cpu * 100.0, 1),
            num(r.pace_of_progress, 2),
            num(r.scheduling_skewness_us, 1),
            num(r.boosts, 0),
            num(r.reaction_latency_p50_us, 1),
            num(r.reaction_latency_p99_us, 1),
            num(r.context_switches, 0),
            num(r.agent_cpu_percent, 2),
        );
        if let Some(e) = &r.error {
            let _ = write!(out, "  error: {}", one_line(e));
        }
        out.push('\n');
    }
    out
}

/// A measured row with just a slowdown, for the tests of the summary and
/// the chart.
#[cfg(test)]
pub fn sample_row(workload: &str, policy: &str, mpl: u32, job: &str, slowdown: f64) -> Row {
    sample_chart_row(workload, policy, mpl, job, slowdown)
}

/// A measured row with just a slowdown: what the chart needs, for benches
/// with rows of their own (`bench mpi`).
pub fn sample_chart_row(workload: &str, policy: &str, mpl: u32, job: &str, slowdown: f64) -> Row {
    let key = RowKey {
        workload: workload.into(),
        policy: policy.into(),
        mpl,
        job: job.into(),
    };
    Row {
        status: "ok".into(),
        slowdown,
        reps: 1,
        ..Row::empty(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(policy: &str, job: &str) -> RowKey {
        RowKey {
            workload: "fine-spin".into(),
            policy: policy.into(),
            mpl: 2,
            job: job.into(),
        }
    }

    fn metrics(ips: f64, wait_us: f64) -> RunMetrics {
        RunMetrics {
            iterations_per_s: ips,
            wait_per_iteration_us: wait_us,
            spin_fraction: 0.5,
            boosts: 7.0,
            reaction_latency_p50_us: f64::NAN,
            reaction_latency_p99_us: f64::NAN,
            ..RunMetrics::default()
        }
    }

    #[test]
    fn ok_row_json_has_every_documented_key() {
        let row = Row::ok(
            key("dcs", "fine-spin-1"),
            &[metrics(10_000.0, 60.0), metrics(15_000.0, 60.0)],
            &metrics(30_000.0, 10.0),
        );
        let json = serde_json::to_value(&row).unwrap();
        for k in [
            "workload",
            "policy",
            "mpl",
            "job",
            "status",
            "slowdown",
            "iterations_per_s",
            "spin_fraction",
            "boosts",
            "reaction_latency_p50_us",
            "reaction_latency_p99_us",
            "context_switches",
            "scheduling_skewness_us",
            "pace_of_progress",
            "loss_of_cpu",
            "agent_cpu_percent",
            "reps",
            "dedicated_iterations_per_s",
            "slowdown_runs",
            "pace_runs",
        ] {
            assert!(json.get(k).is_some(), "missing {k}");
        }
        assert_eq!(json["reps"], 2);
        assert_eq!(json["slowdown"], 2.4, "of the median, 12,500 iterations/s");
        assert_eq!(json["slowdown_runs"], serde_json::json!([3.0, 2.0]));
        assert_eq!(json["scheduling_skewness_us"], 50.0);
        assert_eq!(json["status"], "ok");
        assert!(json["reaction_latency_p50_us"].is_null(), "NaN -> null");
    }

    #[test]
    fn error_rows_keep_the_reason_and_null_numbers() {
        let e = anyhow::anyhow!("the agent refused").context("switching to sb");
        let row = Row::error(key("sb", "fine-spin-1"), &e, 0);
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["status"], "error");
        assert_eq!(json["error"], "switching to sb: the agent refused");
        assert!(json["slowdown"].is_null());
        let text = table(&[row]);
        assert!(
            text.contains("error: switching to sb: the agent refused"),
            "{text}"
        );
    }

    #[test]
    fn multi_line_errors_stay_on_their_row() {
        let e = anyhow::anyhow!("parse error\n  |\n4 | policy = \"x\"\n");
        let text = table(&[Row::error(key("x", "j"), &e, 0)]);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.contains("error: parse error | 4 | policy = \"x\""),
            "{text}"
        );
    }

    #[test]
    fn table_has_a_header_and_one_line_per_row() {
        let row = Row::ok(
            key("local", "fine-spin-2"),
            &[metrics(7_000.0, 0.0)],
            &metrics(31_000.0, 0.0),
        );
        let text = table(&[row.clone(), row]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("workload"));
        assert!(
            lines[1].contains("4.43") && lines[1].contains("50.0"),
            "{}",
            lines[1]
        );
    }
}
