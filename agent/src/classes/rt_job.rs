//! The frame accounting of one RT job on this node (pure): each process's
//! windows and budget ([`JobFrames`]), the progress of its counter file, the
//! frames reported and the CPU time per frame they measured.
use std::{
    collections::{BTreeMap, VecDeque},
    path::PathBuf,
};

use cosched_policy::{
    classes::{
        BudgetParams, FrameReading, FrameState, FrameTotals, JobFrames, ProcessFrames, RtSpec,
        WorkMoments,
    },
    local::TaskId,
};

use crate::rt_frames::{self, FrameTracker, Progress};

/// Per-frame work samples kept for the percentile.
const WORK_SAMPLES: usize = 1024;

/// One RT process (a thread group) of the job.
#[derive(Clone, Debug)]
pub struct RtProcess {
    /// Where its counter file is: the job's directory, or the one its
    /// environment names.
    pub dir: PathBuf,
    /// Its effective uid: the only owner its counter file may have.
    pub uid: u32,
    /// When its accounting started: a counter created before this counts
    /// frames from before the agent took the process.
    pub since_ns: u64,
    pub tracker: FrameTracker,
    /// Why its counter is not read now (None: read, or not created yet).
    pub error: Option<String>,
}

impl RtProcess {
    pub fn new(dir: PathBuf, uid: u32, since_ns: u64) -> Self {
        Self {
            dir,
            uid,
            since_ns,
            tracker: FrameTracker::new(),
            error: None,
        }
    }

    pub fn expected(&self, pid: u32) -> rt_frames::Expected {
        rt_frames::Expected { pid, uid: self.uid }
    }
}

/// The job's RT spec and the accounting of its processes here.
#[derive(Clone, Debug)]
pub struct RtJob {
    pub spec: RtSpec,
    /// When the job started on this node: every process's windows are
    /// aligned to it.
    pub start_ns: u64,
    pub budget: BudgetParams,
    /// The counter directory the agent made for the job (jobs it launches),
    /// removed when the job ends.
    pub own_dir: Option<PathBuf>,
    /// The bound of the job's first-frame gate, once one was published in
    /// `own_dir` (its processes wait in `cosched_rt_init()` for the
    /// instant).
    pub gate_wait_ns: Option<u64>,
    frames: JobFrames,
    processes: BTreeMap<u32, RtProcess>,
    /// Frames reported by its processes, in all.
    reported: u64,
    work: VecDeque<u64>,
}

impl RtJob {
    pub fn new(
        spec: RtSpec,
        start_ns: u64,
        budget: BudgetParams,
        own_dir: Option<PathBuf>,
    ) -> Self {
        Self {
            spec,
            start_ns,
            budget,
            own_dir,
            gate_wait_ns: None,
            frames: JobFrames::new(),
            processes: BTreeMap::new(),
            reported: 0,
            work: VecDeque::new(),
        }
    }

    /// Starts accounting for process `pid` at `now_ns`, in windows aligned
    /// to the job's start (so a process that joins mid-window has less time
    /// for that window's frames).
    pub fn add_process(&mut self, pid: u32, process: RtProcess) {
        let accounting = ProcessFrames::new(
            self.spec,
            self.start_ns,
            FrameReading::default(),
            self.budget,
        );
        self.frames.add(TaskId(pid), accounting);
        self.processes.insert(pid, process);
    }

    /// Stops accounting for `pid`; its closed windows stay in the totals.
    pub fn remove_process(&mut self, pid: u32) -> Option<RtProcess> {
        self.frames.remove(TaskId(pid));
        self.processes.remove(&pid)
    }

    pub fn has_process(&self, pid: u32) -> bool {
        self.processes.contains_key(&pid)
    }

    pub fn pids(&self) -> Vec<u32> {
        self.processes.keys().copied().collect()
    }

    pub fn process(&self, pid: u32) -> Option<&RtProcess> {
        self.processes.get(&pid)
    }

    pub fn process_mut(&mut self, pid: u32) -> Option<&mut RtProcess> {
        self.processes.get_mut(&pid)
    }

    /// A reading of `pid`'s counter: the frames it adds (see
    /// [`frames_of`]), recorded with the work per frame it measured.
    pub fn observe(&mut self, pid: u32, reading: rt_frames::FrameReading) -> u64 {
        let Some(process) = self.processes.get_mut(&pid) else {
            return 0;
        };
        let previous = process.tracker.last().map(|r| r.identity);
        let progress = process.tracker.observe(reading);
        let frames = frames_of(progress, previous, &reading, process.since_ns);
        if let Progress::Advanced {
            work_per_frame_ns: Some(work),
            ..
        } = progress
        {
            if self.work.len() == WORK_SAMPLES {
                self.work.pop_front();
            }
            self.work.push_back(work);
        }
        frames
    }

    /// Credits `frames` and `cpu_ns` to `pid` at `now_ns` and closes the
    /// windows that ended. Returns whether a window of `pid` closed with no
    /// frame at all (its counter may be a stale incarnation).
    pub fn credit(&mut self, pid: u32, now_ns: u64, frames: u64, cpu_ns: u64) -> bool {
        self.reported += frames;
        let closed = self
            .frames
            .credit(TaskId(pid), now_ns, frames, cpu_ns)
            .unwrap_or_default();
        closed.iter().any(|w| w.frames_done == 0)
    }

    /// Closes every process's ended windows (also of processes that never
    /// report: they miss every frame).
    pub fn tick(&mut self, now_ns: u64) {
        self.frames.tick(now_ns);
    }

