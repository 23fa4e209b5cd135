//! Job lifecycle: reserving a job for a launch, taking processes over
//! (launched or adopted), handing them back, noticing that jobs finished.
use cosched_proto::{
    control::JobState,
    job::{JobId, SchedRequest},
    wire::JobClass,
};

use super::{Engine, EngineError, plan::Realisation};
use crate::{
    adoption,
    kernel::{Kernel, is_gone},
    registry::Membership,
};

impl<K: Kernel> Engine<K> {
    /// Reserves a job id for a launch (before the process exists).
    pub fn reserve_job(
        &mut self,
        id: JobId,
        name: &str,
        rank: u32,
        sched: Option<SchedRequest>,
    ) -> Result<(), EngineError> {
        if let Some(s) = &sched {
            s.validate().map_err(EngineError::BadSched)?;
            self.check_below_agent(s)?;
        }
        self.reg.add_job(id, name, rank, sched, self.cfg.max_jobs)?;
        // A counter left by an earlier job of this id would count for it.
        self.forget_job_cpu(id);
        self.update_own_priority();
        Ok(())
    }

    /// Gives a job just reserved its class (its processes report frames
    /// where their environment says); a bad class drops the job again.
    pub(super) fn classify_reserved(
        &mut self,
        job: JobId,
        class: &JobClass,
    ) -> Result<(), EngineError> {
        if let Err(e) = self.set_job_class(job, class, false) {
            self.unreserve_job(job);
            return Err(e);
        }
        Ok(())
    }

    /// Drops the eBPF side's per-job CPU counter of `id` (see
    /// `engine/job_cpu.rs`).
    fn forget_job_cpu(&mut self, id: JobId) {
        if let Err(e) = self.k.forget_job_cpu(id) {
            tracing::warn!(job = id, "dropping the job's CPU counter: {e}");
        }
    }

    /// A job's own real-time priority must stay below the agent's (and the
    /// guardian's): a spinning task at or above it would starve the thread
    /// that puts tasks back, on exit and on crash.
    fn check_below_agent(&self, s: &SchedRequest) -> Result<(), EngineError> {
        let (SchedRequest::Fifo { priority } | SchedRequest::Rr { priority }) = *s else {
            return Ok(());
        };
        let ceiling = match self.cfg.agent_priority {
            0 => crate::guardian::PRIORITY,
            p => p,
        };
        if priority >= ceiling {
            return Err(EngineError::BadSched(format!(
                "real-time priority {priority} must be below the agent's own ({ceiling}): \
                 a task at or above it could starve the agent and its guardian"
            )));
        }
        Ok(())
    }

    /// Drops a job whose launch or adoption failed: every task it had is put
    /// back and forgotten, then the job itself.
    pub fn unreserve_job(&mut self, id: JobId) {
        self.restore_tasks_of(id);
        self.rt_job_ended(id);
        let _ = self.reg.finish(
            id,
            JobState::Exited {
                code: None,
                signal: None,
            },
            self.cfg.finished_retention,
        );
        let _ = self.reg.forget(id);
        self.forget_job_cpu(id);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
        self.update_own_priority();
    }

    /// Starts managing the process `pid` (every thread) as part of `job`.
    /// Returns the number of tasks now tracked for it. On an error the
    /// tasks taken so far stay with the job: the caller drops the job
    /// ([`Self::unreserve_job`]).
    pub fn manage_process(&mut self, job: JobId, pid: u32) -> Result<u32, EngineError> {
        self.take_process(job, pid, false)
    }

    /// [`Self::manage_process`]; with `to_node`, threads allowed outside the
    /// node's CPUs are narrowed to them (journaled first, widened back on
    /// hand-back, exit of the agent and crash).
    pub(super) fn take_process(
        &mut self,
        job: JobId,
        pid: u32,
        to_node: bool,
    ) -> Result<u32, EngineError> {
        let tids = self.k.threads(pid).map_err(|e| {
            if is_gone(&e) {
                EngineError::NoSuchProcess(pid)
            } else {
                e.into()
            }
        })?;
        let n = self.take_tasks(job, pid, &tids, to_node)?;
        if let Some(j) = self.reg.job_mut(job)
            && !j.pids.contains(&pid)
        {
            j.pids.push(pid);
        }
        Ok(n)
    }

