//! The per-job fairness budget in action.

use super::harness::*;
use crate::local::{
    FairnessParams, Level, LocalPolicyConfig, NodeSnapshot, PolicyKind, Reason, TaskSnapshot,
};

#[test]
fn chatty_job_cannot_starve_neighbour() {
    // Job A (T1, T3) gets a message every 250 us while T2 (job B) computes:
    // unchecked, A would be boosted all the time.
    let mut h = Harness::of_kind(PolicyKind::Dcs);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.add(T3, JA, 0);
    // T1 and T3 wait (spin) for messages and were preempted, not blocked:
    // arrivals are demands.
    h.run(T1, 0, 0);
    h.spin(T1, 0);
    h.preempt(T1, 0);
    h.run(T3, 0, 0);
    h.spin(T3, 0);
    h.preempt(T3, 0);
    h.run(T2, 0, 0);
    let end = ms(300);
    let mut t = us(250);
    while t < end {
        h.arrive(T1, t, false);
        h.arrive(T3, t + us(100), false);
        t += us(250);
    }
    h.advance_to(end);
    let window = ms(100);
    let budget = window / 2;
    for w in 0..3 {
        let (from, to) = (w * window, (w + 1) * window);
        let job_a = h.boosted_ns(T1, from, to) + h.boosted_ns(T3, from, to);
        assert!(
            job_a <= budget,
            "window {w}: job A boosted {job_a} ns > {budget}"
        );
        assert!(
            job_a >= budget * 9 / 10,
            "window {w}: budget should be used, got {job_a}"
        );
        // The rest of the window belongs to the neighbour: no boost of A after
        // the budget ran out.
        let tail = h.boosted_ns(T1, from + budget, to) + h.boosted_ns(T3, from + budget, to);
        assert_eq!(tail, 0, "window {w}: job A boosted after its budget");
    }
    assert!(
        h.history(T1)
            .iter()
            .any(|&(_, _, r)| r == Reason::BudgetExhausted)
    );
}

#[test]
fn budget_refills_in_the_next_window() {
    let config = LocalPolicyConfig {
        fairness: FairnessParams {
            window_us: 10_000,
            max_boosted_percent: 30,
            max_node_boosted_percent: 6400,
            ..FairnessParams::default()
        },
        ..LocalPolicyConfig::for_kind(PolicyKind::Dcs)
    };
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.run(T1, 0, 0);
    h.spin(T1, 0);
    h.preempt(T1, 0); // waiting and preempted, not blocked
    h.arrive(T1, ms(1), false);
    h.advance_to(ms(4));
    assert_eq!(
        h.last(T1),
        Some((ms(4), Level::Normal, Reason::BudgetExhausted))
    );
    h.arrive(T1, ms(5), false);
    assert_eq!(
        h.level(T1),
        Level::Normal,
        "over budget: arrivals no longer boost"
    );
    h.arrive(T1, ms(10), false);
    assert_eq!(h.level(T1), BOOST10, "new window, new budget");
}

#[test]
fn wake_without_budget_still_wakes() {
    let config = LocalPolicyConfig {
        fairness: FairnessParams {
            window_us: 1_000,
            max_boosted_percent: 1,
            max_node_boosted_percent: 6400,
            ..FairnessParams::default()
        },
        ..LocalPolicyConfig::for_kind(PolicyKind::Sb)
    };
    // T1 alone on its CPU: blocked at the fixed threshold, not MPL-aware.
    let mut config = config;
    config.sb.mpl_aware = false;
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.run(T1, 0, 0);
    h.spin(T1, 0);
    h.advance_to(us(500));
    assert_eq!(h.level(T1), Level::Demote);
    h.preempt(T1, us(600));
    h.arrive(T1, ms(2), false);
    assert_eq!(
        h.last(T1),
        Some((ms(2), Level::Normal, Reason::NoBoostJobBudget)),
        "woken without its boost, saying why"
    );
}

