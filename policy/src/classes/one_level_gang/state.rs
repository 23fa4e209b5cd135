//! The 1GS state: the matrix (originals and replicas), the two arrival
//! queues, the RT jobs reported satisfied, and the queries on them. The
//! events that change it are in `events.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::config::{OneLevelGangConfig, RowSplit};
use super::error::OneLevelGangError;
use super::job::OneGsJob;
use super::snapshot::OneLevelGangSnapshot;
use crate::classes::Class;
use crate::global::{JobId, NodeIndex, RowIndex};

/// Whether a cell holds a job's own allocation or a copy the optimisation
/// made (§4.1: copies last until the next arrival or departure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellKind {
    Original,
    Replica,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub job: JobId,
    pub kind: CellKind,
}

/// A job holding its own rows: the same columns in each (`rows` has one row,
/// or `r` rows of the RT set for an RT job under admission control).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub job: OneGsJob,
    /// Ascending.
    pub rows: Vec<RowIndex>,
    /// Ascending; never change while the job lives (no migration).
    pub columns: Vec<NodeIndex>,
    pub arrived_ns: u64,
    /// Arrival order over both classes: lower came first.
    pub order: u64,
}

/// A job in its class's arrival queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingJob {
    pub job: OneGsJob,
    pub arrived_ns: u64,
    pub order: u64,
}

impl WaitingJob {
    /// When an RT job's wait runs out (arrival + w); `None` for BE.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.job
            .max_wait_ns()
            .map(|wait| self.arrived_ns.saturating_add(wait))
    }
}

/// The 1GS matrix and its queues. Serialises as a
/// [`OneLevelGangSnapshot`] and checks every invariant when deserialised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "OneLevelGangSnapshot", try_from = "OneLevelGangSnapshot")]
pub struct OneLevelGang {
    pub(super) config: OneLevelGangConfig,
    pub(super) split: RowSplit,
    /// `cells[row][node]`.
    pub(super) cells: Vec<Vec<Option<Cell>>>,
    pub(super) allocated: BTreeMap<JobId, Allocation>,
    pub(super) rt_queue: VecDeque<WaitingJob>,
    pub(super) be_queue: VecDeque<WaitingJob>,
    /// RT jobs the caller reported at n ≥ b in their current window; those
    /// whose own rows pay for their frames are not replicated (§4.1 step 1,
    /// `counts_as_satisfied`).
    pub(super) satisfied: BTreeSet<JobId>,
    pub(super) next_order: u64,
    /// Bumped on every change, so a coordinator can tell a stale view.
    pub(super) generation: u64,
}

impl OneLevelGang {
    /// An empty matrix.
    pub fn new(config: OneLevelGangConfig) -> Result<Self, OneLevelGangError> {
        config.validate()?;
        Ok(Self {
            split: config.split(),
            cells: vec![vec![None; config.nodes]; config.rows],
            config,
            allocated: BTreeMap::new(),
            rt_queue: VecDeque::new(),
            be_queue: VecDeque::new(),
            satisfied: BTreeSet::new(),
            next_order: 0,
            generation: 0,
        })
    }

    pub fn config(&self) -> &OneLevelGangConfig {
        &self.config
    }

    pub fn split(&self) -> RowSplit {
        self.split
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn nodes(&self) -> usize {
        self.config.nodes
    }

    pub fn rows(&self) -> usize {
        self.config.rows
    }

    pub fn cell(&self, row: RowIndex, node: NodeIndex) -> Option<Cell> {
        self.cells.get(row)?.get(node).copied().flatten()
    }

    pub fn is_row_empty(&self, row: RowIndex) -> bool {
        self.cells[row].iter().all(Option::is_none)
    }

    /// `free[node]` is true when the cell of `row` is empty.
    pub fn free_mask(&self, row: RowIndex) -> Vec<bool> {
        self.cells[row].iter().map(Option::is_none).collect()
    }

    /// Allocated jobs in id order.
    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.allocated.values()
    }

    pub fn allocation(&self, job: JobId) -> Option<&Allocation> {
        self.allocated.get(&job)
    }

    /// The arrival queue of `class`, head first.
    pub fn waiting(&self, class: Class) -> impl Iterator<Item = &WaitingJob> {
        self.queue(class).iter()
    }

