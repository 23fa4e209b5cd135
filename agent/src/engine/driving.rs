//! Driving the local policy: its ticks over the task counters, what runs on
//! the node's CPUs, and taking its decisions.
use cosched_agent_common::TaskStats;
use cosched_policy::local::{Action, Level};

use super::Engine;
use crate::kernel::Kernel;

/// A node CPU and the managed task holding it.
type CpuHolder = (u32, u32);

/// How far behind schedule a policy tick must be to count as late.
const LATE_TICK_NS: u64 = 20_000_000;

impl<K: Kernel> Engine<K> {
    /// When the policy, or the RT tick (frame counters and the class
    /// decision, while RT processes are managed), next needs
    /// [`Self::policy_tick`] (CLOCK_MONOTONIC ns).
    pub fn next_policy_tick(&self) -> Option<u64> {
        if self.reg.task_count() == 0 {
            // Nothing to look at: a task adopted later starts the ticks.
            return None;
        }
        match (self.driver.next_wakeup(), self.next_rt_tick()) {
            (Some(policy), Some(rt)) => Some(policy.min(rt)),
            (policy, rt) => policy.or(rt),
        }
    }

    /// The policy's observation tick: counters of the managed tasks and who
    /// runs on the node's CPUs, then the policy's timers; and the RT tick
    /// when it is due.
    pub fn policy_tick(&mut self) {
        let now = self.k.now_ns();
        let rt_due = self.next_rt_tick().is_some_and(|due| due <= now);
        let policy = self.driver.active();
        if !policy && !rt_due {
            return;
        }
        if policy {
            self.note_late_tick(now);
        }
        let (live, holders) = self.live_stats();
        if policy {
            trace_tick_view(now, &live, &holders);
            self.driver.tick(now, &live, &holders);
            self.apply_policy_actions(None);
            tracing::trace!(
                next_in_us = self
                    .driver
                    .next_wakeup()
                    .map(|t| t.saturating_sub(now) / 1_000),
                "policy tick done"
            );
            // FCS turns dormant at a tick (its last slot's grace passed).
            self.update_own_priority();
        }
        if rt_due {
            self.rt_tick(now, &live);
        }
    }

    /// The counters of the live managed tasks, and who holds the node's
    /// CPUs (a task the agent preempted to look counts as on its CPU).
    pub(super) fn live_stats(&self) -> (Vec<(u32, TaskStats)>, Vec<CpuHolder>) {
        // One lookup per managed task (walking the map would cost two
        // syscalls per entry plus one): this runs every tick.
        let mut live = Vec::with_capacity(self.reg.task_count());
        for (tid, _) in self.reg.tasks() {
            match self.k.task_stat(tid) {
                Ok(Some(s)) if s.exited_ns == 0 => live.push((tid, s)),
                Ok(_) => {}
                Err(e) => tracing::warn!(tid, "reading task counters: {e}"),
            }
        }
        let holders = self.cpu_holders();
        for (tid, s) in &mut live {
            if holders.iter().any(|(_, h)| h == tid) {
                s.on_cpu = 1;
            }
        }
        (live, holders)
    }

    /// A tick far behind its schedule means the agent itself did not get
    /// its CPU (real-time throttling, a higher-priority task, a blocking
    /// call) or its loop did not run the tick: every decision waited that
    /// long. Counted and logged.
    fn note_late_tick(&mut self, now: u64) {
        let last = self.driver.last_tick();
        let due = last.saturating_add(self.driver.tick_ns());
        let late_ns = now.saturating_sub(due);
        if last != 0 && late_ns > LATE_TICK_NS {
            self.metrics.late_ticks.inc();
            tracing::warn!(
                late_ms = late_ns as f64 / 1e6,
                "policy tick ran late: the agent did not get its CPU"
            );
        }
    }

    /// Refreshes the policy's view of the managed tasks running on the node's
    /// CPUs (spinning or computing right now), so that an arrival for another
    /// task is judged against what the CPU holder is doing at this instant.
    pub(super) fn observe_cpu_holders(&mut self) {
        for (_, tid) in self.cpu_holders() {
            if let Ok(Some(mut s)) = self.k.task_stat(tid) {
                s.on_cpu = 1;
                let now = self.k.now_ns();
                self.driver.observe(tid, &s, now);
            }
        }
    }

    /// Brings the policy's view of one managed task up to date from its
    /// counters.
    pub(super) fn observe_task(&mut self, tid: u32) {
        if self.reg.task(tid).is_none() {
            return;
        }
        if let Ok(Some(s)) = self.k.task_stat(tid) {
            let now = self.k.now_ns();
            self.driver.observe(tid, &s, now);
        }
    }

    /// The managed task each node CPU runs, looking through the agent itself:
    /// when the agent holds a CPU (it is the one looking), the task it
    /// preempted is the one that holds it for scheduling purposes.
    fn cpu_holders(&self) -> Vec<(u32, u32)> {
        let me = self.k.own_tid();
        let slots = self.k.cpu_slots(&self.node_cpus()).unwrap_or_default();
        slots
            .into_iter()
            .filter_map(|(cpu, slot)| {
                let tid = if slot.tid == me {
                    slot.prev_tid
                } else {
                    slot.tid
                };
                self.reg.task(tid).map(|_| (cpu, tid))
            })
            .collect()
    }

    /// Applies what the policy decided. `trigger` is the eBPF timestamp of
    /// the arrival that caused the decisions, for the reaction latency.
    /// Every decision, a refused boost included, is counted by its reason
    /// and noted in a timeline recording.
    pub(super) fn apply_policy_actions(&mut self, trigger: Option<u64>) {
        for action in self.driver.take_actions() {
            let reason = action.reason();
            tracing::debug!(
                tid = action.task().0,
                action = ?action,
                "policy decision"
            );
            self.metrics
                .decisions
                .with_label_values(&[reason.as_str()])
                .inc();
            self.record_decision(action.task().0, reason.as_str());
            let Action::SetLevel { task, level, .. } = action else {
                continue;
            };
            let Some(state) = self.reg.task_mut(task.0) else {
                continue;
            };
            state.wanted = (level != Level::Normal).then_some((level, reason));
            self.realize(task.0, trigger);
        }
    }
}

/// What a policy tick reads, task by task (`COSCHED_LOG=…=trace`): the
/// counters the policy's view of each task comes from, for diagnosing a
/// decision that did (not) come.
fn trace_tick_view(now: u64, live: &[(u32, TaskStats)], holders: &[CpuHolder]) {
    if !tracing::enabled!(tracing::Level::TRACE) {
        return;
    }
    let ago = |t: u64| (t != 0).then(|| now.saturating_sub(t) / 1_000);
    for (tid, s) in live {
        tracing::trace!(
            tid,
            on_cpu = s.on_cpu,
            holder = holders.iter().any(|(_, h)| h == tid),
            episode_start_us_ago = ago(s.spin_episode_start_ns),
            last_wait_us_ago = ago(s.spin_last_ns),
            gap_oncpu_us = s.gap_oncpu_ns / 1_000,
            episode_spin_us = cosched_agent_common::episode::episode_spin_ns(s) / 1_000,
            pending = s.message_pending(),
            arrival_us_ago = ago(s.last_arrival_ns),
            recv_ok_us_ago = ago(s.last_recv_ok_ns),
            found_empty_us_ago = ago(s.last_found_empty_ns),
            wait_end_us_ago = ago(s.last_wait_end_ns),
            preempted = s.last_out_preempted,
            voluntary_outs = s.switches_out_voluntary,
            "tick reads"
        );
    }
}
