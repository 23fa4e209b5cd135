//! Helpers shared by the scenario and invariant tests.

use std::collections::BTreeSet;

use crate::global::{
    ColumnAllocation, JobId, JobRequest, Matrix, MatrixConfig, PlacedJob, QueuePolicy, Slice,
    SubmitOutcome, UtilizationPredictor,
};

pub fn gang_matrix(nodes: usize, rows: usize) -> Matrix {
    Matrix::new(MatrixConfig {
        max_rows: rows,
        ..MatrixConfig::gang(nodes)
    })
    .expect("valid config")
}

pub fn matrix_with(
    nodes: usize,
    rows: usize,
    allocation: ColumnAllocation,
    queue: QueuePolicy,
    repack_rows: bool,
) -> Matrix {
    Matrix::new(MatrixConfig {
        nodes,
        max_rows: rows,
        allocation,
        queue,
        repack_rows,
    })
    .expect("valid config")
}

pub fn job(id: u64, nodes: usize) -> JobRequest {
    JobRequest::new(JobId(id), nodes)
}

/// Submits a job that must be placed and returns its placement.
pub fn place(matrix: &mut Matrix, request: JobRequest) -> PlacedJob {
    match matrix.submit(request) {
        Ok(SubmitOutcome::Placed(placed)) => placed,
        other => panic!("expected a placement, got {other:?}"),
    }
}

/// A predictor where each listed job has been measured once (its calibration
/// quantum) at the given percent, so it is predicted exactly that.
pub fn measured(jobs: &[(u64, f64)]) -> UtilizationPredictor {
    let mut predictor = UtilizationPredictor::default();
    for &(id, percent) in jobs {
        predictor
            .observe_quantum(JobId(id), &[percent])
            .expect("valid sample");
    }
    predictor
}

/// Asserts the structural invariants of a matrix: every placed job holds
/// exactly its requested columns in exactly one row and nothing else holds
/// them; no cell holds an unknown job; placed and queued jobs are disjoint.
pub fn assert_matrix_consistent(matrix: &Matrix) {
    let mut held = BTreeSet::new();
    for job in matrix.placed_jobs() {
        assert_eq!(
            job.columns.len(),
            job.request.nodes,
            "{} column count",
            job.id()
        );
        for &node in &job.columns {
            assert_eq!(matrix.cell(job.row, node), Some(job.id()));
            assert!(held.insert((job.row, node)), "cell held twice");
        }
        let rows_holding: BTreeSet<usize> = (0..matrix.rows())
            .filter(|&row| (0..matrix.nodes()).any(|node| matrix.cell(row, node) == Some(job.id())))
            .collect();
        assert_eq!(
            rows_holding,
            BTreeSet::from([job.row]),
            "{} in one row",
            job.id()
        );
    }
    for row in 0..matrix.rows() {
        for node in 0..matrix.nodes() {
            if matrix.cell(row, node).is_some() {
                assert!(
                    held.contains(&(row, node)),
                    "cell ({row}, {node}) held by a stranger"
                );
            }
        }
    }
    for queued in matrix.queued_jobs() {
        assert!(
            matrix.placement(queued.id).is_none(),
            "{} both placed and queued",
            queued.id
        );
    }
}

/// Asserts a slice only runs jobs in their own row's slot or as alternates
/// on nodes idle in the row they join, each job on all of its nodes.
pub fn assert_jobs_run_only_in_own_slots_or_as_alternates(matrix: &Matrix, slice: &Slice) {
    for job in slice.active_jobs() {
        let placed = matrix.placement(job).expect("active jobs are placed");
        let own_slot = slice.rows.contains(placed.row);
        let alternate = slice.alternates.iter().find(|run| run.job == job);
        assert!(
            own_slot || alternate.is_some(),
            "{job} runs outside its slots"
        );
        if let Some(run) = alternate {
            assert!(!own_slot, "{job} is an alternate in its own slot");
            for &node in &placed.columns {
                assert_eq!(matrix.cell(run.in_row, node), None, "{job} displaces a job");
            }
        }
        for &node in &placed.columns {
            assert!(
                slice.active_on(node).contains(&job),
                "{job} runs on part of its nodes"
            );
        }
    }
    for (node, jobs) in slice.active_by_node.iter().enumerate() {
        for &job in jobs {
            let placed = matrix.placement(job).expect("active jobs are placed");
            assert!(
                placed.columns.contains(&node),
                "{job} runs on a node it does not hold"
            );
        }
    }
}

/// A matrix with exactly the given placements `(job, row, columns)`, built
/// through a checked snapshot (repacking off so the layout stays put).
pub fn layout(nodes: usize, rows: usize, placements: &[(u64, usize, &[usize])]) -> Matrix {
    use crate::global::MatrixSnapshot;
    let placed = placements
        .iter()
        .map(|&(id, row, columns)| PlacedJob {
            request: job(id, columns.len()),
            row,
            columns: columns.to_vec(),
        })
        .collect();
    Matrix::try_from(MatrixSnapshot {
        config: MatrixConfig {
            nodes,
            max_rows: rows,
            allocation: ColumnAllocation::FirstFit,
            queue: QueuePolicy::StrictFcfs,
            repack_rows: false,
        },
        placed,
        queue: Vec::new(),
        generation: 0,
    })
    .expect("consistent layout")
}
