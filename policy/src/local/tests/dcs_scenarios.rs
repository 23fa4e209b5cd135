//! DCS and the local baseline, situation by situation.

use super::harness::*;
use crate::local::{Level, LocalPolicy, PolicyKind, Reason};

/// T1 (job A) and T2 (job B) share CPU 0; T1 ran first and was preempted
/// while it waited (spun) for a message, T2 runs now.
fn two_tasks_t2_running(kind: PolicyKind) -> Harness {
    two_tasks_t2_running_with(crate::local::LocalPolicyConfig::for_kind(kind))
}

/// DCS with quantum boosts (`end_on_wait = false`) and a 5 ms yield after
/// them. These scenarios are about what a boost does once given, so every
/// preempted receiver qualifies (`boost_computing`); which receivers do by
/// default is tested on its own.
fn quantum_dcs() -> Harness {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.boost_computing = true;
    config.dcs.end_on_wait = Some(false);
    config.dcs.yield_after_quantum_us = 5_000;
    two_tasks_t2_running_with(config)
}

fn two_tasks_t2_running_with(config: crate::local::LocalPolicyConfig) -> Harness {
    t1_preempted_t2_running(config, true)
}

/// T1 (job A) ran first and was preempted at 1 ms — `waiting`: while it
/// spun for a message (from 500 µs), else mid-computation; T2 (job B) runs.
fn t1_preempted_t2_running(config: crate::local::LocalPolicyConfig, waiting: bool) -> Harness {
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    if waiting {
        h.spin(T1, us(500));
    }
    h.preempt(T1, ms(1));
    h.run(T2, 0, ms(1));
    h
}

#[test]
fn arrival_for_preempted_task_boosts_it() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.arrive(T1, ms(2), false);
    assert_eq!(h.level(T1), BOOST10);
    assert_eq!(h.last(T1), Some((ms(2), BOOST10, Reason::ArrivalBoost)));
    assert_eq!(h.level(T2), Level::Normal);
}

#[test]
fn arrival_for_task_preempted_mid_computation_is_left_to_cfs() {
    let mut h = t1_preempted_computing(crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs));
    h.arrive(T1, ms(2), false);
    assert_eq!(
        h.level(T1),
        Level::Normal,
        "it does not wait for this message"
    );
    assert!(h.log.is_empty());
}

#[test]
fn arrival_for_task_preempted_mid_computation_is_boosted_with_boost_computing() {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.boost_computing = true;
    let mut h = t1_preempted_computing(config);
    h.arrive(T1, ms(2), false);
    assert_eq!(h.level(T1), BOOST10);
}

/// T1 (job A) was preempted in the middle of a computation (not waiting for
/// a message) at 1 ms; T2 (job B) runs.
fn t1_preempted_computing(config: crate::local::LocalPolicyConfig) -> Harness {
    t1_preempted_t2_running(config, false)
}

#[test]
fn arrival_for_running_task_does_not_boost() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.arrive(T2, ms(2), true);
    assert!(h.log.is_empty());
    assert_eq!(h.policy.next_wakeup(), None);
}

#[test]
fn arrival_for_task_blocked_in_a_receive_is_left_to_the_kernel() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.run(T1, 0, ms(2));
    h.receive(T1, ms(2) + us(10));
    h.sleep(T1, ms(3)); // blocking receive
    h.arrive(T1, ms(4), false);
    assert_eq!(h.level(T1), Level::Normal, "the kernel wakes it; no boost");
}

#[test]
fn receiver_woken_from_a_blocking_receive_seen_at_a_tick_is_left_to_the_kernel() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.run(T1, 0, ms(2));
    h.sleep(T1, ms(3)); // blocking receive
    // The message arrived at 4 ms; only the tick at 5 ms sees it (pending,
    // off CPU, last switch-out a block, not a preemption).
    h.tick_with(ms(5), &message_pending_off_cpu(T1, ms(4), false, T2));
    assert_eq!(h.level(T1), Level::Normal, "the kernel wakes it; no boost");
}

#[test]
fn preempted_receiver_whose_arrival_only_a_tick_saw_is_boosted() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    let mut seen = message_pending_off_cpu(T1, ms(2), true, T2);
    seen.tasks[0].spinning_since = Some(us(500));
    h.tick_with(ms(3), &seen);
    assert_eq!(h.level(T1), BOOST10);
}

#[test]
fn boost_ends_after_max_duration() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.arrive(T1, ms(2), false);
    assert_eq!(h.policy.next_wakeup(), Some(ms(7)));
    h.advance_to(ms(7) - 1);
    assert_eq!(h.level(T1), BOOST10);
    h.advance_to(ms(7));
    assert_eq!(
        h.last(T1),
        Some((ms(7), Level::Normal, Reason::BoostExpired))
    );
}

