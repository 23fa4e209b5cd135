//! PB and PB-SB, situation by situation.

use super::harness::*;
use crate::local::{Level, LocalPolicy, PolicyKind, Reason, TaskId};

/// Four tasks on CPU 0, added T1..T4 (the round-robin order). T1, T3, T4 are
/// preempted while computing; T2 runs and starts spinning at 100 us.
fn t2_spinning_others_ready(kind: PolicyKind) -> Harness {
    let mut h = Harness::of_kind(kind);
    for (task, job) in [(T1, JA), (T2, JB), (T3, JC), (T4, JA)] {
        h.add(task, job, 0);
    }
    for task in [T1, T3, T4] {
        h.run(task, 0, 0);
        h.preempt(task, 0);
    }
    h.run(T2, 0, 0);
    h.spin(T2, us(100));
    h
}

fn periodic_boosts(h: &Harness) -> Vec<(u64, TaskId)> {
    h.log
        .iter()
        .filter_map(|&(t, action)| match action {
            crate::local::Action::SetLevel { task, reason, .. } => {
                (reason == Reason::PeriodicBoost).then_some((t, task))
            }
            crate::local::Action::Refused { .. } => None,
        })
        .collect()
}

/// `task` takes CPU 0 from `from` at `at` and starts spinning 100 us later.
fn takes_cpu_and_spins(h: &mut Harness, from: TaskId, task: TaskId, at: u64) {
    h.preempt(from, at);
    h.run(task, 0, at);
    h.spin(task, at + us(100));
}

#[test]
fn periodic_boost_picks_next_ready_task_round_robin() {
    let mut h = t2_spinning_others_ready(PolicyKind::Pb);
    h.advance_to(ms(1));
    assert_eq!(
        h.level(T3),
        BOOST10,
        "first ready task after the spinner T2"
    );
    takes_cpu_and_spins(&mut h, T2, T3, ms(1) + us(10));
    assert_eq!(
        h.last(T3),
        Some((ms(1) + us(110), Level::Normal, Reason::BoostEndWaiting))
    );
    h.advance_to(ms(2));
    takes_cpu_and_spins(&mut h, T3, T4, ms(2) + us(10));
    h.advance_to(ms(3));
    assert_eq!(
        periodic_boosts(&h),
        vec![(ms(1), T3), (ms(2), T4), (ms(3), T1)],
        "wraps around after T4"
    );
}

#[test]
fn periodic_boost_prefers_task_with_pending_message() {
    let mut h = t2_spinning_others_ready(PolicyKind::Pb);
    h.arrive(T4, us(500), false);
    h.advance_to(ms(1));
    assert_eq!(periodic_boosts(&h), vec![(ms(1), T4)]);
    assert_eq!(h.level(T3), Level::Normal);
}

#[test]
fn periodic_boost_leaves_productive_task_alone() {
    let mut h = Harness::of_kind(PolicyKind::Pb);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    h.preempt(T1, 0);
    h.run(T2, 0, 0);
    h.advance_to(ms(10));
    assert!(h.log.is_empty(), "T2 computes");
    h.spin(T2, ms(10) + us(100));
    h.arrive(T2, ms(10) + us(200), true);
    h.advance_to(ms(20));
    assert!(
        h.log.is_empty(),
        "T2's message is there: it is about to work"
    );
}

#[test]
fn periodic_boost_lasts_until_next_decision() {
    let mut h = t2_spinning_others_ready(PolicyKind::Pb);
    h.advance_to(ms(1));
    assert_eq!(h.level(T3), BOOST10);
    h.advance_to(ms(2));
    assert_eq!(
        h.history(T3).len(),
        1,
        "still not running: picked again, no flapping"
    );
    h.preempt(T2, ms(2) + us(10));
    h.run(T3, 0, ms(2) + us(10)); // computes
    h.advance_to(ms(3));
    assert_eq!(
        h.last(T3),
        Some((ms(3), Level::Normal, Reason::PeriodicBoostEnd))
    );
}

#[test]
fn periodic_boost_asks_for_a_tick_every_period() {
    let mut h = t2_spinning_others_ready(PolicyKind::Pb);
    assert_eq!(h.policy.next_wakeup(), Some(ms(1)));
    h.advance_to(ms(1));
    assert_eq!(h.policy.next_wakeup(), Some(ms(2)));
}

#[test]
fn pb_sb_blocks_spinner_and_boosts_worker() {
    let mut h = t2_spinning_others_ready(PolicyKind::PbSb);
    h.advance_to(us(600));
    assert_eq!(
        h.last(T2),
        Some((us(600), Level::Demote, Reason::SpinThresholdBlock))
    );
    h.advance_to(ms(1));
    assert_eq!(h.last(T3), Some((ms(1), BOOST10, Reason::PeriodicBoost)));
}

/// T1 (job A) was preempted computing, T2 (job B) runs and spins; a tick
/// saw A with `a_ms` and B with `b_ms` of CPU in the current window.
fn compute_neighbour_with_cpu(a_ms: u64, b_ms: u64) -> Harness {
    let mut h = Harness::of_kind(PolicyKind::Pb);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    h.preempt(T1, us(10));
    h.run(T2, 0, us(10));
    h.spin(T2, us(20));
    let task = |task, on_cpu, spinning_since, oncpu_ns| crate::local::TaskSnapshot {
        task,
        on_cpu,
        spinning_since,
        pending_message: false,
        preempted: !on_cpu,
        last_arrival_ns: 0,
        last_wait_end_ns: 0,
        oncpu_ns,
        arrivals: 0,
    };
    let seen = |a_ns, b_ns| crate::local::NodeSnapshot {
        tasks: vec![
            task(T1, false, None, a_ns),
            task(T2, true, Some(us(20)), b_ns),
        ],
        cpus: vec![crate::local::CpuSnapshot {
            cpu: 0,
            running: Some(T2),
        }],
    };
    // The first look is the baseline; the second one counts the CPU time.
    h.tick_with(us(500), &seen(0, 0));
    h.tick_with(us(900), &seen(ms(a_ms), ms(b_ms)));
    h
}

