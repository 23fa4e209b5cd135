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
//! - the declared work of a process not measured yet (the candidate's too) is
//!   scaled by the cluster's *calibration*: Σ measured ÷ Σ declared work per
//!   frame over the admitted processes measured so far, at most 1 (no
//!   measurement: 1). Programs declare their worst case; what the cluster has
//!   seen them really use is the better estimate of a newcomer's load, and
//!   its own measurement replaces it after `min_frames`. Without this the
//!   rule admitted no more than the deterministic one: a job's measurement
//!   replaced its declaration only late in its run, and a newcomer was always
//!   charged its worst case (measured: 15 vs 16 rejections,
//!   `docs/bench-rt.md`).
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
        let calibration = self.calibration(ledger);
        node.rt_processes()
            .map(|((job, process), spec)| {
                let work = match ledger.measured(job, process) {
                    Some(m) if m.frames >= self.min_frames => m.work_ns,
                    _ => calibration.scale(spec.work_ns),
                };
                model.utilization_ppm(spec.period_ns, work)
            })
            .fold(0, u64::saturating_add)
    }

    /// Σ measured ÷ Σ declared work per frame over the admitted processes
    /// whose measurement covers `min_frames`, at most 1.
    pub fn calibration(&self, ledger: &ClassLedger) -> Calibration {
        let (mut measured, mut declared) = (0u64, 0u64);
        for node in ledger.nodes() {
            for ((job, process), spec) in node.rt_processes() {
                if let Some(m) = ledger.measured(job, process)
                    && m.frames >= self.min_frames
                {
                    measured = measured.saturating_add(m.work_ns);
                    declared = declared.saturating_add(spec.work_ns);
                }
            }
        }
        Calibration { measured, declared }
    }
}

/// How much of their declared work per frame programs were measured to use:
/// `measured / declared`, taken as 1 with no measurement or above 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Calibration {
    pub measured: u64,
    pub declared: u64,
}

impl Calibration {
    /// `declared_ns` scaled by the calibration (never up, never to 0).
    pub fn scale(&self, declared_ns: u64) -> u64 {
        if self.declared == 0 || self.measured >= self.declared {
            return declared_ns;
        }
        let scaled =
            u128::from(declared_ns) * u128::from(self.measured) / u128::from(self.declared);
        (scaled as u64).max(1)
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
    let calibration = params.calibration(ledger);
    let mut placed = node_loads_ppm(ledger, model, params);
    let mut taken = Taken::new(ledger);
    let mut nodes = vec![0; job.processes()];
    for process in job.heaviest_first() {
        let node =
            least_loaded(&placed, &taken).ok_or(Rejection::Allocation(AllocationError::NoNodes))?;
        let work_ns = calibration.scale(job.process_work_ns[process]);
        let load_ppm = model.utilization_ppm(job.period_ns, work_ns);
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
