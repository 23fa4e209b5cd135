//! Admission of RT jobs for 2DCS-TDM and 2DCS-PS, as one choice the
//! coordinator and the benchmark can switch (the BE/RT coscheduling paper
//! §4.4 and §5.2):
//! - [`AdmissionRule::None`]: every job is admitted and placed by laxity
//!   (§4: the schemes "admit all arrivals" without admission control);
//! - [`AdmissionRule::Deterministic`]: the paper's rule
//!   ([`admit_deterministic`]);
//! - [`AdmissionRule::Statistical`]: measured work against a utilization
//!   bound ([`admit_statistical`]);
//! - [`AdmissionRule::Probabilistic`]: measured mean and variance of the
//!   work against the RT share at a target overload probability
//!   ([`admit_probabilistic`]).
//!
//! BE jobs are never subject to admission (§4.4: they come in "as long as
//! they can find CPUs"); place them with [`allocate_be`].
//!
//! [`AdmissionRule::check_placement`] applies a rule to processes that
//! already run where they are (they cannot move).
//!
//! [`allocate_be`]: super::tdm::allocate_be

mod fixed;
mod moments;
mod probabilistic;
mod samples;
mod statistical;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::job::{RtJob, RtJobError};
use super::ledger::{ClassLedger, RtPlacement};
use super::tdm::{AllocationError, RtLoadModel, admit_deterministic, allocate_rt};
use crate::global::{JobId, NodeIndex};

pub use moments::{WorkMoments, upper_normal_quantile};
pub use probabilistic::{
    LoadEstimate, OverloadDetails, Population, ProbabilisticParams, admit_probabilistic,
};
pub use samples::{MeasuredWork, WorkSamples};
pub use statistical::{Calibration, StatisticalParams, admit_statistical};

/// Which admission rule applies to RT jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum AdmissionRule {
    /// Admit everything; place by laxity.
    #[default]
    None,
    /// §4.4: Σ_i + load ≤ capacity over min(Γ_i, Γ_A), declared work.
    Deterministic,
    /// Measured work against a utilization bound.
    Statistical(StatisticalParams),
    /// Measured mean and variance against the RT share at a target
    /// overload probability.
    Probabilistic(ProbabilisticParams),
}

/// Why an RT job is not admitted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejection {
    #[error("{0} is already placed")]
    AlreadyPlaced(JobId),
    #[error(transparent)]
    Invalid(#[from] RtJobError),
    #[error(transparent)]
    Allocation(#[from] AllocationError),
    #[error(
        "process {process} of {job} does not fit node {node}, the one with the most laxity: \
         {placed_ns} ns of RT load per window there plus its {load_ns} ns exceed the capacity \
         of {capacity_ns} ns"
    )]
    WindowCapacity {
        job: JobId,
        process: usize,
        node: NodeIndex,
        load_ns: u64,
        placed_ns: u64,
        capacity_ns: u64,
    },
    #[error(
        "process {process} of {job} does not fit node {node}, the least utilized: \
         {placed_ppm} ppm there plus its {load_ppm} ppm exceed the bound of {capacity_ppm} ppm"
    )]
    Utilization {
        job: JobId,
        process: usize,
        node: NodeIndex,
        load_ppm: u64,
        placed_ppm: u64,
        capacity_ppm: u64,
    },
    /// [`AdmissionRule::check_placement`]'s deterministic refusal.
    #[error(
        "process {process} of {job} on node {node}, where it runs: {placed_ns} ns of RT load \
         per window there plus its {load_ns} ns exceed the capacity of {capacity_ns} ns"
    )]
    WindowCapacityInPlace {
        job: JobId,
        process: usize,
        node: NodeIndex,
        load_ns: u64,
        placed_ns: u64,
        capacity_ns: u64,
    },
    /// [`AdmissionRule::check_placement`]'s statistical refusal.
    #[error(
        "process {process} of {job} on node {node}, where it runs: {placed_ppm} ppm there plus \
         its {load_ppm} ppm exceed the bound of {capacity_ppm} ppm"
    )]
    UtilizationInPlace {
        job: JobId,
        process: usize,
        node: NodeIndex,
        load_ppm: u64,
        placed_ppm: u64,
        capacity_ppm: u64,
    },
    #[error(
        "process {} of {} does not fit node {}, the least loaded: the RT load there with it \
         would exceed the RT share of {} ppm with probability over {} ppm (mean {} ppm, \
         charged {} ppm, declared {} ppm)",
        .0.process, .0.job, .0.node, .0.capacity_ppm, .0.overload_ppm, .0.mean_ppm,
        .0.charged_ppm, .0.declared_ppm
    )]
    Overload(OverloadDetails),
    /// [`AdmissionRule::check_placement`]'s probabilistic refusal.
    #[error(
        "process {} of {} on node {}, where it runs: the RT load there with it would exceed \
         the RT share of {} ppm with probability over {} ppm (mean {} ppm, charged {} ppm, \
         declared {} ppm)",
        .0.process, .0.job, .0.node, .0.capacity_ppm, .0.overload_ppm, .0.mean_ppm,
        .0.charged_ppm, .0.declared_ppm
    )]
    OverloadInPlace(OverloadDetails),
}

impl Rejection {
    /// A short, fixed label for the refusal (for metrics).
    pub fn label(&self) -> &'static str {
        match self {
            Self::AlreadyPlaced(_) => "already_placed",
            Self::Invalid(_) => "invalid_spec",
            Self::Allocation(_) => "allocation",
            Self::WindowCapacity { .. } | Self::WindowCapacityInPlace { .. } => "window_capacity",
            Self::Utilization { .. } | Self::UtilizationInPlace { .. } => "utilization",
            Self::Overload(_) | Self::OverloadInPlace(_) => "overload",
        }
    }
}

impl AdmissionRule {
    /// Where `job` would go under this rule, or why not; the ledger is not
    /// changed.
    pub fn evaluate(
        &self,
        ledger: &ClassLedger,
        job: &RtJob,
        model: &RtLoadModel,
    ) -> Result<RtPlacement, Rejection> {
        job.validate()?;
        if ledger.contains(job.id) {
            return Err(Rejection::AlreadyPlaced(job.id));
        }
        match self {
            Self::None => Ok(allocate_rt(ledger, job, model)?),
            Self::Deterministic => admit_deterministic(ledger, job, model),
            Self::Statistical(params) => admit_statistical(ledger, job, model, params),
            Self::Probabilistic(params) => admit_probabilistic(ledger, job, model, params),
        }
    }

    /// [`Self::evaluate`], and on success records the placement.
    pub fn admit(
        &self,
        ledger: &mut ClassLedger,
        job: &RtJob,
        model: &RtLoadModel,
    ) -> Result<RtPlacement, Rejection> {
        let placement = self.evaluate(ledger, job, model)?;
        ledger.place_rt(job, placement.clone());
        Ok(placement)
    }
}