#[test]
fn forgotten_boost_is_charged_until_the_next_event() {
    let config = LocalPolicyConfig {
        fairness: FairnessParams {
            window_us: 10_000,
            max_boosted_percent: 30,
            max_node_boosted_percent: 6400,
            ..FairnessParams::default()
        },
        ..LocalPolicyConfig::for_kind(PolicyKind::Dcs)
    };
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T3, JA, 0);
    for t in [T1, T3] {
        h.run(t, 0, 0);
        h.spin(t, 0);
        h.preempt(t, 0); // waiting and preempted, not blocked
    }
    h.arrive(T1, ms(1), false);
    h.policy.forget(T1); // the agent stops managing T1 at about 2 ms
    h.arrive(T3, ms(2), false);
    // T1's boost counts from 1 to 2 ms: 1 ms of job A's 3 ms is gone.
    h.advance_to(ms(5));
    assert_eq!(
        h.last(T3),
        Some((ms(4), Level::Normal, Reason::BudgetExhausted))
    );
}

/// What a tick sees: `t1` (job A) and `t2` (job B) with their CPU time so far,
/// `t1` preempted off CPU while it waited (spun) for a message, `t2` running.
fn cpu_times(t1_ns: u64, t2_ns: u64) -> NodeSnapshot {
    let mut snapshot = message_pending_off_cpu(T1, 0, true, T2);
    snapshot.tasks[0].pending_message = false;
    snapshot.tasks[0].spinning_since = Some(1);
    snapshot.tasks[0].oncpu_ns = t1_ns;
    snapshot.tasks.push(TaskSnapshot {
        task: T2,
        on_cpu: true,
        spinning_since: None,
        pending_message: false,
        preempted: false,
        last_arrival_ns: 0,
        last_wait_end_ns: 0,
        oncpu_ns: t2_ns,
        arrivals: 0,
    });
    snapshot
}

/// A chatty job that already got most of the window's CPU (boosted time is
/// invisible to CFS, so it also keeps its ordinary share between boosts) is
/// not boosted again until the window turns; the compute-only neighbour gets
/// the CPU back.
#[test]
fn chatty_job_past_its_equal_cpu_share_is_not_boosted() {
    let mut h = Harness::of_kind(PolicyKind::Dcs);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T2, 0, 0);
    h.tick_with(ms(1), &cpu_times(0, 0));
    // Job A ran 30 ms of the first 40, job B 10.
    h.tick_with(ms(40), &cpu_times(ms(30), ms(10)));
    h.preempt(T1, ms(40));
    h.arrive(T1, ms(41), false);
    assert_eq!(h.level(T1), Level::Normal, "boosted past its equal share");
    assert_eq!(
        h.refusals(T1),
        vec![(ms(41), Reason::NoBoostCpuShare)],
        "the refused boost is reported, with why"
    );
    // Next window: shares start equal again.
    h.tick_with(ms(100), &cpu_times(ms(30), ms(70)));
    h.arrive(T1, ms(101), false);
    assert_eq!(h.level(T1), BOOST10);
    assert_eq!(h.refusals(T1).len(), 1, "a boost given is no refusal");
}

/// SB's wake boost refused by the equal-share rule: the blocked task is
/// still woken by its message, and the hand-back names the rule.
#[test]
fn blocked_task_of_a_job_past_its_equal_share_is_woken_saying_why_it_got_no_boost() {
    // Two jobs per CPU: blocked at the fixed threshold, not MPL-aware.
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::Sb);
    config.sb.mpl_aware = false;
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T2, 0, 0);
    h.tick_with(ms(1), &cpu_times(0, 0));
    h.tick_with(ms(40), &cpu_times(ms(30), ms(10)));
    // T1 runs again, waits past its threshold and is blocked.
    h.preempt(T2, ms(40));
    h.run(T1, 0, ms(40));
    h.spin(T1, ms(40));
    h.advance_to(ms(41));
    assert_eq!(h.level(T1), Level::Demote);
    h.preempt(T1, ms(41));
    h.run(T2, 0, ms(41));
    h.arrive(T1, ms(42), false);
    assert_eq!(
        h.last(T1),
        Some((ms(42), Level::Normal, Reason::NoBoostCpuShare))
    );
}

