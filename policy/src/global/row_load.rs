//! A row's predicted load for paired gang: rows are matched "by their
//! maximal CPU utilization" (Paired Gang Scheduling §2.5), and a row holding an exclusive
//! job is never matched.

use serde::{Deserialize, Serialize};

use super::ids::{JobId, RowIndex};
use super::matrix::Matrix;
use super::pair_matching::can_pair;
use super::pairing_config::PairingConfig;
use super::utilization_predictor::UtilizationPredictor;

/// The facts about a row that matching needs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RowLoad {
    pub row: RowIndex,
    /// Highest predicted utilisation among the row's jobs (percent).
    pub max_percent: f64,
    /// The job with that utilisation.
    pub heaviest_job: JobId,
    /// An exclusive job of the row, if any (then the row runs alone).
    pub exclusive_job: Option<JobId>,
    /// A job predicted 100 % on speculation (new, or sharp change), if any.
    pub speculative_job: Option<JobId>,
}

/// The load of `row`, or `None` when the row is empty.
pub fn row_load(
    matrix: &Matrix,
    predictor: &UtilizationPredictor,
    row: RowIndex,
) -> Option<RowLoad> {
    let mut load: Option<RowLoad> = None;
    for job in matrix.row_jobs(row) {
        let prediction = predictor.predict(job.id());
        let entry = load.get_or_insert(RowLoad {
            row,
            max_percent: prediction.percent,
            heaviest_job: job.id(),
            exclusive_job: None,
            speculative_job: None,
        });
        if prediction.percent > entry.max_percent {
            entry.max_percent = prediction.percent;
            entry.heaviest_job = job.id();
        }
        if job.request.exclusive && entry.exclusive_job.is_none() {
            entry.exclusive_job = Some(job.id());
        }
        if prediction.is_speculative() && entry.speculative_job.is_none() {
            entry.speculative_job = Some(job.id());
        }
    }
    load
}

/// Whether rows `a` and `b` may run together now: both non-empty, distinct,
/// no exclusive job in either, and max(a) + max(b) + m < 100.
pub fn rows_can_pair(
    matrix: &Matrix,
    predictor: &UtilizationPredictor,
    config: &PairingConfig,
    a: RowIndex,
    b: RowIndex,
) -> bool {
    if a == b {
        return false;
    }
    match (
        row_load(matrix, predictor, a),
        row_load(matrix, predictor, b),
    ) {
        (Some(a), Some(b)) => {
            a.exclusive_job.is_none()
                && b.exclusive_job.is_none()
                && can_pair(a.max_percent, b.max_percent, config.margin_percent)
        }
        _ => false,
    }
}
