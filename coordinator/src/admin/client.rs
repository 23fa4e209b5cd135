//! A blocking admin client, for the CLI and tests (JSON lines, see
//! `cosched_proto::jsonl`).

use std::{path::Path, time::Duration};

use cosched_proto::jsonl::{LineClient, LineError};

use super::protocol::{Reply, Request, Response};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot reach the coordinator at {path}: {source} (is cosched-coordinator running, and is this its admin_socket?)"
    )]
    Unreachable {
        path: String,
        source: std::io::Error,
    },
    #[error("coordinator admin socket: {0}")]
    Line(#[from] LineError),
    /// The coordinator understood the request and refused it.
    #[error("{0}")]
    Refused(String),
}

pub struct Client(LineClient);

impl Client {
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref();
        LineClient::connect(path)
            .map(Self)
            .map_err(|source| ClientError::Unreachable {
                path: path.display().to_string(),
                source,
            })
    }

    /// Sends `request` and waits (at most `timeout`) for the answer.
    pub fn call(&mut self, request: &Request, timeout: Duration) -> Result<Reply, ClientError> {
        match self.0.call::<_, Response>(request, timeout)? {
            Response::Ok(reply) => Ok(reply),
            Response::Error(message) => Err(ClientError::Refused(message)),
        }
    }
}