/// DCS with per-message boosts (`end_on_wait`).
fn per_message_dcs() -> Harness {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.end_on_wait = Some(true);
    // As in `quantum_dcs`: any preempted receiver qualifies here.
    config.dcs.boost_computing = true;
    t1_preempted_computing(config)
}

#[test]
fn boosted_task_keeps_its_quantum_across_short_waits() {
    let mut h = quantum_dcs();
    boosted_t1_consumes_its_message(&mut h);
    h.spin(T1, ms(2) + us(300));
    assert_eq!(h.level(T1), BOOST10, "its peer answers within microseconds");
    h.arrive(T1, ms(2) + us(310), true);
    h.receive(T1, ms(2) + us(320));
    assert_eq!(h.level(T1), BOOST10);
}

#[test]
fn arrival_for_other_job_displaces_boosted_spinner() {
    let mut h = quantum_dcs();
    boosted_t1_consumes_its_message(&mut h);
    // T1's peers stopped running: it spins with nothing to do, and T2's
    // peer sends: T2's job is the one running elsewhere now.
    h.spin(T1, ms(2) + us(40));
    h.arrive(T2, ms(2) + us(60), false);
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(60), Level::Normal, Reason::Displaced))
    );
    assert_eq!(h.level(T2), BOOST10);
}

#[test]
fn arrival_while_boosted_task_computes_queues_a_boost_behind_it() {
    let mut h = quantum_dcs();
    boosted_t1_consumes_its_message(&mut h);
    // T1 computes: a message for T2 does not take T1's boost away; T2 is
    // boosted at the same priority and runs when T1's quantum ends.
    h.arrive(T2, ms(3), false);
    assert_eq!(h.level(T1), BOOST10);
    assert_eq!(h.level(T2), BOOST10);
    h.advance_to(ms(7));
    assert_eq!(
        h.last(T1),
        Some((ms(7), Level::Demote, Reason::QuantumYield))
    );
    assert_eq!(h.level(T2), BOOST10, "T2's own quantum runs until 8 ms");
}

#[test]
fn boost_ends_when_task_consumed_message_and_waits_again() {
    let mut h = per_message_dcs();
    boosted_t1_consumes_its_message(&mut h);
    assert_eq!(h.level(T1), BOOST10, "still processing its message");
    h.spin(T1, ms(2) + us(300));
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(300), Level::Normal, Reason::BoostEndWaiting))
    );
}

#[test]
fn boost_ends_when_task_blocks() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.arrive(T1, ms(2), false);
    h.run(T1, 0, ms(2) + us(5));
    h.sleep(T1, ms(3));
    assert_eq!(
        h.last(T1),
        Some((ms(3), Level::Normal, Reason::BoostEndBlocked))
    );
}

#[test]
fn dcs_waiting_tasks_spin_and_are_never_blocked() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.spin(T2, ms(2));
    h.advance_to(ms(500));
    assert!(h.log.is_empty());
}

#[test]
fn repeated_arrivals_do_not_extend_a_boost() {
    let mut h = two_tasks_t2_running(PolicyKind::Dcs);
    h.arrive(T1, ms(2), false);
    h.arrive(T1, ms(4), false);
    h.arrive(T1, ms(6), false);
    h.advance_to(ms(7));
    assert_eq!(
        h.last(T1),
        Some((ms(7), Level::Normal, Reason::BoostExpired))
    );
}

#[test]
fn quantum_end_yields_until_a_message_or_the_bound() {
    let mut h = quantum_dcs();
    h.arrive(T1, ms(2), false);
    h.advance_to(ms(7));
    // The quantum is over: T1 yields so T2's job gets the CPU at once.
    assert_eq!(
        h.last(T1),
        Some((ms(7), Level::Demote, Reason::QuantumYield))
    );
    // Its next message (its job runs elsewhere again) boosts it.
    h.preempt(T1, ms(7));
    h.arrive(T1, ms(8), false);
    assert_eq!(h.level(T1), BOOST10);
    // Without a message, the yield ends at its bound.
    h.advance_to(ms(13));
    assert_eq!(
        h.last(T1),
        Some((ms(13), Level::Demote, Reason::QuantumYield))
    );
    h.advance_to(ms(18));
    assert_eq!(
        h.last(T1),
        Some((ms(18), Level::Normal, Reason::BlockTimeout))
    );
}

#[test]
fn local_baseline_never_acts() {
    let mut h = two_tasks_t2_running(PolicyKind::Local);
    h.arrive(T1, ms(2), false);
    h.spin(T2, ms(2));
    h.advance_to(ms(100));
    let mut out = Vec::new();
    h.policy.release_all(&mut out);
    assert!(h.log.is_empty() && out.is_empty());
    assert_eq!(h.policy.next_wakeup(), None);
}

