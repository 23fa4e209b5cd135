//! Ctrl-C during the bench: finish the current run, skip the rest, and still
//! tear the cluster down and write what was measured. The handler only sets
//! a flag (the one thing a signal handler may safely do); the bench checks it
//! between runs, which are seconds long. A second Ctrl-C exits at once,
//! leaving the cluster for `cargo xtask cluster down`.
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::bail;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
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
        // SAFETY: sigaction is plain data; the handler only touches an atomic
        // (or calls _exit), and SA_RESTART keeps blocking calls going.
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
