//! 2DCS-TDM on a node: divisions, EDF inside RT, lending (Figure 3).

use super::support::{blocked, due, ms, satisfied};
use crate::classes::tdm::{decide, due_before_be_division_ends};
use crate::classes::{
    Class, ClassDecision, Division, DivisionClock, DivisionError, FairnessRatio, FrameState,
    RtTask, TdmEvent, TdmNode,
};
use crate::local::TaskId;

const A: TaskId = TaskId(1);
const B: TaskId = TaskId(2);

fn rt(order: &[TaskId], lent: bool) -> ClassDecision {
    ClassDecision::RealTime {
        order: order.to_vec(),
        lent,
    }
}

fn be(lent: bool) -> ClassDecision {
    ClassDecision::BestEffort { lent }
}

/// Figure 3, one node with RT jobs A and B and BE job C, x:y = 2:1. A's
/// deadline is earlier than B's until A has done its b_A frames.
#[test]
fn figure_3_a_to_i() {
    let mut node = TdmNode::new(Class::BestEffort);
    // (a) t0, BE division: C is scheduled; A and B are ready.
    node.on_event(TdmEvent::RtUpdated(due(1, ms(10))));
    node.on_event(TdmEvent::RtUpdated(due(2, ms(20))));
    assert_eq!(node.on_event(TdmEvent::BeReady(true)), Some(be(false)));
    // (b) t1: C blocks for I/O; A is scheduled to use the idle division.
    assert_eq!(
        node.on_event(TdmEvent::BeReady(false)),
        Some(rt(&[A, B], true))
    );
    // (c) t2: C is ready after its I/O; A is preempted.
    assert_eq!(node.on_event(TdmEvent::BeReady(true)), Some(be(false)));
    // (d) t3: the RT division starts; A is scheduled.
    assert_eq!(
        node.on_event(TdmEvent::DivisionStarted(Class::RealTime)),
        Some(rt(&[A, B], false))
    );
    // (e) t4: A has done its b_A frames; B, now the most critical, preempts.
    let a_done = satisfied(1, ms(40), ms(50));
    assert_eq!(
        node.on_event(TdmEvent::RtUpdated(a_done)),
        Some(rt(&[B, A], false))
    );
    // (f) t5: B blocks for a message; C uses the rest of the RT division.
    assert_eq!(
        node.on_event(TdmEvent::RtUpdated(blocked(due(2, ms(20))))),
        Some(be(true))
    );
    // (g) t6: the BE division starts; C continues, now in its own division.
    assert_eq!(
        node.on_event(TdmEvent::DivisionStarted(Class::BestEffort)),
        Some(be(false))
    );
    // (h) t7: B is ready, but it is not its division: nothing changes.
    assert_eq!(node.on_event(TdmEvent::RtUpdated(due(2, ms(20)))), None);
    assert_eq!(node.decision(), &be(false));
    // (i) t8: the RT division starts; B is scheduled.
    let decision = node
        .on_event(TdmEvent::DivisionStarted(Class::RealTime))
        .unwrap();
    assert_eq!(decision.rt_first(), Some(B));
    assert!(!decision.is_lent());
}

#[test]
fn an_idle_rt_division_is_lent_to_be_and_taken_back_at_the_next_frame() {
    let mut node = TdmNode::new(Class::RealTime);
    node.on_event(TdmEvent::BeReady(true));
    // A waits (blocked) for the input of its next frame: BE borrows the node.
    node.on_event(TdmEvent::RtUpdated(blocked(due(1, ms(10)))));
    assert_eq!(node.decision(), &be(true));
    assert!(node.decision().is_lent());
    // The input arrives: A is ready and takes its division back at once.
    assert_eq!(
        node.on_event(TdmEvent::RtUpdated(due(1, ms(10)))),
        Some(rt(&[A], false))
    );
}

#[test]
fn a_satisfied_rt_task_yields_its_division_to_be() {
    let mut node = TdmNode::new(Class::RealTime);
    node.on_event(TdmEvent::BeReady(true));
    node.on_event(TdmEvent::RtUpdated(due(1, ms(10))));
    assert_eq!(node.decision(), &rt(&[A], false));
    // A is ready but has produced its b frames: BE runs for the rest.
    assert_eq!(
        node.on_event(TdmEvent::RtUpdated(satisfied(1, ms(40), ms(50)))),
        Some(be(true))
    );
    // A's next window opens: frames are due again, RT takes the node back.
    assert_eq!(
        node.on_event(TdmEvent::RtUpdated(due(1, ms(50)))),
        Some(rt(&[A], false))
    );
}

