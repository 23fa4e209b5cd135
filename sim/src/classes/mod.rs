//! BE and RT jobs together under the BE/RT schemes of `cosched_policy::classes`
//! (issue 15 item 1: "the BE/RT schemes once they exist").
//!
//! A class-level model, coarser than [`crate::model`]: each node is one CPU
//! whose time goes, instant by instant, to the class and the RT task the
//! policy crate decides; RT processes produce frames of declared work τ,
//! BE processes compute their work under processor sharing. Admission,
//! placement, the division clock, the per-node class decision, EDF and the
//! frame accounting are the policy crate's own (`AdmissionRule::admit`,
//! `allocate_be`, `DivisionClock`, `tdm::decide`, `PsNode`, `EdfOrder`,
//! `ProcessFrames`; under 1GS `OneLevelGang` and `OneLevelGangRotor`): the
//! simulator only supplies time and work.
//!
//! - [`params`]: the scheme, cluster and job stream.
//! - [`stream`]: BE and RT jobs from a seed.
//! - [`run`]: the run, 2DCS-TDM or 2DCS-PS.
//! - [`one_gs`]: the run under 1GS (`OneLevelGang` and its rotor).
//! - [`report`]: `bench rt`'s rows (BE response and throughput, RT miss and
//!   rejection ratios) and the CPU split between the classes.

pub mod cli;
pub mod one_gs;
pub mod params;
pub mod report;
pub mod run;
pub mod stream;

pub use params::{ClassScheme, ClassSimParams};
pub use report::ClassReport;
pub use run::{simulate_class_jobs, simulate_classes};
pub use stream::{ClassJob, ClassJobKind, class_stream};
