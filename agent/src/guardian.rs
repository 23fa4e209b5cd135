//! The guardian: a tiny process the agent starts next to itself that restores
//! every task from the journal as soon as the agent dies, however it dies
//! (SIGKILL, OOM kill, panic, abort), so that no managed task stays boosted,
//! demoted or stopped after the agent is gone.
//!
//! It holds the read end of a pipe whose write end only the agent has; the
//! kernel closes that end when the agent dies, the guardian's read returns 0,
//! and it replays the journal. After a clean shutdown the journal is already
//! empty and the guardian just exits.
use std::{
    fs,
    io::Read as _,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
    path::Path,
};

use anyhow::Context as _;

use crate::{kernel::linux::Procfs, restore::RestoreLedger};

/// The fd the guardian watches.
const WATCH_FD: i32 = 3;

/// A running guardian: keep it for the agent's whole life (dropping it tells
/// the guardian the agent is gone).
pub struct Guardian {
    _pipe: OwnedFd,
    pid: u32,
}

impl Guardian {
    /// Its process id (never adopted into a job).
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }
}

/// Starts the guardian for `journal`.
pub fn spawn(journal: &Path) -> anyhow::Result<Guardian> {
    let mut fds = [0; 2];
    // SAFETY: valid array; O_CLOEXEC so job processes never inherit the write end.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("guardian pipe");
    }
    // SAFETY: fresh fds owned by nobody else.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let rd_raw = rd.as_raw_fd();
    let exe = fs::read_link("/proc/self/exe").context("finding the agent executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__guardian")
        .arg(journal)
        .stdin(std::process::Stdio::null());
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Its own session: a signal to the agent's process group (Ctrl-C)
            // must not take the guardian down with it.
            libc::setsid();
            if libc::dup2(rd_raw, WATCH_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting the guardian")?;
    drop(rd);
    tracing::debug!(pid = child.id(), "guardian started");
    Ok(Guardian {
        _pipe: wr,
        pid: child.id(),
    })
}

/// Guardian main: wait for the agent to go away, then restore.
pub fn run(journal: &Path) -> anyhow::Result<()> {
    // SAFETY: fd 3 was set up by the agent for this process alone.
    let mut f = unsafe { fs::File::from_raw_fd(WATCH_FD) };
    let mut buf = [0u8; 16];
    // Nothing is ever written; read returns 0 when the agent's end closes.
    while f.read(&mut buf).unwrap_or(0) > 0 {}
    let mut ledger = RestoreLedger::load(journal)?;
    if ledger.is_empty() {
        return Ok(());
    }
    let r = ledger.restore_all(&mut Procfs);
    eprintln!(
        "cosched guardian: agent died; restored {} task(s), {} gone, {} failed {:?}",
        r.restored,
        r.gone,
        r.failed.len(),
        r.failed
    );
    Ok(())
}
