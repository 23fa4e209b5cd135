//! The eBPF programs live in `main.rs` (built for `bpfel-unknown-none` by
//! aya-build from the agent's build.rs). This empty library exists so the agent
//! can name this crate as a build-dependency and be rebuilt when it changes.
#![no_std]
