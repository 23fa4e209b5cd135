//! A TCP read half that asks the kernel when the bytes it returns arrived
//! (`SO_TIMESTAMPNS`: stamped by the network stack on receive, before the
//! bytes wait for this process to be scheduled and read them).
//!
//! The stand-ins' heartbeat receive stamp (t2 of the NTP exchange) is taken
//! from it: with 1000 stand-ins on one CPU a heartbeat can wait
//! milliseconds for its task, and a stamp taken after that wait makes the
//! coordinator's offset estimate for that node wrong by half of it.

use std::{
    io,
    os::fd::AsRawFd,
    pin::Pin,
    task::{Context, Poll, ready},
};

use cosched_proto::wire::monotonic_ns;
use tokio::{
    io::{AsyncRead, Interest, ReadBuf},
    net::tcp::OwnedReadHalf,
};

/// [`OwnedReadHalf`] with the kernel's receive time of the last bytes read.
#[derive(Debug)]
pub struct StampedRead {
    inner: OwnedReadHalf,
    /// CLOCK_MONOTONIC ns at which the newest segment of the last read
    /// arrived (`None`: the kernel gave no stamp).
    last_arrival_ns: Option<u64>,
}

impl StampedRead {
    /// Turns receive timestamps on for the socket.
    pub fn new(inner: OwnedReadHalf) -> io::Result<Self> {
        let on: libc::c_int = 1;
        let fd = inner.as_ref().as_raw_fd();
        // SAFETY: a valid socket fd and an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            inner,
            last_arrival_ns: None,
        })
    }

    /// When the newest bytes of the last read arrived, CLOCK_MONOTONIC ns.
    pub fn last_arrival_ns(&self) -> Option<u64> {
        self.last_arrival_ns
    }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC now, ns (socket stamps are on the
/// real-time clock).
fn realtime_minus_monotonic() -> i128 {
    let mut real = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut real) };
    let mono = monotonic_ns();
    i128::from(real.tv_sec) * 1_000_000_000 + i128::from(real.tv_nsec) - i128::from(mono)
}

/// One `recvmsg` into `buf`: bytes read and the arrival stamp, if any.
fn recv_stamped(fd: libc::c_int, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one timespec control message (aligned).
    let mut control = [0u64; 16];
    // SAFETY: zeroed msghdr is valid; fields set below.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `header` points at live buffers of the given lengths.
    let read = unsafe { libc::recvmsg(fd, &mut header, libc::MSG_DONTWAIT) };
    if read < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut message = libc::CMSG_FIRSTHDR(&header);
        while !message.is_null() {
            let level = (*message).cmsg_level;
            let kind = (*message).cmsg_type;
            if level == libc::SOL_SOCKET
                && (kind == libc::SCM_TIMESTAMPNS || kind == libc::SO_TIMESTAMPNS)
            {
                let at: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(message).cast());
                let real = i128::from(at.tv_sec) * 1_000_000_000 + i128::from(at.tv_nsec);
                stamp = u64::try_from(real - realtime_minus_monotonic()).ok();
            }
            message = libc::CMSG_NXTHDR(&header, message);
        }
    }
    Ok((read as usize, stamp))
}

impl AsyncRead for StampedRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let stream = this.inner.as_ref();
        let fd = stream.as_raw_fd();
        loop {
            ready!(stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match stream.try_io(Interest::READABLE, || recv_stamped(fd, unfilled)) {
                Ok((read, stamp)) => {
                    buf.advance(read);
                    if let Some(stamp) = stamp {
                        // Never later than now (a clock step between the
                        // two readings would otherwise show).
                        this.last_arrival_ns = Some(stamp.min(monotonic_ns()));
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}
