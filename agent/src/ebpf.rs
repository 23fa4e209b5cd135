//! Loading and attaching the eBPF programs.
use anyhow::{Context as _, bail};
use aya::{Ebpf, programs::TracePoint};
use cosched_agent_common::names;

/// The eBPF object built by aya-build (empty when built without bpf-linker).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/cosched-probes"));

pub fn load() -> anyhow::Result<Ebpf> {
    if OBJECT.is_empty() {
        bail!("this agent was built without its eBPF object (bpf-linker was missing); run `cargo xtask setup` and rebuild");
    }
    let mut ebpf = Ebpf::load(OBJECT).context("loading eBPF object")?;
    for (prog, cat, name) in names::TRACEPOINTS {
        let p: &mut TracePoint = ebpf.program_mut(prog).with_context(|| format!("program {prog} missing"))?.try_into()?;
        p.load().with_context(|| format!("loading {prog}"))?;
        p.attach(cat, name).with_context(|| format!("attaching {prog} to {cat}/{name}"))?;
    }
    Ok(ebpf)
}
