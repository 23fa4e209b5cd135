//! The real kernel: sched_setattr/sched_getattr, signals, /proc, and the eBPF maps.
use std::{
    fs, io,
    path::{Path, PathBuf},
};

use cosched_agent_common::{CpuSlot, Drops, Event, TaskStats};

use super::{
    Kernel, ProgramCost, TaskControl,
    sched_attr::{RawSchedAttr, SchedAttr},
};
use crate::ebpf::Probes;

pub struct Linux {
    probes: Probes,
}

impl Linux {
    pub fn new(probes: Probes) -> Self {
        Self { probes }
    }

    pub fn probes(&self) -> &Probes {
        &self.probes
    }

    pub fn probes_mut(&mut self) -> &mut Probes {
        &mut self.probes
    }
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn sched_getattr(tid: u32) -> io::Result<SchedAttr> {
    let mut raw = RawSchedAttr::default();
    // SAFETY: raw is a valid, writable sched_attr of the size we pass.
    check(unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::pid_t,
            &mut raw as *mut RawSchedAttr,
            std::mem::size_of::<RawSchedAttr>() as u32,
            0u32,
        )
    })?;
    SchedAttr::try_from(&raw)
}

pub fn sched_setattr(tid: u32, attr: &SchedAttr) -> io::Result<()> {
    let raw = RawSchedAttr::from(attr);
    // SAFETY: raw is a valid sched_attr whose size field is set.
    check(unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::pid_t,
            &raw as *const RawSchedAttr,
            0u32,
        )
    })
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain syscall.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Field 22 of /proc/<tid>/stat (start time in clock ticks since boot). The
/// comm field may contain spaces and parentheses, so parse after the last ')'.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' the fields start at field 3 (state); start time is field 22.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

pub fn proc_start_time(tid: u32) -> io::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat"))?;
    parse_start_time(&stat).ok_or_else(|| io::Error::other(format!("malformed /proc/{tid}/stat")))
}

