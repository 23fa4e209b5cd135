//! The CLI's BE/RT flags (`cosched-sim --global 2dcs-tdm …`) and the sweep
//! they ask for: every arrival rate under every admission rule.

use cosched_policy::classes::{
    AdmissionRule, FairnessRatio, ProbabilisticParams, StatisticalParams,
};
use cosched_policy::global::QueuePolicy;

use super::params::{ClassScheme, ClassSimParams};
use super::report::ClassReport;
use super::run::simulate_classes;

/// Flags of the BE/RT schemes; `--nodes`, `--jobs`, `--seed` and
/// `--max-size` are the CLI's own.
#[derive(Debug, Clone, clap::Args)]
pub struct ClassArgs {
    /// Share of RT jobs in the stream (the bench's 9:1 mix is 0.9).
    #[arg(long, default_value_t = 0.5)]
    pub rt_share: f64,
    /// Jobs per second, comma-separated: one run per rate.
    #[arg(long, default_value = "4")]
    pub arrival_rate: String,
    /// Admission rules, comma-separated: none, deterministic, statistical,
    /// probabilistic (the coordinator's `classes.admission`; 1GS uses its
    /// deterministic rule for all but none, as the coordinator does).
    #[arg(long, default_value = "deterministic")]
    pub admission: String,
    /// x:y, RT to BE.
    #[arg(long, default_value = "1:1")]
    pub ratio: String,
    /// Δ of 2DCS-TDM.
    #[arg(long, default_value_t = 10.0)]
    pub division_ms: f64,
    /// 2DCS-PS's quantum.
    #[arg(long, default_value_t = 4.0)]
    pub ps_quantum_ms: f64,
    /// d of the RT jobs.
    #[arg(long, default_value_t = 20.0)]
    pub rt_period_ms: f64,
    /// b of the RT jobs.
    #[arg(long, default_value_t = 2)]
    pub rt_frames: u32,
    /// τ of the RT jobs: uniform in [min, max].
    #[arg(long, default_value_t = 2.0)]
    pub rt_work_min_ms: f64,
    #[arg(long, default_value_t = 8.0)]
    pub rt_work_max_ms: f64,
    /// Windows an admitted RT job runs.
    #[arg(long, default_value_t = 50)]
    pub rt_windows: u64,
    /// Statistical rule: utilization bound per node, percent of one CPU
    /// (`classes.statistical_bound_percent`).
    #[arg(long, default_value_t = 100)]
    pub statistical_bound_percent: u64,
    /// Statistical and probabilistic rules: frames a measurement must cover
    /// (`classes.statistical_min_frames`).
    #[arg(long, default_value_t = StatisticalParams::default().min_frames)]
    pub statistical_min_frames: u64,
    /// Probabilistic rule: target overload probability, ppm
    /// (`classes.probabilistic_overload_ppm`).
    #[arg(long, default_value_t = ProbabilisticParams::default().overload_ppm)]
    pub probabilistic_overload_ppm: u32,
    /// Probabilistic rule: measured processes needed before they estimate
    /// the others (`classes.probabilistic_min_population`).
    #[arg(long, default_value_t = ProbabilisticParams::default().min_population)]
    pub probabilistic_min_population: usize,
    /// What an RT job really uses per frame: uniform in [this, 1] × τ per
    /// job (what the measured rules can exploit).
    #[arg(long, default_value_t = 1.0)]
    pub rt_use_min: f64,
    /// 1GS: M, rows of its matrix (`classes.one_gs_rows`).
    #[arg(long, default_value_t = 4)]
    pub one_gs_rows: usize,
    /// 1GS: one slot (the coordinator's `slice_ms`).
    #[arg(long, default_value_t = 10.0)]
    pub one_gs_slot_ms: f64,
    /// 1GS: w, an RT job's longest wait for its rows (`classes.rt_max_wait_ms`).
    #[arg(long, default_value_t = 1000.0)]
    pub rt_max_wait_ms: f64,
    /// 1GS: the order waiting jobs are retried in, strict-fcfs or backfill
    /// (the coordinator's `queue`).
    #[arg(long, default_value = "strict-fcfs")]
    pub one_gs_queue: String,
    /// Mean work of a BE process.
    #[arg(long, default_value_t = 1000.0)]
    pub be_work_ms: f64,
}

