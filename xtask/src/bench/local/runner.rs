//! One run: the jobs of a cell launched together on the cluster (every job on
//! every node), their outcomes, and the agents' CPU use meanwhile.
use std::time::Instant;

use anyhow::{Context as _, bail};

use super::{
    super::{
        jobs::{self, JobOutcome, JobPlan, run_together},
        outside_load::{Ours, outside_percent},
    },
    agent_cpu,
    metrics::agent_cpu_percent,
    workloads::{JobSlot, Layout},
};
use crate::cluster::Cluster;

/// First port of the bench's range (the demo uses 71xx).
const FIRST_PORT: u16 = 7200;
/// Ports per run; consecutive runs use different blocks, so a rank left over
/// from a failed run cannot steal the next run's messages.
const PORTS_PER_RUN: u16 = 64;
const PORT_BLOCKS: u32 = 64;

/// Hands out job ids (never reused in one bench: a record the agent failed to
/// forget cannot clash) and per-run port blocks.
#[derive(Debug)]
pub struct Allocator {
    next_job_id: u32,
    runs: u32,
    wait: Option<SpinWait>,
}

impl Default for Allocator {
    fn default() -> Self {
        Self {
            next_job_id: 1000,
            runs: 0,
            wait: None,
        }
    }
}

/// How spinning jobs wait (`cosched-synth --wait`), like a message-passing
/// library: see the synth's help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpinWait {
    Recv,
    Poll,
    Epoll,
    Yield,
}

impl SpinWait {
    pub fn as_str(self) -> &'static str {
        match self {
            SpinWait::Recv => "recv",
            SpinWait::Poll => "poll",
            SpinWait::Epoll => "epoll",
            SpinWait::Yield => "yield",
        }
    }
}

/// `args` with `--wait` for a job that spins (blocking jobs never poll).
fn with_wait(mut args: Vec<String>, wait: Option<SpinWait>) -> Vec<String> {
    let spins = args.windows(2).any(|w| w[0] == "--recv" && w[1] == "spin");
    if let Some(wait) = wait
        && spins
    {
        args.extend(["--wait".to_string(), wait.as_str().to_string()]);
    }
    args
}

impl Allocator {
    /// An allocator whose spinning jobs wait by `wait`.
    pub fn waiting_by(wait: Option<SpinWait>) -> Self {
        Self {
            wait,
            ..Self::default()
        }
    }

    /// The agents' plans for one run, grouped by slot: one plan with a rank
    /// on every node, or one size-1 plan per node.
    pub fn plans(
        &mut self,
        slots: &[JobSlot],
        nodes: usize,
        duration_s: f64,
    ) -> anyhow::Result<Vec<Vec<JobPlan>>> {
        let first_port = FIRST_PORT + (self.runs % PORT_BLOCKS) as u16 * PORTS_PER_RUN;
        self.runs += 1;
        let mut port_index = 0u16;
        let mut plans = Vec::new();
        for slot in slots {
            let node_sets: Vec<Vec<usize>> = match slot.kind.layout() {
                Layout::OneRankPerNode => vec![(0..nodes).collect()],
                Layout::OneSoloJobPerNode => (0..nodes).map(|n| vec![n]).collect(),
            };
            let mut slot_plans = Vec::new();
            for node_set in node_sets {
                if port_index >= PORTS_PER_RUN {
                    bail!("more than {PORTS_PER_RUN} jobs in one run: lower --mpl or --nodes");
                }
                slot_plans.push(JobPlan {
                    job_id: self.next_job_id,
                    name: slot.label.clone(),
                    nodes: node_set,
                    port: first_port + port_index,
                    args: with_wait(slot.kind.synth_args(duration_s), self.wait),
                });
                self.next_job_id += 1;
                port_index += 1;
            }
            plans.push(slot_plans);
        }
        Ok(plans)
    }
}

/// What one run gave: one outcome per slot (size-1 parts combined).
#[derive(Debug)]
pub struct RunResult {
    pub jobs: Vec<JobOutcome>,
    /// Mean agent CPU during the run, % of one core (NaN when unreadable).
    pub agent_cpu_percent: f64,
    /// CPU used outside the bench meanwhile, % of one CPU (NaN: unknown).
    pub outside_cpu_percent: f64,
}

