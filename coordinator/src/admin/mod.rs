//! The admin interface: its protocol (shared with the CLI), the coordinator's
//! socket servers (root's admin socket, the users' socket), what users may
//! ask, and a blocking client.
pub mod client;
pub mod protocol;
pub mod server;
pub mod users;
