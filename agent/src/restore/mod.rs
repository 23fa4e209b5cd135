//! The restore ledger: the original scheduling attributes of every task the
//! agent changed, kept in memory and in a journal file so they can be put back
//! on exit, on SIGTERM, by the guardian after a crash, and by the next agent
//! after a restart.
//!
//! An entry is journaled when the agent starts managing a task, *before* any
//! change to it (write-ahead), and the journal learns more only when the
//! agent may first stop the task (when a strict gang switch is announced,
//! ahead of its time) or change its autogroup's nice. Each is one appended
//! line ([`journal`]), so adopting a task or seeing a fork costs one small
//! write whatever the number of tasks. Nothing a policy does per message or
//! per tick writes the journal (a write can block on a slow disk: the event
//! loop was once stuck in `submit_bio_wait` when the first boost of a run
//! wrote it): the original attributes and autogroup nice are
//! recorded at adoption, and exits are journaled lazily, all at once at the
//! next [`flush`](RestoreLedger::flush) (a stale entry is harmless: its
//! task's start time no longer matches), which is also where the journal is
//! compacted.
//!
//! With `demote_cpu_cgroup` the agent also moves tasks between cgroups; the
//! task's original cgroup-v1 cpu cgroup is recorded with the rest at
//! adoption and moved back to first on restore (before the attributes: a
//! real-time original cannot be set inside a cgroup without RT runtime).
pub mod journal;

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use self::journal::{Journal, Record};
use crate::{
    cpu_group::CpuGroups,
    kernel::{SchedAttr, TaskControl, TaskId, is_gone},
};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub task: TaskId,
    pub original: SchedAttr,
    /// The agent stopped this task at least once: restoring sends SIGCONT.
    pub ever_stopped: bool,
    /// Nice of the task's autogroup before the agent first changed it.
    #[serde(default)]
    pub group_nice: Option<i32>,
    /// The task's cgroup-v1 cpu cgroup (a directory) before the agent moved
    /// it between its demotion cgroups. None: the agent does not move it
    /// (no `demote_cpu_cgroup`), or it was already in one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cgroup: Option<PathBuf>,
    /// The CPUs the task could run on before the agent narrowed them to its
    /// node's (an adoption that asked for it). None: never narrowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Vec<u32>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Tasks put back to their original attributes.
    pub restored: usize,
    /// Tasks already gone (exited, or the tid now belongs to another task).
    pub gone: usize,
    /// Tasks that could not be restored, with the reason.
    pub failed: Vec<(u32, String)>,
}

#[derive(Debug, Default)]
pub struct RestoreLedger {
    journal: Option<Journal>,
    entries: BTreeMap<u32, Entry>,
    /// Tasks forgotten since the journal was last written to: journaled at
    /// the next [`flush`](Self::flush).
    forgotten: Vec<TaskId>,
    /// The agent's demotion cgroups, when it moves tasks between them:
    /// [`record`](Self::record) then also notes each task's original cgroup.
    cpu_groups: Option<CpuGroups>,
}

impl RestoreLedger {
    /// A ledger persisted at `journal` (None: memory only, for tests). Its
    /// first write replaces whatever file is there.
    pub fn new(journal: Option<PathBuf>) -> Self {
        Self {
            journal: journal.map(Journal::new),
            ..Self::default()
        }
    }

    /// From now on, also record each task's original cgroup-v1 cpu cgroup
    /// (the agent moves tasks between `groups`).
    pub fn set_cpu_groups(&mut self, groups: Option<CpuGroups>) {
        self.cpu_groups = groups;
    }

