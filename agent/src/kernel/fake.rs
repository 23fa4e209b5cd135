//! An in-memory [`Kernel`] for tests: tasks with attributes, a stopped flag
//! and start times; a managed-task map whose counters tests set directly; a
//! queue of eBPF events; and a log of every change the agent made.
use std::{
    collections::{BTreeMap, VecDeque},
    io,
    os::fd::RawFd,
    path::{Path, PathBuf},
};

use cosched_agent_common::{CpuSlot, Drops, Event, Settings, TaskStats, TimelineRecord};

use super::{
    FakeCounters, FrameCounters, Kernel, ProcessInfo, ProgramCost, SchedAttr, SchedPolicy,
    TaskControl, Uids, WaitDetectorState,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    SetAttr(u32, SchedAttr),
    Stop(u32),
    Cont(u32),
    Track(u32, u32),
    Untrack(u32),
    SetCpuCgroup(u32, PathBuf),
    SetOwnAttr(SchedAttr),
    SetAffinity(u32, Vec<u32>),
    SetSettings(Settings),
}

/// Root of the fake cgroup-v1 cpu hierarchy: where spawned tasks start.
pub const FAKE_CPU_ROOT: &str = "/fake/cpu";

#[derive(Clone, Debug)]
pub struct FakeTask {
    pub tgid: u32,
    pub start_time: u64,
    pub attr: SchedAttr,
    pub stopped: bool,
    /// Nice of the task's autogroup.
    pub group_nice: i32,
    /// The task's cgroup-v1 cpu cgroup.
    pub cpu_cgroup: PathBuf,
    /// CPUs it may run on (None: the kernel's `allowed_cpus`).
    pub cpus: Option<Vec<u32>>,
    /// Its parent process (0: none known).
    pub ppid: u32,
    /// Its cgroup-v2 directory, if it is in one of `cgroups2`.
    pub cgroup2: Option<PathBuf>,
}

#[derive(Default)]
pub struct FakeKernel {
    pub tasks: BTreeMap<u32, FakeTask>,
    pub tracked: BTreeMap<u32, TaskStats>,
    pub cpus: BTreeMap<u32, CpuSlot>,
    /// The eBPF side's per-job CPU counters (completed runs, ns); tests
    /// set them.
    pub job_cpu: BTreeMap<u32, u64>,
    pub events: VecDeque<Event>,
    /// Whether the eBPF side records a timeline.
    pub recording: bool,
    /// Timeline records queued for the agent (tests push them).
    pub timeline: VecDeque<TimelineRecord>,
    pub calls: Vec<Call>,
    /// What `now_ns` returns.
    pub now: u64,
    /// What `own_tid` returns.
    pub agent_tid: u32,
    /// Per-task watch flags set by the agent.
    pub watched: BTreeMap<u32, u32>,
    /// tids whose set_attr fails with EPERM (to test error paths).
    pub deny: Vec<u32>,
    /// Every cgroup move fails with ENOENT (the cgroup was removed).
    pub deny_cgroup: bool,
    /// tids whose tracking fails with ENOSPC (the eBPF map is full).
    pub deny_track: Vec<u32>,
    /// What `process_info` reports beyond the defaults, per pid.
    pub processes: BTreeMap<u32, ProcessInfo>,
    /// CPUs a process may run on unless `processes` says otherwise.
    pub allowed_cpus: Vec<u32>,
    /// The agent thread's own attributes.
    pub own_attr: SchedAttr,
    /// The eBPF settings last written.
    pub settings: Settings,
    /// What `autogroup_enabled` reports.
    pub autogroup: bool,
    /// Cgroup-v2 directories that exist.
    pub cgroups2: std::collections::BTreeSet<PathBuf>,
    /// Processes whose threads vanish when the agent lists them (they
    /// exited between the check and the take).
    pub vanish_on_threads: Vec<u32>,
    /// RT frame counter files and the directories the agent made.
    pub counters: FakeCounters,
    /// Effective uid per process (0 unless set).
    pub uids: BTreeMap<u32, u32>,
    /// `COSCHED_RT_DIR` per process, as started (unset unless set).
    pub rt_dir_env: BTreeMap<u32, PathBuf>,
    /// SCHED_DEADLINE is refused with EPERM (a task whose affinity is
    /// narrower than its root domain).
    pub deny_deadline: bool,
    /// First-frame gates published, by counter directory (the latest).
    pub first_frame_gates: BTreeMap<PathBuf, cosched_agent_common::first_frame::FirstFrameGate>,
    /// The CPU latency request of 0 µs is held (`hold_low_latency`).
    pub low_latency_held: bool,
    /// Times the request was taken or released (a change each).
    pub low_latency_changes: u32,
    /// Refuse the request (no `/dev/cpu_dma_latency`, not permitted).
    pub deny_low_latency: bool,
}

