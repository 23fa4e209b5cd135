//! Figure 2 of the paper, panel by panel: p = 4, M = 3, x:y = 2:1 (rows 0
//! and 1 are the RT set, row 2 the BE set), no admission control. Capitals
//! are a job's own cells, lower case its replicas.

use super::support::{MS, allocate, assert_consistent, be, matrix, render, rt, rt_waiting};
use crate::classes::Class;
use crate::classes::one_level_gang::{
    ArrivalDecision, Enqueued, OneLevelGang, Replica, ReplicationStep,
};
use crate::global::JobId;

const A: JobId = JobId(1);
const B: JobId = JobId(2);
const C: JobId = JobId(3);
const D: JobId = JobId(4);
const E: JobId = JobId(5);
const T1: u64 = 1_000 * MS;
const T2: u64 = 2_000 * MS;
const T3: u64 = 3_000 * MS;
const WAIT_D: u64 = 15_000 * MS;
const T5: u64 = T3 + WAIT_D + 1_000 * MS;

fn figure_2() -> OneLevelGang {
    matrix(4, 3, 2, 1, false)
}

fn assert_rows(state: &OneLevelGang, expected: [&str; 3], panel: &str) {
    assert_eq!(render(state), expected, "panel {panel}");
    assert_consistent(state);
}

fn replicas(step: ReplicationStep, state: &mut OneLevelGang) -> Vec<(JobId, usize)> {
    state
        .replicate(step)
        .into_iter()
        .map(|Replica { job, row }| (job, row))
        .collect()
}

#[test]
fn figure_2_step_by_step_from_a_to_l() {
    let mut state = figure_2();
    assert_eq!(state.split().rt_rows, 2);
    assert_rows(&state, ["....", "....", "...."], "(a)");

    // (b) t1: RT job A (s = 3) arrives; initial allocation.
    state.cleanse();
    state.enqueue(rt(1, 3, 5 * MS), T1).unwrap();
    assert_eq!(state.allocate_waiting(), [A]);
    assert_rows(&state, ["AAA.", "....", "...."], "(b)");
    // (c) step 1: A is copied within the RT set.
    assert_eq!(replicas(ReplicationStep::RtWithinRt, &mut state), [(A, 1)]);
    assert_rows(&state, ["AAA.", "aaa.", "...."], "(c)");
    assert!(replicas(ReplicationStep::BeWithinBe, &mut state).is_empty());
    // (d) step 3: A is copied into the BE set.
    assert_eq!(replicas(ReplicationStep::RtIntoBe, &mut state), [(A, 2)]);
    assert_rows(&state, ["AAA.", "aaa.", "aaa."], "(d)");
    assert!(replicas(ReplicationStep::BeIntoRt, &mut state).is_empty());

    // (e) t2: BE job B (s = 1) arrives: duplicates removed, B allocated in
    // the BE set on the node A does not use.
    assert_eq!(state.cleanse(), 6);
    state.enqueue(be(2, 1), T2).unwrap();
    assert_eq!(state.allocate_waiting(), [B]);
    assert_rows(&state, ["AAA.", "....", "...B"], "(e)");
    // (f) step 1.
    assert_eq!(replicas(ReplicationStep::RtWithinRt, &mut state), [(A, 1)]);
    assert_rows(&state, ["AAA.", "aaa.", "...B"], "(f)");
    assert!(replicas(ReplicationStep::BeWithinBe, &mut state).is_empty());
    // (g) step 3.
    assert_eq!(replicas(ReplicationStep::RtIntoBe, &mut state), [(A, 2)]);
    assert_rows(&state, ["AAA.", "aaa.", "aaaB"], "(g)");
    // (h) step 4: B fills the idle RT cells.
    assert_eq!(
        replicas(ReplicationStep::BeIntoRt, &mut state),
        [(B, 0), (B, 1)]
    );
    assert_rows(&state, ["AAAb", "aaab", "aaaB"], "(h)");

    // (i) t3: RT jobs C (s = 4) and D (s = 2) and BE job E (s = 4) arrive:
    // duplicates removed, C allocated; D and E wait.
    state.cleanse();
    for job in [rt(3, 4, 5 * MS), rt_waiting(4, 2, 5 * MS, WAIT_D), be(5, 4)] {
        assert!(matches!(
            state.enqueue(job, T3).unwrap(),
            Enqueued::Waiting { .. }
        ));
    }
    assert_eq!(state.allocate_waiting(), [C]);
    assert_rows(&state, ["AAA.", "CCCC", "...B"], "(i)");
    assert_eq!(state.waiting(Class::RealTime).next().unwrap().job.id, D);
    assert_eq!(state.waiting(Class::BestEffort).next().unwrap().job.id, E);
    // (j) steps 1 to 4.
    let placed = state.optimize();
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert_rows(&state, ["AAAb", "CCCC", "aaaB"], "(j)");

    // (k) t4 = t3 + w_D: D is evicted; the matrix does not change.
    assert!(state.evict_expired(T3 + WAIT_D - 1).evicted.is_empty());
    let evicted = state.evict_expired(T3 + WAIT_D).evicted;
    assert_eq!(evicted.len(), 1);
    assert_eq!((evicted[0].job.id, evicted[0].waited_ns), (D, WAIT_D));
    assert_rows(&state, ["AAAb", "CCCC", "aaaB"], "(k)");
    assert_eq!(state.queue_position(E), Some(0));

    // (l) t5: B finishes; E is allocated and optimised (nothing fits).
    let outcome = state.depart(B, T5).unwrap();
    assert_eq!(outcome.started, [E]);
    assert_rows(&state, ["AAA.", "CCCC", "EEEE"], "(l)");
    assert_eq!(state.queue_position(E), None);
}

#[test]
fn figure_2_through_arrivals_and_departures_reaches_the_same_panels() {
    let mut state = figure_2();
    allocate(&mut state, rt(1, 3, 5 * MS), T1);
    assert_rows(&state, ["AAA.", "aaa.", "aaa."], "(d)");
    allocate(&mut state, be(2, 1), T2);
    assert_rows(&state, ["AAAb", "aaab", "aaaB"], "(h)");
    allocate(&mut state, rt(3, 4, 5 * MS), T3);
    assert_rows(&state, ["AAAb", "CCCC", "aaaB"], "after C");
    for job in [rt_waiting(4, 2, 5 * MS, WAIT_D), be(5, 4)] {
        let outcome = state.arrive(job, T3).unwrap();
        assert_eq!(outcome.decision, ArrivalDecision::Waiting { position: 0 });
    }
    assert_rows(&state, ["AAAb", "CCCC", "aaaB"], "(j)");
    assert_eq!(state.next_expiry(), Some(T3 + WAIT_D));
    let evicted = state.evict_expired(T3 + WAIT_D).evicted;
    assert_eq!(evicted.iter().map(|e| e.job.id).collect::<Vec<_>>(), [D]);
    assert_rows(&state, ["AAAb", "CCCC", "aaaB"], "(k)");
    let outcome = state.depart(B, T5).unwrap();
    assert_eq!(outcome.started, [E]);
    assert!(outcome.evicted.is_empty());
    assert_rows(&state, ["AAA.", "CCCC", "EEEE"], "(l)");
}
