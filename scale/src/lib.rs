//! The coordinator at scale: the real `cosched-coordinator` binary driving
//! many stand-in agents that speak the real authenticated wire protocol
//! over loopback (the proto crate's codec and sessions), without eBPF or
//! `sched_setattr`.
//!
//! - [`standin`]: one agent's link, as the real agent's (handshake,
//!   register, inventory, heartbeats, program checks, launches, cancels,
//!   reaps, slice switches at their instant).
//! - [`timer`]: the stand-ins' shared precise switch timer.
//! - [`fleet`]: many stand-ins in one tokio runtime.
//! - [`stats`]: what the stand-ins saw (switch instants, margins, round trips).
//! - [`scenario`]: registration, jobs, steady slices, links broken at once;
//!   a JSON [`scenario::Report`].
//! - [`admin`], [`procfs`]: the coordinator's admin socket and metrics;
//!   CPU time, memory and descriptors from /proc.
pub mod admin;
pub mod fleet;
pub mod procfs;
pub mod scenario;
pub mod standin;
pub mod stats;
pub mod timer;

/// Why the harness could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    #[error("{0}")]
    Msg(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}
