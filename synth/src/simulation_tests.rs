//! Simulated message passing: every rank's [`RankEngine`] runs under a
//! random interleaving with random (reordering) delivery, to check that the
//! stop agreement ends every pattern without deadlock and with the same
//! iteration count on every rank.

use proptest::prelude::*;

use crate::engine::{Arrival, RankEngine};
use crate::header::{Header, job_hash};
use crate::inbox::Filing;
use crate::pattern::{Pattern, Step};
use crate::stop::StopAgreement;

/// How rank 0 ends an open (duration) run in the simulation.
#[derive(Clone, Copy)]
enum Decision {
    /// No decision: every rank has a fixed count.
    None,
    /// The real rule, at the start of this iteration.
    At(u64),
    /// A deliberately too small margin, to prove the simulation catches it.
    WithMargin { at: u64, margin: u64 },
}

/// Small deterministic generator so proptest controls the schedule via a seed.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

/// Runs all ranks to completion; returns each rank's iteration count, or
/// why the run went wrong.
fn simulate(
    pattern: Pattern,
    stops: Vec<StopAgreement>,
    decision: Decision,
    seed: u64,
) -> Result<Vec<u64>, String> {
    let size = stops.len();
    let mut ranks: Vec<RankEngine> = stops
        .into_iter()
        .enumerate()
        .map(|(rank, stop)| RankEngine::new(pattern, rank, size, stop))
        .collect();
    let mut in_flight: Vec<(usize, Header)> = Vec::new();
    let mut rng = XorShift(seed | 1);
    let mut runnable = Vec::with_capacity(size);
    for _ in 0..2_000_000 {
        runnable.clear();
        runnable.extend((0..size).filter(|&r| can_step(&ranks[r])));
        let choices = runnable.len() + in_flight.len();
        if choices == 0 {
            break;
        }
        let pick = rng.below(choices);
        if pick < runnable.len() {
            step(&mut ranks, runnable[pick], decision, &mut in_flight);
        } else {
            let (dst, header) = in_flight.swap_remove(pick - runnable.len());
            let arrival = ranks[dst].arrive(&header);
            if arrival != Arrival::Filed(Filing::Accepted) {
                return Err(format!("rank {dst} got {header:?}: {arrival:?}"));
            }
        }
    }
    if let Some(stuck) = ranks.iter().find(|r| !r.is_finished()) {
        return Err(format!(
            "deadlock: rank {} stuck at iteration {} step {:?}",
            stuck.rank(),
            stuck.iteration(),
            stuck.step_index()
        ));
    }
    if let Some(r) = ranks.iter().find(|r| r.buffered() != 0) {
        return Err(format!(
            "rank {} left {} frames unread",
            r.rank(),
            r.buffered()
        ));
    }
    Ok(ranks.iter().map(|r| r.iterations_completed()).collect())
}

fn can_step(rank: &RankEngine) -> bool {
    match rank.step_index() {
        None => false,
        Some(index) => match &rank.plan().steps()[index] {
            Step::Receive { kind, from } => rank.receive_ready(*kind, from),
            _ => true,
        },
    }
}

fn step(
    ranks: &mut [RankEngine],
    rank: usize,
    decision: Decision,
    in_flight: &mut Vec<(usize, Header)>,
) {
    let engine = &mut ranks[rank];
    if rank == 0 && engine.at_iteration_start() {
        match decision {
            Decision::At(at) if engine.iteration() == at => engine.decide_stop(),
            Decision::WithMargin { at, margin } if engine.iteration() == at => {
                engine.observe_stop(at + margin)
            }
            _ => {}
        }
    }
    let index = engine.step_index().expect("runnable rank has a step");
    match engine.plan().steps()[index].clone() {
        Step::Compute | Step::Io | Step::Release | Step::FrameDone => {}
        Step::Send { kind, to } => {
            for dst in to {
                let header = Header {
                    kind,
                    src: rank as u32,
                    len: 64,
                    job_hash: job_hash("sim"),
                    iteration: engine.iteration(),
                    stop_iter: engine.stop().stop_iter(),
                };
                in_flight.push((dst, header));
            }
        }
        Step::Receive { kind, from } => engine.consume(kind, &from),
    }
    engine.complete_step();
}

