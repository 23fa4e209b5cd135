//! A cell's numbers (pure: from the jobs' results), the table, and issue
//! 13's targets.
use serde::{Deserialize, Serialize};

use super::{
    cell::{CellRun, JobResult},
    columns::{Admission, Column},
    stream::Mix,
};
use crate::bench::{
    common::nan_if_null,
    local::rows::{num, one_line},
};

/// The rows of one cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RtRow {
    pub mix: String,
    /// Arrivals per second (RT + BE).
    pub rate_per_s: f64,
    pub column: Column,
    pub admission: Admission,
    /// `ok` or `error`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub arrivals: usize,
    pub rt_jobs: usize,
    /// RT jobs that ran (admitted; ran to their end).
    pub rt_admitted: usize,
    pub rt_rejected: usize,
    /// RT jobs that failed for another reason (not admission).
    pub rt_failed: usize,
    /// rejected ÷ RT arrivals.
    #[serde(deserialize_with = "nan_if_null")]
    pub rt_rejection_ratio: f64,
    /// Σ (b − n) ÷ Σ b over the closed windows of the admitted RT jobs,
    /// from the benchmark's own frame counts (NaN: no window closed).
    #[serde(deserialize_with = "nan_if_null")]
    pub rt_miss_rate: f64,
    /// The same from the agents' frame accounting (what FrameReport sends).
    #[serde(deserialize_with = "nan_if_null")]
    pub rt_miss_rate_agent: f64,
    /// Admitted RT jobs that missed at least one frame.
    pub rt_jobs_missing: usize,
    /// Σ (b − n) of the admitted RT jobs' ranks by window index (window 0
    /// is each rank's first): start-up misses show in the first entries.
    pub rt_missed_by_window: Vec<u64>,
    /// Each admitted RT job's start: `{index, arrival_s, missed_by_window,
    /// ranks}` with the ranks' own timelines (CLOCK_MONOTONIC ns of start,
    /// run, first frame, first frames done, and `done_us`, every frame's
    /// done time after the first frame, for jobs that missed frames — or
    /// every job with `--frame-times`): where start-up and the frames ran
    /// against the schedule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rt_starts: Vec<serde_json::Value>,
    pub be_jobs: usize,
    pub be_finished: usize,
    pub be_failed: usize,
    /// Mean arrival-to-end time of the finished BE jobs, s.
    #[serde(deserialize_with = "nan_if_null")]
    pub be_mean_response_s: f64,
    /// Finished BE jobs per second, from the first arrival to the last BE
    /// job's end.
    #[serde(deserialize_with = "nan_if_null")]
    pub be_throughput_per_s: f64,
    /// BE jobs' CPU time ÷ (nodes × that span): the share of the
    /// cluster the BE class got.
    #[serde(deserialize_with = "nan_if_null")]
    pub be_cpu_share: f64,
    /// BE jobs' CPU time ÷ (nodes × arrival window): the BE load offered.
    #[serde(deserialize_with = "nan_if_null")]
    pub be_offered_share: f64,
    /// RT jobs' CPU time ÷ (nodes × arrival window).
    #[serde(deserialize_with = "nan_if_null")]
    pub rt_cpu_share: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub wall_s: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub outside_cpu_percent: f64,
    /// How the agents realised EDF in the RT class at the end of the cell,
    /// per node (`n0 deadline, 0 refused`: their `cosched_rt_edf_mechanism`
    /// and `cosched_rt_deadline_refused_total`); only for the coordinator's
    /// class columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edf: Option<String>,
}

/// Where a cell sits in the sweep.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub mix: Mix,
    pub rate_per_s: f64,
    pub column: Column,
    pub admission: Admission,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

/// Rows of an earlier report (`--merge`) joined with `new`: a cell
/// measured again (same mix, rate, column and admission) takes the new
/// row; the others keep theirs. Order: the earlier rows, then new cells.
pub fn merge(earlier: Vec<RtRow>, new: Vec<RtRow>) -> Vec<RtRow> {
    let same = |a: &RtRow, b: &RtRow| {
        a.mix == b.mix
            && a.rate_per_s == b.rate_per_s
            && a.column == b.column
            && a.admission == b.admission
    };
    let mut out: Vec<RtRow> = earlier
        .into_iter()
        .map(|old| new.iter().find(|n| same(n, &old)).cloned().unwrap_or(old))
        .collect();
    for row in new {
        if !out.iter().any(|o| same(o, &row)) {
            out.push(row);
        }
    }
    out
}

