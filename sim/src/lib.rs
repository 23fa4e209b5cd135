//! cosched-sim: a deterministic discrete-event cluster simulator on the
//! three-phase executive of seed 003, with the node, network and workload
//! models of ClusterSchedSim (seed 000), driving the very `cosched-policy`
//! code the agent and the coordinator run.
//!
//! - [`executive`]: the A/B/C executive.
//! - [`model`]: nodes, CPUs, the local scheduler, tasks, network, front end.
//! - [`workload`]: jobs, a statistical stream, SWF traces.
//! - [`run`]: one simulation from configuration to [`metrics::Report`].

pub mod classes;
pub mod config;
pub mod dedicated;
pub mod executive;
pub mod metrics;
pub mod model;
pub mod progress;
pub mod rng;
pub mod run;
pub mod svg;
pub mod workload;

pub use config::{ClusterParams, GlobalMode, SchedParams, SimConfig};
pub use metrics::Report;
pub use run::{JobProgress, RunOptions, progress_over, simulate};
