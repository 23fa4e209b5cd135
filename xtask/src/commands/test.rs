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
    /// Skip the VM lane (`vm-test` on the newest kernel, about 3 minutes).
    #[arg(long)]
    no_vm: bool,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    test_pipeline::run(
        workspace,
        TestOptions {
            quick: args.quick,
            unit: args.unit,
            no_vm: args.no_vm,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
