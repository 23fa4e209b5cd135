//! Which jobs and tasks this agent manages, and their per-job totals.
//!
//! Pure bookkeeping (no syscalls): the engine feeds it what the kernel said —
//! tasks tracked, forks, exits, counter snapshots — and reads per-job totals.
//! Counters of exited tasks are folded into their job before the task's map
//! entry is dropped, so a job's totals never go backwards.
use std::collections::{BTreeMap, BTreeSet};

use cosched_agent_common::TaskStats;
use cosched_policy::local::{Level, Reason};
use cosched_proto::{
    control::{JobInfo, JobState, JobStats},
    job::{JobId, SchedRequest},
};

use crate::engine::plan::Realisation;

/// What makes a task part of a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Membership {
    /// The processes the agent launched or was given by pid, and whatever
    /// they fork.
    #[default]
    Processes,
    /// Process trees: each root, its descendants when it was taken, and
    /// whatever they fork (joins add trees). Also an attached job the
    /// coordinator told this agent to expect, before and after joins.
    Trees,
    /// Every task of a cgroup-v2 directory: tasks that enter it later are
    /// taken at the next poll, tasks that leave it are handed back.
    Cgroup(std::path::PathBuf),
}

impl Membership {
    /// Whether the job's processes belong to someone else's accounting
    /// (a launcher's, Slurm's, systemd's, a container runtime's cgroup):
    /// the agent then never moves them between cgroups, in any hierarchy,
    /// and realises levels with attributes only.
    pub fn keeps_cgroups(&self) -> bool {
        !matches!(self, Membership::Processes)
    }
}

#[derive(Clone, Debug)]
pub struct Job {
    pub id: JobId,
    pub name: String,
    pub rank: u32,
    /// Main processes (launched or adopted).
    pub pids: Vec<u32>,
    pub state: JobState,
    pub sched: Option<SchedRequest>,
    /// Live tasks (threads) of the job.
    pub live: BTreeSet<u32>,
    /// Totals of tasks that have exited.
    pub exited: JobStats,
    /// Totals including live tasks as of the last snapshot.
    pub totals: JobStats,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// Policy actions on the job's tasks, and how many of them were boosts.
    pub actions: u64,
    pub boosts: u64,
    /// Recent reaction latencies (µs) of actions triggered by the job's arrivals.
    pub latencies: LatencySamples,
    /// What makes a task part of the job.
    pub membership: Membership,
    /// Expected from the coordinator (an attached job): processes join it.
    pub expected: bool,
    /// Cancelled: it ends once no task is left, even if none ever came.
    pub cancelled: bool,
    /// Processes taken later (cgroup arrivals, joins) are narrowed to the
    /// node's CPUs, as asked at adoption.
    pub to_node: bool,
    /// Processes a cgroup job saw but could not take (refused, or held by
    /// another job), so each is logged once.
    pub passed_over: BTreeSet<u32>,
    /// The user whose processes it holds on this node: the user of the
    /// first process that joined it (or the root of an attached tree).
    /// Unprivileged self-joins go only into a job of the caller's (or an
    /// expected job nobody joined yet). None: no owner yet, or a job the
    /// agent launched, adopted by pid or by cgroup.
    pub owner: Option<u32>,
    /// When an expected job was announced (CLOCK_MONOTONIC ns).
    pub expected_at_ns: u64,
    /// A real-time job: its spec and frame accounting (None: best effort).
    pub rt: Option<crate::classes::RtJob>,
    /// Order in which jobs finished, for retention.
    finished_seq: u64,
}

/// The most recent reaction-latency samples of a job (bounded memory).
#[derive(Clone, Debug, Default)]
pub struct LatencySamples {
    recent: std::collections::VecDeque<f64>,
    /// All samples ever taken.
    pub count: u64,
}

impl LatencySamples {
    /// Samples kept for percentiles.
    pub const KEEP: usize = 8192;

    pub fn push(&mut self, us: f64) {
        if self.recent.len() == Self::KEEP {
            self.recent.pop_front();
        }
        self.recent.push_back(us);
        self.count += 1;
    }

    /// Nearest-rank percentile of the kept samples; 0 when there are none.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.recent.is_empty() {
            return 0.0;
        }
        let mut v: Vec<f64> = self.recent.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        v[rank.min(v.len()) - 1]
    }
}

