//! Realising what was decided for a task: its target (level, cgroup, watch
//! flags), the plan from how it is realised now, the executor, and the
//! accounting of the change (metrics, the job's actions and reaction
//! latencies).
use std::collections::BTreeSet;

use cosched_policy::local::{Level, TaskWatch};

use super::{
    Engine, execute,
    plan::{self, KernelOp, Realisation, Target, TaskPlan},
};
use crate::{
    enforce,
    kernel::{Kernel, SchedAttr, is_gone},
    wakeup,
};

pub(super) fn level_name(level: Level) -> &'static str {
    match level {
        Level::Normal => "normal",
        Level::Boost { .. } => "boost",
        Level::Background => "background",
        Level::Demote => "demote",
        Level::Stop => "stop",
    }
}

/// How the kernel refuses SCHED_DEADLINE: EPERM (the task's affinity is
/// narrower than its root domain), EBUSY (the admission test: not enough
/// bandwidth left), EINVAL (parameters it does not take).
fn deadline_refused(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::EBUSY | libc::EINVAL)
    )
}

impl<K: Kernel> Engine<K> {
    /// Brings task `tid` to the level it must have now. `trigger`: the eBPF
    /// timestamp of the arrival that caused it (for the reaction latency).
    pub(super) fn realize(&mut self, tid: u32, trigger: Option<u64>) {
        self.realize_all(&[tid], trigger);
    }

    /// Brings every task of `tids` to the level it must have now, as one
    /// batch: each process gets at most one SIGSTOP or SIGCONT
    /// ([`plan::signal_each_process_once`]), and the tasks whose process is
    /// continued go first ([`plan::execution_order`]).
    pub(super) fn realize_all(&mut self, tids: &[u32], trigger: Option<u64>) {
        let mut prepared: Vec<(Target, Realisation)> = Vec::with_capacity(tids.len());
        let mut plans: Vec<TaskPlan> = Vec::with_capacity(tids.len());
        for &tid in tids {
            if let Some((target, from, plan)) = self.prepare(tid) {
                prepared.push((target, from));
                plans.push(plan);
            }
        }
        if plans.is_empty() {
            return;
        }
        let mut carriers = Vec::new();
        if plans.iter().any(|p| {
            p.ops
                .iter()
                .any(|o| matches!(o, KernelOp::Stop | KernelOp::Cont))
        }) {
            let held: BTreeSet<u32> = self
                .reg
                .tasks()
                .filter(|(_, s)| s.realised.level == Level::Stop)
                .map(|(_, s)| s.tgid)
                .collect();
            carriers = plan::signal_each_process_once(&mut plans, &held);
        }
        for i in plan::execution_order(&plans) {
            let (target, from) = prepared[i];
            let done = self.carry_out(&plans[i], from, &target, trigger);
            // The task carrying its process's signal failed before sending
            // it (a thread that just exited): the process's other tasks of
            // the batch are realised through that signal, so send it anyway.
            if !done && carriers.iter().any(|&(_, c)| c == i) {
                let p = &plans[i];
                let sent = if p.ops.contains(&KernelOp::Stop) {
                    self.k.stop(p.tgid)
                } else {
                    self.k.cont(p.tgid)
                };
                if let Err(e) = sent
                    && !is_gone(&e)
                {
                    tracing::warn!(pid = p.tgid, "cannot signal the process: {e}");
                }
            }
        }
    }

    /// What task `tid` must become and the plan from how it is realised
    /// now (None: gone, or nothing to change).
    fn prepare(&mut self, tid: u32) -> Option<(Target, Realisation, TaskPlan)> {
        let state = self.reg.task(tid).copied()?;
        let level = self.effective_level(tid);
        // The class overlay, not a message, ends what it gives an RT task.
        let watch = if self.under_rt_overlay(&state) {
            0
        } else {
            wakeup::watch_flags(TaskWatch::of(&self.interest, level, state.wanted))
        };
        let target = Target {
            level,
            group: self.wanted_group(tid, level),
            watch,
            deadline: self.deadline_for(&state, level),
        };
        let from = state.realised;
        let base = match self.base_attr(tid) {
            Ok(base) => base,
            Err(e) if is_gone(&e) => return None,
            Err(e) => {
                tracing::warn!(tid, "reading original attributes: {e}");
                return None;
            }
        };
        let ops = plan::plan(&from, &target, &base, self.cfg.agent_priority);
        if ops.is_empty() {
            return None;
        }
        Some((
            target,
            from,
            TaskPlan {
                tid,
                tgid: state.tgid,
                ops,
            },
        ))
    }

    /// Executes one task's plan and accounts for the change; false when it
    /// failed.
    fn carry_out(
        &mut self,
        plan: &TaskPlan,
        from: Realisation,
        target: &Target,
        trigger: Option<u64>,
    ) -> bool {
        let (tid, level) = (plan.tid, target.level);
        let mut realised = from;
        let result = execute::execute(
            &mut self.k,
            &mut self.ledger,
            self.cpu_groups.as_ref(),
            plan,
            &mut realised,
            target,
        );
        if let Some(s) = self.reg.task_mut(tid) {
            s.realised = realised;
        }
        let name = level_name(level);
        match result {
            Ok(()) if from.level != level => self.count_level_change(tid, level, trigger),
            Ok(()) => {
                if plan.ops.iter().any(|op| matches!(op, KernelOp::SetAttr(_))) {
                    self.metrics.actions.with_label_values(&["job-sched"]).inc();
                }
            }
            Err(e) if is_gone(&e) => return false,
            Err(e) if target.deadline.is_some() && deadline_refused(&e) => {
                self.refuse_deadline(tid, &e);
                self.realize(tid, trigger);
            }
            Err(e) => {
                self.metrics.action_errors.with_label_values(&[name]).inc();
                tracing::warn!(tid, level = name, "cannot apply policy level: {e}");
                return false;
            }
        }
        true
    }

    fn count_level_change(&mut self, tid: u32, level: Level, trigger: Option<u64>) {
        self.record_action(tid, level);
        self.metrics
            .actions
            .with_label_values(&[level_name(level)])
            .inc();
        let latency_us = trigger.map(|ts| self.k.now_ns().saturating_sub(ts) as f64 / 1e3);
        if let Some(us) = latency_us {
            self.metrics.reaction_latency.observe(us / 1e6);
        }
        let job = self.reg.task(tid).map(|s| s.job);
        if let Some(j) = job.and_then(|j| self.reg.job_mut(j)) {
            j.actions += 1;
            if level.is_boost() {
                j.boosts += 1;
            }
            if let Some(us) = latency_us {
                j.latencies.push(us);
            }
        }
    }

    /// The attributes a task runs with when the policy leaves it alone: its
    /// job's static request, or its original ones.
    fn base_attr(&mut self, tid: u32) -> std::io::Result<SchedAttr> {
        let job_sched = self
            .reg
            .task(tid)
            .and_then(|s| self.reg.job(s.job))
            .and_then(|j| j.sched);
        match job_sched {
            Some(req) => Ok(enforce::attr_for(&req)),
            None => self.ledger.original(&self.k, tid),
        }
    }
}
