//! Earliest Deadline First inside the RT class (the BE/RT coscheduling paper
//! §4.2: "at every instant within this time-division, the process with the
//! earliest deadline is the one that is executing as long as it has not
//! blocked"), and the kernel parameters that realise it.
//!
//! The agent has two ways to run EDF: order SCHED_FIFO priorities by
//! deadline ([`EdfPriorities`](super::edf_priorities::EdfPriorities)), or
//! hand each process to the kernel's own EDF with [`deadline_params`]
//! (SCHED_DEADLINE). It chooses; both are computed here.

use serde::{Deserialize, Serialize};

use super::frames::FrameState;
use super::spec::RtSpec;
use crate::local::TaskId;

/// An RT task as EDF sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtTask {
    pub id: TaskId,
    /// Runnable now (not blocked on a message or I/O).
    pub ready: bool,
    /// From its frame accounting.
    pub state: FrameState,
}

impl RtTask {
    pub fn new(id: TaskId, ready: bool, state: FrameState) -> Self {
        Self { id, ready, state }
    }

    /// Has frames due in its window and may run.
    pub fn is_due(&self) -> bool {
        matches!(self.state, FrameState::Due { .. })
    }

    /// May run at all (not throttled).
    pub fn may_run(&self) -> bool {
        !matches!(self.state, FrameState::Throttled { .. })
    }

    /// The EDF key: due tasks before satisfied ones, then the deadline, then
    /// the task id so equal deadlines always come out in the same order.
    pub fn edf_key(&self) -> (bool, u64, TaskId) {
        (!self.is_due(), self.state.deadline_ns(), self.id)
    }
}

/// Ready RT tasks in run order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdfOrder {
    /// Ready tasks with frames due, earliest deadline first: these are what
    /// the RT class runs in its own division.
    pub due: Vec<TaskId>,
    /// Ready tasks that have done their b frames, earliest next deadline
    /// first: they only run when nothing else wants the CPU.
    pub ahead: Vec<TaskId>,
}

impl EdfOrder {
    /// Ready and not throttled, in EDF order; blocked and throttled tasks are
    /// left out.
    pub fn of(tasks: &[RtTask]) -> Self {
        let mut ready: Vec<&RtTask> = tasks.iter().filter(|t| t.ready && t.may_run()).collect();
        ready.sort_by_key(|t| t.edf_key());
        let (due, ahead): (Vec<&RtTask>, Vec<&RtTask>) =
            ready.into_iter().partition(|t| t.is_due());
        Self {
            due: due.into_iter().map(|t| t.id).collect(),
            ahead: ahead.into_iter().map(|t| t.id).collect(),
        }
    }

    /// Due tasks first, then the satisfied ones.
    pub fn all(&self) -> Vec<TaskId> {
        self.due.iter().chain(&self.ahead).copied().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.due.is_empty() && self.ahead.is_empty()
    }
}

/// The kernel refuses a SCHED_DEADLINE runtime below 2^10 ns.
pub const SCHED_DEADLINE_MIN_RUNTIME_NS: u64 = 1 << 10;

/// `sched_attr` fields for SCHED_DEADLINE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// SCHED_DEADLINE parameters for a process of `spec`: runtime τ + `margin_ns`
/// (the CBS throttles a process that exceeds its runtime, so the margin
/// absorbs frame-to-frame variation), deadline and period d. The runtime is
/// kept within what the kernel accepts: at least
/// [`SCHED_DEADLINE_MIN_RUNTIME_NS`] and at most the deadline.
pub fn deadline_params(spec: &RtSpec, margin_ns: u64) -> DeadlineParams {
    let deadline_ns = spec.period_ns.max(SCHED_DEADLINE_MIN_RUNTIME_NS);
    DeadlineParams {
        runtime_ns: spec
            .work_ns
            .saturating_add(margin_ns)
            .clamp(SCHED_DEADLINE_MIN_RUNTIME_NS, deadline_ns),
        deadline_ns,
        period_ns: deadline_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_is_work_plus_margin_clamped_to_the_deadline() {
        let spec = RtSpec::new(10_000, 3, 4_000).unwrap();
        assert_eq!(
            deadline_params(&spec, 500),
            DeadlineParams {
                runtime_ns: 4_500,
                deadline_ns: 10_000,
                period_ns: 10_000
            }
        );
        assert_eq!(deadline_params(&spec, 1_000_000).runtime_ns, 10_000);
        let tiny = RtSpec::new(10_000, 1, 1).unwrap();
        assert_eq!(
            deadline_params(&tiny, 0).runtime_ns,
            SCHED_DEADLINE_MIN_RUNTIME_NS
        );
    }
}
