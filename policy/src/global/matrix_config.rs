//! Configuration of the Ousterhout matrix: size, column allocation, queueing.

use serde::{Deserialize, Serialize};

use super::matrix_error::MatrixError;

/// Default maximum multiprogramming level (rows). ClusterSchedSim §4.1 keeps the MPL
/// "at a low to moderate level" (its Fig. 5 has four time slices).
pub const DEFAULT_MAX_ROWS: usize = 4;

/// How the columns of one row are chosen for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnAllocation {
    /// Lowest row with enough free columns; inside it the first contiguous run
    /// of free columns if there is one, else the lowest free columns.
    #[default]
    FirstFit,
    /// Power-of-two sized, aligned column blocks (the buddy-tree allocation of
    /// the Scheduler Testbed report §4.3.1): a job of k nodes takes the first k columns of a free,
    /// aligned block of 2^⌈log2 k⌉ columns.
    Buddy,
}

/// What happens to jobs that do not fit in any row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueuePolicy {
    /// Strict first-come-first-serve (Paired Gang Scheduling §1): the head of the queue
    /// blocks every job behind it, even jobs that would fit. Prevents
    /// starvation of wide jobs at the price of idle nodes.
    #[default]
    StrictFcfs,
    /// Any queued job that fits starts, in queue order. There are no run-time
    /// estimates to make reservations with, so a wide job can be overtaken
    /// indefinitely; use only when that is acceptable.
    Backfill,
}

/// Shape and behaviour of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixConfig {
    /// Number of nodes (columns).
    pub nodes: usize,
    /// Maximum multiprogramming level (rows). 1 = space sharing (FCFS).
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
    #[serde(default)]
    pub allocation: ColumnAllocation,
    #[serde(default)]
    pub queue: QueuePolicy,
    /// After a job leaves, move jobs down to the lowest row where all their
    /// columns are free (no node changes, only the time slot), so rows empty
    /// out and leave the rotation. Default: on.
    #[serde(default = "default_repack_rows")]
    pub repack_rows: bool,
}

fn default_max_rows() -> usize {
    DEFAULT_MAX_ROWS
}

fn default_repack_rows() -> bool {
    true
}

impl MatrixConfig {
    /// Gang scheduling on `nodes` nodes with the defaults: 4 rows, first-fit,
    /// strict FCFS queue, re-packing on.
    pub fn gang(nodes: usize) -> Self {
        Self {
            nodes,
            max_rows: DEFAULT_MAX_ROWS,
            allocation: ColumnAllocation::FirstFit,
            queue: QueuePolicy::StrictFcfs,
            repack_rows: true,
        }
    }

    /// Space sharing (`fcfs` mode): exactly one row, jobs wait in a strict
    /// FCFS queue until enough nodes are free (ClusterSchedSim §4.1).
    pub fn space_sharing(nodes: usize) -> Self {
        Self {
            max_rows: 1,
            ..Self::gang(nodes)
        }
    }

    /// Checks the configuration can describe a matrix.
    pub fn validate(&self) -> Result<(), MatrixError> {
        if self.nodes == 0 {
            return Err(MatrixError::InvalidConfig(
                "the cluster needs at least one node",
            ));
        }
        if self.max_rows == 0 {
            return Err(MatrixError::InvalidConfig(
                "the matrix needs at least one row",
            ));
        }
        Ok(())
    }
}
