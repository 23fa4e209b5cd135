//! A blocking admin client, for the CLI and tests.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    os::unix::net::UnixStream,
    path::Path,
    time::Duration,
};

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
    #[error("admin socket i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed response from the coordinator: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("the coordinator closed the connection without answering")]
    Closed,
    /// The coordinator understood the request and refused it.
    #[error("{0}")]
    Refused(String),
}

pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Unreachable {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends `request` and waits (at most `timeout`) for the answer.
    pub fn call(&mut self, request: &Request, timeout: Duration) -> Result<Reply, ClientError> {
        self.writer.set_read_timeout(Some(timeout))?;
        let mut line = serde_json::to_string(request)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(ClientError::Closed);
        }
        match serde_json::from_str::<Response>(&answer)? {
            Response::Ok(reply) => Ok(reply),
            Response::Error(message) => Err(ClientError::Refused(message)),
        }
    }
}
