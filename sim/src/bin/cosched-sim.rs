//! `cosched-sim`: simulates a job stream on a cluster under the cosched
//! policies and writes seed 000's metrics as JSON (and an SVG).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Parser;
use cosched_policy::local::PolicyKind;
use cosched_sim::classes::ClassScheme;
use cosched_sim::classes::cli::{ClassArgs, sweep};
use cosched_sim::config::{GlobalMode, SimConfig};
use cosched_sim::workload::{
    JobShape, JobSpec, Pattern, RecvMode, StreamParams, generate, parse_swf, shape_jobs,
};
use cosched_sim::{RunOptions, simulate, svg};

#[derive(Debug, Parser)]
#[command(
    name = "cosched-sim",
    about = "Deterministic cluster simulator running the cosched policies"
)]
struct Cli {
    /// TOML file with `[cluster]` and `[sched]` (`[sched.local]` is the
    /// agent's `[policy]` section); flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    nodes: Option<u32>,
    #[arg(long)]
    cpus: Option<u32>,
    /// Maximum multiprogramming level (matrix rows).
    #[arg(long)]
    mpl: Option<usize>,
    /// Global policies to compare, comma-separated: local, fcfs, gang,
    /// paired-gang; or one BE/RT scheme, 2dcs-tdm, 2dcs-ps or 1gs (with the BE/RT flags).
    #[arg(long, default_value = "gang")]
    global: String,
    /// Local policies to compare, comma-separated: local, dcs, sb, sy, pb, pb-sb, dcs-sb, fcs.
    #[arg(long, default_value = "local")]
    local: String,
    /// Gang slice length.
    #[arg(long)]
    slice_ms: Option<f64>,
    /// Time slice of the nodes' local scheduler.
    #[arg(long)]
    quantum_ms: Option<f64>,
    /// Stop tasks outside the gang slice instead of demoting them.
    #[arg(long)]
    stop_inactive: bool,

    /// An SWF trace instead of a generated stream.
    #[arg(long)]
    swf: Option<PathBuf>,
    /// A JSON array of jobs (the `JobSpec` fields) instead of a generated stream.
    #[arg(long, conflicts_with = "swf")]
    jobs_json: Option<PathBuf>,
    /// Use only the first N jobs (of the trace or stream).
    #[arg(long)]
    max_jobs: Option<usize>,
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    #[arg(long, default_value_t = 0.7)]
    load: f64,
    #[arg(long)]
    max_size: Option<u32>,
    #[arg(long, default_value_t = 10.0)]
    min_runtime_s: f64,
    #[arg(long, default_value_t = 1000.0)]
    max_runtime_s: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Compute per iteration of communicating and I/O jobs.
    #[arg(long, default_value_t = 50.0)]
    granularity_ms: f64,
    #[arg(long, default_value_t = 0.6)]
    comm_fraction: f64,
    #[arg(long, default_value_t = 0.2)]
    io_fraction: f64,
    /// Share of an I/O job's iteration spent in I/O (off the CPU).
    #[arg(long, default_value_t = 0.5)]
    io_share: f64,
    /// none, ring, nearest-neighbour, all-to-all, barrier.
    #[arg(long, default_value = "nearest-neighbour")]
    pattern: String,
    /// spin or block.
    #[arg(long, default_value = "spin")]
    recv: String,
    #[arg(long, default_value_t = 4096)]
    message_bytes: u64,
    #[arg(long, default_value_t = 0.1)]
    jitter: f64,

    /// JSON output (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// SVG plot of the slowdown distributions.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Progress line on stderr (default: when stderr is a terminal).
    #[arg(long)]
    progress: Option<bool>,
    /// Include every job's record.
    #[arg(long)]
    job_records: bool,
    /// Report wall time, events/s and peak memory.
    #[arg(long)]
    perf: bool,
    /// Measure like `bench local` / `bench gang` instead: run every job for
    /// this long (together, then each alone) and report iteration rates
    /// and rate slowdowns per job.
    #[arg(long)]
    window_ms: Option<f64>,
    /// Seed of the nodes' tick phases and noise (default: `[cluster] seed`).
    #[arg(long)]
    cluster_seed: Option<u64>,
    #[command(flatten)]
    classes: ClassArgs,
}

/// One configuration's rates over `--window-ms`.
#[derive(Debug, serde::Serialize)]
struct ProgressReport {
    label: String,
    config: SimConfig,
    window_s: f64,
    jobs: Vec<cosched_sim::JobProgress>,
}

fn parse_enum<T: serde::de::DeserializeOwned>(what: &str, value: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(value.to_owned()))
        .with_context(|| format!("unknown {what} {value:?}"))
}

fn base_config(cli: &Cli) -> Result<SimConfig> {
    let mut config = match &cli.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => SimConfig::default(),
    };
    if let Some(n) = cli.nodes {
        config.cluster.nodes = n;
    }
    if let Some(n) = cli.cpus {
        config.cluster.cpus_per_node = n;
    }
    if let Some(n) = cli.mpl {
        config.sched.mpl = n;
    }
    if let Some(ms) = cli.slice_ms {
        config.sched.slice_ns = (ms * 1e6) as u64;
    }
    if let Some(ms) = cli.quantum_ms {
        config.cluster.quantum_ns = (ms * 1e6) as u64;
    }
    config.sched.stop_inactive |= cli.stop_inactive;
    if let Some(seed) = cli.cluster_seed {
        config.cluster.seed = seed;
    }
    Ok(config)
}

