//! FCS classification and in-slot priorities, situation by situation.

use super::harness::*;
use crate::local::fcs::classify::{FcsClass, Phase};
use crate::local::{FcsParams, FcsPolicy, JobId, Level, LocalPolicy, Reason, TaskId};

const SLOT: u64 = ms(10);
const TOP: Level = Level::Boost { prio: 20 };

fn fcs(params: FcsParams) -> Harness<FcsPolicy> {
    let mut h = Harness::with_policy(FcsPolicy::new(
        &params,
        &crate::local::FairnessParams::default(),
    ));
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h
}

/// A slot of `owner` from `start`: `task` (if any) runs it on CPU 0 and makes
/// `waits` receives, each waiting `wait` ns for its message.
fn slot_with_traffic(
    h: &mut Harness<FcsPolicy>,
    owner: JobId,
    start: u64,
    task: Option<TaskId>,
    waits: u64,
    wait: u64,
) {
    h.slot(Some(owner), start, start + SLOT);
    let Some(task) = task else { return };
    h.run(task, 0, start);
    let mut t = start + us(10);
    for _ in 0..waits {
        h.spin(task, t);
        h.arrive(task, t + wait, true);
        h.receive(task, t + wait + us(2));
        t += wait + us(20);
    }
    assert!(t < start + SLOT, "traffic must fit in the slot");
    h.preempt(task, start + SLOT - us(1));
}

#[test]
fn fcs_new_process_measures_cs_then_dc_then_classifies() {
    let mut h = fcs(FcsParams::default()); // 2 CS slots, then 2 DC slots
    let mut phases = Vec::new();
    for k in 0..5u64 {
        let start = 2 * k * SLOT;
        // Coscheduled, T1 talks a lot with short waits; not coscheduled, its
        // peers rarely answer.
        let waits = if (2..4).contains(&k) { 2 } else { 100 };
        slot_with_traffic(&mut h, JA, start, Some(T1), waits, us(20));
        phases.push((h.policy.profile_of(T1).unwrap().phase, h.level(T1)));
        // Job B's slot: T2 computes, never communicates.
        slot_with_traffic(&mut h, JB, start + SLOT, Some(T2), 0, 0);
        h.advance_to(start + 2 * SLOT - us(1));
    }
    assert_eq!(
        phases,
        vec![
            (Phase::MeasuringCs { slots_done: 1 }, TOP),
            (Phase::MeasuringCs { slots_done: 2 }, TOP),
            (Phase::MeasuringDc { slots_done: 1 }, Level::Normal),
            (Phase::MeasuringDc { slots_done: 2 }, Level::Normal),
            (Phase::Classified(FcsClass::Cs), TOP),
        ]
    );
    assert_eq!(
        h.policy.class_of(T2),
        Some(FcsClass::Dc),
        "compute-only: rarely communicates"
    );
    let c = h.policy.profile_of(T1).unwrap().counters;
    assert!(
        c.coscheduled.comms > 100 && c.not_coscheduled.comms == 4,
        "{c:?}"
    );
}

#[test]
fn fcs_slot_of_an_owner_measuring_as_dc_is_left_to_the_local_scheduler() {
    let params = FcsParams {
        measure_cs_slots: 1,
        measure_dc_slots: 1,
        ..FcsParams::default()
    };
    let mut h = fcs(params);
    slot_with_traffic(&mut h, JA, 0, Some(T1), 10, us(20));
    assert_eq!(h.level(T1), TOP, "measuring as CS: owns its slot");
    assert_eq!(h.level(T2), Level::Demote);
    slot_with_traffic(&mut h, JB, SLOT, Some(T2), 0, 0);
    slot_with_traffic(&mut h, JA, 2 * SLOT, Some(T1), 2, us(20));
    assert_eq!(
        h.policy.profile_of(T1).unwrap().phase,
        Phase::MeasuringDc { slots_done: 1 }
    );
    assert_eq!(h.level(T1), Level::Normal);
    assert_eq!(
        h.level(T2),
        Level::Normal,
        "not demoted: T1 must compete to measure itself uncoscheduled"
    );
    assert_eq!(h.last(T2).map(|l| l.2), Some(Reason::FcsMeasuringDc));
}

