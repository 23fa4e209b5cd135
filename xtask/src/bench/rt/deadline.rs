//! The `deadline` column's kernel side: every thread of an RT rank gets
//! SCHED_DEADLINE (runtime τ + slack, deadline = period = d) through
//! `sched_setattr`, or SCHED_FIFO.
//!
//! SCHED_DEADLINE is refused (EPERM) to a task whose affinity is narrower
//! than its root domain, and a node of the one-machine cluster is one CPU.
//! Giving each node CPU a root domain of its own takes an exclusive cpuset
//! with load balancing off at the top, which would stop load balancing for
//! every process on this shared machine while the bench runs. So a
//! deadline rank's affinity is widened to every online CPU first: the
//! kernel runs the deadline ranks by global EDF over the machine, with its
//! admission test over the whole root domain (Σ runtime/period ≤ 95 % of
//! each CPU), while BE ranks stay on their node's CPU.
use std::{fs, io};

const SCHED_FIFO: u32 = 1;
const SCHED_DEADLINE: u32 = 6;

#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// SCHED_DEADLINE runtime for a declared work per frame: the work plus
/// `slack_percent` (the agent's `budget_slack_percent` default, 20).
pub fn runtime_ns(work_ns: u64, slack_percent: u64, period_ns: u64) -> u64 {
    (work_ns + work_ns * slack_percent / 100).min(period_ns)
}

/// Why the kernel refused SCHED_DEADLINE.
#[derive(Debug)]
pub enum Refused {
    /// EBUSY: the admission test (not enough deadline bandwidth left).
    Admission,
    /// Any other error (EPERM: affinity; the rank's threads ended...).
    Other(io::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Admission => {
                write!(f, "the kernel's deadline admission test refused it (EBUSY)")
            }
            Refused::Other(e) => write!(f, "{e}"),
        }
    }
}

fn threads(pid: u32) -> io::Result<Vec<u32>> {
    Ok(fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

fn set_attr(tid: u32, attr: &SchedAttr) -> io::Result<()> {
    // SAFETY: sched_setattr reads `size` bytes of a properly laid out struct.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::pid_t,
            attr as *const SchedAttr,
            0u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn widen_affinity(tid: u32) -> io::Result<()> {
    // SAFETY: sysconf has no preconditions; the set is zeroed and filled
    // with CPU numbers below CPU_SETSIZE.
    unsafe {
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..cpus.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Every thread of `pid` at SCHED_DEADLINE, its affinity widened to every
/// online CPU (see the module doc).
pub fn set_deadline(pid: u32, runtime_ns: u64, period_ns: u64) -> Result<(), Refused> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: SCHED_DEADLINE,
        runtime: runtime_ns,
        deadline: period_ns,
        period: period_ns,
        ..SchedAttr::default()
    };
    for tid in threads(pid).map_err(Refused::Other)? {
        widen_affinity(tid).map_err(Refused::Other)?;
        match set_attr(tid, &attr) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Err(Refused::Admission),
            Err(e) => return Err(Refused::Other(e)),
        }
    }
    Ok(())
}

/// Every thread of `pid` at SCHED_FIFO `priority` (the fallback of a
/// refused deadline rank without admission control).
pub fn set_fifo(pid: u32, priority: u32) -> io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: SCHED_FIFO,
        priority,
        ..SchedAttr::default()
    };
    for tid in threads(pid)? {
        set_attr(tid, &attr)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_is_work_plus_slack_capped_at_the_period() {
        assert_eq!(runtime_ns(2_000_000, 20, 10_000_000), 2_400_000);
        assert_eq!(runtime_ns(9_000_000, 20, 10_000_000), 10_000_000);
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48, "SCHED_ATTR_SIZE_VER0");
    }
}
