//! A round of paired gang scheduling: which rows run together in each slice,
//! and why (Paired Gang Scheduling §2.4-2.5). Matching is done once per round of the
//! matrix, with the algorithm of Fig. 4 over rows weighted by their maximum
//! predicted utilisation; rows holding an exclusive job stay out of it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ids::{JobId, RowIndex};
use super::matrix::{Matrix, RowMove};
use super::pair_matching::{MatchCandidate, MatchDecision, match_from_both_ends};
use super::pairing_config::PairingConfig;
use super::row_load::{RowLoad, row_load};
use super::slice::ActiveRows;
use super::utilization_predictor::UtilizationPredictor;

/// Why a slice runs the rows it runs. Its `Display` is the human-readable
/// explanation `cosched jobs` shows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceReason {
    /// Matched by Fig. 4: heavy + light + m < 100. `light_shared` when the
    /// light row was already matched to another row this round.
    Paired {
        heavy_row: RowIndex,
        heavy_percent: f64,
        light_row: RowIndex,
        light_percent: f64,
        margin_percent: f64,
        light_shared: bool,
    },
    /// The row holds an exclusive job, which must not be matched.
    AloneExclusive { row: RowIndex, job: JobId },
    /// The row holds a job predicted 100 % so it can be measured alone (new
    /// job, or sharp change).
    AloneMeasuring { row: RowIndex, job: JobId },
    /// No row is light enough to satisfy the pairing condition.
    AloneNoPartner { row: RowIndex, percent: f64 },
    /// The planned pair no longer satisfies the condition (predictions
    /// changed or a job arrived during the round), so the rows run apart.
    AloneAfterSplit { row: RowIndex, partner: RowIndex },
    /// The planned partner row emptied during the round.
    AlonePartnerLeft { row: RowIndex, partner: RowIndex },
}

impl fmt::Display for SliceReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Paired {
                heavy_row,
                heavy_percent,
                light_row,
                light_percent,
                margin_percent,
                light_shared,
            } => {
                write!(
                    f,
                    "row {heavy_row} ({heavy_percent:.1}%) paired with row {light_row} \
                     ({light_percent:.1}%): {heavy_percent:.1} + {light_percent:.1} + \
                     {margin_percent:.1} < 100"
                )?;
                if light_shared {
                    write!(
                        f,
                        "; row {light_row} was already matched, no unmatched row fits"
                    )?;
                }
                Ok(())
            }
            Self::AloneExclusive { row, job } => {
                write!(f, "row {row} alone: {job} is exclusive")
            }
            Self::AloneMeasuring { row, job } => write!(
                f,
                "row {row} alone: {job} is predicted 100% (new or sharp change) and is measured alone"
            ),
            Self::AloneNoPartner { row, percent } => write!(
                f,
                "row {row} alone: at {percent:.1}% no row is light enough to pair with"
            ),
            Self::AloneAfterSplit { row, partner } => write!(
                f,
                "row {row} alone: the pair with row {partner} no longer satisfies x + y + m < 100"
            ),
            Self::AlonePartnerLeft { row, partner } => {
                write!(f, "row {row} alone: partner row {partner} emptied")
            }
        }
    }
}

/// One planned slice of a round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlannedSlice {
    pub rows: ActiveRows,
    pub reason: SliceReason,
}

/// The plan of one round: slices in the order they run, plus the row moves
/// that slot homogeneity made before matching.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundPlan {
    pub round: u64,
    pub slices: Vec<PlannedSlice>,
    pub row_moves: Vec<RowMove>,
}

impl RoundPlan {
    /// The planned slices in which `row` runs.
    pub fn slices_of_row(&self, row: RowIndex) -> impl Iterator<Item = &PlannedSlice> {
        self.slices
            .iter()
            .filter(move |slice| slice.rows.contains(row))
    }

    /// The explanation of `job`'s pairing this round ("pair" in `cosched
    /// jobs`): the reasons of the slices its row runs in, joined by "; ".
    pub fn explain_job(&self, matrix: &Matrix, job: JobId) -> Option<String> {
        let row = matrix.placement(job)?.row;
        let reasons: Vec<String> = self
            .slices_of_row(row)
            .map(|slice| slice.reason.to_string())
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// Plans a round: exclusive rows alone, the other non-empty rows matched by
/// Fig. 4 on their maximum predicted utilisation. Slices are ordered by
/// their lowest row, so the round walks the matrix like gang's rotation.
pub fn plan_paired_round(
    matrix: &Matrix,
    predictor: &UtilizationPredictor,
    config: &PairingConfig,
    round: u64,
) -> RoundPlan {
    let loads: Vec<RowLoad> = matrix
        .non_empty_rows()
        .into_iter()
        .filter_map(|row| row_load(matrix, predictor, row))
        .collect();
    let load_of = |row: RowIndex| {
        loads
            .iter()
            .find(|load| load.row == row)
            .expect("row was loaded")
    };
    let mut slices: Vec<PlannedSlice> = loads
        .iter()
        .filter_map(|load| {
            load.exclusive_job.map(|job| PlannedSlice {
                rows: ActiveRows::Single(load.row),
                reason: SliceReason::AloneExclusive { row: load.row, job },
            })
        })
        .collect();
    let candidates: Vec<MatchCandidate<RowIndex>> = loads
        .iter()
        .filter(|load| load.exclusive_job.is_none())
        .map(|load| MatchCandidate {
            key: load.row,
            percent: load.max_percent,
        })
        .collect();
    for decision in match_from_both_ends(&candidates, config.margin_percent) {
        slices.push(match decision {
            MatchDecision::Pair {
                heavy,
                light,
                light_shared,
            } => PlannedSlice {
                rows: ActiveRows::Pair(heavy, light),
                reason: SliceReason::Paired {
                    heavy_row: heavy,
                    heavy_percent: load_of(heavy).max_percent,
                    light_row: light,
                    light_percent: load_of(light).max_percent,
                    margin_percent: config.margin_percent,
                    light_shared,
                },
            },
            MatchDecision::Alone(row) => PlannedSlice {
                rows: ActiveRows::Single(row),
                reason: alone_reason(load_of(row)),
            },
        });
    }
    slices.sort_by_key(|slice| (slice.rows.lowest_row(), slice.rows.rows()));
    RoundPlan {
        round,
        slices,
        row_moves: Vec::new(),
    }
}

fn alone_reason(load: &RowLoad) -> SliceReason {
    match load.speculative_job {
        Some(job) if load.max_percent >= 100.0 => {
            SliceReason::AloneMeasuring { row: load.row, job }
        }
        _ => SliceReason::AloneNoPartner {
            row: load.row,
            percent: load.max_percent,
        },
    }
}
