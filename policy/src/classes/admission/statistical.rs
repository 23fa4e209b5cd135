//! Statistical admission: what the BE/RT coscheduling paper §5.2 proposes as
//! future work after its rules "reject several RT jobs (in fact, the reject
//! rates are higher than 50%)" to reach a very low miss rate: "tolerate a
//! slightly higher miss rate ... to admit more jobs ... opting for
//! statistical admission control schemes".
//!
//! Two changes from the deterministic rule:
//! - the work per frame of an admitted process is what the agent measured (a
//!   high quantile of its recent frames, e.g. the p99) once enough frames
//!   were measured, instead of the declared worst case; until then, and for
//!   the candidate itself, the declared τ;
//! - the test is on utilization, Σ (τ + overheads)/d per node against a
//!   configurable bound times the RT share (minus the division switches),
//!   the EDF bound, instead of the per-window test against the node's
//!   shortest window, which penalises mixing periods.
//!
//! The bound may exceed one CPU (overbooking, betting that not every process
//! peaks at once) or stay below it (headroom). Processes are placed heaviest
//! first, each on the node with the most utilization headroom (ties to the
//! lowest index); if it does not fit there the job is rejected.

use serde::{Deserialize, Serialize};

use super::super::job::RtJob;
use super::super::ledger::{ClassLedger, NodeLedger, RtPlacement};
use super::super::tdm::{AllocationError, RtLoadModel, Taken, check_spread};
use super::{MeasuredWork, Rejection};

/// Parameters of the statistical rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatisticalParams {
    /// Utilization bound per node, in parts per million of one CPU, before
    /// the RT share is taken (1_000_000: the whole CPU).
    pub bound_ppm: u64,
    /// Frames a measurement must cover before it replaces the declared work.
    pub min_frames: u64,
}

impl Default for StatisticalParams {
    fn default() -> Self {
        Self {
            bound_ppm: 1_000_000,
            min_frames: 100,
        }
    }
}

impl StatisticalParams {
    /// The per-frame work admission counts for a process: the measurement if
    /// it covers enough frames, else the declared work.
    pub fn effective_work_ns(&self, declared_ns: u64, measured: Option<MeasuredWork>) -> u64 {
        match measured {
            Some(measured) if measured.frames >= self.min_frames => measured.work_ns,
            _ => declared_ns,
        }
    }

    /// The utilization a node's admitted RT processes count for.
    pub fn node_load_ppm(
        &self,
        ledger: &ClassLedger,
        node: &NodeLedger,
        model: &RtLoadModel,
    ) -> u64 {
        node.rt_processes()
            .map(|((job, process), spec)| {
                let work = self.effective_work_ns(spec.work_ns, ledger.measured(job, process));
                model.utilization_ppm(spec.period_ns, work)
            })
            .fold(0, u64::saturating_add)
    }
}

/// The statistical rule; the ledger is not changed.
pub fn admit_statistical(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
    params: &StatisticalParams,
) -> Result<RtPlacement, Rejection> {
    check_spread(ledger, job)?;
    let capacity_ppm = model.capacity_ppm(params.bound_ppm);
    let mut placed = node_loads_ppm(ledger, model, params);
    let mut taken = Taken::new(ledger);
    let mut nodes = vec![0; job.processes()];
    for process in job.heaviest_first() {
        let node =
            least_loaded(&placed, &taken).ok_or(Rejection::Allocation(AllocationError::NoNodes))?;
        let load_ppm = model.utilization_ppm(job.period_ns, job.process_work_ns[process]);
        if placed[node].saturating_add(load_ppm) > capacity_ppm {
            return Err(Rejection::Utilization {
                job: job.id,
                process,
                node,
                load_ppm,
                placed_ppm: placed[node],
                capacity_ppm,
            });
        }
        placed[node] += load_ppm;
        taken.take(node);
        nodes[process] = node;
    }
    Ok(RtPlacement { job: job.id, nodes })
}

/// What each node's admitted RT processes count for, ppm.
pub(crate) fn node_loads_ppm(
    ledger: &ClassLedger,
    model: &RtLoadModel,
    params: &StatisticalParams,
) -> Vec<u64> {
    ledger
        .nodes()
        .iter()
        .map(|node| params.node_load_ppm(ledger, node, model))
        .collect()
}

fn least_loaded(placed: &[u64], taken: &Taken) -> Option<usize> {
    placed
        .iter()
        .enumerate()
        .filter(|&(node, _)| taken.allows(node))
        .min_by_key(|&(node, &load)| (load, node))
        .map(|(node, _)| node)
}
