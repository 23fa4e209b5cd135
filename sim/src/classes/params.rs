//! What a class-level run simulates.

use cosched_policy::classes::{AdmissionRule, FairnessRatio};
use serde::{Deserialize, Serialize};

/// The BE/RT scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClassScheme {
    /// 2DCS-TDM: a global division clock, RT then BE in x:y of every Δ,
    /// each class lending its division when it has nothing to run.
    TwoDcsTdm,
    /// 2DCS-PS: each node alone picks the class by virtual time (x:y
    /// proportional share), no global clock.
    TwoDcsPs,
}

impl std::str::FromStr for ClassScheme {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "2dcs-tdm" => Ok(Self::TwoDcsTdm),
            "2dcs-ps" => Ok(Self::TwoDcsPs),
            other => Err(format!(
                "unknown BE/RT scheme {other:?} (expected 2dcs-tdm or 2dcs-ps; 1gs is not simulated yet)"
            )),
        }
    }
}

/// The cluster, the scheme's parameters and the job stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassSimParams {
    pub scheme: ClassScheme,
    pub nodes: usize,
    /// x:y, RT to BE.
    pub ratio: FairnessRatio,
    /// Δ, the division period (2DCS-TDM).
    pub division_ns: u64,
    /// 2DCS-PS: a node with both classes ready looks again after this long
    /// (a scheduler quantum) if nothing else happens first.
    pub ps_quantum_ns: u64,
    pub admission: AdmissionRule,
    /// Jobs per second (BE and RT together, Poisson).
    pub arrival_rate_per_s: f64,
    pub jobs: usize,
    /// Share of the stream that is RT (the bench's 9:1 is 0.9).
    pub rt_share: f64,
    /// Processes of a job: uniform in 1..=max_size (at most `nodes`).
    pub max_size: usize,
    /// d, b and τ of the RT jobs (τ drawn uniform in [work_min, work_max]).
    pub rt_period_ns: u64,
    pub rt_frames: u32,
    pub rt_work_min_ns: u64,
    pub rt_work_max_ns: u64,
    /// How many windows an admitted RT job runs before it leaves.
    pub rt_windows: u64,
    /// A BE process's work: exponential with this mean.
    pub be_work_mean_ns: u64,
    pub seed: u64,
}

impl Default for ClassSimParams {
    fn default() -> Self {
        Self {
            scheme: ClassScheme::TwoDcsTdm,
            nodes: 16,
            ratio: FairnessRatio { rt: 1, be: 1 },
            division_ns: 10_000_000,
            ps_quantum_ns: 4_000_000,
            admission: AdmissionRule::Deterministic,
            arrival_rate_per_s: 4.0,
            jobs: 200,
            rt_share: 0.5,
            max_size: 4,
            rt_period_ns: 20_000_000,
            rt_frames: 2,
            rt_work_min_ns: 2_000_000,
            rt_work_max_ns: 8_000_000,
            rt_windows: 50,
            be_work_mean_ns: 1_000_000_000,
            seed: 1,
        }
    }
}