/// Runs `slots` together once; on failure whatever may still run is killed.
pub fn run_once(
    cluster: &Cluster,
    synth: &str,
    slots: &[JobSlot],
    duration_s: f64,
    ids: &mut Allocator,
) -> anyhow::Result<RunResult> {
    let grouped = ids.plans(slots, cluster.nodes.len(), duration_s)?;
    let all: Vec<JobPlan> = grouped.iter().flatten().cloned().collect();
    let ours = Ours::of(cluster);
    let load_before = ours.sample();
    let cpu_before = agent_cpu::read_all(cluster);
    let started = Instant::now();
    let outcomes = match run_together(cluster, synth, &all) {
        Ok(o) => o,
        Err(e) => {
            jobs::discard(cluster, &all);
            return Err(e);
        }
    };
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_after = agent_cpu::read_all(cluster);
    let outside_cpu_percent = outside_percent(load_before, ours.sample());
    let mut outcomes = outcomes.into_iter();
    let jobs = slots
        .iter()
        .zip(&grouped)
        .map(|(slot, plans)| {
            let parts: Vec<JobOutcome> = outcomes.by_ref().take(plans.len()).collect();
            if parts.len() != plans.len() {
                bail!("{}: fewer outcomes than jobs launched", slot.label);
            }
            Ok(jobs::combine(&slot.label, &parts))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .context("matching outcomes to jobs")?;
    Ok(RunResult {
        jobs,
        agent_cpu_percent: agent_cpu_percent(&cpu_before, &cpu_after, wall_s),
        outside_cpu_percent,
    })
}

#[cfg(test)]
mod tests {
    use super::super::workloads::{JobType, Workload};
    use super::*;

    #[test]
    fn only_spinning_jobs_get_the_wait_mode() {
        let spin = || JobType::FineSpin.synth_args(1.0);
        let args = with_wait(spin(), Some(SpinWait::Poll));
        assert!(args.ends_with(&["--wait".to_string(), "poll".to_string()]));
        assert_eq!(with_wait(spin(), None), spin(), "the synth's default");
        let blocking = JobType::Blocking.synth_args(1.0);
        assert_eq!(with_wait(blocking.clone(), Some(SpinWait::Yield)), blocking);
    }

    #[test]
    fn every_job_gets_its_own_id_and_port_and_runs_rotate_ports() {
        let mut ids = Allocator::default();
        let slots = Workload::Mix.slots(3);
        let plans = ids.plans(&slots, 2, 1.0).unwrap();
        // fine-spin on both nodes; each compute job as two size-1 jobs.
        let shape: Vec<Vec<Vec<usize>>> = plans
            .iter()
            .map(|p| p.iter().map(|j| j.nodes.clone()).collect())
            .collect();
        assert_eq!(
            shape,
            [
                vec![vec![0, 1]],
                vec![vec![0], vec![1]],
                vec![vec![0], vec![1]]
            ]
        );
        let all: Vec<&JobPlan> = plans.iter().flatten().collect();
        let mut ids_seen: Vec<u32> = all.iter().map(|p| p.job_id).collect();
        let mut ports: Vec<u16> = all.iter().map(|p| p.port).collect();
        ids_seen.dedup();
        ports.dedup();
        assert_eq!((ids_seen.len(), ports.len()), (5, 5));
        assert_eq!(all[1].name, "compute-1");
        let next = ids.plans(&slots, 2, 1.0).unwrap();
        assert_ne!(next[0][0].port, plans[0][0].port);
        assert!(next[0][0].job_id > all[4].job_id);
    }

    #[test]
    fn too_many_jobs_for_a_port_block_is_a_clear_error() {
        let slots = Workload::Mix.slots(40);
        let e = Allocator::default().plans(&slots, 2, 1.0).unwrap_err();
        assert!(e.to_string().contains("--mpl"), "{e}");
    }
}
