//! Whether the kernel gives SCHED_DEADLINE to a task pinned like the node's
//! RT tasks: a thread of the agent's own (so in the agent's cpuset) pinned
//! to the node's CPUs asks for it with a tiny budget and goes back to
//! SCHED_OTHER. The kernel refuses it (EPERM) when the affinity is narrower
//! than the task's root domain: a pinned node needs an exclusive cpuset of
//! its own (`cargo xtask cluster up --exclusive-cpusets`).
use std::io;

use super::{
    linux::sched_setattr,
    sched_attr::{SchedAttr, SchedPolicy},
};

/// 0.1 ms every 100 ms: small enough for any root domain's bandwidth.
const PROBE_RUNTIME_NS: u64 = 100_000;
const PROBE_PERIOD_NS: u64 = 100_000_000;

/// Ok when a thread pinned to `cpus` was given SCHED_DEADLINE.
pub fn deadline_accepted(cpus: &[u32]) -> io::Result<()> {
    let cpus = cpus.to_vec();
    std::thread::Builder::new()
        .name("deadline-probe".into())
        .spawn(move || -> io::Result<()> {
            if !cpus.is_empty() {
                crate::daemon::pin_to(&cpus)?;
            }
            let attr = SchedAttr {
                policy: SchedPolicy::Deadline,
                runtime_ns: PROBE_RUNTIME_NS,
                deadline_ns: PROBE_PERIOD_NS,
                period_ns: PROBE_PERIOD_NS,
                ..SchedAttr::other(0)
            };
            sched_setattr(0, &attr)?;
            sched_setattr(0, &SchedAttr::other(0))
        })?
        .join()
        .map_err(|_| io::Error::other("the deadline probe thread panicked"))?
}
