//! What a slice switch means on this node, decided without I/O: when to
//! apply it, and what to enforce then, under the coordinator's global policy.

use std::collections::HashSet;

use cosched_policy::local::PolicyKind;
use cosched_proto::{job::JobId, wire::SwitchSlice};

use crate::engine::Gang;

/// Switches announced further ahead than this are refused (a broken clock
/// estimate, or a hostile frame).
pub const MAX_LEAD_NS: u64 = 10_000_000_000;

/// Slot length assumed for FCS before two consecutive switches taught the
/// real one (a too long `until` is harmless: the next slot replaces it).
pub const DEFAULT_SLOT_NS: u64 = 1_000_000_000;

/// How this node enforces the coordinator's slices, from `SetPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Space sharing: nothing to enforce; slices only pace utilisation
    /// reports.
    Fcfs,
    /// Gang and paired gang: the slice's jobs run, the others are demoted
    /// (or stopped).
    #[default]
    Gang,
    /// Flexible coscheduling: the local FCS policy learns the slot owner and
    /// schedules by class; no overlay.
    Fcs,
}

/// A `SetPolicy` from the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyCommand {
    /// A global policy: how to enforce slices, and the local policy to run
    /// meanwhile (`None`: the config's).
    Global {
        mode: Mode,
        local: Option<PolicyKind>,
    },
    /// A local policy by its config name, to run while connected.
    Local(PolicyKind),
}

/// Reads `SetPolicy.policy`: a global policy name (`fcfs`, `gang`,
/// `paired-gang`, `fcs`) or a local one (`pb-sb`, ...).
pub fn parse_set_policy(name: &str) -> Result<PolicyCommand, String> {
    let global = |mode, local| Ok(PolicyCommand::Global { mode, local });
    match name {
        "fcfs" => global(Mode::Fcfs, None),
        "gang" | "paired-gang" => global(Mode::Gang, None),
        "fcs" => global(Mode::Fcs, Some(PolicyKind::Fcs)),
        other => other
            .parse::<PolicyKind>()
            .map(PolicyCommand::Local)
            .map_err(|_| format!("unknown policy {other:?}")),
    }
}

/// When to apply a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Sleep until then.
    At(u64),
    /// Already due (`late_ns` past the instant): apply now.
    Now { late_ns: u64 },
    /// Late and not strict: skip it.
    Skip { late_ns: u64 },
    /// Older than a switch already applied.
    Stale,
    /// Announced implausibly far ahead.
    TooFar { ahead_ns: u64 },
}

/// Decides when to apply `switch`, received at `now_ns`, given the last
/// (epoch, slice) applied.
pub fn timing(switch: &SwitchSlice, now_ns: u64, last: Option<(u64, u64)>) -> Timing {
    if let Some((epoch, slice)) = last
        && epoch == switch.epoch
        && switch.slice <= slice
    {
        return Timing::Stale;
    }
    let at = switch.apply_at_ns;
    if at > now_ns {
        let ahead_ns = at - now_ns;
        return if ahead_ns > MAX_LEAD_NS {
            Timing::TooFar { ahead_ns }
        } else {
            Timing::At(at)
        };
    }
    let late_ns = now_ns - at;
    if switch.strict {
        Timing::Now { late_ns }
    } else {
        Timing::Skip { late_ns }
    }
}

/// What to do to the engine when a switch is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// No slice runs: every job may run, the local policy alone decides.
    LeaveGang,
    Gang(Gang),
    /// FCS: the slot of `owner` runs until `until_ns`.
    Slot {
        owner: Option<JobId>,
        until_ns: u64,
    },
    Nothing,
}

pub fn enforcement(
    mode: Mode,
    switch: &SwitchSlice,
    stop_inactive: bool,
    slot_ns: u64,
) -> Enforcement {
    if switch.rows.is_empty() {
        return Enforcement::LeaveGang;
    }
    match mode {
        Mode::Fcfs => Enforcement::Nothing,
        Mode::Gang => Enforcement::Gang(Gang {
            active: switch.active_jobs.iter().copied().collect::<HashSet<_>>(),
            strict: stop_inactive,
        }),
        Mode::Fcs => Enforcement::Slot {
            owner: switch.active_jobs.first().copied(),
            until_ns: switch.apply_at_ns.saturating_add(slot_ns),
        },
    }
}

