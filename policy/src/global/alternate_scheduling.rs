//! Alternate scheduling for gang scheduling (Paired Gang Scheduling §2.6, the Scheduler Testbed report §2.1):
//! a job of another row also runs in this row's slice when all of its nodes
//! are idle in this row. Only whole jobs spill over ("partial alternate
//! scheduling", the Scheduler Testbed report §2.1), since a job with part of its processes
//! running would spin on the absent ones.

use super::ids::{JobId, RowIndex};
use super::matrix::{Matrix, PlacedJob};
use super::slice::AlternateRun;

/// Every job of another row whose nodes are all idle in `row`. Two such jobs
/// may share a node; [`gang_alternates`] picks a conflict-free subset.
pub fn alternate_candidates(matrix: &Matrix, row: RowIndex) -> Vec<JobId> {
    let free = matrix.free_columns(row);
    candidates_nearest_first(matrix, row)
        .filter(|job| job.columns.iter().all(|&node| free[node]))
        .map(PlacedJob::id)
        .collect()
}

/// The alternates of `row` in a gang slice: candidates taken greedily, no two
/// on the same node. Jobs of the row just before come first, then the one
/// before that, and so on (the Scheduler Testbed report §2.1: a job "spills over" into the next
/// slots, so it just keeps running, saving a context switch).
pub fn gang_alternates(matrix: &Matrix, row: RowIndex) -> Vec<AlternateRun> {
    let mut free = matrix.free_columns(row);
    let mut chosen = Vec::new();
    for job in candidates_nearest_first(matrix, row) {
        if job.columns.iter().all(|&node| free[node]) {
            for &node in &job.columns {
                free[node] = false;
            }
            chosen.push(AlternateRun {
                job: job.id(),
                in_row: row,
            });
        }
    }
    chosen
}

/// Jobs of the other non-empty rows, rows ordered by distance going
/// backwards from `row` (row−1, row−2, … wrapping), jobs of a row by their
/// first column.
pub(super) fn candidates_nearest_first(
    matrix: &Matrix,
    row: RowIndex,
) -> impl Iterator<Item = &PlacedJob> {
    let rows = matrix.rows();
    (1..rows)
        .map(move |distance| (row + rows - distance) % rows)
        .flat_map(move |other| matrix.row_jobs(other))
}
