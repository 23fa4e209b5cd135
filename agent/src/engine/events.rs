//! The eBPF ring: forks, exits, and the arrivals, spin starts and long spins
//! the policy asked to hear at once.
use cosched_agent_common::{event_flags, event_kind};
use cosched_proto::job::JobId;

use super::{Engine, plan::Realisation};
use crate::{
    cpu_group::CpuGroup,
    kernel::{Kernel, is_gone},
};
use cosched_policy::local::Level;

impl<K: Kernel> Engine<K> {
    /// Takes every record queued in the eBPF ring and handles it. The
    /// daemon calls this once per pass of its loop, whatever woke it.
    pub fn drain_events(&mut self) {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        if let Err(e) = self.k.drain_events(&mut events) {
            tracing::warn!("draining eBPF events: {e}");
        }
        let now_ns = self.k.now_ns();
        for ev in &events {
            self.metrics.count_event(ev.kind);
            match ev.kind {
                event_kind::FORK => self.on_fork(ev.tid, ev.arg as u32, ev.job_id),
                event_kind::EXIT => self.on_exit(ev.tid, now_ns),
                event_kind::ARRIVAL if self.driver.active() => {
                    let on_cpu = ev.flags & event_flags::TASK_ON_CPU != 0;
                    let spinning = ev.flags & event_flags::TASK_SPINNING != 0;
                    if !on_cpu && self.driver.kind().boosts_on_arrival() {
                        self.observe_cpu_holders();
                    }
                    // What the receiver did up to now (its sends) comes
                    // before a boost this arrival may give it.
                    if self.interest.sends_before_decisions {
                        self.observe_task(ev.tid);
                    }
                    self.driver.arrival(ev.tid, ev.ts_ns, on_cpu, spinning);
                    self.apply_policy_actions(Some(ev.ts_ns));
                }
                event_kind::SPIN_START if self.driver.active() => {
                    // Its sends since the last look come before the wait.
                    if self.interest.sends_before_decisions {
                        self.observe_task(ev.tid);
                    }
                    self.driver.spin_started(ev.tid, ev.ts_ns);
                    self.apply_policy_actions(None);
                }
                // A spin passed the policy's threshold: a tick now (every
                // counter, who holds the CPUs) lets the policy block it at
                // once, and restarts the quiet tick's interval.
                event_kind::SPIN_LONG if self.driver.active() => {
                    tracing::debug!(tid = ev.tid, spun_us = ev.arg / 1_000, "long spin reported");
                    self.policy_tick();
                }
                _ => {}
            }
        }
        self.events = events;
    }

    /// A managed task forked; the fork tracepoint already added the child
    /// to the eBPF map.
    fn on_fork(&mut self, parent: u32, child: u32, job: JobId) {
        let tgid = self.k.tgid(child).unwrap_or(0);
        if self.reg.job(job).is_none() {
            // Job unknown (forgotten meanwhile): stop tracking the child.
            let _ = self.k.untrack(child);
            return;
        }
        if self.reg.task(child).is_some() {
            // Already taken (a tree adopted after the fork): nothing to add.
            return;
        }
        match self.ledger.inherit(&self.k, child, parent) {
            Ok(_) => {}
            Err(e) if is_gone(&e) => {}
            Err(e) => tracing::warn!(child, parent, "recording inherited attributes: {e}"),
        }
        // The child runs with what it inherited; in `idle` it also has a
        // low level's attributes. realize() then keeps or undoes both.
        let mut realised = Realisation::untouched(self.k.get_attr(child).unwrap_or_default());
        if let Some(g) = &self.cpu_groups {
            match self.k.cpu_cgroup(child).ok().flatten() {
                Some(dir) if dir == g.idle => {
                    realised.group = Some(CpuGroup::Idle);
                    realised.level = Level::Demote;
                }
                Some(dir) if dir == g.active => realised.group = Some(CpuGroup::Active),
                _ => {}
            }
        }
        self.reg.add_task(job, child, tgid, realised);
        let now = self.k.now_ns();
        self.driver.task_added(child, job, now);
        self.apply_policy_actions(None);
        if child == tgid {
            // A new process of the job: of an RT job, another RT process.
            self.rt_process_added(job, child);
        }
        self.realize(child, None);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
    }

    pub(super) fn on_exit(&mut self, tid: u32, now_ns: u64) {
        self.forget_task(tid, now_ns);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
    }
}