/// Everything the agent knows and decided about one managed task (thread).
/// Forgetting a task drops all of it at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskState {
    pub job: JobId,
    pub tgid: u32,
    /// What the local policy wants for the task, and why (None: Normal).
    pub wanted: Option<(Level, Reason)>,
    /// How the task is realised now: level, attributes, cgroup, watch flags.
    pub realised: Realisation,
    /// On-CPU time (eBPF) already credited to its RT process's windows.
    pub rt_cpu_ns: u64,
    /// The kernel refused it SCHED_DEADLINE: it runs EDF by FIFO priority.
    pub deadline_refused: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("job {0} already exists on this node")]
    Duplicate(JobId),
    #[error("unknown job {0}")]
    UnknownJob(JobId),
    #[error("this node already manages {0} jobs (max_jobs)")]
    Full(u32),
    #[error("job {0} is still running")]
    StillRunning(JobId),
}

#[derive(Debug, Default)]
pub struct Registry {
    jobs: BTreeMap<JobId, Job>,
    tasks: BTreeMap<u32, TaskState>,
    finished_counter: u64,
}

/// Converts one task's eBPF counters to job-stat units. `now_ns` (CLOCK_MONOTONIC,
/// the eBPF clock) adds the current run of a task that is on CPU.
pub fn task_totals(s: &TaskStats, now_ns: u64) -> JobStats {
    let running = if s.run_start_ns != 0 && s.exited_ns == 0 {
        now_ns.saturating_sub(s.run_start_ns)
    } else {
        0
    };
    JobStats {
        cpu_seconds: (s.oncpu_ns + running) as f64 / 1e9,
        spin_seconds: s.spin_ns as f64 / 1e9,
        messages_observed: s.arrivals,
        receives: s.recv_ok,
        empty_receives: s.recv_empty,
        empty_polls: s.empty_polls,
        yields: s.yields,
        spin_episodes: s.spin_episodes,
        sends: s.sends,
        switches_in: s.switches_in,
        switches_voluntary: s.switches_out_voluntary,
        switches_preempted: s.switches_out_preempted,
        ..JobStats::default()
    }
}

pub fn add(a: &mut JobStats, b: &JobStats) {
    a.cpu_seconds += b.cpu_seconds;
    a.spin_seconds += b.spin_seconds;
    a.messages_observed += b.messages_observed;
    a.receives += b.receives;
    a.empty_receives += b.empty_receives;
    a.empty_polls += b.empty_polls;
    a.yields += b.yields;
    a.spin_episodes += b.spin_episodes;
    a.sends += b.sends;
    a.switches_in += b.switches_in;
    a.switches_voluntary += b.switches_voluntary;
    a.switches_preempted += b.switches_preempted;
}

