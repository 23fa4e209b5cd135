//! Errors of matrix operations.

use thiserror::Error;

use super::ids::{JobId, NodeIndex, RowIndex};

/// Why a matrix operation was refused. The matrix is unchanged when one is
/// returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MatrixError {
    #[error("invalid matrix configuration: {0}")]
    InvalidConfig(&'static str),
    #[error("{0} is already placed or queued")]
    DuplicateJob(JobId),
    #[error("{id} requests {requested} nodes but the cluster has only {nodes}")]
    JobLargerThanCluster {
        id: JobId,
        requested: usize,
        nodes: usize,
    },
    #[error("{0} requests zero nodes")]
    EmptyJob(JobId),
    #[error("unknown {0}")]
    UnknownJob(JobId),
    #[error("{0} is queued, not placed in a row")]
    JobNotPlaced(JobId),
    #[error("row {row} does not exist (the matrix has {rows} rows)")]
    RowOutOfRange { row: RowIndex, rows: usize },
    #[error("{job} cannot move to row {row}: node {node} is taken there")]
    ColumnsTaken {
        job: JobId,
        row: RowIndex,
        node: NodeIndex,
    },
    #[error("{id} is attached to nodes {columns:?}, but its request is for {requested} nodes")]
    AttachedColumnsMismatch {
        id: JobId,
        requested: usize,
        columns: Vec<NodeIndex>,
    },
    #[error("{id} names node {node} twice or a node outside the matrix ({nodes} nodes)")]
    BadAttachedColumns {
        id: JobId,
        node: NodeIndex,
        nodes: usize,
    },
    #[error("{id} cannot be attached: no row has nodes {columns:?} all free ({rows} rows in use)")]
    NoRowFree {
        id: JobId,
        columns: Vec<NodeIndex>,
        rows: usize,
    },
    #[error("inconsistent matrix snapshot: {0}")]
    InconsistentSnapshot(String),
}
