//! Jobs that something else launched (mpirun, mpiexec, srun, a batch
//! script): adopted as a cgroup-v2 directory or as process trees, expected
//! from the coordinator and joined by their processes.
//!
//! Membership is followed two ways:
//! - forks, threads and execs of a managed task need nothing here: the eBPF
//!   fork tracepoint tracks every clone of a tracked task (processes and
//!   threads alike) and exec keeps the task's id;
//! - a cgroup is read again (`cgroup.threads`) at every poll: tasks that
//!   entered it other than by fork (migrated in, `CLONE_INTO_CGROUP`) are
//!   taken, managed tasks no longer in it are handed back. One small file
//!   per cgroup job per poll, no eBPF change, and the agent sees exactly
//!   what the kernel accounts to the cgroup.
//!
//! Every process taken passes the same checks as `adopt`
//! ([`crate::adoption`]); for an `attach` or a `join` every process of the
//! tree or cgroup is checked before anything changes, so a refusal leaves
//! nothing behind. Such jobs keep their cgroups: their tasks are never moved
//! between cgroups (see [`Membership::keeps_cgroups`]).
use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

use cosched_proto::{
    control::{AttachTarget, JobState, LOCAL_JOB_IDS},
    job::{JobId, SchedRequest},
    wire::JobClass,
};

use super::{Engine, EngineError};
use crate::{
    adoption,
    kernel::{Kernel, is_gone},
    registry::Membership,
};

/// Longest job name (also a metric label).
const MAX_NAME_LEN: usize = 64;

/// Rounds of looking for descendants forked while a tree is being taken
/// (a child forked after its parent was tracked is followed by eBPF; one
/// forked before is found by the next round).
const TREE_ROUNDS: usize = 4;

/// On whose behalf a request comes: the root-only control socket, or an
/// unprivileged user on the user socket (uid from SO_PEERCRED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    Root,
    User(u32),
}

/// What `attach` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachRequest {
    pub job_id: Option<JobId>,
    pub name: String,
    pub target: AttachTarget,
    pub sched: Option<SchedRequest>,
    pub move_to_node: bool,
    pub class: JobClass,
}

impl<K: Kernel> Engine<K> {
    /// Adopts a cgroup or a process tree as a new job. Returns the job id
    /// and the number of tasks taken.
    pub fn attach(&mut self, req: AttachRequest) -> Result<(JobId, u32), EngineError> {
        check_name(&req.name)?;
        let id = match req.job_id {
            Some(id) => id,
            None => self.free_local_id()?,
        };
        if self.reg.job(id).is_some() {
            return Err(crate::registry::RegistryError::Duplicate(id).into());
        }
        let to_node = req.move_to_node;
        match req.target {
            AttachTarget::PidTree(root) => {
                let pids = self.checked_tree(root, None, to_node)?;
                self.reserve_job(id, &req.name, 0, req.sched)?;
                self.classify_reserved(id, &req.class)?;
                self.set_membership(id, Membership::Trees, to_node);
                let owner = self.k.process_info(root).ok().map(|i| i.uids.real);
                if let Some(j) = self.reg.job_mut(id) {
                    j.owner = owner;
                }
                match self.take_tree(id, root, &pids, to_node) {
                    Ok(n) => Ok((id, n)),
                    Err(e) => {
                        self.unreserve_job(id);
                        Err(e)
                    }
                }
            }
            AttachTarget::Cgroup(path) => {
                let dir = self
                    .k
                    .cgroup2_dir(&path)
                    .map_err(|e| EngineError::NoSuchCgroup(format!("{path}: {e}")))?;
                let processes = self.cgroup_processes(&dir)?;
                for &pid in processes.keys() {
                    self.check_process(pid, None, to_node)?;
                }
                self.reserve_job(id, &req.name, 0, req.sched)?;
                self.classify_reserved(id, &req.class)?;
                self.set_membership(id, Membership::Cgroup(dir), to_node);
                let mut n = 0;
                for (pid, tids) in processes {
                    match self.take_tasks(id, pid, &tids, to_node) {
                        Ok(t) => {
                            n += t;
                            self.note_pid(id, pid);
                        }
                        Err(e) => {
                            self.unreserve_job(id);
                            return Err(e);
                        }
                    }
                }
                Ok((id, n))
            }
        }
    }

