//! `cargo xtask bench overhead|...`.
use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context as _, Result};
use clap::Subcommand;
use xtask::{
    bench::overhead,
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
    }
    Ok(ExitCode::SUCCESS)
}
