//! `cargo xtask test [--quick] [--unit]`.

use std::process::ExitCode;

use anyhow::Result;
use xtask::{
    test_pipeline::{self, TestOptions},
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Skip `cargo fmt --check` and clippy.
    #[arg(long)]
    quick: bool,
    /// Only the unit lane: every crate's tests but the root ones, with no
    /// root, apt packages or bpf-linker needed (a developer's machine).
    #[arg(long)]
    unit: bool,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    test_pipeline::run(
        workspace,
        TestOptions {
            quick: args.quick,
            unit: args.unit,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
