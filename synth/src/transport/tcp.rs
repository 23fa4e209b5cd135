//! TCP: fixed-size frames over one non-blocking stream per peer.
//!
//! Each stream keeps a reassembly buffer, so a frame split across reads (or
//! across spin polls) is delivered once it is whole. A send that finds the
//! socket buffer full keeps reading from every peer while it waits: two ranks
//! sending large frames to each other would otherwise deadlock.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Instant;

use super::tcp_mesh::{MeshSpec, MeshTraffic, build_mesh};
use super::wait::Waiter;
use super::{Deliver, Transport, TransportError, remaining, sys};
use crate::modes::{RecvMode, WaitMode};

pub struct TcpTransport {
    streams: Vec<Option<PeerStream>>,
    /// Scratch poll set and the rank behind each entry, reused per call.
    fds: Vec<libc::pollfd>,
    fd_peers: Vec<usize>,
    waiter: Option<Waiter>,
    /// Scratch list of the streams a spinning receive waits on.
    wait_fds: Vec<std::os::fd::RawFd>,
}

struct PeerStream {
    stream: TcpStream,
    frame: Vec<u8>,
    filled: usize,
    /// The peer closed its side; reading from it again is an error.
    closed: bool,
}

enum ReadProgress {
    Frame,
    Partial,
    Empty,
    Closed,
}

impl PeerStream {
    /// One read toward the current frame.
    fn read_some(&mut self) -> Result<ReadProgress, TransportError> {
        if self.closed {
            return Ok(ReadProgress::Closed);
        }
        match self.stream.read(&mut self.frame[self.filled..]) {
            Ok(0) => {
                self.closed = true;
                Ok(ReadProgress::Closed)
            }
            Ok(read) => {
                self.filled += read;
                if self.filled == self.frame.len() {
                    self.filled = 0;
                    Ok(ReadProgress::Frame)
                } else {
                    Ok(ReadProgress::Partial)
                }
            }
            Err(err) => match err.kind() {
                ErrorKind::WouldBlock => Ok(ReadProgress::Empty),
                ErrorKind::Interrupted => Ok(ReadProgress::Partial),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
                    self.closed = true;
                    Ok(ReadProgress::Closed)
                }
                _ => Err(TransportError::Io {
                    what: "TCP receive",
                    source: err,
                }),
            },
        }
    }
}

