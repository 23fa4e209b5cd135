//! `cosched-synth`: a synthetic parallel job like the coscheduling papers'
//! workloads. One process is one rank; N ranks loop
//! {compute; optional I/O; send to peers by a pattern; receive from peers},
//! receiving by spinning (user-level messaging) or blocking, and each rank
//! reports iterations per second, wait time and message counts as JSON.
//! In real-time mode (`--rt`, [`rt`]) the ranks form a pipeline that rank 0
//! feeds a frame every period; each rank reports its frames through the
//! `cosched-rt` client library, as a real RT program would, and counts its
//! own frames per window and deadline misses.
//!
//! The pure parts (patterns, header codec, stop agreement, per-rank engine,
//! configuration) are separate modules so they can be tested without
//! sockets; [`runtime`] and [`transport`] do the real I/O.

pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod header;
pub mod inbox;
pub mod modes;
pub mod pattern;
pub mod report;
pub mod rt;
pub mod runtime;
pub mod stop;
pub mod transport;

#[cfg(test)]
mod simulation_tests;

pub use cli::Cli;
pub use config::Config;
pub use report::RunReport;
pub use runtime::{RunError, Session};
