//! cosched coordinator: the cluster's lightweight master.
//!
//! Layout (pure decisions separate from I/O):
//! - [`config`], [`limits`], [`policy`]: what it runs.
//! - [`core`]: every decision (jobs, matrix, nodes, slices, skew) as a state
//!   machine without I/O, driven by the daemon and unit-tested.
//! - [`persist`]: the state file (atomic replace).
//! - [`net`]: agent connections (wire protocol over TCP).
//! - [`admin`]: the CLI's protocol, its socket server and a blocking client.
//! - [`metrics`]: its Prometheus metrics.
//! - [`daemon`]: the main loop tying them together.
pub mod admin;
pub mod clock;
pub mod config;
pub mod core;
pub mod daemon;
pub mod limits;
pub mod metrics;
pub mod net;
pub mod persist;
pub mod policy;
pub mod priority;
