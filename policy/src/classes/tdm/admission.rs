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

use super::super::admission::Rejection;
use super::super::job::RtJob;
use super::super::ledger::{ClassLedger, RtPlacement};
use super::allocation::{AllocationError, most_laxity, node_loads};
use super::load::RtLoadModel;

/// The paper's rule; the ledger is not changed.
pub fn admit_deterministic(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
) -> Result<RtPlacement, Rejection> {
    let mut loads = node_loads(ledger, model);
    let mut nodes = vec![0; job.processes()];
    for process in job.heaviest_first() {
        let node =
            most_laxity(&loads, model).ok_or(Rejection::Allocation(AllocationError::NoNodes))?;
        let spec = job.process_spec(process);
        let load_ns = model.window_load_ns(&spec);
        let window_ns = loads[node]
            .gamma_ns
            .map_or(spec.window_ns(), |gamma| gamma.min(spec.window_ns()));
        let capacity_ns = model.capacity_ns(window_ns);
        let placed_ns = loads[node].sigma_ns;
        if placed_ns.saturating_add(load_ns) > capacity_ns {
            return Err(Rejection::WindowCapacity {
                job: job.id,
                process,
                node,
                load_ns,
                placed_ns,
                capacity_ns,
            });
        }
        loads[node].add(load_ns, spec.window_ns());
        nodes[process] = node;
    }
    Ok(RtPlacement { job: job.id, nodes })
}
