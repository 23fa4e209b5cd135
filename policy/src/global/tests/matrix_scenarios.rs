//! The Ousterhout matrix: allocation, queueing, removal, re-packing,
//! persistence.

use super::support::{assert_matrix_consistent, gang_matrix, job, matrix_with, place};
use crate::global::{
    ColumnAllocation, JobId, Matrix, MatrixConfig, MatrixError, MatrixSnapshot, QueuePolicy,
    RemovedJob, RowMove, SubmitOutcome,
};

#[test]
fn first_fit_places_job_in_lowest_row_with_room() {
    let mut matrix = gang_matrix(4, 4);
    let a = place(&mut matrix, job(1, 3));
    let b = place(&mut matrix, job(2, 2));
    let c = place(&mut matrix, job(3, 1));
    let d = place(&mut matrix, job(4, 2));
    assert_eq!((a.row, a.columns), (0, vec![0, 1, 2]));
    assert_eq!((b.row, b.columns), (1, vec![0, 1]));
    assert_eq!(
        (c.row, c.columns),
        (0, vec![3]),
        "row 0 still has room for one"
    );
    assert_eq!((d.row, d.columns), (1, vec![2, 3]));
    assert_matrix_consistent(&matrix);
}

#[test]
fn first_fit_uses_scattered_columns_when_no_run_is_free() {
    let mut matrix = matrix_with(
        4,
        1,
        ColumnAllocation::FirstFit,
        QueuePolicy::StrictFcfs,
        false,
    );
    place(&mut matrix, job(1, 1));
    place(&mut matrix, job(2, 1));
    place(&mut matrix, job(3, 1));
    matrix.remove(JobId(2)).unwrap();
    // Free: columns 1 and 3, not adjacent.
    let d = place(&mut matrix, job(4, 2));
    assert_eq!(d.columns, vec![1, 3]);
}

#[test]
fn buddy_allocates_aligned_power_of_two_blocks() {
    let mut matrix = matrix_with(8, 2, ColumnAllocation::Buddy, QueuePolicy::StrictFcfs, true);
    let a = place(&mut matrix, job(1, 1));
    let b = place(&mut matrix, job(2, 2));
    let c = place(&mut matrix, job(3, 3));
    let d = place(&mut matrix, job(4, 1));
    let e = place(&mut matrix, job(5, 2));
    assert_eq!((a.row, a.columns), (0, vec![0]));
    assert_eq!(
        (b.row, b.columns),
        (0, vec![2, 3]),
        "block of 2 aligned at 2"
    );
    assert_eq!(
        (c.row, c.columns),
        (0, vec![4, 5, 6]),
        "block of 4 aligned at 4"
    );
    assert_eq!((d.row, d.columns), (0, vec![1]));
    // Row 0 has column 7 free but no aligned free block of 2.
    assert_eq!((e.row, e.columns), (1, vec![0, 1]));
    for placed in matrix.placed_jobs() {
        let block = placed.request.nodes.next_power_of_two();
        assert_eq!(placed.columns[0] % block, 0, "{} is aligned", placed.id());
        assert!(
            placed.columns.windows(2).all(|w| w[1] == w[0] + 1),
            "contiguous"
        );
    }
    assert_matrix_consistent(&matrix);
}

#[test]
fn job_larger_than_cluster_is_rejected() {
    let mut matrix = gang_matrix(4, 2);
    let before = matrix.clone();
    assert_eq!(
        matrix.submit(job(1, 5)),
        Err(MatrixError::JobLargerThanCluster {
            id: JobId(1),
            requested: 5,
            nodes: 4
        })
    );
    assert_eq!(
        matrix.submit(job(2, 0)),
        Err(MatrixError::EmptyJob(JobId(2)))
    );
    assert_eq!(matrix, before, "a refused job changes nothing");
}

#[test]
fn duplicate_job_id_is_rejected_whether_placed_or_queued() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(2)).unwrap();
    place(&mut matrix, job(1, 2));
    assert_eq!(
        matrix.submit(job(2, 1)),
        Ok(SubmitOutcome::Queued { position: 0 })
    );
    assert_eq!(
        matrix.submit(job(1, 1)),
        Err(MatrixError::DuplicateJob(JobId(1)))
    );
    assert_eq!(
        matrix.submit(job(2, 1)),
        Err(MatrixError::DuplicateJob(JobId(2)))
    );
}

#[test]
fn removing_unknown_job_is_an_error() {
    let mut matrix = gang_matrix(2, 2);
    assert_eq!(
        matrix.remove(JobId(9)).unwrap_err(),
        MatrixError::UnknownJob(JobId(9))
    );
    assert_eq!(
        matrix.move_job_to_row(JobId(9), 0).unwrap_err(),
        MatrixError::UnknownJob(JobId(9))
    );
}

#[test]
fn space_sharing_has_exactly_one_row_and_queues_the_rest() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(4)).unwrap();
    assert_eq!(matrix.rows(), 1);
    place(&mut matrix, job(1, 3));
    assert_eq!(
        matrix.submit(job(2, 2)),
        Ok(SubmitOutcome::Queued { position: 0 })
    );
    assert_eq!(matrix.non_empty_rows(), vec![0]);
}

