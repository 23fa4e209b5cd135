//! The processes of one job: per-process and per-job totals.

use std::collections::BTreeMap;

use super::{FrameReading, FrameState, FrameTotals, ProcessFrames, WindowReport};
use crate::local::TaskId;

/// The processes of one job on one node (or, summed, anywhere): totals per
/// process and for the job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFrames {
    processes: BTreeMap<TaskId, ProcessFrames>,
    /// Totals of processes that were removed, so the job's totals keep them.
    retired: FrameTotals,
}

impl JobFrames {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts accounting for `task` (replacing any previous accounting).
    pub fn add(&mut self, task: TaskId, frames: ProcessFrames) {
        if let Some(old) = self.processes.insert(task, frames) {
            self.retired += old.totals();
        }
    }

    /// Stops accounting for `task`; its closed windows stay in the totals.
    pub fn remove(&mut self, task: TaskId) -> Option<ProcessFrames> {
        let removed = self.processes.remove(&task)?;
        self.retired += removed.totals();
        Some(removed)
    }

    pub fn process(&self, task: TaskId) -> Option<&ProcessFrames> {
        self.processes.get(&task)
    }

    /// A reading of `task`'s counters; `None` if the task is not accounted.
    pub fn observe(
        &mut self,
        task: TaskId,
        now_ns: u64,
        reading: FrameReading,
    ) -> Option<Vec<WindowReport>> {
        Some(self.processes.get_mut(&task)?.observe(now_ns, reading))
    }

    /// Increments for `task` (see [`ProcessFrames::credit`]); `None` if the
    /// task is not accounted.
    pub fn credit(
        &mut self,
        task: TaskId,
        now_ns: u64,
        frames: u64,
        cpu_ns: u64,
    ) -> Option<Vec<WindowReport>> {
        Some(
            self.processes
                .get_mut(&task)?
                .credit(now_ns, frames, cpu_ns),
        )
    }

    /// Closes every process's ended windows.
    pub fn tick(&mut self, now_ns: u64) -> Vec<(TaskId, WindowReport)> {
        let mut closed = Vec::new();
        for (&task, frames) in &mut self.processes {
            closed.extend(frames.tick(now_ns).into_iter().map(|r| (task, r)));
        }
        closed
    }

    /// Each accounted process's state, by task id.
    pub fn states(&self) -> Vec<(TaskId, FrameState)> {
        self.processes
            .iter()
            .map(|(&task, frames)| (task, frames.state()))
            .collect()
    }

    /// The job's totals: every process's closed windows, summed (its miss
    /// rate is missed / expected over all of them).
    pub fn totals(&self) -> FrameTotals {
        let mut totals = self.retired;
        totals += self.processes.values().map(ProcessFrames::totals).sum();
        totals
    }

    /// The earliest window end among the processes.
    pub fn next_wakeup_ns(&self) -> Option<u64> {
        self.processes
            .values()
            .map(ProcessFrames::next_wakeup_ns)
            .min()
    }
}
