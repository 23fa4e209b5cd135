//! `cargo xtask setup`: installs, idempotently, everything the build and the
//! local cluster need, one line per step. A fresh machine has none of what an
//! earlier session installed, so every build/test command starts here.

pub mod apt;
pub mod bpf_linker;
pub mod toolchain;
pub mod tracefs;

use std::path::PathBuf;

use anyhow::Result;

use crate::workspace::Workspace;

/// What the build needs from setup.
#[derive(Debug, Clone)]
pub struct BuildTools {
    /// The directory holding `bpf-linker`; exported to cargo as
    /// `COSCHED_BPF_LINKER_DIR` so the agent's build script uses this one.
    pub bpf_linker_dir: PathBuf,
}

/// Everything: host packages and tracefs, then the toolchain and bpf-linker.
pub fn all(workspace: &Workspace) -> Result<BuildTools> {
    host()?;
    build_tools(workspace)
}

/// What running agents and clusters needs: system packages and tracefs.
pub fn host() -> Result<()> {
    apt::ensure(apt::RUNTIME_PACKAGES)?;
    tracefs::ensure()
}

/// What building needs: the pinned toolchain and a matching bpf-linker.
pub fn build_tools(workspace: &Workspace) -> Result<BuildTools> {
    let toolchain = toolchain::check(workspace)?;
    let bpf_linker_dir = bpf_linker::ensure(workspace, &toolchain)?;
    Ok(BuildTools { bpf_linker_dir })
}
