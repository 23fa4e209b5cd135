//! Build orchestration for cosched: installing what the build and the local
//! cluster need, building the workspace, running the local "one machine as a
//! cluster" setup and the full test pipeline.
//!
//! The binary (`cargo xtask ...`) is a thin command-line layer over this
//! library so that integration tests and later subcommands (demo, bench) can
//! drive the same code, e.g. [`cluster::Cluster::load`] to find the nodes of a
//! running cluster.

pub mod bench;
pub mod cargo_build;
pub mod cluster;
pub mod monitoring;
pub mod mpi;
pub mod process;
pub mod progress;
pub mod setup;
pub mod test_pipeline;
pub mod vm;
pub mod workspace;
