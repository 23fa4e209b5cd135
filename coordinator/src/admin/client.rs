//! A blocking admin client, for the CLI and tests (JSON lines, see
//! `cosched_proto::jsonl`).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

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

/// One request to the coordinator whose admin socket is `admin_socket`. A
/// caller that is not root talks to the user socket next to it
/// (`coordinator-user.sock`), where the coordinator judges each request by
/// the caller's peer credentials: users attach jobs, detach or cancel their
/// own and read the views; a root-only request is refused there with a
/// message saying so (the root-only admin socket would only say
/// "permission denied").
pub fn call(
    admin_socket: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<Reply, ClientError> {
    let path = socket_for(admin_socket, cosched_proto::jsonl::caller_is_root());
    Client::connect(&path)?.call(request, timeout)
}

/// Where a caller's requests go: root's to the admin socket, everyone
/// else's to the user socket.
pub fn socket_for(admin_socket: &Path, root: bool) -> PathBuf {
    if !root {
        cosched_proto::control::user_socket_path(admin_socket)
    } else {
        admin_socket.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_talks_to_the_user_socket_and_root_to_the_admin_socket() {
        let admin = Path::new("/run/cosched/coordinator.sock");
        assert_eq!(
            socket_for(admin, false),
            Path::new("/run/cosched/coordinator-user.sock")
        );
        assert_eq!(socket_for(admin, true), admin);
    }
}
