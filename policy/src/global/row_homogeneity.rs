//! Slot homogeneity for paired gang (Paired Gang Scheduling §2.5): rows are matched by
//! their maximum utilisation, so one exceptional job can stop a row from
//! pairing. A job J of row s with CPUutil(J) ≥ min(s) + M is moved to another
//! row where its nodes are free and the jobs stay within M of each other, or
//! else to an empty row; if neither exists it stays.
//!
//! Only measured predictions count: a job predicted 100 % on speculation
//! (new, or sharp change) is about to be measured and is neither moved nor
//! used as a row's minimum. The paper checks on every context switch; we
//! check once per round, right before matching, which is when it matters.

use super::ids::{JobId, RowIndex};
use super::matrix::{Matrix, RowMove};
use super::utilization_predictor::UtilizationPredictor;

/// Moves jobs out of heterogeneous rows; returns the moves made.
pub fn homogenize_rows(
    matrix: &mut Matrix,
    predictor: &UtilizationPredictor,
    band_percent: f64,
) -> Vec<RowMove> {
    let mut moves = Vec::new();
    for row in matrix.non_empty_rows() {
        let measured = measured_jobs(matrix, predictor, row);
        let Some(min) = measured
            .iter()
            .map(|&(_, percent)| percent)
            .reduce(f64::min)
        else {
            continue;
        };
        let mut outliers: Vec<(JobId, f64)> = measured
            .into_iter()
            .filter(|&(_, percent)| percent >= min + band_percent)
            .collect();
        outliers.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for (job, percent) in outliers {
            if let Some(target) = homogeneous_target(matrix, predictor, job, percent, band_percent)
            {
                moves.push(
                    matrix
                        .move_job_to_row(job, target)
                        .expect("target columns are free"),
                );
            }
        }
    }
    moves
}

/// A row other than the job's own where its columns are free and all
/// measured jobs plus this one span less than the band; the lowest such
/// non-empty row, else the lowest empty row.
fn homogeneous_target(
    matrix: &Matrix,
    predictor: &UtilizationPredictor,
    job: JobId,
    percent: f64,
    band_percent: f64,
) -> Option<RowIndex> {
    let placed = matrix.placement(job)?;
    let fits = |row: RowIndex| {
        row != placed.row
            && placed
                .columns
                .iter()
                .all(|&node| matrix.cell(row, node).is_none())
    };
    let homogeneous_with_job = |row: RowIndex| {
        let percents = measured_jobs(matrix, predictor, row)
            .into_iter()
            .map(|(_, other)| other)
            .chain([percent]);
        let (min, max) = percents.fold((f64::INFINITY, f64::NEG_INFINITY), |(min, max), p| {
            (min.min(p), max.max(p))
        });
        max < min + band_percent
    };
    let rows = 0..matrix.rows();
    rows.clone()
        .find(|&row| !matrix.is_row_empty(row) && fits(row) && homogeneous_with_job(row))
        .or_else(|| {
            rows.into_iter()
                .find(|&row| matrix.is_row_empty(row) && fits(row))
        })
}

fn measured_jobs(
    matrix: &Matrix,
    predictor: &UtilizationPredictor,
    row: RowIndex,
) -> Vec<(JobId, f64)> {
    matrix
        .row_jobs(row)
        .iter()
        .map(|job| (job.id(), predictor.predict(job.id())))
        .filter(|(_, prediction)| !prediction.is_speculative())
        .map(|(job, prediction)| (job, prediction.percent))
        .collect()
}