/// A message boosts T1 at 2 ms, T1 takes the CPU from T2 and has consumed
/// it at 2.02 ms.
fn boosted_t1_consumes_its_message(h: &mut Harness) {
    h.arrive(T1, ms(2), false);
    h.preempt(T2, ms(2) + us(5));
    h.run(T1, 0, ms(2) + us(5));
    h.receive(T1, ms(2) + us(20));
}

/// Per-message DCS with a 100 µs wait grace.
fn graced_dcs() -> Harness {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.wait_grace_us = 100;
    two_tasks_t2_running_with(config)
}

#[test]
fn with_a_wait_grace_a_boosted_task_whose_peer_answers_quickly_keeps_its_boost() {
    let mut h = graced_dcs();
    boosted_t1_consumes_its_message(&mut h);
    // Sends, then waits for the answer, which comes 40 µs later.
    h.spin(T1, ms(2) + us(50));
    h.receive(T1, ms(2) + us(90));
    h.spin(T1, ms(2) + us(120));
    h.receive(T1, ms(2) + us(210));
    h.advance_to(ms(2) + us(300));
    assert_eq!(h.level(T1), BOOST10, "every wait ended within the grace");
}

#[test]
fn with_a_wait_grace_the_boost_ends_once_one_wait_outlasts_it() {
    let mut h = graced_dcs();
    boosted_t1_consumes_its_message(&mut h);
    h.spin(T1, ms(2) + us(50));
    h.advance_to(ms(2) + us(149));
    assert_eq!(h.level(T1), BOOST10, "99 µs of waiting: within the grace");
    h.advance_to(ms(3));
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(150), Level::Normal, Reason::BoostEndWaiting)),
        "its peer stopped answering: the CPU is handed over at 100 µs"
    );
}

#[test]
fn a_wait_grace_counts_only_time_on_the_cpu() {
    let mut h = graced_dcs();
    boosted_t1_consumes_its_message(&mut h);
    h.spin(T1, ms(2) + us(50));
    // Preempted by another boosted task after 30 µs of waiting, for 1 ms.
    h.preempt(T1, ms(2) + us(80));
    h.advance_to(ms(3) + us(80));
    assert_eq!(h.level(T1), BOOST10, "off the CPU its wait does not count");
    h.run(T1, 0, ms(3) + us(80));
    h.advance_to(ms(4));
    assert_eq!(
        h.last(T1),
        Some((ms(3) + us(150), Level::Normal, Reason::BoostEndWaiting))
    );
}

/// OpenMPI 4.1 (TCP BTL) polls once more right after the read that brought
/// the message, before the rank computes its answer.
fn openmpi_polls_after_its_receive(h: &mut Harness) {
    boosted_t1_consumes_its_message(h);
    h.spin(T1, ms(2) + us(25));
}

#[test]
fn boost_ends_at_the_poll_right_after_the_receive_by_default() {
    let mut h = per_message_dcs();
    openmpi_polls_after_its_receive(&mut h);
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(25), Level::Normal, Reason::BoostEndWaiting)),
        "the literal rule: its first empty wait"
    );
}

#[test]
fn boost_after_send_lasts_through_the_poll_after_the_receive_until_the_answer_is_sent() {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.boost_computing = true;
    config.dcs.end_on_wait_after_send = true;
    let mut h = t1_preempted_computing(config);
    openmpi_polls_after_its_receive(&mut h);
    assert_eq!(h.level(T1), BOOST10, "it has not answered yet");
    // It computes (the episode ends past the gap or at the send), answers,
    // and waits for the reply: that wait ends the boost.
    h.send(crate::local::Event::DataSent {
        task: T1,
        at: ms(2) + us(50),
    });
    assert_eq!(h.level(T1), BOOST10, "a send alone does not end it");
    h.spin(T1, ms(2) + us(50));
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(50), Level::Normal, Reason::BoostEndWaiting))
    );
}

#[test]
fn a_send_before_the_boost_does_not_count_as_the_answer() {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.boost_computing = true;
    config.dcs.end_on_wait_after_send = true;
    let mut h = t1_preempted_computing(config);
    h.send(crate::local::Event::DataSent {
        task: T1,
        at: ms(1) + us(900),
    });
    openmpi_polls_after_its_receive(&mut h);
    assert_eq!(h.level(T1), BOOST10);
}

#[test]
fn boost_after_send_still_ends_when_the_task_blocks() {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.boost_computing = true;
    config.dcs.end_on_wait_after_send = true;
    let mut h = t1_preempted_computing(config);
    openmpi_polls_after_its_receive(&mut h);
    h.sleep(T1, ms(2) + us(40));
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(40), Level::Normal, Reason::BoostEndBlocked))
    );
}
