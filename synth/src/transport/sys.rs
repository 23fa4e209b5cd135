//! The few socket calls `std` does not offer: poll(2) and forcing a larger
//! receive buffer.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Waits until one of `fds` is ready or `timeout` passes; returns how many
/// entries have events. An interrupted wait reports 0 (the caller loops).
pub fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    // Round up so a sub-millisecond remainder still waits instead of spinning.
    let millis = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd for the
    // whole call and its length is passed alongside it.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if ready >= 0 {
        return Ok(ready as usize);
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::Interrupted {
        Ok(0)
    } else {
        Err(err)
    }
}

/// One `poll(fds, n, 0)`: how many entries are ready now, without waiting.
pub fn poll_now(fds: &mut [libc::pollfd]) -> io::Result<usize> {
    poll(fds, Duration::ZERO)
}

pub fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Asks for a receive buffer of `bytes`, past `net.core.rmem_max` when
/// privileged. A burst of early frames (all-to-all, ranks running ahead)
/// must not overflow the default buffer: UDP would drop them silently.
pub fn grow_receive_buffer(socket: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    let set = |option| {
        // SAFETY: the fd is open for the duration of the borrow, and the
        // option value is a c_int whose size is passed with it.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&raw const value).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) == 0 || set(libc::SO_RCVBUF) == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn poll_reports_a_readable_socket_and_times_out_on_a_quiet_one() {
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
        quiet.send_to(b"x", busy.local_addr().unwrap()).unwrap();
        let mut fds = [
            pollfd(quiet.as_raw_fd(), libc::POLLIN),
            pollfd(busy.as_raw_fd(), libc::POLLIN),
        ];
        assert_eq!(poll(&mut fds, Duration::from_secs(5)).unwrap(), 1);
        assert_eq!(fds[0].revents, 0);
        assert_ne!(fds[1].revents & libc::POLLIN, 0);
        let mut fds = [pollfd(quiet.as_raw_fd(), libc::POLLIN)];
        assert_eq!(poll(&mut fds, Duration::from_millis(1)).unwrap(), 0);
    }

    #[test]
    fn receive_buffer_grows() {
        use std::os::fd::AsRawFd;
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        grow_receive_buffer(&socket, 1 << 20).unwrap();
        let mut value: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid fd, writable c_int and its length.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&raw mut value).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        // The kernel reports double the requested size (bookkeeping overhead);
        // anything above the 208 KiB default shows the request took effect.
        assert!(value > 212_992, "SO_RCVBUF stayed at {value}");
    }
}