#[test]
fn queued_job_starts_when_nodes_free() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(4)).unwrap();
    place(&mut matrix, job(1, 3));
    matrix.submit(job(2, 2)).unwrap();
    let outcome = matrix.remove(JobId(1)).unwrap();
    assert!(matches!(outcome.removed, RemovedJob::Placed(ref placed) if placed.id() == JobId(1)));
    assert_eq!(outcome.started.len(), 1);
    assert_eq!(outcome.started[0].id(), JobId(2));
    assert_eq!(matrix.queued_jobs().count(), 0);
    assert_matrix_consistent(&matrix);
}

#[test]
fn strict_fcfs_head_blocks_jobs_that_would_fit() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(4)).unwrap();
    place(&mut matrix, job(1, 3));
    assert_eq!(
        matrix.submit(job(2, 4)),
        Ok(SubmitOutcome::Queued { position: 0 })
    );
    // One node is free, but job 2 arrived first.
    assert_eq!(
        matrix.submit(job(3, 1)),
        Ok(SubmitOutcome::Queued { position: 1 })
    );
    let outcome = matrix.remove(JobId(1)).unwrap();
    let started: Vec<JobId> = outcome.started.iter().map(|placed| placed.id()).collect();
    assert_eq!(
        started,
        vec![JobId(2)],
        "the head starts; job 3 still waits behind it"
    );
    assert_eq!(matrix.queue_position(JobId(3)), Some(0));
}

#[test]
fn backfill_lets_jobs_that_fit_overtake_the_head() {
    let mut matrix = matrix_with(
        4,
        1,
        ColumnAllocation::FirstFit,
        QueuePolicy::Backfill,
        true,
    );
    place(&mut matrix, job(1, 3));
    matrix.submit(job(2, 4)).unwrap();
    assert!(matches!(
        matrix.submit(job(3, 1)),
        Ok(SubmitOutcome::Placed(_))
    ));
    assert_eq!(matrix.queue_position(JobId(2)), Some(0));
}

#[test]
fn removing_the_queue_head_starts_the_job_behind_it() {
    let mut matrix = Matrix::new(MatrixConfig::space_sharing(4)).unwrap();
    place(&mut matrix, job(1, 3));
    matrix.submit(job(2, 4)).unwrap();
    matrix.submit(job(3, 1)).unwrap();
    let outcome = matrix.remove(JobId(2)).unwrap();
    assert!(matches!(outcome.removed, RemovedJob::Queued(ref request) if request.id == JobId(2)));
    assert_eq!(outcome.started[0].id(), JobId(3));
}

#[test]
fn repacking_moves_jobs_down_so_rows_empty_out() {
    let mut matrix = gang_matrix(4, 4);
    place(&mut matrix, job(1, 4));
    place(&mut matrix, job(2, 2));
    place(&mut matrix, job(3, 2));
    assert_eq!(matrix.non_empty_rows(), vec![0, 1]);
    let outcome = matrix.remove(JobId(1)).unwrap();
    assert_eq!(
        outcome.moved,
        vec![
            RowMove {
                job: JobId(2),
                from_row: 1,
                to_row: 0
            },
            RowMove {
                job: JobId(3),
                from_row: 1,
                to_row: 0
            },
        ]
    );
    assert_eq!(matrix.non_empty_rows(), vec![0]);
    assert_matrix_consistent(&matrix);
}

#[test]
fn without_repacking_rows_keep_their_jobs() {
    let mut matrix = matrix_with(
        4,
        4,
        ColumnAllocation::FirstFit,
        QueuePolicy::StrictFcfs,
        false,
    );
    place(&mut matrix, job(1, 4));
    place(&mut matrix, job(2, 2));
    let outcome = matrix.remove(JobId(1)).unwrap();
    assert!(outcome.moved.is_empty());
    assert_eq!(matrix.non_empty_rows(), vec![1]);
    // A new job goes to the lowest row with room, the empty row 0.
    assert_eq!(place(&mut matrix, job(3, 3)).row, 0);
}

#[test]
fn moving_a_job_onto_taken_columns_is_refused() {
    let mut matrix = gang_matrix(4, 2);
    place(&mut matrix, job(1, 2));
    place(&mut matrix, job(2, 4));
    assert_eq!(
        matrix.move_job_to_row(JobId(2), 0),
        Err(MatrixError::ColumnsTaken {
            job: JobId(2),
            row: 0,
            node: 0
        })
    );
    assert_eq!(
        matrix.move_job_to_row(JobId(1), 7),
        Err(MatrixError::RowOutOfRange { row: 7, rows: 2 })
    );
}

#[test]
fn snapshot_restores_the_same_matrix() {
    let mut matrix = gang_matrix(4, 2);
    place(&mut matrix, job(1, 3));
    place(&mut matrix, job(2, 4));
    matrix.submit(job(3, 4)).unwrap();
    let restored = Matrix::try_from(MatrixSnapshot::from(matrix.clone())).unwrap();
    assert_eq!(restored, matrix);
}

