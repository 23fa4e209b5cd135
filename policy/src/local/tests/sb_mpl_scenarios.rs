//! MPL-aware SB (`sb.mpl_aware`): a spinner is blocked at its spin
//! threshold only when two or more other tasks compete for its CPU; with
//! fewer, the report of its long spin hands the CPU over (the agent's
//! wake-up makes the kernel pick again) and it is blocked only once its spin
//! reaches `max_spin_threshold_us`.

use super::harness::*;
use crate::local::{
    BlockMethod, JobId, Level, LocalPolicyConfig, PolicyKind, Reason, SpinBlockParams, TaskId,
};

/// The default spin threshold (500 µs) and bound (4 ms) the rule uses.
const THRESHOLD: u64 = us(500);
const BOUND: u64 = ms(4);

#[test]
fn the_scenarios_use_the_default_threshold_and_bound() {
    let defaults = SpinBlockParams::default();
    assert_eq!(us(defaults.spin_threshold_us), THRESHOLD);
    assert_eq!(us(defaults.max_spin_threshold_us), BOUND);
}

fn sb(kind: PolicyKind, mpl_aware: bool) -> Harness {
    let mut config = LocalPolicyConfig::for_kind(kind);
    config.sb.mpl_aware = mpl_aware;
    Harness::new(config)
}

/// T1 (job A) runs on CPU 0 and starts waiting at 1 ms; each of `others`
/// ran on CPU 0 before it and is ready to run again (preempted).
fn t1_spinning_from_1ms_next_to(mut h: Harness, others: &[(TaskId, JobId)]) -> Harness {
    h.add(T1, JA, 0);
    for &(task, job) in others {
        h.add(task, job, 0);
        h.run(task, 0, 0);
        h.preempt(task, 0);
    }
    h.run(T1, 0, 0);
    h.spin(T1, ms(1));
    h
}

fn blocks(h: &Harness, task: TaskId) -> Vec<u64> {
    h.history(task)
        .into_iter()
        .filter(|&(_, _, reason)| reason == Reason::SpinThresholdBlock)
        .map(|(at, _, _)| at)
        .collect()
}

/// At two jobs per CPU: T1's spin passes the threshold; the report of it
/// woke the agent and the kernel picked T2. T1's message comes while T2
/// computes and T1 waits its turn. The fixed rule blocked T1 and its
/// boosted wake preempted T2; the MPL-aware one leaves both alone.
#[test]
fn a_spinner_alone_with_one_other_jobs_task_is_handed_over_not_blocked() {
    for (mpl_aware, blocked) in [(false, true), (true, false)] {
        let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::Sb, mpl_aware), &[(T2, JB)]);
        h.advance_to(ms(1) + THRESHOLD + us(100));
        h.preempt(T1, ms(1) + THRESHOLD + us(100));
        h.run(T2, 0, ms(1) + THRESHOLD + us(100));
        h.arrive(T1, ms(3), false);
        h.preempt(T2, ms(4));
        h.run(T1, 0, ms(4));
        h.receive(T1, ms(4) + us(5));
        h.advance_to(ms(10));
        assert_eq!(
            !h.history(T1).is_empty(),
            blocked,
            "mpl_aware {mpl_aware}: {:?}",
            h.history(T1)
        );
        if !blocked {
            assert!(h.history(T2).is_empty(), "nothing preempted T2");
        }
    }
}

#[test]
fn a_spinner_with_two_other_jobs_tasks_runnable_is_blocked_at_the_threshold() {
    let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::Sb, true), &[(T2, JB), (T3, JC)]);
    h.advance_to(ms(1) + THRESHOLD - 1);
    assert_eq!(h.level(T1), Level::Normal);
    h.advance_to(ms(1) + THRESHOLD);
    assert_eq!(
        h.last(T1),
        Some((ms(1) + THRESHOLD, Level::Demote, Reason::SpinThresholdBlock))
    );
    h.preempt(T1, ms(1) + THRESHOLD + us(5));
    h.run(T2, 0, ms(1) + THRESHOLD + us(5));
    h.arrive(T1, ms(3), false);
    assert_eq!(
        h.last(T1),
        Some((ms(3), BOOST10, Reason::WakeOnArrival)),
        "woken past the other two jobs' turns"
    );
}

/// Neither the report nor the kernel took T1 off its CPU (the other task
/// did not want it, or was not picked): a spin that long is blocked.
#[test]
fn a_spinner_next_to_one_other_task_is_blocked_once_it_has_spun_the_bound() {
    let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::Sb, true), &[(T2, JB)]);
    h.advance_to(ms(1) + BOUND - 1);
    assert!(h.history(T1).is_empty(), "{:?}", h.history(T1));
    h.advance_to(ms(1) + BOUND);
    assert_eq!(blocks(&h, T1), vec![ms(1) + BOUND]);
}

/// T3 sleeps in a wait of its own (not runnable): only T2 competes, until
/// T3's message makes it want the CPU; T1, past its threshold by then, is
/// blocked at once.
#[test]
fn a_long_spinner_is_blocked_as_soon_as_a_second_task_wants_its_cpu() {
    let mut h = sb(PolicyKind::Sb, true);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.add(T3, JC, 0);
    h.run(T2, 0, 0);
    h.preempt(T2, 0);
    h.run(T3, 0, 0);
    h.sleep(T3, 0);
    h.run(T1, 0, 0);
    h.spin(T1, ms(1));
    h.advance_to(ms(2));
    assert!(blocks(&h, T1).is_empty(), "one competitor: handed over");
    h.arrive(T3, ms(2), false);
    h.advance_to(ms(2));
    assert_eq!(blocks(&h, T1), vec![ms(2)]);
}

