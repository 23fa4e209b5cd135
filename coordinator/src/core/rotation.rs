//! The rotation under the current policy, one slice at a time: gang's over
//! the Ousterhout matrix (also used by fcs, and trivially by fcfs's single
//! row), paired gang's, or 1GS's over its own matrix (`OneLevelGangRotor`:
//! its slots are gang slices, so agents enforce them like gang's). The
//! 2DCS policies have no slices.

use cosched_policy::{
    classes::{OneLevelGang, OneLevelGangRotor, one_level_gang::FirstFrame},
    global::{
        GangScheduler, Matrix, PairedGangScheduler, PairingConfig, RowMove, Slice, SliceReason,
        UtilizationPredictor,
    },
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
    /// 1GS: RT jobs whose first frame starts in this slice, and where.
    pub first_frames: Vec<FirstFrame>,
}

/// What a rotation turns: the Ousterhout matrix, or 1GS's.
pub enum Rows<'a> {
    Matrix(&'a mut Matrix, &'a UtilizationPredictor),
    OneLevelGang(&'a OneLevelGang),
}

#[derive(Debug, Clone)]
pub enum Rotation {
    Gang(GangScheduler),
    Paired(PairedGangScheduler),
    OneLevelGang(OneLevelGangRotor),
    /// 2dcs-tdm and 2dcs-ps: every placed job runs on its nodes.
    NoSlices,
}

impl Rotation {
    pub fn new(policy: GlobalPolicy, pairing: PairingConfig) -> Self {
        match policy {
            GlobalPolicy::PairedGang => Self::Paired(PairedGangScheduler::new(pairing)),
            GlobalPolicy::Fcfs | GlobalPolicy::Gang | GlobalPolicy::Fcs => {
                Self::Gang(GangScheduler::new())
            }
            GlobalPolicy::OneLevelGang => Self::OneLevelGang(OneLevelGangRotor::new()),
            GlobalPolicy::TwoDcsTdm | GlobalPolicy::TwoDcsPs => Self::NoSlices,
        }
    }

    /// The next slice, `None` when no job holds cells (or the policy has no
    /// slices, or `rows` is not what this rotation turns).
    pub fn next(&mut self, rows: Rows<'_>) -> Option<NextSlice> {
        let plain = |slice| NextSlice {
            slice,
            reason: None,
            row_moves: Vec::new(),
            first_frames: Vec::new(),
        };
        match (self, rows) {
            (Self::OneLevelGang(rotor), Rows::OneLevelGang(state)) => {
                rotor.next_slice(state).map(|slice| NextSlice {
                    first_frames: rotor.first_frames().to_vec(),
                    ..plain(slice)
                })
            }
            (Self::Gang(scheduler), Rows::Matrix(matrix, _)) => {
                scheduler.next_slice(matrix).map(plain)
            }
            (Self::Paired(scheduler), Rows::Matrix(matrix, predictor)) => scheduler
                .next_slice(matrix, predictor)
                .map(|paired| NextSlice {
                    slice: paired.slice,
                    reason: Some(paired.reason),
                    row_moves: paired.row_moves,
                    first_frames: Vec::new(),
                }),
            _ => None,
        }
    }

    /// 1GS: `job`'s processes are ready for their first frame (its warm-up
    /// in its start row ends). Other rotations have no warm-up.
    pub fn counters_ready(&mut self, job: cosched_policy::global::JobId) {
        if let Self::OneLevelGang(rotor) = self {
            rotor.counters_ready(job);
        }
    }

    /// Paired gang's explanation of `job`'s pairing in the current round.
    pub fn explain(&self, matrix: &Matrix, job: u32) -> Option<String> {
        match self {
            Self::Paired(scheduler) => scheduler
                .current_plan()?
                .explain_job(matrix, cosched_policy::global::JobId(u64::from(job))),
            Self::Gang(_) | Self::OneLevelGang(_) | Self::NoSlices => None,
        }
    }
}
