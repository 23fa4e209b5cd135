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
use std::collections::{BTreeMap, BTreeSet};

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
    // With autogroup scheduling a job's session is its own CFS group: a
    // demoted task's group weight goes down with it. Not in the demotion
    // cgroups, where no autogroup applies.
    let was_low = is_low(from.level) && from.group.is_none();
    let now_low = is_low(to.level) && to.group.is_none();
    // Leaving a low level, the group's weight comes back before the task's
    // attributes: a change of the task's priority value (nice 19 back to
    // its own) makes the kernel check then and there whether the task
    // should preempt the running one, and that check compares the groups;
    // made with the group still at nice 19 it finds a far deadline and
    // never preempts.
    if was_low && !now_low {
        ops.push(KernelOp::SetGroupNice(GroupNice::Original));
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
    if now_low && !was_low {
        ops.push(KernelOp::JournalGroupNice);
        ops.push(KernelOp::SetGroupNice(GroupNice::Lowest));
    }
    if from.watch != to.watch {
        ops.push(KernelOp::Watch(to.watch));
    }
    ops
}

/// One task's plan inside a batch of realisations, with the process
/// (thread group) it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskPlan {
    pub tid: u32,
    pub tgid: u32,
    pub ops: Vec<KernelOp>,
}

impl TaskPlan {
    fn has(&self, op: KernelOp) -> bool {
        self.ops.contains(&op)
    }
}

/// SIGSTOP and SIGCONT act on a whole process: one signal to it stops or
/// continues all its threads (and each redundant one wakes them all
/// again). So a batch sends at most one per process, carried by the last
/// of its tasks that needs it: every other task of the process has written
/// its journal entry (before a stop) or got its attributes (before a
/// continue) by then, and is realised at its level through that one signal.
///
/// - A process the agent already holds stopped (`held_stopped`: one of
///   its tasks is realised at [`Level::Stop`]) gets no SIGSTOP for a task
///   of it found later: the whole group is stopped already.
/// - A process one of whose tasks must run again in this batch is
///   continued and not stopped, whatever its other tasks want: a signal
///   cannot stop one thread of a process and let another run, and a task
///   meant to run must never be left stopped.
/// - Processes are told apart by their tgid only: a child forked (or a
///   program exec'd in a new process) is a process of its own and gets its
///   own signal; an exec keeps the tgid.
///
/// Returns the processes signalled, with the index of the plan carrying
/// each signal.
pub fn signal_each_process_once(
    plans: &mut [TaskPlan],
    held_stopped: &BTreeSet<u32>,
) -> Vec<(u32, usize)> {
    let mut carrier: BTreeMap<u32, (KernelOp, usize)> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        if p.has(KernelOp::Cont) {
            carrier.insert(p.tgid, (KernelOp::Cont, i));
        } else if p.has(KernelOp::Stop) && !held_stopped.contains(&p.tgid) {
            match carrier.get(&p.tgid) {
                Some((KernelOp::Cont, _)) => {}
                _ => {
                    carrier.insert(p.tgid, (KernelOp::Stop, i));
                }
            }
        }
    }
    for (i, p) in plans.iter_mut().enumerate() {
        for op in [KernelOp::Stop, KernelOp::Cont] {
            if p.has(op) && carrier.get(&p.tgid) != Some(&(op, i)) {
                p.ops.retain(|o| *o != op);
            }
        }
    }
    carrier
        .into_iter()
        .map(|(tgid, (_, i))| (tgid, i))
        .collect()
}

