//! What is simulated: the cluster's hardware and operating-system costs, and
//! the global and local scheduling policies (the `policy` crate's own
//! configuration types).

use cosched_policy::global::{PairingConfig, PredictorConfig, QueuePolicy};
use cosched_policy::local::LocalPolicyConfig;
use serde::{Deserialize, Serialize};

use crate::executive::Ns;

/// Nodes, CPUs, the local scheduler's costs and the network
/// (ClusterSchedSim §3.2, §5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterParams {
    pub nodes: u32,
    pub cpus_per_node: u32,
    /// CPU time lost when a CPU switches to another task.
    pub context_switch_ns: Ns,
    /// Time slice of time-sharing tasks (CFS slice / Solaris quantum; with
    /// a tick, EEVDF's base slice: a task is preempted at the first tick
    /// after it has run this long).
    pub quantum_ns: Ns,
    /// Period of the scheduler tick (Linux: 1/HZ); 0: slices end exactly
    /// after `quantum_ns`. A running time-sharing task is only preempted for
    /// an equal one at a tick, as the kernel checks slices there.
    pub tick_ns: Ns,
    /// Where each node's ticks fall.
    pub tick_phase: TickPhase,
    /// Other work that interrupts a CPU (kernel threads, daemons,
    /// interrupts): Poisson arrivals per second and CPU; 0: none.
    pub noise_per_s: f64,
    /// CPU time each interruption takes; the interrupted time-sharing task
    /// is switched out and the scheduler picks again afterwards (a
    /// real-time task is not interrupted).
    pub noise_ns: Ns,
    /// The share of interruptions that are long ones (`noise_long_ns`
    /// instead of `noise_ns`): most other work on this machine takes tens
    /// of µs (kernel threads, daemons), a few take milliseconds. 0: every
    /// interruption takes `noise_ns`.
    pub noise_long_share: f64,
    /// CPU time of a long interruption.
    pub noise_long_ns: Ns,
    /// Seed of the tick phases and the noise.
    pub seed: u64,
    /// A woken task preempts a time-sharing task that has run this much more
    /// (virtual time) than it (CFS wakeup granularity).
    pub wakeup_granularity_ns: Ns,
    /// A task woken from a blocking receive or I/O gets at most this much
    /// virtual-time credit over the node's least-run task.
    pub sleeper_credit_ns: Ns,
    /// From a message's arrival (or an I/O's completion) to a blocked task
    /// being runnable.
    pub wakeup_latency_ns: Ns,
    /// CPU time lost before a woken sleeper runs when its CPU was idle
    /// (halted: a virtual CPU exits to the hypervisor and back), counted
    /// with the context switch.
    pub idle_wakeup_ns: Ns,
    /// A woken sleeper whose CPU halted longer than this pays
    /// `long_halt_wakeup_per_ms_ns` more per ms of halt beyond it, on top of
    /// `idle_wakeup_ns` (a virtual CPU halted for long wakes more slowly).
    pub long_halt_after_ns: Ns,
    /// See `long_halt_after_ns` (0: the idle wakeup is the same for every
    /// halt).
    pub long_halt_wakeup_per_ms_ns: Ns,
    /// A sleep (a job's I/O) of a time-sharing task ends up to this much
    /// late (the kernel's default timer slack, 50 µs, which a timer on an
    /// otherwise quiet CPU uses in full); a task at real-time level has none
    /// (Linux gives real-time and deadline tasks no slack).
    pub timer_slack_ns: Ns,
    /// CPU time lost before a woken sleeper runs when every CPU of its node
    /// was busy (the wakeup path, its IPI and the preemption of the running
    /// task), counted with the context switch.
    pub busy_wakeup_ns: Ns,
    /// CPU time to send one message (compose, hand to the NIC).
    pub send_overhead_ns: Ns,
    /// CPU time to receive one message (decompose).
    pub recv_overhead_ns: Ns,
    /// End-to-end latency of a message, excluding size.
    pub net_latency_ns: Ns,
    /// Bytes per second of a link and of a NIC's receive DMA.
    pub net_bandwidth_bytes_per_s: f64,
    /// From a policy's decision to its level change taking effect (the
    /// agent's reaction: ring buffer, wakeup, sched_setattr).
    pub agent_delay_ns: Ns,
    /// The reaction's tail: each delay is `agent_delay_ns` plus an
    /// exponential draw with this mean (0: every delay is `agent_delay_ns`).
    pub agent_delay_tail_ns: Ns,
    /// The agent's policy tick (`[agent] policy_tick_us`): how often it
    /// reads the per-task counters the eBPF side keeps and feeds what
    /// changed to the policy (slower while nothing spins, as the agent's
    /// driver decides).
    pub agent_tick_ns: Ns,
    /// The spin gap (`[detect] spin_gap_us`): on-CPU time after an empty
    /// wait past which a task computes rather than waits.
    pub spin_gap_ns: Ns,
    /// CPU time the agent takes on its node at every gang slice switch
    /// (woken by its switch timer at real-time priority: stops and resumes
    /// jobs, ends the quantum, reports it), during which no job runs there.
    pub slice_switch_cpu_ns: Ns,
    /// The agent's CPU at each look of an acting policy (a tick, a report
    /// from the eBPF side), at its real-time priority on the node's CPU: it
    /// takes the CPU from whatever runs there. 0: free.
    pub agent_look_cpu_ns: Ns,
}

