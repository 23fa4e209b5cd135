//! Execution: the rotation of rows, gang slices of one row, the rotor.

use std::collections::BTreeSet;

use super::support::{MS, WAIT, allocate, be, matrix, render, rt, wait};
use crate::classes::one_level_gang::{CellKind, OneGsJob, OneLevelGang, OneLevelGangRotor};
use crate::classes::{Class, RtSpec};
use crate::global::{ActiveRows, JobId, RowIndex};

#[test]
fn empty_rows_leave_the_rotation() {
    let mut state = matrix(2, 4, 1, 1, false);
    assert!(state.rotation().is_empty());
    assert_eq!(state.row_for_slice(0), None);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    state.set_satisfied([JobId(1)]);
    state.reoptimize();
    assert_eq!(render(&state), ["AA", "..", "..", ".."]);
    assert_eq!(state.rotation(), [0]);
    assert_eq!(state.row_for_slice(7), Some(0));
}

#[test]
fn an_empty_rt_row_goes_to_be_jobs_only_as_replicas_of_step_4() {
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, be(1, 2), 0);
    assert_eq!(state.rotation(), [0, 1, 2]);
    for row in state.split().rows_of(Class::RealTime) {
        for node in 0..2 {
            assert_eq!(state.cell(row, node).unwrap().kind, CellKind::Replica);
        }
    }
    // A BE job that does not fit the BE set still waits: the RT rows'
    // copies are not room for it.
    assert_eq!(wait(&mut state, be(2, 1), 1), 0);
}

#[test]
fn a_slice_runs_one_row_on_every_node_like_a_gang_slice() {
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, rt(1, 3, 5 * MS), 0);
    allocate(&mut state, be(2, 1), 0);
    assert_eq!(render(&state), ["AAAb", "aaab", "aaaB"]);
    let slice = state.slice(5, 1, 2);
    assert_eq!(slice.rows, ActiveRows::Single(2));
    assert!(slice.alternates.is_empty());
    let a = BTreeSet::from([JobId(1)]);
    let b = BTreeSet::from([JobId(2)]);
    assert_eq!(slice.active_by_node, [a.clone(), a.clone(), a, b]);
    assert_eq!(slice.active_jobs(), BTreeSet::from([JobId(1), JobId(2)]));
}

