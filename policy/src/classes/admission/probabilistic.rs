//! Probabilistic admission: the RT load of a node is a random variable, and
//! a job is admitted when the probability that it exceeds the RT share stays
//! below a target (the BE/RT coscheduling paper §5.2's "statistical
//! admission control", which it leaves as future work).
//!
//! Per node, over its admitted RT processes and the candidate's process:
//!
//! ```text
//! admit if  Σ τ_j/d_j ≤ C                      (every declared worst case fits: no overload at all)
//!      or   Σ μ_j/d_j + z·√(Σ σ_j²/d_j²) ≤ C   (the overload probability is at most p)
//! ```
//!
//! C is the RT class's share of the CPU ([`RtLoadModel::capacity_ppm`] of
//! one CPU: never more — BE keeps its y/(x+y) when it wants it), μ_j and σ_j
//! the mean and standard deviation of process j's per-frame work, and z the
//! normal quantile of the target overload probability p (1 % → z = 2.33):
//! a sum of several independent processes' loads is close to normal, and
//! a window whose RT load fits C loses no frame, so p also bounds the
//! fraction of windows with misses. Per-frame overheads count in μ_j.
//!
//! Where μ_j and σ_j come from:
//! - a process measured over at least `min_frames` frames: its own
//!   [`WorkMoments`]. σ_j counts as if all frames of a window were alike
//!   (a window's mean varies like one frame, not like 1/√b of it), so a
//!   program whose frames are heavy in bursts is not under-charged;
//! - any other process (the candidate's too): the law of total variance over
//!   the *population* of admitted processes measured so far, each as its
//!   ratio to its own declaration r_j = μ_j/τ_j: μ = τ·mean(r) (at most τ),
//!   σ² = τ²·(var(r) + mean((σ_j/τ_j)²)) — what a new program is likely
//!   to use of its declaration, and how much programs differ. With fewer
//!   than `min_population` measured processes the population says nothing:
//!   its declared τ, σ = 0.
//!
//! The first test means the rule admits at least what a utilization test on
//! the declared work admits; the second is where it gains, by what the
//! measurements show programs leave unused of their declarations.
//!
//! Independence of processes is assumed (the sum of variances); processes
//! of one pipeline are on different nodes here, so a node's sum is over
//! different jobs. Processes are placed heaviest first on the node with the
//! lowest expected load among those the job may use; if the process does not
//! fit there the job is rejected.

use serde::{Deserialize, Serialize};

use super::super::job::RtJob;
use super::super::ledger::{ClassLedger, NodeLedger, RtPlacement};
use super::super::spec::RtSpec;
use super::super::tdm::{AllocationError, RtLoadModel, Taken, check_spread};
use super::moments::upper_normal_quantile;
use super::{Rejection, WorkMoments};

/// Parameters of the probabilistic rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbabilisticParams {
    /// p: the target probability that a node's RT load exceeds the RT
    /// share, parts per million (10 000: 1 %).
    pub overload_ppm: u32,
    /// Frames a process's measurement must cover before it replaces the
    /// population's estimate.
    pub min_frames: u64,
    /// Measured processes the population needs before it estimates an
    /// unmeasured one (fewer: its declared work).
    pub min_population: usize,
}

impl Default for ProbabilisticParams {
    fn default() -> Self {
        Self {
            overload_ppm: 10_000,
            min_frames: 100,
            min_population: 3,
        }
    }
}

/// One process's load as the rule counts it, ppm of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadEstimate {
    /// τ/d with overheads: the worst case.
    pub declared_ppm: f64,
    /// μ/d with overheads.
    pub mean_ppm: f64,
    /// σ²/d².
    pub variance_ppm2: f64,
}

impl LoadEstimate {
    fn add(&mut self, other: LoadEstimate) {
        self.declared_ppm += other.declared_ppm;
        self.mean_ppm += other.mean_ppm;
        self.variance_ppm2 += other.variance_ppm2;
    }

