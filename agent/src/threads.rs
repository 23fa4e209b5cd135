//! The priority of the agent's threads other than its event loop.
//!
//! The event loop runs on the main thread, at SCHED_FIFO `agent_priority`
//! while a policy acts or gang slices are enforced. Any other thread of the
//! agent (the coordinator's switch timer, tokio's blocking pool) runs at that
//! priority all the time: a SCHED_OTHER thread on a CPU that a boosted job
//! holds runs only when real-time throttling lets it, and a SIGKILLed agent
//! is not gone until each of its threads has run its exit. These threads sleep almost always, so the priority costs nothing.
//! The config watcher has no thread of its own (inotify on the event loop).
use crate::kernel::{SchedAttr, SchedPolicy, linux::sched_setattr, sched_attr::FLAG_RESET_ON_FORK};

/// Runs the calling (helper) thread at SCHED_FIFO `priority` (0: leaves it
/// as it is).
pub fn run_helper_at(priority: u32) {
    if priority == 0 {
        return;
    }
    let mut attr = SchedAttr::with_policy(SchedPolicy::Fifo, 0, priority);
    attr.flags = FLAG_RESET_ON_FORK;
    // tid 0 = the calling thread.
    if let Err(e) = sched_setattr(0, &attr) {
        tracing::warn!("an agent thread stays without real-time priority: {e}");
    }
}
