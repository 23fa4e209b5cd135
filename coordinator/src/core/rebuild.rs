//! Rebuilding the matrix under a new configuration (a policy switch between
//! space sharing and gang, or a changed `max_rows`), keeping every placed
//! job on its columns and the queue in order.

use cosched_policy::global::{
    Matrix, MatrixConfig, MatrixSnapshot, PlacedJob, RowIndex, SubmitOutcome,
};

/// The rebuilt matrix and the queued jobs that now hold cells.
pub fn rebuild_matrix(
    matrix: &Matrix,
    config: MatrixConfig,
) -> Result<(Matrix, Vec<PlacedJob>), String> {
    if config.nodes != matrix.nodes() {
        return Err(format!(
            "the matrix has {} nodes, the new configuration {}",
            matrix.nodes(),
            config.nodes
        ));
    }
    let used: Vec<RowIndex> = matrix.non_empty_rows();
    if used.len() > config.max_rows {
        return Err(format!(
            "{} rows are in use but the new configuration has only {} (wait for jobs to end or cancel some)",
            used.len(),
            config.max_rows
        ));
    }
    // Rows keep their relative order; each one's columns are unchanged, so
    // no two jobs can collide.
    let placed: Vec<PlacedJob> = matrix
        .placed_jobs()
        .map(|job| {
            let mut job = job.clone();
            if job.row >= config.max_rows {
                job.row = used
                    .iter()
                    .position(|&row| row == job.row)
                    .expect("a placed job's row is in use");
            }
            job
        })
        .collect();
    let mut rebuilt = Matrix::try_from(MatrixSnapshot {
        config,
        placed,
        queue: Vec::new(),
        generation: matrix.generation() + 1,
    })
    .map_err(|error| error.to_string())?;
    let mut started = Vec::new();
    for request in matrix.queued_jobs() {
        if let SubmitOutcome::Placed(job) = rebuilt
            .submit(request.clone())
            .map_err(|error| error.to_string())?
        {
            started.push(job);
        }
    }
    Ok((rebuilt, started))
}

#[cfg(test)]
mod tests {
    use cosched_policy::global::{JobId, JobRequest};

    use super::*;

    fn gang(nodes: usize, rows: usize) -> MatrixConfig {
        MatrixConfig {
            max_rows: rows,
            ..MatrixConfig::gang(nodes)
        }
    }

    #[test]
    fn switching_to_space_sharing_moves_the_only_used_row_to_row_zero() {
        let mut matrix = Matrix::new(gang(2, 4)).unwrap();
        matrix.submit(JobRequest::new(JobId(1), 2)).unwrap();
        matrix.submit(JobRequest::new(JobId(2), 2)).unwrap();
        matrix.remove(JobId(1)).unwrap();
        let (rebuilt, started) = rebuild_matrix(&matrix, MatrixConfig::space_sharing(2)).unwrap();
        assert_eq!(rebuilt.placement(JobId(2)).unwrap().row, 0);
        assert!(started.is_empty());
    }

    #[test]
    fn switching_to_space_sharing_with_two_rows_in_use_is_refused() {
        let mut matrix = Matrix::new(gang(2, 4)).unwrap();
        matrix.submit(JobRequest::new(JobId(1), 2)).unwrap();
        matrix.submit(JobRequest::new(JobId(2), 2)).unwrap();
        let error = rebuild_matrix(&matrix, MatrixConfig::space_sharing(2)).unwrap_err();
        assert!(error.contains("2 rows are in use"), "{error}");
    }

    #[test]
    fn growing_rows_starts_queued_jobs_in_order() {
        let mut matrix = Matrix::new(MatrixConfig::space_sharing(2)).unwrap();
        matrix.submit(JobRequest::new(JobId(1), 2)).unwrap();
        matrix.submit(JobRequest::new(JobId(2), 1)).unwrap();
        matrix.submit(JobRequest::new(JobId(3), 2)).unwrap();
        let (rebuilt, started) = rebuild_matrix(&matrix, gang(2, 2)).unwrap();
        let ids: Vec<JobId> = started.iter().map(PlacedJob::id).collect();
        assert_eq!(ids, vec![JobId(2)]);
        assert_eq!(rebuilt.queue_position(JobId(3)), Some(0));
    }
}
