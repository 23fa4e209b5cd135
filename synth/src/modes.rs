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

/// How a spinning rank waits, mimicking a message-passing library; the
/// kernel sees a different system call for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// Non-blocking receives in a loop: each empty one returns EAGAIN.
    #[default]
    Recv,
    /// `poll(fds, n, 0)` in a loop, then a read (OpenMPI 4's TCP transport).
    Poll,
    /// `epoll_wait(ep, …, 0)` in a loop, then a read (OpenMPI 5, UCX TCP).
    Epoll,
    /// `sched_yield()` then a non-blocking receive, in a loop (MPICH).
    Yield,
}

impl WaitMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitMode::Recv => "recv",
            WaitMode::Poll => "poll",
            WaitMode::Epoll => "epoll",
            WaitMode::Yield => "yield",
        }
    }
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