    /// Starts managing threads `tids` of process `pid` as part of `job`.
    /// A thread that exits meanwhile is skipped.
    pub(super) fn take_tasks(
        &mut self,
        job: JobId,
        pid: u32,
        tids: &[u32],
        to_node: bool,
    ) -> Result<u32, EngineError> {
        if let Some((tid, other)) = tids
            .iter()
            .find_map(|&t| self.reg.task(t).map(|s| (t, s.job)))
        {
            return Err(adoption::Refusal::OtherJob {
                pid: tid,
                job: other,
            }
            .into());
        }
        let now = self.k.now_ns();
        let mut taken = Vec::with_capacity(tids.len());
        for &tid in tids {
            self.k.track(tid, pid, job)?;
            // Write-ahead, here rather than at the policy's first change:
            // the journal write may block (see restore/mod.rs).
            if let Err(e) = self.ledger.record(&self.k, tid) {
                let _ = self.k.untrack(tid);
                if is_gone(&e) {
                    continue;
                }
                return Err(e.into());
            }
            if to_node {
                self.narrow_to_node(tid)?;
            }
            let original = self.ledger.get(tid).map(|e| e.original).unwrap_or_default();
            self.reg
                .add_task(job, tid, pid, Realisation::untouched(original));
            self.driver.task_added(tid, job, now);
            taken.push(tid);
        }
        self.apply_policy_actions(None);
        if !taken.is_empty() {
            self.rt_process_added(job, pid);
        }
        self.realize_all(&taken, None);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
        Ok(taken.len() as u32)
    }

    /// Keeps a thread on the node's CPUs.
    fn narrow_to_node(&mut self, tid: u32) -> Result<(), EngineError> {
        let node = self.node_cpus();
        if adoption::within(&self.k.affinity(tid)?, &node) {
            return Ok(());
        }
        self.ledger.will_set_affinity(&self.k, tid)?;
        self.k.set_affinity(tid, &node)?;
        Ok(())
    }

    /// Adopts running processes as a new job. Every pid is checked before
    /// anything changes (see [`adoption`]), so a refusal or a typo leaves
    /// no half-adopted job.
    pub fn adopt(
        &mut self,
        job: JobId,
        name: &str,
        pids: &[u32],
        sched: Option<SchedRequest>,
    ) -> Result<u32, EngineError> {
        self.adopt_with(job, name, pids, sched, false, &JobClass::BestEffort)
    }

    /// [`Self::adopt`]; with `to_node`, processes allowed outside the node's
    /// CPUs are narrowed to them instead of refused; of `class` (an RT job's
    /// processes report their frames into the directory their environment
    /// names, or the client library's default).
    pub fn adopt_with(
        &mut self,
        job: JobId,
        name: &str,
        pids: &[u32],
        sched: Option<SchedRequest>,
        to_node: bool,
        class: &JobClass,
    ) -> Result<u32, EngineError> {
        if pids.is_empty() {
            return Err(EngineError::NoProcess);
        }
        let mut pids = pids.to_vec();
        pids.sort_unstable();
        pids.dedup();
        let node_cpus = self.node_cpus();
        for &p in &pids {
            let info = self.k.process_info(p).map_err(|e| {
                if is_gone(&e) {
                    EngineError::NoSuchProcess(p)
                } else {
                    e.into()
                }
            })?;
            let managed_by = self.reg.task(p).map(|s| s.job);
            adoption::check(&info, &self.protected, &node_cpus, managed_by, to_node)?;
        }
        self.reserve_job(job, name, 0, sched)?;
        self.classify_reserved(job, class)?;
        let mut n = 0;
        for &p in &pids {
            match self.take_process(job, p, to_node) {
                Ok(t) => n += t,
                Err(e) => {
                    self.unreserve_job(job);
                    return Err(e);
                }
            }
        }
        Ok(n)
    }

    /// Hands a running job back: every task gets back what the agent
    /// changed (attributes, cgroup, autogroup nice; stopped ones continue),
    /// is no longer tracked, and the job is forgotten. Its processes keep
    /// running.
    pub fn release_job(&mut self, id: JobId) -> Result<u32, EngineError> {
        let job = self
            .reg
            .job(id)
            .ok_or(crate::registry::RegistryError::UnknownJob(id))?;
        if job.state != JobState::Running {
            return Err(crate::registry::RegistryError::UnknownJob(id).into());
        }
        let tasks = job.live.len() as u32;
        for pid in job.pids.clone() {
            self.launched.remove(&pid);
            self.reaped.remove(&pid);
        }
        self.unreserve_job(id);
        self.metrics.remove_job(id, "");
        Ok(tasks)
    }

    /// Puts every task of `job` back and forgets it.
    fn restore_tasks_of(&mut self, job: JobId) {
        let now = self.k.now_ns();
        for tid in self.reg.tasks_of(job) {
            if let Err(e) = self.ledger.restore_one(&mut self.k, tid) {
                tracing::warn!(tid, "restore failed: {e}");
            }
            self.forget_task(tid, now);
        }
    }

    /// The one way a task stops being managed (it exited, or its job was
    /// handed back): its final counters go to its job, and the registry,
    /// the policy, the eBPF maps and the ledger all drop it.
    pub(super) fn forget_task(&mut self, tid: u32, now_ns: u64) {
        if self.reg.task(tid).is_some_and(|s| s.tgid == tid) {
            self.daemons.remove(&tid);
        }
        let last = self.k.task_stat(tid).ok().flatten();
        self.rt_task_gone(tid, last.as_ref(), now_ns);
        self.reg.task_exited(tid, last.as_ref(), now_ns);
        self.driver.task_exited(tid, now_ns);
        let _ = self.k.untrack(tid);
        self.ledger.forget(tid);
        let _ = self.k.forget_sockets_of(&[tid]);
    }

