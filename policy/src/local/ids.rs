//! Identifiers, static task information and time units shared by every local
//! policy.
//!
//! Time is always a `u64` of CLOCK_MONOTONIC nanoseconds supplied by the caller:
//! the crate never reads a clock, so the same code runs in the agent, the
//! simulator and the tests.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A managed task: a Linux thread id (the kernel's `pid` of a thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub u32);

/// The parallel job a task belongs to (the coordinator's job number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u32);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.0)
    }
}

/// Static facts about a managed task, given once when the task is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskInfo {
    /// The job the task belongs to: fairness budgets and FCS slot ownership are
    /// per job.
    pub job: JobId,
}

impl TaskInfo {
    /// Static information of a task of `job`.
    pub fn of_job(job: JobId) -> Self {
        Self { job }
    }
}

/// Nanoseconds in one microsecond; configuration is written in microseconds,
/// the policies compute in nanoseconds.
pub const NS_PER_US: u64 = 1_000;

/// Converts a configured microsecond value to nanoseconds, saturating.
pub fn us_to_ns(us: u64) -> u64 {
    us.saturating_mul(NS_PER_US)
}