/// The order in which a batch's plans are carried out: the processes that
/// are continued first (a slice's incoming job gets its CPU back before the
/// agent spends time on anything else), then the others; the tasks of one
/// process together, in the order given (so the one carrying its signal
/// comes last among those that need it).
pub fn execution_order(plans: &[TaskPlan]) -> Vec<usize> {
    let continued: BTreeSet<u32> = plans
        .iter()
        .filter(|p| p.has(KernelOp::Cont))
        .map(|p| p.tgid)
        .collect();
    let mut first: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        first.entry(p.tgid).or_insert(i);
    }
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&i| {
        let tgid = plans[i].tgid;
        (!continued.contains(&tgid), first[&tgid])
    });
    order
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
                vec![SetGroupNice(GroupNice::Original), SetAttr(n)],
            ),
            (
                Demote,
                BOOST,
                vec![SetGroupNice(GroupNice::Original), SetAttr(fifo10())],
            ),
            (Demote, Background, vec![SetAttr(SchedAttr::other(19))]),
            (
                Demote,
                STOP,
                vec![SetGroupNice(GroupNice::Original), JournalStop, Stop],
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

    /// SY yielding at nice 19 hands its task back by a change of the
    /// task's priority value, which makes the kernel check a preemption
    /// there and then, comparing the job's autogroup with the running
    /// one's: the group must have its own weight back by then.
    #[test]
    fn a_task_handed_back_from_nice_19_gets_its_group_weight_back_before_its_own_priority() {
        for from in [Level::Background, Level::Demote] {
            for target in [Level::Normal, BOOST] {
                let ops = plan(&at(from, None), &to(target, None), &base(), PRIO);
                let group = ops
                    .iter()
                    .position(|o| *o == SetGroupNice(GroupNice::Original));
                let attr = ops.iter().position(|o| matches!(o, SetAttr(_)));
                assert!(
                    group.unwrap() < attr.unwrap(),
                    "{from:?} -> {target:?}: {ops:?}"
                );
            }
        }
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

    fn task(tid: u32, tgid: u32, ops: Vec<KernelOp>) -> TaskPlan {
        TaskPlan { tid, tgid, ops }
    }

    fn signals(plans: &[TaskPlan]) -> Vec<(u32, KernelOp)> {
        plans
            .iter()
            .flat_map(|p| {
                p.ops
                    .iter()
                    .filter(|o| matches!(o, Stop | Cont))
                    .map(move |o| (p.tgid, *o))
            })
            .collect()
    }

    /// An OpenMPI rank (three threads) and its launcher shell leave their
    /// slice: one SIGSTOP per process, and every thread keeps its journal
    /// entry (a crash still continues each).
    #[test]
    fn a_multi_threaded_rank_leaving_its_slice_gets_one_sigstop() {
        let mut plans = vec![
            task(10, 10, vec![JournalStop, Stop]),
            task(20, 20, vec![JournalStop, Stop]),
            task(21, 20, vec![JournalStop, Stop]),
            task(22, 20, vec![JournalStop, Stop]),
        ];
        let carriers = signal_each_process_once(&mut plans, &Default::default());
        assert_eq!(signals(&plans), vec![(10, Stop), (20, Stop)]);
        assert!(plans.iter().all(|p| p.ops.contains(&JournalStop)));
        assert_eq!(
            carriers,
            vec![(10, 0), (20, 3)],
            "the last thread carries the signal, after every journal entry"
        );
        assert_eq!(plans[1].ops, vec![JournalStop]);
    }

    #[test]
    fn the_incoming_job_is_continued_once_per_process_before_the_outgoing_is_stopped() {
        let mut plans = vec![
            task(10, 10, vec![JournalStop, Stop]),
            task(11, 10, vec![JournalStop, Stop]),
            task(20, 20, vec![SetAttr(fifo10()), Cont]),
            task(21, 20, vec![SetAttr(fifo10()), Cont]),
        ];
        signal_each_process_once(&mut plans, &Default::default());
        let order = execution_order(&plans);
        assert_eq!(order, vec![2, 3, 0, 1]);
        assert_eq!(
            plans[2].ops,
            vec![SetAttr(fifo10())],
            "every thread has its attributes before the process continues"
        );
        let sent: Vec<_> = order
            .iter()
            .flat_map(|&i| signals(std::slice::from_ref(&plans[i])))
            .collect();
        assert_eq!(sent, vec![(20, Cont), (10, Stop)]);
    }

    /// A thread of a process the agent holds stopped, found later (adopted
    /// by a rescan while the job is out of its slice): the process is
    /// stopped already, so no signal; it is realised at Stop all the same.
    #[test]
    fn a_thread_of_an_already_stopped_process_gets_no_signal() {
        let mut plans = vec![task(22, 20, vec![JournalStop, Stop])];
        signal_each_process_once(&mut plans, &[20].into());
        assert_eq!(plans[0].ops, vec![JournalStop]);
        // A process of its own (forked mid-slice) is stopped by its own signal.
        let mut plans = vec![task(30, 30, vec![JournalStop, Stop])];
        signal_each_process_once(&mut plans, &[20].into());
        assert_eq!(signals(&plans), vec![(30, Stop)]);
    }

    /// A child forked mid-slice, then the slice ends: parent and child are
    /// two processes, each stopped by its own SIGSTOP; after an exec the
    /// process keeps its tgid and still gets exactly one.
    #[test]
    fn a_child_forked_mid_slice_gets_its_own_signal() {
        let mut plans = vec![
            task(20, 20, vec![JournalStop, Stop]),
            task(21, 20, vec![JournalStop, Stop]),
            task(40, 40, vec![JournalStop, Stop]),
        ];
        signal_each_process_once(&mut plans, &Default::default());
        assert_eq!(signals(&plans), vec![(20, Stop), (40, Stop)]);
    }

    /// Threads of one process wanted at different levels in one batch (a
    /// spin-block stop of one thread as its job's slice begins): a signal
    /// acts on the whole process, and a thread meant to run must not stay
    /// stopped, so the process is continued and not stopped.
    #[test]
    fn a_process_with_a_thread_that_must_run_is_continued_not_stopped() {
        let mut plans = vec![
            task(20, 20, vec![JournalStop, Stop]),
            task(21, 20, vec![Cont]),
            task(22, 20, vec![Cont]),
        ];
        signal_each_process_once(&mut plans, &[20].into());
        assert_eq!(signals(&plans), vec![(20, Cont)]);
    }
}