#[test]
fn fcs_measuring_process_outside_its_slot_is_in_the_lowest_group() {
    let mut h = fcs(FcsParams::default());
    slot_with_traffic(&mut h, JB, 0, Some(T2), 0, 0);
    assert_eq!(h.level(T2), TOP, "measuring as CS in its own slot");
    assert_eq!(h.level(T1), Level::Demote, "CS group, below DC and F");
}

/// Classifies T1 as F: one CS slot and one DC slot of long waits.
fn frustrated_t1() -> Harness<FcsPolicy> {
    let params = FcsParams {
        measure_cs_slots: 1,
        measure_dc_slots: 1,
        learn_spin_time: false,
        ..Default::default()
    };
    let mut h = fcs(params);
    slot_with_traffic(&mut h, JA, 0, Some(T1), 4, ms(2));
    slot_with_traffic(&mut h, JB, SLOT, None, 0, 0);
    slot_with_traffic(&mut h, JA, 2 * SLOT, Some(T1), 4, ms(2));
    slot_with_traffic(&mut h, JB, 3 * SLOT, None, 0, 0);
    h
}

#[test]
fn fcs_frustrated_yields_after_spin_time_and_regains_on_arrival() {
    let mut h = frustrated_t1();
    let start = 4 * SLOT;
    h.slot(Some(JA), start, start + SLOT);
    assert_eq!(h.policy.class_of(T1), Some(FcsClass::F));
    assert_eq!(h.level(T1), TOP);
    h.run(T1, 0, start);
    h.spin(T1, start + ms(1));
    h.advance_to(start + ms(1) + us(499));
    assert_eq!(h.level(T1), TOP);
    h.advance_to(start + ms(1) + us(500));
    assert_eq!(
        h.last(T1),
        Some((
            start + ms(1) + us(500),
            Level::Background,
            Reason::FcsFrustratedYield
        ))
    );
    h.preempt(T1, start + ms(1) + us(510));
    h.arrive(T1, start + ms(3), false);
    assert_eq!(
        h.last(T1),
        Some((start + ms(3), TOP, Reason::FcsFrustratedResume))
    );
    h.advance_to(start + SLOT);
    assert_eq!(
        h.last(T1),
        Some((start + SLOT, Level::Background, Reason::FcsGroup)),
        "slot over: F group"
    );
}

#[test]
fn fcs_cs_owner_holds_cpu_whole_slot_despite_arrivals() {
    let mut h = fcs(FcsParams::default());
    slot_with_traffic(&mut h, JA, 0, None, 0, 0);
    h.run(T1, 0, 0);
    h.spin(T1, ms(1));
    h.arrive(T2, ms(2), false);
    h.advance_to(SLOT - 1);
    assert_eq!(
        h.history(T1),
        vec![(0, TOP, Reason::FcsSlotOwner)],
        "not yielded, not preempted"
    );
    assert_eq!(
        h.history(T2),
        vec![(0, Level::Demote, Reason::FcsGroup)],
        "arrival does not raise it"
    );
    h.slot(Some(JB), SLOT, 2 * SLOT);
    assert_eq!(h.level(T1), Level::Demote);
    assert_eq!(h.level(T2), TOP);
}

#[test]
fn fcs_slot_expiry_without_successor_returns_everyone_to_normal() {
    let mut h = fcs(FcsParams::default());
    h.slot(Some(JA), 0, SLOT);
    assert_eq!(h.policy.next_wakeup(), Some(SLOT));
    h.advance_to(SLOT);
    assert_eq!(
        h.level(T1),
        Level::Demote,
        "slot over: nobody on top, groups stay"
    );
    let grace_end = SLOT + ms(100);
    assert_eq!(h.policy.next_wakeup(), Some(grace_end));
    h.advance_to(grace_end);
    assert_eq!(
        h.last(T1),
        Some((grace_end, Level::Normal, Reason::FcsNoSlot))
    );
    assert_eq!(h.level(T2), Level::Normal);
    assert_eq!(h.policy.next_wakeup(), None);
}

