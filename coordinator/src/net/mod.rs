//! Agent connections: TCP, the wire handshake, then one task per connection
//! that answers heartbeats itself (so their timestamps are not delayed by
//! the main loop), sends the coordinator's own heartbeats, and moves every
//! other message between the socket and the main loop.
mod connection;
mod listener;

pub use connection::{ConnContext, ConnEvent, Outgoing, serve_connection};
pub use listener::accept_loop;