    /// Drops a finished job's record and metric series.
    pub fn forget_job(&mut self, id: JobId) -> Result<(), EngineError> {
        let name = self.reg.job(id).map(|j| j.name.clone()).unwrap_or_default();
        if self.job_running(id) {
            return Err(crate::registry::RegistryError::StillRunning(id).into());
        }
        self.rt_job_ended(id);
        self.reg.forget(id)?;
        self.metrics.remove_job(id, &name);
        Ok(())
    }

    /// Marks `pid` as launched by this agent: its job ends only when the daemon
    /// reports it reaped, with its exit status (not merely when it vanishes).
    pub fn mark_launched(&mut self, pid: u32) {
        self.launched.insert(pid);
    }

    /// A launched main process was reaped by the daemon.
    pub fn process_reaped(&mut self, pid: u32, code: Option<i32>, signal: Option<i32>) {
        self.reaped.insert(pid, JobState::Exited { code, signal });
    }

    /// Periodic work: counter snapshot, exits the event stream missed, job
    /// completion, metrics. Returns jobs that finished in this poll.
    pub fn poll(&mut self, now_ns: u64, agent_cpu_seconds: f64) -> Vec<JobId> {
        self.k.housekeeping();
        if let Err(e) = self.ledger.flush() {
            tracing::warn!("updating the restore journal: {e}");
        }
        self.follow_cgroups(now_ns);
        let stats = match self.k.task_stats() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("reading task counters: {e}");
                Vec::new()
            }
        };
        // Exits whose event was lost (ring buffer full) still show in the map.
        for (tid, s) in &stats {
            if s.exited_ns != 0 {
                self.on_exit(*tid, now_ns);
            }
        }
        // Tasks that vanished without trace (never switched, or untracked).
        let tracked: std::collections::HashSet<u32> = stats.iter().map(|(t, _)| *t).collect();
        let missing: Vec<u32> = self
            .reg
            .tasks()
            .map(|(t, _)| t)
            .filter(|t| !tracked.contains(t) && self.k.start_time(*t).is_err())
            .collect();
        for tid in missing {
            self.on_exit(tid, now_ns);
        }
        let live: Vec<_> = stats
            .into_iter()
            .filter(|(_, s)| s.exited_ns == 0)
            .collect();
        self.reg.apply_snapshot(&live, now_ns);

        let finished = self.finished_jobs();
        for &id in &finished {
            let state = self
                .reg
                .job(id)
                .and_then(|j| {
                    j.pids.iter().find_map(|p| {
                        self.launched.remove(p);
                        self.reaped.remove(p)
                    })
                })
                .unwrap_or(JobState::Exited {
                    code: None,
                    signal: None,
                });
            self.rt_job_ended(id);
            // Its tasks are gone; a finished job's CPU is the registry's.
            self.forget_job_cpu(id);
            for dropped in self.reg.finish(id, state, self.cfg.finished_retention) {
                self.metrics.remove_job(dropped, "");
            }
        }
        if !finished.is_empty() {
            self.update_own_priority();
        }
        self.export_metrics(agent_cpu_seconds);
        if self.driver.resting() {
            // Nothing ran for a while: the policy looks at the poll's pace.
            self.policy_tick();
        }
        finished
    }

    fn finished_jobs(&self) -> Vec<JobId> {
        let now = self.k.now_ns();
        let expect_ns = self.cfg.expect_timeout_s.saturating_mul(1_000_000_000);
        self.reg
            .jobs()
            .filter(|j| j.state == JobState::Running && j.live.is_empty())
            .filter(|j| {
                if j.cancelled {
                    return true;
                }
                if j.pids.is_empty() {
                    // Nothing came yet: an attached job waits for joins
                    // (an expected rank up to `expect_timeout_s`), a
                    // cgroup job for its first task (or its removal).
                    if j.expected && j.owner.is_none() && expect_ns > 0 {
                        return now.saturating_sub(j.expected_at_ns) >= expect_ns;
                    }
                    return matches!(&j.membership, Membership::Cgroup(dir) if self.k.cgroup2_threads(dir).is_err());
                }
                // A cgroup job with no task left: its cgroup emptied (the
                // poll follows it before this).
                matches!(j.membership, Membership::Cgroup(_))
                    || j.pids.iter().all(|p| {
                        self.reaped.contains_key(p)
                            || (!self.launched.contains(p) && self.k.start_time(*p).is_err())
                    })
            })
            .map(|j| j.id)
            .collect()
    }
}