#[test]
fn fcs_back_to_back_slots_do_not_flap_levels() {
    let mut h = fcs(FcsParams::default());
    h.slot(Some(JA), 0, SLOT);
    h.slot(Some(JB), SLOT, 2 * SLOT);
    h.slot(Some(JA), 2 * SLOT, 3 * SLOT);
    let t2: Vec<Level> = h
        .history(T2)
        .into_iter()
        .map(|(_, level, _)| level)
        .collect();
    assert_eq!(t2, vec![Level::Demote, TOP, Level::Demote]);
}

/// The agent looks every millisecond and is not woken per arrival: the
/// arrivals between two looks come from the kernel's counter, all of them,
/// once each (an arrival an event already reported is not counted again).
#[test]
fn fcs_counts_every_arrival_between_two_looks_once() {
    let mut h = fcs(FcsParams::default());
    h.slot(Some(JA), 0, SLOT);
    h.run(T1, 0, us(10));
    h.spin(T1, us(20));
    h.arrive(T1, us(30), true); // reported as an event: counted once
    let mut look = message_pending_off_cpu(T1, us(900), false, T1);
    look.tasks[0].on_cpu = true;
    look.tasks[0].arrivals = 500; // the kernel counted 499 more
    h.tick_with(ms(1), &look);
    look.tasks[0].arrivals = 800;
    h.tick_with(ms(2), &look);
    h.slot(Some(JB), SLOT, 2 * SLOT);
    let c = h.policy.profile_of(T1).unwrap().counters;
    assert_eq!(c.coscheduled.comms, 800, "{c:?}");
    assert_eq!(c.not_coscheduled.comms, 0);
}

/// An I/O-bound barrier process: in each of its slots it wakes from I/O,
/// runs 30 µs, waits 50 µs for its peer's barrier message, and sleeps again
/// — far under a millisecond of CPU per slot, as many messages run as CS or
/// as DC.
fn io_bound_slot(h: &mut Harness<FcsPolicy>, start: u64) {
    h.slot(Some(JA), start, start + SLOT);
    for step in 0..2u64 {
        let t = start + us(100) + step * ms(5);
        h.run(T1, 0, t);
        h.spin(T1, t + us(30));
        h.arrive(T1, t + us(80), true);
        h.receive(T1, t + us(82));
        h.sleep(T1, t + us(90));
    }
}

#[test]
fn fcs_io_bound_process_that_communicates_as_well_uncoscheduled_is_dc() {
    let mut h = fcs(FcsParams::default()); // 2 CS slots, then 2 DC slots
    for k in 0..5u64 {
        io_bound_slot(&mut h, 2 * k * SLOT);
        slot_with_traffic(&mut h, JB, (2 * k + 1) * SLOT, Some(T2), 0, 0);
    }
    assert_eq!(
        h.policy.profile_of(T1).unwrap().phase,
        Phase::Classified(FcsClass::Dc),
        "measured in every slot it took part in (not stuck measuring as CS, \
         demoted outside its slots), and no better coscheduled"
    );
    // DC: its original attributes in every slot, so it fills gaps.
    io_bound_slot(&mut h, 10 * SLOT);
    assert_eq!(h.level(T1), Level::Normal);
    h.slot(Some(JB), 11 * SLOT, 12 * SLOT);
    assert_eq!(h.level(T1), Level::Normal);
}