    /// The coordinator attached job `id` with a rank on this node: its
    /// processes come by `join`. A repeated order for the same rank is a
    /// no-op. `owner`: the user who attached it at the coordinator (None:
    /// root, or not told): only that user's processes may join it through
    /// the user socket; without one, the first join sets the owner.
    pub fn expect_job(
        &mut self,
        id: JobId,
        name: &str,
        rank: u32,
        owner: Option<u32>,
    ) -> Result<(), EngineError> {
        if let Some(j) = self.reg.job(id)
            && j.expected
            && j.rank == rank
            && j.state == JobState::Running
        {
            return Ok(());
        }
        check_name(name)?;
        self.reserve_job(id, name, rank, None)?;
        self.set_membership(id, Membership::Trees, false);
        let now = self.k.now_ns();
        if let Some(j) = self.reg.job_mut(id) {
            j.expected = true;
            j.expected_at_ns = now;
            j.owner = owner;
        }
        Ok(())
    }

    /// Adds process `pid` and its descendants to running job `id`. A
    /// process already in the job (a join under a joined process) is fine.
    /// With `daemon`, `pid` is the launcher's per-node daemon (orted,
    /// hydra_pmi_proxy): followed, so the ranks it forks join the job, but
    /// never stopped, demoted or boosted itself. OpenMPI's orted forwards
    /// the SIGCONT of every slice to its ranks (and logs each one), and a
    /// stopped daemon misses the launcher's heartbeats and I/O forwarding.
    pub fn join(
        &mut self,
        id: JobId,
        pid: u32,
        to_node: bool,
        daemon: bool,
    ) -> Result<u32, EngineError> {
        self.join_as(id, pid, to_node, daemon, Caller::Root)
    }

    /// [`Engine::join`] on behalf of `caller`. An unprivileged caller
    /// (the user socket) may join only processes wholly its own (every
    /// process of the tree: real, effective and saved uid), only into an
    /// attached job of its own on this node or an expected one nobody
    /// joined yet; every process taken is checked again after it was
    /// taken (a pid reused meanwhile by another user's process undoes the
    /// whole join). The first process to join sets the job's owner.
    pub fn join_as(
        &mut self,
        id: JobId,
        pid: u32,
        to_node: bool,
        daemon: bool,
        caller: Caller,
    ) -> Result<u32, EngineError> {
        let job = self
            .reg
            .job(id)
            .ok_or(crate::registry::RegistryError::UnknownJob(id))?;
        if job.state != JobState::Running || job.cancelled {
            return Err(EngineError::NotJoinable(format!(
                "job {id} has ended or was cancelled"
            )));
        }
        match &job.membership {
            Membership::Processes => {
                return Err(EngineError::NotJoinable(format!(
                    "job {id} was launched or adopted by pid: only attached jobs take joins"
                )));
            }
            Membership::Cgroup(dir) => {
                return Err(EngineError::NotJoinable(format!(
                    "job {id} is the cgroup {}: move the process into it instead",
                    dir.display()
                )));
            }
            Membership::Trees => {}
        }
        if let Caller::User(uid) = caller {
            match job.owner {
                Some(owner) if owner == uid => {}
                Some(owner) => {
                    return Err(EngineError::NotJoinable(format!(
                        "job {id} belongs to user {owner} on this node, not to you (uid {uid})"
                    )));
                }
                None if job.expected => {}
                None => {
                    return Err(EngineError::NotJoinable(format!(
                        "job {id} has no owner on this node: only root may join processes to it"
                    )));
                }
            }
        }
        let to_node = to_node || job.to_node;
        let pids = self.checked_tree(pid, Some(id), to_node)?;
        let owner = match caller {
            Caller::User(uid) => {
                for &p in &pids {
                    self.check_owner(p, uid)?;
                }
                uid
            }
            Caller::Root => match self.k.process_info(pid) {
                Ok(info) => info.uids.real,
                Err(e) if is_gone(&e) => return Err(EngineError::NoSuchProcess(pid)),
                Err(e) => return Err(e.into()),
            },
        };
        let before: BTreeSet<u32> = self.reg.tasks_of(id).into_iter().collect();
        // Before it is taken: its first realisation is already Normal.
        let new_daemon = daemon && self.daemons.insert(pid);
        let taken = self.take_tree(id, pid, &pids, to_node);
        if taken.is_err() && new_daemon {
            self.daemons.remove(&pid);
        }
        let n = taken?;
        if let Caller::User(uid) = caller {
            // Taken: re-check every new process, so a pid that was reused
            // between the check and the take cannot stay in the job.
            let new: BTreeSet<u32> = self
                .reg
                .tasks_of(id)
                .into_iter()
                .filter(|t| !before.contains(t))
                .filter_map(|t| self.reg.task(t).map(|s| s.tgid))
                .collect();
            let stray = new
                .iter()
                .find_map(|&p| self.check_owner(p, uid).err().map(|e| (p, e)));
            if let Some((p, e)) = stray {
                let now = self.k.now_ns();
                let undo: Vec<u32> = self
                    .reg
                    .tasks_of(id)
                    .into_iter()
                    .filter(|t| !before.contains(t))
                    .collect();
                self.hand_back(&undo, now);
                if new_daemon {
                    self.daemons.remove(&pid);
                }
                return Err(match e {
                    EngineError::NoSuchProcess(_) => EngineError::NotJoinable(format!(
                        "process {p} exited while it was being joined: nothing joined"
                    )),
                    other => other,
                });
            }
        }
        if let Some(j) = self.reg.job_mut(id)
            && j.owner.is_none()
        {
            j.owner = Some(owner);
        }
        Ok(n)
    }

