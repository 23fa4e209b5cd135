//! Realising a level as data: what must change on a task to take it from how
//! it is realised now to how it must be, as a list of [`KernelOp`]s. Pure;
//! the executor ([`super::execute`]) applies the list through the kernel seam.
//!
//! The order inside a plan matters and is decided here only:
//! - journal entries come before the change they protect (a stop, a group
//!   nice), so a crash in between still finds them;
//! - a task moves into `active` (or back to its own cgroup) before it gets a
//!   real-time attribute (real-time needs the RT runtime `idle` lacks), and
//!   into `idle` only after it lost it;
//! - SIGCONT after the attributes a stopped task resumes with, so it never
//!   runs a moment at the stopped level's predecessor.
use cosched_policy::{classes::DeadlineParams, local::Level};

use crate::{
    cpu_group::CpuGroup,
    kernel::{SchedAttr, SchedPolicy, sched_attr::FLAG_RESET_ON_FORK},
};

/// How a task is realised: everything the agent set on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Realisation {
    pub level: Level,
    /// The attributes the task runs with (its original ones until the agent
    /// changes them; unchanged while stopped).
    pub attr: SchedAttr,
    /// The demotion cgroup it is in (None: its own cgroup).
    pub group: Option<CpuGroup>,
    /// Its `WATCH` flags (0: none).
    pub watch: u32,
}

impl Realisation {
    /// A task as the agent found it: at Normal with `attr`, in its own
    /// cgroup, unwatched.
    pub fn untouched(attr: SchedAttr) -> Self {
        Self {
            level: Level::Normal,
            attr,
            group: None,
            watch: 0,
        }
    }
}

/// What the task must become: the level, where it belongs and what the eBPF
/// side must report for it. The attributes follow from the level; a boost
/// with `deadline` is realised as SCHED_DEADLINE instead of SCHED_FIFO (an
/// RT task by EDF in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub level: Level,
    pub group: Option<CpuGroup>,
    pub watch: u32,
    pub deadline: Option<DeadlineParams>,
}

/// Nice of a task's autogroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupNice {
    /// 19: the demoted task's whole session weighs least.
    Lowest,
    /// What it was before the agent lowered it.
    Original,
}

/// One change to one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelOp {
    /// Into a demotion cgroup, or (None) back to its own.
    MoveCgroup(Option<CpuGroup>),
    SetAttr(SchedAttr),
    /// Journal: the task may be stopped (so a crash SIGCONTs it).
    JournalStop,
    Stop,
    Cont,
    /// Journal: the autogroup nice before the agent lowers it.
    JournalGroupNice,
    /// Only where the task has an autogroup (autogroup scheduling on).
    SetGroupNice(GroupNice),
    Watch(u32),
}

/// Levels that only get idle time: with demotion cgroups, realised in `idle`.
pub fn is_low(level: Level) -> bool {
    matches!(level, Level::Demote | Level::Background)
}

/// The attributes that realise `level`. `base` is what the task runs with
/// when the policy leaves it alone (its original attributes, or its job's
/// static request).
pub fn level_attr(level: Level, base: &SchedAttr, agent_priority: u32) -> SchedAttr {
    match level {
        Level::Normal | Level::Stop => *base,
        Level::Boost { prio } => {
            // Boosts stay below the agent so it can always end them.
            let cap = if agent_priority > 1 {
                agent_priority - 1
            } else {
                99
            };
            let mut a = SchedAttr::with_policy(SchedPolicy::Fifo, 0, u32::from(prio).clamp(1, cap));
            // A boost is never inherited by children the task forks.
            a.flags = FLAG_RESET_ON_FORK;
            a
        }
        Level::Background => SchedAttr::other(19),
        Level::Demote => SchedAttr::with_policy(SchedPolicy::Idle, 0, 0),
    }
}

/// SCHED_DEADLINE with `d`, reset on fork: a deadline task without it
/// cannot fork at all, and children must not inherit a reservation.
pub fn deadline_attr(d: &DeadlineParams) -> SchedAttr {
    let mut a = SchedAttr::with_policy(SchedPolicy::Deadline, 0, 0);
    a.runtime_ns = d.runtime_ns;
    a.deadline_ns = d.deadline_ns;
    a.period_ns = d.period_ns;
    a.flags = FLAG_RESET_ON_FORK;
    a
}

/// The attributes that realise `to` (see [`level_attr`]).
pub fn target_attr(to: &Target, base: &SchedAttr, agent_priority: u32) -> SchedAttr {
    match (to.level, &to.deadline) {
        (Level::Boost { .. }, Some(d)) => deadline_attr(d),
        (level, _) => level_attr(level, base, agent_priority),
    }
}

