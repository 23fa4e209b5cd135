//! The persisted form of the matrix, checked on load so a corrupt or
//! hand-edited state file is refused with a clear error instead of producing
//! overlapping jobs.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::ids::JobRequest;
use super::matrix::{Matrix, PlacedJob};
use super::matrix_config::MatrixConfig;
use super::matrix_error::MatrixError;

/// Everything the coordinator persists about the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixSnapshot {
    pub config: MatrixConfig,
    pub placed: Vec<PlacedJob>,
    /// Queued jobs, head first.
    pub queue: Vec<JobRequest>,
    pub generation: u64,
}

impl TryFrom<MatrixSnapshot> for Matrix {
    type Error = MatrixError;

    /// Checks: valid config; unique job ids; every placed job in an existing
    /// row, on existing, ascending, distinct columns, exactly as many as it
    /// requested; no cell held twice; queued requests of a legal size.
    fn try_from(snapshot: MatrixSnapshot) -> Result<Self, MatrixError> {
        snapshot.config.validate()?;
        let nodes = snapshot.config.nodes;
        let rows = snapshot.config.max_rows;
        let bad = |text: String| Err(MatrixError::InconsistentSnapshot(text));
        let mut ids = BTreeSet::new();
        let mut cells = BTreeSet::new();
        for job in &snapshot.placed {
            let id = job.id();
            if !ids.insert(id) {
                return bad(format!("{id} appears twice"));
            }
            if job.row >= rows {
                return bad(format!("{id} is in row {} of {rows}", job.row));
            }
            if job.columns.len() != job.request.nodes || job.columns.is_empty() {
                return bad(format!(
                    "{id} holds {} columns but requested {}",
                    job.columns.len(),
                    job.request.nodes
                ));
            }
            if !job.columns.windows(2).all(|pair| pair[0] < pair[1]) {
                return bad(format!("{id} has unsorted or repeated columns"));
            }
            for &node in &job.columns {
                if node >= nodes {
                    return bad(format!("{id} holds node {node} of {nodes}"));
                }
                if !cells.insert((job.row, node)) {
                    return bad(format!("cell ({}, {node}) is held twice", job.row));
                }
            }
        }
        for request in &snapshot.queue {
            if !ids.insert(request.id) {
                return bad(format!("{} appears twice", request.id));
            }
            if request.nodes == 0 || request.nodes > nodes {
                return bad(format!(
                    "queued {} requests {} nodes",
                    request.id, request.nodes
                ));
            }
        }
        Ok(Matrix::from_checked_parts(
            snapshot.config,
            snapshot.placed,
            snapshot.queue,
            snapshot.generation,
        ))
    }
}
