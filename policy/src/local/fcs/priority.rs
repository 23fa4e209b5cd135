//! FCS in-slot priorities (the Scheduler Testbed report §2.4.3, Algorithm 1; §4.6.2).
//!
//! - The slot owner, if CS, has the CPU for the whole slot and is not
//!   preempted by message arrivals (other processes are never boosted over
//!   it): top real-time priority.
//! - The slot owner, if F, runs at top priority until it spins past its spin
//!   time, then yields to the others (its group level) and gets top priority
//!   back when its message arrives.
//! - A DC slot owner, and everybody else, runs at its priority group: DC >
//!   F > CS ("DC processes belong to the highest group, F processes run in the
//!   second group, and CS have the lowest priority"), so DC processes fill the
//!   gaps.
//!
//! The groups map to Linux as DC = `Normal` (time-shared as usual), F =
//! `Background` (nice 19, weight 15), CS = `Demote` (SCHED_IDLE, weight 3):
//! ordered, and each still makes a little progress rather than starving. With
//! no known slot (none yet, or the coordinator went quiet) every process is
//! `Normal`.

use super::classify::FcsClass;
use crate::local::action::Level;

/// The level of a process of class `class`: `owns_slot` when its job owns the
/// current gang slot on this node, `yielded` when it is an F owner that has
/// spun past its spin time without its message.
pub fn fcs_level(class: FcsClass, owns_slot: bool, yielded: bool, top_prio: u8) -> Level {
    match (class, owns_slot) {
        (FcsClass::Cs, true) => Level::Boost { prio: top_prio },
        (FcsClass::F, true) if !yielded => Level::Boost { prio: top_prio },
        (FcsClass::Dc, _) => Level::Normal,
        (FcsClass::F, _) => Level::Background,
        (FcsClass::Cs, false) => Level::Demote,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_runs_on_top_and_groups_order_dc_f_cs() {
        assert_eq!(
            fcs_level(FcsClass::Cs, true, false, 20),
            Level::Boost { prio: 20 }
        );
        assert_eq!(
            fcs_level(FcsClass::F, true, false, 20),
            Level::Boost { prio: 20 }
        );
        assert_eq!(fcs_level(FcsClass::F, true, true, 20), Level::Background);
        assert_eq!(fcs_level(FcsClass::Dc, true, false, 20), Level::Normal);
        assert_eq!(fcs_level(FcsClass::Dc, false, false, 20), Level::Normal);
        assert_eq!(fcs_level(FcsClass::F, false, false, 20), Level::Background);
        assert_eq!(fcs_level(FcsClass::Cs, false, false, 20), Level::Demote);
    }
}
