//! `cargo xtask setup [--slurm]`.

use std::process::ExitCode;

use anyhow::Result;
use xtask::{
    cluster::slurm,
    progress::say,
    setup::{self, apt},
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also install Slurm and munge (slurmctld, slurmd, slurm-client,
    /// munge; ~7 s), which only `cluster up --slurm` needs and installs
    /// itself when missing.
    #[arg(long)]
    slurm: bool,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    let tools = setup::all(workspace)?;
    if args.slurm {
        apt::ensure(slurm::PACKAGES)?;
    }
    say(
        "setup",
        format!(
            "done; cargo finds bpf-linker through COSCHED_BPF_LINKER_DIR={}",
            tools.bpf_linker_dir.display()
        ),
    );
    Ok(ExitCode::SUCCESS)
}
