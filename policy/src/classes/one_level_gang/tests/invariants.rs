//! Property tests over random arrivals, departures, waits and throughput
//! reports: the structure of the matrix, the split, admission's guarantee,
//! FCFS, cleansing, the replication's reach and the rotation's shares.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use proptest::prelude::*;

use super::support::{MS, assert_consistent, cells};
use crate::classes::one_level_gang::{
    ArrivalDecision, CellKind, OneGsJob, OneLevelGang, OneLevelGangConfig, OneLevelGangError,
    OneLevelGangRotor, OneLevelGangSnapshot, RowTimeline, frames_done_per_window, rows_needed,
};
use crate::classes::{Class, FairnessRatio, RtSpec};
use crate::global::{JobId, NodeIndex, QueuePolicy};

#[derive(Debug, Clone)]
enum Op {
    Arrive {
        rt: bool,
        nodes: usize,
        period_ms: u64,
        work_permille: u64,
        wait_ms: u64,
    },
    /// Departs the `pick`-th known job modulo their count plus one; the
    /// extra slot departs an unknown job.
    Depart {
        pick: usize,
    },
    Advance {
        ms: u64,
    },
    Satisfy {
        mask: u64,
    },
    Reoptimize,
}

fn config_strategy() -> impl Strategy<Value = OneLevelGangConfig> {
    (
        (1usize..=5, 2usize..=6, 1u32..=3, 1u32..=3),
        (any::<bool>(), any::<bool>(), 0u64..=3, 5u64..=20),
    )
        .prop_map(
            |((nodes, rows, x, y), (admission_control, strict, switch_ms, quantum_ms))| {
                OneLevelGangConfig {
                    nodes,
                    rows,
                    ratio: FairnessRatio::new(x, y).unwrap(),
                    quantum_ns: quantum_ms * MS,
                    switch_cost_ns: switch_ms * MS,
                    admission_control,
                    queue: if strict {
                        QueuePolicy::StrictFcfs
                    } else {
                        QueuePolicy::Backfill
                    },
                }
            },
        )
}

fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (any::<bool>(), 1usize..=6, 5u64..=60, 1u64..=700, 1u64..=300).prop_map(
            |(rt, nodes, period_ms, work_permille, wait_ms)| Op::Arrive {
                rt, nodes, period_ms, work_permille, wait_ms
            }
        ),
        3 => any::<usize>().prop_map(|pick| Op::Depart { pick }),
        2 => (0u64..=200).prop_map(|ms| Op::Advance { ms }),
        2 => any::<u64>().prop_map(|mask| Op::Satisfy { mask }),
        1 => Just(Op::Reoptimize),
    ];
    prop::collection::vec(op, 0..40)
}

struct Run {
    state: OneLevelGang,
    now: u64,
    /// The last instant an operation evicted expired waits.
    evicted_at: u64,
    next_id: u64,
    columns: BTreeMap<JobId, Vec<NodeIndex>>,
    /// The last change was an arrival, departure or re-optimisation (not a
    /// bare throughput report, after which replicas may be stale).
    after_event: bool,
}

fn job_of(op: &Op, id: u64, cycle_ns: u64) -> OneGsJob {
    let Op::Arrive {
        rt,
        nodes,
        period_ms,
        work_permille,
        wait_ms,
    } = *op
    else {
        unreachable!()
    };
    if !rt {
        return OneGsJob::best_effort(JobId(id), nodes);
    }
    let period_ns = period_ms * MS;
    // b = lcm(d, Ψ) / d: a window that is a multiple of the cycle, as
    // admission control requires (an out-of-phase one is refused, below).
    let frames = (cycle_ns / gcd(period_ns, cycle_ns)).clamp(1, u64::from(u32::MAX)) as u32;
    let spec = RtSpec::new(period_ns, frames, (period_ns * work_permille / 1000).max(1)).unwrap();
    OneGsJob::real_time(JobId(id), nodes, spec, wait_ms * MS)
}

