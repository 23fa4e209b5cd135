//! Benchmarks and the demo, run on this machine: jobs on the local cluster,
//! eBPF overhead, the idle agent's cost, local policies against plain
//! Linux, gang scheduling.
pub mod bench_cgroup;
pub mod common;
pub mod coordinator;
pub mod demo;
pub mod gang;
pub mod idle;
pub mod jobs;
pub mod local;
pub mod mpi;
pub mod outside_load;
pub mod overhead;
pub mod overhead_syscalls;
pub mod rt;
pub mod solo_agent;
