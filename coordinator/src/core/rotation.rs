//! The rotation of the matrix under the current policy: gang's (also used by
//! fcs, and trivially by fcfs's single row) or paired gang's.

use cosched_policy::global::{
    GangScheduler, Matrix, PairedGangScheduler, PairingConfig, RowMove, Slice, SliceReason,
    UtilizationPredictor,
};

use crate::policy::GlobalPolicy;

/// One computed slice.
#[derive(Debug, Clone, PartialEq)]
pub struct NextSlice {
    pub slice: Slice,
    /// Paired gang's explanation of the slice.
    pub reason: Option<SliceReason>,
    /// Rows changed to make slots homogeneous (the matrix changed).
    pub row_moves: Vec<RowMove>,
}

#[derive(Debug, Clone)]
pub enum Rotation {
    Gang(GangScheduler),
    Paired(PairedGangScheduler),
}

impl Rotation {
    pub fn new(policy: GlobalPolicy, pairing: PairingConfig) -> Self {
        match policy {
            GlobalPolicy::PairedGang => Self::Paired(PairedGangScheduler::new(pairing)),
            GlobalPolicy::Fcfs | GlobalPolicy::Gang | GlobalPolicy::Fcs => {
                Self::Gang(GangScheduler::new())
            }
        }
    }

    /// The next slice, `None` when no job holds cells.
    pub fn next(
        &mut self,
        matrix: &mut Matrix,
        predictor: &UtilizationPredictor,
    ) -> Option<NextSlice> {
        match self {
            Self::Gang(scheduler) => scheduler.next_slice(matrix).map(|slice| NextSlice {
                slice,
                reason: None,
                row_moves: Vec::new(),
            }),
            Self::Paired(scheduler) => {
                scheduler
                    .next_slice(matrix, predictor)
                    .map(|paired| NextSlice {
                        slice: paired.slice,
                        reason: Some(paired.reason),
                        row_moves: paired.row_moves,
                    })
            }
        }
    }

    /// Paired gang's explanation of `job`'s pairing in the current round.
    pub fn explain(&self, matrix: &Matrix, job: u32) -> Option<String> {
        match self {
            Self::Paired(scheduler) => scheduler
                .current_plan()?
                .explain_job(matrix, cosched_policy::global::JobId(u64::from(job))),
            Self::Gang(_) => None,
        }
    }
}
