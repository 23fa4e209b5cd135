//! bpf-linker, built once per toolchain against that toolchain's own LLVM.
//!
//! The LLVM that rustc emits bitcode with and the one bpf-linker links with
//! must be the same major version, and the toolchain ships its LLVM only as a
//! shared library with a versioned name. So we give bpf-linker's build an
//! LLVM "prefix" made of two symlinks to that library, in a stable directory
//! under `~/.cache` (the built binary keeps an rpath to it, so not /tmp).
//! The agent's build script looks in the same place.

use std::{
    env, fs, io,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use super::toolchain::Toolchain;
use crate::{process, progress::say, workspace::Workspace};

/// The bpf-linker release series known to work with aya 0.16.
const VERSION_REQUIREMENT: &str = "~0.13";

/// `$HOME/.cache/cosched`, shared with the agent's build script.
pub fn cache_dir() -> Result<PathBuf> {
    let home = env::var_os("HOME").context("HOME is not set; it locates ~/.cache/cosched")?;
    Ok(PathBuf::from(home).join(".cache").join("cosched"))
}

/// The directory holding the `bpf-linker` binary for a toolchain channel.
pub fn bin_dir(channel: &str) -> Result<PathBuf> {
    Ok(install_root(channel)?.join("bin"))
}

fn install_root(channel: &str) -> Result<PathBuf> {
    Ok(cache_dir()?.join(format!("bpf-linker-{channel}")))
}

/// Makes sure a working bpf-linker for the toolchain exists and returns its
/// directory; builds it (about a minute) only when the cached one does not run.
pub fn ensure(workspace: &Workspace, toolchain: &Toolchain) -> Result<PathBuf> {
    let bin_dir = bin_dir(&toolchain.channel)?;
    let binary = bin_dir.join("bpf-linker");
    if let Some(version) = installed_version(&binary) {
        say("setup", format!("{version} (cached)"));
        return Ok(bin_dir);
    }
    let llvm = LlvmLibrary::find(&toolchain.sysroot)?;
    let prefix = cache_dir()?.join(format!("llvm-{}", toolchain.channel));
    llvm.link_into(&prefix.join("lib"))?;
    say(
        "setup",
        format!(
            "building bpf-linker {VERSION_REQUIREMENT} against LLVM {} of {} (about a minute)",
            llvm.major, toolchain.channel
        ),
    );
    process::capture(
        workspace
            .cargo()
            .env("LLVM_PREFIX", &prefix)
            .args(["install", "bpf-linker", "--locked", "--force"])
            .args(["--version", VERSION_REQUIREMENT])
            .args(["--no-default-features", "--features"])
            .arg(format!("llvm-{}", llvm.major))
            .arg("--root")
            .arg(install_root(&toolchain.channel)?),
    )
    .context("could not build bpf-linker")?;
    let version = installed_version(&binary).with_context(|| {
        format!(
            "bpf-linker was installed but `{} --version` does not run",
            binary.display()
        )
    })?;
    say("setup", format!("{version} (built)"));
    Ok(bin_dir)
}

/// `bpf-linker --version` (e.g. `bpf-linker 0.13.0`) when the binary runs,
/// which also proves it finds its LLVM.
fn installed_version(binary: &Path) -> Option<String> {
    let version = process::probe(Command::new(binary).arg("--version"))?;
    Some(version.trim().to_owned())
}

/// The toolchain's shared LLVM library, e.g. `libLLVM.so.22.1-rust-1.98.0-nightly`.
struct LlvmLibrary {
    path: PathBuf,
    file_name: String,
    major: u32,
}

impl LlvmLibrary {
    fn find(sysroot: &Path) -> Result<Self> {
        let lib_dir = sysroot.join("lib");
        let entries = fs::read_dir(&lib_dir)
            .with_context(|| format!("could not list {}", lib_dir.display()))?;
        let mut candidates: Vec<String> = entries
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("libLLVM.so."))
            .collect();
        candidates.sort();
        let Some(file_name) = candidates.pop() else {
            bail!(
                "no libLLVM.so.* in {}: the toolchain does not ship LLVM as a shared library",
                lib_dir.display()
            );
        };
        let major = llvm_major(&file_name)
            .with_context(|| format!("cannot read the LLVM version from {file_name}"))?;
        Ok(Self {
            path: lib_dir.join(&file_name),
            file_name,
            major,
        })
    }

    /// Creates (or repairs) `libLLVM.so` and `<real name>` symlinks in `dir`.
    fn link_into(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
        for name in ["libLLVM.so", self.file_name.as_str()] {
            replace_symlink(&self.path, &dir.join(name))?;
        }
        Ok(())
    }
}

fn replace_symlink(target: &Path, link: &Path) -> Result<()> {
    if fs::read_link(link).is_ok_and(|existing| existing == target) {
        return Ok(());
    }
    match fs::remove_file(link) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("could not remove {}", link.display()));
        }
    }
    symlink(target, link)
        .with_context(|| format!("could not link {} -> {}", link.display(), target.display()))
}

/// `libLLVM.so.22.1-rust-1.98.0-nightly` -> 22.
fn llvm_major(file_name: &str) -> Option<u32> {
    let version = file_name.strip_prefix("libLLVM.so.")?;
    let digits: String = version.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_llvm_major_version_from_the_library_name() {
        assert_eq!(llvm_major("libLLVM.so.22.1-rust-1.98.0-nightly"), Some(22));
        assert_eq!(llvm_major("libLLVM.so.19"), Some(19));
        assert_eq!(llvm_major("libLLVM-22-rust-1.98.0-nightly.so"), None);
    }
}
