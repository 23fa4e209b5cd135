//! Where the workspace is and what cargo says about it, so every command works
//! from any current directory and honours `CARGO_TARGET_DIR`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use anyhow::{Context as _, Result, bail};

use crate::process;

/// The cosched workspace this xtask belongs to.
pub struct Workspace {
    root: PathBuf,
    metadata: OnceLock<Metadata>,
}

/// The parts of `cargo metadata` that xtask uses.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// cargo's target directory (`target/` unless overridden).
    pub target_dir: PathBuf,
    /// Names of the binary targets of the workspace's default members (so not
    /// the host stub of the eBPF crate, which only builds for the bpf target).
    pub binaries: Vec<String>,
}

impl Workspace {
    /// Finds the workspace root: xtask always lives in `<root>/xtask`.
    pub fn locate() -> Result<Self> {
        let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = xtask_dir
            .parent()
            .with_context(|| format!("{} has no parent directory", xtask_dir.display()))?;
        if !root.join("Cargo.toml").is_file() || !root.join("rust-toolchain.toml").is_file() {
            bail!(
                "{} does not look like the cosched workspace (no Cargo.toml or rust-toolchain.toml)",
                root.display()
            );
        }
        Ok(Self {
            root: root.to_path_buf(),
            metadata: OnceLock::new(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file that pins the toolchain (read by rustup and by setup).
    pub fn toolchain_file(&self) -> PathBuf {
        self.root.join("rust-toolchain.toml")
    }

    /// A `cargo` command run from the workspace root, so that rustup applies
    /// the pinned toolchain.
    pub fn cargo(&self) -> Command {
        let mut command = Command::new("cargo");
        command.current_dir(&self.root);
        command
    }

    /// A command for a tool of the active toolchain (rustc, ...) run from the root.
    pub fn tool(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.current_dir(&self.root);
        command
    }

    /// `cargo metadata` for the workspace's own packages (asked once).
    pub fn metadata(&self) -> Result<&Metadata> {
        if let Some(metadata) = self.metadata.get() {
            return Ok(metadata);
        }
        let json = process::capture(self.cargo().args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
        ]))?;
        let metadata = parse_metadata(&json)?;
        Ok(self.metadata.get_or_init(|| metadata))
    }

    /// Where binaries of a profile end up (`<target>/release` or `<target>/debug`).
    pub fn profile_dir(&self, profile: &str) -> Result<PathBuf> {
        Ok(self.metadata()?.target_dir.join(profile))
    }
}

fn parse_metadata(json: &str) -> Result<Metadata> {
    let value: serde_json::Value =
        serde_json::from_str(json).context("`cargo metadata` printed invalid JSON")?;
    let target_dir = value["target_directory"]
        .as_str()
        .context("`cargo metadata` has no target_directory")?
        .into();
    let default_members: Option<Vec<&str>> = value["workspace_default_members"]
        .as_array()
        .map(|ids| ids.iter().filter_map(|id| id.as_str()).collect());
    let mut binaries = Vec::new();
    for package in value["packages"].as_array().into_iter().flatten() {
        let id = package["id"].as_str().unwrap_or_default();
        if default_members
            .as_ref()
            .is_some_and(|members| !members.contains(&id))
        {
            continue;
        }
        for target in package["targets"].as_array().into_iter().flatten() {
            let is_bin = target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "bin"));
            if is_bin && let Some(name) = target["name"].as_str() {
                binaries.push(name.to_owned());
            }
        }
    }
    binaries.sort();
    Ok(Metadata {
        target_dir,
        binaries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_lists_binaries_of_default_members() {
        let json = r#"{
            "target_directory": "/w/target",
            "workspace_default_members": ["p1", "p2"],
            "packages": [
                {"id": "p1", "targets": [{"kind": ["lib"], "name": "x"}, {"kind": ["bin"], "name": "b"}]},
                {"id": "p2", "targets": [{"kind": ["custom-build"], "name": "build-script-build"},
                             {"kind": ["bin"], "name": "a"}]},
                {"id": "ebpf", "targets": [{"kind": ["bin"], "name": "probes"}]}
            ]
        }"#;
        let metadata = parse_metadata(json).unwrap();
        assert_eq!(metadata.target_dir, PathBuf::from("/w/target"));
        assert_eq!(metadata.binaries, ["a", "b"]);
    }

    #[test]
    fn locates_this_workspace() {
        let workspace = Workspace::locate().unwrap();
        assert!(workspace.root().join("xtask").is_dir());
    }
}
