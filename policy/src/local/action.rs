//! What a local policy asks the agent to do: set a task's scheduling level.

use super::ids::TaskId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A task's scheduling level, realised by the agent with `sched_setattr` and,
/// for [`Level::Stop`] only, SIGSTOP/SIGCONT.
///
/// Ordered roughly from most to least CPU: `Boost` > `Normal` > `Background` >
/// `Demote` > `Stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// The task's original attributes, as they were when the agent adopted it.
    Normal,
    /// A real-time band (SCHED_FIFO/RR priority `prio`, 1..=99; higher is more
    /// urgent): the task preempts every time-sharing task at once. Used for
    /// demand/periodic boosts and the FCS slot owner. Always ended by the policy.
    Boost { prio: u8 },
    /// SCHED_OTHER at nice 19: still time-shared, but with a tiny weight. The
    /// FCS "F" priority group (below don't-care processes, above CS ones).
    Background,
    /// SCHED_IDLE: runs only when nothing else wants the CPU. A yield, or a
    /// block that keeps the task able to see its message by itself.
    Demote,
    /// SIGSTOP: a true block; the policy sends it back to another level (the
    /// agent sends SIGCONT) on the wake condition or the block-time bound.
    Stop,
}

impl Level {
    /// Whether this level holds the task away from its original attributes.
    pub fn is_normal(self) -> bool {
        self == Level::Normal
    }

    /// Whether this is a real-time boost.
    pub fn is_boost(self) -> bool {
        matches!(self, Level::Boost { .. })
    }
}

/// Why a level was set: for logs and metrics labels (see [`Reason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// DCS: a message arrived for a task that was not running.
    ArrivalBoost,
    /// SB/SY: a message (or its data) reached a blocked or yielded task.
    WakeOnArrival,
    /// PB: the running task spins with nothing to do; this one has work.
    PeriodicBoost,
    /// DCS quantum boosts taking turns (`dcs.take_turns`): at a tick, a rank
    /// preempted off its CPU whose job is behind the CPU's holder's job by
    /// more than the equal-share slack gets the CPU, with no message needed.
    TurnBoost,
    /// A boosted task consumed its message and started waiting again.
    BoostEndWaiting,
    /// DCS: a message arrived for another job's task while this boosted task
    /// spun with nothing to do; the other task takes the CPU.
    Displaced,
    /// DCS: the task's quantum ended; it yields so another job runs at once.
    QuantumYield,

    /// A boosted task blocked or slept.
    BoostEndBlocked,
    /// A boost reached its maximum duration.
    BoostExpired,
    /// The job used up its fairness budget for the current window.
    BudgetExhausted,
    /// The job received more than its equal share of the node's CPU time
    /// in the current window ([`FairnessParams::equal_cpu_share`](super::FairnessParams)):
    /// its running boosts end.
    CpuShareExceeded,
    /// PB: the boost lasted until this period's decision.
    PeriodicBoostEnd,
    /// SB: spun past the spin threshold without its message.
    SpinThresholdBlock,
    /// SY: spun past the spin threshold without its message.
    SpinThresholdYield,
    /// SB/SY: blocked or yielded for the longest allowed time; woken anyway.
    BlockTimeout,
    /// FCS: the task's job owns the current gang slot.
    FcsSlotOwner,
    /// FCS: the task's priority group (DC > F > CS) outside its slot.
    FcsGroup,
    /// FCS: a frustrated slot owner spun past its spin time and yields.
    FcsFrustratedYield,
    /// FCS: a yielded frustrated slot owner got its message back.
    FcsFrustratedResume,
    /// FCS: no gang slot is known (none yet, or the last one expired).
    FcsNoSlot,
    /// FCS: the slot owner measures itself as DC, so the slot is left to
    /// the local scheduler among all processes.
    FcsMeasuringDc,
    /// The policy was switched off or the task's job changed.
    Released,

    // Why a boost the policy would have given was not given. Carried by the
    // `Normal` that hands a held task back without its wake boost, or by an
    // [`Action::Refused`] when no level changes (see [`Reason::is_refusal`]).
    /// The woken task was on a CPU (as far as the policy knew): it runs
    /// already, no boost.
    NoBoostOnCpu,
    /// The job's boost budget for the window is spent.
    NoBoostJobBudget,
    /// The node's boost budget for the window is spent.
    NoBoostNodeBudget,
    /// The job received more than its equal share of the node's CPU time in
    /// the window.
    NoBoostCpuShare,
}

