//! SB, SY, DCS-SB and spin-time learning, situation by situation.

use super::harness::*;
use crate::local::{
    BlockMethod, Level, LocalPolicy, LocalPolicyConfig, PolicyKind, Reason, SpinBlockParams,
    SpinYieldParams, YieldLevel,
};

fn sb_config(sb: SpinBlockParams) -> LocalPolicyConfig {
    LocalPolicyConfig {
        sb,
        ..LocalPolicyConfig::for_kind(PolicyKind::Sb)
    }
}

/// T1 (job A) runs on CPU 0 from 0 and starts waiting at 1 ms; T2 (job B)
/// and T3 (job C) are ready to run: three jobs per CPU, where SB blocks at
/// its spin threshold whether or not it is MPL-aware (sb_mpl_scenarios.rs
/// has two jobs per CPU).
fn t1_spinning_from_1ms(mut h: Harness) -> Harness {
    h.add(T1, JA, 0);
    for (task, job) in [(T2, JB), (T3, JC)] {
        h.add(task, job, 0);
        h.run(task, 0, 0);
        h.preempt(task, 0);
    }
    h.run(T1, 0, 0);
    h.spin(T1, ms(1));
    h
}

#[test]
fn spinner_past_threshold_is_blocked_then_woken_by_arrival() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sb));
    h.advance_to(ms(1) + us(499));
    assert_eq!(h.level(T1), Level::Normal);
    h.advance_to(ms(1) + us(500));
    assert_eq!(
        h.last(T1),
        Some((ms(1) + us(500), Level::Demote, Reason::SpinThresholdBlock))
    );
    h.preempt(T1, ms(1) + us(600));
    h.run(T2, 0, ms(1) + us(600));
    h.arrive(T1, ms(3), false);
    assert_eq!(
        h.last(T1),
        Some((ms(3), BOOST10, Reason::WakeOnArrival)),
        "woken and boosted"
    );
}

#[test]
fn spin_block_by_stop_blocks_until_arrival() {
    let sb = SpinBlockParams {
        block_by: BlockMethod::Stop,
        wake_boost: false,
        ..Default::default()
    };
    let mut h = t1_spinning_from_1ms(Harness::new(sb_config(sb)));
    h.advance_to(ms(2));
    assert_eq!(h.level(T1), Level::Stop);
    h.sleep(T1, ms(1) + us(520)); // SIGSTOP takes it off the CPU
    h.run(T2, 0, ms(1) + us(520));
    h.advance_to(ms(50));
    assert_eq!(
        h.level(T1),
        Level::Stop,
        "no wake without a message before the bound"
    );
    h.arrive(T1, ms(50), false);
    assert_eq!(
        h.last(T1),
        Some((ms(50), Level::Normal, Reason::WakeOnArrival))
    );
}

#[test]
fn stopped_spinner_stays_stopped_when_a_snapshot_shows_its_spin_ended() {
    let sb = SpinBlockParams {
        block_by: BlockMethod::Stop,
        ..Default::default()
    };
    let mut h = t1_spinning_from_1ms(Harness::new(sb_config(sb)));
    h.advance_to(ms(2));
    assert_eq!(h.level(T1), Level::Stop);
    h.sleep(T1, ms(2)); // SIGSTOP takes it off the CPU
    h.run(T2, 0, ms(2));
    // The kernel counts the SIGSTOP switch-out as a block, which ends the
    // spin episode: the counters show no spin and no message. The task
    // still waits for its message; it cannot have received it.
    let mut snapshot = message_pending_off_cpu(T1, 0, false, T2);
    snapshot.tasks[0].pending_message = false;
    snapshot.tasks[0].arrivals = 0;
    snapshot.tasks[0].oncpu_ns = ms(2);
    h.tick_with(ms(5), &snapshot);
    assert_eq!(h.level(T1), Level::Stop, "woken with no message");
    h.arrive(T1, ms(30), false);
    assert_eq!(h.last(T1), Some((ms(30), BOOST10, Reason::WakeOnArrival)));
}