    /// Hands process `pid` (its threads, and its descendants in the same
    /// job) back from the attached or joined job holding it. An
    /// unprivileged caller may hand back only its own processes. Returns
    /// the job and the number of tasks handed back.
    pub fn leave(&mut self, pid: u32, caller: Caller) -> Result<(JobId, u32), EngineError> {
        let id = self
            .owned_by(pid)
            .ok_or_else(|| EngineError::NotJoinable(format!("pid {pid} is in no job here")))?;
        let job = self
            .reg
            .job(id)
            .ok_or(crate::registry::RegistryError::UnknownJob(id))?;
        match &job.membership {
            Membership::Trees => {}
            Membership::Cgroup(dir) => {
                return Err(EngineError::NotJoinable(format!(
                    "pid {pid} is in job {id} by its cgroup {}: move it out of the cgroup instead",
                    dir.display()
                )));
            }
            Membership::Processes => {
                return Err(EngineError::NotJoinable(format!(
                    "pid {pid} is in job {id}, launched or adopted by pid: release the job instead"
                )));
            }
        }
        if let Caller::User(uid) = caller {
            self.check_owner(pid, uid)?;
        }
        let mut leaving: BTreeSet<u32> = BTreeSet::from([pid]);
        leaving.extend(
            self.descendants(&[pid])?
                .into_iter()
                .filter(|&p| self.owned_by(p) == Some(id)),
        );
        let tids: Vec<u32> = self
            .reg
            .tasks_of(id)
            .into_iter()
            .filter(|&t| self.reg.task(t).is_some_and(|s| leaving.contains(&s.tgid)))
            .collect();
        let now = self.k.now_ns();
        self.hand_back(&tids, now);
        if let Some(j) = self.reg.job_mut(id) {
            j.pids.retain(|p| !leaving.contains(p));
        }
        tracing::info!(job = id, pid, tasks = tids.len(), "left the job");
        Ok((id, tids.len() as u32))
    }

    /// Puts tasks back as they were and stops managing them.
    fn hand_back(&mut self, tids: &[u32], now_ns: u64) {
        for &tid in tids {
            if let Err(e) = self.ledger.restore_one(&mut self.k, tid) {
                tracing::warn!(tid, "restore failed: {e}");
            }
            self.forget_task(tid, now_ns);
        }
    }

    /// What the kernel says of process `pid`; a process that is gone is
    /// [`EngineError::NoSuchProcess`].
    fn process_info(&self, pid: u32) -> Result<crate::kernel::ProcessInfo, EngineError> {
        self.k.process_info(pid).map_err(|e| {
            if is_gone(&e) {
                EngineError::NoSuchProcess(pid)
            } else {
                e.into()
            }
        })
    }

    /// Whether process `pid` is wholly user `uid`'s.
    fn check_owner(&self, pid: u32, uid: u32) -> Result<(), EngineError> {
        let info = self.process_info(pid)?;
        adoption::check_owner(&info, uid)?;
        Ok(())
    }

