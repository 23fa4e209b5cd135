//! Helpers shared by the 1GS scenario and property tests.

use std::collections::BTreeMap;

use crate::classes::one_level_gang::{
    ArrivalDecision, CellKind, OneGsJob, OneLevelGang, OneLevelGangConfig,
};
use crate::classes::{FairnessRatio, RtSpec};
use crate::global::{JobId, NodeIndex, RowIndex};

pub const MS: u64 = 1_000_000;
/// Q of the scenarios.
pub const QUANTUM: u64 = 10 * MS;
/// d of the scenarios' RT jobs.
pub const PERIOD: u64 = 30 * MS;
/// w of the scenarios' RT jobs.
pub const WAIT: u64 = 15_000 * MS;

pub fn config(nodes: usize, rows: usize, rt: u32, be: u32, admission: bool) -> OneLevelGangConfig {
    OneLevelGangConfig {
        admission_control: admission,
        ..OneLevelGangConfig::new(nodes, rows, FairnessRatio::new(rt, be).unwrap(), QUANTUM)
    }
}

pub fn matrix(nodes: usize, rows: usize, rt: u32, be: u32, admission: bool) -> OneLevelGang {
    OneLevelGang::new(config(nodes, rows, rt, be, admission)).expect("valid config")
}

pub fn be(id: u64, nodes: usize) -> OneGsJob {
    OneGsJob::best_effort(JobId(id), nodes)
}

/// An RT job with period [`PERIOD`], 4 frames, `work_ns` per frame and the
/// default wait [`WAIT`].
pub fn rt(id: u64, nodes: usize, work_ns: u64) -> OneGsJob {
    rt_waiting(id, nodes, work_ns, WAIT)
}

pub fn rt_waiting(id: u64, nodes: usize, work_ns: u64, wait_ns: u64) -> OneGsJob {
    let spec = RtSpec::new(PERIOD, 4, work_ns).expect("valid spec");
    OneGsJob::real_time(JobId(id), nodes, spec, wait_ns)
}

/// Arrives and expects an allocation; returns its rows and columns.
pub fn allocate(
    state: &mut OneLevelGang,
    job: OneGsJob,
    now: u64,
) -> (Vec<RowIndex>, Vec<NodeIndex>) {
    match state.arrive(job, now).expect("valid arrival").decision {
        ArrivalDecision::Allocated { rows, columns } => (rows, columns),
        other => panic!("{} expected an allocation, got {other:?}", job.id),
    }
}

/// Arrives and expects to wait.
pub fn wait(state: &mut OneLevelGang, job: OneGsJob, now: u64) -> usize {
    match state.arrive(job, now).expect("valid arrival").decision {
        ArrivalDecision::Waiting { position } => position,
        other => panic!("{} expected to wait, got {other:?}", job.id),
    }
}

/// The matrix as one string per row: job n is the n-th capital letter for
/// its own cells and the lower case letter for a replica, `.` is empty.
pub fn render(state: &OneLevelGang) -> Vec<String> {
    (0..state.rows())
        .map(|row| {
            (0..state.nodes())
                .map(|node| match state.cell(row, node) {
                    None => '.',
                    Some(cell) => {
                        let letter = char::from(b'A' + (cell.job.0 as u8 - 1) % 26);
                        match cell.kind {
                            CellKind::Original => letter,
                            CellKind::Replica => letter.to_ascii_lowercase(),
                        }
                    }
                })
                .collect()
        })
        .collect()
}

/// Every cell, for comparing two states' matrices.
pub fn cells(state: &OneLevelGang) -> BTreeMap<(RowIndex, NodeIndex), (JobId, CellKind)> {
    let mut cells = BTreeMap::new();
    for row in 0..state.rows() {
        for node in 0..state.nodes() {
            if let Some(cell) = state.cell(row, node) {
                cells.insert((row, node), (cell.job, cell.kind));
            }
        }
    }
    cells
}

/// Structural consistency between the allocations and the cells: originals
/// exactly at each allocation's rows × columns; replicas only of allocated
/// jobs, in rows they do not hold, on all and only their columns; no cell
/// claimed twice; originals inside their class's set; no job both allocated
/// and waiting.
pub fn assert_consistent(state: &OneLevelGang) {
    let split = state.split();
    let mut expected = BTreeMap::new();
    for held in state.allocations() {
        let id = held.job.id;
        assert_eq!(held.columns.len(), held.job.nodes, "{id} column count");
        for &row in &held.rows {
            assert_eq!(
                split.class_of(row),
                Some(held.job.class()),
                "{id}'s own row {row} is in the other class's set"
            );
            for &node in &held.columns {
                let before = expected.insert((row, node), (id, CellKind::Original));
                assert!(before.is_none(), "cell ({row}, {node}) claimed twice");
            }
        }
        for row in state.replica_rows(id) {
            for &node in &held.columns {
                let before = expected.insert((row, node), (id, CellKind::Replica));
                assert!(before.is_none(), "cell ({row}, {node}) claimed twice");
            }
        }
        assert!(
            state.queue_position(id).is_none(),
            "{id} allocated and waiting"
        );
    }
    assert_eq!(
        cells(state),
        expected,
        "cells disagree with the allocations"
    );
}
