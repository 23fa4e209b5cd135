//! The CLI's BE/RT flags (`cosched-sim --global 2dcs-tdm …`) and the sweep
//! they ask for: every arrival rate under every admission rule.

use cosched_policy::classes::{AdmissionRule, FairnessRatio};

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
    /// Admission rules, comma-separated: none, deterministic.
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

fn parse_admission(text: &str) -> Result<AdmissionRule, String> {
    match text {
        "none" => Ok(AdmissionRule::None),
        "deterministic" => Ok(AdmissionRule::Deterministic),
        other => Err(format!(
            "admission {other:?}: expected none or deterministic"
        )),
    }
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
        be_work_mean_ns: ms(args.be_work_ms),
        seed,
        ..ClassSimParams::default()
    };
    let mut out = Vec::new();
    for rate in args.arrival_rate.split(',').map(str::trim) {
        let rate: f64 = rate
            .parse()
            .map_err(|e| format!("arrival rate {rate:?}: {e}"))?;
        for rule in args.admission.split(',').map(str::trim) {
            let params = ClassSimParams {
                arrival_rate_per_s: rate,
                admission: parse_admission(rule)?,
                ..base.clone()
            };
            out.push(simulate_classes(&params));
        }
    }
    Ok(out)
}
