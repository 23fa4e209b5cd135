//! Benchmarks and the demo, run on this machine: jobs on the local cluster,
//! eBPF overhead.
pub mod demo;
pub mod jobs;
pub mod overhead;