fn ms(v: f64) -> u64 {
    (v * 1e6).round() as u64
}

fn parse_ratio(text: &str) -> Result<FairnessRatio, String> {
    let (x, y) = text
        .split_once(':')
        .ok_or_else(|| format!("ratio {text:?}: expected x:y"))?;
    let part = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|e| format!("ratio {text:?}: {e}"))
    };
    FairnessRatio::new(part(x)?, part(y)?).map_err(|e| e.to_string())
}

/// The rule named `text`, with the parameters the coordinator's
/// `ClassesConfig::rule` builds from the same keys.
fn parse_admission(text: &str, args: &ClassArgs) -> Result<AdmissionRule, String> {
    match text {
        "none" => Ok(AdmissionRule::None),
        "deterministic" => Ok(AdmissionRule::Deterministic),
        "statistical" => Ok(AdmissionRule::Statistical(StatisticalParams {
            bound_ppm: args.statistical_bound_percent * 10_000,
            min_frames: args.statistical_min_frames,
        })),
        "probabilistic" => Ok(AdmissionRule::Probabilistic(ProbabilisticParams {
            overload_ppm: args.probabilistic_overload_ppm,
            min_frames: args.statistical_min_frames,
            min_population: args.probabilistic_min_population,
        })),
        other => Err(format!(
            "admission {other:?}: expected none, deterministic, statistical or probabilistic"
        )),
    }
}

/// Refuses a 1GS shape the coordinator would refuse, and RT windows that
/// are not a multiple of the cycle (under admission control 1GS refuses
/// such jobs: their windows would drift against the rows).
fn check_one_gs(base: &ClassSimParams) -> Result<(), String> {
    let config = super::one_gs::one_gs_config(base);
    config.validate().map_err(|e| e.to_string())?;
    let window_ns = base.rt_period_ns * u64::from(base.rt_frames);
    if !window_ns.is_multiple_of(config.cycle_ns()) {
        return Err(format!(
            "1gs: the RT window b·d = {} ms is not a multiple of the cycle M·slot = {} ms; \
             under admission control 1GS refuses such jobs",
            window_ns / 1_000_000,
            config.cycle_ns() / 1_000_000
        ));
    }
    Ok(())
}

/// One run per (arrival rate, admission rule), in that order.
pub fn sweep(
    scheme: ClassScheme,
    args: &ClassArgs,
    nodes: usize,
    jobs: usize,
    max_size: usize,
    seed: u64,
) -> Result<Vec<ClassReport>, String> {
    let base = ClassSimParams {
        scheme,
        nodes,
        ratio: parse_ratio(&args.ratio)?,
        division_ns: ms(args.division_ms),
        ps_quantum_ns: ms(args.ps_quantum_ms),
        jobs,
        rt_share: args.rt_share,
        max_size,
        rt_period_ns: ms(args.rt_period_ms),
        rt_frames: args.rt_frames,
        rt_work_min_ns: ms(args.rt_work_min_ms),
        rt_work_max_ns: ms(args.rt_work_max_ms),
        rt_windows: args.rt_windows,
        rt_use_min: args.rt_use_min,
        one_gs_rows: args.one_gs_rows,
        one_gs_slot_ns: ms(args.one_gs_slot_ms),
        rt_max_wait_ns: ms(args.rt_max_wait_ms),
        one_gs_queue: match args.one_gs_queue.as_str() {
            "strict-fcfs" => QueuePolicy::StrictFcfs,
            "backfill" => QueuePolicy::Backfill,
            other => {
                return Err(format!(
                    "one-gs-queue {other:?}: expected strict-fcfs or backfill"
                ));
            }
        },
        be_work_mean_ns: ms(args.be_work_ms),
        seed,
        ..ClassSimParams::default()
    };
    if scheme == ClassScheme::OneLevelGang {
        check_one_gs(&base)?;
    }
    let mut out = Vec::new();
    for rate in args.arrival_rate.split(',').map(str::trim) {
        let rate: f64 = rate
            .parse()
            .map_err(|e| format!("arrival rate {rate:?}: {e}"))?;
        for rule in args.admission.split(',').map(str::trim) {
            let params = ClassSimParams {
                arrival_rate_per_s: rate,
                admission: parse_admission(rule, args)?,
                ..base.clone()
            };
            out.push(simulate_classes(&params));
        }
    }
    Ok(out)
}
