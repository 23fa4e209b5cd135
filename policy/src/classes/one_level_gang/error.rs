//! Why a 1GS operation was refused. The state is unchanged when one is
//! returned.

use thiserror::Error;

use crate::classes::RtSpecError;
use crate::global::JobId;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OneLevelGangError {
    #[error("invalid 1GS configuration: {0}")]
    InvalidConfig(&'static str),
    #[error("{0} is already allocated or waiting")]
    DuplicateJob(JobId),
    #[error("{0} requests zero nodes")]
    EmptyJob(JobId),
    #[error("{id} requests {requested} nodes but the cluster has only {nodes}")]
    JobLargerThanCluster {
        id: JobId,
        requested: usize,
        nodes: usize,
    },
    #[error("{id}: {source}")]
    InvalidRtSpec {
        id: JobId,
        #[source]
        source: RtSpecError,
    },
    #[error(
        "{id}: its window of {window_ns} ns is not a multiple of the 1GS cycle of {cycle_ns} ns \
         (rows × slot), so its windows would drift against the rows and could end short of \
         their frames; choose frames × period as a multiple of the cycle"
    )]
    WindowOutOfPhase {
        id: JobId,
        window_ns: u64,
        cycle_ns: u64,
    },
    #[error("unknown {0}")]
    UnknownJob(JobId),
    #[error("inconsistent 1GS snapshot: {0}")]
    InconsistentSnapshot(String),
}
