//! `cargo xtask test [--quick]`.

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
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    test_pipeline::run(workspace, TestOptions { quick: args.quick })?;
    Ok(ExitCode::SUCCESS)
}