#[test]
fn fcs_process_asleep_through_its_first_slots_is_measured_once_it_runs() {
    let mut h = fcs(FcsParams::default()); // 2 CS slots, then 2 DC slots
    // Job A's first four own slots pass while T1 sleeps (waiting for its
    // peers to start): none of them is a measurement.
    for k in 0..4u64 {
        slot_with_traffic(&mut h, JA, 2 * k * SLOT, None, 0, 0);
        slot_with_traffic(&mut h, JB, (2 * k + 1) * SLOT, Some(T2), 0, 0);
    }
    assert_eq!(
        h.policy.profile_of(T1).unwrap().phase,
        Phase::MeasuringCs { slots_done: 1 },
        "still measuring its first CS slot"
    );
    // Then it runs and talks a lot coscheduled, little not: CS.
    for k in 4..9u64 {
        let waits = if (6..8).contains(&k) { 2 } else { 100 };
        slot_with_traffic(&mut h, JA, 2 * k * SLOT, Some(T1), waits, us(20));
        slot_with_traffic(&mut h, JB, (2 * k + 1) * SLOT, Some(T2), 0, 0);
    }
    assert_eq!(
        h.policy.profile_of(T1).unwrap().phase,
        Phase::Classified(FcsClass::Cs)
    );
}

#[test]
fn fcs_owner_boosts_stop_at_the_node_real_time_cap_until_the_next_window() {
    // Both measure as CS for long: every slot's owner is boosted.
    let mut h = fcs(FcsParams {
        measure_cs_slots: 100,
        ..FcsParams::default()
    });
    for k in 0..8u64 {
        let owner = if k % 2 == 0 { JA } else { JB };
        h.slot(Some(owner), k * SLOT, (k + 1) * SLOT);
    }
    // 80 of the 100 ms window boosted (the default node cap): the owner of
    // the ninth slot runs at its ordinary priority, still above the other.
    h.slot(Some(JA), 8 * SLOT, 9 * SLOT);
    assert_eq!(h.level(T1), Level::Normal);
    assert_eq!(h.last(T1).map(|l| l.2), Some(Reason::BudgetExhausted));
    assert_eq!(h.level(T2), Level::Demote);
    h.slot(Some(JB), 9 * SLOT, 10 * SLOT);
    assert_eq!(h.level(T2), Level::Normal);
    h.slot(Some(JA), 10 * SLOT, 11 * SLOT);
    assert_eq!(h.level(T1), TOP, "a new window");
}

#[test]
fn slotless_fcs_spinners_need_no_fast_tick_and_slots_bring_it_back() {
    let mut h = fcs(FcsParams::default());
    h.run(T1, 0, 0);
    h.spin(T1, us(10));
    assert!(
        !h.policy.needs_spin_ticks(),
        "no slot: FCS leaves spinners alone"
    );
    h.slot(Some(JA), ms(1), ms(1) + SLOT);
    assert!(h.policy.needs_spin_ticks(), "in gang slots it counts them");
}

/// FCS on nodes whose agent has no coordinator (or whose coordinator went
/// quiet): it is dormant — every process at its own attributes, no timer —
/// until a slot broadcast comes, and again once a slot's grace period has
/// passed without a new one.
#[test]
fn fcs_without_a_coordinator_is_dormant_until_a_slot_and_after_its_grace() {
    let p = FcsParams::default();
    let mut h = fcs(p.clone());
    h.run(T1, 0, 0);
    h.spin(T1, us(10));
    assert!(h.policy.dormant(), "no slot yet");
    assert_eq!(h.policy.next_wakeup(), None);
    assert_eq!(h.level(T1), Level::Normal);
    h.slot(Some(JA), ms(1), ms(1) + SLOT);
    assert!(!h.policy.dormant(), "a slot: FCS acts");
    assert_eq!(h.level(T1), TOP, "a new process runs as CS in its slot");
    let grace_end = ms(1) + SLOT + us(p.slot_grace_us);
    h.advance_to(grace_end - 1);
    assert!(
        !h.policy.dormant(),
        "the groups hold through the grace period"
    );
    h.advance_to(grace_end);
    assert!(h.policy.dormant(), "the coordinator went quiet");
    assert_eq!(h.level(T1), Level::Normal);
}