    pub fn state(&self, pid: u32) -> Option<FrameState> {
        self.frames.process(TaskId(pid)).map(ProcessFrames::state)
    }

    pub fn frames_in_window(&self, pid: u32) -> u64 {
        self.frames
            .process(TaskId(pid))
            .map_or(0, ProcessFrames::frames_in_window)
    }

    /// Closed windows of every process, present and past.
    pub fn totals(&self) -> FrameTotals {
        self.frames.totals()
    }

    pub fn reported(&self) -> u64 {
        self.reported
    }

    /// Nearest-rank 95th percentile of the recent per-frame work.
    pub fn work_p95_ns(&self) -> Option<u64> {
        if self.work.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = self.work.iter().copied().collect();
        v.sort_unstable();
        let rank = (v.len() * 95).div_ceil(100).max(1);
        Some(v[rank - 1])
    }

    /// Mean and standard deviation of the recent per-frame work, over the
    /// frames reported in all.
    pub fn work_moments(&self) -> Option<WorkMoments> {
        WorkMoments::of(self.work.iter().copied(), self.reported)
    }

    /// The earliest window end of its processes.
    pub fn next_window_end(&self) -> Option<u64> {
        self.frames.next_wakeup_ns()
    }
}

/// The frames one reading adds. A first reading counts what the counter
/// holds only if the counter was created after the process's accounting
/// began (a launched process's frames since its start; not an adopted
/// process's earlier life). A restart counts the new counter's frames when
/// it is another counter made since (the process exec'd); a count that went
/// back on the same counter adds nothing (its frames since are unknown).
pub fn frames_of(
    progress: Progress,
    previous: Option<rt_frames::CounterIdentity>,
    reading: &rt_frames::FrameReading,
    since_ns: u64,
) -> u64 {
    let new_since = reading.identity.created_ns >= since_ns;
    match progress {
        Progress::First { frames } if new_since => frames,
        Progress::First { .. } => 0,
        Progress::Advanced { new_frames, .. } => new_frames,
        Progress::Restarted { frames } if new_since && previous != Some(reading.identity) => frames,
        Progress::Restarted { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use cosched_agent_common::rt_frames::CpuSample;

    use super::*;
    use crate::rt_frames::{CounterIdentity, FrameReading};

    const MS: u64 = 1_000_000;

    fn spec() -> RtSpec {
        RtSpec::new(10 * MS, 2, 2 * MS).unwrap()
    }

    fn reading(created_ns: u64, frames: u64, cpu_ns: u64) -> FrameReading {
        FrameReading {
            identity: CounterIdentity {
                dev: 1,
                ino: created_ns,
                created_ns,
            },
            frames,
            last_frame_ns: 0,
            cpu: Some(CpuSample {
                cpu_ns,
                frames,
                at_ns: 0,
            }),
        }
    }

    #[test]
    fn a_counter_made_after_the_process_was_taken_counts_from_its_first_reading() {
        let mut job = RtJob::new(spec(), 0, BudgetParams::default(), None);
        job.add_process(7, RtProcess::new("/d".into(), 0, 100));
        assert_eq!(job.observe(7, reading(150, 3, 3 * MS)), 3);
        assert_eq!(job.observe(7, reading(150, 5, 5 * MS)), 2);
        assert_eq!(job.work_p95_ns(), Some(MS));
        assert_eq!(
            job.work_moments().map(|m| (m.mean_ns, m.sd_ns)),
            Some((MS, 0))
        );
        let mut adopted = RtJob::new(spec(), 0, BudgetParams::default(), None);
        adopted.add_process(7, RtProcess::new("/d".into(), 0, 100));
        assert_eq!(
            adopted.observe(7, reading(50, 3, 0)),
            0,
            "frames from before"
        );
    }

    #[test]
    fn an_exec_counts_the_new_counter_and_a_reset_counts_nothing() {
        let mut job = RtJob::new(spec(), 0, BudgetParams::default(), None);
        job.add_process(7, RtProcess::new("/d".into(), 0, 100));
        job.observe(7, reading(150, 10, 0));
        assert_eq!(job.observe(7, reading(300, 2, 0)), 2, "a new incarnation");
        assert_eq!(
            job.observe(7, reading(300, 1, 0)),
            0,
            "same counter, went back"
        );
    }

    #[test]
    fn a_process_that_never_reports_misses_every_frame_and_totals_survive_its_removal() {
        let mut job = RtJob::new(spec(), 0, BudgetParams::default(), None);
        job.add_process(7, RtProcess::new("/d".into(), 0, 0));
        job.tick(60 * MS);
        let t = job.totals();
        assert_eq!((t.windows, t.expected, t.missed), (3, 6, 6));
        job.remove_process(7);
        assert_eq!(job.totals().missed, 6);
        assert!(job.pids().is_empty());
    }

    #[test]
    fn satisfied_after_b_frames_and_throttled_past_the_budget() {
        let mut job = RtJob::new(spec(), 0, BudgetParams::default(), None);
        job.add_process(7, RtProcess::new("/d".into(), 0, 0));
        job.add_process(8, RtProcess::new("/d".into(), 0, 0));
        job.credit(7, 5 * MS, 2, 3 * MS);
        assert!(matches!(job.state(7), Some(FrameState::Satisfied { .. })));
        job.credit(8, 5 * MS, 0, 5 * MS);
        assert!(
            matches!(job.state(8), Some(FrameState::Throttled { until_ns }) if until_ns == 20 * MS)
        );
        assert!(
            job.credit(8, 25 * MS, 0, 0),
            "a window closed without frames"
        );
        assert_eq!(job.reported(), 2);
    }
}
