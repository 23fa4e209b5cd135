//! Newline-delimited JSON over a Unix socket: one request line, one reply
//! line. The transport under both local admin protocols (the agent's control
//! socket and the coordinator's admin socket); each protocol keeps its own
//! request/reply types and error messages.
//!
//! - [`LineClient`]: the blocking client tools and tests use; [`Client`] types
//!   it for one [`Protocol`] (request, reply, the daemon's name in errors).
//! - [`LineLimits`]: the server's caps and time-outs, as daemons configure them.
//! - `serve` (feature `tokio`): the server both daemons run.
mod client;
mod limits;
#[cfg(feature = "tokio")]
mod line;
#[cfg(feature = "tokio")]
mod memory;
#[cfg(feature = "tokio")]
mod server;
mod typed;

pub use client::{LineClient, LineError, caller_is_root};
pub use limits::LineLimits;
#[cfg(feature = "tokio")]
pub use server::{Call, Peer, PeerCall, serve, serve_peers};
pub use typed::{Client, ClientError, Protocol, Verdict, socket_for, user_socket_path};
