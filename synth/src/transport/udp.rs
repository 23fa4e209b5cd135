//! UDP: one socket per rank, bound to its own peer address; every frame is
//! one datagram.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;

use super::wait::Waiter;
use super::{Deliver, Transport, TransportError, remaining, sys, udp_drops};
use crate::modes::{RecvMode, WaitMode};

/// How long one blocking receive sleeps before the caller rechecks its
/// deadline (and, in the handshake, resends its hello).
pub const BLOCK_TICK: Duration = Duration::from_millis(50);
/// Requested receive buffer: room for thousands of small early frames.
const RECEIVE_BUFFER_BYTES: usize = 4 << 20;
/// Large enough for any datagram, so oversized foreign ones are seen whole
/// (and rejected by length) rather than truncated into something plausible.
const DATAGRAM_BUFFER_BYTES: usize = 64 << 10;

pub struct UdpTransport {
    socket: UdpSocket,
    peers: Vec<SocketAddr>,
    buffer: Vec<u8>,
    nonblocking: bool,
    waiter: Option<Waiter>,
}

impl UdpTransport {
    /// Binds `peers[rank]`.
    pub fn bind(rank: usize, peers: &[SocketAddr]) -> Result<Self, TransportError> {
        let addr = peers[rank];
        let socket =
            UdpSocket::bind(addr).map_err(|source| TransportError::Bind { addr, source })?;
        // Best effort: a small buffer only matters if frames pile up, and then
        // the drop counter explains the resulting timeout.
        let _ = sys::grow_receive_buffer(&socket, RECEIVE_BUFFER_BYTES);
        socket
            .set_read_timeout(Some(BLOCK_TICK))
            .map_err(TransportError::io("set UDP read timeout"))?;
        Ok(Self {
            socket,
            peers: peers.to_vec(),
            buffer: vec![0; DATAGRAM_BUFFER_BYTES],
            nonblocking: false,
            waiter: None,
        })
    }

    fn set_mode(&mut self, mode: RecvMode) -> Result<(), TransportError> {
        let nonblocking = mode == RecvMode::Spin;
        if nonblocking != self.nonblocking {
            self.socket
                .set_nonblocking(nonblocking)
                .map_err(TransportError::io("switch UDP socket mode"))?;
            self.nonblocking = nonblocking;
        }
        Ok(())
    }
}

fn is_transient(err: &std::io::Error) -> bool {
    matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
        || err.raw_os_error() == Some(libc::ENOBUFS)
}

impl Transport for UdpTransport {
    fn send(
        &mut self,
        to: usize,
        frame: &[u8],
        deadline: Instant,
        _deliver: &mut Deliver<'_>,
    ) -> Result<(), TransportError> {
        let began = Instant::now();
        loop {
            match self.socket.send_to(frame, self.peers[to]) {
                Ok(_) => return Ok(()),
                // The peer's port is not bound yet or any more; the receive
                // timeout on either side reports that better than a send error.
                Err(err) if err.kind() == ErrorKind::ConnectionRefused => return Ok(()),
                // A full send buffer (non-blocking mode) drains quickly.
                Err(err) if is_transient(&err) => {
                    if remaining(deadline).is_zero() {
                        return Err(TransportError::SendStalled {
                            peer: to,
                            waited: began.elapsed(),
                        });
                    }
                    std::thread::yield_now();
                }
                Err(source) => {
                    return Err(TransportError::Io {
                        what: "UDP send",
                        source,
                    });
                }
            }
        }
    }

    fn receive(
        &mut self,
        _from: &[usize],
        mode: RecvMode,
        _deadline: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<u64, TransportError> {
        self.set_mode(mode)?;
        if mode == RecvMode::Spin
            && let Some(waiter) = &mut self.waiter
            && !waiter
                .worth_reading(&[self.socket.as_raw_fd()])
                .map_err(TransportError::io("UDP wait"))?
        {
            return Ok(1);
        }
        match self.socket.recv_from(&mut self.buffer) {
            Ok((len, _)) => {
                deliver(&self.buffer[..len], None);
                Ok(0)
            }
            Err(err) => match err.kind() {
                ErrorKind::WouldBlock | ErrorKind::TimedOut if mode == RecvMode::Spin => Ok(1),
                ErrorKind::WouldBlock
                | ErrorKind::TimedOut
                | ErrorKind::Interrupted
                | ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(TransportError::Io {
                    what: "UDP receive",
                    source: err,
                }),
            },
        }
    }

    fn kernel_drops(&self) -> Option<u64> {
        udp_drops::socket_drops(&self.socket)
    }

    fn set_wait(&mut self, mode: WaitMode) -> Result<(), TransportError> {
        self.waiter = Some(
            Waiter::new(mode, &[self.socket.as_raw_fd()])
                .map_err(TransportError::io("set up the wait mode"))?,
        );
        Ok(())
    }
}
