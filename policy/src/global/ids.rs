//! Names for the things the global scheduler places: jobs, rows and nodes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A row of the Ousterhout matrix: one time slot of the rotation
/// (ClusterSchedSim §4.1, the Scheduler Testbed report §2.1). Row indices are stable: a row that empties
/// keeps its index and simply leaves the rotation.
pub type RowIndex = usize;

/// A column of the Ousterhout matrix: one node of the cluster, which runs one
/// process group of each job placed on it.
pub type NodeIndex = usize;

/// Identifier of a parallel job, chosen by the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.0)
    }
}

/// What a job asks of the matrix: `nodes` columns (one process group per node)
/// in a single row, so that all its processes run in the same time slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRequest {
    pub id: JobId,
    /// Number of nodes (columns) the job needs; at least 1.
    pub nodes: usize,
    /// Paired Gang Scheduling §2.4: "a flag can be set in order to indicate to the system
    /// that this job must not be matched with another job" (paired gang never
    /// gives its row a partner, and it never shares a node as an alternate).
    #[serde(default)]
    pub exclusive: bool,
}

impl JobRequest {
    /// A job of `nodes` nodes that may be paired.
    pub fn new(id: JobId, nodes: usize) -> Self {
        Self {
            id,
            nodes,
            exclusive: false,
        }
    }

    /// The same request, marked exclusive (never paired).
    pub fn exclusive(mut self) -> Self {
        self.exclusive = true;
        self
    }
}
