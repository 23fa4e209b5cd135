//! The real kernel: sched_setattr/sched_getattr, signals, /proc, and the eBPF maps.
use std::{
    fs, io,
    os::fd::RawFd,
    path::{Path, PathBuf},
};

use cosched_agent_common::{CpuSlot, Drops, Event, Settings, TaskStats, TimelineRecord};

use super::{
    FrameCounters, Kernel, ProcessInfo, ProgramCost, TaskControl, WaitDetectorState, counters,
    sched_attr::{RawSchedAttr, SchedAttr},
};
use crate::ebpf::Probes;
use crate::rt_frames::LinuxCounterFiles;

pub struct Linux {
    probes: Probes,
    /// `/dev/cpu_dma_latency` open with 0 written while the agent holds
    /// low latency (closing it drops the request).
    cpu_latency: Option<fs::File>,
}

impl Linux {
    pub fn new(probes: Probes) -> Self {
        Self {
            probes,
            cpu_latency: None,
        }
    }
}

/// The kernel's CPU latency (PM QoS) request file.
const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// Opens the request file and asks for 0 µs (a 32-bit binary value, as the
/// kernel reads a 4-byte write).
fn open_zero_latency_request() -> io::Result<fs::File> {
    use std::io::Write as _;
    let mut file = fs::OpenOptions::new().write(true).open(CPU_DMA_LATENCY)?;
    file.write_all(&0i32.to_ne_bytes())?;
    Ok(file)
}

/// PF_KTHREAD in the flags field of /proc/<pid>/stat.
const PF_KTHREAD: u64 = 0x0020_0000;

/// State letter and flags from the text of /proc/<pid>/stat (fields 3 and
/// 9; the command name in field 2 may hold spaces and parentheses).
pub fn parse_state_and_flags(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let flags = fields.nth(5)?.parse().ok()?;
    Some((state, flags))
}