fn gone() -> io::Error {
    io::Error::from_raw_os_error(libc::ESRCH)
}

impl FakeKernel {
    /// Adds a process with one thread (tid == pid).
    pub fn spawn(&mut self, pid: u32, attr: SchedAttr) {
        self.spawn_thread(pid, pid, attr);
    }

    pub fn spawn_thread(&mut self, tid: u32, tgid: u32, attr: SchedAttr) {
        self.tasks.insert(
            tid,
            FakeTask {
                tgid,
                start_time: 1000 + tid as u64,
                attr,
                stopped: false,
                group_nice: 0,
                cpu_cgroup: PathBuf::from(FAKE_CPU_ROOT),
                cpus: None,
                ppid: 0,
                cgroup2: None,
            },
        );
    }

    /// Adds a process with one thread, child of `ppid`.
    pub fn spawn_child(&mut self, pid: u32, ppid: u32, attr: SchedAttr) {
        self.spawn(pid, attr);
        self.tasks.get_mut(&pid).expect("just added").ppid = ppid;
    }

    /// Moves every thread of process `pid` into cgroup `dir` (None: out of
    /// every tracked cgroup); the directory exists from then on.
    pub fn move_to_cgroup2(&mut self, pid: u32, dir: Option<&str>) {
        if let Some(d) = dir {
            self.cgroups2.insert(PathBuf::from(d));
        }
        for t in self.tasks.values_mut().filter(|t| t.tgid == pid) {
            t.cgroup2 = dir.map(PathBuf::from);
        }
    }

    /// The task exits: it disappears, and its tracked entry gets `exited_ns`.
    pub fn exit(&mut self, tid: u32, now: u64) {
        self.tasks.remove(&tid);
        if let Some(s) = self.tracked.get_mut(&tid) {
            s.exited_ns = now;
        }
    }

    /// SIGSTOP / SIGCONT as kill() sends them: to the whole thread group
    /// of `tid`.
    fn set_group_stopped(&mut self, tid: u32, stopped: bool) -> io::Result<()> {
        let tgid = self.tasks.get(&tid).ok_or_else(gone)?.tgid;
        for t in self.tasks.values_mut().filter(|t| t.tgid == tgid) {
            t.stopped = stopped;
        }
        Ok(())
    }

    pub fn attr(&self, tid: u32) -> SchedAttr {
        self.tasks[&tid].attr
    }

    pub fn cgroup(&self, tid: u32) -> &Path {
        &self.tasks[&tid].cpu_cgroup
    }

    /// CPUs a task may run on unless it was given its own.
    fn default_cpus(&self) -> Vec<u32> {
        if self.allowed_cpus.is_empty() {
            vec![0]
        } else {
            self.allowed_cpus.clone()
        }
    }

    pub fn stats_mut(&mut self, tid: u32) -> &mut TaskStats {
        self.tracked.get_mut(&tid).expect("task not tracked")
    }

    /// The eBPF side's view: managed task `tid` of `job_id` runs on `cpu`.
    pub fn run_on_cpu(&mut self, cpu: u32, tid: u32, job_id: u32) {
        self.cpus.insert(
            cpu,
            CpuSlot {
                tid,
                job_id,
                managed: 1,
                ..Default::default()
            },
        );
    }
}

impl TaskControl for FakeKernel {
    fn affinity(&self, tid: u32) -> io::Result<Vec<u32>> {
        let t = self.tasks.get(&tid).ok_or_else(gone)?;
        Ok(t.cpus.clone().unwrap_or_else(|| self.default_cpus()))
    }

    fn set_affinity(&mut self, tid: u32, cpus: &[u32]) -> io::Result<()> {
        self.tasks.get_mut(&tid).ok_or_else(gone)?.cpus = Some(cpus.to_vec());
        self.calls.push(Call::SetAffinity(tid, cpus.to_vec()));
        Ok(())
    }

    fn get_attr(&self, tid: u32) -> io::Result<SchedAttr> {
        self.tasks.get(&tid).map(|t| t.attr).ok_or_else(gone)
    }

