//! Benchmarks and the demo, run on this machine: jobs on the local cluster,
//! eBPF overhead, local policies against plain Linux.
pub mod demo;
pub mod jobs;
pub mod local;
pub mod overhead;
