//! 2DCS-TDM when the coordinator's divisions stop arriving (its loop is
//! stuck, the node is partitioned from it and the link has not timed out
//! yet, or the first division never comes): the node would otherwise stay
//! in the last division for good, starving the other class.
//!
//! After `grace_periods` × Δ without a division from the coordinator the
//! node runs its own division clock, with the coordinator's ratio and Δ,
//! starting with the class the silence starved (the one that was not
//! running). The nodes' local clocks are not aligned with each other — the
//! classes keep their x:y share on every node, not the cluster-wide
//! coscheduling of their divisions. The next division from the coordinator
//! ends the local clock at once and the coordinator's divisions rule again.

use super::division::{Division, DivisionClock, DivisionError};
use crate::classes::{Class, FairnessRatio};

/// How many periods Δ without a division before the node's own clock
/// takes over: the coordinator's divisions arrive every x/(x+y)·Δ or
/// y/(x+y)·Δ, so 3 Δ is several missed divisions, not one late one.
pub const DEFAULT_GRACE_PERIODS: u64 = 3;

/// Whose divisions the node follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DivisionSource {
    Coordinator,
    /// The node's own clock: the coordinator has been silent.
    Local,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DivisionFallback {
    period_ns: u64,
    ratio: FairnessRatio,
    grace_ns: u64,
    last_heard_ns: u64,
    local: Option<DivisionClock>,
}

impl DivisionFallback {
    /// Waiting for the coordinator's divisions from `now_ns` (the mode
    /// started). Refused like the coordinator's own clock when Δ split x:y
    /// leaves a division no time.
    pub fn new(
        period_ns: u64,
        ratio: FairnessRatio,
        grace_periods: u64,
        now_ns: u64,
    ) -> Result<Self, DivisionError> {
        DivisionClock::new(period_ns, ratio, 0)?;
        Ok(Self {
            period_ns,
            ratio,
            grace_ns: period_ns.saturating_mul(grace_periods.max(1)),
            last_heard_ns: now_ns,
            local: None,
        })
    }

    /// A division from the coordinator started at `now_ns`: it rules again.
    pub fn coordinator_division(&mut self, now_ns: u64) {
        self.last_heard_ns = self.last_heard_ns.max(now_ns);
        self.local = None;
    }

    /// The node's own division at `now_ns`, once the coordinator has been
    /// silent for the grace time (None while its divisions hold). `current`:
    /// the division the node is in, whose class the local clock starts
    /// after.
    pub fn local_division(&mut self, now_ns: u64, current: Class) -> Option<Division> {
        if self.local.is_none() {
            if now_ns.saturating_sub(self.last_heard_ns) < self.grace_ns {
                return None;
            }
            let clock = DivisionClock::new(self.period_ns, self.ratio, 0).ok()?;
            // The starved class's division starts now.
            let epoch_ns = match current.other() {
                Class::RealTime => now_ns,
                Class::BestEffort => now_ns.saturating_sub(clock.rt_len_ns()),
            };
            self.local = DivisionClock::new(self.period_ns, self.ratio, epoch_ns).ok();
        }
        self.local.map(|clock| clock.division_at(now_ns))
    }

    pub fn source(&self) -> DivisionSource {
        match self.local {
            Some(_) => DivisionSource::Local,
            None => DivisionSource::Coordinator,
        }
    }
}
