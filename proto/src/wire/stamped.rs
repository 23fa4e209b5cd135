//! When received bytes arrived: the kernel's receive stamp of a TCP socket
//! (`SO_TIMESTAMPNS`, taken by the network stack when the segment arrived,
//! before it waited for this process to be scheduled and read it).
//!
//! The heartbeat exchange's receive stamps (t2 on the replier, t4 on the
//! sender) are taken from it, on the agent, the coordinator and the scale
//! harness's stand-ins: a stamp taken when a busy task finally reads the
//! bytes is late by that wait, and makes the offset estimate wrong by half
//! of it (measured: 1000 stand-ins on one CPU, estimates −0.35 … +1.9 ms
//! with task stamps, ±17 µs with the kernel's).
//!
//! [`arrival_ns`] is the pure part (clock conversion and fallback);
//! [`StampedRead`] the socket reader ([`ReadTimes`]: any reader, stamped
//! with its read times); [`ArrivalStamp`] what
//! [`super::stream::WireReader::recv_stamped`] asks of a reader.

use std::{
    io,
    os::fd::AsRawFd,
    pin::Pin,
    task::{Context, Poll, ready},
};

use tokio::{
    io::{AsyncRead, Interest, ReadBuf},
    net::tcp::OwnedReadHalf,
};

use super::clock::monotonic_ns;

/// A reader that knows when the bytes of its last read arrived.
pub trait ArrivalStamp {
    /// CLOCK_MONOTONIC ns at which the newest bytes of the last read
    /// arrived; `None` before the first read.
    fn last_arrival_ns(&self) -> Option<u64>;
}

/// The arrival time of one read on CLOCK_MONOTONIC: the kernel's stamp
/// `kernel_realtime_ns` (socket stamps are on CLOCK_REALTIME), converted with
/// `realtime_minus_monotonic_ns` (the two clocks' difference, read at
/// `read_ns`). Never later than the read itself (`read_ns`, CLOCK_MONOTONIC):
/// a clock step between the stamp and the conversion would otherwise show.
/// Without a stamp (timestamping refused, or a segment queued before it was
/// turned on), or one that converts to before the clock's origin, the read
/// time is the best there is.
pub fn arrival_ns(
    kernel_realtime_ns: Option<i128>,
    realtime_minus_monotonic_ns: i128,
    read_ns: u64,
) -> u64 {
    kernel_realtime_ns
        .and_then(|real| u64::try_from(real - realtime_minus_monotonic_ns).ok())
        .map_or(read_ns, |arrived| arrived.min(read_ns))
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC now, ns.
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

/// The read half of a TCP stream, with the arrival time of each read.
#[derive(Debug)]
pub struct StampedRead {
    inner: OwnedReadHalf,
    last_arrival_ns: Option<u64>,
    /// Whether the kernel stamped the last read (else its arrival is the
    /// read time).
    last_kernel_stamped: bool,
}

impl StampedRead {
    /// Asks the kernel to stamp receives on the socket. If it refuses, every
    /// read's arrival is its read time (as without this type).
    pub fn new(inner: OwnedReadHalf) -> Self {
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
            tracing::debug!(
                "SO_TIMESTAMPNS refused ({}); receive times are read times",
                io::Error::last_os_error()
            );
        }
        Self {
            inner,
            last_arrival_ns: None,
            last_kernel_stamped: false,
        }
    }

    pub fn get_ref(&self) -> &OwnedReadHalf {
        &self.inner
    }

    /// Whether the last read's arrival is the kernel's stamp (not the
    /// fallback, the read time).
    pub fn last_kernel_stamped(&self) -> bool {
        self.last_kernel_stamped
    }
}

impl ArrivalStamp for StampedRead {
    fn last_arrival_ns(&self) -> Option<u64> {
        self.last_arrival_ns
    }
}

/// Any reader, with each read's arrival taken as its read time: for
/// streams the kernel cannot stamp (in-memory pipes in tests).
#[derive(Debug)]
pub struct ReadTimes<R> {
    inner: R,
    last_read_ns: Option<u64>,
}

impl<R> ReadTimes<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            last_read_ns: None,
        }
    }
}

impl<R> ArrivalStamp for ReadTimes<R> {
    fn last_arrival_ns(&self) -> Option<u64> {
        self.last_read_ns
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for ReadTimes<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            this.last_read_ns = Some(monotonic_ns());
        }
        Poll::Ready(Ok(()))
    }
}

/// One non-blocking `recvmsg` into `buf`: bytes read and the kernel's
/// receive stamp (CLOCK_REALTIME ns), if it gave one.
fn recv_stamped(fd: libc::c_int, buf: &mut [u8]) -> io::Result<(usize, Option<i128>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for the control messages (aligned; one timespec is expected).
    let mut control = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; the fields are set below.
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
            if (*message).cmsg_level == libc::SOL_SOCKET
                && (*message).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let at: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(message).cast());
                stamp = Some(i128::from(at.tv_sec) * 1_000_000_000 + i128::from(at.tv_nsec));
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
                    if read > 0 {
                        let read_ns = monotonic_ns();
                        this.last_arrival_ns =
                            Some(arrival_ns(stamp, realtime_minus_monotonic(), read_ns));
                        this.last_kernel_stamped = stamp.is_some();
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000_000;

    #[test]
    fn a_kernel_stamp_is_moved_from_the_realtime_to_the_monotonic_clock() {
        // Real time is 1.7e9 s ahead of the monotonic clock; the segment
        // arrived 2 ms before the read.
        let offset = 1_700_000_000 * S;
        let read_ns = 5_000_000_000;
        let stamp = offset + 4_998_000_000;
        assert_eq!(arrival_ns(Some(stamp), offset, read_ns), 4_998_000_000);
    }

    #[test]
    fn no_stamp_falls_back_to_the_read_time() {
        assert_eq!(arrival_ns(None, 1_700_000_000 * S, 5_000), 5_000);
    }

    #[test]
    fn a_stamp_after_the_read_is_the_read_time() {
        // The real-time clock stepped forward between stamp and conversion.
        let offset = 1_700_000_000 * S;
        assert_eq!(arrival_ns(Some(offset + 9_000), offset, 5_000), 5_000);
    }

    #[test]
    fn a_stamp_before_the_clock_origin_is_the_read_time() {
        // The real-time clock stepped back a long way.
        let offset = 1_700_000_000 * S;
        assert_eq!(arrival_ns(Some(offset - 10 * S), offset, 5_000), 5_000);
    }
}
