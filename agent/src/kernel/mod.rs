//! The one seam between the agent and the kernel.
//!
//! Everything the agent does to the system — scheduling attributes, signals,
//! task identity, the eBPF managed-task map and counters — goes through the
//! [`Kernel`] trait. [`linux::Linux`] is the real thing; [`fake::FakeKernel`]
//! records calls and holds state in memory so the policy engine, the restore
//! logic and the registry can be tested without root.
pub mod counters;
pub mod deadline_probe;
pub mod fake;
pub mod fake_counters;
pub mod linux;
pub mod membership;
pub mod sched_attr;

use std::{
    io,
    os::fd::RawFd,
    path::{Path, PathBuf},
};

use cosched_agent_common::{CpuSlot, Drops, Event, Settings, TaskStats, TimelineRecord};

pub use counters::{CounterFileOf, FrameCounters};
pub use fake_counters::FakeCounters;
pub use sched_attr::{SchedAttr, SchedPolicy};

/// Identity of a task that survives pid reuse: tid plus its start time (clock
/// ticks since boot, field 22 of /proc/<tid>/stat).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct TaskId {
    pub tid: u32,
    pub start_time: u64,
}

/// Per-program eBPF cost counters read from the kernel's BPF stats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCost {
    pub name: String,
    pub run_count: u64,
    pub run_time_ns: u64,
}

/// A waiting detector of the eBPF side and whether it runs on this kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitDetectorState {
    /// `recv` (EAGAIN receives) or the system call's name.
    pub name: &'static str,
    pub kind: cosched_agent_common::WaitKind,
    /// Why it is not attached (None: attached).
    pub problem: Option<String>,
}

/// What undoing needs: task attributes, signals and identity. The guardian
/// (which restores after a crash) has only this part, no eBPF.
pub trait TaskControl {
    fn get_attr(&self, tid: u32) -> io::Result<SchedAttr>;
    fn set_attr(&mut self, tid: u32, attr: &SchedAttr) -> io::Result<()>;
    /// SIGSTOP to the task's thread group (a stopped gang member).
    fn stop(&mut self, tid: u32) -> io::Result<()>;
    /// SIGCONT to the task's thread group.
    fn cont(&mut self, tid: u32) -> io::Result<()>;
    /// Start time of the task, to tell it apart from a later task with the same tid.
    fn start_time(&self, tid: u32) -> io::Result<u64>;
    /// Nice of the task's autogroup (with autogroup scheduling every session
    /// is one CFS group, so a task's own policy only orders it inside its
    /// group). None when autogroup scheduling is off.
    fn group_nice(&self, tid: u32) -> io::Result<Option<i32>>;
    fn set_group_nice(&mut self, tid: u32, nice: i32) -> io::Result<()>;
    /// Directory of the task's cgroup-v1 cpu cgroup (from `/proc/<tid>/cgroup`).
    /// None when no cgroup-v1 hierarchy has the cpu controller.
    fn cpu_cgroup(&self, tid: u32) -> io::Result<Option<PathBuf>>;
    /// Moves one thread into a cgroup-v1 cpu cgroup (its `tasks` file: the
    /// agent's levels are per thread).
    fn set_cpu_cgroup(&mut self, tid: u32, dir: &Path) -> io::Result<()>;
    /// CPUs a thread may run on.
    fn affinity(&self, tid: u32) -> io::Result<Vec<u32>>;
    /// Narrows (or widens back) the CPUs a thread may run on.
    fn set_affinity(&mut self, tid: u32, cpus: &[u32]) -> io::Result<()>;
}

/// What the agent checks about a process before it adopts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    /// State letter of /proc/<pid>/stat (`Z`: zombie, `X`: dead).
    pub state: char,
    /// A kernel thread (PF_KTHREAD): no user process to schedule.
    pub kernel_thread: bool,
    /// The program it runs (None for kernel threads, or when unreadable).
    pub exe: Option<PathBuf>,
    /// CPUs it may run on.
    pub allowed_cpus: Vec<u32>,
    /// Its user ids (`Uid:` of /proc/<pid>/status).
    pub uids: Uids,
}

/// A process's real, effective and saved user ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uids {
    pub real: u32,
    pub effective: u32,
    pub saved: u32,
}

impl Uids {
    /// All three the same user's.
    pub fn of(uid: u32) -> Self {
        Self {
            real: uid,
            effective: uid,
            saved: uid,
        }
    }

    /// The `Uid:` line of /proc/<pid>/status (real, effective, saved, fs).
    pub fn parse_status(status: &str) -> Option<Self> {
        let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
        let mut ids = line.split_whitespace().map(str::parse::<u32>);
        Some(Self {
            real: ids.next()?.ok()?,
            effective: ids.next()?.ok()?,
            saved: ids.next()?.ok()?,
        })
    }
}

