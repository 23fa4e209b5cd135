//! The first-frame gate (`cosched_agent_common::first_frame`): the first
//! `init` of a process waits, when the agent published a gate next to the
//! counters, until the instant its coordinator chose for the job's first
//! frame, so the job's windows start where its schedule wants them.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cosched_agent_common::first_frame::{FILE_NAME, FirstFrameGate, GateStep, SIZE, step};

use crate::clock::monotonic_ns;

/// The longest any gate holds a process, whatever its file says.
pub const MAX_WAIT_NS: u64 = 10_000_000_000;
/// How often a pending gate is looked at again.
const POLL_NS: u64 = 1_000_000;

/// Whether this process went through the gate already.
static PASSED: AtomicBool = AtomicBool::new(false);
/// The instant the gate opened at (0: no gate, or it never opened).
static OPENED_AT: AtomicU64 = AtomicU64::new(0);

/// The instant this process's gate opened at, if it waited for one.
pub fn opened_at() -> Option<u64> {
    match OPENED_AT.load(Ordering::Relaxed) {
        0 => None,
        at => Some(at),
    }
}

/// A forked child has not waited (it finds any instant passed anyway).
pub fn reset_in_child() {
    PASSED.store(false, Ordering::Relaxed);
    OPENED_AT.store(0, Ordering::Relaxed);
}

/// Waits at `<dir>/first-frame` once per process (later calls return at
/// once): not at all without a gate file, until its instant with one,
/// polling while it is pending, never longer than its bound (and
/// [`MAX_WAIT_NS`]).
pub fn pass(dir: &Path) {
    if PASSED.swap(true, Ordering::AcqRel) {
        return;
    }
    if let Some(at) = wait(&dir.join(FILE_NAME)) {
        OPENED_AT.store(at, Ordering::Relaxed);
    }
}

/// One wait at the gate in `path`; the instant it opened at, if it did.
fn wait(path: &Path) -> Option<u64> {
    let began = monotonic_ns();
    loop {
        let gate = read(path).map(|gate| FirstFrameGate {
            max_wait_ns: gate.max_wait_ns.min(MAX_WAIT_NS),
            ..gate
        });
        match step(gate.as_ref(), began, monotonic_ns()) {
            GateStep::Go => return gate.map(|g| g.at_ns).filter(|&at| at != 0),
            GateStep::SleepUntil(at) => {
                sleep_until(at);
                return gate.map(|g| g.at_ns).filter(|&gate_at| gate_at == at);
            }
            GateStep::Poll => sleep_until(monotonic_ns().saturating_add(POLL_NS)),
        }
    }
}

/// The gate in `path`, if there is a readable one written by root or by
/// this user (anyone else's file is no gate: it could only hold the
/// process back).
fn read(path: &Path) -> Option<FirstFrameGate> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    // SAFETY: no arguments, cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_file() || (meta.uid() != 0 && meta.uid() != euid) {
        return None;
    }
    let mut bytes = [0u8; SIZE];
    file.read_exact(&mut bytes).ok()?;
    FirstFrameGate::decode(&bytes).ok()
}

/// Sleeps until `at_ns` of CLOCK_MONOTONIC (signals do not cut it short).
fn sleep_until(at_ns: u64) {
    let deadline = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; an absolute sleep on the monotonic clock.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &deadline,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Publishes `gate` the way the agent does: a whole new file renamed
    /// over the old one.
    fn publish(dir: &Path, gate: FirstFrameGate) {
        let tmp = dir.join(".first-frame.tmp");
        std::fs::write(&tmp, gate.encode()).unwrap();
        std::fs::rename(&tmp, dir.join(FILE_NAME)).unwrap();
    }

    #[test]
    fn without_a_gate_file_the_wait_ends_at_once() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(wait(&dir.path().join(FILE_NAME)), None);
    }

    #[test]
    fn a_published_instant_is_not_left_before_it_comes() {
        let dir = tempfile::tempdir().unwrap();
        let at = monotonic_ns() + 30 * MS;
        publish(dir.path(), FirstFrameGate::at(at, 5_000 * MS));
        assert_eq!(wait(&dir.path().join(FILE_NAME)), Some(at));
        assert!(monotonic_ns() >= at);
    }

    #[test]
    fn a_past_instant_lets_a_late_process_start_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let at = monotonic_ns() - 1;
        publish(dir.path(), FirstFrameGate::at(at, 5_000 * MS));
        let before = monotonic_ns();
        assert_eq!(wait(&dir.path().join(FILE_NAME)), Some(at));
        // Not the 5 s bound: it did not sleep for the gate.
        assert!(monotonic_ns() - before < 5_000 * MS);
    }

    #[test]
    fn a_pending_gate_that_never_opens_gives_up_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        publish(dir.path(), FirstFrameGate::pending(20 * MS));
        let before = monotonic_ns();
        assert_eq!(wait(&dir.path().join(FILE_NAME)), None);
        assert!(monotonic_ns() - before >= 20 * MS);
    }

    #[test]
    fn a_pending_gate_opens_when_the_instant_is_published() {
        let dir = tempfile::tempdir().unwrap();
        publish(dir.path(), FirstFrameGate::pending(5_000 * MS));
        let at = monotonic_ns() + 40 * MS;
        let writer = {
            let dir = dir.path().to_path_buf();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                publish(&dir, FirstFrameGate::at(at, 5_000 * MS));
            })
        };
        assert_eq!(wait(&dir.path().join(FILE_NAME)), Some(at));
        assert!(monotonic_ns() >= at);
        writer.join().unwrap();
    }

    #[test]
    fn a_garbled_gate_file_is_no_gate() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"not a gate").unwrap();
        assert_eq!(wait(&dir.path().join(FILE_NAME)), None);
    }

    #[test]
    fn a_symlink_under_the_gate_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, FirstFrameGate::pending(5_000 * MS).encode()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(FILE_NAME)).unwrap();
        let before = monotonic_ns();
        assert_eq!(wait(&dir.path().join(FILE_NAME)), None);
        assert!(monotonic_ns() - before < 5_000 * MS);
    }
}