impl TcpTransport {
    /// Builds the mesh (see [`build_mesh`]) and makes every stream non-blocking.
    pub fn establish(spec: &MeshSpec<'_>) -> Result<(Self, MeshTraffic), TransportError> {
        let (streams, traffic) = build_mesh(spec)?;
        let streams = streams
            .into_iter()
            .map(|stream| {
                stream
                    .map(|stream| {
                        stream.set_nonblocking(true)?;
                        Ok(PeerStream {
                            stream,
                            frame: vec![0; spec.msg_bytes],
                            filled: 0,
                            closed: false,
                        })
                    })
                    .transpose()
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(TransportError::io("make TCP stream non-blocking"))?;
        let transport = Self {
            fds: Vec::with_capacity(streams.len()),
            fd_peers: Vec::with_capacity(streams.len()),
            waiter: None,
            wait_fds: Vec::with_capacity(streams.len()),
            streams,
        };
        Ok((transport, traffic))
    }

    fn peer(&mut self, rank: usize) -> &mut PeerStream {
        self.streams[rank]
            .as_mut()
            .expect("the mesh connects every pair of ranks")
    }

    /// Reads one step from `peer`, delivering a completed frame; a closed
    /// stream is an error because the caller needs data from it.
    fn read_needed(
        &mut self,
        peer: usize,
        deliver: &mut Deliver<'_>,
    ) -> Result<u64, TransportError> {
        let stream = self.peer(peer);
        match stream.read_some()? {
            ReadProgress::Frame => deliver(&stream.frame, Some(peer)),
            ReadProgress::Partial => {}
            ReadProgress::Empty => return Ok(1),
            ReadProgress::Closed => return Err(TransportError::PeerClosed { peer }),
        }
        Ok(0)
    }

    /// While a send to `to` is blocked: waits for room, reading whatever any
    /// peer sent meanwhile.
    fn wait_writable(
        &mut self,
        to: usize,
        deadline: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<(), TransportError> {
        self.fds.clear();
        self.fd_peers.clear();
        for (rank, stream) in self.streams.iter().enumerate() {
            let Some(stream) = stream else { continue };
            let mut events = if stream.closed { 0 } else { libc::POLLIN };
            if rank == to {
                events |= libc::POLLOUT;
            }
            if events != 0 {
                self.fds
                    .push(sys::pollfd(stream.stream.as_raw_fd(), events));
                self.fd_peers.push(rank);
            }
        }
        sys::poll(&mut self.fds, remaining(deadline))
            .map_err(TransportError::io("poll TCP streams"))?;
        for index in 0..self.fds.len() {
            if self.fds[index].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
                continue;
            }
            let peer = self.fd_peers[index];
            // Drain fully so the peer's own blocked send can finish; a peer
            // that already finished its run and closed is not an error here.
            let stream = self.peer(peer);
            loop {
                match stream.read_some()? {
                    ReadProgress::Frame => deliver(&stream.frame, Some(peer)),
                    ReadProgress::Partial => {}
                    ReadProgress::Empty | ReadProgress::Closed => break,
                }
            }
        }
        Ok(())
    }
}

impl Transport for TcpTransport {
    fn send(
        &mut self,
        to: usize,
        frame: &[u8],
        deadline: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<(), TransportError> {
        let began = Instant::now();
        let mut written = 0;
        while written < frame.len() {
            match self.peer(to).stream.write(&frame[written..]) {
                Ok(0) => return Err(TransportError::PeerClosed { peer: to }),
                Ok(count) => written += count,
                Err(err) => match err.kind() {
                    ErrorKind::WouldBlock if remaining(deadline).is_zero() => {
                        return Err(TransportError::SendStalled {
                            peer: to,
                            waited: began.elapsed(),
                        });
                    }
                    ErrorKind::WouldBlock => self.wait_writable(to, deadline, deliver)?,
                    ErrorKind::Interrupted => {}
                    ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => {
                        return Err(TransportError::PeerClosed { peer: to });
                    }
                    _ => {
                        return Err(TransportError::Io {
                            what: "TCP send",
                            source: err,
                        });
                    }
                },
            }
        }
        Ok(())
    }

    fn receive(
        &mut self,
        from: &[usize],
        mode: RecvMode,
        deadline: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<u64, TransportError> {
        if mode == RecvMode::Spin {
            if let Some(waiter) = &mut self.waiter {
                self.wait_fds.clear();
                for &peer in from {
                    if let Some(stream) = &self.streams[peer] {
                        self.wait_fds.push(stream.stream.as_raw_fd());
                    }
                }
                if !waiter
                    .worth_reading(&self.wait_fds)
                    .map_err(TransportError::io("TCP wait"))?
                {
                    return Ok(1);
                }
            }
            let mut empty_polls = 0;
            for &peer in from {
                empty_polls += self.read_needed(peer, deliver)?;
            }
            return Ok(empty_polls);
        }
        self.fds.clear();
        self.fd_peers.clear();
        for &peer in from {
            let fd = self.peer(peer).stream.as_raw_fd();
            self.fds.push(sys::pollfd(fd, libc::POLLIN));
            self.fd_peers.push(peer);
        }
        if sys::poll(&mut self.fds, remaining(deadline))
            .map_err(TransportError::io("poll TCP streams"))?
            == 0
        {
            return Ok(0);
        }
        for index in 0..self.fds.len() {
            if self.fds[index].revents != 0 {
                // A spurious wake-up reading nothing is not a spin poll.
                self.read_needed(self.fd_peers[index], deliver)?;
            }
        }
        Ok(0)
    }

    fn kernel_drops(&self) -> Option<u64> {
        None
    }

    fn set_wait(&mut self, mode: WaitMode) -> Result<(), TransportError> {
        let fds: Vec<_> = self
            .streams
            .iter()
            .flatten()
            .map(|s| s.stream.as_raw_fd())
            .collect();
        self.waiter =
            Some(Waiter::new(mode, &fds).map_err(TransportError::io("set up the wait mode"))?);
        Ok(())
    }
}
