//! Entry of the eBPF object. The programs are in [`probes`]; on the host this
//! binary is an empty stub so that `cargo check --workspace` and clippy work
//! without the bpf target.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
#![cfg_attr(target_arch = "bpf", feature(core_intrinsics))]
#![cfg_attr(target_arch = "bpf", allow(internal_features))]

#[cfg(target_arch = "bpf")]
mod probes;
#[cfg(target_arch = "bpf")]
mod waits;

#[cfg(not(target_arch = "bpf"))]
fn main() {}