#[test]
fn spin_threshold_counts_only_on_cpu_time() {
    let mut h = Harness::of_kind(PolicyKind::Sb);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.add(T3, JC, 0);
    h.run(T3, 0, 0);
    h.preempt(T3, 0);
    h.run(T1, 0, 0);
    h.spin(T1, us(100));
    h.preempt(T1, us(300)); // spun 200 us
    h.run(T2, 0, us(300));
    h.advance_to(ms(10));
    assert_eq!(
        h.level(T1),
        Level::Normal,
        "a preempted spinner wastes nothing"
    );
    h.preempt(T2, ms(10));
    h.run(T1, 0, ms(10));
    h.advance_to(ms(10) + us(299));
    assert_eq!(h.level(T1), Level::Normal);
    h.advance_to(ms(10) + us(300));
    assert_eq!(h.level(T1), Level::Demote);
}

#[test]
fn spinner_with_pending_message_is_not_blocked() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sb));
    h.arrive(T1, ms(1) + us(100), true);
    h.advance_to(ms(20));
    assert!(h.history(T1).is_empty());
}

#[test]
fn blocked_task_is_woken_after_max_block_time() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sb));
    let blocked_at = ms(1) + us(500);
    h.advance_to(blocked_at);
    assert_eq!(h.level(T1), Level::Demote);
    h.advance_to(blocked_at + ms(100));
    assert_eq!(
        h.last(T1),
        Some((blocked_at + ms(100), Level::Normal, Reason::BlockTimeout))
    );
    // Still spinning on its CPU: a full threshold again, then blocked again.
    h.advance_to(blocked_at + ms(100) + us(500));
    assert_eq!(
        h.last(T1),
        Some((
            blocked_at + ms(100) + us(500),
            Level::Demote,
            Reason::SpinThresholdBlock
        ))
    );
}

#[test]
fn spin_yield_demotes_then_restores() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sy));
    let threshold = us(SpinYieldParams::default().spin_threshold_us);
    h.advance_to(ms(1) + threshold);
    assert_eq!(
        h.last(T1),
        Some((ms(1) + threshold, Level::Demote, Reason::SpinThresholdYield))
    );
    h.preempt(T1, ms(4));
    h.run(T2, 0, ms(4));
    h.arrive(T1, ms(6), false);
    assert_eq!(
        h.last(T1),
        Some((ms(6), Level::Normal, Reason::WakeOnArrival)),
        "restored, not boosted"
    );
}

/// SY configured to yield at nice 19 (`sy.yield_to = "nice19"`): the
/// spinner waits at SCHED_OTHER nice 19 instead of SCHED_IDLE — a level
/// whose hand-back changes the task's priority value, so the kernel
/// re-picks at once — and is handed back at its message to its own
/// attributes, still without a boost.
#[test]
fn a_spinner_yielded_at_nice_19_is_handed_back_at_its_message_without_a_boost() {
    let sy = SpinYieldParams {
        yield_to: YieldLevel::Nice19,
        ..Default::default()
    };
    let threshold = us(sy.spin_threshold_us);
    let config = LocalPolicyConfig {
        sy,
        ..LocalPolicyConfig::for_kind(PolicyKind::Sy)
    };
    let mut h = t1_spinning_from_1ms(Harness::new(config));
    h.advance_to(ms(1) + threshold - us(1));
    assert_eq!(h.level(T1), Level::Normal);
    h.advance_to(ms(1) + threshold);
    assert_eq!(
        h.last(T1),
        Some((
            ms(1) + threshold,
            Level::Background,
            Reason::SpinThresholdYield
        ))
    );
    h.preempt(T1, ms(4));
    h.run(T2, 0, ms(4));
    h.arrive(T1, ms(6), false);
    assert_eq!(
        h.last(T1),
        Some((ms(6), Level::Normal, Reason::WakeOnArrival)),
        "restored, not boosted"
    );
    assert!(
        h.history(T1).iter().all(|(_, l, _)| !l.is_boost()),
        "{:?}",
        h.history(T1)
    );
}