impl Default for ClusterParams {
    fn default() -> Self {
        Self {
            nodes: 16,
            cpus_per_node: 1,
            context_switch_ns: 5_000,
            quantum_ns: 4_000_000,
            tick_ns: 0,
            tick_phase: TickPhase::Aligned,
            noise_per_s: 0.0,
            noise_ns: 0,
            noise_long_share: 0.0,
            noise_long_ns: 0,
            seed: 1,
            wakeup_granularity_ns: 1_000_000,
            sleeper_credit_ns: 3_000_000,
            wakeup_latency_ns: 10_000,
            idle_wakeup_ns: 0,
            long_halt_after_ns: 0,
            long_halt_wakeup_per_ms_ns: 0,
            timer_slack_ns: 0,
            busy_wakeup_ns: 0,
            send_overhead_ns: 2_000,
            recv_overhead_ns: 2_000,
            net_latency_ns: 20_000,
            net_bandwidth_bytes_per_s: 1.25e9,
            agent_delay_ns: 20_000,
            agent_delay_tail_ns: 0,
            agent_tick_ns: 1_000_000,
            spin_gap_ns: cosched_agent_common::DEFAULT_SPIN_GAP_NS,
            slice_switch_cpu_ns: 0,
            agent_look_cpu_ns: 0,
        }
    }
}

/// The phase of the nodes' scheduler ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TickPhase {
    /// Every node ticks at the same instants (the CPUs of one machine:
    /// Linux aligns the per-CPU ticks unless booted with `skew_tick=1`).
    #[default]
    Aligned,
    /// Each node's ticks are offset by its own random phase (separate
    /// machines).
    Random,
}

impl ClusterParams {
    /// What waking a sleeper on a CPU halted for `halt_ns` costs: the idle
    /// wakeup, and past `long_halt_after_ns` `long_halt_wakeup_per_ms_ns`
    /// per ms of halt. Measured on this project's VM
    /// (`sim/calibration/sleep_overshoot_sweep.sh`: median lateness of a
    /// sleep on an idle CPU less on a busy one): 9–13 µs after halts of
    /// 0.1–2 ms, then 20, 32, 57 and 72 µs after 3, 5, 7.5 and 10 ms.
    pub fn idle_wakeup_after(&self, halt_ns: Ns) -> Ns {
        let long = halt_ns.saturating_sub(self.long_halt_after_ns);
        self.idle_wakeup_ns + long * self.long_halt_wakeup_per_ms_ns / 1_000_000
    }

    /// Transfer time of `bytes` at the link bandwidth.
    pub fn transfer_ns(&self, bytes: u64) -> Ns {
        if self.net_bandwidth_bytes_per_s <= 0.0 {
            return 0;
        }
        (bytes as f64 / self.net_bandwidth_bytes_per_s * 1e9).round() as Ns
    }
}

/// The coordinator's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlobalMode {
    /// No coordinator slices: jobs are placed up to the MPL and the local
    /// policy alone schedules (dynamic coscheduling).
    #[default]
    Local,
    /// Space sharing: one row, strict FCFS.
    Fcfs,
    /// Gang scheduling over the Ousterhout matrix.
    Gang,
    /// Paired gang scheduling.
    PairedGang,
}

impl std::str::FromStr for GlobalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "local" | "none" => Ok(Self::Local),
            "fcfs" => Ok(Self::Fcfs),
            "gang" => Ok(Self::Gang),
            "paired-gang" => Ok(Self::PairedGang),
            other => Err(format!(
                "unknown global policy {other:?} (expected local, fcfs, gang, paired-gang)"
            )),
        }
    }
}

/// Global and local scheduling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedParams {
    pub global: GlobalMode,
    /// Maximum multiprogramming level (matrix rows).
    pub mpl: usize,
    /// Gang slice length.
    pub slice_ns: Ns,
    /// Stop (SIGSTOP) the tasks of jobs outside the slice instead of demoting them.
    pub stop_inactive: bool,
    pub queue: QueuePolicy,
    /// The agent's `[policy]` section.
    pub local: LocalPolicyConfig,
    pub pairing: PairingConfig,
    pub predictor: PredictorConfig,
}

impl Default for SchedParams {
    fn default() -> Self {
        Self {
            global: GlobalMode::Local,
            mpl: 4,
            slice_ns: 100_000_000,
            stop_inactive: false,
            queue: QueuePolicy::StrictFcfs,
            local: LocalPolicyConfig::default(),
            pairing: PairingConfig::default(),
            predictor: PredictorConfig::default(),
        }
    }
}

/// A whole simulation's configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    pub cluster: ClusterParams,
    pub sched: SchedParams,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_halt_costs_more_to_wake_from_per_ms_past_the_threshold() {
        let params = ClusterParams {
            idle_wakeup_ns: 16_000,
            long_halt_after_ns: 2_000_000,
            long_halt_wakeup_per_ms_ns: 7_300,
            ..ClusterParams::default()
        };
        assert_eq!(params.idle_wakeup_after(100_000), 16_000);
        assert_eq!(params.idle_wakeup_after(2_000_000), 16_000);
        assert_eq!(params.idle_wakeup_after(3_000_000), 23_300);
        assert_eq!(params.idle_wakeup_after(10_000_000), 16_000 + 8 * 7_300);
    }

    #[test]
    fn without_the_long_halt_parameters_every_halt_costs_the_idle_wakeup() {
        let params = ClusterParams {
            idle_wakeup_ns: 16_000,
            ..ClusterParams::default()
        };
        assert_eq!(params.idle_wakeup_after(50_000_000), 16_000);
    }
}
