//! What is placed on each node: RT processes with their specs, BE processes,
//! and the per-frame work measured for admitted RT processes. The allocators
//! and admission rules of 2DCS-TDM and 2DCS-PS read it (the BE/RT
//! coscheduling paper §4.2 "Allocation", §4.3, §4.4); the coordinator owns
//! it and updates it when jobs are placed and leave.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::admission::{MeasuredWork, WorkMoments};
use super::job::RtJob;
use super::spec::RtSpec;
use super::tdm::{Laxity, RtLoadModel};
use crate::global::{JobId, NodeIndex};

/// Where each process of an RT job goes: `nodes[j]` is process j's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtPlacement {
    pub job: JobId,
    pub nodes: Vec<NodeIndex>,
}

impl RtPlacement {
    /// No two processes share a node.
    pub fn is_spread(&self) -> bool {
        let distinct: BTreeSet<NodeIndex> = self.nodes.iter().copied().collect();
        distinct.len() == self.nodes.len()
    }
}

/// One node's placed processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLedger {
    rt: BTreeMap<(JobId, usize), RtSpec>,
    be: BTreeSet<JobId>,
}

impl NodeLedger {
    /// RT processes on the node: (job, process index) and its spec.
    pub fn rt_processes(&self) -> impl Iterator<Item = ((JobId, usize), &RtSpec)> {
        self.rt.iter().map(|(&key, spec)| (key, spec))
    }

    pub fn rt_count(&self) -> usize {
        self.rt.len()
    }

    /// Number of BE processes (one per BE job placed here).
    pub fn be_count(&self) -> usize {
        self.be.len()
    }

    /// Γ_i: the shortest window of the RT processes here, `None` when there
    /// are none (the minimum of nothing is unbounded).
    pub fn gamma_ns(&self) -> Option<u64> {
        self.rt.values().map(RtSpec::window_ns).min()
    }

    /// Σ_i: the RT processes' load per window.
    pub fn sigma_ns(&self, model: &RtLoadModel) -> u64 {
        self.rt
            .values()
            .map(|spec| model.window_load_ns(spec))
            .fold(0, u64::saturating_add)
    }

    /// x/(x+y)·Γ_i − Σ_i, unbounded for a node with no RT process.
    pub fn laxity(&self, model: &RtLoadModel) -> Laxity {
        Laxity::of(self.gamma_ns(), self.sigma_ns(model), model)
    }
}

/// The cluster's placed jobs, node by node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassLedger {
    nodes: Vec<NodeLedger>,
    rt_jobs: BTreeMap<JobId, RtPlacement>,
    be_jobs: BTreeMap<JobId, Vec<NodeIndex>>,
    measured: BTreeMap<(JobId, usize), MeasuredWork>,
    moments: BTreeMap<(JobId, usize), WorkMoments>,
    one_process_per_node: bool,
}

