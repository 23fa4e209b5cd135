//! Best-effort (BE) and real-time (RT) jobs together (the BE/RT coscheduling
//! paper, §3–§4; see docs/references.md).
//!
//! An RT job is a pipeline of processes that must each produce `frames` (b)
//! frames every `b · period` (Γ), each frame costing `work` (τ) of CPU; a BE
//! job only wants to finish early. The administrator's fairness ratio x:y says
//! what share of the cluster's time each class gets when both want more.
//!
//! Everything here is pure (no clock, no syscall): time comes in as
//! CLOCK_MONOTONIC nanoseconds, and the coordinator and agents turn the
//! decisions into slices, divisions and kernel attributes.
//!
//! - [`RtSpec`], [`FairnessRatio`], [`Class`]: the shared vocabulary;
//!   [`RtJob`]: an RT job with each process's own work (§4.4's τ_Aj).
//! - [`frames`]: frame accounting per RT process — windows, misses, the EDF
//!   deadline, the CPU budget (§3.1, §4.2).
//! - [`edf`], [`edf_priorities`]: EDF inside the RT class, as SCHED_FIFO
//!   priorities or SCHED_DEADLINE parameters (§4.2).
//! - [`tdm`]: 2DCS-TDM — division clock, per-node class decision with
//!   lending, laxity allocation, the paper's admission rule (§4.2, §4.4).
//! - [`ps`]: 2DCS-PS — per-node virtual-time choice of class (§4.3).
//! - [`admission`]: the admission rules side by side, including statistical
//!   admission from measured work (§4.4, §5.2).
//! - [`ledger`]: what is placed on each node, which the allocators read.
//! - [`one_level_gang`]: 1GS, the matrix rows split x:y, four-step
//!   replication, deterministic admission (§4.1, §4.4).

pub mod admission;
pub mod edf;
pub mod edf_priorities;
pub mod frames;
mod job;
pub mod ledger;
pub mod one_level_gang;
pub mod ps;
mod ratio;
mod spec;
pub mod tdm;

#[cfg(test)]
mod tests;

pub use admission::{
    AdmissionRule, MeasuredWork, ProbabilisticParams, Rejection, StatisticalParams, WorkMoments,
    WorkSamples,
};
pub use edf::{DeadlineParams, EdfOrder, RtTask, deadline_params};
pub use edf_priorities::{BandError, EdfPriorities, PriorityBand, PriorityChanges};
pub use frames::{
    BudgetParams, FrameReading, FrameState, FrameTotals, JobFrames, ProcessFrames, WindowReport,
};
pub use job::{RtJob, RtJobError};
pub use ledger::{ClassLedger, NodeLedger, RtPlacement};
pub use one_level_gang::{OneLevelGang, OneLevelGangConfig, OneLevelGangRotor};
pub use ps::{PsNode, PsParams, Readiness};
pub use ratio::{Class, FairnessRatio, RatioError};
pub use spec::{RtSpec, RtSpecError};
pub use tdm::{
    AllocationError, ClassDecision, DEFAULT_GRACE_PERIODS, Division, DivisionClock, DivisionCost,
    DivisionError, DivisionFallback, DivisionSource, Laxity, RtLoadModel, TdmEvent, TdmNode,
    due_before_be_division_ends,
};
