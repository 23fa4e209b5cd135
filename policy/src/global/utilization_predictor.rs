//! Per-job CPU-utilisation prediction for paired gang (Paired Gang Scheduling §2.2-2.3,
//! §4.2.3).
//!
//! Agents report, for every quantum in which a job ran, the CPU utilisation of
//! each of its processes (percent of the quantum spent on the CPU; I/O and
//! blocking communication show up as the rest). The prediction is
//! equation (1): τ_n = Σ_{i=1..4} ((5−i)/10) · mean_j t_{n−i,j}.
//!
//! Two cases are predicted 100 % on purpose, so that the job runs alone for
//! one quantum and its true utilisation is measured (paired jobs that are
//! both CPU-bound would each measure < 50 % and look pairable):
//! - a new job, before any measurement (§2.3);
//! - a job whose utilisation changed sharply, by more than 20 points (§4.2.3).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::ids::JobId;

/// Quanta of history equation (1) looks at.
pub const EQUATION_1_HISTORY: usize = 4;

/// The utilisation assumed for a job that must run alone to be measured.
pub const FULL_UTILIZATION_PERCENT: f64 = 100.0;

/// Which changes count as sharp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharpChangeDirection {
    /// Rises and drops (§4.2.3: "detect any sharp change in the behavior").
    #[default]
    Both,
    /// Only rises (§2.2: "when the utilization of a process that shares the
    /// processor grows" — the case pairing can hide).
    Increase,
}

/// Predictor settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PredictorConfig {
    /// A change of the job's quantum mean by more than this many percentage
    /// points is sharp. Paired Gang Scheduling §4.2.3: 20.
    #[serde(default = "default_sharp_change_points")]
    pub sharp_change_points: f64,
    #[serde(default)]
    pub sharp_change_direction: SharpChangeDirection,
}

fn default_sharp_change_points() -> f64 {
    20.0
}

impl Default for PredictorConfig {
    fn default() -> Self {
        Self {
            sharp_change_points: default_sharp_change_points(),
            sharp_change_direction: SharpChangeDirection::default(),
        }
    }
}

/// Why a prediction has the value it has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictionBasis {
    /// Never measured: 100 % so it runs alone once.
    NewJob,
    /// The last quantum's mean moved from `previous_percent` to
    /// `measured_percent`: 100 % so it runs alone once.
    SharpChange {
        previous_percent: f64,
        measured_percent: f64,
    },
    /// Equation (1) over the last `quanta` measured quanta (at most 4).
    History { quanta: usize },
}

/// Predicted CPU utilisation of a job in its next quantum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Percent, 0..=100.
    pub percent: f64,
    pub basis: PredictionBasis,
}

impl Prediction {
    /// True when the value is the speculative 100 % rather than a measurement.
    pub fn is_speculative(&self) -> bool {
        !matches!(self.basis, PredictionBasis::History { .. })
    }
}

impl fmt::Display for Prediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.basis {
            PredictionBasis::NewJob => write!(f, "{:.1}% (new job, runs alone once)", self.percent),
            PredictionBasis::SharpChange {
                previous_percent,
                measured_percent,
            } => write!(
                f,
                "{:.1}% (sharp change {previous_percent:.1}% -> {measured_percent:.1}%, runs alone once)",
                self.percent
            ),
            PredictionBasis::History { quanta } => {
                write!(f, "{:.1}% (equation 1 over {quanta} quanta)", self.percent)
            }
        }
    }
}

/// A report the predictor cannot use.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PredictorError {
    #[error("{0}: a quantum report needs at least one process sample")]
    NoSamples(JobId),
    #[error("{job}: utilisation sample {value} is not a finite, non-negative percentage")]
    InvalidSample { job: JobId, value: f64 },
}

/// Equation (1) over the available history, newest quantum first. Weights
/// (5−i)/10 = 0.4, 0.3, 0.2, 0.1. With fewer than four quanta the weights
/// present are renormalised to sum to 1, so a job measured once at u is
/// predicted u (not 0.4·u).
pub fn equation_1(quantum_means_newest_first: &[f64]) -> f64 {
    let (weighted, weights) = quantum_means_newest_first
        .iter()
        .take(EQUATION_1_HISTORY)
        .enumerate()
        .fold((0.0, 0.0), |(sum, weights), (offset, &mean)| {
            let weight = (EQUATION_1_HISTORY - offset) as f64 / 10.0;
            (sum + weight * mean, weights + weight)
        });
    if weights == 0.0 {
        FULL_UTILIZATION_PERCENT
    } else {
        // A weighted mean of values in 0..=100 is in range up to rounding.
        (weighted / weights).clamp(0.0, FULL_UTILIZATION_PERCENT)
    }
}

/// What the predictor knows about one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct JobUtilizationHistory {
    /// Per-quantum means over the job's processes, newest first, at most 4.
    quantum_means: VecDeque<f64>,
    /// Mean of the last quantum reported, kept across a sharp-change reset.
    last_measured: Option<f64>,
    /// Set while the job is predicted 100 % and the next report is the
    /// calibration measurement (run alone).
    speculative: Option<PredictionBasis>,
    /// While speculative after a sharp change: the first quantum planned
    /// after the change was seen. Reports of earlier quanta are not the
    /// calibration: those slices were planned on the old prediction and may
    /// have shared the job's CPUs with a partner (see [`QuantumTiming`]).
    #[serde(default)]
    calibrate_from: Option<u64>,
}