#[test]
fn snapshot_with_a_cell_held_twice_is_refused() {
    let mut matrix = gang_matrix(4, 2);
    place(&mut matrix, job(1, 2));
    place(&mut matrix, job(2, 2));
    let mut snapshot = MatrixSnapshot::from(matrix);
    snapshot.placed[1].row = 0;
    snapshot.placed[1].columns = vec![1, 2];
    let error = Matrix::try_from(snapshot).unwrap_err();
    assert!(
        matches!(error, MatrixError::InconsistentSnapshot(ref text) if text.contains("held twice"))
    );
}

#[test]
fn snapshot_with_wrong_column_count_is_refused() {
    let mut matrix = gang_matrix(4, 2);
    place(&mut matrix, job(1, 2));
    let mut snapshot = MatrixSnapshot::from(matrix);
    snapshot.placed[0].columns = vec![0];
    assert!(matches!(
        Matrix::try_from(snapshot),
        Err(MatrixError::InconsistentSnapshot(_))
    ));
}

#[test]
fn matrix_state_is_serde_serialisable() {
    fn assert_serde<T: serde::Serialize + serde::de::DeserializeOwned>() {}
    assert_serde::<Matrix>();
    assert_serde::<MatrixSnapshot>();
    assert_serde::<crate::global::UtilizationPredictor>();
    assert_serde::<crate::global::GangScheduler>();
    assert_serde::<crate::global::PairedGangScheduler>();
    assert_serde::<crate::global::ClockOffsetEstimator>();
}

#[test]
fn invalid_config_is_refused() {
    assert!(matches!(
        Matrix::new(MatrixConfig::gang(0)),
        Err(MatrixError::InvalidConfig(_))
    ));
    let no_rows = MatrixConfig {
        max_rows: 0,
        ..MatrixConfig::gang(2)
    };
    assert!(matches!(
        Matrix::new(no_rows),
        Err(MatrixError::InvalidConfig(_))
    ));
}

// --- jobs launched by something else (attached on given nodes) -----------

#[test]
fn an_attached_job_takes_the_lowest_row_where_its_nodes_are_free() {
    let mut matrix = gang_matrix(4, 3);
    place(&mut matrix, job(1, 2)); // row 0, nodes 0-1
    place(&mut matrix, job(2, 1)); // row 0, node 2
    let attached = matrix.attach(job(3, 2), &[3, 1]).unwrap();
    assert_eq!((attached.row, attached.columns), (1, vec![1, 3]));
    let beside = matrix.attach(job(4, 1), &[3]).unwrap();
    assert_eq!(beside.row, 0, "node 3 is free in row 0");
    assert_matrix_consistent(&matrix);
}

#[test]
fn an_attached_job_overtakes_the_queue_because_it_already_runs() {
    let mut matrix = gang_matrix(2, 1);
    place(&mut matrix, job(1, 1)); // node 0
    assert!(matches!(
        matrix.submit(job(2, 2)).unwrap(),
        SubmitOutcome::Queued { position: 0 }
    ));
    let attached = matrix.attach(job(3, 1), &[1]).unwrap();
    assert_eq!((attached.row, attached.columns), (0, vec![1]));
    assert_eq!(matrix.queue_position(JobId(2)), Some(0), "still waiting");
    assert_matrix_consistent(&matrix);
}

#[test]
fn an_attached_job_with_no_free_row_on_its_nodes_is_refused_and_nothing_changes() {
    let mut matrix = gang_matrix(2, 2);
    place(&mut matrix, job(1, 2));
    place(&mut matrix, job(2, 1)); // row 1, node 0
    let before = matrix.clone();
    let error = matrix.attach(job(3, 2), &[0, 1]).unwrap_err();
    assert!(matches!(error, MatrixError::NoRowFree { .. }), "{error}");
    assert!(error.to_string().contains("[0, 1]"), "{error}");
    assert_eq!(matrix, before);
}

#[test]
fn attaching_to_nodes_outside_the_matrix_or_twice_the_same_node_is_refused() {
    let mut matrix = gang_matrix(2, 2);
    for (columns, nodes) in [(vec![0, 2], 2), (vec![1, 1], 2), (vec![0], 2)] {
        let error = matrix.attach(job(3, nodes), &columns).unwrap_err();
        assert!(
            matches!(
                error,
                MatrixError::BadAttachedColumns { .. }
                    | MatrixError::AttachedColumnsMismatch { .. }
            ),
            "{columns:?}: {error}"
        );
    }
    assert!(matrix.has_no_placed_jobs());
}

#[test]
fn an_attached_job_is_removed_like_any_other_and_starts_the_queue() {
    let mut matrix = gang_matrix(2, 1);
    matrix.attach(job(1, 2), &[0, 1]).unwrap();
    matrix.submit(job(2, 2)).unwrap();
    let outcome = matrix.remove(JobId(1)).unwrap();
    assert_eq!(outcome.started.len(), 1);
    assert_matrix_consistent(&matrix);
}
