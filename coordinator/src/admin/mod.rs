//! The admin interface: its protocol (shared with the CLI), the coordinator's
//! socket server, and a blocking client.
pub mod client;
pub mod protocol;
pub mod server;
