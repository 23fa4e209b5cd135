//! Best-effort (BE) and real-time (RT) jobs on one node (the BE/RT
//! coscheduling paper §4.2–§4.3; the algorithms are in
//! `cosched_policy::classes`).
//!
//! - [`config`]: the `[classes]` table.
//! - [`rt_job`]: an RT job's frame accounting here, per process.
//! - [`readiness`]: whether a task is ready, from its counters.
//! - [`overlay`]: which class runs now and what each task gets.
//!
//! The engine owns them (`engine/rt.rs`: counting frames;
//! `engine/classes.rs`: the overlay over the local policy).
pub mod config;
pub mod overlay;
pub mod readiness;
pub mod rt_job;

pub use config::{ClassesConfig, EdfKind, LocalClassMode};
pub use overlay::{BeLevel, BeUnderRt, ClassMode, ClassOverlay, CoordinatorClasses, RtLevel};
pub use rt_job::{RtJob, RtProcess};
