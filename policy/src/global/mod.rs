//! Cluster-wide scheduling algorithms: the Ousterhout matrix, gang and paired
//! gang slicing, and clock-offset estimation for synchronised switches.
//!
//! Everything here is pure: the coordinator feeds in submissions, removals,
//! utilisation reports and heartbeat timestamps, and gets back placements,
//! slices and estimates.
//!
//! - [`Matrix`] (ClusterSchedSim §4.1, the Scheduler Testbed report §2.1): rows = time slots up to the
//!   maximum MPL, columns = nodes; first-fit or buddy column allocation, a
//!   strict-FCFS (or backfilling) queue, re-packing, persisted as a checked
//!   [`MatrixSnapshot`]. One row ([`MatrixConfig::space_sharing`]) is FCFS
//!   space sharing.
//! - Alternate scheduling ([`alternate_candidates`], [`gang_alternates`],
//!   [`paired_alternates`]; Paired Gang Scheduling §2.6).
//! - [`GangScheduler`]: one row per slice, round robin over non-empty rows.
//! - Paired gang (Paired Gang Scheduling): [`UtilizationPredictor`] (equation 1, new jobs and
//!   sharp changes predicted 100 %), [`match_from_both_ends`] (Fig. 4),
//!   [`homogenize_rows`] (§2.5), [`plan_paired_round`] and
//!   [`PairedGangScheduler`].
//! - [`Slice::active_by_node`]: what each agent lets run in a slice.
//! - [`ClockOffsetEstimator`]: per-agent clock offset from 4-timestamp
//!   heartbeats, minimum-RTT filtered.

mod alternate_scheduling;
mod clock_offset;
mod column_allocation;
mod gang_scheduler;
mod ids;
mod matrix;
mod matrix_config;
mod matrix_error;
mod matrix_snapshot;
mod pair_matching;
mod paired_alternates;
mod paired_gang_scheduler;
mod paired_plan;
mod pairing_config;
mod row_homogeneity;
mod row_load;
mod slice;
mod utilization_predictor;

#[cfg(test)]
mod tests;

pub use alternate_scheduling::{alternate_candidates, gang_alternates};
pub use clock_offset::{
    ClockError, ClockOffsetConfig, ClockOffsetEstimator, HeartbeatTimestamps, OffsetEstimate,
    OffsetSample, ScheduleClockBounds,
};
pub use column_allocation::{buddy_block_size, choose_columns};
pub use gang_scheduler::{GangScheduler, gang_row_for_slice};
pub use ids::{JobId, JobRequest, NodeIndex, RowIndex};
pub use matrix::{Matrix, PlacedJob, RemoveOutcome, RemovedJob, RowMove, SubmitOutcome};
pub use matrix_config::{ColumnAllocation, DEFAULT_MAX_ROWS, MatrixConfig, QueuePolicy};
pub use matrix_error::MatrixError;
pub use matrix_snapshot::MatrixSnapshot;
pub use pair_matching::{MatchCandidate, MatchDecision, can_pair, match_from_both_ends};
pub use paired_alternates::paired_alternates;
pub use paired_gang_scheduler::{PairedGangScheduler, PairedSlice};
pub use paired_plan::{PlannedSlice, RoundPlan, SliceReason, plan_paired_round};
pub use pairing_config::PairingConfig;
pub use row_homogeneity::homogenize_rows;
pub use row_load::{RowLoad, row_load, rows_can_pair};
pub use slice::{ActiveRows, AlternateRun, Slice, active_jobs_by_node};
pub use utilization_predictor::{
    EQUATION_1_HISTORY, FULL_UTILIZATION_PERCENT, Prediction, PredictionBasis, PredictorConfig,
    PredictorError, QuantumTiming, SharpChangeDirection, UtilizationPredictor, equation_1,
};