/// A yield at nice 19 whose message never comes ends at `max_yield_us`,
/// like one at SCHED_IDLE: the task is not left at nice 19.
#[test]
fn a_spinner_yielded_at_nice_19_without_a_message_is_handed_back_at_the_yield_bound() {
    let sy = SpinYieldParams {
        yield_to: YieldLevel::Nice19,
        ..Default::default()
    };
    let yielded_at = ms(1) + us(sy.spin_threshold_us);
    let bound = us(sy.max_yield_us);
    let config = LocalPolicyConfig {
        sy,
        ..LocalPolicyConfig::for_kind(PolicyKind::Sy)
    };
    let mut h = t1_spinning_from_1ms(Harness::new(config));
    h.advance_to(yielded_at);
    assert_eq!(h.level(T1), Level::Background);
    h.preempt(T1, yielded_at + us(100));
    h.run(T2, 0, yielded_at + us(100));
    h.advance_to(yielded_at + bound);
    assert_eq!(
        h.last(T1),
        Some((yielded_at + bound, Level::Normal, Reason::BlockTimeout))
    );
}

/// A rank whose peer answers after 1 ms of its spin (the peer's node was
/// running the other job for a moment): SB blocks it at 500 µs, because its
/// boosted wake brings it back at once; SY's wake has no boost and would
/// cost it the competitor's whole slice, so SY keeps it spinning.
#[test]
fn a_task_whose_message_comes_sooner_than_a_yield_would_cost_is_not_yielded() {
    for (kind, yielded) in [(PolicyKind::Sy, false), (PolicyKind::Sb, true)] {
        let mut h = t1_spinning_from_1ms(Harness::of_kind(kind));
        h.arrive(T1, ms(2), true);
        h.receive(T1, ms(2) + us(5));
        h.advance_to(ms(10));
        assert_eq!(
            h.history(T1).iter().any(|(_, l, _)| *l == Level::Demote),
            yielded,
            "{kind:?}: {:?}",
            h.history(T1)
        );
    }
}

/// A rank whose peer is not coming back soon (its node runs the other job
/// for a whole slice): SY yields it once it has spun as long as a yield
/// costs, and hands it back at its message.
#[test]
fn a_task_that_waits_longer_than_a_yield_costs_yields_once_per_wait() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sy));
    h.advance_to(ms(12));
    let demotes = |h: &Harness| {
        h.history(T1)
            .iter()
            .filter(|(_, l, _)| *l == Level::Demote)
            .count()
    };
    assert_eq!(demotes(&h), 1, "{:?}", h.history(T1));
    h.preempt(T1, ms(12));
    h.run(T2, 0, ms(12));
    h.arrive(T1, ms(14), false);
    assert_eq!(h.level(T1), Level::Normal);
    assert_eq!(demotes(&h), 1);
}

#[test]
fn dcs_sb_boosts_blocked_and_waiting_tasks_on_arrival() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::DcsSb));
    h.advance_to(ms(2));
    assert_eq!(h.level(T1), Level::Demote);
    h.preempt(T1, ms(2));
    h.run(T2, 0, ms(2));
    h.arrive(T1, ms(3), false);
    assert_eq!(h.last(T1), Some((ms(3), BOOST10, Reason::ArrivalBoost)));
    h.preempt(T2, ms(3));
    h.run(T1, 0, ms(3));
    h.receive(T1, ms(3) + us(10));
    h.preempt(T1, ms(4)); // computing, preempted
    h.run(T2, 0, ms(4));
    assert_eq!(h.level(T1), BOOST10);
    h.advance_to(ms(8));
    assert_eq!(h.level(T1), Level::Normal, "boost over");
    h.arrive(T1, ms(9), false);
    assert_eq!(
        h.level(T1),
        Level::Normal,
        "preempted mid-computation: not waiting for it"
    );
    h.run(T1, 0, ms(10));
    h.spin(T1, ms(10) + us(10));
    h.preempt(T1, ms(10) + us(20));
    h.run(T2, 0, ms(10) + us(20));
    h.arrive(T1, ms(11), false);
    assert_eq!(
        h.last(T1),
        Some((ms(11), BOOST10, Reason::ArrivalBoost)),
        "DCS: a receiver waiting for its message, not running"
    );
}

#[test]
fn plain_sb_does_not_boost_a_preempted_task() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sb));
    h.receive(T1, ms(1) + us(100));
    h.preempt(T1, ms(2));
    h.run(T2, 0, ms(2));
    h.arrive(T1, ms(3), false);
    assert!(
        h.history(T1).is_empty(),
        "ICS reacts only for blocked receivers"
    );
}