    /// Position of a waiting job in its class's queue (0 = head).
    pub fn queue_position(&self, job: JobId) -> Option<usize> {
        [&self.rt_queue, &self.be_queue]
            .into_iter()
            .find_map(|queue| queue.iter().position(|waiting| waiting.job.id == job))
    }

    /// RT jobs currently reported satisfied (n ≥ b).
    pub fn satisfied(&self) -> &BTreeSet<JobId> {
        &self.satisfied
    }

    /// Replaces the set of RT jobs that produce their b frames in the
    /// current window. Ids of jobs that are not allocated RT jobs are
    /// dropped.
    ///
    /// Only a job whose own rows pay for its frames is left out of the
    /// replication for being satisfied ([`Self::counts_as_satisfied`]).
    /// Such a job that leaves the set (it fell short of b again) gets rows
    /// at once: the replication runs again for the jobs short of frames
    /// ([`Self::replicate_for_the_short`]), where the paper waits for the
    /// next arrival or departure. A job that joins the set keeps its
    /// replicas until that event, as in the paper. Under admission control
    /// neither changes the matrix (admitted jobs are never copied).
    pub fn set_satisfied(&mut self, jobs: impl IntoIterator<Item = JobId>) {
        let satisfied: BTreeSet<JobId> = jobs
            .into_iter()
            .filter(|id| {
                self.allocated
                    .get(id)
                    .is_some_and(|held| held.job.class() == Class::RealTime)
            })
            .collect();
        if satisfied == self.satisfied {
            return;
        }
        let fell_short = self
            .satisfied
            .difference(&satisfied)
            .any(|&job| self.may_be_copied(job) && self.counts_as_satisfied(job));
        self.satisfied = satisfied;
        self.generation += 1;
        if fell_short {
            self.replicate_for_the_short();
        }
    }

    /// Every row where `job` runs, originals and replicas, ascending.
    pub fn rows_of_job(&self, job: JobId) -> Vec<RowIndex> {
        let Some(held) = self.allocated.get(&job) else {
            return Vec::new();
        };
        let first = held.columns[0];
        (0..self.rows())
            .filter(|&row| self.cells[row][first].is_some_and(|cell| cell.job == job))
            .collect()
    }

    /// The rows where `job` runs as a replica, ascending.
    pub fn replica_rows(&self, job: JobId) -> Vec<RowIndex> {
        let Some(held) = self.allocated.get(&job) else {
            return Vec::new();
        };
        self.rows_of_job(job)
            .into_iter()
            .filter(|row| !held.rows.contains(row))
            .collect()
    }

    /// Occupied cells per column over all rows: allocation prefers the
    /// least loaded columns.
    pub fn column_load(&self) -> Vec<usize> {
        (0..self.nodes())
            .map(|node| self.cells.iter().filter(|row| row[node].is_some()).count())
            .collect()
    }

    /// The earliest instant an RT job's wait runs out, so the caller knows
    /// when to call `evict_expired`.
    pub fn next_expiry(&self) -> Option<u64> {
        self.rt_queue
            .iter()
            .filter_map(WaitingJob::deadline_ns)
            .min()
    }

    pub(super) fn queue(&self, class: Class) -> &VecDeque<WaitingJob> {
        match class {
            Class::RealTime => &self.rt_queue,
            Class::BestEffort => &self.be_queue,
        }
    }

    pub(super) fn queue_mut(&mut self, class: Class) -> &mut VecDeque<WaitingJob> {
        match class {
            Class::RealTime => &mut self.rt_queue,
            Class::BestEffort => &mut self.be_queue,
        }
    }

    pub(super) fn is_known(&self, job: JobId) -> bool {
        self.allocated.contains_key(&job) || self.queue_position(job).is_some()
    }

    /// Writes `job` into `(row, node)` for each of its columns.
    pub(super) fn fill(&mut self, row: RowIndex, columns: &[NodeIndex], cell: Cell) {
        for &node in columns {
            debug_assert!(self.cells[row][node].is_none(), "({row}, {node}) taken");
            self.cells[row][node] = Some(cell);
        }
    }
}
