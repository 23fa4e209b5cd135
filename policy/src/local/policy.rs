//! The interface every local policy implements, and the names of the policies.

use super::action::{Action, Level};
use super::event::Event;
use super::ids::TaskId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A per-node coscheduling policy: a pure state machine from events to level
/// changes.
///
/// Contract with the driver (the agent, a simulator or a test):
/// - events come with non-decreasing `at` as far as possible (a late event is
///   treated as happening now);
/// - when `next_wakeup()` returns `Some(t)`, the driver delivers
///   [`Event::Tick`] at `t` (or as soon after as it can) unless another event
///   comes first; every boost, block and budget bound relies on this;
/// - the driver applies each [`Action`] it receives (they are only changes).
pub trait LocalPolicy: Send + fmt::Debug {
    /// Which policy this is.
    fn kind(&self) -> PolicyKind;

    /// Feeds one event; level changes are appended to `actions`.
    fn on_event(&mut self, event: &Event<'_>, actions: &mut Vec<Action>);

    /// When the policy next needs a [`Event::Tick`] (absolute ns), if ever.
    fn next_wakeup(&self) -> Option<u64>;

    /// Drops every trace of `task` without emitting anything: the caller no
    /// longer manages it (it exited, or the agent restores it itself). No later
    /// action names it unless it is added again.
    fn forget(&mut self, task: TaskId);

    /// Switches the policy off: emits `Normal` for every task whose level it
    /// changed and clears its holds, boosts and budgets.
    fn release_all(&mut self, actions: &mut Vec<Action>);

    /// The level the policy last set for `task` (`Normal` if none or unknown).
    fn level_of(&self, task: TaskId) -> Level;

    /// Whether the policy reads [`Event::Tick`] snapshots; a driver may skip
    /// reading the eBPF maps when it does not.
    fn uses_snapshots(&self) -> bool {
        false
    }

    /// The policy builds its state from every tick, spinning tasks or not
    /// (FCS inside gang slots counts from them): the driver must not slow
    /// its tick down while no task spins.
    fn counts_every_tick(&self) -> bool {
        false
    }

    /// The policy needs the driver's fast tick while tasks spin, to find
    /// the spins it acts on. False for a policy that hears at once of every
    /// spin it acts on (a spin past its fixed threshold is reported by the
    /// kernel side, [`WakeInterest::long_spin_ns`](super::WakeInterest)) and
    /// decides nothing else at a tick: the driver then ticks at its quiet
    /// pace, and every agent wake-up less on a busy CPU is one preemption
    /// (and scheduler re-pick) less for the jobs.
    fn needs_spin_ticks(&self) -> bool {
        true
    }

    /// The policy acts on nothing in its present state and no tick can
    /// change that (FCS while it knows no gang slot: every process at its
    /// own attributes): the driver sends it no periodic tick, and the agent
    /// neither wakes for it nor runs above the jobs for it, exactly as
    /// under `local`. What ends the state reaches the policy as an event of
    /// its own (a slot broadcast), not at a tick; the policy's own timers
    /// ([`Self::next_wakeup`]) still run.
    fn dormant(&self) -> bool {
        false
    }

    /// The class the policy put `task` in, for operators (FCS: `cs`, `f`,
    /// `dc`); None for policies without classes.
    fn task_class(&self, _task: TaskId) -> Option<&'static str> {
        None
    }
}

/// A boxed policy is a policy, so drivers can be generic over both.
impl<P: LocalPolicy + ?Sized> LocalPolicy for Box<P> {
    fn kind(&self) -> PolicyKind {
        (**self).kind()
    }

    fn on_event(&mut self, event: &Event<'_>, actions: &mut Vec<Action>) {
        (**self).on_event(event, actions);
    }

    fn next_wakeup(&self) -> Option<u64> {
        (**self).next_wakeup()
    }

    fn forget(&mut self, task: TaskId) {
        (**self).forget(task);
    }

    fn release_all(&mut self, actions: &mut Vec<Action>) {
        (**self).release_all(actions);
    }

    fn level_of(&self, task: TaskId) -> Level {
        (**self).level_of(task)
    }

    fn uses_snapshots(&self) -> bool {
        (**self).uses_snapshots()
    }

    fn counts_every_tick(&self) -> bool {
        (**self).counts_every_tick()
    }

    fn needs_spin_ticks(&self) -> bool {
        (**self).needs_spin_ticks()
    }

    fn dormant(&self) -> bool {
        (**self).dormant()
    }

    fn task_class(&self, task: TaskId) -> Option<&'static str> {
        (**self).task_class(task)
    }
}

/// The selectable local policies, with their configuration names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// `local`: no intervention, the Linux scheduler alone (baseline).
    #[default]
    Local,
    /// `dcs`: demand-based coscheduling, boost on message arrival.
    Dcs,
    /// `sb`: spin-block (implicit coscheduling).
    Sb,
    /// `sy`: spin-yield.
    Sy,
    /// `pb`: periodic boost.
    Pb,
    /// `pb-sb`: periodic boost with spin-block receives.
    PbSb,
    /// `dcs-sb`: demand-based coscheduling with spin-block receives.
    DcsSb,
    /// `fcs`: flexible coscheduling (classification under gang slots).
    Fcs,
}

impl PolicyKind {
    /// Every policy, in documentation order.
    pub const ALL: [PolicyKind; 8] = [
        PolicyKind::Local,
        PolicyKind::Dcs,
        PolicyKind::Sb,
        PolicyKind::Sy,
        PolicyKind::Pb,
        PolicyKind::PbSb,
        PolicyKind::DcsSb,
        PolicyKind::Fcs,
    ];

    /// Does the policy decide on a message for a task that is ready but not
    /// running, at the moment it arrives (DCS's boost, FCS's regained
    /// priority)? Such a decision judges the arrival against the task that
    /// holds the receiver's CPU.
    pub fn boosts_on_arrival(self) -> bool {
        matches!(self, PolicyKind::Dcs | PolicyKind::DcsSb | PolicyKind::Fcs)
    }

    /// The configuration name (`local`, `dcs`, `sb`, `sy`, `pb`, `pb-sb`,
    /// `dcs-sb`, `fcs`).
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Local => "local",
            PolicyKind::Dcs => "dcs",
            PolicyKind::Sb => "sb",
            PolicyKind::Sy => "sy",
            PolicyKind::Pb => "pb",
            PolicyKind::PbSb => "pb-sb",
            PolicyKind::DcsSb => "dcs-sb",
            PolicyKind::Fcs => "fcs",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is not one of [`PolicyKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown local policy {0:?} (expected one of local, dcs, sb, sy, pb, pb-sb, dcs-sb, fcs)")]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use crate::local::action::Reason;

    #[test]
    fn only_spin_and_yield_holds_wait_for_a_message() {
        assert!(Reason::SpinThresholdBlock.awaits_message());
        assert!(Reason::FcsFrustratedYield.awaits_message());
        assert!(
            !Reason::FcsGroup.awaits_message(),
            "a class priority is not a wait"
        );
        assert!(!Reason::BudgetExhausted.awaits_message());
    }
}