#[test]
fn lost_arrival_seen_in_snapshot_wakes_blocked_task() {
    let sb = SpinBlockParams {
        block_by: BlockMethod::Stop,
        ..Default::default()
    };
    let mut h = t1_spinning_from_1ms(Harness::new(sb_config(sb)));
    h.advance_to(ms(2));
    h.sleep(T1, ms(2));
    h.run(T2, 0, ms(2));
    assert_eq!(h.level(T1), Level::Stop);
    let mut snapshot = message_pending_off_cpu(T1, ms(4), false, T2);
    snapshot.tasks[0].spinning_since = Some(ms(1));
    snapshot.tasks[0].oncpu_ns = ms(2);
    h.tick_with(ms(5), &snapshot);
    assert_eq!(h.last(T1), Some((ms(5), BOOST10, Reason::WakeOnArrival)));
}

/// One wait of `wait` ns starting at `t0` for the on-CPU task T1; returns
/// the time after it.
fn wait_episode(h: &mut Harness, t0: u64, wait: u64) -> u64 {
    h.spin(T1, t0);
    h.arrive(T1, t0 + wait, true);
    h.receive(T1, t0 + wait + us(5));
    t0 + wait + us(50)
}

/// Starts an idle wait at `t0` and returns how long T1 spun before blocking.
fn measured_spin_time(h: &mut Harness, t0: u64) -> u64 {
    h.spin(T1, t0);
    h.advance_to(t0 + ms(10));
    let (blocked_at, level, _) = h.last(T1).expect("blocked");
    assert_eq!(level, Level::Demote);
    h.arrive(T1, t0 + ms(10), true);
    h.receive(T1, t0 + ms(10) + us(5));
    blocked_at - t0
}

#[test]
fn learned_spin_time_tracks_observed_waits() {
    // T1 alone on its CPU: the learned spin time, not MPL-aware blocking.
    let sb = SpinBlockParams {
        learn_spin_time: true,
        mpl_aware: false,
        ..Default::default()
    };
    let mut h = Harness::new(sb_config(sb));
    h.add(T1, JA, 0);
    h.run(T1, 0, 0);
    let mut t = ms(1);
    assert_eq!(
        measured_spin_time(&mut h, t),
        us(500),
        "fixed threshold until 8 waits are seen"
    );
    // The very first (10 ms) wait is in the history too; short waits dominate.
    t += ms(20);
    for _ in 0..10 {
        t = wait_episode(&mut h, t, us(100));
    }
    assert_eq!(
        measured_spin_time(&mut h, t + ms(1)),
        us(110),
        "covers 100 us waits, +10 %"
    );
    t += ms(20);
    for _ in 0..10 {
        t = wait_episode(&mut h, t, us(300));
    }
    assert_eq!(
        measured_spin_time(&mut h, t + ms(1)),
        us(330),
        "follows waits that grew to 300 us"
    );
    t += ms(20);
    for _ in 0..64 {
        t = wait_episode(&mut h, t, ms(20));
        t += ms(1);
    }
    assert_eq!(
        measured_spin_time(&mut h, t + ms(1)),
        us(50),
        "long waits: block almost at once (min)"
    );
}

#[test]
fn forget_drops_a_blocked_task_silently() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sb));
    h.advance_to(ms(2));
    assert_eq!(h.level(T1), Level::Demote);
    let before = h.log.len();
    h.policy.forget(T1);
    h.arrive(T1, ms(3), false);
    h.advance_to(ms(500));
    assert_eq!(h.log.len(), before);
    assert_eq!(h.policy.next_wakeup(), None);
}

