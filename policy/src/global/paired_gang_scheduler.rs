//! Paired gang scheduling's rotation (Paired Gang Scheduling §2): once per round of the
//! matrix, rows are made homogeneous (§2.5) and matched (Fig. 4); then the
//! round's slices run one by one, each with one or two rows and alternates
//! (§2.6).
//!
//! Predictions keep changing during a round (every quantum is reported), and
//! jobs arrive and leave. Before a planned pair runs it is checked again:
//! a pair that no longer satisfies x + y + m < 100, or now holds an
//! exclusive job, runs as two single slices. Checking can only split pairs,
//! never form new ones, so the fairness of matching once per round (§2.4)
//! is kept, and a job that just turned speculative (sharp change) runs alone
//! at its next turn.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::ids::RowIndex;
use super::matrix::{Matrix, RowMove};
use super::paired_alternates::paired_alternates;
use super::paired_plan::{PlannedSlice, RoundPlan, SliceReason, plan_paired_round};
use super::pairing_config::PairingConfig;
use super::row_homogeneity::homogenize_rows;
use super::row_load::rows_can_pair;
use super::slice::{ActiveRows, Slice};
use super::utilization_predictor::UtilizationPredictor;

/// A paired-gang slice with its explanation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedSlice {
    pub slice: Slice,
    pub reason: SliceReason,
    /// Homogeneity moves made because this slice started a round (empty
    /// otherwise); the coordinator persists the matrix after them.
    pub row_moves: Vec<RowMove>,
}

/// State of the paired-gang rotation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedGangScheduler {
    config: PairingConfig,
    next_number: u64,
    rounds_started: u64,
    plan: Option<RoundPlan>,
    pending: VecDeque<PlannedSlice>,
    rows_run_in_round: BTreeSet<RowIndex>,
}

impl PairedGangScheduler {
    pub fn new(config: PairingConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    pub fn config(&self) -> &PairingConfig {
        &self.config
    }

    /// The plan of the current round, for explanations.
    pub fn current_plan(&self) -> Option<&RoundPlan> {
        self.plan.as_ref()
    }

    /// The next slice, or `None` when no job is placed. May move jobs between
    /// rows (slot homogeneity) when it starts a round.
    pub fn next_slice(
        &mut self,
        matrix: &mut Matrix,
        predictor: &UtilizationPredictor,
    ) -> Option<PairedSlice> {
        let mut row_moves = Vec::new();
        loop {
            if self.pending.is_empty() {
                if matrix.has_no_placed_jobs() {
                    return None;
                }
                row_moves.extend(self.start_round(matrix, predictor));
            }
            let planned = self.pending.pop_front().expect("a round was planned");
            if let Some(runnable) = self.recheck(matrix, predictor, planned) {
                self.rows_run_in_round.extend(runnable.rows.rows());
                let alternates = paired_alternates(matrix, predictor, &self.config, runnable.rows);
                let slice = Slice::new(
                    matrix,
                    self.next_number,
                    self.rounds_started - 1,
                    runnable.rows,
                    alternates,
                );
                self.next_number += 1;
                return Some(PairedSlice {
                    slice,
                    reason: runnable.reason,
                    row_moves,
                });
            }
        }
    }

    fn start_round(
        &mut self,
        matrix: &mut Matrix,
        predictor: &UtilizationPredictor,
    ) -> Vec<RowMove> {
        let row_moves = if self.config.homogenize_rows {
            homogenize_rows(matrix, predictor, self.config.homogeneity_band_percent)
        } else {
            Vec::new()
        };
        let mut plan = plan_paired_round(matrix, predictor, &self.config, self.rounds_started);
        plan.row_moves = row_moves.clone();
        self.rounds_started += 1;
        self.pending = plan.slices.iter().copied().collect();
        self.rows_run_in_round.clear();
        self.plan = Some(plan);
        row_moves
    }

    /// The planned slice as it can run now, or `None` to skip it.
    fn recheck(
        &mut self,
        matrix: &Matrix,
        predictor: &UtilizationPredictor,
        planned: PlannedSlice,
    ) -> Option<PlannedSlice> {
        match planned.rows {
            ActiveRows::Single(row) => (!matrix.is_row_empty(row)).then_some(planned),
            ActiveRows::Pair(first, second) => {
                self.recheck_pair(matrix, predictor, planned, first, second)
            }
        }
    }

    fn recheck_pair(
        &mut self,
        matrix: &Matrix,
        predictor: &UtilizationPredictor,
        planned: PlannedSlice,
        first: RowIndex,
        second: RowIndex,
    ) -> Option<PlannedSlice> {
        let partner_left = |row, partner| SliceReason::AlonePartnerLeft { row, partner };
        match (matrix.is_row_empty(first), matrix.is_row_empty(second)) {
            (true, true) => None,
            (true, false) => self.alone_unless_covered(second, partner_left(second, first)),
            (false, true) => self.alone_unless_covered(first, partner_left(first, second)),
            (false, false) if rows_can_pair(matrix, predictor, &self.config, first, second) => {
                Some(planned)
            }
            (false, false) => {
                let split = |row, partner| SliceReason::AloneAfterSplit { row, partner };
                if let Some(later) = self.alone_unless_covered(second, split(second, first)) {
                    self.pending.push_front(later);
                }
                Some(PlannedSlice {
                    rows: ActiveRows::Single(first),
                    reason: split(first, second),
                })
            }
        }
    }

    /// `row` alone, unless it already ran this round or runs later in it
    /// (a light row shared by several pairs).
    fn alone_unless_covered(&self, row: RowIndex, reason: SliceReason) -> Option<PlannedSlice> {
        let covered = self.rows_run_in_round.contains(&row)
            || self.pending.iter().any(|slice| slice.rows.contains(row));
        (!covered).then_some(PlannedSlice {
            rows: ActiveRows::Single(row),
            reason,
        })
    }
}
