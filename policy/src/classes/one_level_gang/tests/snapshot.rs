//! Persistence: the state round-trips through its snapshot, and a corrupt
//! snapshot is refused with the reason.

use super::support::{MS, allocate, be, matrix, rt, wait};
use crate::classes::one_level_gang::{
    OneLevelGang, OneLevelGangError, OneLevelGangSnapshot, Replica,
};
use crate::global::JobId;

fn busy() -> OneLevelGang {
    let mut state = matrix(4, 6, 2, 1, true);
    allocate(&mut state, rt(1, 3, 10 * MS), 0);
    allocate(&mut state, be(2, 1), 0);
    allocate(&mut state, be(3, 4), 0);
    wait(&mut state, be(4, 4), 1);
    wait(&mut state, rt(5, 4, 20 * MS), 1); // r = 4: rows 0 and 1 are taken
    state.set_satisfied([JobId(1)]);
    state
}

fn refused(snapshot: OneLevelGangSnapshot, why: &str) {
    match OneLevelGang::try_from(snapshot) {
        Err(OneLevelGangError::InconsistentSnapshot(text)) => {
            assert!(text.contains(why), "{text} should say {why}")
        }
        other => panic!("expected a refusal ({why}), got {other:?}"),
    }
}

#[test]
fn a_snapshot_restores_the_same_state() {
    let state = busy();
    assert!(
        !OneLevelGangSnapshot::from(state.clone())
            .replicas
            .is_empty()
    );
    let restored = OneLevelGang::try_from(OneLevelGangSnapshot::from(state.clone())).unwrap();
    assert_eq!(restored, state);
}

#[test]
fn a_snapshot_with_a_cell_held_twice_is_refused() {
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    let replica = snapshot.replicas[0];
    snapshot.replicas.push(Replica {
        job: JobId(3),
        row: replica.row,
    });
    refused(snapshot, "held twice");
}

#[test]
fn a_snapshot_with_an_rt_job_in_the_be_set_is_refused() {
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    let rt_job = snapshot
        .allocated
        .iter_mut()
        .find(|a| a.job.id == JobId(1))
        .unwrap();
    rt_job.rows = vec![0, 4];
    refused(snapshot, "outside its class's set");
}

#[test]
fn a_snapshot_with_an_rt_job_short_of_its_rows_is_refused() {
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    let rt_job = snapshot
        .allocated
        .iter_mut()
        .find(|a| a.job.id == JobId(1))
        .unwrap();
    rt_job.rows.pop();
    refused(snapshot, "must hold 2");
}

#[test]
fn a_snapshot_with_a_replica_in_its_own_row_or_a_stranger_satisfied_is_refused() {
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    snapshot.replicas.push(Replica {
        job: JobId(1),
        row: 0,
    });
    refused(snapshot, "replica of job 1 in row 0");
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    snapshot.satisfied.insert(JobId(2));
    refused(snapshot, "not an allocated RT job");
}

#[test]
fn a_snapshot_with_a_queue_out_of_order_or_in_the_wrong_class_is_refused() {
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    snapshot.be_queue.push(snapshot.be_queue[0]);
    snapshot.be_queue[1].job.id = JobId(9);
    refused(snapshot, "out of arrival order");
    let mut snapshot = OneLevelGangSnapshot::from(busy());
    let moved = snapshot.rt_queue.pop().unwrap();
    snapshot.be_queue.push(moved);
    refused(snapshot, "other class's queue");
}

#[test]
fn the_state_and_the_rotor_are_serde_serialisable() {
    fn assert_serde<T: serde::Serialize + serde::de::DeserializeOwned>() {}
    assert_serde::<OneLevelGang>();
    assert_serde::<OneLevelGangSnapshot>();
    assert_serde::<crate::classes::one_level_gang::OneLevelGangRotor>();
    assert_serde::<crate::classes::one_level_gang::OneLevelGangConfig>();
}