fn apply(run: &mut Run, op: &Op) {
    let state = &mut run.state;
    run.now += MS;
    match *op {
        Op::Arrive { .. } => {
            run.next_id += 1;
            let job = job_of(op, run.next_id, state.config().cycle_ns());
            let before = state.clone();
            let Ok(outcome) = state.arrive(job, run.now) else {
                assert!(job.nodes > state.nodes(), "only oversized jobs are refused");
                assert_eq!(*state, before);
                return;
            };
            let rt_rows = state.split().rt_rows as u64;
            let too_big =
                job.class() == Class::RealTime && job.rows_to_hold(state.config()) > rt_rows;
            match outcome.decision {
                ArrivalDecision::Refused { .. } => assert!(too_big),
                ArrivalDecision::Allocated { rows, columns } => {
                    assert!(!too_big);
                    let held = state.allocation(job.id).unwrap();
                    assert_eq!((&held.rows, &held.columns), (&rows, &columns));
                }
                ArrivalDecision::Waiting { position } => {
                    assert!(!too_big);
                    assert_eq!(state.queue_position(job.id), Some(position));
                }
            }
            run.after_event = true;
            run.evicted_at = run.now;
        }
        Op::Depart { pick } => {
            let known: Vec<JobId> = state
                .allocations()
                .map(|held| held.job.id)
                .chain(state.waiting(Class::RealTime).map(|waiting| waiting.job.id))
                .chain(
                    state
                        .waiting(Class::BestEffort)
                        .map(|waiting| waiting.job.id),
                )
                .collect();
            match known.get(pick % (known.len() + 1)) {
                Some(&job) => {
                    state.depart(job, run.now).unwrap();
                    run.after_event = true;
                    run.evicted_at = run.now;
                }
                None => {
                    let before = state.clone();
                    let error = state.depart(JobId(0), run.now).unwrap_err();
                    assert_eq!(error, OneLevelGangError::UnknownJob(JobId(0)));
                    assert_eq!(*state, before);
                }
            }
        }
        Op::Advance { ms } => {
            run.now += ms * MS;
            let expired = state.evict_expired(run.now);
            for evicted in &expired.evicted {
                assert!(evicted.waited_ns >= evicted.job.max_wait_ns().unwrap());
            }
            run.after_event |= !expired.started.is_empty();
            run.evicted_at = run.now;
        }
        Op::Satisfy { mask } => {
            let rt_jobs: Vec<JobId> = state
                .allocations()
                .filter(|held| held.job.class() == Class::RealTime)
                .map(|held| held.job.id)
                .collect();
            let chosen = rt_jobs
                .into_iter()
                .enumerate()
                .filter(|(bit, _)| mask >> (bit % 64) & 1 == 1)
                .map(|(_, id)| id);
            let before = cells(state);
            state.set_satisfied(chosen.chain([JobId(u64::MAX)]));
            assert!(!state.satisfied().contains(&JobId(u64::MAX)));
            reports_move_only_be_copies_and_leave_no_short_job_room(state, &before);
            run.after_event = false;
        }
        Op::Reoptimize => {
            state.reoptimize();
            run.after_event = true;
        }
    }
}

/// The split rule written another way: the RT row count in 1..M nearest to
/// M·x/(x+y), the larger on a tie.
fn expected_rt_rows(config: &OneLevelGangConfig) -> usize {
    let (x, total) = (
        i64::from(config.ratio.rt),
        i64::from(config.ratio.rt + config.ratio.be),
    );
    let rows = config.rows as i64;
    (1..config.rows)
        .min_by_key(|&rt| ((rt as i64 * total - rows * x).abs(), Reverse(rt)))
        .unwrap()
}