impl RtRow {
    /// Drops the ranks' `done_us` of the jobs in `rt_starts` that missed no
    /// frame (they make most of the JSON's size and show nothing wrong).
    pub fn keep_frame_times_of_missing_jobs_only(&mut self) {
        for job in &mut self.rt_starts {
            let missed = job["missed_by_window"]
                .as_array()
                .is_some_and(|w| w.iter().any(|m| m.as_u64().unwrap_or(0) > 0));
            if missed {
                continue;
            }
            if let Some(ranks) = job["ranks"].as_array_mut() {
                for rank in ranks {
                    if let Some(rank) = rank.as_object_mut() {
                        rank.remove("done_us");
                    }
                }
            }
        }
    }

    fn empty(key: Key) -> Self {
        Self {
            mix: key.mix.label(),
            rate_per_s: key.rate_per_s,
            column: key.column,
            admission: key.admission,
            status: "ok".into(),
            error: None,
            arrivals: 0,
            rt_jobs: 0,
            rt_admitted: 0,
            rt_rejected: 0,
            rt_failed: 0,
            rt_rejection_ratio: f64::NAN,
            rt_miss_rate: f64::NAN,
            rt_miss_rate_agent: f64::NAN,
            rt_jobs_missing: 0,
            rt_missed_by_window: Vec::new(),
            rt_starts: Vec::new(),
            be_jobs: 0,
            be_finished: 0,
            be_failed: 0,
            be_mean_response_s: f64::NAN,
            be_throughput_per_s: f64::NAN,
            be_cpu_share: f64::NAN,
            be_offered_share: f64::NAN,
            rt_cpu_share: f64::NAN,
            wall_s: f64::NAN,
            outside_cpu_percent: f64::NAN,
            edf: None,
        }
    }

    /// The row of a measured cell on `nodes` nodes over `window_s`.
    pub fn of(key: Key, run: &CellRun, nodes: usize, window_s: f64) -> Self {
        let mut row = Self::empty(key);
        let jobs = &run.jobs;
        let rt: Vec<&JobResult> = jobs.iter().filter(|j| j.class == "rt").collect();
        let be: Vec<&JobResult> = jobs.iter().filter(|j| j.class == "be").collect();
        let ran: Vec<&JobResult> = rt
            .iter()
            .copied()
            .filter(|j| j.fate == "finished")
            .collect();
        row.arrivals = jobs.len();
        row.rt_jobs = rt.len();
        row.rt_admitted = ran.len();
        row.rt_rejected = rt.iter().filter(|j| j.fate == "rejected").count();
        row.rt_failed = rt.len() - row.rt_admitted - row.rt_rejected;
        row.rt_rejection_ratio = ratio(row.rt_rejected as f64, rt.len() as f64);
        let sum = |f: fn(&JobResult) -> u64| ran.iter().map(|j| f(j)).sum::<u64>() as f64;
        row.rt_miss_rate = ratio(sum(|j| j.missed_frames), sum(|j| j.expected_frames));
        row.rt_miss_rate_agent = ratio(
            sum(|j| j.agent_missed_frames),
            sum(|j| j.agent_expected_frames),
        );
        row.rt_jobs_missing = ran.iter().filter(|j| j.missed_frames > 0).count();
        for j in &ran {
            for (i, m) in j.missed_by_window.iter().enumerate() {
                if row.rt_missed_by_window.len() <= i {
                    row.rt_missed_by_window.resize(i + 1, 0);
                }
                row.rt_missed_by_window[i] += m;
            }
            row.rt_starts.push(serde_json::json!({
                "index": j.index,
                "arrival_s": j.arrival_s,
                "missed_by_window": j.missed_by_window,
                "ranks": j.rank_timelines,
            }));
        }
        row.be_jobs = be.len();
        let done: Vec<&JobResult> = be
            .iter()
            .copied()
            .filter(|j| j.fate == "finished")
            .collect();
        row.be_finished = done.len();
        row.be_failed = be.len() - done.len();
        let responses: Vec<f64> = done.iter().filter_map(|j| j.response_s).collect();
        if !responses.is_empty() {
            row.be_mean_response_s = responses.iter().sum::<f64>() / responses.len() as f64;
        }
        let span = done
            .iter()
            .map(|j| j.arrival_s + j.response_s.unwrap_or(0.0))
            .fold(0.0, f64::max);
        row.be_throughput_per_s = ratio(done.len() as f64, span);
        let be_cpu: f64 = be.iter().map(|j| j.cpu_s).sum();
        let rt_cpu: f64 = rt.iter().map(|j| j.cpu_s).sum();
        row.be_cpu_share = ratio(be_cpu, nodes as f64 * span);
        row.be_offered_share = ratio(be_cpu, nodes as f64 * window_s);
        row.rt_cpu_share = ratio(rt_cpu, nodes as f64 * window_s);
        row.wall_s = run.wall_s;
        row.outside_cpu_percent = run.outside_cpu_percent;
        row
    }

