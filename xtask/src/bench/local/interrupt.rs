//! Ctrl-C during the bench: finish the current run, skip the rest, and still
//! tear the cluster down and write what was measured. The handler only sets
//! flags (the one thing a signal handler may safely do); the bench checks
//! them between runs, which are seconds long. Another Ctrl-C at least a
//! second later exits at once, leaving the cluster for `cargo xtask cluster
//! down`; signals closer together count as one, because one keypress can
//! arrive twice (e.g. `timeout` forwards it to its child and to the group).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::bail;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// CLOCK_MONOTONIC of the first signal, ns.
static FIRST_SIGNAL_NS: AtomicU64 = AtomicU64::new(0);
/// How far apart two signals must be to mean "quit now".
const AGAIN_AFTER_NS: u64 = 1_000_000_000;

fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime is async-signal-safe and writes only `t`.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

extern "C" fn on_signal(_: libc::c_int) {
    let now = monotonic_ns();
    if !INTERRUPTED.swap(true, Ordering::SeqCst) {
        FIRST_SIGNAL_NS.store(now, Ordering::SeqCst);
    } else if now.saturating_sub(FIRST_SIGNAL_NS.load(Ordering::SeqCst)) >= AGAIN_AFTER_NS {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Whether Ctrl-C (or SIGTERM) arrived since [`catch`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Handles SIGINT and SIGTERM until the guard is dropped, which restores the
/// previous handlers.
pub fn catch() -> anyhow::Result<Guard> {
    INTERRUPTED.store(false, Ordering::SeqCst);
    let mut previous = Vec::new();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; the handler only touches atomics
        // and async-signal-safe calls; SA_RESTART keeps blocking calls going.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to initialised sigaction structs.
        if unsafe { libc::sigaction(signal, &action, &mut old) } != 0 {
            bail!("sigaction: {}", std::io::Error::last_os_error());
        }
        previous.push((signal, old));
    }
    Ok(Guard { previous })
}

pub struct Guard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (signal, old) in &self.previous {
            // SAFETY: restores a handler returned by sigaction.
            unsafe { libc::sigaction(*signal, old, std::ptr::null_mut()) };
        }
    }
}
