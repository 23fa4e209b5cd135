//! Shared set-ups of the simulator's scenario tests.
#![allow(dead_code)]

use cosched_policy::local::PolicyKind;
use cosched_sim::config::{ClusterParams, GlobalMode, SimConfig};
use cosched_sim::executive::{Calendar, Executive};
use cosched_sim::model::Cluster;
use cosched_sim::workload::JobSpec;

pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;

/// A cluster of `nodes` single-CPU nodes with round costs.
pub fn config(nodes: u32, global: GlobalMode, local: PolicyKind) -> SimConfig {
    let mut config = SimConfig {
        cluster: ClusterParams {
            nodes,
            cpus_per_node: 1,
            context_switch_ns: 5 * US,
            quantum_ns: 4 * MS,
            wakeup_latency_ns: 10 * US,
            send_overhead_ns: 2 * US,
            recv_overhead_ns: 3 * US,
            net_latency_ns: 20 * US,
            net_bandwidth_bytes_per_s: 1e9,
            agent_delay_ns: 20 * US,
            ..ClusterParams::default()
        },
        ..SimConfig::default()
    };
    config.sched.global = global;
    config.sched.local.kind = local;
    config
}

/// This machine's measured parameters (calibration/machine.toml), local
/// policy `local` at `mpl` jobs per node.
pub fn machine_config(local: PolicyKind, mpl: usize) -> SimConfig {
    let mut config: SimConfig =
        toml::from_str(include_str!("../../calibration/machine.toml")).expect("machine.toml");
    config.sched.global = GlobalMode::Local;
    config.sched.local.kind = local;
    config.sched.mpl = mpl;
    config
}

/// Runs the model to the end of the last job.
pub fn run(config: SimConfig, jobs: Vec<JobSpec>) -> Executive<Cluster> {
    let mut calendar = Calendar::default();
    let model = Cluster::new(config, jobs, &mut calendar).expect("valid set-up");
    let mut ex = Executive::from_parts(model, calendar);
    ex.run_while(|m, _| !m.all_done());
    assert!(ex.model.all_done(), "every job finished");
    ex
}

/// A job's response time in ns.
pub fn response(ex: &Executive<Cluster>, job: usize) -> u64 {
    let run = &ex.model.jobs[job];
    run.end.unwrap() - run.spec.arrival
}

/// A real-time job of the class-level model (see `cosched_sim::classes`).
pub fn rt(
    id: u64,
    arrival_ns: u64,
    processes: usize,
    spec: cosched_policy::classes::RtSpec,
    windows: u64,
) -> cosched_sim::classes::ClassJob {
    cosched_sim::classes::ClassJob {
        id,
        arrival_ns,
        processes,
        kind: cosched_sim::classes::ClassJobKind::RealTime { spec, windows },
    }
}

/// A best-effort job of the class-level model with `work_ns` per process.
pub fn be(
    id: u64,
    arrival_ns: u64,
    processes: usize,
    work_ns: u64,
) -> cosched_sim::classes::ClassJob {
    cosched_sim::classes::ClassJob {
        id,
        arrival_ns,
        processes,
        kind: cosched_sim::classes::ClassJobKind::BestEffort { work_ns },
    }
}
