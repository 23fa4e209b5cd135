//! cosched scheduling algorithms, pure: no syscalls, no clocks, no I/O.
//!
//! Time is passed in (nanoseconds of CLOCK_MONOTONIC), observations come in as
//! typed events and decisions go out as typed actions, so every algorithm can be
//! driven by scenario tests, by the agent on a real kernel, by the coordinator
//! and by a simulator alike.
//!
//! - [`local`]: per-node policies (local, DCS, SB, SY, PB and combinations, FCS
//!   classification).
//! - [`classes`]: best-effort and real-time jobs together (fairness ratio,
//!   RT specs, 1GS, 2DCS-TDM, 2DCS-PS, EDF, admission).
//! - [`global`]: cluster-wide algorithms (Ousterhout matrix allocation, gang and
//!   paired-gang slicing, clock-offset estimation).
//! - [`driver`]: feeding a local policy from the eBPF side's per-task
//!   counters and reports, as the agent does (and the simulator, with the
//!   same code).
pub mod classes;
pub mod driver;
pub mod global;
pub mod local;
