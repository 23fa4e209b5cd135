//! The two transport knobs shared by the CLI, the runtime and the report.

use serde::{Deserialize, Serialize};

/// Which socket type carries the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// One datagram socket per rank, bound to its own peer address.
    Udp,
    /// One stream per pair of ranks, fixed-size frames.
    Tcp,
}

/// How a rank waits for a message that has not arrived yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecvMode {
    /// Non-blocking receive in a loop (user-level messaging): the rank keeps
    /// its CPU while it waits, which is what dynamic coscheduling detects.
    Spin,
    /// Blocking receive: the rank sleeps in the kernel until data arrives.
    Block,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Udp => "udp",
            Proto::Tcp => "tcp",
        }
    }
}

impl RecvMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RecvMode::Spin => "spin",
            RecvMode::Block => "block",
        }
    }
}
