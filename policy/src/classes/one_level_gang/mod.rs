//! One-level gang scheduling (1GS, the BE/RT coscheduling paper §4.1 and
//! §4.4): the Ousterhout matrix with its M rows split between the RT and BE
//! classes in the fairness ratio x:y.
//!
//! - [`OneLevelGangConfig`], [`RowSplit`]: p nodes, M rows, x:y, quantum Q
//!   and row-switch cost, admission on or off, queue order.
//! - [`OneLevelGang`]: the matrix and the two arrival queues. `arrive` and
//!   `depart` run the whole of §4.1 (evict expired RT waits, cleanse
//!   replicas, allocate waiting jobs in arrival order inside their own set,
//!   replicate in four steps); `evict_expired` ends RT waits longer than w.
//!   Under admission control an RT job holds r = [`rows_needed`] rows of the
//!   RT set, the same columns in each, or waits.
//! - [`ReplicationStep`]: the four steps, runnable one by one as in Figure 2.
//!   Unlike the paper (session 20): a satisfied RT job is left uncopied
//!   only if its own rows pay for its frames (`counts_as_satisfied`), and
//!   one that `set_satisfied` drops (it fell short of b frames again) gets
//!   rows at once, not at the next event (`replicate_for_the_short`: RT
//!   replicas stay, BE ones yield).
//! - Execution: `rotation`, `active_by_node`, `slice` (a gang
//!   [`Slice`](crate::global::Slice)) and [`OneLevelGangRotor`] (a new RT
//!   job under admission control waits for its start row, then warms up in
//!   it alone until its processes are ready for their first frame, which
//!   then starts at the instant the rotor gives for it: [`FirstFrame`]).
//! - [`FrameGuarantee`]: `guaranteed_frames_per_cycle`, `unmet_guarantees`.
//! - Phase ([`is_phase_locked`], [`frames_done_per_window`]): CPU per cycle is
//!   not enough; b frames per window also need Ψ to divide Γ = b·d.
//! - [`OneLevelGangSnapshot`]: the persisted state, checked on load.
//!
//! Pure: time comes in as CLOCK_MONOTONIC nanoseconds; throughput ("this RT
//! job produced its b frames in its window") comes in as `set_satisfied`.

mod allocation;
mod config;
mod error;
mod events;
mod guarantee;
mod job;
mod phase;
mod replication;
mod rotation;
mod snapshot;
mod state;

#[cfg(test)]
mod tests;

pub use config::{MAX_ONE_GS_ROWS, OneLevelGangConfig, RowSplit};
pub use error::OneLevelGangError;
pub use events::{
    ArrivalDecision, ArriveOutcome, DepartOutcome, Enqueued, Evicted, Expired, Removed,
};
pub use guarantee::FrameGuarantee;
pub use job::{OneGsJob, OneGsKind, rows_needed};
pub use phase::{
    RowTimeline, first_frame_offset, frames_done_per_window, is_phase_locked,
    worst_window_shortfall,
};
pub use replication::{Replica, ReplicationStep};
pub use rotation::{FirstFrame, OneLevelGangRotor, WARM_UP_WINDOWS, Warming};
pub use snapshot::OneLevelGangSnapshot;
pub use state::{Allocation, Cell, CellKind, OneLevelGang, WaitingJob};