    fn set_attr(&mut self, tid: u32, attr: &SchedAttr) -> io::Result<()> {
        if self.deny.contains(&tid) || (self.deny_deadline && attr.policy == SchedPolicy::Deadline)
        {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        let t = self.tasks.get_mut(&tid).ok_or_else(gone)?;
        t.attr = *attr;
        self.calls.push(Call::SetAttr(tid, *attr));
        Ok(())
    }

    fn stop(&mut self, tid: u32) -> io::Result<()> {
        self.set_group_stopped(tid, true)?;
        self.calls.push(Call::Stop(tid));
        Ok(())
    }

    fn cont(&mut self, tid: u32) -> io::Result<()> {
        self.set_group_stopped(tid, false)?;
        self.calls.push(Call::Cont(tid));
        Ok(())
    }

    fn start_time(&self, tid: u32) -> io::Result<u64> {
        self.tasks.get(&tid).map(|t| t.start_time).ok_or_else(gone)
    }

    fn group_nice(&self, tid: u32) -> io::Result<Option<i32>> {
        self.tasks
            .get(&tid)
            .map(|t| Some(t.group_nice))
            .ok_or_else(gone)
    }

    fn set_group_nice(&mut self, tid: u32, nice: i32) -> io::Result<()> {
        self.tasks.get_mut(&tid).ok_or_else(gone)?.group_nice = nice;
        Ok(())
    }

    fn cpu_cgroup(&self, tid: u32) -> io::Result<Option<PathBuf>> {
        self.tasks
            .get(&tid)
            .map(|t| Some(t.cpu_cgroup.clone()))
            .ok_or_else(gone)
    }

    fn set_cpu_cgroup(&mut self, tid: u32, dir: &Path) -> io::Result<()> {
        if self.deny_cgroup && self.tasks.contains_key(&tid) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        self.tasks.get_mut(&tid).ok_or_else(gone)?.cpu_cgroup = dir.to_path_buf();
        self.calls.push(Call::SetCpuCgroup(tid, dir.to_path_buf()));
        Ok(())
    }
}

impl FrameCounters for FakeKernel {
    type Files = FakeCounters;

    fn counter_files(&self) -> &FakeCounters {
        &self.counters
    }

    fn process_uid(&self, pid: u32) -> io::Result<u32> {
        if !self.tasks.contains_key(&pid) {
            return Err(gone());
        }
        Ok(self.uids.get(&pid).copied().unwrap_or(0))
    }

    fn process_rt_dir(&self, pid: u32) -> io::Result<Option<PathBuf>> {
        if !self.tasks.contains_key(&pid) {
            return Err(gone());
        }
        Ok(self.rt_dir_env.get(&pid).cloned())
    }

    fn create_counter_dir(&mut self, dir: &Path) -> io::Result<()> {
        self.counters.create_dir(dir);
        Ok(())
    }

    fn remove_counter_dir(&mut self, dir: &Path) -> io::Result<()> {
        self.counters.remove_dir(dir);
        Ok(())
    }

    fn write_first_frame_gate(
        &mut self,
        dir: &Path,
        gate: &cosched_agent_common::first_frame::FirstFrameGate,
    ) -> io::Result<()> {
        self.first_frame_gates.insert(dir.to_path_buf(), *gate);
        Ok(())
    }
}

impl Kernel for FakeKernel {
    fn now_ns(&self) -> u64 {
        self.now
    }

    fn own_tid(&self) -> u32 {
        self.agent_tid
    }

    fn set_own_attr(&mut self, attr: &SchedAttr) -> io::Result<()> {
        self.own_attr = *attr;
        self.calls.push(Call::SetOwnAttr(*attr));
        Ok(())
    }

