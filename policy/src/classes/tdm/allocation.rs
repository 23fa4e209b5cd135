//! Initial allocation of 2DCS-TDM, also used by 2DCS-PS (the BE/RT
//! coscheduling paper §4.2 "Allocation"; §4.3: "Allocation of CPUs upon job
//! arrival is the same as in 2DCS-TDM").
//!
//! RT: a node's laxity is x/(x+y)·Γ_i − Σ_i (see [`RtLoadModel`] for the
//! units); the job's processes, heaviest first, each go to the node with the
//! most laxity, updated after each, so several processes of a light job may
//! share a node. A node with no RT process has unbounded laxity (Γ_i is the
//! minimum over nothing). Ties go to the lowest node index.
//!
//! BE: a job of s processes goes to the s nodes with the fewest BE processes
//! (§4.2: the scheduler knows nothing else of a BE job), ties to the lowest
//! index, one process per node.
//!
//! On a ledger of [one process per node](ClassLedger::one_process_per_node)
//! each RT process goes to the node with the most laxity among those the
//! job does not use yet.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::super::job::RtJob;
use super::super::ledger::{ClassLedger, RtPlacement};
use super::load::RtLoadModel;
use crate::global::{JobId, NodeIndex};

/// A node's laxity. `Finite` orders before `Unbounded`, so the most laxity
/// is the maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Laxity {
    /// Capacity over Γ_i minus Σ_i, in ns (negative when overloaded).
    Finite(i128),
    /// No RT process on the node.
    Unbounded,
}

impl Laxity {
    /// The laxity of a node whose shortest window is `gamma_ns` and whose
    /// load is `sigma_ns`.
    pub fn of(gamma_ns: Option<u64>, sigma_ns: u64, model: &RtLoadModel) -> Self {
        match gamma_ns {
            None => Self::Unbounded,
            Some(gamma) => {
                Self::Finite(i128::from(model.capacity_ns(gamma)) - i128::from(sigma_ns))
            }
        }
    }
}

/// Why a job cannot be allocated at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocationError {
    #[error("the cluster has no node")]
    NoNodes,
    #[error("a BE job needs at least one process")]
    EmptyBeJob,
    #[error("a BE job of {size} processes does not fit {nodes} nodes (one process per node)")]
    BeJobTooLarge { size: usize, nodes: usize },
    #[error("an RT job of {size} processes does not fit {nodes} nodes (one process per node)")]
    RtJobTooLarge { size: usize, nodes: usize },
    #[error(
        "the placement of {job} names {given} nodes for {processes} processes, a node past the \
         cluster's {nodes}, or (one process per node) a node twice"
    )]
    PlacementMismatch {
        job: JobId,
        processes: usize,
        given: usize,
        nodes: usize,
    },
}

/// Refuses an RT job with more processes than nodes on a ledger of one
/// process per node.
pub(crate) fn check_spread(ledger: &ClassLedger, job: &RtJob) -> Result<(), AllocationError> {
    if ledger.spreads_processes() && job.processes() > ledger.node_count() {
        return Err(AllocationError::RtJobTooLarge {
            size: job.processes(),
            nodes: ledger.node_count(),
        });
    }
    Ok(())
}

/// The nodes a job's next process may not go to: those it already uses, on
/// a ledger of one process per node; none otherwise.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    spread: bool,
    nodes: Vec<bool>,
}

impl Taken {
    pub fn new(ledger: &ClassLedger) -> Self {
        Self {
            spread: ledger.spreads_processes(),
            nodes: vec![false; ledger.node_count()],
        }
    }

    pub fn allows(&self, node: NodeIndex) -> bool {
        !self.spread || !self.nodes[node]
    }

    pub fn take(&mut self, node: NodeIndex) {
        self.nodes[node] = true;
    }
}

/// Σ_i and Γ_i of one node while a job is being placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeLoad {
    pub sigma_ns: u64,
    pub gamma_ns: Option<u64>,
}

impl NodeLoad {
    pub fn laxity(&self, model: &RtLoadModel) -> Laxity {
        Laxity::of(self.gamma_ns, self.sigma_ns, model)
    }

    /// Adds a process with load `load_ns` and window `window_ns`.
    pub fn add(&mut self, load_ns: u64, window_ns: u64) {
        self.sigma_ns = self.sigma_ns.saturating_add(load_ns);
        self.gamma_ns = Some(self.gamma_ns.map_or(window_ns, |g| g.min(window_ns)));
    }
}

pub(crate) fn node_loads(ledger: &ClassLedger, model: &RtLoadModel) -> Vec<NodeLoad> {
    ledger
        .nodes()
        .iter()
        .map(|node| NodeLoad {
            sigma_ns: node.sigma_ns(model),
            gamma_ns: node.gamma_ns(),
        })
        .collect()
}

/// The node with the most laxity the job may still use, ties to the lowest
/// index.
pub(crate) fn most_laxity(
    loads: &[NodeLoad],
    model: &RtLoadModel,
    taken: &Taken,
) -> Option<NodeIndex> {
    loads
        .iter()
        .enumerate()
        .filter(|&(node, _)| taken.allows(node))
        .max_by(|(a, la), (b, lb)| {
            la.laxity(model)
                .cmp(&lb.laxity(model))
                .then_with(|| b.cmp(a))
        })
        .map(|(node, _)| node)
}

/// Places an RT job's processes by laxity, without any admission check.
pub fn allocate_rt(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
) -> Result<RtPlacement, AllocationError> {
    check_spread(ledger, job)?;
    let mut loads = node_loads(ledger, model);
    let mut taken = Taken::new(ledger);
    let mut nodes = vec![0; job.processes()];
    for process in job.heaviest_first() {
        let node = most_laxity(&loads, model, &taken).ok_or(AllocationError::NoNodes)?;
        let spec = job.process_spec(process);
        loads[node].add(model.window_load_ns(&spec), spec.window_ns());
        taken.take(node);
        nodes[process] = node;
    }
    Ok(RtPlacement { job: job.id, nodes })
}

/// The `size` nodes with the fewest BE processes, in node order.
pub fn allocate_be(ledger: &ClassLedger, size: usize) -> Result<Vec<NodeIndex>, AllocationError> {
    let nodes = ledger.node_count();
    if size == 0 {
        return Err(AllocationError::EmptyBeJob);
    }
    if size > nodes {
        return Err(AllocationError::BeJobTooLarge { size, nodes });
    }
    let mut by_load: Vec<NodeIndex> = (0..nodes).collect();
    by_load.sort_by_key(|&node| (ledger.node(node).be_count(), node));
    let mut chosen = by_load[..size].to_vec();
    chosen.sort_unstable();
    Ok(chosen)
}
