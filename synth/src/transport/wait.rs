//! How a spinning rank looks for data before it reads (`--wait`): the
//! system call a message-passing library would make in its wait loop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::sys;
use crate::modes::WaitMode;

pub struct Waiter {
    mode: WaitMode,
    /// The epoll instance of `Epoll`, with every socket the rank reads.
    epoll: Option<OwnedFd>,
    /// Scratch poll set for `Poll`.
    fds: Vec<libc::pollfd>,
}

impl Waiter {
    /// A waiter for `mode` over the sockets `fds` (registered once with
    /// epoll, level-triggered, for `Epoll`).
    pub fn new(mode: WaitMode, fds: &[RawFd]) -> io::Result<Self> {
        let epoll = match mode {
            WaitMode::Epoll => Some(epoll_over(fds)?),
            _ => None,
        };
        Ok(Self {
            mode,
            epoll,
            fds: Vec::new(),
        })
    }

    /// One wait iteration before a non-blocking read of `fds`: false when
    /// the poll said nothing is ready (an empty wait; the caller skips the
    /// read), true when the caller should read (something is ready, or the
    /// mode reads every time).
    pub fn worth_reading(&mut self, fds: &[RawFd]) -> io::Result<bool> {
        match self.mode {
            WaitMode::Recv => Ok(true),
            WaitMode::Yield => {
                // SAFETY: no arguments; always succeeds on Linux.
                unsafe { libc::sched_yield() };
                Ok(true)
            }
            WaitMode::Poll => {
                self.fds.clear();
                self.fds
                    .extend(fds.iter().map(|&fd| sys::pollfd(fd, libc::POLLIN)));
                Ok(sys::poll_now(&mut self.fds)? > 0)
            }
            WaitMode::Epoll => {
                let ep = self.epoll.as_ref().expect("made for Epoll");
                let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
                // SAFETY: valid epoll fd and a writable array of its length.
                let ready = unsafe {
                    libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, 0)
                };
                match ready {
                    n if n >= 0 => Ok(n > 0),
                    _ => match io::Error::last_os_error() {
                        e if e.kind() == io::ErrorKind::Interrupted => Ok(false),
                        e => Err(e),
                    },
                }
            }
        }
    }
}

fn epoll_over(fds: &[RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned below.
    let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nobody else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(raw) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: valid fds and event.
        if unsafe { libc::epoll_ctl(raw, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn quiet_and_busy() -> (UdpSocket, UdpSocket) {
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
        quiet.send_to(b"x", busy.local_addr().unwrap()).unwrap();
        (quiet, busy)
    }

    #[test]
    fn poll_and_epoll_tell_an_empty_socket_from_a_readable_one() {
        let (quiet, busy) = quiet_and_busy();
        for mode in [WaitMode::Poll, WaitMode::Epoll] {
            let mut w = Waiter::new(mode, &[quiet.as_raw_fd()]).unwrap();
            assert!(!w.worth_reading(&[quiet.as_raw_fd()]).unwrap(), "{mode:?}");
            let mut w = Waiter::new(mode, &[busy.as_raw_fd()]).unwrap();
            // Loopback delivery is synchronous with the send.
            assert!(w.worth_reading(&[busy.as_raw_fd()]).unwrap(), "{mode:?}");
        }
    }

    #[test]
    fn receive_and_yield_modes_always_read() {
        let (quiet, _) = quiet_and_busy();
        for mode in [WaitMode::Recv, WaitMode::Yield] {
            let mut w = Waiter::new(mode, &[quiet.as_raw_fd()]).unwrap();
            assert!(w.worth_reading(&[quiet.as_raw_fd()]).unwrap(), "{mode:?}");
        }
    }
}
