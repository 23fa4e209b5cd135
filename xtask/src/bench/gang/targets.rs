//! The targets of issue 4 item 6, evaluated on the rows:
//!
//! - gang scheduling of two fine-grain jobs at 10 ms slices: every job's
//!   slowdown within 5 % of 2.0 (each job gets half of every node, and
//!   loses nothing to waiting for a descheduled peer);
//! - paired gang on Paired Gang Scheduling's mix 1 (1 I/O-bound + 3 compute-bound jobs):
//!   total progress (barriers/s summed over the jobs) at least 1.6 × strict
//!   gang's, at each slice length measured;
//! - slice-switch skew p99 ≤ 1 ms over every slice of every coordinator run.
use super::{rows::GangRow, skew::Histogram};

pub const GANG_SLICE_MS: u64 = 10;
pub const GANG_SLOWDOWN: f64 = 2.0;
pub const GANG_TOLERANCE: f64 = 0.05;
pub const PAIRED_MIN_RATIO: f64 = 1.6;
pub const SKEW_P99_MAX_US: f64 = 1000.0;

/// One target: what was measured and whether it is met (`None`: not
/// measured in this run).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub name: String,
    pub goal: String,
    pub measured: String,
    pub met: Option<bool>,
}

impl Target {
    pub fn line(&self) -> String {
        let verdict = match self.met {
            Some(true) => "met",
            Some(false) => "NOT MET",
            None => "not measured",
        };
        format!(
            "target {}: {} | measured {} | {verdict}",
            self.name, self.goal, self.measured
        )
    }
}

fn ok_rows<'a>(
    rows: &'a [GangRow],
    workload: &'a str,
    policy: &'a str,
    slice: u64,
) -> impl Iterator<Item = &'a GangRow> + Clone {
    rows.iter().filter(move |r| {
        r.row.workload == workload && r.row.policy == policy && r.slice_ms == Some(slice)
    })
}

/// Every target, in the order above.
pub fn evaluate(rows: &[GangRow], skew_all: &Histogram) -> Vec<Target> {
    let mut targets = vec![gang_slowdown(rows)];
    targets.extend(paired_progress(rows));
    targets.push(switch_skew(rows, skew_all));
    targets
}

fn gang_slowdown(rows: &[GangRow]) -> Target {
    let cell = ok_rows(rows, "comm", "gang", GANG_SLICE_MS);
    let lo = GANG_SLOWDOWN * (1.0 - GANG_TOLERANCE);
    let hi = GANG_SLOWDOWN * (1.0 + GANG_TOLERANCE);
    let (measured, met) = if cell.clone().next().is_none() {
        ("-".to_string(), None)
    } else if cell.clone().all(GangRow::is_ok) {
        let slowdowns: Vec<f64> = cell.map(|r| r.row.slowdown).collect();
        let text = slowdowns
            .iter()
            .map(|s| format!("{s:.2}"))
            .collect::<Vec<_>>()
            .join(" / ");
        let met = slowdowns.iter().all(|s| (lo..=hi).contains(s));
        (text, Some(met))
    } else {
        ("error".to_string(), Some(false))
    };
    Target {
        name: "gang-slowdown".into(),
        goal: format!(
            "comm (2 fine-grain jobs), gang at {GANG_SLICE_MS} ms: every job's slowdown in {lo:.2}..{hi:.2}"
        ),
        measured,
        met,
    }
}

/// One target per slice at which both gang and paired gang ran mix 1.
fn paired_progress(rows: &[GangRow]) -> Vec<Target> {
    let mut slices: Vec<u64> = rows
        .iter()
        .filter(|r| r.row.workload == "mix1" && r.row.policy == "paired-gang")
        .filter_map(|r| r.slice_ms)
        .collect();
    slices.sort_unstable();
    slices.dedup();
    let goal = |slice: u64| {
        format!(
            "mix1 at {slice} ms: paired gang total barriers/s >= {PAIRED_MIN_RATIO} x strict gang's"
        )
    };
    if slices.is_empty() {
        return vec![Target {
            name: "paired-progress".into(),
            goal: goal(GANG_SLICE_MS),
            measured: "-".into(),
            met: None,
        }];
    }
    slices
        .into_iter()
        .map(|slice| {
            let total = |policy| {
                ok_rows(rows, "mix1", policy, slice)
                    .next()
                    .map(|r| r.total_progress_per_s)
                    .filter(|t| t.is_finite())
            };
            let (measured, met) = match (total("paired-gang"), total("gang")) {
                (Some(paired), Some(strict)) if strict > 0.0 => {
                    let ratio = paired / strict;
                    (
                        format!("{paired:.0} / {strict:.0} = {ratio:.2}x"),
                        Some(ratio >= PAIRED_MIN_RATIO),
                    )
                }
                (Some(_), None) => ("strict gang not measured".into(), None),
                _ => ("error".into(), Some(false)),
            };
            Target {
                name: format!("paired-progress-{slice}ms"),
                goal: goal(slice),
                measured,
                met,
            }
        })
        .collect()
}

