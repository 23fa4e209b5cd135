//! Asking agents for recordings: one `timeline` request per agent control
//! socket, all at once (one thread each), so the recordings cover the same
//! stretch of time.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use cosched_proto::{
    control::{Client, ClientError, Reply, Request},
    timeline::NodeTimeline,
};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{socket}: {source}")]
    Agent { socket: String, source: ClientError },
    #[error("{socket}: unexpected reply {reply}")]
    Unexpected { socket: String, reply: String },
}

/// How long past the recording's end an agent may take to answer.
const ANSWER_MARGIN: Duration = Duration::from_secs(10);

/// Records `duration` on one agent.
pub fn record_one(
    socket: &Path,
    duration: Duration,
    max_events: Option<u32>,
) -> Result<NodeTimeline, RecordError> {
    let name = socket.display().to_string();
    let request = Request::Timeline {
        duration_ms: duration.as_millis().max(1) as u64,
        max_events,
    };
    let agent = |source| RecordError::Agent {
        socket: name.clone(),
        source,
    };
    let reply = Client::connect(socket)
        .map_err(agent)?
        .call(&request, duration + ANSWER_MARGIN)
        .map_err(agent)?;
    match reply {
        Reply::Timeline { timeline } => Ok(timeline),
        other => Err(RecordError::Unexpected {
            socket: name,
            reply: format!("{other:?}"),
        }),
    }
}

/// Records `duration` on every agent at once; the recordings in the order
/// of `sockets`.
pub fn record_all(
    sockets: &[PathBuf],
    duration: Duration,
    max_events: Option<u32>,
) -> Result<Vec<NodeTimeline>, RecordError> {
    std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .iter()
            .map(|socket| s.spawn(move || record_one(socket, duration, max_events)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a recording thread panicked"))
            .collect()
    })
}
