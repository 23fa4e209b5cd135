//! `cargo xtask build [--debug]`.

use std::process::ExitCode;

use anyhow::Result;
use xtask::{
    cargo_build::{self, Profile},
    progress::say,
    setup,
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build the debug profile instead of release.
    #[arg(long)]
    debug: bool,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    let profile = if args.debug {
        Profile::Debug
    } else {
        Profile::Release
    };
    let tools = setup::all(workspace)?;
    let binaries = cargo_build::build_binaries(workspace, &tools, profile)?;
    say("build", format!("{} binaries:", binaries.len()));
    for binary in binaries {
        println!("{}", binary.display());
    }
    Ok(ExitCode::SUCCESS)
}
