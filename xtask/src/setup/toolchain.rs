//! The pinned Rust toolchain: aya needs rustc >= 1.98 and bpf-linker must be
//! built against this exact toolchain's LLVM, so a different active toolchain
//! is an error with the fix in the message.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::{process, progress::say, workspace::Workspace};

/// What `rust-toolchain.toml` pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// e.g. `nightly-2026-06-24`.
    pub channel: String,
    pub components: Vec<String>,
}

/// The active toolchain, checked against the pin.
#[derive(Debug, Clone)]
pub struct Toolchain {
    pub channel: String,
    pub sysroot: PathBuf,
    /// `rustc --version`, e.g. `rustc 1.98.0-nightly (f28ac764c 2026-06-23)`.
    pub rustc_version: String,
}

/// Reads the pin from the workspace's `rust-toolchain.toml`.
pub fn pin(workspace: &Workspace) -> Result<Pin> {
    let path = workspace.toolchain_file();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read {}", path.display()))?;
    parse_pin(&text).with_context(|| format!("could not read the pin in {}", path.display()))
}

/// Checks that the active toolchain is the pinned one and has its components.
pub fn check(workspace: &Workspace) -> Result<Toolchain> {
    let pin = pin(workspace)?;
    let fix = format!(
        "run `rustup toolchain install` in {} (it reads rust-toolchain.toml)",
        workspace.root().display()
    );
    let sysroot = process::capture(workspace.tool("rustc").args(["--print", "sysroot"]))
        .with_context(|| format!("rustc of toolchain {} does not run: {fix}", pin.channel))?;
    let sysroot = PathBuf::from(sysroot.trim());
    let active = sysroot
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if active != pin.channel && !active.starts_with(&format!("{}-", pin.channel)) {
        bail!(
            "the active toolchain is {active} but rust-toolchain.toml pins {}: {fix} \
             and do not override it (no `cargo +toolchain`, no RUSTUP_TOOLCHAIN)",
            pin.channel
        );
    }
    let missing: Vec<&str> = pin
        .components
        .iter()
        .map(String::as_str)
        .filter(|component| !component_present(&sysroot, component))
        .collect();
    if !missing.is_empty() {
        bail!(
            "toolchain {} lacks components {}: {fix}",
            pin.channel,
            missing.join(", ")
        );
    }
    let rustc_version = process::capture(workspace.tool("rustc").arg("--version"))?
        .trim()
        .to_owned();
    say(
        "setup",
        format!(
            "toolchain {} ({rustc_version}; {})",
            pin.channel,
            pin.components.join(", ")
        ),
    );
    Ok(Toolchain {
        channel: pin.channel,
        sysroot,
        rustc_version,
    })
}

/// Whether a rustup component is installed in a sysroot, judged by the file
/// it brings; components xtask does not know are assumed present.
fn component_present(sysroot: &Path, component: &str) -> bool {
    let marker = match component {
        "rust-src" => "lib/rustlib/src/rust/library",
        "rustfmt" => "bin/rustfmt",
        "clippy" => "bin/cargo-clippy",
        _ => return true,
    };
    sysroot.join(marker).exists()
}

/// Extracts `channel` and `components` from the `[toolchain]` table; a full
/// TOML parser is not worth a dependency for two keys.
fn parse_pin(text: &str) -> Result<Pin> {
    let mut channel = None;
    let mut components = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "channel" => channel = Some(value.trim_matches('"').to_owned()),
            "components" => {
                components = value
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .split(',')
                    .map(|item| item.trim().trim_matches('"').to_owned())
                    .filter(|item| !item.is_empty())
                    .collect();
            }
            _ => {}
        }
    }
    let channel = channel.context("no `channel = \"...\"` line")?;
    Ok(Pin {
        channel,
        components,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_channel_and_components() {
        let text = "[toolchain]\n# a comment with channel = \"x\"\nchannel = \"nightly-2026-06-24\"\n\
                    components = [\"rust-src\", \"rustfmt\", \"clippy\"]\nprofile = \"minimal\"\n";
        assert_eq!(
            parse_pin(text).unwrap(),
            Pin {
                channel: "nightly-2026-06-24".into(),
                components: vec!["rust-src".into(), "rustfmt".into(), "clippy".into()],
            }
        );
    }

    #[test]
    fn a_missing_channel_is_an_error() {
        assert!(parse_pin("[toolchain]\nprofile = \"minimal\"\n").is_err());
    }
}
