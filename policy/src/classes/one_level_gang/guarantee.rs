//! The deterministic guarantee of §4.4: an RT job holding r rows runs r
//! quanta Q on each of its nodes in every pass over the matrix, and a pass
//! lasts at most Ψ = M · (Q + switch cost) (empty rows leave the rotation, so
//! it is never longer). With r = ⌈Ψ · τ_max / (d · Q)⌉ that is at least
//! Ψ / d frames of τ_max per cycle: the frames due in it. Only the job's own
//! rows count; replicas last only until the next event.

use serde::{Deserialize, Serialize};

use super::state::OneLevelGang;
use crate::global::JobId;

/// What an allocated RT job is guaranteed per cycle Ψ, against what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameGuarantee {
    /// Rows the job holds as its own (originals).
    pub rows_held: usize,
    /// r for this job under the current configuration.
    pub rows_needed: u64,
    /// Ψ.
    pub cycle_ns: u64,
    /// rows_held · Q: CPU time per node per cycle.
    pub cpu_per_cycle_ns: u64,
    /// ⌈Ψ · τ_max / d⌉: CPU time the frames due in a cycle need.
    pub cpu_needed_per_cycle_ns: u64,
    /// τ_max.
    pub work_ns: u64,
    /// d.
    pub period_ns: u64,
}

impl FrameGuarantee {
    /// True when the job cannot miss a frame: it gets at least the CPU its
    /// frames need in every cycle. Exact integer comparison.
    pub fn is_met(&self) -> bool {
        self.cpu_per_cycle_ns >= self.cpu_needed_per_cycle_ns
    }

    /// Frames of τ_max the guaranteed CPU time pays for, per cycle.
    pub fn frames_guaranteed(&self) -> f64 {
        self.cpu_per_cycle_ns as f64 / self.work_ns.max(1) as f64
    }

    /// Ψ / d: frames due per cycle.
    pub fn frames_due(&self) -> f64 {
        self.cycle_ns as f64 / self.period_ns.max(1) as f64
    }
}

impl OneLevelGang {
    /// The guarantee of an allocated RT job; `None` for BE, waiting or
    /// unknown jobs.
    pub fn guaranteed_frames_per_cycle(&self, job: JobId) -> Option<FrameGuarantee> {
        let held = self.allocated.get(&job)?;
        let spec = held.job.rt_spec()?;
        let cycle_ns = self.config.cycle_ns();
        let rows_held = held.rows.len();
        let needed =
            (u128::from(cycle_ns) * u128::from(spec.work_ns)).div_ceil(u128::from(spec.period_ns));
        Some(FrameGuarantee {
            rows_held,
            rows_needed: super::job::rows_needed(spec, &self.config),
            cycle_ns,
            cpu_per_cycle_ns: self.config.quantum_ns.saturating_mul(rows_held as u64),
            cpu_needed_per_cycle_ns: u64::try_from(needed).unwrap_or(u64::MAX),
            work_ns: spec.work_ns,
            period_ns: spec.period_ns,
        })
    }

    /// Allocated RT jobs whose guarantee is not met, in id order. Under
    /// admission control this is always empty ("no admitted job misses");
    /// without it, it names the jobs that may miss frames.
    pub fn unmet_guarantees(&self) -> Vec<(JobId, FrameGuarantee)> {
        self.allocated
            .keys()
            .filter_map(|&job| Some((job, self.guaranteed_frames_per_cycle(job)?)))
            .filter(|(_, guarantee)| !guarantee.is_met())
            .collect()
    }
}
