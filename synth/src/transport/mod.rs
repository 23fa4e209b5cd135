//! Moving fixed-size frames between ranks over UDP or TCP.
//!
//! Transports only move bytes: every received frame is handed to a
//! `deliver` callback that decodes and counts it, so the accounting is the
//! same for both protocols and for frames that arrive while a TCP send is
//! blocked.

mod sys;
pub mod tcp;
pub mod tcp_mesh;
pub mod udp;
pub mod udp_drops;
pub mod wait;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::header::HeaderError;
use crate::modes::{RecvMode, WaitMode};

/// Receives one complete frame, and for TCP the rank whose stream carried it.
pub type Deliver<'a> = dyn FnMut(&[u8], Option<usize>) + 'a;

pub trait Transport {
    /// Sends one frame to rank `to`, giving up at `deadline`. Frames that
    /// arrive while the send waits for buffer space go to `deliver`.
    fn send(
        &mut self,
        to: usize,
        frame: &[u8],
        deadline: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<(), TransportError>;

    /// One receive attempt, preferably from the ranks in `from`.
    ///
    /// `Spin` makes one wait iteration of the `--wait` mode (non-blocking
    /// receive calls, preceded by a zero-timeout poll or epoll or a yield)
    /// and returns at once; `Block` sleeps in the kernel until data, a short
    /// tick, or `deadline`. Returns how many receive or poll calls found
    /// nothing (always 0 when blocking).
    fn receive(
        &mut self,
        from: &[usize],
        mode: RecvMode,
        deadline: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<u64, TransportError>;

    /// Datagrams the kernel dropped on this rank's socket, if known.
    fn kernel_drops(&self) -> Option<u64>;

    /// How spinning receives look for data (`--wait`); `Recv` until set.
    fn set_wait(&mut self, mode: WaitMode) -> Result<(), TransportError>;
}

#[derive(Debug, Error)]
pub enum TransportError {
    #[error("cannot bind {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot connect to rank {peer} at {addr} within the timeout: {source}")]
    Connect {
        peer: usize,
        addr: SocketAddr,
        source: io::Error,
    },
    #[error("ranks {missing:?} did not connect within {waited:?}")]
    AcceptTimeout {
        missing: Vec<usize>,
        waited: Duration,
    },
    #[error(
        "a peer at {addr} sends {theirs}-byte frames but this rank uses {ours}: \
         give every rank the same --msg-bytes"
    )]
    FrameSizeMismatch {
        addr: SocketAddr,
        theirs: usize,
        ours: usize,
    },
    #[error(
        "rank {peer} was started with {theirs} but this rank with {ours}: \
         give every rank the same --iterations or --duration"
    )]
    RunLengthMismatch {
        peer: usize,
        theirs: String,
        ours: String,
    },
    #[error("rank {peer} closed its connection")]
    PeerClosed { peer: usize },
    #[error("send to rank {peer} made no progress for {waited:?}")]
    SendStalled { peer: usize, waited: Duration },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
    #[error("bad frame from {addr}: {source}")]
    BadFrame {
        addr: SocketAddr,
        source: HeaderError,
    },
}

impl TransportError {
    fn io(what: &'static str) -> impl FnOnce(io::Error) -> TransportError {
        move |source| TransportError::Io { what, source }
    }
}

/// Time left until `deadline`, zero once it passed.
fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