fn workload(cli: &Cli, config: &SimConfig) -> Result<Vec<JobSpec>> {
    let shape = JobShape {
        granularity_ns: (cli.granularity_ms * 1e6) as u64,
        comm_fraction: cli.comm_fraction,
        io_fraction: cli.io_fraction,
        io_share: cli.io_share,
        pattern: parse_enum::<Pattern>("pattern", &cli.pattern)?,
        recv: parse_enum::<RecvMode>("receive mode", &cli.recv)?,
        message_bytes: cli.message_bytes,
        compute_jitter: cli.jitter,
    };
    let nodes = config.cluster.nodes;
    let from_json = match &cli.jobs_json {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Some(
                serde_json::from_str::<Vec<JobSpec>>(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            )
        }
        None => None,
    };
    let mut jobs = match &cli.swf {
        _ if from_json.is_some() => from_json.unwrap_or_default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let trace = parse_swf(&text).with_context(|| format!("parsing {}", path.display()))?;
            let first = trace.jobs[0].submit_s;
            let raw: Vec<_> = trace
                .jobs
                .iter()
                .filter(|j| j.processors <= nodes)
                .map(|j| {
                    let at = ((j.submit_s - first) * 1e9) as u64;
                    (j.id, at, j.processors, j.run_s)
                })
                .collect();
            let wide = trace.jobs.len() - raw.len();
            eprintln!(
                "{}: {trace}; {wide} wider than {nodes} nodes left out",
                path.display()
            );
            shape_jobs(&raw, &shape)
        }
        None => {
            let params = StreamParams {
                jobs: cli.jobs,
                nodes,
                load: cli.load,
                max_size: cli.max_size.unwrap_or(nodes),
                min_runtime_s: cli.min_runtime_s,
                max_runtime_s: cli.max_runtime_s,
                seed: cli.seed,
                ..StreamParams::default()
            };
            generate(&params, &shape)
        }
    };
    if let Some(max) = cli.max_jobs {
        jobs.truncate(max);
    }
    if jobs.is_empty() {
        bail!("no job to simulate");
    }
    Ok(jobs)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let base = base_config(&cli)?;
    if let Ok(scheme) = cli.global.parse::<ClassScheme>() {
        let nodes = base.cluster.nodes as usize;
        let max_size = cli.max_size.map_or(nodes, |m| m as usize);
        let reports = sweep(scheme, &cli.classes, nodes, cli.jobs, max_size, cli.seed)
            .map_err(anyhow::Error::msg)?;
        return write_json(&cli, &reports);
    }
    let jobs = workload(&cli, &base)?;
    let progress = cli
        .progress
        .unwrap_or_else(|| std::io::stderr().is_terminal());
    if let Some(ms) = cli.window_ms {
        let window = (ms * 1e6) as u64;
        let mut out = Vec::new();
        for (label, config) in configurations(&cli, &base)? {
            let jobs = cosched_sim::progress_over(&config, &jobs, window)?;
            out.push(ProgressReport {
                label,
                config,
                window_s: window as f64 / 1e9,
                jobs,
            });
        }
        return write_json(&cli, &out);
    }
    let mut reports = Vec::new();
    for (label, config) in configurations(&cli, &base)? {
        if progress {
            eprintln!(
                "{label}: {} jobs on {} nodes",
                jobs.len(),
                config.cluster.nodes
            );
        }
        let options = RunOptions {
            label,
            progress,
            job_records: cli.job_records || cli.svg.is_some(),
            performance: cli.perf,
        };
        reports.push(simulate(&config, jobs.clone(), &options)?);
    }
    if let Some(path) = &cli.svg {
        std::fs::write(path, svg::slowdown_cdf(&reports))
            .with_context(|| format!("writing {}", path.display()))?;
        if !cli.job_records {
            for r in &mut reports {
                r.job_records.clear();
            }
        }
    }
    write_json(&cli, &reports)
}

/// Every (global, local) pair asked for, labelled.
fn configurations(cli: &Cli, base: &SimConfig) -> Result<Vec<(String, SimConfig)>> {
    let mut out = Vec::new();
    for global in cli.global.split(',').map(str::trim) {
        let global: GlobalMode = global.parse().map_err(anyhow::Error::msg)?;
        for local in cli.local.split(',').map(str::trim) {
            let kind: PolicyKind = local.parse()?;
            let mut config = base.clone();
            config.sched.global = global;
            config.sched.local.kind = kind;
            out.push((format!("{}/{}", cli_name(global), kind), config));
        }
    }
    Ok(out)
}

fn write_json<T: serde::Serialize>(cli: &Cli, value: &T) -> Result<()> {
    let json = serde_json::to_string_pretty(value)?;
    match &cli.out {
        Some(path) => std::fs::write(path, json + "\n")
            .with_context(|| format!("writing {}", path.display()))?,
        None => println!("{json}"),
    }
    Ok(())
}

fn cli_name(global: GlobalMode) -> &'static str {
    match global {
        GlobalMode::Local => "local",
        GlobalMode::Fcfs => "fcfs",
        GlobalMode::Gang => "gang",
        GlobalMode::PairedGang => "paired-gang",
    }
}
