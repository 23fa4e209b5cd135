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

/// How this node enforces the coordinator's slices and divisions, from
/// `SetPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Space sharing: nothing to enforce; slices only pace utilisation
    /// reports.
    Fcfs,
    /// Gang, paired gang and one-level gang (1GS): the slice's jobs run,
    /// the others are demoted (or stopped).
    #[default]
    Gang,
    /// Flexible coscheduling: the local FCS policy learns the slot owner and
    /// schedules by class; no overlay.
    Fcs,
    /// 2DCS-TDM: no slices; the coordinator's `SwitchDivision`s say which
    /// class owns the node, applied at their instant.
    Tdm,
    /// 2DCS-PS: no slices, no divisions; the node shares its CPUs between
    /// the classes itself.
    Ps,
}

impl Mode {
    /// Whether the coordinator's switches (slices or divisions) are
    /// enforced on time (the agent then runs at its priority).
    pub fn enforces_switches(self) -> bool {
        matches!(self, Mode::Gang | Mode::Fcs | Mode::Tdm)
    }
}

/// What a global policy asks of the class overlay, before the ratio of
/// `ClassSettings` is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClassPolicy {
    /// Policies without classes: the config's `[classes] mode`.
    #[default]
    Config,
    /// 1GS: off (its rows are the guarantee).
    Off,
    /// 2DCS-TDM.
    Tdm,
    /// 2DCS-PS.
    Ps,
}

/// A `SetPolicy` from the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyCommand {
    /// A global policy: how to enforce slices, the local policy to run
    /// meanwhile (`None`: the config's), and the class overlay.
    Global {
        mode: Mode,
        local: Option<PolicyKind>,
        classes: ClassPolicy,
    },
    /// A local policy by its config name, to run while connected.
    Local(PolicyKind),
}

/// Reads `SetPolicy.policy`: a global policy name (`fcfs`, `gang`,
/// `paired-gang`, `fcs`, `one-level-gang`, `2dcs-tdm`, `2dcs-ps`) or a
/// local one (`pb-sb`, ...).
pub fn parse_set_policy(name: &str) -> Result<PolicyCommand, String> {
    let global = |mode, local, classes| {
        Ok(PolicyCommand::Global {
            mode,
            local,
            classes,
        })
    };
    match name {
        "fcfs" => global(Mode::Fcfs, None, ClassPolicy::Config),
        "gang" | "paired-gang" => global(Mode::Gang, None, ClassPolicy::Config),
        "fcs" => global(Mode::Fcs, Some(PolicyKind::Fcs), ClassPolicy::Config),
        "one-level-gang" => global(Mode::Gang, None, ClassPolicy::Off),
        "2dcs-tdm" => global(Mode::Tdm, None, ClassPolicy::Tdm),
        "2dcs-ps" => global(Mode::Ps, None, ClassPolicy::Ps),
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
    timing_of(
        Announced {
            epoch: switch.epoch,
            number: switch.slice,
            apply_at_ns: switch.apply_at_ns,
            strict: switch.strict,
        },
        now_ns,
        last,
    )
}

/// A switch (slice or division) as [`timing_of`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announced {
    pub epoch: u64,
    /// The slice or division number within the epoch.
    pub number: u64,
    pub apply_at_ns: u64,
    /// A late strict switch applies at once; a late hint is skipped.
    pub strict: bool,
}

/// Decides when to apply a switch announced as `switch`, received at
/// `now_ns`, given the last (epoch, number) applied of its kind.
pub fn timing_of(switch: Announced, now_ns: u64, last: Option<(u64, u64)>) -> Timing {
    if let Some((epoch, number)) = last
        && epoch == switch.epoch
        && switch.number <= number
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
        Mode::Fcfs | Mode::Tdm | Mode::Ps => Enforcement::Nothing,
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
                local: None,
                classes: ClassPolicy::Config,
            })
        );
        assert_eq!(
            parse_set_policy("fcs"),
            Ok(PolicyCommand::Global {
                mode: Mode::Fcs,
                local: Some(PolicyKind::Fcs),
                classes: ClassPolicy::Config,
            })
        );
        assert_eq!(
            parse_set_policy("pb-sb"),
            Ok(PolicyCommand::Local(PolicyKind::PbSb))
        );
        assert!(parse_set_policy("lottery").unwrap_err().contains("lottery"));
    }

    #[test]
    fn the_policies_with_classes_name_their_enforcement_and_class_overlay() {
        let global = |name| match parse_set_policy(name) {
            Ok(PolicyCommand::Global {
                mode,
                local: None,
                classes,
            }) => (mode, classes),
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(
            global("one-level-gang"),
            (Mode::Gang, ClassPolicy::Off),
            "1GS runs its rows as gang slices, without a node-local class choice"
        );
        assert_eq!(global("2dcs-tdm"), (Mode::Tdm, ClassPolicy::Tdm));
        assert_eq!(global("2dcs-ps"), (Mode::Ps, ClassPolicy::Ps));
        assert_eq!(global("gang"), (Mode::Gang, ClassPolicy::Config));
        assert!(Mode::Tdm.enforces_switches(), "divisions switch on time");
        assert!(!Mode::Ps.enforces_switches() && !Mode::Fcfs.enforces_switches());
        assert!(parse_set_policy("2dcs").unwrap_err().contains("2dcs"));
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
        assert_eq!(enforcement(Mode::Tdm, &s, false, 50), Enforcement::Nothing);
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