/// DCS-SB with quantum boosts (`dcs.end_on_wait = false`; `per_message`:
/// per-message boosts, `end_on_wait = true`, instead). What the ticks see: T1 (job A)
/// preempted while it waited (spun) for a message; T2 (job B) on CPU 0,
/// spinning since just before the look when `t2_waits`, else computing. At
/// 30 ms job A has had 18 ms of CPU in the window and job B 11 ms: A is
/// ahead by more than the 5 ms slack, yet within its equal share (18 of 29
/// ms is less than half plus the slack), so no boost of A is refused or
/// ended by the equal-share rule itself.
fn job_a_ahead_of_job_b(t2_waits: bool, per_message: bool) -> Harness {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::DcsSb);
    config.dcs.end_on_wait = Some(per_message);
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T2, 0, 0);
    let look = |t1_ns: u64, t2_ns: u64, at: u64| {
        let mut snapshot = cpu_times(t1_ns, t2_ns);
        snapshot.tasks[1].spinning_since = t2_waits.then(|| at - us(50));
        snapshot
    };
    h.tick_with(ms(1), &look(0, 0, ms(1)));
    h.tick_with(ms(30), &look(ms(18), ms(11), ms(30)));
    h
}

/// Job A's rank is boosted while job B's rank spins with nothing to do
/// (it may: the holder is not working), runs and computes; then the
/// message for job B's rank comes.
fn job_a_boosted_then_arrival_for_job_b(per_message: bool) -> Harness {
    let mut h = job_a_ahead_of_job_b(true, per_message);
    h.arrive(T1, ms(30) + us(100), false);
    assert_eq!(h.level(T1), BOOST10, "job B's rank only spins: A may run");
    h.preempt(T2, ms(30) + us(105));
    h.run(T1, 0, ms(30) + us(105));
    h.receive(T1, ms(30) + us(110));
    h.arrive(T2, ms(31), false);
    h
}

/// Quantum boosts take turns: the job that had more of the window's CPU
/// gives way when the other job's rank gets its message. Without it the
/// arrival boost queued behind the holder's 5 ms quantum, and one of two
/// identical fine-spin jobs held its boosts in lockstep and took 61 % of
/// the CPU against 37 % (docs/benchmarks.md, "Quantum boosts under DCS-SB").
#[test]
fn a_rank_of_the_job_behind_takes_the_cpu_from_a_quantum_boost_of_the_job_ahead() {
    let h = job_a_boosted_then_arrival_for_job_b(false);
    assert_eq!(
        h.last(T1),
        Some((ms(31), Level::Normal, Reason::Displaced)),
        "job A's quantum ends although its rank computes"
    );
    assert_eq!(
        h.last(T2),
        Some((ms(31), BOOST10, Reason::ArrivalBoost)),
        "job B's rank takes the CPU now, not after A's quantum"
    );
}

#[test]
fn with_per_message_boosts_a_computing_holder_keeps_its_boost_when_the_job_behind_gets_a_message() {
    let h = job_a_boosted_then_arrival_for_job_b(true);
    assert_eq!(h.level(T1), BOOST10, "the per-message default is unchanged");
    assert_eq!(h.level(T2), BOOST10);
}

#[test]
fn a_rank_of_the_job_ahead_is_not_quantum_boosted_over_a_working_rank_of_the_job_behind() {
    let mut h = job_a_ahead_of_job_b(false, false);
    h.arrive(T1, ms(30) + us(100), false);
    assert_eq!(h.level(T1), Level::Normal);
    assert_eq!(
        h.refusals(T1),
        vec![(ms(30) + us(100), Reason::NoBoostCpuShare)],
        "job B, behind, keeps its CPU while it works"
    );
}