    /// Reads the journal a previous agent left behind (after a crash or
    /// SIGKILL). A missing file is an empty ledger, and so is a journal
    /// written before the machine last booted (none of its tasks exist any
    /// more); a half-written last line is ignored; a corrupt journal is an
    /// error naming the file, so nothing is silently dropped.
    pub fn load(journal: &Path) -> io::Result<Self> {
        let (journal, replay) = Journal::load(journal)?;
        if let Some(boot) = &replay.other_boot {
            tracing::warn!(
                journal = %journal.path().display(),
                boot,
                "restore journal written before the last boot: nothing to restore"
            );
        }
        if replay.torn_tail {
            tracing::warn!(
                journal = %journal.path().display(),
                "restore journal ends with a half-written line (the agent died writing it): ignored"
            );
        }
        Ok(Self {
            journal: Some(journal),
            entries: replay.entries,
            ..Self::default()
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, tid: u32) -> Option<&Entry> {
        self.entries.get(&tid)
    }

    /// Records (and journals) what the agent may later change on a task it
    /// starts managing: its attributes, its autogroup's nice and (with
    /// demotion cgroups) its cpu cgroup. Called at adoption, off the policy's
    /// hot path.
    pub fn record(&mut self, k: &impl TaskControl, tid: u32) -> io::Result<()> {
        if self.entries.contains_key(&tid) {
            return Ok(());
        }
        let entry = Entry {
            task: TaskId {
                tid,
                start_time: k.start_time(tid)?,
            },
            original: k.get_attr(tid)?,
            ever_stopped: false,
            group_nice: k.group_nice(tid)?,
            cpu_cgroup: match &self.cpu_groups {
                // A task already in one of the agent's cgroups (left there by
                // an agent that could not restore it) has no original to go
                // back to; the shutdown sweep moves it out.
                Some(groups) => k.cpu_cgroup(tid)?.filter(|dir| !groups.owns(dir)),
                None => None,
            },
            affinity: None,
        };
        self.entries.insert(tid, entry.clone());
        self.journal(Record::Original(entry))
    }

    /// Notes (journals) the CPUs the task may run on before the agent first
    /// narrows them.
    pub fn will_set_affinity(&mut self, k: &impl TaskControl, tid: u32) -> io::Result<()> {
        self.record(k, tid)?;
        let e = self.entries.get_mut(&tid).expect("recorded above");
        if e.affinity.is_some() {
            return Ok(());
        }
        e.affinity = Some(k.affinity(tid)?);
        let entry = e.clone();
        // A later Original line replaces the earlier one at replay.
        self.journal(Record::Original(entry))
    }

    /// Returns the task's original attributes, recording them (and journaling
    /// them) first if the task was not recorded at adoption.
    pub fn original(&mut self, k: &impl TaskControl, tid: u32) -> io::Result<SchedAttr> {
        self.record(k, tid)?;
        Ok(self.entries[&tid].original)
    }

    /// A child forked by a task the agent changed inherited the changed
    /// attributes; its original is the parent's original.
    pub fn inherit(&mut self, k: &impl TaskControl, child: u32, parent: u32) -> io::Result<bool> {
        let Some(p) = self.entries.get(&parent).cloned() else {
            return Ok(false);
        };
        if self.entries.contains_key(&child) {
            return Ok(false);
        }
        let entry = Entry {
            task: TaskId {
                tid: child,
                start_time: k.start_time(child)?,
            },
            original: p.original,
            ever_stopped: false,
            // Same session, same autogroup.
            group_nice: p.group_nice,
            // Its first cgroup is the parent's current one.
            cpu_cgroup: p.cpu_cgroup,
            // Its CPUs are the parent's narrowed ones: widened back with it.
            affinity: p.affinity,
        };
        self.entries.insert(child, entry.clone());
        self.journal(Record::Original(entry))?;
        Ok(true)
    }

    /// Notes (in the journal) that the agent is about to stop the task.
    pub fn will_stop(&mut self, k: &impl TaskControl, tid: u32) -> io::Result<()> {
        self.original(k, tid)?;
        let e = self.entries.get_mut(&tid).expect("recorded above");
        if !e.ever_stopped {
            e.ever_stopped = true;
            self.journal(Record::MayStop { tids: vec![tid] })?;
        }
        Ok(())
    }

    /// Notes (in the journal, one line for all) that the agent may stop
    /// these tasks: called when a strict gang switch is announced, ahead of
    /// its time, so the slice switch itself writes nothing. Tasks not
    /// recorded yet are left to [`will_stop`](Self::will_stop).
    pub fn may_stop(&mut self, tids: impl IntoIterator<Item = u32>) -> io::Result<()> {
        let mut marked = Vec::new();
        for tid in tids {
            if let Some(e) = self.entries.get_mut(&tid)
                && !e.ever_stopped
            {
                e.ever_stopped = true;
                marked.push(tid);
            }
        }
        if marked.is_empty() {
            return Ok(());
        }
        self.journal(Record::MayStop { tids: marked })
    }

    /// Notes (in the journal) the nice of the task's autogroup before the
    /// agent first changes it.
    pub fn will_set_group_nice(&mut self, k: &impl TaskControl, tid: u32) -> io::Result<()> {
        self.original(k, tid)?;
        if self
            .entries
            .get(&tid)
            .is_some_and(|e| e.group_nice.is_some())
        {
            return Ok(());
        }
        let Some(nice) = k.group_nice(tid)? else {
            return Ok(());
        };
        if let Some(e) = self.entries.get_mut(&tid) {
            e.group_nice = Some(nice);
        }
        self.journal(Record::GroupNice { tid, nice })
    }

    /// The task exited: nothing to restore any more. The journal learns it
    /// at the next [`flush`](Self::flush): exits come in bursts at the end of
    /// a job, while other jobs' boosts wait for the agent.
    pub fn forget(&mut self, tid: u32) {
        if let Some(e) = self.entries.remove(&tid) {
            self.forgotten.push(e.task);
        }
    }

    /// Journals the exits since the last flush, and compacts the journal if
    /// it has grown past its bound.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.forgotten.is_empty() {
            let tasks = std::mem::take(&mut self.forgotten);
            self.journal(Record::Forget { tasks })?;
        }
        match &mut self.journal {
            Some(j) => j.compact_if_grown(&self.entries),
            None => Ok(()),
        }
    }

