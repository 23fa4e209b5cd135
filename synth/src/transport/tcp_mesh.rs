//! Building the full TCP mesh: one stream per pair of ranks.
//!
//! The lower rank of a pair listens on its own address and the higher one
//! connects (retrying until the listener exists) and sends a hello naming
//! itself. A rank connects to rank 0 last, so rank 0 holding every hello
//! means every rank's mesh is complete: that is the start handshake's
//! "everyone is up".

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{TransportError, remaining, sys};
use crate::header::{HEADER_LEN, Header, Kind};
use crate::stop::describe_run_length;

/// Pause between connection attempts while a lower rank is not listening yet.
const CONNECT_RETRY: Duration = Duration::from_millis(20);
/// Upper bound for one connection attempt, so retries keep happening.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);

/// Handshake frames moved while building the mesh.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeshTraffic {
    pub hellos_sent: u64,
    pub hellos_received: u64,
    /// Connections whose first frame was not a hello of this job.
    pub rejected: u64,
    pub bytes_received: u64,
}

/// What a rank needs to build its part of the mesh.
pub struct MeshSpec<'a> {
    pub rank: usize,
    pub peers: &'a [SocketAddr],
    pub msg_bytes: usize,
    pub job_hash: u64,
    /// This rank's encoded hello frame.
    pub hello: &'a [u8],
    /// This rank's stop iteration; hellos must carry the same.
    pub stop_iter: u64,
    pub deadline: Instant,
}

/// Connected streams indexed by peer rank (`None` for this rank).
pub fn build_mesh(
    spec: &MeshSpec<'_>,
) -> Result<(Vec<Option<TcpStream>>, MeshTraffic), TransportError> {
    let size = spec.peers.len();
    let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    let mut traffic = MeshTraffic::default();
    let listener = if spec.rank + 1 < size {
        let addr = spec.peers[spec.rank];
        let listener =
            TcpListener::bind(addr).map_err(|source| TransportError::Bind { addr, source })?;
        listener
            .set_nonblocking(true)
            .map_err(TransportError::io("make listener non-blocking"))?;
        Some(listener)
    } else {
        None
    };
    for (lower, slot) in streams.iter_mut().enumerate().take(spec.rank).skip(1) {
        *slot = Some(connect_and_greet(spec, lower)?);
        traffic.hellos_sent += 1;
    }
    if let Some(listener) = &listener {
        accept_higher_ranks(spec, listener, &mut streams, &mut traffic)?;
    }
    if spec.rank != 0 {
        streams[0] = Some(connect_and_greet(spec, 0)?);
        traffic.hellos_sent += 1;
    }
    Ok((streams, traffic))
}

fn connect_and_greet(spec: &MeshSpec<'_>, peer: usize) -> Result<TcpStream, TransportError> {
    let addr = spec.peers[peer];
    let mut stream = loop {
        let attempt = remaining(spec.deadline).clamp(Duration::from_millis(1), CONNECT_ATTEMPT);
        match TcpStream::connect_timeout(&addr, attempt) {
            Ok(stream) => break stream,
            Err(source) if remaining(spec.deadline).is_zero() => {
                return Err(TransportError::Connect { peer, addr, source });
            }
            Err(_) => std::thread::sleep(CONNECT_RETRY),
        }
    };
    stream
        .set_nodelay(true)
        .map_err(TransportError::io("set TCP_NODELAY"))?;
    stream
        .set_write_timeout(Some(remaining(spec.deadline).max(Duration::from_millis(1))))
        .map_err(TransportError::io("set TCP write timeout"))?;
    stream
        .write_all(spec.hello)
        .map_err(|source| TransportError::Connect { peer, addr, source })?;
    Ok(stream)
}

fn accept_higher_ranks(
    spec: &MeshSpec<'_>,
    listener: &TcpListener,
    streams: &mut [Option<TcpStream>],
    traffic: &mut MeshTraffic,
) -> Result<(), TransportError> {
    let started = Instant::now();
    let missing = |streams: &[Option<TcpStream>]| -> Vec<usize> {
        (spec.rank + 1..streams.len())
            .filter(|&peer| streams[peer].is_none())
            .collect()
    };
    loop {
        let still_missing = missing(streams);
        if still_missing.is_empty() {
            return Ok(());
        }
        let left = remaining(spec.deadline);
        if left.is_zero() {
            return Err(TransportError::AcceptTimeout {
                missing: still_missing,
                waited: started.elapsed(),
            });
        }
        let mut fds = [sys::pollfd(listener.as_raw_fd(), libc::POLLIN)];
        sys::poll(&mut fds, left).map_err(TransportError::io("poll listener"))?;
        let (stream, addr) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                continue;
            }
            Err(source) => {
                return Err(TransportError::Io {
                    what: "accept",
                    source,
                });
            }
        };
        match read_hello(spec, stream, addr, streams)? {
            Some((peer, stream)) => {
                streams[peer] = Some(stream);
                traffic.hellos_received += 1;
                traffic.bytes_received += spec.msg_bytes as u64;
            }
            None => traffic.rejected += 1,
        }
    }
}

/// Reads the first frame of an accepted connection: `Some` for a hello of
/// this job from a higher rank not yet connected, `None` to drop the
/// connection (a stray client, another job), an error for a peer of this
/// job that was started with a different `--msg-bytes`.
fn read_hello(
    spec: &MeshSpec<'_>,
    mut stream: TcpStream,
    addr: SocketAddr,
    streams: &[Option<TcpStream>],
) -> Result<Option<(usize, TcpStream)>, TransportError> {
    let timeout = remaining(spec.deadline).max(Duration::from_millis(1));
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(timeout)).is_err() {
        return Ok(None);
    }
    let mut frame = vec![0u8; spec.msg_bytes];
    if stream.read_exact(&mut frame[..HEADER_LEN]).is_err() {
        return Ok(None);
    }
    let Ok(header) = Header::decode_prefix(&frame[..HEADER_LEN]) else {
        return Ok(None);
    };
    if header.job_hash != spec.job_hash {
        return Ok(None);
    }
    if header.len as usize != spec.msg_bytes {
        return Err(TransportError::FrameSizeMismatch {
            addr,
            theirs: header.len as usize,
            ours: spec.msg_bytes,
        });
    }
    if stream.read_exact(&mut frame[HEADER_LEN..]).is_err() {
        return Ok(None);
    }
    let peer = header.src as usize;
    if header.kind == Kind::Hello && header.stop_iter != spec.stop_iter {
        return Err(TransportError::RunLengthMismatch {
            peer,
            theirs: describe_run_length(header.stop_iter),
            ours: describe_run_length(spec.stop_iter),
        });
    }
    let wanted = header.kind == Kind::Hello
        && peer > spec.rank
        && peer < streams.len()
        && streams[peer].is_none();
    if !wanted {
        return Ok(None);
    }
    stream
        .set_nodelay(true)
        .map_err(TransportError::io("set TCP_NODELAY"))?;
    Ok(Some((peer, stream)))
}