#[test]
fn wake_boost_after_send_survives_the_poll_right_after_the_receive() {
    let mut config = crate::local::LocalPolicyConfig::for_kind(PolicyKind::Sb);
    config.sb.wake_boost_after_send = true;
    let mut h = t1_spinning_from_1ms(Harness::new(config));
    h.advance_to(ms(1) + us(500));
    h.preempt(T1, ms(1) + us(600));
    h.run(T2, 0, ms(1) + us(600));
    h.arrive(T1, ms(3), false);
    assert_eq!(h.level(T1), BOOST10, "woken and boosted");
    h.preempt(T2, ms(3) + us(5));
    h.run(T1, 0, ms(3) + us(5));
    h.receive(T1, ms(3) + us(15));
    h.spin(T1, ms(3) + us(20));
    assert_eq!(h.level(T1), BOOST10, "OpenMPI's poll after its read");
    h.send(crate::local::Event::DataSent {
        task: T1,
        at: ms(3) + us(45),
    });
    h.spin(T1, ms(3) + us(45));
    assert_eq!(
        h.last(T1),
        Some((ms(3) + us(45), Level::Normal, Reason::BoostEndWaiting))
    );
}

/// A blocked task whose message comes while it is on its CPU (it ran at
/// SCHED_IDLE) needs no boost: it is handed back, and the reason says so.
#[test]
fn blocked_task_woken_on_its_cpu_is_handed_back_saying_it_runs() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sb));
    h.advance_to(ms(2));
    assert_eq!(h.level(T1), Level::Demote);
    h.arrive(T1, ms(2) + us(100), true);
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(100), Level::Normal, Reason::NoBoostOnCpu))
    );
}

/// SY has no wake boost: its hand-back is no refusal.
#[test]
fn spin_yield_hands_back_without_a_refusal() {
    let mut h = t1_spinning_from_1ms(Harness::of_kind(PolicyKind::Sy));
    h.advance_to(ms(4));
    assert_eq!(h.level(T1), Level::Demote);
    h.arrive(T1, ms(4), false);
    assert_eq!(h.last(T1).map(|l| l.2), Some(Reason::WakeOnArrival));
}

/// What the agent's look saw last: T1 switched in at 0 and started waiting
/// at 10 us; it left its CPU at 20 us (preempted, still waiting for a
/// message its peer has not sent), which no event has told yet. Traced on
/// the OpenMPI ping-pong under DCS-SB (docs/benchmarks.md, "SB and DCS-SB
/// on real MPI"): 40 % of all blocks were of such ranks, blocked at the
/// next event after their supposed threshold and handed back 15 us later
/// when the tick replayed their switch-out.
fn t1_seen_running_then_preempted(kind: PolicyKind) -> Harness {
    let mut h = Harness::of_kind(kind);
    h.add(T1, JA, 0);
    // Three jobs per CPU: SB's threshold is 500 µs, MPL-aware or not.
    for (task, job) in [(T2, JB), (T3, JC)] {
        h.add(task, job, 0);
        h.run(task, 0, 0);
        h.preempt(task, 0);
    }
    h.run(T1, 0, 0);
    h.spin(T1, us(10));
    h
}

#[test]
fn a_rank_a_past_look_saw_running_is_not_blocked_before_a_tick_shows_where_it_is() {
    for kind in [PolicyKind::DcsSb, PolicyKind::Sb, PolicyKind::PbSb] {
        let mut h = t1_seen_running_then_preempted(kind);
        // An event between ticks, after T1's would-be threshold: another
        // task's wait. (The harness's own ticks are bypassed: in the agent
        // every tick carries a snapshot.)
        let mut out = Vec::new();
        h.policy.on_event(
            &crate::local::Event::SpinStarted {
                task: T2,
                at: us(600),
            },
            &mut out,
        );
        assert!(
            !out.iter().any(|a| a.task() == T1),
            "{kind}: T1 blocked on a view of its CPU 580 us old: {out:?}"
        );
        assert_eq!(
            h.policy.next_wakeup(),
            Some(us(600)),
            "{kind}: a tick now, to look"
        );
        // The tick: T1 left its CPU at 20 us and still waits, T2 runs.
        let mut snapshot = message_pending_off_cpu(T1, 0, true, T2);
        snapshot.tasks[0].pending_message = false;
        snapshot.tasks[0].spinning_since = Some(us(10));
        h.policy.on_event(
            &crate::local::Event::SwitchedOut {
                task: T1,
                at: us(20),
                how: crate::local::SwitchOut::Preempted,
            },
            &mut out,
        );
        h.policy.on_event(
            &crate::local::Event::Tick {
                at: us(600),
                snapshot: Some(&snapshot),
            },
            &mut out,
        );
        assert!(
            !out.iter().any(|a| a.task() == T1),
            "{kind}: T1 spun 10 us on its CPU, not 500: {out:?}"
        );
    }
}

