//! Real-time jobs: their class, the counter directory of the ones the agent
//! launches, and counting every RT process's frames (docs/rt-frames.md).
//!
//! Each process of an RT job (a thread group; launcher daemons excepted) is
//! accounted on its own, in windows Γ = b·d aligned to the job's start on
//! this node. At each RT tick the agent reads the process's counter file
//! (opened once, checked, copied with `pread`), credits the frames it
//! reported and the CPU time its threads used since (the eBPF on-CPU
//! counters: current, and also while it reports nothing), and closes the
//! windows that ended. A process that never reports misses every frame.
use std::path::PathBuf;

use cosched_agent_common::{TaskStats, first_frame::FirstFrameGate, rt_frames::DEFAULT_DIR};
use cosched_policy::classes::{FrameState, FrameTotals, RtSpec, WorkMoments};
use cosched_proto::{
    control::{RtJobInfo, RtProcessInfo},
    job::JobId,
    wire::JobClass,
};

use super::{Engine, EngineError};
use crate::{
    classes::{RtJob, RtProcess},
    kernel::Kernel,
    registry::Job,
    rt_frames::{FrameReader, RtFramesError},
};

/// What the agent counted for one RT job, for the coordinator's
/// `FrameReport`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtFrameReport {
    pub job: JobId,
    /// Closed windows, summed over the job's processes here.
    pub totals: FrameTotals,
    /// Frames reported (also in windows not closed yet).
    pub frames: u64,
    /// 95th percentile of recent per-frame CPU time, ns.
    pub work_p95_ns: Option<u64>,
    /// Mean and deviation of the same samples.
    pub work_moments: Option<WorkMoments>,
    /// Every RT process of the job here is satisfied in its current
    /// window (n ≥ b); false without a process.
    pub satisfied: bool,
    /// Every RT process of the job here has published its frame counter
    /// (called `cosched_rt_init()` or reported a frame): past its start-up,
    /// ready for its first frame; false without a process.
    pub ready: bool,
}

/// Every RT process of `rt` has published its counter (the agent read it at
/// least once); false without a process.
pub(super) fn counters_published(rt: &RtJob) -> bool {
    let pids = rt.pids();
    !pids.is_empty()
        && pids.iter().all(|&pid| {
            rt.process(pid)
                .is_some_and(|process| process.tracker.last().is_some())
        })
}

/// On-CPU time of a task from its counters, its current run included.
fn on_cpu_ns(s: &TaskStats, now_ns: u64) -> u64 {
    let running = if s.run_start_ns != 0 && s.exited_ns == 0 {
        now_ns.saturating_sub(s.run_start_ns)
    } else {
        0
    };
    s.oncpu_ns.saturating_add(running)
}

impl<K: Kernel> Engine<K> {
    /// Gives job `id` its class. A real-time spec is checked (what no
    /// schedule can meet is refused here, not counted as misses later);
    /// the job's windows start now. With `own_dir` (a job the agent
    /// launches) the agent makes its counter directory and returns it: the
    /// launched processes get it as `COSCHED_RT_DIR`. Processes the job has
    /// already become RT processes.
    pub fn set_job_class(
        &mut self,
        id: JobId,
        class: &JobClass,
        own_dir: bool,
    ) -> Result<Option<PathBuf>, EngineError> {
        let JobClass::RealTime {
            period_ns,
            frames,
            work_ns,
        } = *class
        else {
            return Ok(None);
        };
        let spec = RtSpec::new(period_ns, frames, work_ns)
            .map_err(|e| EngineError::BadClass(format!("{class}: {e}")))?;
        if self.reg.job(id).is_none() {
            return Err(crate::registry::RegistryError::UnknownJob(id).into());
        }
        let dir = if own_dir {
            let dir = self.counter_root().join(id.to_string());
            self.k.create_counter_dir(&dir).map_err(|e| {
                EngineError::BadClass(format!(
                    "making the counter directory {}: {e}",
                    dir.display()
                ))
            })?;
            Some(dir)
        } else {
            None
        };
        let now = self.k.now_ns();
        let rt = RtJob::new(spec, now, self.cfg.classes.budget(), dir.clone());
        let mut pids: std::collections::BTreeSet<u32> = self
            .reg
            .tasks_of(id)
            .iter()
            .filter_map(|&t| self.reg.task(t).map(|s| s.tgid))
            .collect();
        if let Some(j) = self.reg.job_mut(id) {
            j.rt = Some(rt);
            pids.extend(j.pids.iter().copied());
        }
        for pid in pids {
            self.rt_process_added(id, pid);
        }
        self.update_own_priority();
        Ok(dir)
    }

