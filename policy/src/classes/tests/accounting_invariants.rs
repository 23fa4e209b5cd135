//! Property tests of frame accounting and admission over random inputs:
//! - every closed window has misses + min(frames, b) = b, windows close in
//!   order and on time;
//! - admission never loads a node past its rule's bound, and a rejection
//!   leaves the ledger as it was.

use proptest::prelude::*;

use super::invariants::ratio;
use crate::classes::{
    AdmissionRule, ClassLedger, DivisionCost, FrameReading, MeasuredWork, ProcessFrames, RtJob,
    RtLoadModel, RtSpec, StatisticalParams,
};
use crate::global::JobId;

#[derive(Debug, Clone)]
enum FrameOp {
    Observe { dt: u64, frames: u64, cpu: u64 },
    Tick { dt: u64 },
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_closed_window_has_misses_plus_frames_done_capped_at_b_equal_to_b(
        period in 1u64..100,
        frames in 1u32..8,
        work_part in 1u64..=100,
        start in 0u64..1_000,
        ops in prop::collection::vec(prop_oneof![
            3 => (0u64..400, 0u64..12, 0u64..400)
                .prop_map(|(dt, frames, cpu)| FrameOp::Observe { dt, frames, cpu }),
            1 => (0u64..2_000).prop_map(|dt| FrameOp::Tick { dt }),
        ], 0..60),
    ) {
        let work = (period * work_part).div_ceil(100);
        let spec = RtSpec::new(period, frames, work).unwrap();
        let b = u64::from(frames);
        let window = spec.window_ns();
        let mut p = ProcessFrames::new(spec, start, FrameReading::default(), Default::default());
        let (mut t, mut counter, mut cpu) = (start, 0u64, 0u64);
        let mut next_window = 0;
        let mut all = Vec::new();
        for op in ops {
            let reports = match op {
                FrameOp::Observe { dt, frames, cpu: used } => {
                    t += dt;
                    counter += frames;
                    cpu += used;
                    p.observe(t, FrameReading { frames: counter, cpu_ns: cpu })
                }
                FrameOp::Tick { dt } => { t += dt; p.tick(t) }
            };
            all.extend(reports);
            // Every window that ended by now is closed.
            prop_assert_eq!(p.window(), (t - start) / window);
        }
        all.extend(p.tick(t + 10 * window));
        for report in &all {
            prop_assert!(report.windows >= 1);
            prop_assert_eq!(report.window, next_window);
            next_window += report.windows;
            prop_assert_eq!(report.start_ns, start + report.window * window);
            prop_assert_eq!(report.end_ns, start + next_window * window);
            prop_assert_eq!(report.met + report.missed, b * report.windows);
            prop_assert_eq!(report.met, report.frames_done.min(b) * report.windows);
            prop_assert_eq!(report.overran, report.cpu_ns > p.budget_ns());
        }
        let totals = p.totals();
        prop_assert_eq!(totals.windows, next_window);
        prop_assert_eq!(totals.expected, b * next_window);
        prop_assert_eq!(totals.met + totals.missed, totals.expected);
    }
}

#[derive(Debug, Clone)]
enum LedgerOp {
    Submit {
        period: u64,
        frames: u32,
        works: Vec<u64>,
    },
    Remove {
        pick: usize,
    },
    Measure {
        pick: usize,
        frames: u64,
        work_part: u64,
    },
}

fn ledger_ops() -> impl Strategy<Value = Vec<LedgerOp>> {
    let op = prop_oneof![
        4 => (prop_oneof![Just(100u64), Just(150), Just(300), Just(1_000)], 1u32..5,
              prop::collection::vec(1u64..=100, 1..5))
            .prop_map(|(period, frames, parts)| LedgerOp::Submit {
                period,
                frames,
                works: parts.iter().map(|p| (period * p).div_ceil(100)).collect(),
            }),
        1 => any::<usize>().prop_map(|pick| LedgerOp::Remove { pick }),
        2 => (any::<usize>(), 0u64..300, 1u64..=100)
            .prop_map(|(pick, frames, work_part)| LedgerOp::Measure { pick, frames, work_part }),
    ];
    prop::collection::vec(op, 0..50)
}

fn load_model() -> impl Strategy<Value = RtLoadModel> {
    (
        ratio(),
        0u64..5,
        0u64..5,
        prop::option::of((200u64..5_000, 0u64..20)),
    )
        .prop_map(
            |(ratio, unblock_ns, context_switch_ns, division)| RtLoadModel {
                ratio,
                division: division.map(|(period_ns, switch_ns)| DivisionCost {
                    period_ns,
                    switch_ns,
                }),
                unblock_ns,
                context_switch_ns,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn admission_never_loads_a_node_past_its_bound(
        nodes in 1usize..5,
        model in load_model(),
        statistical in prop::option::of((300_000u64..1_500_000, 0u64..200)),
        ops in ledger_ops(),
    ) {
        let rule = match statistical {
            None => AdmissionRule::Deterministic,
            Some((bound_ppm, min_frames)) =>
                AdmissionRule::Statistical(StatisticalParams { bound_ppm, min_frames }),
        };
        let mut ledger = ClassLedger::new(nodes);
        let mut jobs: Vec<RtJob> = Vec::new();
        let mut next_id = 0;
        for op in ops {
            match op {
                LedgerOp::Submit { period, frames, works } => {
                    next_id += 1;
                    let job = RtJob::new(JobId(next_id), period, frames, works).unwrap();
                    let before = ledger.clone();
                    match rule.admit(&mut ledger, &job, &model) {
                        Ok(placement) => {
                            prop_assert!(placement.nodes.iter().all(|&n| n < nodes));
                            if let AdmissionRule::Statistical(params) = rule {
                                // Each node that took a process is within the
                                // bound with what is measured now.
                                for &node in &placement.nodes {
                                    let load = params.node_load_ppm(&ledger, ledger.node(node), &model);
                                    prop_assert!(load <= model.capacity_ppm(params.bound_ppm));
                                }
                            }
                            jobs.push(job);
                        }
                        Err(_) => prop_assert_eq!(&ledger, &before),
                    }
                }
                LedgerOp::Remove { pick } => {
                    if !jobs.is_empty() {
                        let job = jobs.remove(pick % jobs.len());
                        prop_assert!(ledger.remove(job.id));
                    }
                }
                LedgerOp::Measure { pick, frames, work_part } => {
                    if !jobs.is_empty() {
                        let job = &jobs[pick % jobs.len()];
                        let work_ns = (job.period_ns * work_part).div_ceil(100);
                        ledger.set_job_measured(job.id, MeasuredWork { frames, work_ns });
                    }
                }
            }
            if rule == AdmissionRule::Deterministic {
                // Removals only lengthen a node's shortest window, so the bound
                // holds on every node at all times.
                for node in ledger.nodes() {
                    if let Some(gamma) = node.gamma_ns() {
                        prop_assert!(node.sigma_ns(&model) <= model.capacity_ns(gamma));
                    }
                }
            }
        }
    }
}
