//! `cargo xtask bench overhead|local`.
use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context as _, Result};
use clap::Subcommand;
use xtask::{
    bench::{
        local::{self, LocalOptions, workloads::Workload},
        overhead,
    },
    cargo_build::{self, Profile},
    progress::say,
    setup,
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// ns added per context switch by the eBPF programs (attached vs not,
    /// interleaved in one run).
    Overhead {
        #[arg(long, default_value_t = 7)]
        repetitions: usize,
        #[arg(long, default_value_t = 200_000)]
        round_trips: u64,
        /// CPU the ping-pong runs on.
        #[arg(long, default_value_t = 0)]
        cpu: usize,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Every local policy against plain Linux: per workload and MPL, each
    /// job's slowdown vs its dedicated run, spinning, boosts, reaction
    /// latency, seed-000 metrics and agent CPU (medians over repetitions).
    Local(LocalArgs),
}

#[derive(Debug, clap::Args)]
struct LocalArgs {
    /// Nodes of the cluster; every job has one rank on each.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Multiprogramming levels (jobs per node), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2, 3])]
    mpl: Vec<u32>,
    /// Repetitions per cell; each number is their median.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Measured seconds of each run.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Policies, comma-separated [default: local,dcs,sb,sy,pb,pb-sb,dcs-sb,fcs].
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// Workloads, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    workloads: Vec<Workload>,
    /// Write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a bar chart of slowdown by policy and workload here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Smoke run: 1 repetition of 1 s, MPL 2 only (overrides those flags).
    #[arg(long)]
    quick: bool,
    /// Use the binaries already in target/release instead of building.
    #[arg(long)]
    no_build: bool,
}

impl LocalArgs {
    fn options(self) -> LocalOptions {
        let defaults = LocalOptions::default();
        let options = LocalOptions {
            nodes: self.nodes,
            mpls: self.mpl,
            reps: self.reps,
            duration_s: self.duration,
            policies: if self.policies.is_empty() {
                defaults.policies
            } else {
                self.policies
            },
            workloads: if self.workloads.is_empty() {
                defaults.workloads
            } else {
                self.workloads
            },
            json: self.json,
            svg: self.svg,
            build: !self.no_build,
        };
        if self.quick { options.quick() } else { options }
    }
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    match args.command {
        BenchCommand::Overhead {
            repetitions,
            round_trips,
            cpu,
            json,
        } => {
            let tools = setup::all(workspace)?;
            cargo_build::build_binaries(workspace, &tools, Profile::Release)?;
            let agent = workspace.profile_dir("release")?.join("cosched-agent");
            say(
                "bench",
                format!(
                    "eBPF overhead: {repetitions} x {round_trips} ping-pong round trips per mode on CPU {cpu}"
                ),
            );
            let r = overhead::run(&agent, repetitions, round_trips, cpu)?;
            println!(
                "median ns per context switch: baseline {:.0}, programs attached {:.0} (+{:.0}), task managed {:.0} (+{:.0}); kernel BPF stats: sched_switch {:.0} ns per run",
                r.baseline_ns_per_switch,
                r.attached_ns_per_switch,
                r.added_ns_attached,
                r.managed_ns_per_switch,
                r.added_ns_managed,
                r.kernel_sched_switch_ns_per_run
            );
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&r)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        BenchCommand::Local(args) => {
            let report = local::run(workspace, &args.options())?;
            let failed = report.failed_rows();
            if report.interrupted {
                say("bench", "interrupted: the rows above are what was measured");
                return Ok(ExitCode::from(130));
            }
            if failed > 0 {
                say(
                    "bench",
                    format!(
                        "{failed} of {} rows failed (marked error)",
                        report.rows.len()
                    ),
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
