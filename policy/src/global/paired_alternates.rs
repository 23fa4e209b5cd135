//! Alternate scheduling under paired gang (Paired Gang Scheduling §2.6).
//!
//! Each active row is a "side" of the slice; a node runs at most one job per
//! side, so at most two jobs. A job of another row may join a side when:
//! - all of its nodes are idle on that side (whole jobs only);
//! - its predicted utilisation falls within the band M of the jobs already on
//!   that side ("it must match the characteristics of other jobs that are
//!   already assigned to this slot");
//! - on every node where the other side runs a job K, neither it nor K is
//!   exclusive and their predictions satisfy x + y + m < 100, so alternates
//!   never break the pairing condition.

use super::alternate_scheduling::candidates_nearest_first;
use super::ids::JobId;
use super::matrix::{Matrix, PlacedJob};
use super::pair_matching::can_pair;
use super::pairing_config::PairingConfig;
use super::slice::{ActiveRows, AlternateRun};
use super::utilization_predictor::UtilizationPredictor;

/// One side of a slice: a row and who runs on each node for it.
struct Side {
    row: usize,
    occupant: Vec<Option<JobId>>,
    percents: Vec<f64>,
}

/// The alternates of a paired-gang slice, chosen greedily, nearest rows
/// first (the rows just before the slice's first row, as in gang).
pub fn paired_alternates(
    matrix: &Matrix,
    predictor: &UtilizationPredictor,
    config: &PairingConfig,
    rows: ActiveRows,
) -> Vec<AlternateRun> {
    let mut sides: Vec<Side> = rows
        .rows()
        .into_iter()
        .map(|row| Side {
            row,
            occupant: (0..matrix.nodes())
                .map(|node| matrix.cell(row, node))
                .collect(),
            percents: matrix
                .row_jobs(row)
                .iter()
                .map(|job| predictor.predict(job.id()).percent)
                .collect(),
        })
        .collect();
    let percent_of = |job: JobId| predictor.predict(job).percent;
    let is_exclusive = |job: JobId| {
        matrix
            .placement(job)
            .is_some_and(|placed| placed.request.exclusive)
    };
    let mut chosen = Vec::new();
    let candidates: Vec<&PlacedJob> = candidates_nearest_first(matrix, rows.rows()[0])
        .filter(|job| !rows.contains(job.row))
        .collect();
    for job in candidates {
        let percent = percent_of(job.id());
        let joinable = (0..sides.len()).find(|&side| {
            let own = &sides[side];
            let idle = job.columns.iter().all(|&node| own.occupant[node].is_none());
            let in_band = within_band(&own.percents, percent, config.homogeneity_band_percent);
            let co_runners_fit = sides
                .iter()
                .enumerate()
                .filter(|&(other, _)| other != side)
                .all(|(_, other)| {
                    job.columns.iter().all(|&node| match other.occupant[node] {
                        None => true,
                        Some(co_runner) => {
                            !job.request.exclusive
                                && !is_exclusive(co_runner)
                                && can_pair(percent, percent_of(co_runner), config.margin_percent)
                        }
                    })
                });
            idle && in_band && co_runners_fit
        });
        if let Some(side) = joinable {
            let side = &mut sides[side];
            for &node in &job.columns {
                side.occupant[node] = Some(job.id());
            }
            side.percents.push(percent);
            chosen.push(AlternateRun {
                job: job.id(),
                in_row: side.row,
            });
        }
    }
    chosen
}

/// True when `percent` lies within `band` of every value already on a side:
/// below min + band and above max − band.
fn within_band(percents: &[f64], percent: f64, band: f64) -> bool {
    let min = percents.iter().copied().fold(f64::INFINITY, f64::min);
    let max = percents.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    percents.is_empty() || (percent < min + band && percent > max - band)
}