    /// Publishes a pending first-frame gate in RT job `id`'s counter
    /// directory (a job the agent launched, before its processes start):
    /// their `cosched_rt_init()` waits for the instant
    /// ([`Self::open_first_frame`]) at most `max_wait_ns`.
    pub fn gate_first_frame(&mut self, id: JobId, max_wait_ns: u64) -> Result<(), EngineError> {
        let dir = self
            .reg
            .job(id)
            .and_then(|j| j.rt.as_ref())
            .and_then(|rt| rt.own_dir.clone())
            .ok_or_else(|| {
                EngineError::BadClass(format!("job {id} has no RT counter directory"))
            })?;
        self.k
            .write_first_frame_gate(&dir, &FirstFrameGate::pending(max_wait_ns))?;
        if let Some(rt) = self.reg.job_mut(id).and_then(|j| j.rt.as_mut()) {
            rt.gate_wait_ns = Some(max_wait_ns);
        }
        Ok(())
    }

    /// RT job `id`'s first frame starts at `at_ns` (this machine's
    /// CLOCK_MONOTONIC): the instant goes into its gate. `Ok(false)` when
    /// the job has no gate here (not gated at launch, or gone).
    pub fn open_first_frame(&mut self, id: JobId, at_ns: u64) -> Result<bool, EngineError> {
        let Some((dir, wait)) = self
            .reg
            .job(id)
            .and_then(|j| j.rt.as_ref())
            .and_then(|rt| Some((rt.own_dir.clone()?, rt.gate_wait_ns?)))
        else {
            return Ok(false);
        };
        self.k
            .write_first_frame_gate(&dir, &FirstFrameGate::at(at_ns, wait))?;
        Ok(true)
    }

    /// Where the counter directories of launched RT jobs go.
    fn counter_root(&self) -> PathBuf {
        self.cfg
            .classes
            .counter_dir
            .clone()
            .unwrap_or_else(|| self.cfg.state_dir.join("rt"))
    }

