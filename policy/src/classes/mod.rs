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
//! - [`RtSpec`], [`FairnessRatio`], [`Class`]: the shared vocabulary.
//! - [`one_level_gang`]: 1GS, the matrix rows split x:y, four-step
//!   replication, deterministic admission.

pub mod one_level_gang;
mod ratio;
mod spec;

pub use one_level_gang::{OneLevelGang, OneLevelGangConfig, OneLevelGangRotor};

pub use ratio::{Class, FairnessRatio, RatioError};
pub use spec::{RtSpec, RtSpecError};
