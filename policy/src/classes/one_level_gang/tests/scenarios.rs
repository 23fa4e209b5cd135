//! 1GS situations: the row split, where jobs go first, the queues, the
//! replication and its cleansing.

use std::collections::BTreeMap;

use super::support::{
    MS, QUANTUM, WAIT, allocate, assert_consistent, be, config, matrix, render, rt, wait,
};
use crate::classes::one_level_gang::{
    CellKind, OneLevelGang, OneLevelGangError, Removed, RowSplit,
};
use crate::classes::{Class, FairnessRatio, RtSpec};
use crate::global::{JobId, QueuePolicy};

fn split(rows: usize, rt: u32, be: u32) -> (usize, usize) {
    let split = RowSplit::new(rows, FairnessRatio::new(rt, be).unwrap());
    (split.rt_rows, split.be_rows)
}

#[test]
fn rt_rows_are_the_nearest_share_with_halves_to_rt_and_each_class_keeps_a_row() {
    assert_eq!(split(3, 2, 1), (2, 1), "Figure 2");
    assert_eq!(split(6, 2, 1), (4, 2), "the paper's M = 6");
    assert_eq!(split(4, 1, 1), (2, 2));
    assert_eq!(split(3, 1, 1), (2, 1), "1.5 rounds up to RT");
    assert_eq!(split(10, 1, 3), (3, 7), "2.5 rounds up to RT");
    assert_eq!(split(5, 1, 3), (1, 4), "1.25 rounds down");
    assert_eq!(split(2, 9, 1), (1, 1), "BE keeps one row");
    assert_eq!(split(2, 1, 9), (1, 1), "RT keeps one row");
    assert_eq!(split(16, 1, 100), (1, 15));
    assert_eq!(split(16, 100, 1), (15, 1));
}

#[test]
fn a_matrix_of_one_row_is_refused_because_a_class_would_starve() {
    for rows in [0, 1] {
        let error = OneLevelGang::new(config(4, rows, 2, 1, true)).unwrap_err();
        assert!(
            matches!(error, OneLevelGangError::InvalidConfig(text) if text.contains("two rows")),
            "{error}"
        );
    }
    let zero_quantum = crate::classes::one_level_gang::OneLevelGangConfig {
        quantum_ns: 0,
        ..config(4, 3, 2, 1, true)
    };
    assert!(OneLevelGang::new(zero_quantum).is_err());
    assert!(OneLevelGang::new(config(4, 17, 2, 1, true)).is_err());
    assert!(OneLevelGang::new(config(0, 3, 2, 1, true)).is_err());
}

#[test]
fn an_rt_job_is_never_initially_placed_in_the_be_set() {
    // Rows 0 and 1 are RT, row 2 BE and empty.
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    assert_eq!(wait(&mut state, rt(3, 2, 5 * MS), 0), 0);
    // The BE row only holds a copy (step 3) of the oldest RT job.
    assert_eq!(render(&state), ["AA", "BB", "aa"]);
    assert_eq!(state.allocation(JobId(3)), None);
    assert_consistent(&state);
}

#[test]
fn a_be_job_is_never_initially_placed_in_the_rt_set() {
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, be(1, 2), 0);
    assert_eq!(wait(&mut state, be(2, 1), 0), 0);
    assert_eq!(
        render(&state),
        ["aa", "aa", "AA"],
        "only copies of A in RT rows"
    );
    assert_consistent(&state);
}

#[test]
fn a_satisfied_rt_job_is_not_replicated() {
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    assert_eq!(render(&state), ["AABB", "aabb", "aabb"]);
    state.set_satisfied([JobId(1)]);
    assert_eq!(
        render(&state),
        ["AABB", "aabb", "aabb"],
        "until the next event"
    );
    allocate(&mut state, be(3, 4), MS);
    assert_eq!(render(&state), ["AABB", "..bb", "CCCC"]);
    assert_eq!(state.rows_of_job(JobId(1)), [0]);
    assert_eq!(state.rows_of_job(JobId(2)), [0, 1]);
    assert_consistent(&state);
}

#[test]
fn be_jobs_fill_idle_rt_slots_and_are_removed_at_the_next_arrival() {
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, be(1, 2), 0);
    assert_eq!(render(&state), ["aa..", "aa..", "AA.."]);
    allocate(&mut state, rt(2, 4, 5 * MS), MS);
    // Cleansing removed A's copies, so B takes row 0 and its own copy row 1.
    assert_eq!(render(&state), ["BBBB", "bbbb", "AA.."]);
    assert_eq!(state.replica_rows(JobId(1)), Vec::<usize>::new());
    assert_consistent(&state);
}

#[test]
fn a_job_never_leaves_its_columns() {
    let mut state = matrix(5, 4, 1, 1, false);
    let mut columns = BTreeMap::new();
    let arrivals = [
        rt(1, 2, 5 * MS),
        be(2, 3),
        rt(3, 4, 5 * MS),
        be(4, 1),
        be(5, 2),
    ];
    for (step, job) in arrivals.into_iter().enumerate() {
        state.arrive(job, step as u64 * MS).unwrap();
        if step == 2 {
            state.depart(JobId(2), step as u64 * MS).unwrap();
        }
        for held in state.allocations() {
            let first = columns.entry(held.job.id).or_insert(held.columns.clone());
            assert_eq!(*first, held.columns, "{} moved", held.job.id);
            for row in state.rows_of_job(held.job.id) {
                for node in 0..state.nodes() {
                    let here = state.cell(row, node).map(|cell| cell.job) == Some(held.job.id);
                    assert_eq!(
                        here,
                        held.columns.contains(&node),
                        "{} row {row}",
                        held.job.id
                    );
                }
            }
        }
        assert_consistent(&state);
    }
    assert!(columns.len() >= 4, "{columns:?}");
}

