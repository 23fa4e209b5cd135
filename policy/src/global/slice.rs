//! One time slice: which rows run, which alternates fill their idle nodes,
//! and, for each node, which jobs may run there. This is what the coordinator
//! broadcasts and what agents enforce.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::ids::{JobId, NodeIndex, RowIndex};
use super::matrix::Matrix;

/// Rows active in a slice: one under gang scheduling, one or two under
/// paired gang (Paired Gang Scheduling §2.1: "For paired gang scheduling, two rows are
/// selected").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActiveRows {
    Single(RowIndex),
    /// The first row is the heavier (the one whose turn it is), the second
    /// its partner.
    Pair(RowIndex, RowIndex),
}

impl ActiveRows {
    pub fn rows(&self) -> Vec<RowIndex> {
        match *self {
            Self::Single(row) => vec![row],
            Self::Pair(first, second) => vec![first, second],
        }
    }

    pub fn contains(&self, row: RowIndex) -> bool {
        self.rows().contains(&row)
    }

    /// The lowest row index, used to order slices inside a round.
    pub fn lowest_row(&self) -> RowIndex {
        match *self {
            Self::Single(row) => row,
            Self::Pair(first, second) => first.min(second),
        }
    }
}

/// A job from another row running on nodes that are idle in `in_row` during
/// this slice (alternate scheduling, Paired Gang Scheduling §2.6, the Scheduler Testbed report §2.1). The job
/// runs on all of its nodes, never on part of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlternateRun {
    pub job: JobId,
    pub in_row: RowIndex,
}

/// A scheduled slice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    /// Sequence number of the slice since the scheduler started.
    pub number: u64,
    /// Round of the matrix this slice belongs to.
    pub round: u64,
    pub rows: ActiveRows,
    pub alternates: Vec<AlternateRun>,
    /// `active_by_node[node]`: the jobs allowed to run on that node.
    pub active_by_node: Vec<BTreeSet<JobId>>,
}

impl Slice {
    /// Builds a slice, deriving the per-node active sets from the matrix.
    pub fn new(
        matrix: &Matrix,
        number: u64,
        round: u64,
        rows: ActiveRows,
        alternates: Vec<AlternateRun>,
    ) -> Self {
        let active_by_node = active_jobs_by_node(matrix, rows, &alternates);
        Self {
            number,
            round,
            rows,
            alternates,
            active_by_node,
        }
    }

    /// Jobs allowed to run on `node` in this slice.
    pub fn active_on(&self, node: NodeIndex) -> &BTreeSet<JobId> {
        &self.active_by_node[node]
    }

    /// Every job that runs somewhere in this slice.
    pub fn active_jobs(&self) -> BTreeSet<JobId> {
        self.active_by_node.iter().flatten().copied().collect()
    }

    pub fn is_alternate(&self, job: JobId) -> bool {
        self.alternates.iter().any(|run| run.job == job)
    }
}

/// For each node, the jobs of the active rows placed on it plus the
/// alternates placed on it.
pub fn active_jobs_by_node(
    matrix: &Matrix,
    rows: ActiveRows,
    alternates: &[AlternateRun],
) -> Vec<BTreeSet<JobId>> {
    let mut active = vec![BTreeSet::new(); matrix.nodes()];
    for row in rows.rows() {
        for (node, jobs) in active.iter_mut().enumerate() {
            jobs.extend(matrix.cell(row, node));
        }
    }
    for run in alternates {
        if let Some(placed) = matrix.placement(run.job) {
            for &node in &placed.columns {
                active[node].insert(run.job);
            }
        }
    }
    active
}