impl ClassLedger {
    /// An empty cluster of `nodes` nodes, where several processes of one RT
    /// job may share a node (§4.2: "more than one process of a job can be
    /// assigned to the same CPU if it is lightly loaded").
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes: vec![NodeLedger::default(); nodes],
            rt_jobs: BTreeMap::new(),
            be_jobs: BTreeMap::new(),
            measured: BTreeMap::new(),
            moments: BTreeMap::new(),
            one_process_per_node: false,
        }
    }

    /// An empty cluster of `nodes` nodes where each node holds at most one
    /// process of a job, RT or BE (a coordinator whose agents run one rank of
    /// a job per node). The allocators and admission rules then take, for
    /// each process, the best node among those the job does not use yet.
    pub fn one_process_per_node(nodes: usize) -> Self {
        Self {
            one_process_per_node: true,
            ..Self::new(nodes)
        }
    }

    /// Whether each node holds at most one process of a job.
    pub fn spreads_processes(&self) -> bool {
        self.one_process_per_node
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// # Panics
    /// If `node` is out of range.
    pub fn node(&self, node: NodeIndex) -> &NodeLedger {
        &self.nodes[node]
    }

    pub fn nodes(&self) -> &[NodeLedger] {
        &self.nodes
    }

    pub fn contains(&self, job: JobId) -> bool {
        self.rt_jobs.contains_key(&job) || self.be_jobs.contains_key(&job)
    }

    pub fn rt_placement(&self, job: JobId) -> Option<&RtPlacement> {
        self.rt_jobs.get(&job)
    }

    pub fn be_nodes(&self, job: JobId) -> Option<&[NodeIndex]> {
        self.be_jobs.get(&job).map(Vec::as_slice)
    }

    /// Records an RT job's placement (as returned by an allocator or an
    /// admission rule). A job already placed is replaced.
    ///
    /// # Panics
    /// If the placement does not give one in-range node per process, or on
    /// a ledger of [one process per node](Self::one_process_per_node), puts
    /// two processes on one node.
    pub fn place_rt(&mut self, job: &RtJob, placement: RtPlacement) {
        assert_eq!(placement.job, job.id, "placement of another job");
        assert_eq!(
            placement.nodes.len(),
            job.processes(),
            "one node per process"
        );
        assert!(
            !self.one_process_per_node || placement.is_spread(),
            "two processes of {} on one node",
            job.id
        );
        self.unplace(job.id);
        for (process, &node) in placement.nodes.iter().enumerate() {
            self.nodes[node]
                .rt
                .insert((job.id, process), job.process_spec(process));
        }
        self.rt_jobs.insert(job.id, placement);
    }

    /// Records a BE job on `nodes` (one process each).
    ///
    /// # Panics
    /// If a node is out of range.
    pub fn place_be(&mut self, job: JobId, nodes: Vec<NodeIndex>) {
        self.unplace(job);
        for &node in &nodes {
            self.nodes[node].be.insert(job);
        }
        self.be_jobs.insert(job, nodes);
    }

    /// Removes a job of either class and its measurements; false if unknown.
    pub fn remove(&mut self, job: JobId) -> bool {
        self.measured.retain(|&(j, _), _| j != job);
        self.moments.retain(|&(j, _), _| j != job);
        self.unplace(job)
    }

    fn unplace(&mut self, job: JobId) -> bool {
        let mut known = false;
        if let Some(placement) = self.rt_jobs.remove(&job) {
            for (process, &node) in placement.nodes.iter().enumerate() {
                self.nodes[node].rt.remove(&(job, process));
            }
            known = true;
        }
        if let Some(nodes) = self.be_jobs.remove(&job) {
            for node in nodes {
                self.nodes[node].be.remove(&job);
            }
            known = true;
        }
        known
    }

    /// The agent's latest measurement of process `process` of a placed RT
    /// job; false (and ignored) if there is no such process.
    pub fn set_measured(&mut self, job: JobId, process: usize, measured: MeasuredWork) -> bool {
        let placed = self
            .rt_jobs
            .get(&job)
            .is_some_and(|placement| process < placement.nodes.len());
        if placed {
            self.measured.insert((job, process), measured);
        }
        placed
    }

    /// The same measurement for every process of `job` (when the agent
    /// reports one distribution per job); false if the job is not placed.
    pub fn set_job_measured(&mut self, job: JobId, measured: MeasuredWork) -> bool {
        let Some(processes) = self.rt_jobs.get(&job).map(|p| p.nodes.len()) else {
            return false;
        };
        for process in 0..processes {
            self.measured.insert((job, process), measured);
        }
        true
    }

    pub fn measured(&self, job: JobId, process: usize) -> Option<MeasuredWork> {
        self.measured.get(&(job, process)).copied()
    }

    /// The agent's latest mean and deviation of process `process`'s
    /// per-frame work; false (and ignored) if there is no such process.
    pub fn set_moments(&mut self, job: JobId, process: usize, moments: WorkMoments) -> bool {
        let placed = self
            .rt_jobs
            .get(&job)
            .is_some_and(|placement| process < placement.nodes.len());
        if placed {
            self.moments.insert((job, process), moments);
        }
        placed
    }

    pub fn moments(&self, job: JobId, process: usize) -> Option<WorkMoments> {
        self.moments.get(&(job, process)).copied()
    }
}
