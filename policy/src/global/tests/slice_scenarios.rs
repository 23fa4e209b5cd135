//! Gang rotation, alternate scheduling and the per-node active sets.

use std::collections::BTreeSet;

use super::support::{
    assert_jobs_run_only_in_own_slots_or_as_alternates, gang_matrix, job, layout, place,
};
use crate::global::{
    ActiveRows, AlternateRun, GangScheduler, JobId, Matrix, MatrixConfig, alternate_candidates,
    gang_alternates, gang_row_for_slice,
};

/// Row 0: job 1 on nodes 0-2, job 3 on node 3 (full).
/// Row 1: job 2 on nodes 0-2, node 3 idle.
/// Row 2: job 4 on nodes 0-1, nodes 2-3 idle.
fn three_row_matrix() -> Matrix {
    let mut matrix = gang_matrix(4, 4);
    place(&mut matrix, job(1, 3));
    place(&mut matrix, job(2, 3));
    place(&mut matrix, job(3, 1));
    place(&mut matrix, job(4, 2));
    assert_eq!(matrix.placement(JobId(4)).unwrap().row, 2);
    matrix
}

#[test]
fn alternate_scheduling_fills_idle_nodes_of_other_rows() {
    let matrix = three_row_matrix();
    assert_eq!(
        alternate_candidates(&matrix, 0),
        Vec::<JobId>::new(),
        "row 0 is full"
    );
    assert_eq!(alternate_candidates(&matrix, 1), vec![JobId(3)]);
    assert_eq!(alternate_candidates(&matrix, 2), vec![JobId(3)]);

    let mut scheduler = GangScheduler::new();
    let _row0 = scheduler.next_slice(&matrix).unwrap();
    let row1 = scheduler.next_slice(&matrix).unwrap();
    assert_eq!(row1.rows, ActiveRows::Single(1));
    assert_eq!(
        row1.alternates,
        vec![AlternateRun {
            job: JobId(3),
            in_row: 1
        }]
    );
    assert_eq!(row1.active_on(3), &BTreeSet::from([JobId(3)]));
    assert_eq!(row1.active_on(0), &BTreeSet::from([JobId(2)]));
    assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, &row1);
}

#[test]
fn alternates_never_share_a_node_and_the_previous_row_goes_first() {
    // Node 0 is idle in row 2; jobs 1 (row 0) and 2 (row 1) both could use it.
    let matrix = layout(4, 3, &[(1, 0, &[0]), (2, 1, &[0]), (3, 2, &[1, 2, 3])]);
    assert_eq!(alternate_candidates(&matrix, 2), vec![JobId(2), JobId(1)]);
    // Row 1 ran just before row 2, so its job keeps running.
    assert_eq!(
        gang_alternates(&matrix, 2),
        vec![AlternateRun {
            job: JobId(2),
            in_row: 2
        }]
    );
}

#[test]
fn job_with_only_some_nodes_idle_is_not_an_alternate() {
    let matrix = layout(4, 2, &[(1, 0, &[0, 1]), (2, 1, &[1, 2, 3])]);
    // Job 2 would need node 1, which job 1 holds in row 0.
    assert!(gang_alternates(&matrix, 0).is_empty());
    // Job 1 would need node 1, which job 2 holds in row 1.
    assert!(gang_alternates(&matrix, 1).is_empty());
}

#[test]
fn gang_rotation_runs_each_non_empty_row_once_per_round() {
    let matrix = three_row_matrix();
    let mut scheduler = GangScheduler::new();
    let slices: Vec<_> = (0..6)
        .map(|_| scheduler.next_slice(&matrix).unwrap())
        .collect();
    let rows: Vec<ActiveRows> = slices.iter().map(|slice| slice.rows).collect();
    assert_eq!(
        rows,
        [0, 1, 2, 0, 1, 2].map(ActiveRows::Single).to_vec(),
        "round robin over rows 0-2"
    );
    assert_eq!(
        slices.iter().map(|s| s.round).collect::<Vec<_>>(),
        [0, 0, 0, 1, 1, 1]
    );
    assert_eq!(
        slices.iter().map(|s| s.number).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    for slice in &slices {
        assert_jobs_run_only_in_own_slots_or_as_alternates(&matrix, slice);
        assert!(
            slice.active_by_node.iter().all(|jobs| jobs.len() <= 1),
            "one job per node"
        );
    }
}

#[test]
fn empty_row_leaves_rotation() {
    let mut matrix = layout(
        4,
        3,
        &[(1, 0, &[0, 1, 2, 3]), (2, 1, &[0, 1]), (3, 2, &[0])],
    );
    let mut scheduler = GangScheduler::new();
    assert_eq!(
        scheduler.next_slice(&matrix).unwrap().rows,
        ActiveRows::Single(0)
    );
    matrix.remove(JobId(2)).unwrap();
    assert_eq!(matrix.non_empty_rows(), vec![0, 2]);
    // Row 1 was planned for this round but is empty now: it is skipped.
    assert_eq!(
        scheduler.next_slice(&matrix).unwrap().rows,
        ActiveRows::Single(2)
    );
    for _ in 0..4 {
        assert_ne!(
            scheduler.next_slice(&matrix).unwrap().rows,
            ActiveRows::Single(1)
        );
    }
    assert_eq!(gang_row_for_slice(&matrix, 0), Some(0));
    assert_eq!(gang_row_for_slice(&matrix, 1), Some(2));
    assert_eq!(gang_row_for_slice(&matrix, 2), Some(0));
}

#[test]
fn row_filled_during_a_round_joins_at_the_next_round() {
    let mut matrix = gang_matrix(2, 3);
    place(&mut matrix, job(1, 2));
    let mut scheduler = GangScheduler::new();
    assert_eq!(
        scheduler.next_slice(&matrix).unwrap().rows,
        ActiveRows::Single(0)
    );
    place(&mut matrix, job(2, 2));
    let next = scheduler.next_slice(&matrix).unwrap();
    assert_eq!((next.round, next.rows), (1, ActiveRows::Single(0)));
    let next = scheduler.next_slice(&matrix).unwrap();
    assert_eq!((next.round, next.rows), (1, ActiveRows::Single(1)));
}

#[test]
fn no_slice_without_placed_jobs() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(2)).unwrap();
    let mut scheduler = GangScheduler::new();
    assert!(scheduler.next_slice(&matrix).is_none());
    assert_eq!(gang_row_for_slice(&matrix, 5), None);
    place(&mut matrix, job(1, 1));
    let slice = scheduler.next_slice(&matrix).unwrap();
    assert_eq!(slice.active_jobs(), BTreeSet::from([JobId(1)]));
    assert!(slice.active_on(1).is_empty(), "node 1 idles");
}

#[test]
fn space_sharing_always_runs_its_single_row() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(4)).unwrap();
    place(&mut matrix, job(1, 2));
    place(&mut matrix, job(2, 2));
    let mut scheduler = GangScheduler::new();
    for _ in 0..3 {
        let slice = scheduler.next_slice(&matrix).unwrap();
        assert_eq!(slice.rows, ActiveRows::Single(0));
        assert_eq!(slice.active_jobs(), BTreeSet::from([JobId(1), JobId(2)]));
    }
}
