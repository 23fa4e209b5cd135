//! What each policy needs to hear from the kernel, and when: the one place
//! that decides which message arrivals and spin starts wake the agent.
//!
//! Waking the agent costs a cross-CPU wakeup and a context switch on a node
//! whose CPUs the jobs want; every arrival it does not need is only counted by
//! the eBPF programs and read at the policy's tick. So each policy states
//! what it decides on at once ([`WakeInterest`]), and each task's current
//! level and reason say what the eBPF side must report for it now
//! ([`TaskWatch`]). The agent turns both into the eBPF settings and the
//! per-task watch flags; nothing else decides it.
use super::{Level, PolicyKind, Reason, config::LocalPolicyConfig, ids::us_to_ns};

/// Which arrivals for a receiver that is ready but not running wake the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffCpuArrivals {
    /// None: the policy reads the arrival counters at its tick.
    Never,
    /// For a receiver preempted while it waited (spun) for its message.
    WhileWaiting,
    /// For any ready receiver: preempted while waiting or while computing.
    WhileReady,
}

/// What a policy decides on the moment it happens (node-wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeInterest {
    pub off_cpu_arrivals: OffCpuArrivals,
    /// A boosted task that starts waiting again: its boost ends at once.
    /// Not for DCS's quantum boosts, which last their quantum.
    pub boosted_spin_start: bool,
    /// A boost ends only at a wait after the task sent (answered): the agent
    /// reads the task's counters (its sends) when an arrival for it or its
    /// spin start is reported, before the policy decides.
    pub sends_before_decisions: bool,
    /// Report a spin episode the moment its on-CPU spin time passes this,
    /// ns (0: never): the fixed spin threshold of a spin-block or
    /// spin-yield policy, which then needs no fast tick to find its
    /// spinners ([`LocalPolicy::needs_spin_ticks`](super::LocalPolicy)). A
    /// learned threshold differs per task and is found by the tick.
    pub long_spin_ns: u64,
}

impl WakeInterest {
    /// A policy that decides nothing at once (the baseline, or a policy
    /// switched off).
    pub const NOTHING: WakeInterest = WakeInterest {
        off_cpu_arrivals: OffCpuArrivals::Never,
        boosted_spin_start: false,
        sends_before_decisions: false,
        long_spin_ns: 0,
    };

    /// What `cfg`'s policy needs. DCS and DCS-SB decide on an arrival for a
    /// ready receiver (the boost is their whole point); PB and PB-SB are told
    /// of an arrival for a receiver preempted while it waited (the task a
    /// periodic decision prefers) instead of deciding at a fast tick; the
    /// others read arrivals at their tick, and are told of every arrival for
    /// a task they hold back through [`TaskWatch::held`].
    pub fn of(cfg: &LocalPolicyConfig) -> Self {
        let dcs = matches!(cfg.kind, PolicyKind::Dcs | PolicyKind::DcsSb);
        let pb = matches!(cfg.kind, PolicyKind::Pb | PolicyKind::PbSb);
        if cfg.kind == PolicyKind::Local {
            return Self::NOTHING;
        }
        WakeInterest {
            off_cpu_arrivals: match (dcs, cfg.dcs.boost_computing) {
                (false, _) if pb => OffCpuArrivals::WhileWaiting,
                (false, _) => OffCpuArrivals::Never,
                (true, false) => OffCpuArrivals::WhileWaiting,
                (true, true) => OffCpuArrivals::WhileReady,
            },
            boosted_spin_start: !(dcs && !cfg.dcs.ends_on_wait(cfg.kind)),
            sends_before_decisions: match cfg.kind {
                PolicyKind::Dcs | PolicyKind::DcsSb => cfg.dcs.end_on_wait_after_send,
                PolicyKind::Sb | PolicyKind::PbSb => {
                    cfg.sb.wake_boost && cfg.sb.wake_boost_after_send
                }
                _ => false,
            },
            // SB without `wake_boost` hands its task back without a boost at
            // a threshold priced for a boosted wake (500 µs): blocked the
            // moment a spin passes it, the task would wait out the
            // competitor's time slice for every message; it finds its
            // spinners at its tick. SY's threshold is priced for exactly
            // that boost-less wake (see `SpinYieldParams`), so SY is told
            // like the others and needs no fast tick.
            long_spin_ns: match cfg.kind {
                PolicyKind::DcsSb if !cfg.sb.learn_spin_time => us_to_ns(cfg.sb.spin_threshold_us),
                PolicyKind::Sb | PolicyKind::PbSb
                    if !cfg.sb.learn_spin_time && cfg.sb.wake_boost =>
                {
                    us_to_ns(cfg.sb.spin_threshold_us)
                }
                PolicyKind::Sy if !cfg.sy.learn_spin_time => us_to_ns(cfg.sy.spin_threshold_us),
                _ => 0,
            },
        }
    }
}