    pub fn error(key: Key, error: &anyhow::Error) -> Self {
        Self {
            status: "error".into(),
            error: Some(one_line(&format!("{error:#}"))),
            ..Self::empty(key)
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.2}%", v * 100.0)
    } else {
        "-".into()
    }
}

/// The table, one line per cell.
pub fn table(rows: &[RtRow]) -> String {
    let mut out = format!(
        "{:<5} {:>5} {:<9} {:<13} {:>4} {:>8} {:>8} {:>9} {:>9} {:>6} {:>9} {:>8} {:>7} {:>6}\n",
        "mix",
        "rate",
        "column",
        "admission",
        "RT",
        "rejected",
        "miss",
        "miss(ag)",
        "BE resp s",
        "BE/s",
        "BE share",
        "offered",
        "wall s",
        "out %"
    );
    for r in rows {
        if !r.is_ok() {
            out += &format!(
                "{:<5} {:>5} {:<9} {:<13} error: {}\n",
                r.mix,
                num(r.rate_per_s, 1),
                r.column.label(),
                r.admission.label(),
                r.error.as_deref().unwrap_or("")
            );
            continue;
        }
        out += &format!(
            "{:<5} {:>5} {:<9} {:<13} {:>4} {:>8} {:>8} {:>9} {:>9} {:>6} {:>9} {:>8} {:>7} {:>6}\n",
            r.mix,
            num(r.rate_per_s, 1),
            r.column.label(),
            r.admission.label(),
            r.rt_jobs,
            pct(r.rt_rejection_ratio),
            pct(r.rt_miss_rate),
            pct(r.rt_miss_rate_agent),
            num(r.be_mean_response_s, 2),
            num(r.be_throughput_per_s, 2),
            pct(r.be_cpu_share),
            pct(r.be_offered_share),
            num(r.wall_s, 1),
            num(r.outside_cpu_percent, 0),
        );
    }
    out
}

/// One target of the issue and whether the run met it.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub name: String,
    /// `met`, `missed`, or `not measured`.
    pub verdict: String,
    pub detail: String,
}

impl Target {
    pub fn line(&self) -> String {
        format!("target {}: {} ({})", self.name, self.verdict, self.detail)
    }
}

fn verdict(ok: Option<bool>) -> String {
    match ok {
        Some(true) => "met".into(),
        Some(false) => "missed".into(),
        None => "not measured".into(),
    }
}

/// A cell's BE class counts as backlogged when the BE work offered is at
/// least this many times its share: its jobs then queue, and the time to
/// their last end is set by the BE work, not by the arrivals.
pub const BACKLOGGED_TIMES_SHARE: f64 = 1.5;

/// Frames missed and due over the admitted RT jobs of `rows`.
fn frames(rows: &[&RtRow]) -> (f64, f64) {
    rows.iter()
        .filter(|r| r.rt_miss_rate.is_finite())
        .fold((0.0, 0.0), |(m, e), r| {
            // Rows keep rates, not counts: weight each by its admitted jobs.
            let w = r.rt_admitted as f64;
            (m + r.rt_miss_rate * w, e + w)
        })
}

