//! Deterministic admission (§4.4): r = ⌈Ψ · τ_max / (d · Q)⌉ rows of the RT
//! set with the same columns free, or wait; and the guarantee it buys.

use super::support::{
    MS, PERIOD, QUANTUM, WAIT, allocate, assert_consistent, be, config, matrix, render, rt, wait,
};
use crate::classes::one_level_gang::{
    ArrivalDecision, OneGsJob, OneLevelGang, OneLevelGangConfig, OneLevelGangError,
    OneLevelGangRotor, rows_needed,
};
use crate::classes::{FairnessRatio, RtSpec};
use crate::global::JobId;

fn rows_for(work_ns: u64, switch_cost_ns: u64) -> u64 {
    let config = OneLevelGangConfig {
        switch_cost_ns,
        ..OneLevelGangConfig::new(16, 6, FairnessRatio::default(), 500 * MS)
    };
    rows_needed(&RtSpec::new(30 * MS, 100, work_ns).unwrap(), &config)
}

#[test]
fn rows_needed_is_m_tau_over_d_rounded_up_when_switching_is_free() {
    // M = 6, d = 30 ms: r = ⌈6 τ / d⌉.
    assert_eq!(rows_for(1, 0), 1);
    assert_eq!(rows_for(5 * MS, 0), 1);
    assert_eq!(rows_for(5 * MS + 1, 0), 2);
    assert_eq!(rows_for(15 * MS, 0), 3);
    assert_eq!(rows_for(30 * MS, 0), 6);
}

#[test]
fn the_row_switch_cost_counts_in_the_cycle_and_can_cost_one_more_row() {
    assert_eq!(rows_for(5 * MS, 1), 2);
    // Q = 500 ms, switch 100 ms: Ψ = 3.6 s, needs 3.6 s · τ / d of CPU.
    assert_eq!(rows_for(5 * MS, 100 * MS), 2);
    assert_eq!(rows_for(25 * MS, 100 * MS), 6);
}

#[test]
fn an_rt_job_that_needs_exactly_the_rt_rows_left_is_admitted() {
    // M = 6, 2:1: rows 0–3 RT. d = 30 ms, Q = 10 ms: r = ⌈6 τ / 30 ms⌉.
    let mut state = matrix(4, 6, 2, 1, true);
    let (rows, _) = allocate(&mut state, rt(1, 4, 5 * MS), 0);
    assert_eq!(rows, [0]);
    let heavy = rt(2, 4, 15 * MS);
    assert_eq!(heavy.rows_to_hold(state.config()), 3);
    let (rows, columns) = allocate(&mut state, heavy, 1);
    assert_eq!((rows, columns), (vec![1, 2, 3], vec![0, 1, 2, 3]));
    let guarantee = state.guaranteed_frames_per_cycle(JobId(2)).unwrap();
    assert!(guarantee.is_met(), "{guarantee:?}");
    assert!(guarantee.frames_guaranteed() >= guarantee.frames_due());
    assert!(state.unmet_guarantees().is_empty());
    assert_consistent(&state);
}

#[test]
fn an_rt_job_that_needs_one_row_more_waits_and_is_evicted_after_w() {
    let mut state = matrix(4, 6, 2, 1, true);
    allocate(&mut state, rt(1, 4, 10 * MS), 0); // r = 2: rows 0 and 1
    assert_eq!(wait(&mut state, rt(2, 4, 15 * MS), 7), 0); // r = 3, 2 left
    // The free RT rows stay idle: never job 2, and no copies of job 1,
    // whose own rows pay for its frames.
    assert_eq!(state.rows_of_job(JobId(2)), Vec::<usize>::new());
    assert_eq!(render(&state)[..4], ["AAAA", "AAAA", "....", "...."]);
    assert!(state.evict_expired(6 + WAIT).evicted.is_empty());
    let evicted = state.evict_expired(7 + WAIT).evicted;
    assert_eq!(evicted.len(), 1);
    assert_eq!((evicted[0].job.id, evicted[0].waited_ns), (JobId(2), WAIT));
    assert_consistent(&state);
}

#[test]
fn a_waiting_rt_job_gets_its_rows_when_a_job_leaves_despite_the_copies() {
    let mut state = matrix(4, 6, 2, 1, true);
    allocate(&mut state, rt(1, 4, 5 * MS), 0); // row 0
    allocate(&mut state, rt(2, 2, 5 * MS), 0); // row 1, nodes 0 and 1
    allocate(&mut state, be(4, 4), 0); // row 4, copied into the free rows
    wait(&mut state, rt(3, 4, 15 * MS), 1); // r = 3: rows 2 and 3 are not enough
    assert!(
        !state.is_row_empty(2) && !state.is_row_empty(3),
        "copies fill them"
    );
    let outcome = state.depart(JobId(2), 2).unwrap();
    assert_eq!(outcome.started, [JobId(3)]);
    assert_eq!(state.allocation(JobId(3)).unwrap().rows, [1, 2, 3]);
    assert!(state.unmet_guarantees().is_empty());
    assert_consistent(&state);
}

