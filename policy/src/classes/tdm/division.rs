//! The division clock of 2DCS-TDM (the BE/RT coscheduling paper §4.2: "the
//! RT and BE classes alternatively get x/(x+y)·Δ and y/(x+y)·Δ units
//! respectively, with a global synchronization used to denote the
//! time-division change").
//!
//! Every period Δ from the epoch starts with the RT division, of
//! `share_of(RT, Δ)`, followed by the BE division, of the rest of Δ, so the
//! divisions tile time without gap or overlap. The coordinator broadcasts
//! each [`Division`] as it starts, like a gang slice; every node computes the
//! same divisions from the same clock.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::super::ratio::{Class, FairnessRatio};

/// One division: which class owns the cluster from `start_ns` to `end_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Division {
    /// Sequence number since the epoch: 2k is period k's RT division, 2k+1
    /// its BE division.
    pub number: u64,
    pub class: Class,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Division {
    pub fn contains(&self, t_ns: u64) -> bool {
        (self.start_ns..self.end_ns).contains(&t_ns)
    }

    pub fn len_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// Why a division clock is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DivisionError {
    #[error(
        "division period {period_ns} ns with ratio {rt}:{be}: each class needs at least 1 ns per period"
    )]
    EmptyDivision { period_ns: u64, rt: u32, be: u32 },
}

/// Period Δ split RT then BE in the ratio x:y, from an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivisionClock {
    period_ns: u64,
    ratio: FairnessRatio,
    epoch_ns: u64,
}

impl DivisionClock {
    /// A clock whose first RT division starts at `epoch_ns`.
    pub fn new(period_ns: u64, ratio: FairnessRatio, epoch_ns: u64) -> Result<Self, DivisionError> {
        let clock = Self {
            period_ns,
            ratio,
            epoch_ns,
        };
        if ratio.validate().is_err() || clock.rt_len_ns() == 0 || clock.be_len_ns() == 0 {
            return Err(DivisionError::EmptyDivision {
                period_ns,
                rt: ratio.rt,
                be: ratio.be,
            });
        }
        Ok(clock)
    }

    /// Δ.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    pub fn ratio(&self) -> FairnessRatio {
        self.ratio
    }

    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// The RT division's length: x/(x+y)·Δ, rounded down.
    pub fn rt_len_ns(&self) -> u64 {
        self.ratio.share_of(Class::RealTime, self.period_ns)
    }

    /// The BE division's length: the rest of Δ (so the two always add up to
    /// Δ exactly; rounding goes to BE).
    pub fn be_len_ns(&self) -> u64 {
        self.period_ns - self.rt_len_ns()
    }

    /// The division containing `t_ns`. Before the epoch the clock has not
    /// started: the first division is returned (it starts later than `t_ns`;
    /// a node whose clock is behind the coordinator's waits for it).
    pub fn division_at(&self, t_ns: u64) -> Division {
        let since = t_ns.saturating_sub(self.epoch_ns);
        let period = since / self.period_ns;
        let period_start = self.period_start(period);
        if since % self.period_ns < self.rt_len_ns() {
            self.rt_division(period, period_start)
        } else {
            self.be_division(period, period_start)
        }
    }

    /// The division after `division`.
    pub fn next(&self, division: &Division) -> Division {
        let period = division.number / 2;
        match division.class {
            Class::RealTime => self.be_division(period, self.period_start(period)),
            Class::BestEffort => {
                let next = period.saturating_add(1);
                self.rt_division(next, self.period_start(next))
            }
        }
    }

    fn period_start(&self, period: u64) -> u64 {
        self.epoch_ns
            .saturating_add(period.saturating_mul(self.period_ns))
    }

    fn rt_division(&self, period: u64, start_ns: u64) -> Division {
        Division {
            number: period.saturating_mul(2),
            class: Class::RealTime,
            start_ns,
            end_ns: start_ns.saturating_add(self.rt_len_ns()),
        }
    }

    fn be_division(&self, period: u64, period_start: u64) -> Division {
        let start_ns = period_start.saturating_add(self.rt_len_ns());
        Division {
            number: period.saturating_mul(2).saturating_add(1),
            class: Class::BestEffort,
            start_ns,
            end_ns: period_start.saturating_add(self.period_ns),
        }
    }
}
