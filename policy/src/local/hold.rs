//! The policy's hold on a task (free, blocked, boosted) and what a boost is.
//!
//! The dynamic-coscheduling engine keeps one hold per task and derives the
//! task's level from it, so a boost and a block can never fight over a task.

use super::action::Level;
use super::ids::JobId;
use super::observe::Observed;
use super::spin_learning::SpinTime;

/// A real-time boost: its priority and, if it ends on a timer, its duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BoostRule {
    pub prio: u8,
    /// `None`: ended by the next periodic decision instead of a timer.
    pub max_ns: Option<u64>,
    /// The boost ends when the task starts waiting again.
    pub ends_on_wait: bool,
    /// With `ends_on_wait`: only once the task has spun this long (on-CPU
    /// time, idle, in one episode); 0 = at its first empty wait.
    pub wait_grace_ns: u64,
    /// With `ends_on_wait`: only a wait after the task has sent since the
    /// boost began ends it (it answered its message). A library that polls
    /// once more right after reading a message (OpenMPI 4.1's TCP BTL) makes
    /// an empty wait before the task even computes its answer.
    pub wait_after_send: bool,
}

/// What put a boost on a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoostSource {
    /// DCS: a message for a task that was not running.
    Arrival,
    /// SB: woken from a block by its message.
    Wake,
    /// PB: picked by a periodic decision.
    Periodic,
}

/// The policy's hold on a task; its level follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Original attributes.
    Free,
    /// Blocked (SB) or yielded (SY) since `since`, at `level` (`Demote`/`Stop`).
    Blocked { since: u64, level: Level },
    /// Boosted at real-time `prio` until `until` (if on a timer).
    Boosted {
        source: BoostSource,
        prio: u8,
        until: Option<u64>,
        ends_on_wait: bool,
        /// See [`BoostRule::wait_grace_ns`].
        wait_grace_ns: u64,
        /// See [`BoostRule::wait_after_send`].
        wait_after_send: bool,
        /// The task sent since the boost began.
        sent: bool,
    },
}

impl Hold {
    pub fn level(self) -> Level {
        match self {
            Hold::Free => Level::Normal,
            Hold::Blocked { level, .. } => level,
            Hold::Boosted { prio, .. } => Level::Boost { prio },
        }
    }
}

/// One managed task.
#[derive(Debug, Clone)]
pub(crate) struct Managed {
    pub job: JobId,
    pub obs: Observed,
    pub hold: Hold,
    pub spin_time: SpinTime,
    /// CPU time at the last snapshot (None: not seen in one yet).
    pub oncpu_ns: Option<u64>,
}