#[test]
fn every_rt_row_has_a_free_cell_but_not_the_same_one_so_the_job_waits() {
    // M = 3, 2:1: rows 0 and 1 RT. P takes nodes 0–2 of row 0, Q the least
    // loaded nodes 0, 1 and 3 of row 1: node 3 is free in row 0, node 2 in
    // row 1. A one-node job needing both rows would have to migrate.
    let mut state = matrix(4, 3, 2, 1, true);
    allocate(&mut state, rt(1, 3, 10 * MS), 0);
    let (_, columns) = allocate(&mut state, rt(2, 3, 10 * MS), 0);
    assert_eq!(columns, [0, 1, 3]);
    let two_rows = rt(3, 1, 15 * MS);
    assert_eq!(two_rows.rows_to_hold(state.config()), 2);
    wait(&mut state, two_rows, 1);
    let one_row = rt(4, 1, 10 * MS);
    let (rows, columns) = allocate(&mut state, one_row, 2);
    assert_eq!((rows, columns), (vec![0], vec![3]));
}

#[test]
fn an_rt_job_needing_more_rows_than_the_rt_set_is_refused_at_once() {
    let mut state = matrix(4, 6, 2, 1, true);
    let before = state.clone();
    let outcome = state.arrive(rt(1, 1, 25 * MS), 0).unwrap(); // r = 5 > 4
    assert_eq!(
        outcome.decision,
        ArrivalDecision::Refused {
            rows_needed: 5,
            rt_rows: 4
        }
    );
    assert_eq!(render(&state), render(&before));
    assert_eq!(state.queue_position(JobId(1)), None);
}

#[test]
fn without_admission_every_job_holds_one_row_and_a_heavy_one_is_named_as_short() {
    let mut state = matrix(4, 6, 2, 1, false);
    let (rows, _) = allocate(&mut state, rt(1, 4, 15 * MS), 0);
    assert_eq!(rows, [0], "one row, though r = 3");
    let (rows, _) = allocate(&mut state, rt(2, 4, 5 * MS), 0);
    assert_eq!(rows, [1]);
    let unmet = state.unmet_guarantees();
    assert_eq!(unmet.len(), 1);
    let (job, guarantee) = unmet[0];
    assert_eq!(
        (job, guarantee.rows_held, guarantee.rows_needed),
        (JobId(1), 1, 3)
    );
    assert!(guarantee.frames_guaranteed() < guarantee.frames_due());
}

#[test]
fn the_guarantee_is_r_quanta_per_cycle_against_the_frames_due() {
    let mut state = OneLevelGang::new(OneLevelGangConfig {
        switch_cost_ns: MS,
        ..config(2, 6, 2, 1, true)
    })
    .unwrap();
    // Ψ = 6 · 11 ms = 66 ms; τ = 5 ms, d = 30 ms: 11 ms of CPU due, r = 2.
    // 11 frames: Γ = 330 ms = 5 Ψ.
    let spec = RtSpec::new(PERIOD, 11, 5 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let guarantee = state.guaranteed_frames_per_cycle(JobId(1)).unwrap();
    assert_eq!(guarantee.cycle_ns, 66 * MS);
    assert_eq!(guarantee.cpu_needed_per_cycle_ns, 11 * MS);
    assert_eq!((guarantee.rows_needed, guarantee.rows_held), (2, 2));
    assert_eq!(guarantee.cpu_per_cycle_ns, 2 * QUANTUM);
    assert!(guarantee.is_met());
    assert!((guarantee.frames_due() - 66.0 / 30.0).abs() < 1e-9);
    assert_eq!(PERIOD, 30 * MS);
    assert_eq!(state.guaranteed_frames_per_cycle(JobId(9)), None);
}

#[test]
fn an_rt_job_whose_window_is_not_a_multiple_of_the_cycle_is_refused_with_a_reason() {
    // Ψ = 6 × 10 ms = 60 ms; d = 10 ms, b = 20: Γ = 200 ms drifts 20 ms a
    // window against the rows, so some windows would end short.
    let mut state = matrix(2, 6, 2, 1, true);
    let before = state.clone();
    let spec = RtSpec::new(10 * MS, 20, 2 * MS).unwrap();
    let error = state
        .arrive(OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0)
        .unwrap_err();
    assert_eq!(
        error,
        OneLevelGangError::WindowOutOfPhase {
            id: JobId(1),
            window_ns: 200 * MS,
            cycle_ns: 60 * MS,
        }
    );
    assert!(
        error
            .to_string()
            .contains("not a multiple of the 1GS cycle")
    );
    assert_eq!(state, before);
    // b = 30: Γ = 300 ms = 5 Ψ is admitted.
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    assert_eq!(state.runs_in_phase(JobId(1)), Some(true));
}

#[test]
fn without_admission_control_an_out_of_phase_rt_job_still_runs() {
    let mut state = matrix(2, 6, 2, 1, false);
    let spec = RtSpec::new(10 * MS, 20, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    assert_eq!(state.runs_in_phase(JobId(1)), Some(false));
}

#[test]
fn empty_rows_keep_their_slot_while_an_admitted_rt_job_runs() {
    let mut state = matrix(2, 6, 2, 1, true);
    allocate(&mut state, rt(1, 2, 5 * MS), 0); // r = 1: row 0
    assert!(state.keeps_full_cycle());
    assert_eq!(state.rotation(), [0, 1, 2, 3, 4, 5]);
    let mut rotor = OneLevelGangRotor::new();
    let rows: Vec<_> = (0..12)
        .map(|_| rotor.next_slice(&state).unwrap().rows.rows())
        .collect();
    assert_eq!(rows.iter().filter(|r| **r == [0]).count(), 2);
    assert_eq!(rows.len(), 12);
    state.depart(JobId(1), 1).unwrap();
    assert!(!state.keeps_full_cycle());
    assert!(state.rotation().is_empty());
}
