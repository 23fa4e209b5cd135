//! The satisfied set and the replication (session 20, departures from the
//! paper): a satisfied RT job whose own row cannot pay for its frames is
//! still copied; between arrivals and departures an RT job that falls short
//! of its b frames gets rows at once, BE copies yield to it, RT copies stay
//! until the next event, and under admission control nothing moves.

use super::support::{MS, allocate, assert_consistent, be, matrix, render, rt};
use crate::global::JobId;

#[test]
fn an_rt_job_that_becomes_unsatisfied_gets_rows_back_at_once() {
    // 4 nodes, rows 0–1 RT, row 2 BE; no admission control.
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, be(2, 2), 0);
    assert_eq!(render(&state), ["AAbb", "aabb", "aaBB"]);
    // A reports its b frames, then a BE job arrives: the event's cleansing
    // takes A's copies and B and D get the cells.
    state.set_satisfied([JobId(1)]);
    allocate(&mut state, be(4, 1), MS);
    assert_eq!(render(&state), ["AAbb", "d.bb", "D.BB"]);
    // A's next window starts and it is short again: its copy in row 1 comes
    // back now, not at the next event, and D's lent cell yields to it.
    state.set_satisfied([]);
    assert_eq!(render(&state), ["AAbb", "aabb", "D.BB"]);
    assert_consistent(&state);
}

#[test]
fn a_job_that_becomes_satisfied_keeps_its_replicas_until_the_next_event() {
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    assert_eq!(render(&state), ["AABB", "aabb", "aabb"]);
    let generation = state.generation();
    state.set_satisfied([JobId(1)]);
    // It may be satisfied only thanks to them: taking them at each report
    // would move them every window.
    assert_eq!(render(&state), ["AABB", "aabb", "aabb"]);
    assert_eq!(state.generation(), generation + 1, "only the set changed");
    // B falls short meanwhile: it already has every cell it fits in.
    state.set_satisfied([JobId(1), JobId(2)]);
    state.set_satisfied([JobId(1)]);
    assert_eq!(render(&state), ["AABB", "aabb", "aabb"]);
    assert_eq!(state.generation(), generation + 3, "the matrix never moved");
    // The next event cleanses A's copies (§4.1) and gives them to B's side.
    allocate(&mut state, be(3, 4), MS);
    assert_eq!(render(&state), ["AABB", "..bb", "CCCC"]);
    assert_consistent(&state);
}

#[test]
fn a_job_short_of_frames_does_not_take_another_rt_jobs_copies_before_the_next_event() {
    // 2 nodes, rows 0–1 RT, rows 2–3 BE.
    let mut state = matrix(2, 4, 1, 1, false);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    state.set_satisfied([JobId(1)]);
    allocate(&mut state, rt(2, 1, 5 * MS), MS);
    assert_eq!(render(&state), ["AA", "B.", "b.", "b."]);
    // A falls short: the only cells its two columns could use are B's
    // copies, and RT copies stay until the next event.
    state.set_satisfied([]);
    assert_eq!(render(&state), ["AA", "B.", "b.", "b."]);
    // At the event, fewest rows first shares them out again.
    state.reoptimize();
    assert_eq!(render(&state), ["AA", "B.", "aa", "b."]);
    assert_consistent(&state);
}

#[test]
fn under_admission_control_a_change_of_the_satisfied_set_moves_no_cell() {
    // 4 nodes, rows 0–3 RT, rows 4–5 BE; τ = 5 ms of d = 30 ms: r = 1·…
    let mut state = matrix(4, 6, 2, 1, true);
    allocate(&mut state, rt(1, 2, 5 * MS), 0);
    allocate(&mut state, rt(2, 2, 5 * MS), 0);
    allocate(&mut state, be(3, 3), 0);
    let before = render(&state);
    for satisfied in [vec![1], vec![1, 2], vec![], vec![2], vec![]] {
        state.set_satisfied(satisfied.into_iter().map(JobId));
        assert_eq!(render(&state), before);
    }
    assert_consistent(&state);
}

#[test]
fn a_satisfied_rt_job_whose_own_row_cannot_pay_for_its_frames_keeps_its_copies_at_an_event() {
    // Ψ = 30 ms = d: τ = 15 ms needs 15 ms per cycle, its row gives 10.
    let mut state = matrix(4, 3, 2, 1, false);
    allocate(&mut state, rt(1, 2, 15 * MS), 0);
    assert!(
        !state
            .guaranteed_frames_per_cycle(JobId(1))
            .unwrap()
            .is_met()
    );
    // At n ≥ b only thanks to its copies: the paper would take them here.
    state.set_satisfied([JobId(1)]);
    allocate(&mut state, be(2, 2), MS);
    assert_eq!(render(&state), ["AAbb", "aabb", "aaBB"]);
    assert!(!state.counts_as_satisfied(JobId(1)));
    // A light job at n ≥ b is left out, as in the paper.
    allocate(&mut state, rt(3, 2, 5 * MS), 2 * MS);
    state.set_satisfied([JobId(1), JobId(3)]);
    assert!(state.counts_as_satisfied(JobId(3)));
    assert_consistent(&state);
}
