//! The guardian: a tiny process the agent starts next to itself that restores
//! every task from the journal as soon as the agent dies, however it dies
//! (SIGKILL, OOM kill, panic, abort), so that no managed task stays boosted,
//! demoted or stopped after the agent is gone.
//!
//! It learns of the death from the agent's event-loop thread itself: that
//! thread holds the agent's [lifeline](crate::lifeline), which the kernel
//! releases at the start of the thread's exit, before the slow part of the
//! exit (detaching the eBPF programs) and whether or not other threads of the
//! agent still live. If the lifeline cannot be made, the guardian falls back
//! to the read end of a pipe whose write end only the agent has: the kernel
//! closes it once the agent's files are released, later in its exit.
//!
//! The guardian runs at SCHED_FIFO [`PRIORITY`], above every boost the agent
//! gives and every static real-time request below it, so a job the agent left
//! boosted cannot keep it from running. It sleeps until the agent dies, so
//! the priority costs nothing before.
//!
//! After a clean shutdown the journal is already empty and the guardian just
//! exits.
use std::{
    io::{self, Read as _},
    os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd},
    path::Path,
};

use anyhow::Context as _;

use crate::{
    kernel::{
        SchedAttr, SchedPolicy,
        linux::{Procfs, sched_setattr},
        sched_attr::FLAG_RESET_ON_FORK,
    },
    lifeline::{self, Lifeline},
    restore::RestoreLedger,
};

/// The fd of the pipe the guardian watches without a lifeline.
const PIPE_FD: RawFd = 3;
/// The fd of the lifeline's shared page.
const LIFELINE_FD: RawFd = 4;
/// SCHED_FIFO priority of the guardian: the highest, so that whatever the
/// agent left behind, even a job's own real-time request, cannot starve it.
pub const PRIORITY: u32 = 99;

/// What the agent keeps for its whole life so that its guardian knows it
/// lives (dropping it would tell the guardian the agent is gone).
#[derive(Debug)]
pub struct Watched {
    _lifeline: Option<Lifeline>,
    _pipe: Option<OwnedFd>,
    pid: u32,
}

impl Watched {
    /// The guardian's process id (never adopted into a job).
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }
}

/// Starts the guardian for `journal`. Must be called on the thread whose
/// exit means the agent is dead (the event loop's).
pub fn spawn(journal: &Path) -> anyhow::Result<Watched> {
    let lifeline = Lifeline::hold()
        .inspect_err(|e| {
            tracing::warn!("no lifeline ({e}): the guardian learns of the agent's death later")
        })
        .ok();
    let (pipe_rd, pipe_wr) = match &lifeline {
        Some(_) => (None, None),
        None => {
            let (rd, wr) = pipe()?;
            (Some(rd), Some(wr))
        }
    };
    let lifeline_raw = lifeline.as_ref().map(|l| l.fd().as_raw_fd());
    let pipe_raw = pipe_rd.as_ref().map(|rd| rd.as_raw_fd());
    let exe = std::fs::read_link("/proc/self/exe").context("finding the agent executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__guardian")
        .arg(journal)
        .stdin(std::process::Stdio::null());
    if lifeline.is_some() {
        cmd.arg("--lifeline");
    }
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Its own session: a signal to the agent's process group (Ctrl-C)
            // must not take the guardian down with it.
            libc::setsid();
            for (from, to) in [(lifeline_raw, LIFELINE_FD), (pipe_raw, PIPE_FD)] {
                if let Some(from) = from
                    && libc::dup2(from, to) < 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting the guardian")?;
    drop(pipe_rd);
    let mut attr = SchedAttr::with_policy(SchedPolicy::Fifo, 0, PRIORITY);
    attr.flags = FLAG_RESET_ON_FORK;
    if let Err(e) = sched_setattr(child.id(), &attr) {
        tracing::warn!("the guardian runs without real-time priority: {e}");
    }
    tracing::debug!(
        pid = child.id(),
        watches = if lifeline.is_some() {
            "lifeline"
        } else {
            "pipe"
        },
        "guardian started"
    );
    Ok(Watched {
        _lifeline: lifeline,
        _pipe: pipe_wr,
        pid: child.id(),
    })
}

fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: valid array; O_CLOEXEC so job processes never inherit the write end.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error()).context("guardian pipe");
    }
    // SAFETY: fresh fds owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Guardian main: wait for the agent to go away, then restore. `lifeline`:
/// the agent handed over its lifeline (else its pipe).
pub fn run(journal: &Path, lifeline: bool) -> anyhow::Result<()> {
    let how = if lifeline {
        // SAFETY: the agent set up this fd for this process alone.
        let memfd = unsafe { BorrowedFd::borrow_raw(LIFELINE_FD) };
        lifeline::wait_for_holder_exit(memfd).context("waiting on the agent's lifeline")?;
        "its event-loop thread exited"
    } else {
        // SAFETY: the agent set up this fd for this process alone.
        let mut pipe = unsafe { std::fs::File::from_raw_fd(PIPE_FD) };
        let mut buf = [0u8; 16];
        // Nothing is ever written; read returns 0 when the agent's end closes.
        while pipe.read(&mut buf).unwrap_or(0) > 0 {}
        "its files were closed"
    };
    let mut ledger = RestoreLedger::load(journal)?;
    if ledger.is_empty() {
        return Ok(());
    }
    let r = ledger.restore_all(&mut Procfs);
    eprintln!(
        "cosched guardian: agent died ({how}); restored {} task(s), {} gone, {} failed {:?}",
        r.restored,
        r.gone,
        r.failed.len(),
        r.failed
    );
    Ok(())
}