fn check(run: &mut Run) {
    let state = &run.state;
    let config = state.config().clone();
    let split = state.split();
    assert_consistent(state);
    assert_eq!(split.rt_rows, expected_rt_rows(&config), "{config:?}");
    assert_eq!(split.rt_rows + split.be_rows, config.rows);

    for held in state.allocations() {
        let first = run
            .columns
            .entry(held.job.id)
            .or_insert(held.columns.clone());
        assert_eq!(*first, held.columns, "{} changed columns", held.job.id);
        if let Some(spec) = held.job.rt_spec() {
            let needed = rows_needed(spec, &config);
            let expected = if config.admission_control { needed } else { 1 };
            assert_eq!(held.rows.len() as u64, expected, "{} rows", held.job.id);
            let guarantee = state.guaranteed_frames_per_cycle(held.job.id).unwrap();
            assert_eq!(guarantee.is_met(), guarantee.rows_held as u64 >= needed);
        } else {
            assert_eq!(held.rows.len(), 1);
        }
    }
    if config.admission_control {
        assert!(
            state.unmet_guarantees().is_empty(),
            "an admitted job may miss"
        );
        no_admitted_job_misses(state);
    }
    for row in split.rows_of(Class::BestEffort) {
        for node in 0..state.nodes() {
            if let Some(cell) = state
                .cell(row, node)
                .filter(|c| c.kind == CellKind::Original)
            {
                assert_eq!(
                    state.allocation(cell.job).unwrap().job.class(),
                    Class::BestEffort
                );
            }
        }
    }

    // Cleansing leaves exactly the originals, and after it no waiting job
    // fits (strict FCFS: no head fits).
    let mut cleansed = state.clone();
    cleansed.cleanse();
    let originals: usize = state
        .allocations()
        .map(|h| h.rows.len() * h.columns.len())
        .sum();
    assert!(
        cells(&cleansed)
            .values()
            .all(|&(_, kind)| kind == CellKind::Original)
    );
    assert_eq!(cells(&cleansed).len(), originals);
    assert_consistent(&cleansed);
    for class in [Class::RealTime, Class::BestEffort] {
        let waiting: Vec<_> = state.waiting(class).copied().collect();
        let to_check = match config.queue {
            QueuePolicy::StrictFcfs => &waiting[..waiting.len().min(1)],
            QueuePolicy::Backfill => &waiting[..],
        };
        for queued in to_check {
            let rows = queued.job.rows_to_hold(&config);
            assert!(
                cleansed.find_room(class, queued.job.nodes, rows).is_none(),
                "{} fits",
                queued.job.id
            );
        }
        for queued in &waiting {
            if let Some(end) = queued.deadline_ns() {
                assert!(end > run.evicted_at, "{} outstayed its wait", queued.job.id);
            }
            for held in state.allocations().filter(|h| h.job.class() == class) {
                let same_shape = held.job.nodes == queued.job.nodes
                    && held.job.rows_to_hold(&config) == queued.job.rows_to_hold(&config);
                let strict = config.queue == QueuePolicy::StrictFcfs;
                assert!(
                    held.order < queued.order || !(strict || same_shape),
                    "{} overtook {}",
                    held.job.id,
                    queued.job.id
                );
            }
        }
    }

    if run.after_event {
        // The four steps leave no candidate that fits anywhere, satisfied RT
        // jobs and admitted ones (their rows pay for their frames) uncopied,
        // and running them again changes nothing.
        for held in state.allocations() {
            let satisfied = state.counts_as_satisfied(held.job.id);
            let admitted = state.config().admission_control
                && state
                    .guaranteed_frames_per_cycle(held.job.id)
                    .is_some_and(|g| g.is_met());
            if satisfied || admitted {
                assert!(state.replica_rows(held.job.id).is_empty());
                continue;
            }
            for row in 0..state.rows() {
                let fits = held.columns.iter().all(|&n| state.cell(row, n).is_none());
                assert!(
                    !fits,
                    "{} could still be copied into row {row}",
                    held.job.id
                );
            }
        }
        let mut again = state.clone();
        assert!(again.reoptimize().is_empty());
        assert_eq!(
            cells(&again),
            cells(state),
            "re-optimising is not idempotent"
        );
    }

    // The rotation: non-empty rows (every row while an admitted RT job
    // runs); under contention, every row of a backlogged class runs once
    // per round.
    let rotation = state.rotation();
    assert_eq!(
        rotation,
        (0..state.rows())
            .filter(|&r| state.keeps_full_cycle() || !state.is_row_empty(r))
            .collect::<Vec<_>>()
    );
    let mut rotor = OneLevelGangRotor::new();
    let mut per_class = BTreeMap::new();
    for _ in 0..rotation.len() {
        let slice = rotor.next_slice(state).unwrap();
        assert_eq!(slice.round, 0);
        let row = slice.rows.lowest_row();
        // A new RT job sits out its rows until its start row, then warms
        // up in that row alone.
        for (node, jobs) in slice.active_by_node.iter().enumerate() {
            assert_eq!(
                jobs.iter().next().copied(),
                state
                    .cell(row, node)
                    .map(|c| c.job)
                    .filter(|&job| !rotor.holds(job, row))
            );
        }
        *per_class.entry(split.class_of(row).unwrap()).or_insert(0) += 1;
    }
    let backlogged = |class| state.waiting(class).next().is_some();
    if backlogged(Class::BestEffort) {
        assert_eq!(per_class.get(&Class::BestEffort), Some(&split.be_rows));
    }
    if backlogged(Class::RealTime) && !config.admission_control {
        assert_eq!(per_class.get(&Class::RealTime), Some(&split.rt_rows));
    }

    let restored = OneLevelGang::try_from(OneLevelGangSnapshot::from(state.clone())).unwrap();
    assert_eq!(&restored, state);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_invariant_holds_after_every_operation(
        config in config_strategy(),
        ops in ops_strategy(),
    ) {
        let mut run = Run {
            state: OneLevelGang::new(config).unwrap(),
            now: 0,
            evicted_at: 0,
            next_id: 0,
            columns: BTreeMap::new(),
            after_event: true,
        };
        for op in &ops {
            apply(&mut run, op);
            check(&mut run);
        }
    }
}

