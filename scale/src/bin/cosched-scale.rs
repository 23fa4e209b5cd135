//! `cosched-scale`: runs the scale scenario against a real coordinator
//! binary and writes its JSON report (`cargo xtask bench scale` builds and
//! runs it).
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use cosched_scale::scenario::{self, ScenarioConfig};

#[derive(Parser)]
#[command(about = "the real cosched coordinator driving many stand-in agents over loopback")]
struct Args {
    /// The `cosched-coordinator` binary to run.
    #[arg(long)]
    coordinator: PathBuf,
    /// Stand-in agents (= the coordinator's nodes, at most 1024).
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    #[arg(long, default_value_t = 10)]
    slice_ms: u64,
    /// The coordinator's `switch_lead_us` (0: its default, min(slice/2, 5 ms);
    /// at most half a slice).
    #[arg(long, default_value_t = 0)]
    switch_lead_us: u64,
    /// The coordinator sends a `SwitchSlice` per slice to every agent (its
    /// `schedule_ahead = false`: the protocol before 1.5) instead of
    /// schedules announced ahead.
    #[arg(long)]
    per_switch: bool,
    /// The coordinator's global policy (`gang`, `paired-gang`, `fcs`, ...).
    #[arg(long, default_value = "gang")]
    policy: String,
    /// The coordinator's `paired_schedule_ahead = true`: paired gang's
    /// slices announced ahead too (ignored with `--per-switch`).
    #[arg(long)]
    paired_ahead: bool,
    /// The coordinator's `one_gs_schedule_ahead = true`: 1GS's slots
    /// (`--policy one-level-gang`) announced ahead too (ignored with
    /// `--per-switch`).
    #[arg(long)]
    one_gs_ahead: bool,
    /// Stand-ins report every job they run at this CPU utilisation (%) with
    /// their switch reports (paired gang pairs rows whose utilisations add
    /// up to < 99 %); none by default.
    #[arg(long)]
    utilisation_percent: Option<f64>,
    #[arg(long, default_value_t = 4)]
    max_rows: usize,
    /// Jobs submitted; each spans `--job-nodes` nodes (default: all).
    #[arg(long, default_value_t = 4)]
    jobs: usize,
    #[arg(long)]
    job_nodes: Option<usize>,
    /// The coordinator's and the agents' heartbeat period and timeout.
    #[arg(long, default_value_t = 500)]
    heartbeat_interval_ms: u64,
    #[arg(long, default_value_t = 3000)]
    heartbeat_timeout_ms: u64,
    #[arg(long, default_value_t = 3.0)]
    warmup_s: f64,
    /// The steady measurement window.
    #[arg(long, default_value_t = 15.0)]
    window_s: f64,
    /// Links broken at once (0: no drop phase).
    #[arg(long, default_value_t = 100)]
    drop_agents: usize,
    #[arg(long, default_value_t = 120.0)]
    phase_timeout_s: f64,
    /// Pin the coordinator to CPU A and the stand-ins to CPU B ("A,B");
    /// "none" to leave both to the scheduler.
    #[arg(long, default_value = "0,1")]
    pin: String,
    #[arg(long, default_value_t = 1)]
    worker_threads: usize,
    /// SCHED_FIFO priority of the stand-ins' switch timer thread, as the
    /// real agent's (`agent_priority`, default 50); 0: SCHED_OTHER.
    #[arg(long, default_value_t = 50)]
    timer_fifo_priority: u32,
    /// COSCHED_LOG of the coordinator.
    #[arg(long, default_value = "info")]
    coordinator_log: String,
    /// Copy the coordinator's log here when it stops.
    #[arg(long)]
    keep_log: Option<PathBuf>,
    /// Where to write the JSON report.
    #[arg(long)]
    output: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let pin = match args.pin.as_str() {
        "none" => None,
        pair => {
            let (a, b) = pair.split_once(',').context("--pin A,B or none")?;
            Some((a.trim().parse()?, b.trim().parse()?))
        }
    };
    let config = ScenarioConfig {
        coordinator_bin: args.coordinator,
        agents: args.agents,
        slice_ms: args.slice_ms,
        switch_lead_us: args.switch_lead_us,
        schedule_ahead: !args.per_switch,
        policy: args.policy,
        paired_schedule_ahead: args.paired_ahead && !args.per_switch,
        one_gs_schedule_ahead: args.one_gs_ahead && !args.per_switch,
        utilisation_percent: args.utilisation_percent,
        max_rows: args.max_rows,
        jobs: args.jobs,
        job_nodes: args.job_nodes.unwrap_or(args.agents),
        heartbeat_interval_ms: args.heartbeat_interval_ms,
        heartbeat_timeout_ms: args.heartbeat_timeout_ms,
        reconnect_min_ms: 200,
        reconnect_max_ms: 2000,
        warmup_s: args.warmup_s,
        window_s: args.window_s,
        drop_agents: args.drop_agents,
        phase_timeout_s: args.phase_timeout_s,
        pin,
        worker_threads: args.worker_threads,
        timer_fifo_priority: args.timer_fifo_priority,
        coordinator_log: args.coordinator_log,
        keep_log: args.keep_log,
    };
    let report = scenario::run(config, |line| eprintln!("scale: {line}"))?;
    let text = serde_json::to_string_pretty(&report)?;
    match &args.output {
        Some(path) => {
            scenario::write_report(&report, path)?;
            eprintln!("scale: report written to {}", path.display());
        }
        None => println!("{text}"),
    }
    Ok(())
}