#[test]
fn an_idle_be_division_is_lent_to_rt_and_taken_back_when_be_is_ready() {
    let mut node = TdmNode::new(Class::BestEffort);
    node.on_event(TdmEvent::RtUpdated(due(1, ms(10))));
    assert_eq!(node.decision(), &rt(&[A], true));
    assert_eq!(node.on_event(TdmEvent::BeReady(true)), Some(be(false)));
    // In the BE division even a satisfied RT task may use idle time.
    node.on_event(TdmEvent::RtUpdated(satisfied(1, ms(40), ms(50))));
    assert_eq!(
        node.on_event(TdmEvent::BeReady(false)),
        Some(rt(&[A], true))
    );
}

#[test]
fn with_nothing_else_to_run_a_satisfied_task_runs_ahead_but_a_throttled_one_never_runs() {
    let throttled = RtTask::new(B, true, FrameState::Throttled { until_ns: ms(40) });
    let ahead = satisfied(1, ms(40), ms(50));
    for division in [Class::RealTime, Class::BestEffort] {
        assert_eq!(
            decide(division, &[ahead, throttled], false).rt_first(),
            Some(A)
        );
        assert_eq!(decide(division, &[throttled], false), ClassDecision::Idle);
        assert_eq!(
            decide(division, &[throttled], true).class(),
            Some(Class::BestEffort)
        );
    }
}

#[test]
fn a_departed_rt_task_leaves_the_division_to_be() {
    let mut node = TdmNode::new(Class::RealTime);
    node.on_event(TdmEvent::BeReady(true));
    node.on_event(TdmEvent::RtUpdated(due(1, ms(10))));
    assert_eq!(node.on_event(TdmEvent::RtRemoved(A)), Some(be(true)));
    assert_eq!(node.rt_task(A), None);
}

fn clock() -> DivisionClock {
    DivisionClock::new(ms(3_000), FairnessRatio::new(2, 1).unwrap(), ms(100)).unwrap()
}

#[test]
fn divisions_alternate_rt_then_be_from_the_epoch_in_the_ratio() {
    let clock = clock();
    assert_eq!(
        (clock.rt_len_ns(), clock.be_len_ns()),
        (ms(2_000), ms(1_000))
    );
    let first = clock.division_at(ms(100));
    assert_eq!(
        first,
        Division {
            number: 0,
            class: Class::RealTime,
            start_ns: ms(100),
            end_ns: ms(2_100)
        }
    );
    assert_eq!(clock.division_at(ms(2_099)), first);
    let second = clock.division_at(ms(2_100));
    assert_eq!(
        (second.number, second.class, second.start_ns, second.end_ns),
        (1, Class::BestEffort, ms(2_100), ms(3_100))
    );
    assert_eq!(clock.next(&first), second);
    let third = clock.next(&second);
    assert_eq!(
        (third.number, third.class, third.start_ns),
        (2, Class::RealTime, ms(3_100))
    );
    assert_eq!(clock.division_at(ms(5_000)), third);
}

#[test]
fn before_the_epoch_the_first_division_is_reported_as_not_yet_started() {
    let first = clock().division_at(0);
    assert_eq!((first.number, first.start_ns), (0, ms(100)));
    assert!(!first.contains(0));
}

#[test]
fn rounding_goes_to_be_so_each_period_is_exactly_delta() {
    let clock = DivisionClock::new(10, FairnessRatio::new(2, 1).unwrap(), 0).unwrap();
    assert_eq!((clock.rt_len_ns(), clock.be_len_ns()), (6, 4));
}

#[test]
fn a_period_that_leaves_a_class_no_time_is_refused() {
    assert_eq!(
        DivisionClock::new(2, FairnessRatio::new(1, 2).unwrap(), 0),
        Err(DivisionError::EmptyDivision {
            period_ns: 2,
            rt: 1,
            be: 2
        })
    );
    assert!(DivisionClock::new(1, FairnessRatio::new(2, 1).unwrap(), 0).is_err());
}

/// A BE division of 50 ms (Δ = 150 ms, 2:1) starting at 100 ms covers the
/// end of an RT window: the frame due at 120 ms cannot wait for the RT
/// division at 150 ms, so it runs inside the BE division; a task whose next
/// frame is due after 150 ms waits, as do satisfied and throttled ones.
#[test]
fn a_frame_due_inside_the_be_division_runs_there_a_later_one_waits() {
    let be_end = ms(150);
    assert!(due_before_be_division_ends(&due(1, ms(120)), be_end));
    assert!(due_before_be_division_ends(
        &blocked(due(1, ms(150))),
        be_end
    ));
    assert!(!due_before_be_division_ends(&due(2, ms(160)), be_end));
    assert!(!due_before_be_division_ends(
        &satisfied(3, ms(120), ms(130)),
        be_end
    ));
    let throttled = RtTask::new(TaskId(4), true, FrameState::Throttled { until_ns: ms(110) });
    assert!(!due_before_be_division_ends(&throttled, be_end));
}
