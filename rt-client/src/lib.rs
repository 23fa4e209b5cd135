//! `cosched-rt`: how a real-time process tells cosched that it finished a
//! frame (docs/rt-frames.md).
//!
//! A process of an RT job (period d, b frames per window, work τ per frame)
//! calls [`frame_done`] (C: `cosched_rt_frame_done()`) each time it
//! completes a frame. The library keeps the process's
//! [`FrameCounter`](cosched_agent_common::rt_frames::FrameCounter) in a
//! shared file, `$COSCHED_RT_DIR/<tgid>.frames` (default
//! `/run/cosched/rt`), which the agent reads to count frames per window and
//! deadline misses. A frame costs an atomic add, an atomic max, a load and
//! one vDSO clock read; no system call after the first frame, except a CPU
//! time sample at most once per millisecond.
//!
//! Any thread may report; the count is per process. Nothing here panics or
//! aborts the application: if the file cannot be made (no directory, not
//! writable, another user's file in the way) the frames are counted in
//! memory only and the reason is returned once.

mod clock;
mod ffi;
mod file;
mod gate;
mod process;

use std::io;
use std::path::PathBuf;

pub use ffi::{
    cosched_rt_first_frame_ns, cosched_rt_frame_done, cosched_rt_frames, cosched_rt_init,
};

/// Reports one finished frame of this process.
///
/// `Err` only from the call that first tried to create the counter file and
/// could not (the frame still counts, in memory); every other call is `Ok`.
#[inline]
pub fn frame_done() -> io::Result<()> {
    let (counter, failure) = process::current();
    counter.record_frame(clock::monotonic_ns(), clock::process_cpu_ns);
    failure.map_or(Ok(()), Err)
}

/// Creates the counter file now rather than at the first frame (so the
/// agent sees the process before its first frame, and the first frame's
/// CPU time is measured from here), then, the first time, waits at the
/// job's first-frame gate if the agent published one (`first-frame` next
/// to the counters, docs/rt-frames.md): until the instant the schedule
/// chose for the first frame, at most the gate's bound. Returns whether
/// frames reach the file: the same error on every call if they cannot.
pub fn init() -> io::Result<()> {
    let _ = process::current();
    gate::pass(&process::dir());
    process::status()
}

/// The instant (CLOCK_MONOTONIC ns) the first-frame gate opened at, if
/// [`init`] waited at one; `None` without a gate or when the wait gave up.
pub fn first_frame_gate_ns() -> Option<u64> {
    gate::opened_at()
}

/// Frames this process reported so far (the file's count, or the in-memory
/// one); 0 before the first frame or [`init`].
pub fn frames() -> u64 {
    process::frames()
}

/// The counter file frames go to, if there is one (after [`init`] or the
/// first frame).
pub fn counter_path() -> Option<PathBuf> {
    process::path()
}