#[test]
fn the_rotor_runs_each_row_once_per_round_and_skips_rows_that_emptied() {
    let mut state = matrix(2, 4, 1, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    allocate(&mut state, be(3, 2), 0);
    allocate(&mut state, be(4, 2), 0);
    assert_eq!(render(&state), ["AA", "BB", "CC", "DD"]);
    let mut rotor = OneLevelGangRotor::new();
    let first = rotor.next_slice(&state).unwrap();
    assert_eq!(
        (first.number, first.round, first.rows),
        (0, 0, ActiveRows::Single(0))
    );
    assert_eq!(rotor.remaining_in_round(), [1, 2, 3]);
    state.depart(JobId(2), 1).unwrap();
    state.depart(JobId(4), 1).unwrap();
    // Rows 1 and 3 now hold copies (RT 1 into row 1, BE 3 into row 3).
    assert_eq!(render(&state), ["AA", "aa", "CC", "cc"]);
    state.set_satisfied([JobId(1)]);
    state.reoptimize();
    assert_eq!(render(&state), ["AA", "cc", "CC", "cc"]);
    let rows: Vec<_> = (0..4)
        .map(|_| rotor.next_slice(&state).unwrap())
        .map(|slice| (slice.round, slice.rows))
        .collect();
    assert_eq!(
        rows,
        [
            (0, ActiveRows::Single(1)),
            (0, ActiveRows::Single(2)),
            (0, ActiveRows::Single(3)),
            (1, ActiveRows::Single(0)),
        ]
    );
    state.depart(JobId(1), 2).unwrap();
    state.depart(JobId(3), 2).unwrap();
    assert!(
        rotor.next_slice(&state).is_none(),
        "an empty matrix has no slice"
    );
}

#[test]
fn with_both_classes_backlogged_each_round_gives_the_classes_their_rows() {
    let mut state = matrix(3, 6, 2, 1, false);
    for id in 1..=8 {
        state.arrive(rt(id, 3, 5 * MS), 0).unwrap();
    }
    for id in 11..=14 {
        state.arrive(be(id, 3), 0).unwrap();
    }
    assert!(state.waiting(Class::RealTime).count() > 0);
    assert!(state.waiting(Class::BestEffort).count() > 0);
    let mut rotor = OneLevelGangRotor::new();
    let mut per_class = [0, 0];
    for _ in 0..6 {
        let slice = rotor.next_slice(&state).unwrap();
        assert_eq!(slice.round, 0);
        match state.split().class_of(slice.rows.lowest_row()) {
            Some(Class::RealTime) => per_class[0] += 1,
            _ => per_class[1] += 1,
        }
    }
    assert_eq!(per_class, [4, 2], "2:1 of six rows");
}

#[test]
fn a_new_rt_job_sits_out_its_rows_until_the_one_where_its_first_window_cannot_end_short() {
    // The bench's 1GS: M = 6 rows of 10 ms split 2:1, an RT job of d = 10 ms,
    // b = 30, τ = 2 ms holding r = 2 rows.
    let mut state = matrix(2, 6, 2, 1, true);
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    let job = OneGsJob::real_time(JobId(1), 2, spec, WAIT);
    let (rows, _) = allocate(&mut state, job, 0);
    assert_eq!(rows, [0, 1]);
    // Starting at row 0 its first window would end after the 40 ms gap's
    // frames, not yet run; by row 1, row 0 has run them.
    assert_eq!(state.start_row_of(JobId(1)), Some(1));
    let mut rotor = OneLevelGangRotor::new();
    let mut runs: Vec<(RowIndex, bool)> = Vec::new();
    for n in 0..12 {
        if n == 2 {
            // Its processes published their counters in row 1.
            rotor.counters_ready(JobId(1));
        }
        let slice = rotor.next_slice(&state).unwrap();
        runs.push((
            slice.rows.lowest_row(),
            slice.active_jobs().contains(&JobId(1)),
        ));
    }
    let expected: Vec<(RowIndex, bool)> = (0..12).map(|n| (n % 6, n != 0 && n % 6 < 2)).collect();
    assert_eq!(
        runs, expected,
        "held out of row 0 once, then in both rows (its rows pay for its frames: no copies)"
    );
    assert!(rotor.starting().is_empty());

    // A second RT job allocated mid-round waits for its own start row.
    let (rows, _) = allocate(&mut state, OneGsJob::real_time(JobId(2), 2, spec, WAIT), 1);
    assert_eq!(rows, [2, 3]);
    rotor.counters_ready(JobId(2));
    let job_2: Vec<(RowIndex, bool)> = (0..10)
        .map(|_| rotor.next_slice(&state).unwrap())
        .map(|slice| {
            (
                slice.rows.lowest_row(),
                slice.active_jobs().contains(&JobId(2)),
            )
        })
        .collect();
    assert_eq!(
        job_2,
        [
            (0, false),
            (1, false),
            (2, false),
            (3, true),
            (4, false),
            (5, false),
            (0, false),
            (1, false),
            (2, true),
            (3, true)
        ]
    );
}

/// The slices of `rounds` full rounds: (row, whether `job` runs in it).
fn runs_of(
    rotor: &mut OneLevelGangRotor,
    state: &OneLevelGang,
    job: JobId,
    slices: usize,
) -> Vec<(RowIndex, bool)> {
    (0..slices)
        .map(|_| rotor.next_slice(state).unwrap())
        .map(|slice| (slice.rows.lowest_row(), slice.active_jobs().contains(&job)))
        .collect()
}

#[test]
fn a_new_rt_job_whose_start_up_outlasts_its_start_row_runs_in_that_row_alone_until_ready() {
    // Its ranks still connect when row 1 ends: in row 0 they would finish
    // start-up right after the gap and start the first frame there, the
    // worst phase. Held to row 1, start-up ends in row 1 whatever it takes.
    let mut state = matrix(2, 6, 2, 1, true);
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let mut rotor = OneLevelGangRotor::new();
    let warming = runs_of(&mut rotor, &state, JobId(1), 18);
    let expected: Vec<(RowIndex, bool)> = (0..18).map(|n| (n % 6, n % 6 == 1)).collect();
    assert_eq!(warming, expected, "row 1 only, three rounds running");
    assert_eq!(rotor.warming()[&JobId(1)].row, 1);

    // Ready (its counters are published): both rows from the next slice.
    rotor.counters_ready(JobId(1));
    assert!(rotor.warming().is_empty());
    let ready = runs_of(&mut rotor, &state, JobId(1), 6);
    let expected: Vec<(RowIndex, bool)> = (0..6).map(|n| (n, n < 2)).collect();
    assert_eq!(ready, expected);
}

#[test]
fn a_job_never_reported_ready_gets_all_its_rows_back_after_its_warm_up() {
    // Γ = 300 ms, Ψ = 60 ms: two windows are 10 cycles in row 1 alone.
    let mut state = matrix(2, 6, 2, 1, true);
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let mut rotor = OneLevelGangRotor::new();
    let runs = runs_of(&mut rotor, &state, JobId(1), 6 * 13);
    let in_row_0: Vec<usize> = runs
        .iter()
        .enumerate()
        .filter(|&(_, &(row, on))| row == 0 && on)
        .map(|(n, _)| n / 6)
        .collect();
    assert_eq!(in_row_0, [11, 12], "row 0 again from round 11 on");
    assert!(rotor.warming().is_empty());
    assert!(runs.iter().all(|&(row, on)| on == (row == 1) || row == 0));
}

#[test]
fn a_job_reported_ready_before_its_start_row_skips_the_warm_up() {
    let mut state = matrix(2, 6, 2, 1, true);
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let mut rotor = OneLevelGangRotor::new();
    let first = runs_of(&mut rotor, &state, JobId(1), 1);
    assert_eq!(first, [(0, false)], "waits for its start row");
    rotor.counters_ready(JobId(1));
    let runs = runs_of(&mut rotor, &state, JobId(1), 7);
    let expected: Vec<(RowIndex, bool)> = (1..8).map(|n| (n % 6, n % 6 < 2)).collect();
    assert_eq!(runs, expected);
    assert!(rotor.warming().is_empty());
}

#[test]
fn a_warming_job_that_leaves_is_forgotten() {
    let mut state = matrix(2, 6, 2, 1, true);
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let mut rotor = OneLevelGangRotor::new();
    runs_of(&mut rotor, &state, JobId(1), 3);
    assert!(rotor.warming().contains_key(&JobId(1)));
    state.depart(JobId(1), 50 * MS).unwrap();
    allocate(&mut state, be(2, 2), 60 * MS);
    rotor.next_slice(&state);
    assert!(rotor.warming().is_empty());
}

#[test]
fn without_admission_control_no_job_waits_for_a_start_row() {
    let mut state = matrix(2, 6, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    assert_eq!(state.start_row_of(JobId(1)), None);
    let mut rotor = OneLevelGangRotor::new();
    let first = rotor.next_slice(&state).unwrap();
    assert!(first.active_jobs().contains(&JobId(1)));
}

#[test]
fn a_ready_rt_job_is_given_its_first_frame_instant_once_mid_way_into_its_start_row() {
    // The bench's 1GS job (rows 0 and 1 of 6, start row 1); its processes
    // are ready from slice 3 on (row 3): the next slice of row 1 gives the
    // instant, 4 ms into the row, and no later slice gives another.
    let mut state = matrix(2, 6, 2, 1, true);
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let mut rotor = OneLevelGangRotor::new();
    let mut given = Vec::new();
    for n in 0..24 {
        if n == 3 {
            rotor.counters_ready(JobId(1));
        }
        let slice = rotor.next_slice(&state).unwrap();
        for first in rotor.first_frames() {
            given.push((n, slice.rows.lowest_row(), first.job, first.offset_ns));
        }
    }
    assert_eq!(given, [(7, 1, JobId(1), 4 * MS)]);
    assert!(rotor.awaiting_first_frame().is_empty());
}

#[test]
fn a_job_ready_before_its_start_row_gets_its_instant_in_that_row_and_one_without_admission_none() {
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    let mut state = matrix(2, 6, 2, 1, true);
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    let mut rotor = OneLevelGangRotor::new();
    rotor.counters_ready(JobId(1));
    let slices: Vec<usize> = (0..6)
        .map(|_| {
            rotor.next_slice(&state).unwrap();
            rotor.first_frames().len()
        })
        .collect();
    assert_eq!(slices, [0, 1, 0, 0, 0, 0]);

    // Without admission control there is no start row and no instant: the
    // processes start at once.
    let mut free = matrix(2, 6, 2, 1, false);
    allocate(&mut free, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    assert_eq!(free.first_frame_of(JobId(1)), None);
    assert_eq!(free.first_frame_wait_ns(JobId(1)), None);
    let mut rotor = OneLevelGangRotor::new();
    rotor.counters_ready(JobId(1));
    for _ in 0..12 {
        rotor.next_slice(&free).unwrap();
        assert!(rotor.first_frames().is_empty());
    }
}

#[test]
fn a_gated_job_waits_at_most_its_warm_up_and_two_cycles_for_its_instant() {
    let spec = RtSpec::new(10 * MS, 30, 2 * MS).unwrap();
    let mut state = matrix(2, 6, 2, 1, true);
    allocate(&mut state, OneGsJob::real_time(JobId(1), 2, spec, WAIT), 0);
    // 2 windows of 300 ms = 10 cycles of 60 ms, and 2 more.
    assert_eq!(state.first_frame_wait_ns(JobId(1)), Some(12 * 60 * MS));
    assert_eq!(state.first_frame_of(JobId(1)), Some((1, 4 * MS)));
}