    /// Kills an attached or adopted job's processes (every process with a
    /// managed task) and marks it cancelled, so it ends even if nothing
    /// ever joined. Returns the processes to kill; None for a job launched
    /// or adopted by pid (the daemon kills those by cgroup or group).
    pub fn cancel_attached(&mut self, id: JobId) -> Option<Vec<u32>> {
        let job = self.reg.job(id)?;
        if matches!(job.membership, Membership::Processes) {
            return None;
        }
        let mut pids: BTreeSet<u32> = self
            .reg
            .tasks_of(id)
            .iter()
            .filter_map(|&t| self.reg.task(t).map(|s| s.tgid))
            .collect();
        pids.extend(job.pids.iter().copied());
        if let Some(j) = self.reg.job_mut(id) {
            j.cancelled = true;
        }
        Some(pids.into_iter().collect())
    }

    /// Follows every cgroup job: takes the tasks that entered its cgroup,
    /// hands back the ones that left.
    pub(super) fn follow_cgroups(&mut self, now_ns: u64) {
        let jobs: Vec<(JobId, PathBuf, bool)> = self
            .reg
            .jobs()
            .filter(|j| j.state == JobState::Running && !j.cancelled)
            .filter_map(|j| match &j.membership {
                Membership::Cgroup(dir) => Some((j.id, dir.clone(), j.to_node)),
                _ => None,
            })
            .collect();
        for (id, dir, to_node) in jobs {
            let listed: BTreeSet<u32> = match self.k.cgroup2_threads(&dir) {
                Ok(tids) => tids.into_iter().collect(),
                Err(e) if is_gone(&e) => BTreeSet::new(),
                Err(e) => {
                    tracing::warn!(job = id, cgroup = %dir.display(), "reading the job's cgroup: {e}");
                    continue;
                }
            };
            let mine: BTreeSet<u32> = self.reg.tasks_of(id).into_iter().collect();
            for &tid in mine.difference(&listed) {
                if let Err(e) = self.ledger.restore_one(&mut self.k, tid) {
                    tracing::warn!(tid, "restore failed: {e}");
                }
                self.forget_task(tid, now_ns);
                tracing::debug!(job = id, tid, "task left the job's cgroup: handed back");
            }
            let arrived: Vec<u32> = listed.difference(&mine).copied().collect();
            if !arrived.is_empty() {
                self.take_arrivals(id, &arrived, to_node);
            }
        }
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
    }

    /// Tasks that entered a cgroup job's cgroup: each process is checked
    /// as at adoption; one that is refused or held by another job is left
    /// alone (and logged once).
    fn take_arrivals(&mut self, id: JobId, tids: &[u32], to_node: bool) {
        let mut by_process: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for &tid in tids {
            if let Ok(pid) = self.k.tgid(tid) {
                by_process.entry(pid).or_default().push(tid);
            }
        }
        for (pid, tids) in by_process {
            let passed = self
                .reg
                .job(id)
                .is_some_and(|j| j.passed_over.contains(&pid));
            if passed {
                continue;
            }
            let verdict = self
                .check_process(pid, Some(id), to_node)
                .and_then(|()| self.take_tasks(id, pid, &tids, to_node));
            match verdict {
                Ok(_) => self.note_pid(id, pid),
                Err(EngineError::NoSuchProcess(_)) => {}
                Err(e) => {
                    tracing::warn!(
                        job = id,
                        pid,
                        "not taking a process that entered the job's cgroup: {e}"
                    );
                    if let Some(j) = self.reg.job_mut(id) {
                        j.passed_over.insert(pid);
                    }
                }
            }
        }
    }