/// A quantum boost ended by the equal-share rule: the rank yields for up to
/// one quantum (or until its next message), so the job behind runs rather
/// than losing the CPU again to the CFS credit the boost left (real-time
/// time is invisible to CFS).
#[test]
fn a_quantum_boost_ended_by_the_equal_share_rule_yields_the_cpu_for_a_quantum() {
    let mut h = job_a_ahead_of_job_b(true, false);
    h.arrive(T1, ms(30) + us(100), false);
    h.preempt(T2, ms(30) + us(105));
    h.run(T1, 0, ms(30) + us(105));
    h.receive(T1, ms(30) + us(110));
    assert_eq!(h.level(T1), BOOST10);
    // The next look: job A is past its equal share (36 of 50 ms).
    let mut snapshot = cpu_times(ms(36), ms(14));
    snapshot.tasks[0].on_cpu = true;
    snapshot.tasks[0].spinning_since = None;
    snapshot.tasks[1].on_cpu = false;
    snapshot.tasks[1].spinning_since = Some(ms(30) - us(50));
    snapshot.cpus[0].running = Some(T1);
    h.tick_with(ms(34), &snapshot);
    assert_eq!(
        h.last(T1),
        Some((ms(34), Level::Demote, Reason::CpuShareExceeded)),
        "it yields instead of keeping the CPU by its CFS credit"
    );
    h.advance_to(ms(39));
    assert_eq!(
        h.last(T1),
        Some((ms(39), Level::Normal, Reason::BlockTimeout)),
        "for one quantum at most"
    );
}

/// What the ticks see for a turn without a message: T1 (job A) preempted off
/// CPU 0 mid-computation (no wait, no message pending), T2 (job B) running;
/// DCS-SB with `dcs.end_on_wait` as given (`None`: the policy's default).
fn job_b_runs_ahead_while_job_a_is_preempted(end_on_wait: Option<bool>) -> Harness {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::DcsSb);
    config.dcs.end_on_wait = end_on_wait;
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T2, 0, 0);
    let look = |t1_ns: u64, t2_ns: u64| {
        let mut snapshot = cpu_times(t1_ns, t2_ns);
        snapshot.tasks[0].spinning_since = None;
        snapshot
    };
    h.tick_with(ms(1), &look(0, 0));
    // Job B ahead by exactly the 5 ms slack: CFS decides.
    h.tick_with(ms(10), &look(ms(2), ms(7)));
    assert_eq!(h.level(T1), Level::Normal, "within the slack");
    // Then job B ran on and job A's rank did not get its CPU back.
    h.tick_with(ms(20), &look(ms(2), ms(17)));
    h
}

/// Quantum boosts take turns when no message comes too. Traced on the
/// synthetic fine-spin cell (docs/benchmarks.md, "(session 16)"): one job's
/// rank, preempted at its normal attributes, was not picked by CFS for
/// 214 ms while the other job ran unboosted; its peer on the other node sat
/// blocked by SB waiting for that rank's message, so no arrival came and
/// turns, which acted only on arrivals, never gave the job behind the CPU.
#[test]
fn a_preempted_rank_of_the_job_behind_gets_a_turn_at_a_tick_without_a_message() {
    let h = job_b_runs_ahead_while_job_a_is_preempted(Some(false));
    assert_eq!(
        h.last(T1),
        Some((ms(20), BOOST10, Reason::TurnBoost)),
        "job A, 15 ms behind, gets the CPU"
    );
    assert_eq!(h.level(T2), Level::Normal, "job B is left alone");
}

#[test]
fn with_per_message_boosts_a_preempted_rank_of_the_job_behind_gets_no_turn() {
    let h = job_b_runs_ahead_while_job_a_is_preempted(Some(true));
    assert_eq!(
        h.level(T1),
        Level::Normal,
        "turns come with quantum boosts only"
    );
}

/// DCS-SB's default is quantum boosts, and with them the jobs take turns.
#[test]
fn dcs_sb_by_default_gives_a_preempted_rank_of_the_job_behind_a_turn_at_a_tick() {
    let h = job_b_runs_ahead_while_job_a_is_preempted(None);
    assert_eq!(
        h.last(T1),
        Some((ms(20), BOOST10, Reason::TurnBoost)),
        "job A, 15 ms behind, gets the CPU"
    );
}
