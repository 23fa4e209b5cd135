//! What real-time jobs achieve on a node (protocol 1.3): agent →
//! coordinator `FrameReport`.
//!
//! The coordinator shows each RT job's miss rate, leaves RT jobs that already
//! produce their frames out of 1GS's replication (§4.1: only jobs with
//! n < b are replicated), and, under statistical admission, counts the work
//! agents measured instead of the declared one.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::jobs::JobId;
use super::kind::MessageKind;
use super::payload::Payload;

/// One RT job's rank on the reporting node. Counts are cumulative since
/// the agent started tracking the rank (they restart with the agent), so a
/// report replaces the previous one and a lost report loses nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFrames {
    pub job_id: JobId,
    /// Frames completed (closed windows and the current one).
    pub frames: u64,
    /// Frames due in the closed windows: b per window.
    pub expected: u64,
    /// Of those, frames produced in time: min(n, b) per window.
    pub met: u64,
    /// Frames missed: max(0, b − n) per window; `met + missed == expected`.
    pub missed: u64,
    /// Every RT process of the rank has produced its b frames in its
    /// current window (n ≥ b).
    pub satisfied: bool,
    /// The 95th percentile of the rank's recent per-frame CPU time, once the
    /// agent measured some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_p95_ns: Option<u64>,
    /// The mean and the standard deviation of the same samples, ns (what
    /// probabilistic admission counts). Sent only to a coordinator of
    /// protocol 1.8 or later ([`MOMENTS_SINCE_MINOR`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_mean_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_sd_ns: Option<u64>,
    /// Every RT process of the rank has published its frame counter (called
    /// `cosched_rt_init()` or reported a frame): it is past its start-up and
    /// ready for its first frame. Under 1GS a new RT job runs in its start
    /// row alone until every node of the job says so. Sent only to a
    /// coordinator of protocol 1.6 or later ([`READY_SINCE_MINOR`]); absent
    /// means false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
}

/// The minor version from which a coordinator takes [`JobFrames::ready`].
pub const READY_SINCE_MINOR: u8 = 6;

/// The minor version from which a coordinator takes
/// [`JobFrames::work_mean_ns`] and [`JobFrames::work_sd_ns`].
pub const MOMENTS_SINCE_MINOR: u8 = 8;

/// The minor version from which an agent takes [`FirstFrameAt`] and
/// `LaunchJob::first_frame_wait_ns`.
pub const FIRST_FRAME_SINCE_MINOR: u8 = 7;

/// Coordinator → agent (protocol 1.7): RT job `job_id`'s first frame starts
/// at `at_ns`, in the agent's clock (converted like a slice's
/// `apply_at_ns`). Under 1GS with admission control the coordinator picks
/// it inside the job's start row; the agent publishes it next to the job's
/// frame counters, where `cosched_rt_init()` waits for it. Sent once per
/// job and node, only for ranks launched with
/// `LaunchJob::first_frame_wait_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirstFrameAt {
    pub job_id: JobId,
    pub at_ns: u64,
}

impl Payload for FirstFrameAt {
    const KIND: MessageKind = MessageKind::FirstFrameAt;

    fn check(&self) -> Result<(), String> {
        if self.at_ns == 0 {
            return Err("first-frame instant 0 (0 means pending in the gate file)".into());
        }
        Ok(())
    }
}

/// Agent → coordinator, periodically while RT jobs run there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameReport {
    pub jobs: Vec<JobFrames>,
}

impl Payload for FrameReport {
    const KIND: MessageKind = MessageKind::FrameReport;

    fn check(&self) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for job in &self.jobs {
            if !seen.insert(job.job_id) {
                return Err(format!("job {} is reported twice", job.job_id));
            }
            if job.met.checked_add(job.missed) != Some(job.expected) {
                return Err(format!(
                    "job {}: met {} + missed {} is not expected {}",
                    job.job_id, job.met, job.missed, job.expected
                ));
            }
            if job.met > job.frames {
                return Err(format!(
                    "job {}: met {} exceeds the {} frames completed",
                    job.job_id, job.met, job.frames
                ));
            }
        }
        Ok(())
    }
}