/// The ops that take a task from `from` to `to`, in order. Empty when
/// nothing changes.
pub fn plan(
    from: &Realisation,
    to: &Target,
    base: &SchedAttr,
    agent_priority: u32,
) -> Vec<KernelOp> {
    let mut ops = Vec::new();
    let moves = from.group != to.group;
    if moves && to.group != Some(CpuGroup::Idle) {
        ops.push(KernelOp::MoveCgroup(to.group));
    }
    if to.level == Level::Stop {
        if from.level != Level::Stop {
            ops.push(KernelOp::JournalStop);
            ops.push(KernelOp::Stop);
        }
    } else {
        let attr = target_attr(to, base, agent_priority);
        if attr != from.attr {
            ops.push(KernelOp::SetAttr(attr));
        }
        if from.level == Level::Stop {
            ops.push(KernelOp::Cont);
        }
    }
    if moves && to.group == Some(CpuGroup::Idle) {
        ops.push(KernelOp::MoveCgroup(to.group));
    }
    // With autogroup scheduling a job's session is its own CFS group: a
    // demoted task's group weight goes down with it. Not in the demotion
    // cgroups, where no autogroup applies.
    let was_low = is_low(from.level) && from.group.is_none();
    let now_low = is_low(to.level) && to.group.is_none();
    if was_low != now_low {
        if now_low {
            ops.push(KernelOp::JournalGroupNice);
            ops.push(KernelOp::SetGroupNice(GroupNice::Lowest));
        } else {
            ops.push(KernelOp::SetGroupNice(GroupNice::Original));
        }
    }
    if from.watch != to.watch {
        ops.push(KernelOp::Watch(to.watch));
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::{KernelOp::*, *};

    const PRIO: u32 = 50;
    const BOOST: Level = Level::Boost { prio: 10 };

    fn base() -> SchedAttr {
        SchedAttr::other(0)
    }

    fn at(level: Level, group: Option<CpuGroup>) -> Realisation {
        let attr = level_attr(level, &base(), PRIO);
        Realisation {
            level,
            attr,
            group,
            watch: 0,
        }
    }

    fn to(level: Level, group: Option<CpuGroup>) -> Target {
        Target {
            level,
            group,
            watch: 0,
            deadline: None,
        }
    }

    fn fifo10() -> SchedAttr {
        level_attr(BOOST, &base(), PRIO)
    }

    fn idle() -> SchedAttr {
        SchedAttr::with_policy(SchedPolicy::Idle, 0, 0)
    }

    /// Every level transition without demotion cgroups: (from, to, ops).
    #[test]
    fn every_level_transition_in_its_own_cgroup() {
        use Level::{Background, Demote, Normal};
        const STOP: Level = Level::Stop;
        let n = SchedAttr::other(0);
        let table: Vec<(Level, Level, Vec<KernelOp>)> = vec![
            (Normal, Normal, vec![]),
            (Normal, BOOST, vec![SetAttr(fifo10())]),
            (
                Normal,
                Demote,
                vec![
                    SetAttr(idle()),
                    JournalGroupNice,
                    SetGroupNice(GroupNice::Lowest),
                ],
            ),
            (
                Normal,
                Background,
                vec![
                    SetAttr(SchedAttr::other(19)),
                    JournalGroupNice,
                    SetGroupNice(GroupNice::Lowest),
                ],
            ),
            (Normal, STOP, vec![JournalStop, Stop]),
            (BOOST, Normal, vec![SetAttr(n)]),
            (BOOST, BOOST, vec![]),
            (
                BOOST,
                Demote,
                vec![
                    SetAttr(idle()),
                    JournalGroupNice,
                    SetGroupNice(GroupNice::Lowest),
                ],
            ),
            (BOOST, STOP, vec![JournalStop, Stop]),
            (
                Demote,
                Normal,
                vec![SetAttr(n), SetGroupNice(GroupNice::Original)],
            ),
            (
                Demote,
                BOOST,
                vec![SetAttr(fifo10()), SetGroupNice(GroupNice::Original)],
            ),
            (Demote, Background, vec![SetAttr(SchedAttr::other(19))]),
            (
                Demote,
                STOP,
                vec![JournalStop, Stop, SetGroupNice(GroupNice::Original)],
            ),
            (STOP, Normal, vec![Cont]),
            (
                STOP,
                Demote,
                vec![
                    SetAttr(idle()),
                    Cont,
                    JournalGroupNice,
                    SetGroupNice(GroupNice::Lowest),
                ],
            ),
            (STOP, BOOST, vec![SetAttr(fifo10()), Cont]),
            (STOP, STOP, vec![]),
        ];
        for (from, target, want) in table {
            let mut f = at(from, None);
            if from == STOP {
                // Stopped from Normal: it kept its Normal attributes.
                f.attr = n;
            }
            assert_eq!(
                plan(&f, &to(target, None), &base(), PRIO),
                want,
                "{from:?} -> {target:?}"
            );
        }
    }

    #[test]
    fn into_idle_after_losing_real_time_into_active_before_gaining_it() {
        let ops = plan(
            &at(BOOST, Some(CpuGroup::Active)),
            &to(Level::Demote, Some(CpuGroup::Idle)),
            &base(),
            PRIO,
        );
        assert_eq!(
            ops,
            vec![SetAttr(idle()), MoveCgroup(Some(CpuGroup::Idle))],
            "no autogroup nice inside the demotion cgroups"
        );
        let ops = plan(
            &at(Level::Demote, Some(CpuGroup::Idle)),
            &to(BOOST, Some(CpuGroup::Active)),
            &base(),
            PRIO,
        );
        assert_eq!(
            ops,
            vec![MoveCgroup(Some(CpuGroup::Active)), SetAttr(fifo10())]
        );
    }

    #[test]
    fn leaving_the_demotion_cgroups_demoted_lowers_the_autogroup() {
        let ops = plan(
            &at(Level::Demote, Some(CpuGroup::Idle)),
            &to(Level::Demote, None),
            &base(),
            PRIO,
        );
        assert_eq!(
            ops,
            vec![
                MoveCgroup(None),
                JournalGroupNice,
                SetGroupNice(GroupNice::Lowest)
            ]
        );
    }

    #[test]
    fn normal_task_moves_between_active_and_its_own_cgroup_without_attributes() {
        let ops = plan(
            &at(Level::Normal, None),
            &to(Level::Normal, Some(CpuGroup::Active)),
            &base(),
            PRIO,
        );
        assert_eq!(ops, vec![MoveCgroup(Some(CpuGroup::Active))]);
    }

    #[test]
    fn journal_comes_before_the_change_it_protects() {
        for (from, target) in [
            (Level::Normal, Level::Stop),
            (Level::Normal, Level::Demote),
            (BOOST, Level::Background),
        ] {
            let ops = plan(&at(from, None), &to(target, None), &base(), PRIO);
            let journal = ops
                .iter()
                .position(|o| matches!(o, JournalStop | JournalGroupNice));
            let change = ops
                .iter()
                .position(|o| matches!(o, Stop | SetGroupNice(GroupNice::Lowest)));
            assert!(
                journal.unwrap() < change.unwrap(),
                "{from:?} -> {target:?}: {ops:?}"
            );
        }
    }

    #[test]
    fn job_static_request_is_set_at_normal() {
        let request = SchedAttr::other(5);
        let original = at(Level::Normal, None);
        let ops = plan(&original, &to(Level::Normal, None), &request, PRIO);
        assert_eq!(ops, vec![SetAttr(request)]);
        let boosted = Realisation {
            attr: fifo10(),
            ..at(BOOST, None)
        };
        assert_eq!(
            plan(&boosted, &to(Level::Normal, None), &request, PRIO),
            vec![SetAttr(request)]
        );
    }

    #[test]
    fn only_the_watch_changes() {
        let ops = plan(
            &at(BOOST, None),
            &Target {
                watch: 3,
                ..to(BOOST, None)
            },
            &base(),
            PRIO,
        );
        assert_eq!(ops, vec![Watch(3)]);
    }

    #[test]
    fn a_boost_with_deadline_parameters_is_sched_deadline_reset_on_fork() {
        let d = DeadlineParams {
            runtime_ns: 2_000_000,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
        };
        let target = Target {
            deadline: Some(d),
            ..to(BOOST, None)
        };
        let ops = plan(&at(Level::Normal, None), &target, &base(), PRIO);
        let [SetAttr(a)] = ops.as_slice() else {
            panic!("{ops:?}");
        };
        assert_eq!(a.policy, SchedPolicy::Deadline);
        assert_eq!(
            (a.runtime_ns, a.deadline_ns, a.period_ns),
            (2_000_000, 10_000_000, 10_000_000)
        );
        assert_ne!(a.flags & FLAG_RESET_ON_FORK, 0);
        // Held: the deadline parameters do not apply to other levels.
        let held = Target {
            level: Level::Demote,
            ..target
        };
        let from = Realisation {
            attr: *a,
            ..at(BOOST, None)
        };
        assert_eq!(plan(&from, &held, &base(), PRIO)[0], SetAttr(idle()));
    }

    #[test]
    fn boost_is_capped_below_the_agent_and_not_inherited() {
        let a = level_attr(Level::Boost { prio: 99 }, &base(), PRIO);
        assert_eq!((a.policy, a.priority), (SchedPolicy::Fifo, PRIO - 1));
        assert_ne!(a.flags & FLAG_RESET_ON_FORK, 0);
    }
}