fn pattern_strategy() -> impl Strategy<Value = Pattern> {
    prop::sample::select(Pattern::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn duration_runs_agree_on_the_iteration_count(
        pattern in pattern_strategy(),
        size in 1usize..=6,
        decide_at in 0u64..30,
        seed in any::<u64>(),
    ) {
        let stops = vec![StopAgreement::open(); size];
        let iterations = simulate(pattern, stops, Decision::At(decide_at), seed)
            .map_err(TestCaseError::fail)?;
        let expected = decide_at + size as u64 + 3;
        prop_assert!(iterations.iter().all(|&n| n == expected), "{iterations:?} != {expected}");
    }

    #[test]
    fn fixed_runs_complete_without_deadlock_or_leftovers(
        pattern in pattern_strategy(),
        size in 1usize..=6,
        count in 1u64..40,
        seed in any::<u64>(),
    ) {
        let stops = vec![StopAgreement::fixed(count); size];
        let iterations = simulate(pattern, stops, Decision::None, seed)
            .map_err(TestCaseError::fail)?;
        prop_assert!(iterations.iter().all(|&n| n == count), "{iterations:?} != {count}");
    }
}

/// Different fixed counts do not agree (hence the handshake check): the
/// simulation must be able to show it.
#[test]
fn mismatched_fixed_counts_are_caught() {
    let failures = (0..100u64)
        .filter(|&seed| {
            let stops = vec![
                StopAgreement::fixed(3),
                StopAgreement::fixed(3),
                StopAgreement::fixed(3),
                StopAgreement::fixed(1),
            ];
            simulate(Pattern::Ring, stops, Decision::None, seed).is_err()
        })
        .count();
    assert!(failures > 0, "no schedule exposed mismatched counts");
}

/// Without the margin a rank that runs ahead of rank 0 passes the stop
/// iteration before it learns about it; the simulation must notice.
#[test]
fn too_small_a_margin_is_caught() {
    let failures = (0..300u64)
        .filter(|&seed| {
            let stops = vec![StopAgreement::open(); 5];
            let decision = Decision::WithMargin { at: 10, margin: 0 };
            simulate(Pattern::Neighbour, stops, decision, seed).is_err()
        })
        .count();
    assert!(failures > 0, "no schedule exposed a zero margin");
}

// Real-time pipelines in virtual time: stage r finishes frame k at
// c_r(k) = max(input, c_r(k − 1)) + τ_r, where frame k's input is its
// release k·d at rank 0 and c_{r−1}(k) further down; every stage counts its
// frames into windows from the start of its first frame, as a rank does.

use crate::rt::{FrameWindows, WindowTotals};

/// Each stage's totals for `count` frames of period `period` and `b`
/// frames per window, stage r computing `works[r]` per frame.
fn pipeline_windows(period: u64, b: u32, works: &[u64], count: u64) -> Vec<WindowTotals> {
    let mut input: Vec<u64> = (0..count).map(|k| k * period).collect();
    let mut totals = Vec::new();
    for &work in works {
        let mut windows = FrameWindows::new(period * u64::from(b), b);
        windows.start(input[0]);
        let mut free_at = 0;
        // Each frame's done time becomes the next stage's input time.
        for frame in input.iter_mut() {
            free_at = (*frame).max(free_at) + work;
            windows.frame_done(free_at);
            *frame = free_at;
        }
        totals.push(windows.finish(free_at));
    }
    totals
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_pipeline_whose_stages_fit_the_period_misses_nothing(
        period in 1_000u64..1_000_000,
        b in 1u32..8,
        works in prop::collection::vec(0u64..=1_000, 1..6),
        windows in 1u64..30,
    ) {
        // Work as a share (0..=100 %) of the period, the limit included.
        let works: Vec<u64> = works.iter().map(|w| period * w / 1_000).collect();
        let count = windows * u64::from(b) + 1;
        for (stage, totals) in pipeline_windows(period, b, &works, count).iter().enumerate() {
            prop_assert_eq!(totals.missed_frames, 0, "stage {} of {:?}: {:?}", stage, works, totals);
            prop_assert!(totals.windows >= windows.saturating_sub(1), "stage {}: {:?}", stage, totals);
        }
    }

    #[test]
    fn an_overloaded_stage_makes_it_and_every_later_stage_miss_one_minus_d_over_tau(
        period in 1_000u64..100_000,
        b in 1u32..8,
        overload_permille in 1_100u64..4_000,
        bottleneck in 0usize..4,
    ) {
        let size = 4;
        let mut works = vec![period / 2; size];
        works[bottleneck] = period * overload_permille / 1_000;
        let count = 200 * u64::from(b);
        let expected = 1.0 - 1_000.0 / overload_permille as f64;
        for (stage, totals) in pipeline_windows(period, b, &works, count).iter().enumerate() {
            let rate = totals.miss_rate(b);
            if stage < bottleneck {
                prop_assert_eq!(totals.missed_frames, 0, "stage {} before the bottleneck", stage);
            } else {
                prop_assert!(
                    (rate - expected).abs() < 0.02,
                    "stage {}: rate {} expected {} ({:?})", stage, rate, expected, totals
                );
            }
        }
    }
}