impl Registry {
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }

    pub fn job_mut(&mut self, id: JobId) -> Option<&mut Job> {
        self.jobs.get_mut(&id)
    }

    pub fn jobs_mut(&mut self) -> impl Iterator<Item = &mut Job> {
        self.jobs.values_mut()
    }

    pub fn task(&self, tid: u32) -> Option<&TaskState> {
        self.tasks.get(&tid)
    }

    pub fn task_mut(&mut self, tid: u32) -> Option<&mut TaskState> {
        self.tasks.get_mut(&tid)
    }

    pub fn tasks(&self) -> impl Iterator<Item = (u32, &TaskState)> + '_ {
        self.tasks.iter().map(|(&t, e)| (t, e))
    }

    /// The managed tasks' ids, in order (a copy: callers change tasks while
    /// walking them).
    pub fn task_ids(&self) -> Vec<u32> {
        self.tasks.keys().copied().collect()
    }

    /// The live tasks of one job.
    pub fn tasks_of(&self, job: JobId) -> Vec<u32> {
        self.jobs
            .get(&job)
            .map(|j| j.live.iter().copied().collect())
            .unwrap_or_default()
    }

    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// Does a running job ask for a real-time policy of its own?
    pub fn has_realtime_job(&self) -> bool {
        self.jobs.values().any(|j| {
            j.state == JobState::Running
                && matches!(
                    j.sched,
                    Some(SchedRequest::Fifo { .. } | SchedRequest::Rr { .. })
                )
        })
    }

    pub fn running_jobs(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .count()
    }

    pub fn add_job(
        &mut self,
        id: JobId,
        name: &str,
        rank: u32,
        sched: Option<SchedRequest>,
        max_jobs: u32,
    ) -> Result<(), RegistryError> {
        if self.jobs.contains_key(&id) {
            return Err(RegistryError::Duplicate(id));
        }
        if self.running_jobs() >= max_jobs as usize {
            return Err(RegistryError::Full(max_jobs));
        }
        self.jobs.insert(
            id,
            Job {
                id,
                name: name.to_string(),
                rank,
                pids: Vec::new(),
                state: JobState::Running,
                sched,
                live: BTreeSet::new(),
                exited: JobStats::default(),
                totals: JobStats::default(),
                stdout: None,
                stderr: None,
                actions: 0,
                boosts: 0,
                latencies: LatencySamples::default(),
                membership: Membership::Processes,
                expected: false,
                cancelled: false,
                to_node: false,
                passed_over: BTreeSet::new(),
                owner: None,
                expected_at_ns: 0,
                rt: None,
                finished_seq: 0,
            },
        );
        Ok(())
    }

    /// A task of `job` is now tracked, realised as `realised`. Returns false
    /// if the job is unknown.
    pub fn add_task(&mut self, job: JobId, tid: u32, tgid: u32, realised: Realisation) -> bool {
        let Some(j) = self.jobs.get_mut(&job) else {
            return false;
        };
        j.live.insert(tid);
        self.tasks.insert(
            tid,
            TaskState {
                job,
                tgid,
                wanted: None,
                realised,
                rt_cpu_ns: 0,
                deadline_refused: false,
            },
        );
        true
    }

    /// A task exited; its final counters are folded into its job. Returns the
    /// job if that was the job's last live task.
    pub fn task_exited(
        &mut self,
        tid: u32,
        last: Option<&TaskStats>,
        now_ns: u64,
    ) -> Option<JobId> {
        let entry = self.tasks.remove(&tid)?;
        let job = self.jobs.get_mut(&entry.job)?;
        job.live.remove(&tid);
        if let Some(s) = last {
            add(&mut job.exited, &task_totals(s, now_ns));
        }
        job.live.is_empty().then_some(entry.job)
    }

    /// Recomputes per-job totals from a counter snapshot of live tasks.
    pub fn apply_snapshot(&mut self, stats: &[(u32, TaskStats)], now_ns: u64) {
        for j in self.jobs.values_mut() {
            j.totals = j.exited;
        }
        for (tid, s) in stats {
            if let Some(e) = self.tasks.get(tid)
                && let Some(j) = self.jobs.get_mut(&e.job)
            {
                add(&mut j.totals, &task_totals(s, now_ns));
            }
        }
    }

    /// Marks a job finished (all processes gone) and drops the oldest finished
    /// jobs beyond `retention`. Returns the ids dropped, whose metric series
    /// must go too.
    pub fn finish(&mut self, id: JobId, state: JobState, retention: u32) -> Vec<JobId> {
        self.finished_counter += 1;
        let seq = self.finished_counter;
        if let Some(j) = self.jobs.get_mut(&id) {
            if j.state == JobState::Running {
                j.totals = j.exited;
                j.finished_seq = seq;
            }
            j.state = state;
        }
        let mut finished: Vec<(u64, JobId)> = self
            .jobs
            .values()
            .filter(|j| j.state != JobState::Running)
            .map(|j| (j.finished_seq, j.id))
            .collect();
        finished.sort_unstable();
        let excess = finished.len().saturating_sub(retention as usize);
        let dropped: Vec<JobId> = finished[..excess].iter().map(|&(_, id)| id).collect();
        for id in &dropped {
            self.jobs.remove(id);
        }
        dropped
    }

    /// Drops a finished job.
    pub fn forget(&mut self, id: JobId) -> Result<(), RegistryError> {
        match self.jobs.get(&id) {
            None => Err(RegistryError::UnknownJob(id)),
            Some(j) if j.state == JobState::Running => Err(RegistryError::StillRunning(id)),
            Some(_) => {
                self.jobs.remove(&id);
                Ok(())
            }
        }
    }

    pub fn info(&self, j: &Job) -> JobInfo {
        let mut stats = j.totals;
        stats.actions = j.actions;
        stats.boosts = j.boosts;
        stats.reactions = j.latencies.count;
        stats.reaction_latency_p50_us = j.latencies.percentile(50.0);
        stats.reaction_latency_p99_us = j.latencies.percentile(99.0);
        JobInfo {
            job_id: j.id,
            name: j.name.clone(),
            rank: j.rank,
            state: j.state.clone(),
            pids: j.pids.clone(),
            live_tasks: j.live.len() as u32,
            stats,
            stdout: j.stdout.clone(),
            stderr: j.stderr.clone(),
            class: j.rt.as_ref().map_or_else(
                || "be".into(),
                |rt| {
                    format!(
                        "rt:{}:{}:{}",
                        rt.spec.period_ns, rt.spec.frames, rt.spec.work_ns
                    )
                },
            ),
            rt: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn untouched() -> Realisation {
        Realisation::untouched(crate::kernel::SchedAttr::other(0))
    }

    fn stats(oncpu_ns: u64, arrivals: u64) -> TaskStats {
        TaskStats {
            oncpu_ns,
            arrivals,
            ..TaskStats::default()
        }
    }

    fn registry_with_job() -> Registry {
        let mut r = Registry::default();
        r.add_job(1, "a", 0, None, 8).unwrap();
        r.add_task(1, 100, 100, untouched());
        r.add_task(1, 101, 100, untouched());
        r
    }

    #[test]
    fn job_totals_sum_live_tasks() {
        let mut r = registry_with_job();
        r.apply_snapshot(
            &[(100, stats(1_000_000_000, 5)), (101, stats(500_000_000, 2))],
            0,
        );
        let t = r.job(1).unwrap().totals;
        assert_eq!(t.messages_observed, 7);
        assert!((t.cpu_seconds - 1.5).abs() < 1e-9);
    }

    #[test]
    fn running_task_counts_its_current_run() {
        let mut r = registry_with_job();
        let s = TaskStats {
            oncpu_ns: 1_000,
            run_start_ns: 10_000,
            ..TaskStats::default()
        };
        r.apply_snapshot(&[(100, s)], 12_000);
        assert!((r.job(1).unwrap().totals.cpu_seconds - 3e-6).abs() < 1e-12);
    }

    #[test]
    fn totals_never_go_backwards_when_a_task_exits() {
        let mut r = registry_with_job();
        r.apply_snapshot(&[(100, stats(10, 5)), (101, stats(10, 2))], 0);
        assert_eq!(r.task_exited(101, Some(&stats(10, 2)), 0), None);
        // Entry of 101 is gone from the map now.
        r.apply_snapshot(&[(100, stats(10, 6))], 0);
        assert_eq!(r.job(1).unwrap().totals.messages_observed, 8);
    }

    #[test]
    fn last_task_exit_reports_the_job() {
        let mut r = registry_with_job();
        assert_eq!(r.task_exited(100, None, 0), None);
        assert_eq!(r.task_exited(101, None, 0), Some(1));
        assert_eq!(r.task_count(), 0);
    }

    #[test]
    fn duplicate_and_excess_jobs_are_refused() {
        let mut r = registry_with_job();
        assert_eq!(
            r.add_job(1, "b", 0, None, 8),
            Err(RegistryError::Duplicate(1))
        );
        assert_eq!(r.add_job(2, "b", 0, None, 1), Err(RegistryError::Full(1)));
    }

    #[test]
    fn finished_jobs_beyond_retention_are_dropped_oldest_first() {
        let mut r = Registry::default();
        for id in 1..=3 {
            r.add_job(id, "j", 0, None, 8).unwrap();
        }
        let exited = JobState::Exited {
            code: Some(0),
            signal: None,
        };
        assert!(r.finish(2, exited.clone(), 2).is_empty());
        assert!(r.finish(1, exited.clone(), 2).is_empty());
        assert_eq!(r.finish(3, exited, 2), vec![2]);
        assert!(r.job(2).is_none() && r.job(1).is_some());
    }

    #[test]
    fn latency_percentiles_use_nearest_rank_and_memory_is_bounded() {
        let mut l = LatencySamples::default();
        assert_eq!(l.percentile(50.0), 0.0);
        for i in 1..=100 {
            l.push(i as f64);
        }
        assert_eq!(l.percentile(50.0), 50.0);
        assert_eq!(l.percentile(99.0), 99.0);
        for _ in 0..LatencySamples::KEEP {
            l.push(1.0);
        }
        assert_eq!(l.count, 100 + LatencySamples::KEEP as u64);
        assert_eq!(l.percentile(99.0), 1.0, "old samples age out");
    }

    #[test]
    fn running_job_cannot_be_forgotten() {
        let mut r = registry_with_job();
        assert_eq!(r.forget(1), Err(RegistryError::StillRunning(1)));
        assert_eq!(r.forget(9), Err(RegistryError::UnknownJob(9)));
    }
}