/// Learns the slice length from consecutive switches of one epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct SliceLength {
    last: Option<(u64, u64, u64)>,
    learned_ns: Option<u64>,
}

impl SliceLength {
    pub fn observe(&mut self, switch: &SwitchSlice) {
        if let Some((epoch, slice, at)) = self.last
            && epoch == switch.epoch
            && switch.slice == slice + 1
            && switch.apply_at_ns > at
        {
            self.learned_ns = Some(switch.apply_at_ns - at);
        }
        self.last = Some((switch.epoch, switch.slice, switch.apply_at_ns));
    }

    pub fn get(&self) -> u64 {
        self.learned_ns.unwrap_or(DEFAULT_SLOT_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(slice: u64, at: u64, active: &[JobId]) -> SwitchSlice {
        SwitchSlice {
            epoch: 3,
            slice,
            rows: vec![0],
            active_jobs: active.to_vec(),
            apply_at_ns: at,
            strict: true,
        }
    }

    #[test]
    fn global_and_local_policy_names_are_understood() {
        assert_eq!(
            parse_set_policy("paired-gang"),
            Ok(PolicyCommand::Global {
                mode: Mode::Gang,
                local: None
            })
        );
        assert_eq!(
            parse_set_policy("fcs"),
            Ok(PolicyCommand::Global {
                mode: Mode::Fcs,
                local: Some(PolicyKind::Fcs)
            })
        );
        assert_eq!(
            parse_set_policy("pb-sb"),
            Ok(PolicyCommand::Local(PolicyKind::PbSb))
        );
        assert!(parse_set_policy("lottery").unwrap_err().contains("lottery"));
    }

    #[test]
    fn future_switch_waits_and_far_future_is_refused() {
        assert_eq!(
            timing(&switch(1, 5_000, &[]), 1_000, None),
            Timing::At(5_000)
        );
        let far = switch(1, 1_000 + MAX_LEAD_NS + 1, &[]);
        assert!(matches!(timing(&far, 1_000, None), Timing::TooFar { .. }));
    }

    #[test]
    fn late_strict_switch_applies_now_and_late_hint_is_skipped() {
        let late = switch(1, 1_000, &[]);
        assert_eq!(timing(&late, 1_500, None), Timing::Now { late_ns: 500 });
        let hint = SwitchSlice {
            strict: false,
            ..late
        };
        assert_eq!(timing(&hint, 1_500, None), Timing::Skip { late_ns: 500 });
    }

    #[test]
    fn replayed_or_older_slices_of_the_epoch_are_stale_but_a_new_epoch_is_not() {
        let old = switch(4, 9_000, &[]);
        assert_eq!(timing(&old, 1_000, Some((3, 4))), Timing::Stale);
        assert_eq!(timing(&old, 1_000, Some((2, 40))), Timing::At(9_000));
    }

    #[test]
    fn gang_mode_runs_the_slice_jobs_and_fcs_names_the_slot_owner() {
        let s = switch(1, 100, &[7, 9]);
        match enforcement(Mode::Gang, &s, true, 50) {
            Enforcement::Gang(gang) => {
                assert_eq!(gang.active, HashSet::from([7, 9]));
                assert!(gang.strict);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            enforcement(Mode::Fcs, &s, false, 50),
            Enforcement::Slot {
                owner: Some(7),
                until_ns: 150
            }
        );
        assert_eq!(enforcement(Mode::Fcfs, &s, false, 50), Enforcement::Nothing);
    }

    #[test]
    fn a_switch_without_rows_leaves_gang_mode() {
        let idle = SwitchSlice {
            rows: vec![],
            ..switch(1, 100, &[])
        };
        assert_eq!(
            enforcement(Mode::Gang, &idle, false, 50),
            Enforcement::LeaveGang
        );
    }

    #[test]
    fn slice_length_is_learned_from_consecutive_switches() {
        let mut length = SliceLength::default();
        assert_eq!(length.get(), DEFAULT_SLOT_NS);
        length.observe(&switch(1, 1_000, &[]));
        length.observe(&switch(3, 2_000, &[]));
        assert_eq!(length.get(), DEFAULT_SLOT_NS, "not consecutive");
        length.observe(&switch(4, 2_050, &[]));
        assert_eq!(length.get(), 50);
    }
}
