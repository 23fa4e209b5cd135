//! A precise switch timer on the agent's own event loop. tokio's timers
//! tick in milliseconds, far too coarse for slices of 10 ms switched in
//! step across nodes; a `timerfd` on CLOCK_MONOTONIC with an absolute
//! deadline is exact to the hrtimer (no timer slack), and the loop waits on
//! it with everything else.
//!
//! Why not a thread of its own (how it was before): the thread slept in
//! `clock_nanosleep`, woke the loop through a channel and then went back to
//! wait for the next deadline, which the loop armed only while it applied
//! the switch: three wake-ups of the agent per slice switch (timer, loop,
//! timer again) on the CPU of the incoming job. With the timerfd there is
//! one, the loop's, and arming is one `timerfd_settime`. The loop runs at
//! the agent's SCHED_FIFO priority whenever switches are enforced
//! (`Engine::own_priority`), as the thread did.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
};

use super::deadlines::Deadlines;

/// Armed absolute CLOCK_MONOTONIC deadlines; each fires its token when the
/// loop, woken by the timerfd, takes the due ones.
pub struct SwitchTimer {
    fd: OwnedFd,
    deadlines: Deadlines,
    /// The deadline the timerfd is set to (None: disarmed or expired).
    set_to: Option<u64>,
}

impl SwitchTimer {
    /// A disarmed timer (non-blocking, close-on-exec timerfd).
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the fd returned is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: a fresh fd nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            deadlines: Deadlines::default(),
            set_to: None,
        })
    }

    /// The fd to wait on (readable when the earliest deadline passed). It
    /// lives as long as the timer.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Fires `token` at `at_ns` (CLOCK_MONOTONIC), or at once if it passed.
    pub fn arm(&mut self, at_ns: u64, token: u64) {
        self.deadlines.arm(at_ns, token);
        self.sync();
    }

    /// `token` will not fire.
    pub fn cancel(&mut self, token: u64) {
        self.deadlines.cancel(token);
        self.sync();
    }

    /// How many deadlines are armed.
    pub fn armed(&self) -> usize {
        self.deadlines.len()
    }

    /// The tokens due at `now_ns`, earliest first; clears the fd's
    /// readiness and sets it to the next deadline.
    pub fn take_due(&mut self, now_ns: u64) -> Vec<u64> {
        let mut expirations = [0u8; 8];
        // SAFETY: reads 8 bytes into a buffer of 8; non-blocking.
        let n = unsafe { libc::read(self.raw_fd(), expirations.as_mut_ptr().cast(), 8) };
        if n == 8 {
            // A one-shot timerfd that expired is disarmed.
            self.set_to = None;
        }
        let due = self.deadlines.take_due(now_ns);
        self.sync();
        due
    }

    /// Blocks until the fd is readable (tests, outside the event loop).
    #[cfg(test)]
    pub fn wait(&self) {
        let mut pfd = libc::pollfd {
            fd: self.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        while unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {}
    }

    /// Sets the timerfd to the earliest deadline if it is not already.
    fn sync(&mut self) {
        let want = self.deadlines.earliest();
        if want == self.set_to {
            return;
        }
        // An absolute 0 would disarm: a deadline at 0 has passed anyway.
        let at_ns = want.map_or(0, |at| at.max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid itimerspec; the old value is not wanted.
        let rc = unsafe {
            libc::timerfd_settime(
                self.raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc == 0 {
            self.set_to = want;
        } else {
            // Cannot happen with a valid fd and time; the switch would be
            // missed, so say so.
            tracing::error!(
                "switch timer: timerfd_settime: {}",
                io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::monotonic_ns;

    #[test]
    fn armed_deadlines_fire_by_time_and_not_before() {
        let mut timer = SwitchTimer::new().unwrap();
        let now = monotonic_ns();
        timer.arm(now + 4_000_000, 1);
        timer.arm(now + 2_000_000, 2);
        timer.wait();
        let woke = monotonic_ns();
        assert!(
            woke >= now + 2_000_000,
            "woke {} ns early",
            now + 2_000_000 - woke
        );
        assert_eq!(timer.take_due(woke), [2]);
        assert_eq!(timer.armed(), 1);
        timer.wait();
        assert!(monotonic_ns() >= now + 4_000_000);
        assert_eq!(timer.take_due(monotonic_ns()), [1]);
        assert_eq!(timer.armed(), 0);
    }

    #[test]
    fn a_deadline_already_passed_makes_the_fd_readable_at_once() {
        let mut timer = SwitchTimer::new().unwrap();
        let start = monotonic_ns();
        timer.arm(start.saturating_sub(1_000_000), 3);
        timer.wait();
        assert!(monotonic_ns() - start < 50_000_000);
        assert_eq!(timer.take_due(monotonic_ns()), [3]);
    }

    #[test]
    fn a_cancelled_deadline_leaves_the_fd_quiet_and_the_next_one_still_fires() {
        let mut timer = SwitchTimer::new().unwrap();
        let now = monotonic_ns();
        timer.arm(now + 1_000_000, 1);
        timer.arm(now + 3_000_000, 2);
        timer.cancel(1);
        timer.wait();
        assert!(
            monotonic_ns() >= now + 3_000_000,
            "the cancelled one woke it"
        );
        assert_eq!(timer.take_due(monotonic_ns()), [2]);
    }
}
