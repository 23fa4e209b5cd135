//! `cargo xtask demo [--json PATH] [--svg PATH] [--timeline DIR]`.
use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Result;
use xtask::{
    bench::{
        demo::{self, DemoOptions},
        gang::{DEFAULT_BEST_LOCAL, timeline::Capture},
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
    /// Where each column's timeline (which job held each node's CPU, the
    /// agents' boosts and demotions, the coordinator's slices) goes as
    /// `timeline-<column>.svg` and `.json` (default: `<target>/cosched-demo`).
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// The window each timeline covers, ms (from the middle of the run).
    #[arg(long, default_value_t = 100)]
    timeline_ms: u64,
    /// Record no timeline.
    #[arg(long)]
    no_timeline: bool,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    let timeline = if args.no_timeline {
        None
    } else {
        let dir = match args.timeline {
            Some(dir) => dir,
            None => workspace.profile_dir("cosched-demo")?,
        };
        Some(Capture {
            dir,
            window: Duration::from_millis(args.timeline_ms.max(1)),
            delay: Duration::from_secs_f64(args.duration / 2.0),
        })
    };
    let rows = demo::run(
        workspace,
        &DemoOptions {
            best_local: args.best_local,
            duration_s: args.duration,
            reps: args.reps,
            json: args.json,
            svg: args.svg,
            timeline,
        },
    )?;
    Ok(if rows.iter().all(|r| r.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
