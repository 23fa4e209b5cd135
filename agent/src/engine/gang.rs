//! The gang overlay: while the coordinator runs gang slices, the tasks of
//! jobs outside the current slice are demoted (or stopped, in strict mode),
//! whatever the local policy wants for them.
use std::collections::HashSet;

use cosched_policy::{
    classes::FrameState,
    local::{Level, RowTask, SliceMembership, gang_overlay, rt_row_level},
};
use cosched_proto::job::JobId;

use super::{Engine, plan::is_low};
use crate::{cpu_group::CpuGroup, kernel::Kernel};

/// Which jobs the coordinator's current time slice runs on this node. Tasks of
/// other jobs only use idle time (demoted), or are stopped in strict mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gang {
    pub active: HashSet<JobId>,
    pub strict: bool,
}

impl<K: Kernel> Engine<K> {
    /// Enters, changes or leaves gang mode (None: every job may run, the
    /// local policy alone decides). Applies the change to every task.
    pub fn set_gang(&mut self, gang: Option<Gang>) {
        if self.gang == gang {
            return;
        }
        self.gang = gang;
        // Only notes the slice while a timeline recording runs.
        self.record_slice();
        // One batch: one signal per process, the incoming job's first.
        let tids = self.reg.task_ids();
        self.realize_all(&tids, None);
    }

    pub fn gang(&self) -> Option<&Gang> {
        self.gang.as_ref()
    }

    /// A strict gang switch was announced: notes in the restore journal,
    /// now and once for all, that every managed task may be stopped, so the
    /// switch itself writes nothing (see restore/mod.rs).
    pub fn prepare_to_stop(&mut self) {
        if let Err(e) = self.ledger.may_stop(self.reg.tasks().map(|(t, _)| t)) {
            // The switch's own write-ahead (`will_stop`) tries again.
            tracing::warn!("restore journal: {e}");
        }
    }

    /// A gang slot started (for FCS): `owner` runs until `until_ns`.
    pub fn slot_started(&mut self, owner: Option<JobId>, until_ns: u64) {
        let now = self.k.now_ns();
        self.driver.slot_started(now, owner, until_ns);
        self.apply_policy_actions(None);
        // The first slot wakes a dormant FCS: it acts from now on.
        self.update_own_priority();
    }

    /// The level a task must have now: the gang overlay first, then the
    /// class overlay over the policy.
    pub(super) fn effective_level(&self, tid: u32) -> Level {
        let Some(state) = self.reg.task(tid) else {
            return Level::Normal;
        };
        if self.daemons.contains(&state.tgid) {
            return Level::Normal;
        }
        let membership = self.gang.as_ref().map(|g| SliceMembership {
            in_slice: g.active.contains(&state.job),
            strict: g.strict,
        });
        if let Some(level) = gang_overlay(membership) {
            return level;
        }
        // 1GS: an RT job's processes run at a real-time priority in their
        // own rows (the row's end stops or demotes them again).
        if self.classes_held_off
            && let Some(level) = rt_row_level(
                membership,
                self.row_task(state.job, state.tgid),
                self.classes_band().hi(),
            )
        {
            return level;
        }
        self.class_level(
            state,
            state.wanted.map_or(Level::Normal, |(level, _)| level),
        )
    }

    /// How a 1GS row sees process `pid` of `job`.
    fn row_task(&self, job: JobId, pid: u32) -> RowTask {
        let Some(rt) = self.reg.job(job).and_then(|j| j.rt.as_ref()) else {
            return RowTask::NotRt;
        };
        if !rt.has_process(pid) {
            return RowTask::NotRt;
        }
        match rt.state(pid) {
            Some(FrameState::Throttled { .. }) => RowTask::RtOverBudget,
            _ => RowTask::Rt,
        }
    }

    /// Whether a 1GS row of an RT job runs here now, every process of the
    /// job past its start-up (its counter published): the agent's periodic
    /// work then waits for the row's end (`QuietRows`). Before that the
    /// RT tick must see the processes become ready at once.
    pub fn in_rt_row(&self) -> bool {
        if !self.classes_held_off {
            return false;
        }
        let Some(gang) = &self.gang else {
            return false;
        };
        gang.active.iter().any(|&id| {
            self.reg
                .job(id)
                .and_then(|j| j.rt.as_ref())
                .is_some_and(super::rt::counters_published)
        })
    }

    /// Where a task at `level` belongs: with demotion cgroups and while
    /// the gang overlay demotes (not stops) other jobs, `idle` for the low
    /// levels and `active` for the others; otherwise (None) its original
    /// cgroup. Outside demoting slices tasks keep their own cgroups (and
    /// autogroups): plain Linux with fine-grain spinning jobs sharing one
    /// cgroup without autogroups ran several times slower than with them
    /// (docs/benchmarks.md).
    /// Never for a task of a job that keeps its cgroups (launched by
    /// something else: moving it would take it out of the cgroup its
    /// launcher accounts and kills by); such tasks are demoted with
    /// attributes only (SCHED_IDLE and autogroup nice).
    pub(super) fn wanted_group(&self, tid: u32, level: Level) -> Option<CpuGroup> {
        self.cpu_groups.as_ref()?;
        let keeps = self
            .reg
            .task(tid)
            .and_then(|s| self.reg.job(s.job))
            .is_some_and(|j| j.membership.keeps_cgroups());
        if keeps {
            return None;
        }
        let demoting = self.gang.as_ref().is_some_and(|g| !g.strict);
        demoting.then_some(if is_low(level) {
            CpuGroup::Idle
        } else {
            CpuGroup::Active
        })
    }
}
