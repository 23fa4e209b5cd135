//! EDF inside the RT class: run order and SCHED_FIFO priorities.

use super::support::{blocked, due, ms, satisfied};
use crate::classes::{
    BandError, EdfOrder, EdfPriorities, FrameState, PriorityBand, PriorityChanges, RtTask,
};
use crate::local::TaskId;

fn ids(ids: &[u32]) -> Vec<TaskId> {
    ids.iter().map(|&id| TaskId(id)).collect()
}

fn band(lo: u8, hi: u8) -> EdfPriorities {
    EdfPriorities::new(PriorityBand::new(lo, hi).unwrap())
}

fn prio(p: &EdfPriorities, id: u32) -> u8 {
    p.priority(TaskId(id)).unwrap()
}

#[test]
fn run_order_is_earliest_deadline_first_with_ties_by_task_id() {
    let tasks = [
        due(3, ms(30)),
        due(2, ms(10)),
        due(1, ms(30)),
        due(4, ms(20)),
    ];
    assert_eq!(EdfOrder::of(&tasks).due, ids(&[2, 4, 1, 3]));
}

#[test]
fn blocked_and_throttled_tasks_are_left_out_and_satisfied_ones_come_after_the_due() {
    let tasks = [
        due(1, ms(50)),
        blocked(due(2, ms(5))),
        RtTask::new(TaskId(3), true, FrameState::Throttled { until_ns: ms(1) }),
        satisfied(4, ms(8), ms(9)),
        satisfied(5, ms(6), ms(7)),
    ];
    let order = EdfOrder::of(&tasks);
    assert_eq!(order.due, ids(&[1]));
    assert_eq!(order.ahead, ids(&[5, 4]));
    assert_eq!(order.all(), ids(&[1, 5, 4]));
}

#[test]
fn the_earliest_deadline_gets_the_highest_priority() {
    let mut p = band(10, 20);
    p.assign(&[due(1, ms(30)), due(2, ms(10)), due(3, ms(20))]);
    assert!(prio(&p, 2) > prio(&p, 3));
    assert!(prio(&p, 3) > prio(&p, 1));
    for id in 1..=3 {
        assert!((10..=20).contains(&prio(&p, id)));
    }
}

#[test]
fn a_blocked_task_keeps_its_priority_so_it_preempts_as_soon_as_it_wakes() {
    let mut p = band(10, 20);
    p.assign(&[blocked(due(1, ms(10))), due(2, ms(20))]);
    assert!(prio(&p, 1) > prio(&p, 2));
}

#[test]
fn a_frame_completion_changes_only_the_finished_tasks_priority() {
    let mut p = band(1, 98);
    p.assign(&[due(1, ms(10)), due(2, ms(20)), due(3, ms(30))]);
    let before: Vec<u8> = (1..=3).map(|id| prio(&p, id)).collect();
    // Task 1 finishes its frame: its next deadline is the latest.
    let changes = p.assign(&[due(1, ms(40)), due(2, ms(20)), due(3, ms(30))]);
    assert_eq!(changes.set.len(), 1, "{changes:?}");
    assert_eq!(changes.set[0].0, TaskId(1));
    assert!(changes.released.is_empty());
    assert_eq!((prio(&p, 2), prio(&p, 3)), (before[1], before[2]));
    assert!(prio(&p, 3) > prio(&p, 1));
    // The same order again changes nothing.
    let again = p.assign(&[due(1, ms(40)), due(2, ms(20)), due(3, ms(30))]);
    assert_eq!(again, PriorityChanges::default());
}

#[test]
fn rotating_tasks_stay_ordered_when_the_band_runs_out_of_room() {
    let mut p = band(1, 4);
    let mut deadlines = [10, 20, 30];
    for step in 0..20 {
        // The earliest task finishes its frame each step.
        let first = (0..3).min_by_key(|&i| deadlines[i]).unwrap();
        deadlines[first] += 30;
        let tasks: Vec<RtTask> = (0..3).map(|i| due(i as u32, ms(deadlines[i]))).collect();
        p.assign(&tasks);
        let mut by_deadline: Vec<usize> = (0..3).collect();
        by_deadline.sort_by_key(|&i| deadlines[i]);
        let prios: Vec<u8> = by_deadline.iter().map(|&i| prio(&p, i as u32)).collect();
        assert!(
            prios.windows(2).all(|w| w[0] > w[1]),
            "step {step}: {prios:?}"
        );
    }
}

#[test]
fn tasks_with_the_same_deadline_share_a_priority() {
    let mut p = band(10, 20);
    p.assign(&[due(1, ms(10)), due(2, ms(10)), due(3, ms(20))]);
    assert_eq!(prio(&p, 1), prio(&p, 2));
    assert!(prio(&p, 2) > prio(&p, 3));
}

#[test]
fn more_deadlines_than_priorities_fold_the_latest_onto_the_lowest() {
    let mut p = band(10, 12);
    let tasks: Vec<RtTask> = (1..=5).map(|id| due(id, ms(u64::from(id)))).collect();
    p.assign(&tasks);
    let prios: Vec<u8> = (1..=5).map(|id| prio(&p, id)).collect();
    assert_eq!(prios, vec![12, 11, 10, 10, 10]);
}

#[test]
fn throttled_and_departed_tasks_are_released() {
    let mut p = band(10, 20);
    p.assign(&[due(1, ms(10)), due(2, ms(20)), due(3, ms(30))]);
    let throttled = RtTask::new(TaskId(1), true, FrameState::Throttled { until_ns: ms(40) });
    let changes = p.assign(&[throttled, due(2, ms(20))]);
    assert_eq!(changes.released, ids(&[1, 3]));
    assert_eq!(p.priority(TaskId(1)), None);
    assert_eq!(p.priorities().len(), 1);
}

#[test]
fn a_band_outside_fifo_priorities_is_refused() {
    assert_eq!(
        PriorityBand::new(0, 5),
        Err(BandError::OutOfRange { lo: 0, hi: 5 })
    );
    assert!(PriorityBand::new(5, 100).is_err());
    assert!(PriorityBand::new(6, 5).is_err());
    assert_eq!(PriorityBand::new(7, 7).unwrap().levels(), 1);
}
