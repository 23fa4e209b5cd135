//! The persisted form of 1GS, checked on load so a corrupt or hand-edited
//! state file is refused with a clear error instead of producing overlapping
//! jobs or an RT job without its guaranteed rows.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::config::OneLevelGangConfig;
use super::error::OneLevelGangError;
use super::replication::Replica;
use super::state::{Allocation, Cell, CellKind, OneLevelGang, WaitingJob};
use crate::classes::Class;
use crate::global::JobId;

/// Everything the coordinator persists about 1GS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneLevelGangSnapshot {
    pub config: OneLevelGangConfig,
    pub allocated: Vec<Allocation>,
    pub replicas: Vec<Replica>,
    /// Head first.
    pub rt_queue: Vec<WaitingJob>,
    /// Head first.
    pub be_queue: Vec<WaitingJob>,
    pub satisfied: BTreeSet<JobId>,
    pub next_order: u64,
    pub generation: u64,
}

impl From<OneLevelGang> for OneLevelGangSnapshot {
    fn from(state: OneLevelGang) -> Self {
        let replicas = (0..state.rows())
            .flat_map(|row| {
                // A job's columns need not be contiguous: collect, then dedup.
                let jobs: BTreeSet<JobId> = state.cells[row]
                    .iter()
                    .flatten()
                    .filter(|cell| cell.kind == CellKind::Replica)
                    .map(|cell| cell.job)
                    .collect();
                jobs.into_iter().map(move |job| Replica { job, row })
            })
            .collect();
        Self {
            config: state.config,
            allocated: state.allocated.into_values().collect(),
            replicas,
            rt_queue: state.rt_queue.into(),
            be_queue: state.be_queue.into(),
            satisfied: state.satisfied,
            next_order: state.next_order,
            generation: state.generation,
        }
    }
}

impl TryFrom<OneLevelGangSnapshot> for OneLevelGang {
    type Error = OneLevelGangError;

    /// Checks: valid config; unique ids; legal sizes and RT specs; every
    /// allocation on ascending, distinct, existing columns, in ascending rows
    /// of its own class's set, as many rows as it must hold; replicas of
    /// allocated jobs in rows they do not already hold; no cell held twice;
    /// queues of the right class in arrival order; satisfied jobs allocated
    /// RT jobs.
    fn try_from(snapshot: OneLevelGangSnapshot) -> Result<Self, OneLevelGangError> {
        let mut state = OneLevelGang::new(snapshot.config)?;
        let bad = |text: String| Err(OneLevelGangError::InconsistentSnapshot(text));
        let (nodes, split) = (state.nodes(), state.split());
        let mut ids = BTreeSet::new();
        for held in snapshot.allocated {
            let (id, class) = (held.job.id, held.job.class());
            if !ids.insert(id) {
                return bad(format!("{id} appears twice"));
            }
            check_job(&state, &held.job)?;
            if held.columns.len() != held.job.nodes
                || !strictly_ascending(&held.columns)
                || held.columns.iter().any(|&node| node >= nodes)
            {
                return bad(format!("{id} holds columns {:?}", held.columns));
            }
            let expected_rows = held.job.rows_to_hold(&state.config);
            if held.rows.len() as u64 != expected_rows || !strictly_ascending(&held.rows) {
                return bad(format!(
                    "{id} holds rows {:?} but must hold {expected_rows}",
                    held.rows
                ));
            }
            if let Some(&row) = held
                .rows
                .iter()
                .find(|&&row| split.class_of(row) != Some(class))
            {
                return bad(format!("{id} holds row {row} outside its class's set"));
            }
            if held.order >= snapshot.next_order {
                return bad(format!("{id} has arrival order past the counter"));
            }
            let cell = Cell {
                job: id,
                kind: CellKind::Original,
            };
            for &row in &held.rows {
                place(&mut state, row, &held.columns, cell)?;
            }
            state.allocated.insert(id, held);
        }
        for replica in snapshot.replicas {
            let Some(held) = state.allocated.get(&replica.job) else {
                return bad(format!("replica of unallocated {}", replica.job));
            };
            if replica.row >= state.rows() || held.rows.contains(&replica.row) {
                return bad(format!("replica of {} in row {}", replica.job, replica.row));
            }
            let columns = held.columns.clone();
            let cell = Cell {
                job: replica.job,
                kind: CellKind::Replica,
            };
            place(&mut state, replica.row, &columns, cell)?;
        }
        for (class, queue) in [
            (Class::RealTime, snapshot.rt_queue),
            (Class::BestEffort, snapshot.be_queue),
        ] {
            let mut last_order = None;
            for waiting in &queue {
                let id = waiting.job.id;
                if !ids.insert(id) {
                    return bad(format!("{id} appears twice"));
                }
                check_job(&state, &waiting.job)?;
                if waiting.job.class() != class {
                    return bad(format!("{id} waits in the other class's queue"));
                }
                if last_order.is_some_and(|last| waiting.order <= last)
                    || waiting.order >= snapshot.next_order
                {
                    return bad(format!("{id} is out of arrival order"));
                }
                last_order = Some(waiting.order);
            }
            *state.queue_mut(class) = VecDeque::from(queue);
        }
        for &id in &snapshot.satisfied {
            if state.allocation(id).map(|held| held.job.class()) != Some(Class::RealTime) {
                return bad(format!("satisfied {id} is not an allocated RT job"));
            }
        }
        state.satisfied = snapshot.satisfied;
        state.next_order = snapshot.next_order;
        state.generation = snapshot.generation;
        Ok(state)
    }
}

fn strictly_ascending(values: &[usize]) -> bool {
    values.windows(2).all(|pair| pair[0] < pair[1])
}

fn check_job(state: &OneLevelGang, job: &super::job::OneGsJob) -> Result<(), OneLevelGangError> {
    let bad = |text: String| Err(OneLevelGangError::InconsistentSnapshot(text));
    if job.nodes == 0 || job.nodes > state.nodes() {
        return bad(format!("{} requests {} nodes", job.id, job.nodes));
    }
    if let Some(Err(error)) = job.rt_spec().map(|spec| spec.validate()) {
        return bad(format!("{}: {error}", job.id));
    }
    Ok(())
}

fn place(
    state: &mut OneLevelGang,
    row: usize,
    columns: &[usize],
    cell: Cell,
) -> Result<(), OneLevelGangError> {
    for &node in columns {
        if state.cells[row][node].is_some() {
            return Err(OneLevelGangError::InconsistentSnapshot(format!(
                "cell ({row}, {node}) is held twice"
            )));
        }
    }
    state.fill(row, columns, cell);
    Ok(())
}