pub fn proc_threads(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

pub fn proc_tgid(tid: u32) -> io::Result<u32> {
    let status = fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:")?.trim().parse().ok())
        .ok_or_else(|| io::Error::other(format!("no Tgid in /proc/{tid}/status")))
}

/// Task control without eBPF: what the guardian uses to restore after a crash.
pub struct Procfs;

impl TaskControl for Procfs {
    fn get_attr(&self, tid: u32) -> io::Result<SchedAttr> {
        sched_getattr(tid)
    }

    fn set_attr(&mut self, tid: u32, attr: &SchedAttr) -> io::Result<()> {
        sched_setattr(tid, attr)
    }

    fn stop(&mut self, tid: u32) -> io::Result<()> {
        signal(tid, libc::SIGSTOP)
    }

    fn cont(&mut self, tid: u32) -> io::Result<()> {
        signal(tid, libc::SIGCONT)
    }

    fn start_time(&self, tid: u32) -> io::Result<u64> {
        proc_start_time(tid)
    }

    fn group_nice(&self, tid: u32) -> io::Result<Option<i32>> {
        match fs::read_to_string(format!("/proc/{tid}/autogroup")) {
            Ok(text) => Ok(parse_autogroup_nice(&text)),
            // No autogroup file: the kernel has no autogroup scheduling.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && fs::metadata(format!("/proc/{tid}")).is_ok() =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn set_group_nice(&mut self, tid: u32, nice: i32) -> io::Result<()> {
        fs::write(format!("/proc/{tid}/autogroup"), nice.to_string())
    }

    fn cpu_cgroup(&self, tid: u32) -> io::Result<Option<PathBuf>> {
        crate::cpu_group::task_cpu_cgroup(tid)
    }

    fn set_cpu_cgroup(&mut self, tid: u32, dir: &Path) -> io::Result<()> {
        crate::cpu_group::move_task(tid, dir)
    }
}

/// `/autogroup-123 nice 0` -> Some(0).
pub fn parse_autogroup_nice(text: &str) -> Option<i32> {
    text.split_whitespace()
        .skip_while(|w| *w != "nice")
        .nth(1)?
        .parse()
        .ok()
}

impl TaskControl for Linux {
    fn get_attr(&self, tid: u32) -> io::Result<SchedAttr> {
        Procfs.get_attr(tid)
    }

    fn set_attr(&mut self, tid: u32, attr: &SchedAttr) -> io::Result<()> {
        Procfs.set_attr(tid, attr)
    }

    fn stop(&mut self, tid: u32) -> io::Result<()> {
        Procfs.stop(tid)
    }

    fn cont(&mut self, tid: u32) -> io::Result<()> {
        Procfs.cont(tid)
    }

    fn start_time(&self, tid: u32) -> io::Result<u64> {
        Procfs.start_time(tid)
    }

    fn group_nice(&self, tid: u32) -> io::Result<Option<i32>> {
        Procfs.group_nice(tid)
    }

    fn set_group_nice(&mut self, tid: u32, nice: i32) -> io::Result<()> {
        Procfs.set_group_nice(tid, nice)
    }

    fn cpu_cgroup(&self, tid: u32) -> io::Result<Option<PathBuf>> {
        Procfs.cpu_cgroup(tid)
    }

    fn set_cpu_cgroup(&mut self, tid: u32, dir: &Path) -> io::Result<()> {
        Procfs.set_cpu_cgroup(tid, dir)
    }
}

impl Kernel for Linux {
    fn now_ns(&self) -> u64 {
        crate::daemon::monotonic_ns()
    }

    fn own_tid(&self) -> u32 {
        // Asked on every policy decision: one syscall per thread, not per call.
        thread_local! {
            // SAFETY: plain syscall.
            static TID: u32 = unsafe { libc::gettid() as u32 };
        }
        TID.with(|t| *t)
    }

    fn threads(&self, pid: u32) -> io::Result<Vec<u32>> {
        proc_threads(pid)
    }

    fn tgid(&self, tid: u32) -> io::Result<u32> {
        proc_tgid(tid)
    }

    fn track(&mut self, tid: u32, tgid: u32, job_id: u32) -> io::Result<()> {
        self.probes.track(tid, tgid, job_id)
    }

    fn watch(&mut self, tid: u32, flags: u32) -> io::Result<()> {
        self.probes.watch(tid, flags)
    }

    fn untrack(&mut self, tid: u32) -> io::Result<()> {
        self.probes.untrack(tid)
    }

    fn task_stat(&self, tid: u32) -> io::Result<Option<TaskStats>> {
        self.probes.task_stat(tid)
    }

    fn task_stats(&self) -> io::Result<Vec<(u32, TaskStats)>> {
        self.probes.task_stats()
    }

    fn cpu_slots(&self, cpus: &[u32]) -> io::Result<Vec<(u32, CpuSlot)>> {
        self.probes.cpu_slots(cpus)
    }

    fn drain_events(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
        self.probes.drain_events(out);
        Ok(())
    }

    fn forget_sockets_of(&mut self, tids: &[u32]) -> io::Result<usize> {
        self.probes.forget_sockets_of(tids)
    }

    fn drops(&self) -> io::Result<Drops> {
        self.probes.drops()
    }

    fn program_costs(&self) -> io::Result<Vec<ProgramCost>> {
        self.probes.program_costs()
    }

    fn cpu_cgroup_tasks(&self, dir: &Path) -> io::Result<Vec<u32>> {
        crate::cpu_group::tasks_of(dir)
    }

    fn cpu_cgroup_root(&self) -> io::Result<Option<PathBuf>> {
        crate::cpu_group::cpu_hierarchy_root()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_even_with_odd_comm() {
        let stat = "1234 (we ird) name)) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 200";
        assert_eq!(parse_start_time(stat), Some(987654));
    }

    #[test]
    fn autogroup_nice_is_parsed() {
        assert_eq!(parse_autogroup_nice("/autogroup-1171 nice 19\n"), Some(19));
        assert_eq!(parse_autogroup_nice("/autogroup-5 nice -3"), Some(-3));
        assert_eq!(parse_autogroup_nice("garbage"), None);
    }

    #[test]
    fn start_time_of_truncated_stat_is_none() {
        assert_eq!(parse_start_time("1 (x) S 1 2"), None);
    }

    #[test]
    fn own_process_has_threads_and_start_time() {
        let me = std::process::id();
        assert!(proc_threads(me).unwrap().contains(&me));
        assert!(proc_start_time(me).unwrap() > 0);
        assert_eq!(proc_tgid(me).unwrap(), me);
    }
}