/// The control: a rank that really spins on its CPU past its threshold is
/// blocked at the tick that sees it.
#[test]
fn a_rank_a_tick_sees_spinning_on_its_cpu_past_its_threshold_is_blocked() {
    let mut h = t1_seen_running_then_preempted(PolicyKind::DcsSb);
    let mut snapshot = message_pending_off_cpu(T1, 0, false, T1);
    snapshot.tasks[0].on_cpu = true;
    snapshot.tasks[0].pending_message = false;
    snapshot.tasks[0].spinning_since = Some(us(10));
    let mut out = Vec::new();
    h.policy.on_event(
        &crate::local::Event::Tick {
            at: us(600),
            snapshot: Some(&snapshot),
        },
        &mut out,
    );
    assert_eq!(
        out,
        vec![crate::local::Action::SetLevel {
            task: T1,
            level: Level::Demote,
            reason: Reason::SpinThresholdBlock
        }]
    );
}

/// DCS-SB with quantum boosts (`dcs.end_on_wait = false`): T1 (job A) waited
/// (spun) from 100 µs, was preempted at 200 µs by T2 (job B), and its message
/// arrives at 1 ms: it is boosted, runs, reads it and polls once more at once
/// (as OpenMPI 4.1 does right after a read).
fn dcs_sb_quantum_boost_after_post_read_poll() -> Harness {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::DcsSb);
    config.dcs.end_on_wait = Some(false);
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    h.spin(T1, us(100));
    h.preempt(T1, us(200));
    h.run(T2, 0, us(200));
    h.arrive(T1, ms(1), false);
    assert_eq!(h.last(T1), Some((ms(1), BOOST10, Reason::ArrivalBoost)));
    h.preempt(T2, ms(1) + us(5));
    h.run(T1, 0, ms(1) + us(5));
    h.receive(T1, ms(1) + us(10));
    h.spin(T1, ms(1) + us(12));
    h
}

#[test]
fn a_quantum_boosted_rank_whose_peer_keeps_answering_keeps_its_boost_until_its_quantum_ends() {
    let mut h = dcs_sb_quantum_boost_after_post_read_poll();
    assert_eq!(h.level(T1), BOOST10, "the poll right after the read");
    // Its peer answers every 100 µs: each wait is far below the threshold.
    for k in 1..50 {
        let at = ms(1) + us(100 * k);
        h.receive(T1, at);
        h.spin(T1, at + us(2));
    }
    assert_eq!(h.level(T1), BOOST10, "a job running together stays boosted");
    h.receive(T1, ms(6) + us(50));
    assert_eq!(
        h.last(T1),
        Some((ms(6), Level::Normal, Reason::BoostExpired)),
        "until its quantum (5 ms) ends"
    );
}

#[test]
fn a_quantum_boosted_rank_whose_peer_stops_answering_is_blocked_at_its_spin_threshold() {
    let mut h = dcs_sb_quantum_boost_after_post_read_poll();
    // One more exchange, then its peer no longer answers (it lost its CPU).
    h.receive(T1, ms(1) + us(100));
    h.spin(T1, ms(1) + us(102));
    h.advance_to(ms(1) + us(601));
    assert_eq!(h.level(T1), BOOST10, "499 µs of waiting: still boosted");
    h.advance_to(ms(1) + us(602));
    assert_eq!(
        h.last(T1),
        Some((ms(1) + us(602), Level::Demote, Reason::SpinThresholdBlock)),
        "its wait passed the spin threshold: the boost ends and it blocks"
    );
    h.preempt(T1, ms(1) + us(610));
    h.run(T2, 0, ms(1) + us(610));
    h.arrive(T1, ms(3), false);
    assert_eq!(
        h.last(T1),
        Some((ms(3), BOOST10, Reason::ArrivalBoost)),
        "its message wakes it with a new boost"
    );
}