/// Tasks on the node's other CPU do not take turns on T1's.
#[test]
fn tasks_that_run_on_another_cpu_do_not_count_as_competitors() {
    let mut h = sb(PolicyKind::Sb, true);
    h.add(T1, JA, 0);
    for (task, job) in [(T2, JB), (T3, JC)] {
        h.add(task, job, 0);
        h.run(task, 1, 0);
        h.preempt(task, 0);
    }
    h.run(T1, 0, 0);
    h.spin(T1, ms(1));
    h.advance_to(ms(1) + THRESHOLD + us(100));
    assert!(blocks(&h, T1).is_empty());
}

/// T3, stopped (SIGSTOP) until its message, is off every run queue, yet it
/// takes the CPU back when its message comes: it still competes, and T1
/// (next to T2 and T3) is blocked at its threshold.
#[test]
fn a_task_held_blocked_until_its_message_still_competes_for_its_cpu() {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::Sb);
    config.sb.mpl_aware = true;
    config.sb.block_by = BlockMethod::Stop;
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.add(T3, JC, 0);
    for task in [T1, T2] {
        h.run(task, 0, 0);
        h.preempt(task, 0);
    }
    h.run(T3, 0, 0);
    h.spin(T3, us(100));
    h.advance_to(us(100) + THRESHOLD);
    assert_eq!(h.level(T3), Level::Stop);
    h.sleep(T3, us(100) + THRESHOLD + us(10));
    h.run(T1, 0, us(100) + THRESHOLD + us(10));
    h.spin(T1, ms(1));
    h.advance_to(ms(1) + THRESHOLD);
    assert_eq!(
        h.last(T1),
        Some((ms(1) + THRESHOLD, Level::Stop, Reason::SpinThresholdBlock))
    );
}

/// PB-SB's receives are SB's and follow the same rule: past its
/// threshold, T1 next to one other task is left spinning (the report hands
/// its CPU over) and blocked only once it has spun the bound.
#[test]
fn pb_sb_does_not_block_a_spinner_next_to_one_other_task_at_its_threshold() {
    let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::PbSb, true), &[(T2, JB)]);
    h.advance_to(ms(1) + THRESHOLD + us(100));
    assert!(blocks(&h, T1).is_empty(), "{:?}", h.history(T1));
    h.advance_to(ms(1) + BOUND - 1);
    assert!(blocks(&h, T1).is_empty(), "{:?}", h.history(T1));
    h.advance_to(ms(1) + BOUND);
    assert_eq!(blocks(&h, T1), vec![ms(1) + BOUND]);
}

#[test]
fn pb_sb_blocks_at_its_threshold_a_spinner_next_to_two_other_tasks() {
    let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::PbSb, true), &[(T2, JB), (T3, JC)]);
    h.advance_to(ms(1) + THRESHOLD - 1);
    assert!(blocks(&h, T1).is_empty(), "{:?}", h.history(T1));
    h.advance_to(ms(1) + THRESHOLD);
    assert_eq!(blocks(&h, T1), vec![ms(1) + THRESHOLD]);
}

/// `mpl_aware = false` restores PB-SB's fixed threshold.
#[test]
fn pb_sb_with_the_fixed_threshold_blocks_next_to_one_other_task_at_its_threshold() {
    let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::PbSb, false), &[(T2, JB)]);
    h.advance_to(ms(1) + THRESHOLD);
    assert_eq!(blocks(&h, T1), vec![ms(1) + THRESHOLD]);
}

/// By default DCS-SB keeps the fixed threshold (MPL-aware blocking is an
/// option there, `sb.mpl_aware_in_dcs_sb`).
#[test]
fn dcs_sb_blocks_at_the_threshold_next_to_one_other_task_even_when_sb_is_mpl_aware() {
    let mut h = t1_spinning_from_1ms_next_to(sb(PolicyKind::DcsSb, true), &[(T2, JB)]);
    h.advance_to(ms(1) + THRESHOLD);
    assert_eq!(blocks(&h, T1), vec![ms(1) + THRESHOLD]);
}

/// With `mpl_aware_in_dcs_sb` DCS-SB follows SB's rule: T1 next to one
/// other task is left spinning past its threshold and blocked at the bound.
#[test]
fn dcs_sb_with_mpl_aware_in_dcs_sb_blocks_next_to_one_other_task_only_at_the_bound() {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::DcsSb);
    config.sb.mpl_aware = true;
    config.sb.mpl_aware_in_dcs_sb = true;
    let mut h = t1_spinning_from_1ms_next_to(Harness::new(config), &[(T2, JB)]);
    h.advance_to(ms(1) + BOUND - 1);
    assert!(blocks(&h, T1).is_empty(), "{:?}", h.history(T1));
    h.advance_to(ms(1) + BOUND);
    assert_eq!(blocks(&h, T1), vec![ms(1) + BOUND]);
}

/// The option needs `mpl_aware`: without it DCS-SB blocks at the threshold,
/// and next to two other tasks it blocks there with the option on too.
#[test]
fn dcs_sb_blocks_at_the_threshold_without_mpl_aware_or_next_to_two_other_tasks() {
    for (mpl_aware, others) in [(false, &[(T2, JB)][..]), (true, &[(T2, JB), (T3, JC)][..])] {
        let mut config = LocalPolicyConfig::for_kind(PolicyKind::DcsSb);
        config.sb.mpl_aware = mpl_aware;
        config.sb.mpl_aware_in_dcs_sb = true;
        let mut h = t1_spinning_from_1ms_next_to(Harness::new(config), others);
        h.advance_to(ms(1) + THRESHOLD);
        assert_eq!(
            blocks(&h, T1),
            vec![ms(1) + THRESHOLD],
            "mpl_aware {mpl_aware}, {} other task(s)",
            others.len()
        );
    }
}
