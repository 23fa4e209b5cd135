//! `cargo xtask setup`.

use std::process::ExitCode;

use anyhow::Result;
use xtask::{progress::say, setup, workspace::Workspace};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(workspace: &Workspace, Args {}: Args) -> Result<ExitCode> {
    let tools = setup::all(workspace)?;
    say(
        "setup",
        format!(
            "done; cargo finds bpf-linker through COSCHED_BPF_LINKER_DIR={}",
            tools.bpf_linker_dir.display()
        ),
    );
    Ok(ExitCode::SUCCESS)
}
