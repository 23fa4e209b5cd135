//! FCS parameters (`[policy.fcs]`).
//!
//! The Scheduler Testbed report §2.4.4 leaves the classification thresholds to be "determined
//! empirically"; the defaults below are starting points, each with its reason.

use crate::local::config::ConfigError;
use crate::local::ids::us_to_ns;
use crate::local::spin_learning::SpinLearningParams;
use serde::{Deserialize, Serialize};

/// How FCS measures, classifies and prioritises processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FcsParams {
    /// SCHED_FIFO/RR priority of the slot owner ("raised to the maximum",
    /// the Scheduler Testbed report §4.6.2 rule 1), 1..=99. Default 20: above the DCS/PB boosts.
    pub top_prio: u8,
    /// Own slots a new process runs as CS, counting C_CS and W_CS. Default 2.
    pub measure_cs_slots: u32,
    /// Own slots it then runs as DC, counting C_DC and W_DC. Default 2.
    pub measure_dc_slots: u32,
    /// A process with fewer message arrivals than this per second of its own
    /// slots, both coscheduled and not, "rarely communicates" and is DC.
    /// Default 10: even a 1 ms wait per message then costs under 1 % of CPU.
    pub rare_comm_per_sec: f64,
    /// A mean wait per receive while coscheduled above this (µs) is "long":
    /// the process is F (frustrated). Default 1000: five context switches at
    /// the BE/RT coscheduling paper's 200 µs, twice the default spin threshold.
    pub long_wait_us: u64,
    /// A process whose message rate (per second of its own slots) coscheduled
    /// is at least this multiple of its rate not coscheduled "communicates
    /// significantly better while being coscheduled" and is CS. Default 1.5:
    /// two fine-grain jobs time-sharing a node under plain Linux run about
    /// half as fast as gang-scheduled (slowdown 4.1 vs 2.04 here), a ratio
    /// right at 2, so 2.0 classified them DC about half the time.
    pub cs_dc_rate_ratio: f64,
    /// Spin time of an F slot owner before it yields, µs; with learning, used
    /// until enough waits are seen. Default 500 (as SB).
    pub f_spin_us: u64,
    /// How long after a slot's `until` without a new slot FCS keeps the
    /// priority groups (nobody on top) before it gives up on gang slots and
    /// returns every process to `Normal`, µs. Default 100000: a late broadcast
    /// does not reshuffle the node; a coordinator that is gone does not leave
    /// processes demoted.
    pub slot_grace_us: u64,
    /// Learn each process's spin time from its waits (the Scheduler Testbed report §2.4.3: "a
    /// competitive spinning time on a per-process basis"). Default true.
    pub learn_spin_time: bool,
    pub learning: SpinLearningParams,
}

impl Default for FcsParams {
    fn default() -> Self {
        Self {
            top_prio: 20,
            measure_cs_slots: 2,
            measure_dc_slots: 2,
            rare_comm_per_sec: 10.0,
            long_wait_us: 1_000,
            cs_dc_rate_ratio: 1.5,
            f_spin_us: 500,
            slot_grace_us: 100_000,
            learn_spin_time: true,
            learning: SpinLearningParams::default(),
        }
    }
}

impl FcsParams {
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::require_rt_prio("fcs.top_prio", self.top_prio)?;
        ConfigError::require_finite_positive("fcs.rare_comm_per_sec", self.rare_comm_per_sec)?;
        ConfigError::require_positive("fcs.long_wait_us", self.long_wait_us)?;
        ConfigError::require_finite_positive("fcs.cs_dc_rate_ratio", self.cs_dc_rate_ratio)?;
        ConfigError::require_positive("fcs.f_spin_us", self.f_spin_us)?;
        self.learning.validate("fcs")
    }

    pub(crate) fn long_wait_ns(&self) -> u64 {
        us_to_ns(self.long_wait_us)
    }
}
