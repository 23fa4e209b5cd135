//! Gang scheduling: slice switches and the utilisation reports that paired
//! gang scheduling predicts from.

use serde::{Deserialize, Serialize};

use super::jobs::JobId;
use super::kind::MessageKind;
use super::payload::Payload;

/// Coordinator → agent: switch to these matrix rows at `apply_at_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSlice {
    /// Changes when the matrix is rebuilt; slices of an older epoch are stale.
    pub epoch: u64,
    /// Slice counter within the epoch.
    pub slice: u64,
    /// Ousterhout-matrix rows that run in this slice (two for paired gang).
    pub rows: Vec<u32>,
    /// The jobs of those rows that have ranks on this node.
    pub active_jobs: Vec<JobId>,
    /// When to switch, in the agent's clock (the coordinator converts with
    /// its heartbeat offset estimate), nanoseconds.
    pub apply_at_ns: u64,
    /// Gang switches are strict: applied even if late (reported late in
    /// [`SliceSwitched`]). A non-strict switch is a hint a late agent may skip.
    pub strict: bool,
}

impl Payload for SwitchSlice {
    const KIND: MessageKind = MessageKind::SwitchSlice;
}

/// Agent → coordinator: the switch happened, at `switched_at_ns` in the
/// agent's clock (for slice-switch skew).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceSwitched {
    pub epoch: u64,
    pub slice: u64,
    pub switched_at_ns: u64,
}

impl Payload for SliceSwitched {
    const KIND: MessageKind = MessageKind::SliceSwitched;
}

/// One job's CPU use during one quantum on the reporting node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobUtilisation {
    pub job_id: JobId,
    /// Index of the quantum (slice) measured.
    pub quantum: u64,
    /// On-CPU time from eBPF divided by quantum length, in `0.0..=1.0`.
    pub cpu_utilisation: f64,
}

/// Agent → coordinator: per-job utilisation of finished quanta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UtilReport {
    pub jobs: Vec<JobUtilisation>,
}

impl Payload for UtilReport {
    const KIND: MessageKind = MessageKind::UtilReport;

    fn check(&self) -> Result<(), String> {
        match self
            .jobs
            .iter()
            .find(|job| !(0.0..=1.0).contains(&job.cpu_utilisation))
        {
            Some(job) => Err(format!(
                "job {} utilisation {} is outside 0..=1",
                job.job_id, job.cpu_utilisation
            )),
            None => Ok(()),
        }
    }
}