    fn hold_low_latency(&mut self, hold: bool) -> io::Result<()> {
        if hold && self.deny_low_latency {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        if self.low_latency_held != hold {
            self.low_latency_held = hold;
            self.low_latency_changes += 1;
        }
        Ok(())
    }

    fn autogroup_enabled(&self) -> bool {
        self.autogroup
    }

    fn process_info(&self, pid: u32) -> io::Result<ProcessInfo> {
        if let Some(info) = self.processes.get(&pid) {
            return Ok(info.clone());
        }
        if !self.tasks.contains_key(&pid) {
            return Err(gone());
        }
        Ok(ProcessInfo {
            pid,
            state: if self.tasks[&pid].stopped { 'T' } else { 'S' },
            kernel_thread: false,
            exe: Some(PathBuf::from("/usr/bin/app")),
            allowed_cpus: self.affinity(pid)?,
            uids: Uids::of(self.uids.get(&pid).copied().unwrap_or(0)),
        })
    }

    fn threads(&self, pid: u32) -> io::Result<Vec<u32>> {
        if !self.tasks.contains_key(&pid) || self.vanish_on_threads.contains(&pid) {
            return Err(gone());
        }
        Ok(self
            .tasks
            .iter()
            .filter(|(_, t)| t.tgid == pid)
            .map(|(&tid, _)| tid)
            .collect())
    }

    fn tgid(&self, tid: u32) -> io::Result<u32> {
        self.tasks.get(&tid).map(|t| t.tgid).ok_or_else(gone)
    }

    fn track(&mut self, tid: u32, tgid: u32, job_id: u32) -> io::Result<()> {
        if self.deny_track.contains(&tid) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.tracked.entry(tid).or_insert(TaskStats {
            job_id,
            tgid,
            ..TaskStats::default()
        });
        self.calls.push(Call::Track(tid, job_id));
        Ok(())
    }

    fn watch(&mut self, tid: u32, flags: u32) -> io::Result<()> {
        if flags == 0 {
            self.watched.remove(&tid);
        } else {
            self.watched.insert(tid, flags);
        }
        Ok(())
    }

    fn untrack(&mut self, tid: u32) -> io::Result<()> {
        self.watched.remove(&tid);
        self.tracked.remove(&tid);
        self.calls.push(Call::Untrack(tid));
        Ok(())
    }

    fn task_stat(&self, tid: u32) -> io::Result<Option<TaskStats>> {
        Ok(self.tracked.get(&tid).copied())
    }

    fn job_cpu_ns(&self, job: u32) -> io::Result<Option<u64>> {
        Ok(self.job_cpu.get(&job).copied())
    }

    fn forget_job_cpu(&mut self, job: u32) -> io::Result<()> {
        self.job_cpu.remove(&job);
        Ok(())
    }

    fn task_stats(&self) -> io::Result<Vec<(u32, TaskStats)>> {
        Ok(self.tracked.iter().map(|(&k, &v)| (k, v)).collect())
    }

    fn cpu_slots(&self, cpus: &[u32]) -> io::Result<Vec<(u32, CpuSlot)>> {
        Ok(cpus
            .iter()
            .map(|c| (*c, self.cpus.get(c).copied().unwrap_or_default()))
            .collect())
    }

    fn drain_events(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
        out.extend(self.events.drain(..));
        Ok(())
    }

    fn event_fd(&self) -> Option<RawFd> {
        None
    }

    fn set_recording(&mut self, on: bool) -> io::Result<()> {
        self.recording = on;
        Ok(())
    }

    fn drain_timeline(&mut self, out: &mut Vec<TimelineRecord>) -> io::Result<()> {
        out.extend(self.timeline.drain(..));
        Ok(())
    }

    fn set_settings(&mut self, settings: Settings) -> io::Result<()> {
        self.settings = settings;
        self.calls.push(Call::SetSettings(settings));
        Ok(())
    }

    fn forget_sockets_of(&mut self, _tids: &[u32]) -> io::Result<usize> {
        Ok(0)
    }

    fn drops(&self) -> io::Result<Drops> {
        Ok(Drops::default())
    }

    fn program_costs(&self) -> io::Result<Vec<ProgramCost>> {
        Ok(Vec::new())
    }

    fn wait_detectors(&self) -> Vec<WaitDetectorState> {
        vec![WaitDetectorState {
            name: "recv",
            kind: cosched_agent_common::WaitKind::Recv,
            problem: None,
        }]
    }

    fn cpu_cgroup_tasks(&self, dir: &Path) -> io::Result<Vec<u32>> {
        Ok(self
            .tasks
            .iter()
            .filter(|(_, t)| t.cpu_cgroup == dir)
            .map(|(&tid, _)| tid)
            .collect())
    }

    fn cpu_cgroup_root(&self) -> io::Result<Option<PathBuf>> {
        Ok(Some(PathBuf::from(FAKE_CPU_ROOT)))
    }

    fn process_parents(&self) -> io::Result<Vec<(u32, u32)>> {
        Ok(self
            .tasks
            .iter()
            .filter(|&(&tid, t)| tid == t.tgid)
            .map(|(&pid, t)| (pid, t.ppid))
            .collect())
    }

    fn cgroup2_dir(&self, path: &str) -> io::Result<PathBuf> {
        let dir = PathBuf::from(path);
        if self.cgroups2.contains(&dir) {
            Ok(dir)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no such cgroup: {path}"),
            ))
        }
    }

    fn cgroup2_threads(&self, dir: &Path) -> io::Result<Vec<u32>> {
        if !self.cgroups2.contains(dir) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        Ok(self
            .tasks
            .iter()
            .filter(|(_, t)| t.cgroup2.as_deref().is_some_and(|c| c.starts_with(dir)))
            .map(|(&tid, _)| tid)
            .collect())
    }
}
