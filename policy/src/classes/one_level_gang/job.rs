//! What a job asks of 1GS: its nodes and, for an RT job, its frame rate and
//! how long it may wait for them.

use serde::{Deserialize, Serialize};

use super::config::OneLevelGangConfig;
use crate::classes::{Class, RtSpec};
use crate::global::JobId;

/// A job arriving at the 1GS matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneGsJob {
    pub id: JobId,
    /// s: columns (nodes), one process per node.
    pub nodes: usize,
    pub kind: OneGsKind,
}

/// The class of a job and what only RT jobs declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OneGsKind {
    BestEffort,
    RealTime {
        /// d, b and τ. 1GS gives all the job's processes the same slots, so
        /// `work_ns` must be τ_max, the largest work per frame of any of its
        /// processes (§4.4).
        spec: RtSpec,
        /// w: the longest the job may wait for its rows before it is
        /// evicted (§3.2).
        max_wait_ns: u64,
    },
}

impl OneGsJob {
    pub fn best_effort(id: JobId, nodes: usize) -> Self {
        Self {
            id,
            nodes,
            kind: OneGsKind::BestEffort,
        }
    }

    pub fn real_time(id: JobId, nodes: usize, spec: RtSpec, max_wait_ns: u64) -> Self {
        Self {
            id,
            nodes,
            kind: OneGsKind::RealTime { spec, max_wait_ns },
        }
    }

    pub fn class(&self) -> Class {
        match self.kind {
            OneGsKind::BestEffort => Class::BestEffort,
            OneGsKind::RealTime { .. } => Class::RealTime,
        }
    }

    /// The RT spec, or `None` for a BE job.
    pub fn rt_spec(&self) -> Option<&RtSpec> {
        match &self.kind {
            OneGsKind::BestEffort => None,
            OneGsKind::RealTime { spec, .. } => Some(spec),
        }
    }

    /// w, or `None` for a BE job (which waits as long as it takes).
    pub fn max_wait_ns(&self) -> Option<u64> {
        match self.kind {
            OneGsKind::BestEffort => None,
            OneGsKind::RealTime { max_wait_ns, .. } => Some(max_wait_ns),
        }
    }

    /// The rows this job holds when allocated: `r` of [`rows_needed`] for
    /// an RT job under admission control, one otherwise.
    pub fn rows_to_hold(&self, config: &OneLevelGangConfig) -> u64 {
        match self.rt_spec() {
            Some(spec) if config.admission_control => rows_needed(spec, config),
            _ => 1,
        }
    }
}

/// r: the rows an RT job needs so that each cycle Ψ gives every one of its
/// processes the CPU for the Ψ/d frames due in it (§4.4):
/// `r · Q ≥ (Ψ / d) · τ_max`, so `r = ⌈Ψ · τ_max / (d · Q)⌉` with
/// Ψ = M · (Q + switch cost). With no switch cost this is the paper's
/// `⌈M · τ_max / d⌉`. Exact integer arithmetic; at least 1 for a valid spec.
pub fn rows_needed(spec: &RtSpec, config: &OneLevelGangConfig) -> u64 {
    let needed = u128::from(config.cycle_ns()) * u128::from(spec.work_ns);
    let per_row = u128::from(spec.period_ns) * u128::from(config.quantum_ns);
    if per_row == 0 {
        return u64::MAX;
    }
    u64::try_from(needed.div_ceil(per_row)).unwrap_or(u64::MAX)
}
