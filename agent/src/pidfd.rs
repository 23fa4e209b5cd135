//! A process pinned by a pidfd: the kernel's handle to one process, which
//! never names another process, unlike its pid number (reused once the
//! process is reaped). The user socket pins a process before checking whose
//! it is and asks after taking it whether it still runs.
use std::{
    io,
    os::fd::{FromRawFd as _, OwnedFd},
};

pub struct PidFd(OwnedFd);

impl PidFd {
    /// Pins process `pid` (a thread id that is not a process is refused).
    pub fn open(pid: u32) -> io::Result<Self> {
        if pid == 0 || pid > i32::MAX as u32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{pid} is not a process id"),
            ));
        }
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ESRCH) => {
                    io::Error::new(io::ErrorKind::NotFound, format!("no such process: {pid}"))
                }
                Some(libc::EINVAL) => io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{pid} is a thread, not a process: give the process id"),
                ),
                _ => e,
            });
        }
        // SAFETY: fd was just returned by pidfd_open and is owned by nobody else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Whether the pinned process still runs (not exited; a zombie has).
    pub fn alive(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        // Signal 0 checks without sending; it fails with ESRCH once the
        // process has exited, even before it is reaped.
        // SAFETY: a valid pidfd, no siginfo, no flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                0i32,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
        rc == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_pinned_and_seen_to_exit() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pin = PidFd::open(child.id()).unwrap();
        assert!(pin.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!pin.alive());
    }

    #[test]
    fn missing_and_impossible_pids_are_refused_clearly() {
        let e = PidFd::open(0).err().unwrap();
        assert!(e.to_string().contains("not a process id"), "{e}");
        let e = PidFd::open(u32::MAX).err().unwrap();
        assert!(e.to_string().contains("not a process id"), "{e}");
    }
}
