//! Builds the eBPF object with aya-build and embeds it into the agent.
//!
//! `cargo check` / `cargo clippy` of userspace must not need bpf-linker, so
//! when it is not installed (or `AYA_BUILD_SKIP=1`) an empty object is written
//! instead and the agent refuses to start with a message naming the fix
//! (`cargo xtask setup`). `cargo xtask build|test|demo` always install it first.
use std::{env, path::PathBuf};

use anyhow::{Context as _, anyhow};

const EBPF_BIN: &str = "cosched-probes";

fn main() -> anyhow::Result<()> {
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=COSCHED_BPF_LINKER_DIR");
    println!("cargo::rerun-if-env-changed=AYA_BUILD_SKIP");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let toolchain = env::var("RUSTUP_TOOLCHAIN").unwrap_or_default();
    // rustup reports e.g. "nightly-2026-06-24-x86_64-unknown-linux-gnu"; `rustup run`
    // accepts that full name.
    let toolchain_name = if toolchain.is_empty() {
        None
    } else {
        Some(toolchain.as_str())
    };

    if let Some(dir) = linker_dir(toolchain_name) {
        // The child cargo that aya-build spawns inherits our environment.
        let path = env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![dir];
        paths.extend(env::split_paths(&path));
        // SAFETY: build scripts are single-threaded at this point.
        unsafe { env::set_var("PATH", env::join_paths(paths)?) };
    }

    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip || which::which("bpf-linker").is_err() {
        println!(
            "cargo::warning=bpf-linker not found (or AYA_BUILD_SKIP set): building the agent \
             without its eBPF object; run `cargo xtask setup` to install bpf-linker"
        );
        std::fs::write(out_dir.join(EBPF_BIN), [])?;
        println!("cargo::rustc-env=COSCHED_EBPF_STUB=1");
        return Ok(());
    }

    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").context("no manifest dir")?)
        .join("../agent-ebpf");
    let root = root
        .to_str()
        .ok_or_else(|| anyhow!("non-UTF-8 path {root:?}"))?;
    let toolchain = match toolchain_name {
        Some(t) => aya_build::Toolchain::Custom(t),
        None => aya_build::Toolchain::Nightly,
    };
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "cosched-agent-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        toolchain,
    )
}

/// Where `cargo xtask setup` installs the bpf-linker built against this
/// toolchain's LLVM: `$COSCHED_BPF_LINKER_DIR` or
/// `~/.cache/cosched/bpf-linker-<toolchain>/bin`.
fn linker_dir(toolchain: Option<&str>) -> Option<PathBuf> {
    if let Some(d) = env::var_os("COSCHED_BPF_LINKER_DIR") {
        return Some(PathBuf::from(d));
    }
    let host = env::var("HOST").ok()?;
    let toolchain = toolchain?;
    let channel = toolchain
        .strip_suffix(&format!("-{host}"))
        .unwrap_or(toolchain);
    let home = env::var_os("HOME")?;
    let dir = PathBuf::from(home)
        .join(".cache/cosched")
        .join(format!("bpf-linker-{channel}"))
        .join("bin");
    dir.join("bpf-linker").exists().then_some(dir)
}
