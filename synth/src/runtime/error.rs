//! Why a rank failed. Every message names the rank and, once iterating,
//! the iteration, so a failed job can be diagnosed from any rank's stderr.
//! Transport failures are kept as the error's source: print the chain
//! (`{:#}` with anyhow) to see both.

use std::time::Duration;

use thiserror::Error;

use crate::header::Kind;
use crate::transport::TransportError;

#[derive(Debug, Error)]
pub enum RunError {
    #[error("rank {rank}: setting up the connections failed")]
    Setup {
        rank: usize,
        #[source]
        source: TransportError,
    },
    #[error("rank {rank}: start handshake timed out after {waited:?}: {what}")]
    HandshakeTimeout {
        rank: usize,
        waited: Duration,
        what: String,
    },
    #[error(
        "rank 0: rank {peer} was started with {theirs} but rank 0 with {ours}: \
         give every rank the same --iterations or --duration"
    )]
    RunLengthMismatch {
        peer: usize,
        theirs: String,
        ours: String,
    },
    #[error("rank {rank} at iteration {iteration}")]
    Transport {
        rank: usize,
        iteration: u64,
        #[source]
        source: TransportError,
    },
    #[error(
        "rank {rank} timed out after {waited:?} at iteration {iteration} waiting for \
         {kind:?} from rank(s) {missing:?}{note}"
    )]
    ReceiveTimeout {
        rank: usize,
        iteration: u64,
        kind: Kind,
        missing: Vec<usize>,
        waited: Duration,
        /// Extra diagnosis, e.g. datagrams the kernel dropped.
        note: String,
    },
}

/// Explains a UDP timeout when the kernel dropped datagrams.
pub fn drops_note(drops: Option<u64>) -> String {
    match drops {
        Some(dropped) if dropped > 0 => format!(
            "; the kernel dropped {dropped} datagram(s) on this rank's socket \
             (receive buffer overflow)"
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_message_names_rank_peer_and_iteration() {
        let err = RunError::ReceiveTimeout {
            rank: 2,
            iteration: 17,
            kind: Kind::Data,
            missing: vec![1],
            waited: Duration::from_secs(1),
            note: drops_note(Some(3)),
        };
        let text = err.to_string();
        assert!(text.starts_with("rank 2 timed out"), "{text}");
        assert!(text.contains("iteration 17"), "{text}");
        assert!(text.contains("rank(s) [1]"), "{text}");
        assert!(text.contains("dropped 3 datagram"), "{text}");
    }

    #[test]
    fn no_note_without_drops() {
        assert_eq!(drops_note(None), "");
        assert_eq!(drops_note(Some(0)), "");
    }
}