fn switch_skew(rows: &[GangRow], all: &Histogram) -> Target {
    let p99 = all.quantile(0.99) * 1e6;
    let worst = rows
        .iter()
        .filter(|r| r.switch_skew_p99_us.is_finite())
        .max_by(|a, b| a.switch_skew_p99_us.total_cmp(&b.switch_skew_p99_us));
    let (measured, met) = if p99.is_finite() {
        let mut text = format!(
            "p99 {p99:.0} us over {:.0} slices, max {:.0} us",
            all.count(),
            all.quantile(1.0) * 1e6
        );
        if let Some(w) = worst {
            text.push_str(&format!(
                " (worst cell: {} {}, p99 {:.0} us)",
                w.row.workload,
                w.column(),
                w.switch_skew_p99_us
            ));
        }
        (text, Some(p99 <= SKEW_P99_MAX_US))
    } else {
        ("-".into(), None)
    };
    Target {
        name: "switch-skew".into(),
        goal: format!("slice switch skew p99 <= {SKEW_P99_MAX_US:.0} us over all coordinator runs"),
        measured,
        met,
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::sample;
    use super::*;

    fn comm_gang(s1: f64, s2: f64) -> Vec<GangRow> {
        [s1, s2]
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let mut r = sample(
                    "comm",
                    "gang",
                    Some(10),
                    &format!("fine-spin-{}", i + 1),
                    1.0,
                );
                r.row.slowdown = s;
                r
            })
            .collect()
    }

    fn mix1(policy: &str, slice: u64, total: f64) -> GangRow {
        let mut r = sample("mix1", policy, Some(slice), "io-bound-1", 1.0);
        r.total_progress_per_s = total;
        r
    }

    #[test]
    fn gang_slowdown_needs_every_job_within_five_percent_of_two() {
        assert_eq!(gang_slowdown(&comm_gang(1.95, 2.08)).met, Some(true));
        let t = gang_slowdown(&comm_gang(1.95, 2.15));
        assert_eq!(t.met, Some(false));
        assert_eq!(t.measured, "1.95 / 2.15");
        assert_eq!(gang_slowdown(&comm_gang(1.89, 2.0)).met, Some(false));
        // At another slice it does not count.
        let mut at50 = comm_gang(2.0, 2.0);
        at50.iter_mut().for_each(|r| r.slice_ms = Some(50));
        assert_eq!(gang_slowdown(&at50).met, None);
        let mut failed = comm_gang(2.0, 2.0);
        failed[0].row.status = "error".into();
        assert_eq!(gang_slowdown(&failed).met, Some(false));
    }

    #[test]
    fn paired_progress_is_a_ratio_of_totals_per_slice() {
        let rows = vec![
            mix1("gang", 10, 200.0),
            mix1("paired-gang", 10, 330.0),
            mix1("gang", 50, 200.0),
            mix1("paired-gang", 50, 310.0),
        ];
        let t = paired_progress(&rows);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "paired-progress-10ms");
        assert_eq!(t[0].met, Some(true));
        assert_eq!(t[0].measured, "330 / 200 = 1.65x");
        assert_eq!(t[1].met, Some(false), "1.55x at 50 ms");
        assert_eq!(paired_progress(&[])[0].met, None);
        let only_paired = [mix1("paired-gang", 10, 330.0)];
        assert_eq!(paired_progress(&only_paired)[0].met, None);
    }

    #[test]
    fn skew_uses_every_slice_and_names_the_worst_cell() {
        let all = Histogram {
            buckets: vec![
                (0.000_256, 90.0),
                (0.000_512, 99.0),
                (0.001_024, 100.0),
                (f64::INFINITY, 100.0),
            ],
        };
        let mut worst = comm_gang(2.0, 2.0);
        worst[0].switch_skew_p99_us = 900.0;
        worst[1].switch_skew_p99_us = 300.0;
        let t = switch_skew(&worst, &all);
        assert_eq!(t.met, Some(true), "{}", t.measured);
        assert!(
            t.measured.starts_with("p99 512 us over 100 slices"),
            "{}",
            t.measured
        );
        assert!(
            t.measured.contains("comm gang 10ms, p99 900 us"),
            "{}",
            t.measured
        );
        let late = Histogram {
            buckets: vec![
                (0.000_512, 50.0),
                (0.002_048, 100.0),
                (f64::INFINITY, 100.0),
            ],
        };
        assert_eq!(switch_skew(&[], &late).met, Some(false));
        assert_eq!(switch_skew(&[], &Histogram::default()).met, None);
    }

    #[test]
    fn lines_say_the_verdict() {
        let t = Target {
            name: "x".into(),
            goal: "g".into(),
            measured: "m".into(),
            met: Some(false),
        };
        assert_eq!(t.line(), "target x: g | measured m | NOT MET");
    }
}
