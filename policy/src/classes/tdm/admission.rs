//! The admission rule of 2DCS-TDM and 2DCS-PS (the BE/RT coscheduling paper
//! §4.4): process j of job A may go to node i if
//! Σ_i + τ_Aj ≤ min(Γ_i, b_A·d_A)·x/(x+y).
//!
//! Processes are taken heaviest first, as the allocation does, and each is
//! tried on the node with the most laxity only: "if this inequality does not
//! hold, then j cannot be assigned to any other node as well (since we are
//! examining the node with the most slackness first)", and the whole job is
//! rejected. On success Γ_i and Σ_i are updated before the next process.
//!
//! Units follow the conservative reading documented in [`RtLoadModel`]: the
//! load is the work per window b·(τ + overheads), and the capacity of a
//! window is the RT share minus the division switches.
//!
//! On a ledger of one process per node "the node with the most laxity" is
//! the one among the nodes the job does not use yet; the argument holds
//! among those.

use super::super::admission::Rejection;
use super::super::job::RtJob;
use super::super::ledger::{ClassLedger, RtPlacement};
use super::allocation::{AllocationError, NodeLoad, Taken, check_spread, most_laxity, node_loads};
use super::load::RtLoadModel;

/// The paper's rule; the ledger is not changed.
pub fn admit_deterministic(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
) -> Result<RtPlacement, Rejection> {
    check_spread(ledger, job)?;
    let mut loads = node_loads(ledger, model);
    let mut taken = Taken::new(ledger);
    let mut nodes = vec![0; job.processes()];
    for process in job.heaviest_first() {
        let node = most_laxity(&loads, model, &taken)
            .ok_or(Rejection::Allocation(AllocationError::NoNodes))?;
        let fit = window_fit(&loads[node], job, process, model);
        if !fit.fits() {
            return Err(Rejection::WindowCapacity {
                job: job.id,
                process,
                node,
                load_ns: fit.load_ns,
                placed_ns: fit.placed_ns,
                capacity_ns: fit.capacity_ns,
            });
        }
        loads[node].add(fit.load_ns, job.process_spec(process).window_ns());
        taken.take(node);
        nodes[process] = node;
    }
    Ok(RtPlacement { job: job.id, nodes })
}

/// The paper's inequality for process `process` of `job` on a node loaded
/// with `load`: Σ_i + load ≤ capacity over min(Γ_i, Γ_A).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowFit {
    pub load_ns: u64,
    pub placed_ns: u64,
    pub capacity_ns: u64,
}

impl WindowFit {
    pub fn fits(&self) -> bool {
        self.placed_ns.saturating_add(self.load_ns) <= self.capacity_ns
    }
}

pub(crate) fn window_fit(
    load: &NodeLoad,
    job: &RtJob,
    process: usize,
    model: &RtLoadModel,
) -> WindowFit {
    let spec = job.process_spec(process);
    let window_ns = load
        .gamma_ns
        .map_or(spec.window_ns(), |gamma| gamma.min(spec.window_ns()));
    WindowFit {
        load_ns: model.window_load_ns(&spec),
        placed_ns: load.sigma_ns,
        capacity_ns: model.capacity_ns(window_ns),
    }
}