#[test]
fn computing_neighbour_past_an_equal_share_is_not_boosted_over_a_spinner() {
    // 52 of 100 ms: within the 5 % slack, but past an equal share.
    let mut h = compute_neighbour_with_cpu(52, 48);
    h.advance_to(ms(1));
    assert_eq!(periodic_boosts(&h), vec![], "it only computes: no slack");
    assert_eq!(h.level(T1), Level::Normal);
}

#[test]
fn computing_neighbour_under_an_equal_share_is_boosted_over_a_spinner() {
    let mut h = compute_neighbour_with_cpu(48, 52);
    h.advance_to(ms(1));
    assert_eq!(periodic_boosts(&h), vec![(ms(1), T1)]);
}

#[test]
fn neighbour_whose_message_came_keeps_the_slack_past_an_equal_share() {
    let mut h = compute_neighbour_with_cpu(52, 48);
    h.arrive(T1, ms(1) - us(50), false);
    h.advance_to(ms(1));
    assert_eq!(periodic_boosts(&h), vec![(ms(1), T1)]);
}

#[test]
fn periodic_boost_asks_for_no_tick_while_nothing_spins() {
    let mut h = Harness::of_kind(PolicyKind::Pb);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T2, 0, 0);
    h.preempt(T2, us(10)); // preempted while computing
    h.run(T1, 0, us(10)); // computing
    assert_eq!(
        h.policy.next_wakeup(),
        None,
        "no spinner: nothing to decide"
    );
    h.spin(T1, us(300));
    assert_eq!(h.policy.next_wakeup(), Some(ms(1)), "on the period grid");
}

/// Two ranks of two jobs on CPU 0, as on a fully subscribed node of real
/// MPI: T1 (job A) runs and waits for its peer, T2 (job B) was preempted
/// while it waited for its own.
fn both_ranks_waiting(kind: PolicyKind) -> Harness {
    let mut h = Harness::of_kind(kind);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T2, 0, 0);
    h.spin(T2, us(50));
    h.preempt(T2, us(100));
    h.run(T1, 0, us(100));
    h.spin(T1, us(150));
    h
}

/// Ranks of real MPI always spin: a decision per period whenever one spins
/// preempted a rank on its CPU every millisecond for nothing (the agent's
/// wake-up makes the kernel pick again, mostly the other job). With
/// nobody else able to use the CPU, PB asks for no period at all.
#[test]
fn ranks_that_all_wait_for_messages_ask_for_no_periodic_decision() {
    let mut h = both_ranks_waiting(PolicyKind::Pb);
    assert_eq!(h.policy.next_wakeup(), None, "nothing a decision could do");
    h.advance_to(ms(20));
    assert!(h.log.is_empty(), "no boost, no wake-up: {:?}", h.log);
    assert!(
        !h.policy.needs_spin_ticks(),
        "no fast tick for spinners either"
    );
}

/// The message of the rank preempted while it waited comes (the kernel
/// reports it): the next decision, within a period, gives it the CPU of
/// the rank that still spins — and then no more periods are asked for
/// once both wait again.
#[test]
fn a_message_for_a_rank_preempted_while_waiting_brings_a_decision_within_a_period() {
    let mut h = both_ranks_waiting(PolicyKind::Pb);
    h.advance_to(ms(5));
    let arrived = ms(5) + us(300);
    h.arrive(T2, arrived, false);
    let due = h.policy.next_wakeup().expect("a decision is asked for");
    assert!(
        (arrived..=arrived + ms(1)).contains(&due),
        "within a period of the arrival: {due}"
    );
    h.advance_to(due);
    assert_eq!(periodic_boosts(&h), vec![(due, T2)]);
    // T2 takes the CPU, reads its message, answers and waits again: the
    // boost ends there; both wait, so PB is quiet again.
    h.preempt(T1, due + us(10));
    h.run(T2, 0, due + us(10));
    h.receive(T2, due + us(20));
    h.spin(T2, due + us(60));
    assert_eq!(h.level(T2), Level::Normal);
    h.advance_to(due + ms(1) + us(1));
    assert_eq!(
        h.last(T2),
        Some((due + us(60), Level::Normal, Reason::BoostEndWaiting))
    );
    assert_eq!(h.policy.next_wakeup(), None, "both wait: nothing to decide");
}

/// The kernel side reports arrivals for a receiver preempted while it
/// waited to PB and PB-SB (the task a decision prefers), so they need no
/// fast tick to find it.
#[test]
fn periodic_boost_hears_of_arrivals_for_ranks_preempted_while_waiting() {
    use crate::local::{LocalPolicyConfig, OffCpuArrivals, WakeInterest};
    for kind in [PolicyKind::Pb, PolicyKind::PbSb] {
        let interest = WakeInterest::of(&LocalPolicyConfig::for_kind(kind));
        assert_eq!(
            interest.off_cpu_arrivals,
            OffCpuArrivals::WhileWaiting,
            "{kind:?}"
        );
    }
}