fn adaptive_sb(kind: PolicyKind) -> Harness {
    // The adaptive rule alone (T2 comes and goes on T1's CPU).
    let sb = SpinBlockParams {
        adapt_threshold: true,
        mpl_aware: false,
        ..Default::default()
    };
    let mut h = Harness::new(LocalPolicyConfig {
        sb,
        ..LocalPolicyConfig::for_kind(kind)
    });
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    h
}

/// T1, on its CPU, starts waiting at `t0`; once blocked it leaves its CPU
/// to T2, its message comes `after` ns later (T1 woken, runs, reads it).
/// Returns how long T1 spun before the block, and when the episode is over.
fn wait_blocked_for(h: &mut Harness, t0: u64, after: u64) -> (u64, u64) {
    h.spin(T1, t0);
    let mut t = t0;
    let blocked_at = loop {
        t += us(10);
        h.advance_to(t);
        if let Some((at, Level::Demote, Reason::SpinThresholdBlock)) = h.last(T1)
            && at >= t0
        {
            break at;
        }
        assert!(t < t0 + ms(50), "never blocked");
    };
    h.preempt(T1, blocked_at + us(5));
    h.run(T2, 0, blocked_at + us(5));
    let msg = blocked_at + after;
    h.arrive(T1, msg, false);
    h.preempt(T2, msg + us(5));
    h.run(T1, 0, msg + us(5));
    h.receive(T1, msg + us(10));
    (blocked_at - t0, msg + us(100))
}

#[test]
fn a_rank_whose_message_keeps_coming_right_after_its_block_spins_longer_next_time() {
    let mut h = adaptive_sb(PolicyKind::Sb);
    let mut t = ms(1);
    let mut spun = Vec::new();
    for _ in 0..5 {
        let (s, end) = wait_blocked_for(&mut h, t, us(100));
        spun.push(s);
        t = end + ms(1);
    }
    assert_eq!(
        spun,
        vec![us(500), ms(1), ms(2), ms(4), ms(4)],
        "doubled after each block its message followed within a block's cost, up to the bound"
    );
}

#[test]
fn a_rank_whose_waits_outlast_its_blocks_goes_back_to_the_configured_threshold() {
    let mut h = adaptive_sb(PolicyKind::Sb);
    let mut t = ms(1);
    for _ in 0..3 {
        t = wait_blocked_for(&mut h, t, us(100)).1 + ms(1);
    }
    // Now at 4 ms; the partner is away for much longer than that.
    let mut spun = Vec::new();
    for _ in 0..5 {
        let (s, end) = wait_blocked_for(&mut h, t, ms(20));
        spun.push(s);
        t = end + ms(1);
    }
    assert_eq!(
        spun,
        vec![ms(4), ms(2), ms(1), us(500), us(500)],
        "halved after each block the doubled spin would not have spared, never below the configured threshold"
    );
}

#[test]
fn a_block_whose_message_comes_after_a_blocks_cost_but_before_the_threshold_keeps_it() {
    let mut h = adaptive_sb(PolicyKind::Sb);
    let mut t = ms(1);
    t = wait_blocked_for(&mut h, t, us(100)).1 + ms(1); // 500 -> 1000 us
    let mut spun = Vec::new();
    for _ in 0..3 {
        let (s, end) = wait_blocked_for(&mut h, t, us(700));
        spun.push(s);
        t = end + ms(1);
    }
    assert_eq!(spun, vec![ms(1); 3]);
}

#[test]
fn without_adaptation_the_threshold_stays_fixed_however_blocks_turn_out() {
    let mut h = Harness::new(sb_config(SpinBlockParams {
        adapt_threshold: false,
        mpl_aware: false,
        ..Default::default()
    }));
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    let mut t = ms(1);
    for _ in 0..3 {
        let (s, end) = wait_blocked_for(&mut h, t, us(100));
        assert_eq!(s, us(500));
        t = end + ms(1);
    }
}

#[test]
fn pb_sb_and_dcs_sb_keep_the_configured_threshold_when_sb_adapts() {
    for kind in [PolicyKind::PbSb, PolicyKind::DcsSb] {
        let mut h = adaptive_sb(kind);
        let mut t = ms(1);
        for _ in 0..3 {
            let (s, end) = wait_blocked_for(&mut h, t, us(100));
            assert_eq!(s, us(500), "{kind:?}");
            t = end + ms(1);
        }
    }
}
