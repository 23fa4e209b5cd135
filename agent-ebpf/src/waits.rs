//! Waiting detectors on system calls: how real message-passing libraries
//! wait. OpenMPI's TCP transport calls `poll(fds, n, 0)` in a loop, OpenMPI 5
//! and UCX call `epoll_wait(…, 0)`, MPICH calls `sched_yield()` in every wait
//! iteration; none of them makes a receive that returns EAGAIN.
//!
//! A poll-family call is an **empty wait** when it returns 0 ready
//! descriptors and the task did not block inside it. "Did not block" is read
//! from the task's own voluntary switch-out count, taken at entry and
//! compared at exit, instead of from the call's timeout argument: the timeout
//! is in a different user-memory shape per call (an int of ms, a timespec, a
//! timeval) and would need a user-memory read per call, while the switch count
//! answers the question that matters — did the task keep its CPU while it
//! waited — and covers a zero timeout and a short one that expired without a
//! sleep alike. A call that slept and timed out already ended the episode at
//! its switch-out (blocking is not spinning). A call that found a ready
//! descriptor changes nothing here: the read that follows it ends the episode.
//!
//! Every `sched_yield` is a wait iteration: a library yields only while it
//! has nothing to do.
//!
//! Every program starts with the `TASKS` lookup and returns at once for
//! unmanaged tasks: these tracepoints fire for every process on the machine.
use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::tracepoint, programs::TracePointContext};
use cosched_agent_common::layout;

use crate::probes::{current_tid, empty_wait, field, task};

/// Entry of a poll-family call: note the voluntary switch count.
#[inline(always)]
fn on_poll_enter() -> u32 {
    if let Some(t) = task(current_tid()) {
        t.wait_enter_voluntary = t.switches_out_voluntary + 1;
    }
    0
}

/// Exit of a poll-family call: 0 ready descriptors with no voluntary
/// switch-out since the entry is an empty wait.
#[inline(always)]
fn on_poll_exit(ctx: &TracePointContext) -> u32 {
    let tid = current_tid();
    let Some(t) = task(tid) else {
        return 0;
    };
    let entered = t.wait_enter_voluntary;
    t.wait_enter_voluntary = 0;
    let ret: i64 = field(ctx, layout::SYS_EXIT_RET);
    // `entered == 0`: the task became managed inside the call.
    if ret != 0 || entered == 0 || entered != t.switches_out_voluntary + 1 {
        return 0;
    }
    t.empty_polls += 1;
    let now = unsafe { bpf_ktime_get_ns() };
    t.last_found_empty_ns = now;
    empty_wait(t, tid, now, 0);
    0
}

#[tracepoint(category = "syscalls", name = "sys_enter_poll")]
pub fn poll_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_poll")]
pub fn poll_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_ppoll")]
pub fn ppoll_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_ppoll")]
pub fn ppoll_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_select")]
pub fn select_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_select")]
pub fn select_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_pselect6")]
pub fn pselect6_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_pselect6")]
pub fn pselect6_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_epoll_wait")]
pub fn epoll_wait_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_epoll_wait")]
pub fn epoll_wait_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_epoll_pwait")]
pub fn epoll_pwait_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_epoll_pwait")]
pub fn epoll_pwait_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_epoll_pwait2")]
pub fn epoll_pwait2_enter(_ctx: TracePointContext) -> u32 {
    on_poll_enter()
}

#[tracepoint(category = "syscalls", name = "sys_exit_epoll_pwait2")]
pub fn epoll_pwait2_exit(ctx: TracePointContext) -> u32 {
    on_poll_exit(&ctx)
}

#[tracepoint(category = "syscalls", name = "sys_enter_sched_yield")]
pub fn sched_yield_enter(_ctx: TracePointContext) -> u32 {
    let tid = current_tid();
    let Some(t) = task(tid) else {
        return 0;
    };
    t.yields += 1;
    empty_wait(t, tid, unsafe { bpf_ktime_get_ns() }, 0);
    0
}