/// A throughput report between events (session 20): under admission
/// control it moves no cell; otherwise RT copies only grow (so nothing can
/// move back and forth before the next event), only BE copies may go, and
/// no RT job short of frames that may be copied still fits in a free row.
fn reports_move_only_be_copies_and_leave_no_short_job_room(
    state: &OneLevelGang,
    before: &BTreeMap<(usize, NodeIndex), (JobId, CellKind)>,
) {
    let after = cells(state);
    if state.config().admission_control {
        assert_eq!(&after, before, "a report moved a cell under admission");
        return;
    }
    let is_rt = |job: &JobId| {
        state
            .allocation(*job)
            .is_some_and(|held| held.job.class() == Class::RealTime)
    };
    for (cell, held) in before {
        let (job, kind) = held;
        if *kind == CellKind::Original || is_rt(job) {
            assert_eq!(
                after.get(cell),
                Some(held),
                "{job} lost {cell:?} to a report"
            );
        }
    }
    for held in state.allocations() {
        let id = held.job.id;
        if held.job.class() != Class::RealTime || state.counts_as_satisfied(id) {
            continue;
        }
        for row in 0..state.rows() {
            let fits = held.columns.iter().all(|&n| state.cell(row, n).is_none());
            assert!(!fits, "{id} is short of frames and row {row} is free");
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Under admission control every allocated RT job, run frame by frame in
/// its own rows of the full cycle (replicas only add CPU) with τ_max per
/// frame, finishes b frames in every window after the first, whatever the
/// phase of its first release.
fn no_admitted_job_misses(state: &OneLevelGang) {
    assert!(
        state.allocations().all(|held| held.job.rt_spec().is_none()) || state.keeps_full_cycle()
    );
    let slot = state.config().slot_ns();
    let cycle = state.config().cycle_ns();
    for held in state.allocations() {
        let Some(spec) = held.job.rt_spec() else {
            continue;
        };
        assert_eq!(state.runs_in_phase(held.job.id), Some(true));
        let rows: Vec<u64> = held.rows.iter().map(|&row| row as u64).collect();
        let timeline = RowTimeline {
            cycle_ns: cycle,
            runs: rows
                .iter()
                .map(|&row| (row * slot, row * slot + state.config().quantum_ns))
                .collect(),
        };
        for release in [0, slot / 2, cycle / 3, cycle - 1] {
            let done = frames_done_per_window(&timeline, spec, release, 4, |_| spec.work_ns);
            assert!(
                done[1..].iter().all(|&n| n >= spec.frames),
                "{} in rows {rows:?} of a {cycle} ns cycle, released at {release}: {done:?} of {}",
                held.job.id,
                spec.frames
            );
        }
    }
}