    /// Process `pid` of `job` is managed now: if the job is real-time it is
    /// accounted as an RT process (launcher daemons are not).
    pub(super) fn rt_process_added(&mut self, job: JobId, pid: u32) {
        if self.daemons.contains(&pid) {
            return;
        }
        let Some(rt) = self.reg.job(job).and_then(|j| j.rt.as_ref()) else {
            return;
        };
        if rt.has_process(pid) {
            return;
        }
        let own = rt.own_dir.clone();
        let dir = match own {
            Some(dir) => dir,
            None => match self.k.process_rt_dir(pid) {
                Ok(dir) => dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DIR)),
                Err(_) => return,
            },
        };
        let Ok(uid) = self.k.process_uid(pid) else {
            return;
        };
        let now = self.k.now_ns();
        if let Some(rt) = self.reg.job_mut(job).and_then(|j| j.rt.as_mut()) {
            rt.add_process(pid, RtProcess::new(dir, uid, now));
        }
        // Decided at once (its frames are due): every process of a tree or
        // cgroup taken at once is decided by the one tick right after.
        self.last_rt_tick = 0;
        self.update_own_priority();
    }

    /// Whether `pid` is an RT process the agent accounts.
    pub(super) fn is_rt_process(&self, job: JobId, pid: u32) -> bool {
        self.reg
            .job(job)
            .and_then(|j| j.rt.as_ref())
            .is_some_and(|rt| rt.has_process(pid))
    }

    /// Task `tid` is being forgotten: the on-CPU time its last counters
    /// show goes to its process's window; if it was the process's last
    /// thread, the counter is read one last time (the file outlives the
    /// process) and the process leaves the accounting.
    pub(super) fn rt_task_gone(&mut self, tid: u32, last: Option<&TaskStats>, now_ns: u64) {
        let Some(state) = self.reg.task(tid).copied() else {
            return;
        };
        if !self.is_rt_process(state.job, state.tgid) {
            return;
        }
        let cpu = last.map_or(0, |s| on_cpu_ns(s, now_ns).saturating_sub(state.rt_cpu_ns));
        let frames = self.read_counter(state.job, state.tgid);
        if let Some(rt) = self.reg.job_mut(state.job).and_then(|j| j.rt.as_mut()) {
            rt.credit(state.tgid, now_ns, frames, cpu);
        }
        let others = self
            .reg
            .tasks_of(state.job)
            .into_iter()
            .any(|t| t != tid && self.reg.task(t).is_some_and(|s| s.tgid == state.tgid));
        if others {
            return;
        }
        self.rt_readers.remove(&state.tgid);
        if let Some(rt) = self.reg.job_mut(state.job).and_then(|j| j.rt.as_mut()) {
            rt.remove_process(state.tgid);
        }
    }

    /// A job stopped running here (ended, handed back, dropped): its counter
    /// directory goes, with the counters in it.
    pub(super) fn rt_job_ended(&mut self, job: JobId) {
        let Some(dir) = self
            .reg
            .job_mut(job)
            .and_then(|j| j.rt.as_mut())
            .and_then(|rt| rt.own_dir.take())
        else {
            return;
        };
        if let Err(e) = self.k.remove_counter_dir(&dir) {
            tracing::warn!(job, dir = %dir.display(), "removing the RT counter directory: {e}");
        }
    }

    /// Whether any RT process is accounted (the RT tick runs only then).
    pub(super) fn has_rt_processes(&self) -> bool {
        self.reg
            .jobs()
            .filter_map(|j| j.rt.as_ref())
            .any(|rt| !rt.pids().is_empty())
    }

    /// Reads every RT process's counter and credits its frames and the
    /// CPU time of its threads (`live`: the tick's counters), then closes
    /// the windows that ended.
    pub(super) fn read_frames(&mut self, now_ns: u64, live: &[(u32, TaskStats)]) {
        let processes: Vec<(JobId, u32)> = self
            .reg
            .jobs()
            .filter_map(|j| Some((j.id, j.rt.as_ref()?)))
            .flat_map(|(id, rt)| rt.pids().into_iter().map(move |pid| (id, pid)))
            .collect();
        let mut cpu: std::collections::BTreeMap<u32, u64> = Default::default();
        for (tid, s) in live {
            let Some(state) = self.reg.task(*tid).copied() else {
                continue;
            };
            if !processes.contains(&(state.job, state.tgid)) {
                continue;
            }
            let total = on_cpu_ns(s, now_ns);
            *cpu.entry(state.tgid).or_default() += total.saturating_sub(state.rt_cpu_ns);
            if let Some(t) = self.reg.task_mut(*tid) {
                t.rt_cpu_ns = total.max(t.rt_cpu_ns);
            }
        }
        for (job, pid) in processes {
            let frames = self.read_counter(job, pid);
            let used = cpu.get(&pid).copied().unwrap_or(0);
            let Some(rt) = self.reg.job_mut(job).and_then(|j| j.rt.as_mut()) else {
                continue;
            };
            if rt.credit(pid, now_ns, frames, used) {
                // A whole window without a frame: the counter may be an
                // earlier incarnation's (the process exec'd and made a new
                // file); open it again at the next reading.
                self.rt_readers.remove(&pid);
            }
        }
        for j in self.reg.jobs_mut() {
            if let Some(rt) = j.rt.as_mut() {
                rt.tick(now_ns);
            }
        }
    }

    /// Frames process `pid` reported since its last reading (0 when its
    /// counter cannot be read: not created yet, or refused by a check,
    /// which is logged once per reason).
    fn read_counter(&mut self, job: JobId, pid: u32) -> u64 {
        let Some(process) = self
            .reg
            .job(job)
            .and_then(|j| j.rt.as_ref())
            .and_then(|rt| rt.process(pid))
        else {
            return 0;
        };
        if !self.rt_readers.contains_key(&pid) {
            match FrameReader::open(self.k.counter_files(), &process.dir, process.expected(pid)) {
                Ok(reader) => {
                    self.rt_readers.insert(pid, reader);
                }
                Err(RtFramesError::Open(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    return 0;
                }
                Err(e) => {
                    self.note_counter_error(job, pid, Some(e.to_string()));
                    return 0;
                }
            }
        }
        let Some(reader) = self.rt_readers.get(&pid) else {
            return 0;
        };
        match reader.read() {
            Ok(reading) => {
                self.note_counter_error(job, pid, None);
                self.reg
                    .job_mut(job)
                    .and_then(|j| j.rt.as_mut())
                    .map_or(0, |rt| rt.observe(pid, reading))
            }
            // Being created, or written faster than it is copied: next time.
            Err(RtFramesError::Unpublished | RtFramesError::Unsettled) => 0,
            Err(e) => {
                self.rt_readers.remove(&pid);
                self.note_counter_error(job, pid, Some(e.to_string()));
                0
            }
        }
    }

    fn note_counter_error(&mut self, job: JobId, pid: u32, error: Option<String>) {
        let Some(process) = self
            .reg
            .job_mut(job)
            .and_then(|j| j.rt.as_mut())
            .and_then(|rt| rt.process_mut(pid))
        else {
            return;
        };
        if process.error == error {
            return;
        }
        if let Some(why) = &error {
            tracing::warn!(job, pid, dir = %process.dir.display(), "frame counter not read: {why}");
        }
        process.error = error;
    }

    /// What the agent counted for each RT job it knows (running or
    /// finished and kept), for the coordinator's `FrameReport`.
    pub fn rt_frame_reports(&self) -> Vec<RtFrameReport> {
        self.reg
            .jobs()
            .filter_map(|j| {
                let rt = j.rt.as_ref()?;
                let pids = rt.pids();
                let satisfied = !pids.is_empty()
                    && pids
                        .iter()
                        .all(|&pid| matches!(rt.state(pid), Some(FrameState::Satisfied { .. })));
                let ready = counters_published(rt);
                Some(RtFrameReport {
                    ready,
                    job: j.id,
                    totals: rt.totals(),
                    frames: rt.reported(),
                    work_p95_ns: rt.work_p95_ns(),
                    work_moments: rt.work_moments(),
                    satisfied,
                })
            })
            .collect()
    }

    /// The RT jobs whose every process here has published its frame
    /// counter (`RtFrameReport::ready`), cheaply, for every tick.
    pub fn rt_ready_jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.reg
            .jobs()
            .filter(|j| j.rt.as_ref().is_some_and(counters_published))
            .map(|j| j.id)
    }

    /// The job info's RT part: totals, and each process's state now.
    pub(super) fn rt_info(&self, job: &Job) -> Option<RtJobInfo> {
        let rt = job.rt.as_ref()?;
        let totals = rt.totals();
        let processes = rt
            .pids()
            .into_iter()
            .map(|pid| RtProcessInfo {
                pid,
                state: match rt.state(pid) {
                    Some(FrameState::Due { .. }) => "due",
                    Some(FrameState::Satisfied { .. }) => "satisfied",
                    Some(FrameState::Throttled { .. }) => "throttled",
                    None => "none",
                }
                .into(),
                frames_in_window: rt.frames_in_window(pid),
                sched: self.rt_sched_of(job.id, pid).into(),
                counter_error: rt.process(pid).and_then(|p| p.error.clone()),
            })
            .collect();
        Some(RtJobInfo {
            frames: rt.reported(),
            windows: totals.windows,
            expected: totals.expected,
            met: totals.met,
            missed: totals.missed,
            miss_rate: totals.miss_rate_ppm() as f64 / 1e6,
            overruns: totals.overruns,
            frame_work_p95_ns: rt.work_p95_ns(),
            processes,
        })
    }

    /// How RT process `pid` is realised while its class runs: `fifo`,
    /// `deadline` (every thread at SCHED_DEADLINE), or `none` (no class
    /// mode, or not decided yet).
    fn rt_sched_of(&self, job: JobId, pid: u32) -> &'static str {
        if self.classes.rt_level(pid).is_none() {
            return "none";
        }
        let refused = self.reg.tasks_of(job).into_iter().any(|t| {
            self.reg
                .task(t)
                .is_some_and(|s| s.tgid == pid && s.deadline_refused)
        });
        let probe_refused = matches!(self.edf_probe, Some(Err(_)));
        match self.cfg.classes.edf {
            crate::classes::EdfKind::Deadline if !refused && !probe_refused => "deadline",
            _ => "fifo",
        }
    }
}