pub trait Kernel: TaskControl + FrameCounters {
    /// CLOCK_MONOTONIC in ns (the clock of the eBPF timestamps).
    fn now_ns(&self) -> u64;
    /// The thread the agent's engine runs on (it shows up as the CPU holder
    /// whenever the agent looks).
    fn own_tid(&self) -> u32;
    /// Sets the scheduling attributes of the calling thread (the agent's
    /// event loop).
    fn set_own_attr(&mut self, attr: &SchedAttr) -> io::Result<()>;
    /// Holds (true) or releases (false) a CPU latency request of 0 µs for
    /// the whole machine (PM QoS, `/dev/cpu_dma_latency`): idle CPUs poll
    /// instead of halting. The kernel drops the request when its file is
    /// closed, so the agent's exit or crash releases it too.
    fn hold_low_latency(&mut self, hold: bool) -> io::Result<()>;
    /// Whether autogroup scheduling is on (a demoted task's session is then
    /// its own CFS group).
    fn autogroup_enabled(&self) -> bool;
    /// What adoption checks about a process.
    fn process_info(&self, pid: u32) -> io::Result<ProcessInfo>;

    // --- task identity -----------------------------------------------------
    /// Threads of a process.
    fn threads(&self, pid: u32) -> io::Result<Vec<u32>>;
    /// Thread-group id (process id) of a task.
    fn tgid(&self, tid: u32) -> io::Result<u32>;

    // --- eBPF maps ---------------------------------------------------------
    /// Start tracking a task (insert into the managed-task map).
    fn track(&mut self, tid: u32, tgid: u32, job_id: u32) -> io::Result<()>;
    /// Ask the eBPF side for extra per-task events (`watch_flags`; 0 = none).
    fn watch(&mut self, tid: u32, flags: u32) -> io::Result<()>;
    /// Stop tracking a task (remove it from the managed-task map).
    fn untrack(&mut self, tid: u32) -> io::Result<()>;
    /// Periodic upkeep of the kernel side, from the agent's poll (the real
    /// kernel: detaching idle waiting detectors off the event loop).
    fn housekeeping(&mut self) {}
    /// Current counters of one tracked task (None if not tracked).
    fn task_stat(&self, tid: u32) -> io::Result<Option<TaskStats>>;
    /// Current counters of every tracked task.
    fn task_stats(&self) -> io::Result<Vec<(u32, TaskStats)>>;
    /// On-CPU ns of the completed runs of a job's tasks, all CPUs, from
    /// the eBPF side's per-job counter (None: it has none for the job).
    fn job_cpu_ns(&self, job: u32) -> io::Result<Option<u64>>;
    /// Drops a job's per-job counter (the job id starts afresh).
    fn forget_job_cpu(&mut self, job: u32) -> io::Result<()>;
    /// Who runs on each CPU.
    fn cpu_slots(&self, cpus: &[u32]) -> io::Result<Vec<(u32, CpuSlot)>>;
    /// Take the events queued by the eBPF programs (non-blocking).
    fn drain_events(&mut self, out: &mut Vec<Event>) -> io::Result<()>;
    /// The fd that becomes readable when the eBPF programs ask for the agent
    /// (None: nothing to wait on, as in tests that drive the engine).
    fn event_fd(&self) -> Option<RawFd>;
    /// Turns timeline recording on the eBPF side on or off (off: the
    /// programs write no timeline record).
    fn set_recording(&mut self, on: bool) -> io::Result<()>;
    /// Take the timeline records queued since the last call (non-blocking).
    fn drain_timeline(&mut self, out: &mut Vec<TimelineRecord>) -> io::Result<()>;
    /// The node-wide eBPF settings (which arrivals wake the agent).
    fn set_settings(&mut self, settings: Settings) -> io::Result<()>;
    /// Forget sockets owned by tasks that are gone.
    fn forget_sockets_of(&mut self, tids: &[u32]) -> io::Result<usize>;
    /// Records the eBPF side dropped, summed over CPUs.
    fn drops(&self) -> io::Result<Drops>;
    /// Run count and time of each eBPF program.
    fn program_costs(&self) -> io::Result<Vec<ProgramCost>>;
    /// The waiting detectors and which of them run on this kernel.
    fn wait_detectors(&self) -> Vec<WaitDetectorState>;

    // --- cgroups -----------------------------------------------------------
    /// Threads in a cgroup-v1 cgroup (its `tasks` file).
    fn cpu_cgroup_tasks(&self, dir: &Path) -> io::Result<Vec<u32>>;
    /// Root directory of the cgroup-v1 hierarchy with the cpu controller
    /// (where a task with no other cgroup lives).
    fn cpu_cgroup_root(&self) -> io::Result<Option<PathBuf>>;

    // --- jobs launched by something else -------------------------------------
    /// Every process with its parent, `(pid, ppid)` (for pid trees).
    fn process_parents(&self) -> io::Result<Vec<(u32, u32)>>;
    /// The cgroup-v2 directory `path` names (see
    /// [`membership::resolve_cgroup2`]); NotFound when there is none.
    fn cgroup2_dir(&self, path: &str) -> io::Result<PathBuf>;
    /// Threads in a cgroup-v2 directory and the cgroups below it; NotFound
    /// once it is removed.
    fn cgroup2_threads(&self, dir: &Path) -> io::Result<Vec<u32>>;
}

/// `ESRCH`: the task is gone. Callers treat it as "nothing to do", never as a failure.
pub fn is_gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESRCH) || e.kind() == io::ErrorKind::NotFound
}
