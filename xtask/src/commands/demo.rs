//! `cargo xtask demo [--json PATH] [--svg PATH]`.
use std::{path::PathBuf, process::ExitCode};

use anyhow::Result;
use xtask::{
    bench::{
        demo::{self, DemoOptions},
        gang::DEFAULT_BEST_LOCAL,
    },
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also draw the slowdowns as SVG here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Measured seconds of each run.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Runs per column (the table shows medians).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// The local policy of the "best local" column.
    #[arg(long, alias = "policy", default_value = DEFAULT_BEST_LOCAL)]
    best_local: String,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    let rows = demo::run(
        workspace,
        &DemoOptions {
            best_local: args.best_local,
            duration_s: args.duration,
            reps: args.reps,
            json: args.json,
            svg: args.svg,
        },
    )?;
    Ok(if rows.iter().all(|r| r.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
