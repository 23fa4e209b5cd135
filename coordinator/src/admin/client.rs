//! The coordinator's admin protocol as a blocking client, for the CLI and
//! tests (JSON lines, see `cosched_proto::jsonl`).

use std::{path::Path, time::Duration};

use cosched_proto::jsonl::{self, Protocol};

use super::protocol::{Reply, Request};

/// The admin socket's protocol, for [`Client`].
pub struct Admin;

impl Protocol for Admin {
    type Request = Request;
    type Reply = Reply;
    const SOCKET: &'static str = "coordinator admin socket";
    const DAEMON: &'static str = "coordinator";
    const UNREACHABLE_HINT: &'static str =
        " (is cosched-coordinator running, and is this its admin_socket?)";
}

pub type Client = jsonl::Client<Admin>;
pub use cosched_proto::jsonl::ClientError;

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
    let path = jsonl::socket_for(admin_socket, jsonl::caller_is_root());
    Client::connect(&path)?.call(request, timeout)
}