impl Reason {
    /// Does a task held back for this reason wait for its next message, so
    /// that the message ends the hold (a spin-block or spin-yield past its
    /// threshold, a DCS quantum yield, a frustrated FCS owner's yield)? The
    /// agent asks the eBPF side to report every arrival for such a task at
    /// once. A class priority (FCS's groups) or a demotion is not a wait:
    /// reporting each of its arrivals would only wake the agent for nothing.
    pub fn awaits_message(self) -> bool {
        matches!(
            self,
            Reason::SpinThresholdBlock
                | Reason::SpinThresholdYield
                | Reason::QuantumYield
                | Reason::FcsFrustratedYield
        )
    }

    /// Does this reason say why a boost was not given (a refusal, not a
    /// level the policy chose for its own sake)?
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            Reason::NoBoostOnCpu
                | Reason::NoBoostJobBudget
                | Reason::NoBoostNodeBudget
                | Reason::NoBoostCpuShare
        )
    }

    /// A stable kebab-case name, e.g. for a Prometheus label.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ArrivalBoost => "arrival-boost",
            Reason::WakeOnArrival => "wake-on-arrival",
            Reason::PeriodicBoost => "periodic-boost",
            Reason::TurnBoost => "turn-boost",
            Reason::BoostEndWaiting => "boost-end-waiting",
            Reason::Displaced => "displaced",
            Reason::QuantumYield => "quantum-yield",
            Reason::BoostEndBlocked => "boost-end-blocked",
            Reason::BoostExpired => "boost-expired",
            Reason::BudgetExhausted => "budget-exhausted",
            Reason::CpuShareExceeded => "cpu-share-exceeded",
            Reason::PeriodicBoostEnd => "periodic-boost-end",
            Reason::SpinThresholdBlock => "spin-threshold-block",
            Reason::SpinThresholdYield => "spin-threshold-yield",
            Reason::BlockTimeout => "block-timeout",
            Reason::FcsSlotOwner => "fcs-slot-owner",
            Reason::FcsGroup => "fcs-group",
            Reason::FcsFrustratedYield => "fcs-frustrated-yield",
            Reason::FcsFrustratedResume => "fcs-frustrated-resume",
            Reason::FcsNoSlot => "fcs-no-slot",
            Reason::FcsMeasuringDc => "fcs-measuring-dc",
            Reason::Released => "released",
            Reason::NoBoostOnCpu => "no-boost-on-cpu",
            Reason::NoBoostJobBudget => "no-boost-job-budget",
            Reason::NoBoostNodeBudget => "no-boost-node-budget",
            Reason::NoBoostCpuShare => "no-boost-cpu-share",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision for the agent. Policies emit only changes: a `SetLevel` always
/// differs from the level the policy last set for that task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "action")]
pub enum Action {
    SetLevel {
        task: TaskId,
        level: Level,
        reason: Reason,
    },
    /// A boost the policy would have given `task` and did not, and why
    /// (`reason` is a [refusal](Reason::is_refusal)); no level changes. For
    /// operators and probes only: the agent counts it with the decisions
    /// and records it in a timeline; nothing is applied.
    Refused { task: TaskId, reason: Reason },
}

impl Action {
    /// The task the decision is about.
    pub fn task(&self) -> TaskId {
        match *self {
            Action::SetLevel { task, .. } | Action::Refused { task, .. } => task,
        }
    }

    /// Why it was decided.
    pub fn reason(&self) -> Reason {
        match *self {
            Action::SetLevel { reason, .. } | Action::Refused { reason, .. } => reason,
        }
    }
}
