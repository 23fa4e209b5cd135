//! Whether the agent keeps the machine's CPUs out of halting idle states.
//!
//! An RT job's ranks hand frames to each other across CPUs. When the
//! receiving CPU is idle and halted (a VM guest's `haltpoll` cpuidle, or a
//! deep C-state on bare metal), the wake-up goes through only when that CPU
//! is woken again: 43 µs usually, but 1.0–7.7 ms in 6 of 1 737 cross-CPU
//! wake-ups traced under 1GS (docs/bench-rt.md), enough to miss a frame
//! that admission promised. A CPU latency request of 0 µs
//! (`/dev/cpu_dma_latency`, the kernel's PM QoS; what cyclictest does)
//! makes cpuidle poll instead of halting, so a wake-up needs no
//! interrupt.
//!
//! The decision is pure ([`wants_low_latency`]); the kernel-facing part is
//! [`crate::kernel::Kernel::hold_low_latency`]. The kernel drops the request
//! when the file is closed, so the agent's exit or crash gives the CPUs
//! their idle states back without any restore step.
use serde::{Deserialize, Serialize};

/// `[classes] low_latency_idle`: when the agent holds the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LowLatencyIdle {
    /// While a real-time job runs on the node (default).
    #[default]
    RtJobs,
    /// Never: the CPUs keep every idle state (less power and host CPU
    /// spent polling; RT wake-ups may wait for a halted CPU).
    Off,
}

impl LowLatencyIdle {
    pub fn as_str(self) -> &'static str {
        match self {
            LowLatencyIdle::RtJobs => "rt-jobs",
            LowLatencyIdle::Off => "off",
        }
    }
}

/// Should the CPUs be kept from halting now? `running_rt_jobs`: real-time
/// jobs running on this node (whatever the class policy: 1GS rows,
/// 2DCS-TDM or -PS divisions, or none; their frames have deadlines in
/// each).
pub fn wants_low_latency(setting: LowLatencyIdle, running_rt_jobs: usize) -> bool {
    match setting {
        LowLatencyIdle::RtJobs => running_rt_jobs > 0,
        LowLatencyIdle::Off => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_with_a_running_rt_job_keeps_its_cpus_from_halting() {
        assert!(wants_low_latency(LowLatencyIdle::RtJobs, 1));
        assert!(wants_low_latency(LowLatencyIdle::RtJobs, 3));
    }

    #[test]
    fn a_node_without_rt_jobs_lets_its_cpus_halt() {
        assert!(!wants_low_latency(LowLatencyIdle::RtJobs, 0));
    }

    #[test]
    fn switched_off_the_cpus_halt_even_with_rt_jobs() {
        assert!(!wants_low_latency(LowLatencyIdle::Off, 0));
        assert!(!wants_low_latency(LowLatencyIdle::Off, 2));
    }

    #[test]
    fn the_setting_reads_and_prints_in_kebab_case() {
        #[derive(Deserialize)]
        struct T {
            v: LowLatencyIdle,
        }
        for s in [LowLatencyIdle::RtJobs, LowLatencyIdle::Off] {
            let t: T = toml::from_str(&format!("v = \"{}\"", s.as_str())).unwrap();
            assert_eq!(t.v, s);
        }
        assert!(toml::from_str::<T>("v = \"always\"").is_err());
    }
}
