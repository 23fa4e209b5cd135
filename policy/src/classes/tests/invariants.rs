//! Property tests of the class algorithms over random inputs:
//! - 2DCS-PS gives x:y when both classes are always ready, within one
//!   event's worth of time, and never idles with something ready;
//! - 2DCS-TDM divisions tile time, RT then BE, with lengths x:y per Δ;
//! - EDF order is sorted by deadline and priorities are monotone in it.
//!
//! Frame accounting and admission: `accounting_invariants`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::classes::{
    Class, DivisionClock, EdfOrder, EdfPriorities, FairnessRatio, FrameState, PriorityBand, PsNode,
    PsParams, Readiness, RtTask,
};
use crate::local::TaskId;

pub(super) fn ratio() -> impl Strategy<Value = FairnessRatio> {
    (1u32..=6, 1u32..=6).prop_map(|(rt, be)| FairnessRatio::new(rt, be).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn ps_shares_converge_to_the_ratio_when_both_classes_are_always_ready(
        ratio in ratio(),
        steps in prop::collection::vec(1u64..20_000, 1..400),
    ) {
        let mut node = PsNode::new(PsParams { ratio, sleeper_credit: 0 }, 0);
        let both = Readiness { rt: true, be: true };
        let mut t = 0;
        node.on_event(t, both);
        let max_step = *steps.iter().max().unwrap();
        for step in &steps {
            t += step;
            node.on_event(t, both);
            let rt = i128::from(node.run_time_ns(Class::RealTime));
            let be = i128::from(node.run_time_ns(Class::BestEffort));
            prop_assert_eq!(rt + be, i128::from(t));
            // rt/x and be/y differ by at most one event's time.
            let skew = (rt * i128::from(ratio.be) - be * i128::from(ratio.rt)).abs();
            let bound = i128::from(max_step) * i128::from(ratio.rt.max(ratio.be));
            prop_assert!(skew <= bound, "t {}: rt {} be {} skew {} > {}", t, rt, be, skew, bound);
        }
    }

    #[test]
    fn ps_runs_a_ready_class_whenever_there_is_one(
        ratio in ratio(),
        credit in prop_oneof![Just(0u64), 0u64..1_000],
        events in prop::collection::vec((0u64..5_000, any::<bool>(), any::<bool>()), 1..200),
    ) {
        let mut node = PsNode::new(PsParams { ratio, sleeper_credit: credit }, 0);
        let mut t = 0;
        for (step, rt, be) in events {
            t += step;
            let ready = Readiness { rt, be };
            let chosen = node.on_event(t, ready);
            match chosen {
                Some(class) => prop_assert!(ready.of(class)),
                None => prop_assert!(!rt && !be),
            }
            // The returning class's reset never lowers a virtual time below
            // what it ran.
            let part = |c: Class| u64::from(ratio.part(c));
            for class in [Class::RealTime, Class::BestEffort] {
                let earned = node.run_time_ns(class) * ratio.total() / part(class);
                prop_assert!(node.virtual_time(class) >= earned);
            }
        }
    }

    #[test]
    fn tdm_divisions_tile_time_with_exact_lengths_x_y_per_delta(
        ratio in ratio(),
        period in 2u64..5_000_000_000,
        epoch in 0u64..1_000_000_000,
        periods in 1usize..30,
        probe in any::<u64>(),
    ) {
        let Ok(clock) = DivisionClock::new(period, ratio, epoch) else {
            prop_assume!(false);
            unreachable!()
        };
        let (x, y, total) = (u128::from(ratio.rt), u128::from(ratio.be), u128::from(ratio.total()));
        let (rt_len, be_len) = (u128::from(clock.rt_len_ns()), u128::from(clock.be_len_ns()));
        prop_assert_eq!(rt_len + be_len, u128::from(period));
        // RT gets x/(x+y) of Δ, rounded down by less than one unit.
        prop_assert!(rt_len * total <= u128::from(period) * x);
        prop_assert!(u128::from(period) * x - rt_len * total < total);
        if u128::from(period) % total == 0 {
            prop_assert_eq!(rt_len * y, be_len * x);
        }
        let mut division = clock.division_at(epoch);
        prop_assert_eq!(division.start_ns, epoch);
        for n in 0..(2 * periods) as u64 {
            prop_assert_eq!(division.number, n);
            let class = if n % 2 == 0 { Class::RealTime } else { Class::BestEffort };
            prop_assert_eq!(division.class, class);
            let len = if n % 2 == 0 { rt_len } else { be_len };
            prop_assert_eq!(u128::from(division.len_ns()), len);
            prop_assert_eq!(clock.division_at(division.start_ns), division);
            prop_assert_eq!(clock.division_at(division.end_ns - 1), division);
            let inside = division.start_ns + probe % division.len_ns();
            prop_assert_eq!(clock.division_at(inside), division);
            let next = clock.next(&division);
            prop_assert_eq!(next.start_ns, division.end_ns);
            division = next;
        }
    }
}

#[derive(Debug, Clone)]
struct TaskInput {
    id: u32,
    ready: bool,
    /// 0: due, 1: satisfied, 2: throttled.
    kind: u8,
    deadline: u64,
}

fn task_inputs() -> impl Strategy<Value = Vec<TaskInput>> {
    prop::collection::vec(
        (
            0u32..12,
            any::<bool>(),
            prop_oneof![6 => Just(0u8), 2 => Just(1), 1 => Just(2)],
            0u64..20,
        )
            .prop_map(|(id, ready, kind, deadline)| TaskInput {
                id,
                ready,
                kind,
                deadline,
            }),
        0..12,
    )
}

fn to_tasks(inputs: &[TaskInput]) -> Vec<RtTask> {
    let mut by_id = BTreeMap::new();
    for input in inputs {
        let state = match input.kind {
            0 => FrameState::Due {
                deadline_ns: input.deadline,
            },
            1 => FrameState::Satisfied {
                until_ns: input.deadline,
                next_deadline_ns: input.deadline + 1,
            },
            _ => FrameState::Throttled {
                until_ns: input.deadline,
            },
        };
        by_id.insert(input.id, RtTask::new(TaskId(input.id), input.ready, state));
    }
    by_id.into_values().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn edf_order_is_sorted_by_deadline_and_priorities_are_monotone_in_it(
        lo in 1u8..=99,
        width in 0u8..12,
        rounds in prop::collection::vec(task_inputs(), 1..12),
    ) {
        let band = PriorityBand::new(lo, lo.saturating_add(width).min(99)).unwrap();
        let mut priorities = EdfPriorities::new(band);
        for inputs in rounds {
            let tasks = to_tasks(&inputs);
            let order = EdfOrder::of(&tasks);
            let by_id: BTreeMap<TaskId, RtTask> = tasks.iter().map(|t| (t.id, *t)).collect();
            for list in [&order.due, &order.ahead] {
                let keys: Vec<(u64, TaskId)> =
                    list.iter().map(|id| (by_id[id].state.deadline_ns(), *id)).collect();
                prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "{:?}", keys);
                prop_assert!(list.iter().all(|id| by_id[id].ready && by_id[id].may_run()));
            }
            prop_assert!(order.due.iter().all(|id| by_id[id].is_due()));
            let expected = tasks.iter().filter(|t| t.ready && t.may_run()).count();
            prop_assert_eq!(order.due.len() + order.ahead.len(), expected);

            let before = priorities.priorities().clone();
            let changes = priorities.assign(&tasks);
            let after = priorities.priorities().clone();
            // The changes turn the old map into the new one.
            let mut replayed = before.clone();
            for id in &changes.released {
                prop_assert!(replayed.remove(id).is_some());
            }
            for &(id, prio) in &changes.set {
                prop_assert_ne!(before.get(&id), Some(&prio));
                replayed.insert(id, prio);
            }
            prop_assert_eq!(&replayed, &after);
            // Exactly the tasks that may run have a priority, inside the band.
            let runnable: Vec<TaskId> = tasks.iter().filter(|t| t.may_run()).map(|t| t.id).collect();
            prop_assert_eq!(after.keys().copied().collect::<Vec<_>>(), runnable);
            prop_assert!(after.values().all(|p| (band.lo()..=band.hi()).contains(p)));
            // Monotone: an earlier key never has a lower priority, and a
            // strictly higher one while the band has room for every key.
            let mut keyed: Vec<((bool, u64), u8)> = tasks
                .iter()
                .filter(|t| t.may_run())
                .map(|t| { let (late, d, _) = t.edf_key(); ((late, d), after[&t.id]) })
                .collect();
            keyed.sort();
            let mut distinct = keyed.iter().map(|(k, _)| *k).collect::<Vec<_>>();
            distinct.dedup();
            let exact = distinct.len() <= band.levels();
            for pair in keyed.windows(2) {
                let ((ka, pa), (kb, pb)) = (pair[0], pair[1]);
                if ka == kb {
                    prop_assert_eq!(pa, pb);
                } else if exact {
                    prop_assert!(pa > pb, "{:?}", keyed);
                } else {
                    prop_assert!(pa >= pb, "{:?}", keyed);
                }
            }
        }
    }
}
