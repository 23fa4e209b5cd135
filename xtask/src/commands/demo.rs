//! `cargo xtask demo [--json PATH]`.
use std::{path::PathBuf, process::ExitCode};

use anyhow::Result;
use xtask::{
    bench::demo::{self, DemoOptions},
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Measured seconds of each run.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// The agents' local policy (local = plain Linux).
    #[arg(long, default_value = "local")]
    policy: String,
    /// CPU time computed per iteration, in microseconds (fine grain: ~20).
    #[arg(long, default_value_t = 20)]
    compute_us: u64,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    demo::run(
        workspace,
        &DemoOptions {
            policy: args.policy,
            duration_s: args.duration,
            compute_us: args.compute_us,
            json: args.json,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