    /// Root `pid` and its descendants, every one checked (a descendant
    /// that exits meanwhile is dropped; the root must exist). `job`: the
    /// job they join, whose own tasks are not "another job's".
    fn checked_tree(
        &self,
        root: u32,
        job: Option<JobId>,
        to_node: bool,
    ) -> Result<Vec<u32>, EngineError> {
        self.check_process(root, job, to_node)?;
        let mut pids = vec![root];
        for pid in self.descendants(&[root])? {
            match self.check_process(pid, job, to_node) {
                Ok(()) => pids.push(pid),
                Err(EngineError::NoSuchProcess(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(pids)
    }

    /// Takes checked processes of a tree into `id`, then the descendants
    /// forked meanwhile. The root must still exist; others may have gone.
    fn take_tree(
        &mut self,
        id: JobId,
        root: u32,
        pids: &[u32],
        to_node: bool,
    ) -> Result<u32, EngineError> {
        let mut n = 0;
        for &pid in pids {
            if self.owned_by(pid) == Some(id) {
                continue;
            }
            match self.take_process(id, pid, to_node) {
                Ok(t) => n += t,
                Err(EngineError::NoSuchProcess(p)) if p != root => {}
                Err(e) => return Err(e),
            }
        }
        for _ in 0..TREE_ROUNDS {
            let late: Vec<u32> = self
                .descendants(&[root])?
                .into_iter()
                .filter(|&p| self.owned_by(p).is_none())
                .collect();
            if late.is_empty() {
                break;
            }
            for pid in late {
                let taken = self
                    .check_process(pid, Some(id), to_node)
                    .and_then(|()| self.take_process(id, pid, to_node));
                match taken {
                    Ok(t) => n += t,
                    Err(EngineError::NoSuchProcess(_)) => {}
                    Err(e) => tracing::warn!(job = id, pid, "not taking a new descendant: {e}"),
                }
            }
        }
        Ok(n)
    }

    /// The job managing process `pid` (its main thread), if any.
    fn owned_by(&self, pid: u32) -> Option<JobId> {
        self.reg.task(pid).map(|s| s.job)
    }

    /// Every descendant of `roots` (not the roots), parents first.
    fn descendants(&self, roots: &[u32]) -> Result<Vec<u32>, EngineError> {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (pid, ppid) in self.k.process_parents()? {
            children.entry(ppid).or_default().push(pid);
        }
        let mut out = Vec::new();
        let mut seen: BTreeSet<u32> = roots.iter().copied().collect();
        let mut frontier: Vec<u32> = roots.to_vec();
        while let Some(parent) = frontier.pop() {
            for &child in children.get(&parent).map_or(&[][..], Vec::as_slice) {
                if seen.insert(child) {
                    out.push(child);
                    frontier.push(child);
                }
            }
        }
        Ok(out)
    }

    /// The adoption checks for one process; `job`: the job it would join
    /// (its own tasks are fine).
    fn check_process(
        &self,
        pid: u32,
        job: Option<JobId>,
        to_node: bool,
    ) -> Result<(), EngineError> {
        let info = self.process_info(pid)?;
        let managed_by = self.owned_by(pid).filter(|&j| Some(j) != job);
        adoption::check(
            &info,
            &self.protected,
            &self.node_cpus(),
            managed_by,
            to_node,
        )?;
        Ok(())
    }

    /// The processes of a cgroup with their threads there.
    fn cgroup_processes(
        &self,
        dir: &std::path::Path,
    ) -> Result<BTreeMap<u32, Vec<u32>>, EngineError> {
        let tids = self
            .k
            .cgroup2_threads(dir)
            .map_err(|e| EngineError::NoSuchCgroup(format!("{}: {e}", dir.display())))?;
        let mut by_process: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for tid in tids {
            match self.k.tgid(tid) {
                Ok(pid) => by_process.entry(pid).or_default().push(tid),
                Err(e) if is_gone(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(by_process)
    }

    fn set_membership(&mut self, id: JobId, membership: Membership, to_node: bool) {
        if let Some(j) = self.reg.job_mut(id) {
            j.membership = membership;
            j.to_node = to_node;
        }
    }

    fn note_pid(&mut self, id: JobId, pid: u32) {
        if let Some(j) = self.reg.job_mut(id)
            && !j.pids.contains(&pid)
        {
            j.pids.push(pid);
        }
    }

    /// The lowest job id from [`LOCAL_JOB_IDS`] up that no job has.
    fn free_local_id(&self) -> Result<JobId, EngineError> {
        (LOCAL_JOB_IDS..=JobId::MAX)
            .find(|&id| self.reg.job(id).is_none())
            .ok_or(EngineError::NotJoinable("no free job id".into()))
    }
}

fn check_name(name: &str) -> Result<(), EngineError> {
    if name.is_empty() || name.len() > MAX_NAME_LEN || name.chars().any(char::is_control) {
        return Err(EngineError::BadName(format!(
            "job name {name:?}: 1..={MAX_NAME_LEN} characters, no control characters"
        )));
    }
    Ok(())
}
