//! Agent connections: TCP, the wire handshake (bounded in time and, per
//! peer address, in number: see [`gate`]), then one task per connection
//! that answers heartbeats itself (so their timestamps are not delayed by
//! the main loop), sends the coordinator's own heartbeats, and moves every
//! other message between the socket and the main loop.
mod connection;
pub mod gate;
mod handshake;
mod listener;

pub use connection::{ConnContext, ConnEvent, Outgoing, serve_connection};
pub use handshake::PreAuthGate;
pub use listener::{accept_loop, bind};
