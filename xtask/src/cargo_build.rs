//! `cargo xtask build`: the workspace's binaries, with the eBPF object inside
//! the agent (which needs the bpf-linker that setup provides).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::{process, progress::say, setup::BuildTools, workspace::Workspace};

/// Which cargo profile to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Release,
    Debug,
}

impl Profile {
    /// The directory name under the target dir.
    pub fn dir_name(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Debug => "debug",
        }
    }
}

/// A `cargo` command that finds setup's bpf-linker (the agent's build script
/// reads `COSCHED_BPF_LINKER_DIR`).
pub fn cargo(workspace: &Workspace, tools: &BuildTools) -> Command {
    let mut command = workspace.cargo();
    command.env("COSCHED_BPF_LINKER_DIR", &tools.bpf_linker_dir);
    command
}

/// Builds every binary of the workspace and returns the paths of those built.
pub fn build_binaries(
    workspace: &Workspace,
    tools: &BuildTools,
    profile: Profile,
) -> Result<Vec<PathBuf>> {
    let mut command = cargo(workspace, tools);
    command.args(["build", "--workspace", "--bins"]);
    if profile == Profile::Release {
        command.arg("--release");
    }
    say("build", process::describe(&command));
    process::run(&mut command).context("the workspace build failed")?;
    let dir = workspace.profile_dir(profile.dir_name())?;
    Ok(workspace
        .metadata()?
        .binaries
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| path.is_file())
        .collect())
}
