//! An RT job as the allocators see it: one period and frame count for the
//! whole pipeline, and each process's own work per frame (the BE/RT
//! coscheduling paper §4.4 writes τ_Aj, "the work to be performed by each
//! process j of A").

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::spec::{RtSpec, RtSpecError};
use crate::global::JobId;

/// An RT job submitted to the cluster: `process_work_ns[j]` is τ_Aj, the CPU
/// time process `j` needs per frame; every process shares the job's period d
/// and frame count b (one pipeline, one output rate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtJob {
    pub id: JobId,
    /// d.
    pub period_ns: u64,
    /// b.
    pub frames: u32,
    /// τ_Aj for each process j (at least one).
    pub process_work_ns: Vec<u64>,
}

/// Why an [`RtJob`] cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RtJobError {
    #[error("an RT job needs at least one process")]
    NoProcess,
    #[error("process {process}: {source}")]
    Process {
        process: usize,
        #[source]
        source: RtSpecError,
    },
}

impl RtJob {
    /// A job whose processes have different work per frame, checked.
    pub fn new(
        id: JobId,
        period_ns: u64,
        frames: u32,
        process_work_ns: Vec<u64>,
    ) -> Result<Self, RtJobError> {
        let job = Self {
            id,
            period_ns,
            frames,
            process_work_ns,
        };
        job.validate()?;
        Ok(job)
    }

    /// A job of `processes` processes that all follow `spec`.
    pub fn uniform(id: JobId, spec: RtSpec, processes: usize) -> Self {
        Self {
            id,
            period_ns: spec.period_ns,
            frames: spec.frames,
            process_work_ns: vec![spec.work_ns; processes],
        }
    }

    /// Every process's spec must be schedulable on its own.
    pub fn validate(&self) -> Result<(), RtJobError> {
        if self.process_work_ns.is_empty() {
            return Err(RtJobError::NoProcess);
        }
        for process in 0..self.process_work_ns.len() {
            self.process_spec(process)
                .validate()
                .map_err(|source| RtJobError::Process { process, source })?;
        }
        Ok(())
    }

    /// Number of processes (s).
    pub fn processes(&self) -> usize {
        self.process_work_ns.len()
    }

    /// The spec of process `process` (its own τ, the job's d and b).
    ///
    /// # Panics
    /// If `process` is not a process of the job.
    pub fn process_spec(&self, process: usize) -> RtSpec {
        RtSpec {
            period_ns: self.period_ns,
            frames: self.frames,
            work_ns: self.process_work_ns[process],
        }
    }

    /// Γ_A = b·d.
    pub fn window_ns(&self) -> u64 {
        self.period_ns.saturating_mul(u64::from(self.frames))
    }

    /// Process indices by descending work, ties by index: the order in which
    /// both the laxity allocation and the admission rules place processes
    /// (§4.2 sorts them "in descending order of their work"; placing the
    /// heaviest first leaves the small ones to fill what remains).
    pub fn heaviest_first(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.processes()).collect();
        order.sort_by_key(|&j| (std::cmp::Reverse(self.process_work_ns[j]), j));
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_are_ordered_heaviest_first_with_ties_by_index() {
        let job = RtJob::new(JobId(1), 100, 2, vec![10, 30, 10, 30]).unwrap();
        assert_eq!(job.heaviest_first(), vec![1, 3, 0, 2]);
        assert_eq!(job.window_ns(), 200);
        assert_eq!(job.process_spec(1).work_ns, 30);
    }

    #[test]
    fn a_job_without_processes_or_with_an_impossible_process_is_refused() {
        assert_eq!(
            RtJob::new(JobId(1), 100, 2, vec![]),
            Err(RtJobError::NoProcess)
        );
        assert_eq!(
            RtJob::new(JobId(1), 100, 2, vec![10, 101]),
            Err(RtJobError::Process {
                process: 1,
                source: RtSpecError::WorkExceedsPeriod {
                    work_ns: 101,
                    period_ns: 100
                }
            })
        );
    }
}