/// The targets: (1) admitted RT jobs miss nothing under 1GS with
/// admission; (2) ≤ 0.1 % under 2DCS-TDM with admission; (3) BE keep their
/// share y/(x+y) when backlogged (cells whose offered BE load reaches it);
/// (4) statistical (and probabilistic, where measured) admission rejects
/// at most half as many RT jobs as the
/// deterministic rule, at a miss rate ≤ 1 % (2DCS-TDM and 2DCS-PS).
pub fn evaluate(rows: &[RtRow], be_share: f64) -> Vec<Target> {
    let ok: Vec<&RtRow> = rows.iter().filter(|r| r.is_ok()).collect();
    let pick = |c: Column, a: Admission| -> Vec<&RtRow> {
        ok.iter()
            .copied()
            .filter(|r| r.column == c && r.admission == a && r.rt_admitted > 0)
            .collect()
    };
    let mut out = Vec::new();
    let one_gs = pick(Column::OneGs, Admission::Deterministic);
    let missing: usize = one_gs.iter().map(|r| r.rt_jobs_missing).sum();
    let admitted: usize = one_gs.iter().map(|r| r.rt_admitted).sum();
    let (m, e) = frames(&one_gs);
    out.push(Target {
        name: "1GS with admission: admitted RT jobs miss no deadline".into(),
        verdict: verdict((!one_gs.is_empty()).then_some(missing == 0)),
        detail: format!(
            "{missing} of {admitted} admitted RT jobs missed frames; miss rate {}",
            pct(m / e)
        ),
    });
    let tdm = pick(Column::Tdm, Admission::Deterministic);
    let (m, e) = frames(&tdm);
    let rate = m / e;
    out.push(Target {
        name: "2DCS-TDM with admission: miss rate <= 0.1 %".into(),
        verdict: verdict((!tdm.is_empty()).then_some(rate <= 0.001)),
        detail: format!(
            "miss rate {} over {} admitted RT jobs",
            pct(rate),
            tdm.iter().map(|r| r.rt_admitted).sum::<usize>()
        ),
    });
    let backlogged: Vec<&RtRow> = ok
        .iter()
        .copied()
        .filter(|r| r.column.coordinator_policy().is_some())
        .filter(|r| {
            r.be_offered_share >= BACKLOGGED_TIMES_SHARE * be_share && r.be_cpu_share.is_finite()
        })
        .collect();
    let worst = backlogged
        .iter()
        .min_by(|a, b| a.be_cpu_share.total_cmp(&b.be_cpu_share));
    out.push(Target {
        name: format!(
            "BE keep >= {} of the CPU when backlogged (1GS, 2DCS-TDM, 2DCS-PS)",
            pct(be_share)
        ),
        verdict: verdict(worst.map(|w| w.be_cpu_share >= be_share)),
        detail: match worst {
            Some(w) => format!(
                "{} cells with offered BE load >= {}; lowest BE share {} ({} {} {} at {}/s, offered {})",
                backlogged.len(),
                pct(BACKLOGGED_TIMES_SHARE * be_share),
                pct(w.be_cpu_share),
                w.column.label(),
                w.admission.label(),
                w.mix,
                num(w.rate_per_s, 1),
                pct(w.be_offered_share)
            ),
            None => format!(
                "no cell offered {} of BE load",
                pct(BACKLOGGED_TIMES_SHARE * be_share)
            ),
        },
    });
    for column in [Column::Tdm, Column::Ps] {
        let of = |a: Admission| -> Vec<&RtRow> {
            ok.iter()
                .copied()
                .filter(|r| r.column == column && r.admission == a)
                .collect()
        };
        let det = of(Admission::Deterministic);
        let rejected = |rs: &[&RtRow]| rs.iter().map(|r| r.rt_rejected).sum::<usize>();
        let rd = rejected(&det);
        for rule in [Admission::Statistical, Admission::Probabilistic] {
            let measured_rule = of(rule);
            if measured_rule.is_empty() && rule == Admission::Probabilistic {
                continue;
            }
            let rs = rejected(&measured_rule);
            let (m, e) = frames(&measured_rule);
            let miss = m / e;
            let measured = !det.is_empty() && !measured_rule.is_empty();
            out.push(Target {
                name: format!(
                    "{}: {} admission rejects <= half of deterministic's at miss rate <= 1 %",
                    column.label(),
                    rule.label()
                ),
                verdict: verdict(measured.then_some(2 * rs <= rd && miss <= 0.01)),
                detail: format!(
                    "rejected {rs} ({}) vs {rd} (deterministic) over the same streams; {} miss rate {}",
                    rule.label(),
                    rule.label(),
                    pct(miss)
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(class: &'static str, fate: &'static str, arrival_s: f64, response_s: f64) -> JobResult {
        JobResult {
            class,
            fate,
            arrival_s,
            response_s: (fate == "finished").then_some(response_s),
            cpu_s: 1.0,
            ..JobResult::default()
        }
    }

    fn key(column: Column, admission: Admission) -> Key {
        Key {
            mix: Mix { rt: 2, be: 1 },
            rate_per_s: 2.0,
            column,
            admission,
        }
    }

    #[test]
    fn a_split_sweep_merges_through_json_and_a_cell_measured_again_is_replaced() {
        let run = CellRun {
            jobs: vec![job("be", "finished", 1.0, 1.0)],
            wall_s: 5.0,
            outside_cpu_percent: 0.0,
        };
        let a = RtRow::of(key(Column::OneGs, Admission::Deterministic), &run, 2, 4.0);
        let b = RtRow::of(key(Column::Tdm, Admission::None), &run, 2, 4.0);
        // Through the JSON a report holds (NaN, no RT window, is null).
        let text = serde_json::to_string(&vec![a.clone(), b]).unwrap();
        let earlier: Vec<RtRow> = serde_json::from_str(&text).unwrap();
        assert!(earlier[0].rt_miss_rate.is_nan());
        let mut again = a;
        again.outside_cpu_percent = 7.0;
        let c = RtRow::of(key(Column::Fifo, Admission::None), &run, 2, 4.0);
        let merged = merge(earlier, vec![again, c]);
        let columns: Vec<Column> = merged.iter().map(|r| r.column).collect();
        assert_eq!(columns, [Column::OneGs, Column::Tdm, Column::Fifo]);
        assert_eq!(merged[0].outside_cpu_percent, 7.0);
    }

    #[test]
    fn frame_times_stay_only_for_jobs_that_missed() {
        let rank = || serde_json::json!({"first_frame_ns": 1, "done_us": [10, 20]});
        let mut missed = job("rt", "finished", 0.0, 2.0);
        missed.missed_frames = 1;
        missed.missed_by_window = vec![0, 1];
        missed.rank_timelines = vec![rank(), rank()];
        let mut clean = job("rt", "finished", 0.5, 2.0);
        clean.missed_by_window = vec![0, 0];
        clean.rank_timelines = vec![rank()];
        let run = CellRun {
            jobs: vec![missed, clean],
            wall_s: 5.0,
            outside_cpu_percent: 0.0,
        };
        let mut r = RtRow::of(key(Column::OneGs, Admission::Deterministic), &run, 2, 4.0);
        r.keep_frame_times_of_missing_jobs_only();
        assert_eq!(
            r.rt_starts[0]["ranks"][1]["done_us"],
            serde_json::json!([10, 20])
        );
        assert!(r.rt_starts[1]["ranks"][0].get("done_us").is_none());
        assert_eq!(r.rt_starts[1]["ranks"][0]["first_frame_ns"], 1);
    }

    #[test]
    fn a_cell_counts_rejections_misses_and_be_response() {
        let mut rt = job("rt", "finished", 0.0, 2.0);
        rt.missed_frames = 4;
        rt.expected_frames = 100;
        rt.agent_missed_frames = 5;
        rt.agent_expected_frames = 100;
        let run = CellRun {
            jobs: vec![
                rt,
                job("rt", "finished", 0.5, 2.0),
                job("rt", "rejected", 1.0, 0.0),
                job("rt", "failed", 1.0, 0.0),
                job("be", "finished", 1.0, 1.0),
                job("be", "finished", 2.0, 2.0),
            ],
            wall_s: 5.0,
            outside_cpu_percent: 1.0,
        };
        let mut second = run.jobs[1].clone();
        second.expected_frames = 100;
        let mut run = run;
        run.jobs[1] = second;
        let r = RtRow::of(key(Column::Tdm, Admission::Deterministic), &run, 2, 4.0);
        assert_eq!(
            (r.rt_jobs, r.rt_admitted, r.rt_rejected, r.rt_failed),
            (4, 2, 1, 1)
        );
        assert_eq!(r.rt_rejection_ratio, 0.25);
        assert_eq!(r.rt_miss_rate, 0.02);
        // The second job has no agent count: 5 of 100.
        assert_eq!(r.rt_miss_rate_agent, 0.05);
        assert_eq!(r.rt_jobs_missing, 1);
        assert_eq!(r.be_mean_response_s, 1.5);
        // Two BE jobs by t = 4 s; 2 CPU s over 2 nodes × 4 s.
        assert_eq!(r.be_throughput_per_s, 0.5);
        assert_eq!(r.be_cpu_share, 0.25);
        assert_eq!(r.be_offered_share, 0.25);
    }

    #[test]
    fn an_empty_cell_has_no_rates_rather_than_zeros() {
        let r = RtRow::of(
            key(Column::Fifo, Admission::None),
            &CellRun::default(),
            2,
            4.0,
        );
        assert!(r.rt_miss_rate.is_nan() && r.be_mean_response_s.is_nan());
        assert!(r.rt_rejection_ratio.is_nan());
    }

    fn row(
        column: Column,
        admission: Admission,
        admitted: usize,
        rejected: usize,
        miss: f64,
        missing: usize,
    ) -> RtRow {
        RtRow {
            rt_admitted: admitted,
            rt_rejected: rejected,
            rt_miss_rate: miss,
            rt_jobs_missing: missing,
            be_offered_share: 0.1,
            be_cpu_share: 0.1,
            ..RtRow::empty(key(column, admission))
        }
    }

    #[test]
    fn targets_judge_the_admission_rows() {
        let rows = vec![
            row(Column::OneGs, Admission::Deterministic, 5, 9, 0.0, 0),
            row(Column::Tdm, Admission::Deterministic, 10, 8, 0.0005, 1),
            row(Column::Tdm, Admission::Statistical, 14, 4, 0.008, 3),
            row(Column::Tdm, Admission::Probabilistic, 13, 5, 0.02, 2),
            row(Column::Ps, Admission::Deterministic, 10, 8, 0.0, 0),
            row(Column::Ps, Admission::Statistical, 12, 6, 0.002, 1),
        ];
        let t = evaluate(&rows, 1.0 / 3.0);
        let verdicts: Vec<&str> = t.iter().map(|t| t.verdict.as_str()).collect();
        // TDM probabilistic: 5 of 8 rejections is more than half, and 2 %
        // misses; PS has no probabilistic row: no target for it.
        assert_eq!(
            verdicts,
            ["met", "met", "not measured", "met", "missed", "missed"]
        );
        assert!(t[4].name.contains("probabilistic"), "{}", t[4].name);
        let mut bad = rows.clone();
        bad[0].rt_jobs_missing = 1;
        bad[1].rt_miss_rate = 0.01;
        let t = evaluate(&bad, 1.0 / 3.0);
        assert_eq!(t[0].verdict, "missed");
        assert_eq!(t[1].verdict, "missed");
    }

    #[test]
    fn the_be_share_target_looks_at_backlogged_coordinator_cells_only() {
        let mut starved = row(Column::Tdm, Admission::None, 1, 0, 0.0, 0);
        starved.be_offered_share = 0.6;
        starved.be_cpu_share = 0.2;
        let mut fifo = row(Column::Fifo, Admission::None, 1, 0, 0.0, 0);
        fifo.be_offered_share = 0.6;
        fifo.be_cpu_share = 0.01;
        let t = evaluate(&[fifo.clone()], 1.0 / 3.0);
        assert_eq!(t[2].verdict, "not measured");
        let t = evaluate(&[fifo, starved], 1.0 / 3.0);
        assert_eq!(t[2].verdict, "missed");
        assert!(t[2].detail.contains("2dcs-tdm"), "{}", t[2].detail);
    }
}