/// CPUs a task may run on.
pub fn allowed_cpus(pid: u32) -> io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set of the size passed.
    let rc = unsafe {
        libc::sched_getaffinity(
            pid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: index below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
}

pub fn proc_process_info(pid: u32) -> io::Result<ProcessInfo> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (state, flags) = parse_state_and_flags(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc stat"))?;
    Ok(ProcessInfo {
        pid,
        state,
        kernel_thread: flags & PF_KTHREAD != 0,
        exe: fs::read_link(format!("/proc/{pid}/exe")).ok(),
        allowed_cpus: allowed_cpus(pid)?,
        uids: proc_uids(pid)?,
    })
}

/// The user ids of a process, from /proc/<pid>/status.
pub fn proc_uids(pid: u32) -> io::Result<super::Uids> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    super::Uids::parse_status(&status)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Uid line in /proc status"))
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
    fn affinity(&self, tid: u32) -> io::Result<Vec<u32>> {
        allowed_cpus(tid)
    }

    fn set_affinity(&mut self, tid: u32, cpus: &[u32]) -> io::Result<()> {
        // SAFETY: cpu_set_t is plain data.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c as usize >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            // SAFETY: index checked above.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        // SAFETY: valid set of the size passed.
        let rc = unsafe {
            libc::sched_setaffinity(
                tid as libc::pid_t,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

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
    fn affinity(&self, tid: u32) -> io::Result<Vec<u32>> {
        Procfs.affinity(tid)
    }

    fn set_affinity(&mut self, tid: u32, cpus: &[u32]) -> io::Result<()> {
        Procfs.set_affinity(tid, cpus)
    }

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

impl FrameCounters for Linux {
    type Files = LinuxCounterFiles;

    fn counter_files(&self) -> &LinuxCounterFiles {
        &counters::LINUX_FILES
    }

    fn process_uid(&self, pid: u32) -> io::Result<u32> {
        counters::process_uid(pid)
    }

    fn process_rt_dir(&self, pid: u32) -> io::Result<Option<PathBuf>> {
        counters::process_rt_dir(pid)
    }

    fn create_counter_dir(&mut self, dir: &Path) -> io::Result<()> {
        counters::create_counter_dir(dir)
    }

    fn remove_counter_dir(&mut self, dir: &Path) -> io::Result<()> {
        counters::remove_counter_dir(dir)
    }

    fn write_first_frame_gate(
        &mut self,
        dir: &Path,
        gate: &cosched_agent_common::first_frame::FirstFrameGate,
    ) -> io::Result<()> {
        counters::write_first_frame_gate(dir, gate)
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

    fn set_own_attr(&mut self, attr: &SchedAttr) -> io::Result<()> {
        // tid 0 = the calling thread.
        sched_setattr(0, attr)
    }

    fn hold_low_latency(&mut self, hold: bool) -> io::Result<()> {
        match (hold, self.cpu_latency.is_some()) {
            (true, false) => self.cpu_latency = Some(open_zero_latency_request()?),
            // Dropping the file closes it: the kernel removes the request.
            (false, true) => self.cpu_latency = None,
            _ => {}
        }
        Ok(())
    }

    fn autogroup_enabled(&self) -> bool {
        fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
            .is_ok_and(|text| text.trim() == "1")
    }

    fn process_info(&self, pid: u32) -> io::Result<ProcessInfo> {
        proc_process_info(pid)
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

    fn housekeeping(&mut self) {
        self.probes.housekeeping();
    }

    fn task_stat(&self, tid: u32) -> io::Result<Option<TaskStats>> {
        self.probes.task_stat(tid)
    }

    fn job_cpu_ns(&self, job: u32) -> io::Result<Option<u64>> {
        self.probes.job_cpu_ns(job)
    }

    fn forget_job_cpu(&mut self, job: u32) -> io::Result<()> {
        self.probes.forget_job_cpu(job)
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

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.probes.events_fd())
    }

    fn set_recording(&mut self, on: bool) -> io::Result<()> {
        self.probes.set_recording(on)
    }

    fn drain_timeline(&mut self, out: &mut Vec<TimelineRecord>) -> io::Result<()> {
        self.probes.drain_timeline(out);
        Ok(())
    }

    fn set_settings(&mut self, settings: Settings) -> io::Result<()> {
        self.probes.set_settings(settings)
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

    fn wait_detectors(&self) -> Vec<WaitDetectorState> {
        self.probes.wait_detectors().to_vec()
    }

    fn cpu_cgroup_tasks(&self, dir: &Path) -> io::Result<Vec<u32>> {
        crate::cpu_group::tasks_of(dir)
    }

    fn cpu_cgroup_root(&self) -> io::Result<Option<PathBuf>> {
        crate::cpu_group::cpu_hierarchy_root()
    }

    fn process_parents(&self) -> io::Result<Vec<(u32, u32)>> {
        super::membership::process_parents()
    }

    fn cgroup2_dir(&self, path: &str) -> io::Result<PathBuf> {
        super::membership::resolve_cgroup2(path)
    }

    fn cgroup2_threads(&self, dir: &Path) -> io::Result<Vec<u32>> {
        super::membership::cgroup2_threads(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_and_kernel_thread_flag_are_parsed_past_an_odd_comm() {
        let stat = "2 (kthre) d) S 0 0 0 0 -1 2129984 0 0 0 0 0 0";
        assert_eq!(parse_state_and_flags(stat), Some(('S', 2129984)));
        assert_ne!(2129984 & PF_KTHREAD, 0);
        assert_eq!(parse_state_and_flags("9 (x) Z"), None, "truncated");
    }

    #[test]
    fn affinity_of_another_process_is_narrowed_and_widened_back() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let all = Procfs.affinity(pid).unwrap();
        Procfs.set_affinity(pid, &all[..1]).unwrap();
        assert_eq!(Procfs.affinity(pid).unwrap(), all[..1].to_vec());
        Procfs.set_affinity(pid, &all).unwrap();
        assert_eq!(Procfs.affinity(pid).unwrap(), all);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn own_process_is_a_user_process_with_cpus() {
        let me = std::process::id();
        let info = proc_process_info(me).unwrap();
        assert!(!info.kernel_thread);
        assert!(info.exe.is_some());
        assert!(!info.allowed_cpus.is_empty());
    }

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