/// Where a reported quantum stands against the scheduler's planning, for
/// [`UtilizationPredictor::observe_timed_quantum`].
///
/// Reports reach the coordinator after their quantum ended, so when a
/// report turns a job speculative the next slice has already been planned
/// (and may pair the job). Were that slice's report taken as the
/// calibration, a CPU-bound job measured while sharing would keep its
/// halved utilisation as the truth: two spinning jobs each measured
/// ~47 % satisfy 47 + 47 + 1 < 100 and stay paired, competing for the CPU
/// as under plain Linux (OpenMPI allreduce at MPL 3, docs/benchmarks.md,
/// session 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantumTiming {
    /// The quantum (slice number) the report is about.
    pub quantum: u64,
    /// The first quantum not planned yet when the report is learnt: only
    /// slices from this one on are planned knowing what the report says.
    pub first_unplanned: u64,
}

/// Predictions for every job the coordinator has heard about.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UtilizationPredictor {
    config: PredictorConfig,
    jobs: BTreeMap<JobId, JobUtilizationHistory>,
}

impl UtilizationPredictor {
    pub fn new(config: PredictorConfig) -> Self {
        Self {
            config,
            jobs: BTreeMap::new(),
        }
    }

    pub fn config(&self) -> &PredictorConfig {
        &self.config
    }

    /// Records one quantum of `job`: the utilisation percent of each of its
    /// processes (one per node). Values above 100 (coarse kernel accounting)
    /// count as 100. Returns the new prediction.
    ///
    /// The report after a speculative 100 % prediction is the calibration
    /// measurement: it is taken as is (no sharp-change test). Otherwise a
    /// mean that differs from the previous one by more than the threshold is
    /// a sharp change: the old history belongs to the old phase and the new
    /// value may be depressed by sharing, so both are dropped and the job is
    /// predicted 100 % until its next (alone) quantum is measured.
    pub fn observe_quantum(
        &mut self,
        job: JobId,
        per_process_percent: &[f64],
    ) -> Result<Prediction, PredictorError> {
        self.observe(job, None, per_process_percent)
    }

    /// [`Self::observe_quantum`] for a report that arrives after later
    /// slices were planned: after a sharp change, reports of quanta planned
    /// before the change was seen are skipped (the prediction stays 100 %),
    /// and the calibration is the first quantum from `first_unplanned` on,
    /// which runs alone. Sharp-change detection and history are otherwise
    /// the same.
    pub fn observe_timed_quantum(
        &mut self,
        job: JobId,
        timing: QuantumTiming,
        per_process_percent: &[f64],
    ) -> Result<Prediction, PredictorError> {
        self.observe(job, Some(timing), per_process_percent)
    }

    fn observe(
        &mut self,
        job: JobId,
        timing: Option<QuantumTiming>,
        per_process_percent: &[f64],
    ) -> Result<Prediction, PredictorError> {
        if per_process_percent.is_empty() {
            return Err(PredictorError::NoSamples(job));
        }
        if let Some(&value) = per_process_percent
            .iter()
            .find(|value| !value.is_finite() || **value < 0.0)
        {
            return Err(PredictorError::InvalidSample { job, value });
        }
        let mean = per_process_percent
            .iter()
            .map(|value| value.min(FULL_UTILIZATION_PERCENT))
            .sum::<f64>()
            / per_process_percent.len() as f64;
        let config = self.config;
        let history = self
            .jobs
            .entry(job)
            .or_insert_with(|| JobUtilizationHistory {
                quantum_means: VecDeque::new(),
                last_measured: None,
                speculative: Some(PredictionBasis::NewJob),
                calibrate_from: None,
            });
        let planned_before_the_change = match (timing, history.calibrate_from) {
            (Some(timing), Some(from)) => timing.quantum < from,
            _ => false,
        };
        if history.speculative.is_some() && planned_before_the_change {
            return Ok(self.predict(job));
        }
        history.calibrate_from = None;
        let previous = history.last_measured.replace(mean);
        let calibrating = history.speculative.take().is_some();
        match previous.filter(|&previous| !calibrating && is_sharp(config, previous, mean)) {
            Some(previous_percent) => {
                history.quantum_means.clear();
                history.speculative = Some(PredictionBasis::SharpChange {
                    previous_percent,
                    measured_percent: mean,
                });
                history.calibrate_from = timing.map(|timing| timing.first_unplanned);
            }
            None => {
                history.quantum_means.push_front(mean);
                history.quantum_means.truncate(EQUATION_1_HISTORY);
            }
        }
        Ok(self.predict(job))
    }

    /// The prediction for `job`'s next quantum; 100 % for a job never
    /// reported.
    pub fn predict(&self, job: JobId) -> Prediction {
        let Some(history) = self.jobs.get(&job) else {
            return Prediction {
                percent: FULL_UTILIZATION_PERCENT,
                basis: PredictionBasis::NewJob,
            };
        };
        match history.speculative {
            Some(basis) => Prediction {
                percent: FULL_UTILIZATION_PERCENT,
                basis,
            },
            None => {
                let means: Vec<f64> = history.quantum_means.iter().copied().collect();
                Prediction {
                    percent: equation_1(&means),
                    basis: PredictionBasis::History {
                        quanta: means.len(),
                    },
                }
            }
        }
    }

    /// Quantum numbers start again (a restarted coordinator): a pending
    /// calibration takes the next report, as without timing.
    pub fn forget_quantum_numbers(&mut self) {
        for history in self.jobs.values_mut() {
            history.calibrate_from = None;
        }
    }

    /// Drops everything known about a job that left the system.
    pub fn forget(&mut self, job: JobId) {
        self.jobs.remove(&job);
    }
}

fn is_sharp(config: PredictorConfig, previous: f64, measured: f64) -> bool {
    let change = measured - previous;
    match config.sharp_change_direction {
        SharpChangeDirection::Both => change.abs() > config.sharp_change_points,
        SharpChangeDirection::Increase => change > config.sharp_change_points,
    }
}