#[test]
fn the_idle_slot_goes_to_the_job_holding_fewest_rows_first() {
    // One node; RT rows 0, 1, 2 and BE row 3. X (older) and Y each hold one
    // RT row; X takes the free RT row, then Y, holding fewer, takes the BE row.
    let mut state = matrix(1, 4, 2, 1, false);
    allocate(&mut state, rt(1, 1, 5 * MS), 0);
    allocate(&mut state, rt(2, 1, 5 * MS), 0);
    assert_eq!(render(&state), ["A", "B", "a", "b"]);
}

#[test]
fn waiting_jobs_start_in_arrival_order_when_their_set_has_room() {
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, be(1, 4), 0);
    wait(&mut state, be(2, 3), 1);
    wait(&mut state, be(3, 3), 2);
    wait(&mut state, be(4, 1), 3);
    let outcome = state.depart(JobId(1), 4).unwrap();
    assert!(matches!(outcome.removed, Removed::Allocated(_)));
    assert_eq!(
        outcome.started,
        [JobId(2), JobId(4)],
        "3 does not fit beside 2"
    );
    assert_eq!(state.queue_position(JobId(3)), Some(0));
    assert_consistent(&state);
}

#[test]
fn under_strict_fcfs_a_wide_waiting_job_holds_back_a_narrow_one() {
    let strict = |queue| {
        let mut state = OneLevelGang::new(crate::classes::one_level_gang::OneLevelGangConfig {
            queue,
            ..config(4, 3, 2, 1, false)
        })
        .unwrap();
        allocate(&mut state, be(1, 2), 0);
        wait(&mut state, be(2, 3), 1);
        state.arrive(be(3, 2), 2).unwrap();
        state.allocation(JobId(3)).is_some()
    };
    assert!(!strict(QueuePolicy::StrictFcfs));
    assert!(strict(QueuePolicy::Backfill));
}

#[test]
fn an_rt_job_waits_until_arrival_plus_w_and_a_be_job_waits_forever() {
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    allocate(&mut state, be(3, 2), 0);
    wait(&mut state, rt(4, 2, 5 * MS), 100);
    wait(&mut state, be(5, 2), 100);
    assert_eq!(state.next_expiry(), Some(100 + WAIT));
    assert!(state.evict_expired(99 + WAIT).evicted.is_empty());
    let evicted = state.evict_expired(100 + WAIT).evicted;
    assert_eq!(evicted.len(), 1);
    assert_eq!(evicted[0].job.id, JobId(4));
    assert_eq!(state.next_expiry(), None);
    assert!(state.evict_expired(u64::MAX).evicted.is_empty());
    assert_eq!(state.queue_position(JobId(5)), Some(0));
}

#[test]
fn an_expired_wait_is_evicted_before_a_departure_could_start_it() {
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    wait(&mut state, rt(3, 2, 5 * MS), 0);
    let outcome = state.depart(JobId(1), WAIT).unwrap();
    assert_eq!(outcome.evicted.len(), 1);
    assert!(outcome.started.is_empty());
}

#[test]
fn a_waiting_job_can_withdraw_and_nothing_else_moves() {
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, be(1, 2), 0);
    wait(&mut state, be(2, 2), 0);
    let before = render(&state);
    let outcome = state.depart(JobId(2), 1).unwrap();
    assert!(matches!(outcome.removed, Removed::Waiting(waiting) if waiting.job.id == JobId(2)));
    assert_eq!(render(&state), before);
    assert_eq!(state.waiting(Class::BestEffort).count(), 0);
}

#[test]
fn bad_arrivals_and_unknown_departures_are_refused_and_change_nothing() {
    let mut state = matrix(2, 3, 2, 1, false);
    allocate(&mut state, be(1, 1), 0);
    let before = state.clone();
    let cases = [
        (be(1, 1), OneLevelGangError::DuplicateJob(JobId(1))),
        (be(2, 0), OneLevelGangError::EmptyJob(JobId(2))),
        (
            be(3, 3),
            OneLevelGangError::JobLargerThanCluster {
                id: JobId(3),
                requested: 3,
                nodes: 2,
            },
        ),
    ];
    for (job, error) in cases {
        assert_eq!(state.arrive(job, 5), Err(error));
    }
    let mut bad_spec = rt(4, 1, 5 * MS);
    if let crate::classes::one_level_gang::OneGsKind::RealTime { spec, .. } = &mut bad_spec.kind {
        *spec = RtSpec {
            period_ns: QUANTUM,
            frames: 1,
            work_ns: QUANTUM + 1,
        };
    }
    assert!(matches!(
        state.arrive(bad_spec, 5),
        Err(OneLevelGangError::InvalidRtSpec { .. })
    ));
    assert_eq!(
        state.depart(JobId(9), 5).unwrap_err(),
        OneLevelGangError::UnknownJob(JobId(9))
    );
    assert_eq!(state, before);
}

#[test]
fn departing_removes_every_copy_of_the_job() {
    let mut state = matrix(3, 3, 2, 1, false);
    allocate(&mut state, rt(1, 3, 5 * MS), 0);
    assert_eq!(render(&state), ["AAA", "aaa", "aaa"]);
    state.set_satisfied([JobId(1)]);
    state.depart(JobId(1), 1).unwrap();
    assert_eq!(render(&state), ["...", "...", "..."]);
    assert!(state.satisfied().is_empty());
    assert!((0..3).all(|row| (0..3).all(|node| {
        state
            .cell(row, node)
            .is_none_or(|cell| cell.kind == CellKind::Original)
    })));
}
