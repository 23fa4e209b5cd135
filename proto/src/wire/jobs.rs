//! Job lifecycle messages: coordinator → agent `LaunchJob` / `CancelJob`,
//! agent → coordinator `JobExited`.
//!
//! These carry the job's fields directly; once `crate::job::JobSpec` exists,
//! `LaunchJob` can embed it instead.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::kind::MessageKind;
use super::payload::Payload;

/// The coordinator's id for a job. The same representation as
/// `crate::job::JobId` (u32), so the two interchange; this alias can become a
/// re-export once the job spec settles.
pub type JobId = u32;

/// Scheduling class (SPEC §2, BE/RT classes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum JobClass {
    BestEffort,
    /// A real-time job: `frames` frames of `work_ns` CPU each per `period_ns`.
    RealTime {
        period_ns: u64,
        frames: u32,
        work_ns: u64,
    },
}

/// Start one rank of a job on the receiving agent's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchJob {
    pub job_id: JobId,
    pub name: String,
    /// This process's rank, below `size`.
    pub rank: u32,
    /// Number of ranks in the job.
    pub size: u32,
    /// Address ("host:port") of every rank, indexed by rank; empty if the job
    /// finds its peers itself.
    pub peers: Vec<String>,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// CPUs of this node the rank is pinned to; empty means the node's job CPUs.
    pub cpus: Vec<u32>,
    pub class: JobClass,
    /// Forbids paired gang scheduling from sharing this job's slot.
    pub exclusive: bool,
    /// An RT rank whose first frame waits for an instant the coordinator
    /// sends later (`FirstFrameAt`, under 1GS with admission control): the
    /// agent publishes a pending first-frame gate before the rank starts,
    /// and its processes wait in `cosched_rt_init()` for the instant at
    /// most this long (ns). Protocol 1.7
    /// ([`super::frame_reports::FIRST_FRAME_SINCE_MINOR`]); absent (older
    /// agents must not be sent it): no gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_frame_wait_ns: Option<u64>,
}

impl Payload for LaunchJob {
    const KIND: MessageKind = MessageKind::LaunchJob;

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.rank >= self.size {
            return Err(format!(
                "rank {} is not below size {}",
                self.rank, self.size
            ));
        }
        if !self.peers.is_empty() && self.peers.len() != self.size as usize {
            return Err(format!(
                "{} peer addresses for {} ranks",
                self.peers.len(),
                self.size
            ));
        }
        if self.command.is_empty() {
            return Err("empty command".into());
        }
        if let JobClass::RealTime { period_ns: 0, .. } = self.class {
            return Err("real-time period is zero".into());
        }
        Ok(())
    }
}

/// A job that something else launched (mpirun, mpiexec, srun) was attached
/// to the coordinator with a rank on the receiving agent's node (protocol
/// 1.2): the agent records it and takes the processes that join it
/// (`cosched join`), then schedules them like a launched rank and reports
/// with `JobExited` when every joined process has exited. Refused (a job of
/// that id already runs there) as a `LaunchFailed` exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectJob {
    pub job_id: JobId,
    pub name: String,
    /// This node's rank, below `size` (the coordinator's numbering of the
    /// job's nodes; the launcher numbers the processes itself).
    pub rank: u32,
    pub size: u32,
    /// The uid of the user who attached the job on the coordinator's user
    /// socket (protocol 1.4; absent: root, or an agent older than 1.4,
    /// which must not be sent the field): only that user's processes may
    /// then join it through the agent's user socket, so no other user can
    /// claim the expected rank first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
}

/// The minor version from which an agent takes [`ExpectJob::owner`].
pub const EXPECT_OWNER_SINCE_MINOR: u8 = 4;

impl Payload for ExpectJob {
    const KIND: MessageKind = MessageKind::ExpectJob;

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.rank >= self.size {
            return Err(format!(
                "rank {} is not below size {}",
                self.rank, self.size
            ));
        }
        if self.name.is_empty() {
            return Err("empty job name".into());
        }
        Ok(())
    }
}

/// Stop a job's ranks on the receiving agent's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelJob {
    pub job_id: JobId,
}

impl Payload for CancelJob {
    const KIND: MessageKind = MessageKind::CancelJob;
}

/// How a rank ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ExitStatus {
    Exited {
        code: i32,
    },
    Signalled {
        signal: i32,
    },
    /// The agent could not start the process at all.
    LaunchFailed {
        reason: String,
    },
}

/// A rank of a job ended on the sending agent's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobExited {
    pub job_id: JobId,
    pub rank: u32,
    pub status: ExitStatus,
}

impl Payload for JobExited {
    const KIND: MessageKind = MessageKind::JobExited;
}