    /// Puts one task back and drops its entry.
    pub fn restore_one(&mut self, k: &mut impl TaskControl, tid: u32) -> io::Result<bool> {
        let Some(e) = self.entries.remove(&tid) else {
            return Ok(false);
        };
        let r = restore_entry(k, &e);
        self.journal(Record::Forget {
            tasks: vec![e.task],
        })?;
        r
    }

    /// Puts every task back, then empties the journal. Failures are reported,
    /// not fatal: every other task is still restored.
    pub fn restore_all(&mut self, k: &mut impl TaskControl) -> RestoreReport {
        let mut report = RestoreReport::default();
        for e in self.entries.values() {
            match restore_entry(k, e) {
                Ok(true) => report.restored += 1,
                Ok(false) => report.gone += 1,
                Err(err) => report.failed.push((e.task.tid, err.to_string())),
            }
        }
        self.entries.clear();
        self.forgotten.clear();
        if let Some(j) = &mut self.journal
            && let Err(e) = j.clear()
        {
            report.failed.push((0, format!("clearing journal: {e}")));
        }
        report
    }

    /// Writes `record`, already applied to the entries, to the journal.
    fn journal(&mut self, record: Record) -> io::Result<()> {
        match &mut self.journal {
            Some(j) => j.append(&record, &self.entries),
            None => Ok(()),
        }
    }
}

/// Restores one task if it is still the same task. Ok(false): it is gone.
fn restore_entry(k: &mut impl TaskControl, e: &Entry) -> io::Result<bool> {
    let tid = e.task.tid;
    match k.start_time(tid) {
        Ok(st) if st == e.task.start_time => {}
        Ok(_) => return Ok(false), // tid reused by another task: leave it alone
        Err(err) if is_gone(&err) => return Ok(false),
        Err(err) => return Err(err),
    }
    let res = (|| {
        // The cgroup first: a real-time original cannot be set back while the
        // task sits in a cgroup without RT runtime. A failed move (the
        // original cgroup was removed meanwhile) still restores the rest.
        let mut cgroup_err = None;
        if let Some(dir) = &e.cpu_cgroup
            && k.cpu_cgroup(tid)?.as_deref() != Some(dir.as_path())
            && let Err(err) = k.set_cpu_cgroup(tid, dir)
        {
            if err.raw_os_error() == Some(libc::ESRCH) {
                return Err(err);
            }
            cgroup_err = Some(io::Error::other(format!(
                "moving back to cgroup {}: {err}",
                dir.display()
            )));
        }
        if k.get_attr(tid)? != e.original {
            k.set_attr(tid, &e.original)?;
        }
        if let Some(cpus) = &e.affinity
            && k.affinity(tid)? != *cpus
        {
            k.set_affinity(tid, cpus)?;
        }
        if let Some(nice) = e.group_nice
            && k.group_nice(tid)? != Some(nice)
        {
            k.set_group_nice(tid, nice)?;
        }
        if e.ever_stopped {
            k.cont(tid)?;
        }
        match cgroup_err {
            Some(err) => Err(err),
            None => Ok(true),
        }
    })();
    match res {
        Err(err) if is_gone(&err) => Ok(false),
        r => r,
    }
}

#[cfg(test)]
mod tests;
