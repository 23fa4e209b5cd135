//! Per-node coscheduling policies: local (baseline), DCS, SB, SY, PB, PB-SB,
//! DCS-SB and FCS (ClusterSchedSim §4, the BE/RT coscheduling paper §2.1, the Scheduler
//! Testbed report §2.2, §2.4, §4.4, §4.6; see docs/references.md).
//!
//! Each policy is a pure state machine ([`LocalPolicy`]): the agent feeds it
//! [`Event`]s (message arrivals, context switches, spin episodes, ticks with
//! optional [`NodeSnapshot`]s, gang slots) and applies the [`Action`]s it
//! returns, which set a task's [`Level`] (`Normal`, `Boost`, `Background`,
//! `Demote`, `Stop`). Time comes in as CLOCK_MONOTONIC nanoseconds; nothing
//! here reads a clock or makes a syscall.
//!
//! Guarantees every policy keeps (checked by property tests):
//! - every boost ends: on a timer, when the task waits again or blocks, at the
//!   next periodic decision, or at the end of its gang slot;
//! - every block/yield ends: on the message, or after a bounded time;
//! - boosts are bounded per job by a fairness budget
//!   ([`fairness`]; FCS relies on its gang slots instead);
//! - actions are only changes, never name a forgotten task, and
//!   [`LocalPolicy::release_all`] hands every task back at `Normal`.
//!
//! Build a policy from configuration with [`build_policy`].
//!
//! What the driver must deliver, and how fast:
//! - `dcs`, `dcs-sb`: [`Event::MessageArrived`] for tasks that are off CPU as
//!   soon as possible (the boost is the whole point), with a correct `on_cpu`;
//!   `SpinStarted` and voluntary `SwitchedOut` promptly (they end boosts).
//! - `sb`, `sy`, `pb-sb`, `dcs-sb`: `SpinStarted`, `SwitchedIn`/`SwitchedOut`
//!   (spin time is on-CPU time) and arrivals for blocked tasks (wake-ups).
//! - `pb`, `pb-sb`: ticks every period (`next_wakeup`), and the CPU occupancy
//!   from `SwitchedIn` or snapshots.
//! - `fcs`: `SlotStarted` from the coordinator, spin starts and arrivals.
//! - all: ticks at `next_wakeup` (boost ends, block bounds, budget);
//!   snapshots on ticks repair lost events.
//!
//! Levels for the agent: `Normal` = the task's original attributes; `Boost`
//! = SCHED_FIFO/RR at `prio`; `Background` = SCHED_OTHER nice 19 (FCS only);
//! `Demote` = SCHED_IDLE; `Stop` = SIGSTOP (and SIGCONT when leaving it).

pub mod action;
pub mod baseline;
pub mod combined;
pub mod config;
pub mod dcs;
pub mod event;
pub mod factory;
pub mod fairness;
pub mod fcs;
pub mod gang_overlay;
mod hold;
pub mod ids;
pub mod interest;
mod level_book;
mod observe;
pub mod periodic_boost;
pub mod policy;
pub mod rt_row;
pub mod spin_block;
pub mod spin_learning;

#[cfg(test)]
mod tests;

pub use action::{Action, Level, Reason};
pub use baseline::LocalBaseline;
pub use combined::DynamicCoscheduler;
pub use config::{ConfigError, LocalPolicyConfig};
pub use dcs::DcsParams;
pub use event::{CpuSnapshot, Event, NodeSnapshot, SwitchOut, TaskSnapshot};
pub use factory::build_policy;
pub use fairness::FairnessParams;
pub use fcs::{FcsParams, FcsPolicy};
pub use gang_overlay::{SliceMembership, gang_overlay};
pub use ids::{JobId, TaskId, TaskInfo};
pub use interest::{OffCpuArrivals, TaskWatch, WakeInterest};
pub use periodic_boost::PeriodicBoostParams;
pub use policy::{LocalPolicy, PolicyKind, UnknownPolicy};
pub use rt_row::{QuietRows, RowTask, rt_row_level};
pub use spin_block::{BlockMethod, SpinBlockParams, SpinYieldParams, YieldLevel};
pub use spin_learning::SpinLearningParams;