/// What the eBPF side must do for one task now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskWatch {
    /// The task is boosted: it runs as soon as it can, so its arrivals wake
    /// nobody.
    pub boosted: bool,
    /// Report the start of its next spin episode (its boost ends then).
    pub spin_start: bool,
    /// The policy holds it back until its next message: report every
    /// arrival, wherever the task is.
    pub held: bool,
}

impl TaskWatch {
    /// For a task whose realised level is `applied`, while the policy wants
    /// `wanted` (None: Normal) for it. A hold only counts when it is the
    /// policy's own and waits for a message ([`Reason::awaits_message`]): a
    /// gang slice's demotion or an FCS class priority is not ended by a
    /// message, and reporting its arrivals would wake the agent for nothing.
    pub fn of(interest: &WakeInterest, applied: Level, wanted: Option<(Level, Reason)>) -> Self {
        if applied.is_boost() {
            return TaskWatch {
                boosted: true,
                spin_start: interest.boosted_spin_start,
                held: false,
            };
        }
        let held = matches!(applied, Level::Demote | Level::Stop | Level::Background)
            && wanted.is_some_and(|(level, why)| level == applied && why.awaits_message());
        TaskWatch {
            held,
            ..TaskWatch::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: PolicyKind, end_on_wait: bool, boost_computing: bool) -> LocalPolicyConfig {
        let mut c = LocalPolicyConfig::for_kind(kind);
        c.dcs.end_on_wait = Some(end_on_wait);
        c.dcs.boost_computing = boost_computing;
        c
    }

    /// Every policy with every combination of the switches that change what
    /// it hears: (policy, end_on_wait, boost_computing) -> (arrivals, boosted spin start).
    #[test]
    fn every_policy_and_switch_states_what_wakes_the_agent() {
        use OffCpuArrivals::*;
        use PolicyKind as P;
        for kind in PolicyKind::ALL {
            for end_on_wait in [false, true] {
                for boost_computing in [false, true] {
                    let got = WakeInterest::of(&cfg(kind, end_on_wait, boost_computing));
                    let dcs = matches!(kind, P::Dcs | P::DcsSb);
                    let want = match kind {
                        P::Local => (Never, false),
                        _ if dcs => (
                            if boost_computing {
                                WhileReady
                            } else {
                                WhileWaiting
                            },
                            end_on_wait,
                        ),
                        P::Pb | P::PbSb => (WhileWaiting, true),
                        P::Sb | P::Sy | P::Fcs => (Never, true),
                        _ => unreachable!(),
                    };
                    assert_eq!(
                        (got.off_cpu_arrivals, got.boosted_spin_start),
                        want,
                        "{kind:?} end_on_wait={end_on_wait} boost_computing={boost_computing}"
                    );
                }
            }
        }
    }

    #[test]
    fn only_a_boost_that_waits_for_the_answer_makes_the_agent_read_sends_first() {
        for kind in PolicyKind::ALL {
            assert!(
                !WakeInterest::of(&LocalPolicyConfig::for_kind(kind)).sends_before_decisions,
                "{kind:?} by default"
            );
        }
        let mut c = LocalPolicyConfig::for_kind(PolicyKind::Dcs);
        c.dcs.end_on_wait_after_send = true;
        assert!(WakeInterest::of(&c).sends_before_decisions);
        for kind in [PolicyKind::Sb, PolicyKind::PbSb] {
            let mut c = LocalPolicyConfig::for_kind(kind);
            c.sb.wake_boost_after_send = true;
            assert!(WakeInterest::of(&c).sends_before_decisions, "{kind:?}");
            c.sb.wake_boost = false;
            assert!(!WakeInterest::of(&c).sends_before_decisions, "{kind:?}");
        }
    }

    /// Ranks of real MPI jobs always spin: a policy that acts on a fixed spin
    /// threshold and boosts the task it wakes hears of the spin that passed
    /// it from the kernel side and needs no fast tick; a learned threshold,
    /// FCS's counting in gang slots and SB's 500 µs without its wake boost
    /// still use the tick. PB asks for its period itself while a decision
    /// can act.
    #[test]
    fn a_fixed_spin_threshold_is_reported_by_the_kernel_so_no_spin_tick_is_needed() {
        use crate::local::LocalPolicy as _;
        use PolicyKind as P;
        for kind in PolicyKind::ALL {
            let c = LocalPolicyConfig::for_kind(kind);
            let got = WakeInterest::of(&c).long_spin_ns;
            let want = match kind {
                P::Sb | P::PbSb | P::DcsSb => 500_000,
                P::Sy => 2_000_000,
                _ => 0,
            };
            assert_eq!(got, want, "{kind:?}");
            let ticks = crate::local::build_policy(&c).unwrap().needs_spin_ticks();
            // FCS without gang slots acts on nothing; PB asks for its
            // period while a decision can act.
            let want_ticks = kind == P::Local;
            assert_eq!(ticks, want_ticks, "{kind:?}");
        }
        let mut c = LocalPolicyConfig::for_kind(P::Sb);
        c.sb.learn_spin_time = true;
        assert_eq!(WakeInterest::of(&c).long_spin_ns, 0, "learned: per task");
        assert!(crate::local::build_policy(&c).unwrap().needs_spin_ticks());
        let mut c = LocalPolicyConfig::for_kind(P::Sb);
        c.sb.spin_threshold_us = 300;
        assert_eq!(WakeInterest::of(&c).long_spin_ns, 300_000);
        c.sb.wake_boost = false;
        assert!(
            crate::local::build_policy(&c).unwrap().needs_spin_ticks(),
            "woken without a boost, as SY"
        );
        assert_eq!(WakeInterest::of(&c).long_spin_ns, 0, "as SY");
    }

    /// SY hands a task back at its message without a boost, and its
    /// threshold is priced for that (the cost of a yield): the kernel's
    /// report of a spin passing it yields the task at once, and SY keeps
    /// the quiet tick (its 1 ms tick preempted a rank every millisecond).
    /// A learned threshold differs per task and is found by the tick.
    #[test]
    fn spin_yield_is_told_of_spins_past_its_own_threshold_and_needs_no_fast_tick() {
        use crate::local::LocalPolicy as _;
        for threshold_us in [100, 500, 5_000] {
            let mut c = LocalPolicyConfig::for_kind(PolicyKind::Sy);
            c.sy.spin_threshold_us = threshold_us;
            assert_eq!(
                WakeInterest::of(&c).long_spin_ns,
                threshold_us * 1_000,
                "{threshold_us} µs"
            );
            assert!(!crate::local::build_policy(&c).unwrap().needs_spin_ticks());
            c.sy.learn_spin_time = true;
            assert_eq!(WakeInterest::of(&c).long_spin_ns, 0, "learned");
            assert!(crate::local::build_policy(&c).unwrap().needs_spin_ticks());
        }
    }

    #[test]
    fn boosted_task_is_marked_boosted_and_watched_for_its_next_wait_per_policy() {
        let boost = Level::Boost { prio: 10 };
        let per_message = WakeInterest::of(&cfg(PolicyKind::Dcs, true, false));
        let quantum = WakeInterest::of(&cfg(PolicyKind::Dcs, false, false));
        let w = TaskWatch::of(&per_message, boost, Some((boost, Reason::ArrivalBoost)));
        assert_eq!(
            w,
            TaskWatch {
                boosted: true,
                spin_start: true,
                held: false
            }
        );
        let w = TaskWatch::of(&quantum, boost, Some((boost, Reason::ArrivalBoost)));
        assert!(
            w.boosted && !w.spin_start,
            "a quantum boost lasts its quantum"
        );
    }

    #[test]
    fn spin_block_hold_reports_every_arrival() {
        let i = WakeInterest::of(&LocalPolicyConfig::for_kind(PolicyKind::Sb));
        for level in [Level::Demote, Level::Stop, Level::Background] {
            let w = TaskWatch::of(&i, level, Some((level, Reason::SpinThresholdBlock)));
            assert!(w.held && !w.boosted, "{level:?}");
        }
    }

    #[test]
    fn class_priority_and_gang_demotion_are_not_waits() {
        let i = WakeInterest::of(&LocalPolicyConfig::for_kind(PolicyKind::Fcs));
        let w = TaskWatch::of(
            &i,
            Level::Background,
            Some((Level::Background, Reason::FcsGroup)),
        );
        assert_eq!(w, TaskWatch::default(), "an FCS group is not a wait");
        // The gang overlay demotes a task the policy leaves at Normal.
        assert_eq!(TaskWatch::of(&i, Level::Demote, None), TaskWatch::default());
        // The overlay stops a task the policy had demoted to wait: the
        // applied level is not the policy's, its message does not end it.
        let w = TaskWatch::of(
            &i,
            Level::Stop,
            Some((Level::Demote, Reason::SpinThresholdBlock)),
        );
        assert_eq!(w, TaskWatch::default());
    }

    #[test]
    fn normal_task_needs_nothing() {
        for kind in PolicyKind::ALL {
            let i = WakeInterest::of(&LocalPolicyConfig::for_kind(kind));
            assert_eq!(TaskWatch::of(&i, Level::Normal, None), TaskWatch::default());
        }
    }
}
