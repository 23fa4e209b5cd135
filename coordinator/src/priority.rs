//! The coordinator's own CPU priority.
//!
//! Slice switches are announced a few milliseconds ahead of their time. On a
//! host whose agents run jobs at real-time priorities (DCS boosts, FCS slot
//! owners), a time-shared coordinator waits for its CPU behind them, so
//! announcements come late and the cross-node switch skew grows by orders
//! of magnitude (measured with FCS at 10 ms slices: docs/benchmarks.md). Its event loop therefore runs at
//! a SCHED_FIFO priority above the jobs' boosts (which agents keep below
//! their own priority); it sleeps between slices, so it takes little CPU.

use std::io;

/// Runs the calling thread (the event loop) at SCHED_FIFO `priority`, or
/// time-shared when it is 0. Reset on fork: nothing the coordinator starts
/// inherits it.
pub fn run_calling_thread_at(priority: u32) -> io::Result<()> {
    let (policy, priority) = match priority {
        0 => (libc::SCHED_OTHER, 0),
        p => (libc::SCHED_FIFO, p as libc::c_int),
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid param.
    let rc = unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
