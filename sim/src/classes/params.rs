//! What a class-level run simulates.

use cosched_policy::classes::{AdmissionRule, FairnessRatio};
use cosched_policy::global::QueuePolicy;
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
    /// 1GS: one Ousterhout matrix whose M rows split x:y between RT and
    /// BE, every node running one row's jobs per slot (`OneLevelGang` and
    /// its `OneLevelGangRotor`, as the coordinator runs them).
    #[serde(rename = "1gs")]
    OneLevelGang,
}

impl ClassScheme {
    /// The name on the CLI and in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::TwoDcsTdm => "2dcs-tdm",
            Self::TwoDcsPs => "2dcs-ps",
            Self::OneLevelGang => "1gs",
        }
    }
}

impl std::str::FromStr for ClassScheme {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "2dcs-tdm" => Ok(Self::TwoDcsTdm),
            "2dcs-ps" => Ok(Self::TwoDcsPs),
            "1gs" => Ok(Self::OneLevelGang),
            other => Err(format!(
                "unknown BE/RT scheme {other:?} (expected 2dcs-tdm, 2dcs-ps or 1gs)"
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
    /// 1GS: M, the rows of its matrix (`classes.one_gs_rows`).
    pub one_gs_rows: usize,
    /// 1GS: one slot (a slice; no row-switch cost in this model).
    pub one_gs_slot_ns: u64,
    /// 1GS: w, how long an RT job may wait for its rows before it is
    /// evicted (rejected; `classes.rt_max_wait_ms`).
    pub rt_max_wait_ns: u64,
    /// 1GS: the order waiting jobs are retried in (the coordinator's
    /// `queue`, strict FCFS by default).
    pub one_gs_queue: QueuePolicy,
    /// Under 2DCS-TDM and 2DCS-PS the rule RT jobs pass; 1GS, as the
    /// coordinator, has only its deterministic rule (r rows) and uses it
    /// for every rule but `None` (one row per job).
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
    /// What an RT job really uses per frame, as a share of its declared τ:
    /// uniform in [rt_use_min, 1] per job (1: exactly τ). The statistical
    /// and probabilistic rules see it through the measurements the run
    /// feeds the ledger, as agents' frame reports feed the coordinator's.
    pub rt_use_min: f64,
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
            one_gs_rows: 4,
            one_gs_slot_ns: 10_000_000,
            rt_max_wait_ns: 1_000_000_000,
            one_gs_queue: QueuePolicy::StrictFcfs,
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
            rt_use_min: 1.0,
            be_work_mean_ns: 1_000_000_000,
            seed: 1,
        }
    }
}