    /// What the rule charges a node loaded with this estimate: the
    /// declared sum if it fits the capacity, else mean + z·σ (never more
    /// than the declared sum: the worst case bounds every quantile).
    pub fn charged_ppm(&self, z: f64) -> f64 {
        let quantile = self.mean_ppm + z * self.variance_ppm2.sqrt();
        quantile.min(self.declared_ppm)
    }
}

/// What the admitted processes measured so far say about a process not
/// measured yet, as fractions of its declared work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Population {
    /// How many measured processes it is over.
    pub processes: usize,
    /// mean(μ_j/τ_j), at most 1.
    pub mean_ratio: f64,
    /// var(μ_j/τ_j) + mean((σ_j/τ_j)²).
    pub variance_ratio: f64,
}

impl ProbabilisticParams {
    /// z of the target overload probability.
    pub fn z(&self) -> f64 {
        upper_normal_quantile(self.overload_ppm)
    }

    fn measured(&self, moments: Option<WorkMoments>) -> Option<WorkMoments> {
        moments.filter(|m| m.frames >= self.min_frames && m.frames > 0)
    }

    /// The population of admitted processes measured over `min_frames`;
    /// `None` below `min_population`.
    pub fn population(&self, ledger: &ClassLedger) -> Option<Population> {
        let mut ratios = Vec::new();
        let mut spread = 0.0;
        for node in ledger.nodes() {
            for ((job, process), spec) in node.rt_processes() {
                if let Some(m) = self.measured(ledger.moments(job, process)) {
                    let declared = spec.work_ns as f64;
                    ratios.push(m.mean_ns as f64 / declared);
                    spread += (m.sd_ns as f64 / declared).powi(2);
                }
            }
        }
        let n = ratios.len();
        if n < self.min_population.max(1) {
            return None;
        }
        let mean = ratios.iter().sum::<f64>() / n as f64;
        // The sample variance (n − 1): a few processes understate it.
        let between = if n > 1 {
            ratios.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Some(Population {
            processes: n,
            mean_ratio: mean.min(1.0),
            variance_ratio: between + spread / n as f64,
        })
    }

    /// The estimate of a process of `spec`, measured as `moments` (or not).
    pub fn estimate(
        &self,
        spec: &RtSpec,
        moments: Option<WorkMoments>,
        population: Option<&Population>,
        model: &RtLoadModel,
    ) -> LoadEstimate {
        let period = spec.period_ns as f64;
        let per_ppm = |work_ns: f64| {
            let overheads = model.frame_cost_ns(0) as f64;
            (work_ns + overheads) * 1e6 / period
        };
        let mut declared = spec.work_ns as f64;
        let (mean_ns, variance_ns2) = match (self.measured(moments), population) {
            (Some(m), _) => {
                // A program that uses more than it declared: its worst case
                // is at least what it uses.
                declared = declared.max(m.mean_ns as f64);
                (m.mean_ns as f64, (m.sd_ns as f64).powi(2))
            }
            (None, Some(p)) => (
                declared * p.mean_ratio,
                declared * declared * p.variance_ratio,
            ),
            (None, None) => (declared, 0.0),
        };
        LoadEstimate {
            declared_ppm: per_ppm(declared),
            mean_ppm: per_ppm(mean_ns),
            variance_ppm2: variance_ns2 * 1e12 / (period * period),
        }
    }

    /// A node's admitted RT processes, summed.
    pub fn node_estimate(
        &self,
        ledger: &ClassLedger,
        node: &NodeLedger,
        population: Option<&Population>,
        model: &RtLoadModel,
    ) -> LoadEstimate {
        let mut sum = LoadEstimate::default();
        for ((job, process), spec) in node.rt_processes() {
            sum.add(self.estimate(spec, ledger.moments(job, process), population, model));
        }
        sum
    }

    /// Whether `load` fits the RT share: [`LoadEstimate::charged_ppm`]
    /// against [`RtLoadModel::capacity_ppm`] of one CPU.
    pub fn fits(&self, load: &LoadEstimate, model: &RtLoadModel) -> bool {
        load.charged_ppm(self.z()) <= model.capacity_ppm(1_000_000) as f64
    }
}

/// The probabilistic rule; the ledger is not changed.
pub fn admit_probabilistic(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
    params: &ProbabilisticParams,
) -> Result<RtPlacement, Rejection> {
    check_spread(ledger, job)?;
    let mut taken = Taken::new(ledger);
    let nodes = place_each(ledger, job, model, params, false, |_, loads| {
        let node = lowest_expected(loads, &taken)
            .ok_or(Rejection::Allocation(AllocationError::NoNodes))?;
        taken.take(node);
        Ok(node)
    })?;
    Ok(RtPlacement { job: job.id, nodes })
}

/// [`admit_probabilistic`] for processes already on `nodes` (they cannot
/// move); the ledger is not changed.
pub(crate) fn check_probabilistic_in_place(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
    params: &ProbabilisticParams,
    nodes: &[usize],
) -> Result<(), Rejection> {
    place_each(ledger, job, model, params, true, |process, _| {
        Ok(nodes[process])
    })
    .map(|_| ())
}

/// Adds `job`'s processes, heaviest first, each to the node `node_of`
/// chooses (given the nodes' loads so far), refusing the first that makes
/// its node's load not fit; the nodes chosen, by process.
fn place_each(
    ledger: &ClassLedger,
    job: &RtJob,
    model: &RtLoadModel,
    params: &ProbabilisticParams,
    in_place: bool,
    mut node_of: impl FnMut(usize, &[LoadEstimate]) -> Result<usize, Rejection>,
) -> Result<Vec<usize>, Rejection> {
    let population = params.population(ledger);
    let mut loads = node_estimates(ledger, model, params, population.as_ref());
    let mut nodes = vec![0; job.processes()];
    for process in job.heaviest_first() {
        let node = node_of(process, &loads)?;
        let candidate =
            params.estimate(&job.process_spec(process), None, population.as_ref(), model);
        let mut with = loads[node];
        with.add(candidate);
        if !params.fits(&with, model) {
            return Err(overload(job, process, node, &with, params, model, in_place));
        }
        loads[node] = with;
        nodes[process] = node;
    }
    Ok(nodes)
}

fn overload(
    job: &RtJob,
    process: usize,
    node: usize,
    with: &LoadEstimate,
    params: &ProbabilisticParams,
    model: &RtLoadModel,
    in_place: bool,
) -> Rejection {
    let to_ppm = |x: f64| x.ceil() as u64;
    let details = OverloadDetails {
        job: job.id,
        process,
        node,
        mean_ppm: to_ppm(with.mean_ppm),
        charged_ppm: to_ppm(with.charged_ppm(params.z())),
        declared_ppm: to_ppm(with.declared_ppm),
        capacity_ppm: model.capacity_ppm(1_000_000),
        overload_ppm: params.overload_ppm,
    };
    if in_place {
        Rejection::OverloadInPlace(details)
    } else {
        Rejection::Overload(details)
    }
}

/// Why the probabilistic rule refused a process (with the candidate's
/// process counted in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverloadDetails {
    pub job: crate::global::JobId,
    pub process: usize,
    pub node: usize,
    /// Σ μ/d.
    pub mean_ppm: u64,
    /// min(Σ μ/d + z·σ, Σ τ/d).
    pub charged_ppm: u64,
    /// Σ τ/d.
    pub declared_ppm: u64,
    pub capacity_ppm: u64,
    pub overload_ppm: u32,
}

fn node_estimates(
    ledger: &ClassLedger,
    model: &RtLoadModel,
    params: &ProbabilisticParams,
    population: Option<&Population>,
) -> Vec<LoadEstimate> {
    ledger
        .nodes()
        .iter()
        .map(|node| params.node_estimate(ledger, node, population, model))
        .collect()
}

fn lowest_expected(loads: &[LoadEstimate], taken: &Taken) -> Option<usize> {
    loads
        .iter()
        .enumerate()
        .filter(|&(node, _)| taken.allows(node))
        .min_by(|(a, x), (b, y)| x.mean_ppm.total_cmp(&y.mean_ppm).then(a.cmp(b)))
        .map(|(node, _)| node)
}
