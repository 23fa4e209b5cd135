//! A CPU of a node, and how the time of its running task is accounted.

use super::Cluster;
use super::task::{Activity, Class, TaskIdx, class_of, weight_of};
use crate::executive::Ns;

#[derive(Debug, Clone, Default)]
pub struct Cpu {
    pub running: Option<TaskIdx>,
    /// A context switch to this task is under way.
    pub incoming: Option<TaskIdx>,
    /// The task that ran last (switching back to it costs nothing).
    pub last: Option<TaskIdx>,
    /// Accounted up to here.
    pub since: Ns,
    /// The running task's time slice ends here (`Ns::MAX`: no slice, or
    /// nobody waits for the CPU: ClusterSchedSim's "interrupt" scheduler
    /// only wakes when a preemption may be due).
    pub slice_end: Ns,
    /// The running task's current slice began here.
    pub slice_start: Ns,
    pub token: u64,
    pub need_resched: bool,
    /// Other work holds the CPU (an interruption, see `noise.rs`).
    pub noise: bool,
    /// While `noise`: when the CPU is free again.
    pub noise_until: Ns,
    /// When the CPU last stopped running anything (a task or other work):
    /// while it has nothing to do, it has been halted since then.
    pub idle_since: Ns,
}

impl Cluster {
    /// Charges the running task of `cpu` for the time since it was last
    /// accounted.
    pub(super) fn account(&mut self, node: u32, cpu: u32) {
        let now = self.now;
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        let Some(t) = c.running else { return };
        let elapsed = now.saturating_sub(c.since);
        c.since = now;
        if elapsed == 0 {
            return;
        }
        let task = &mut self.tasks[t as usize];
        match &mut task.activity {
            Activity::Cpu { remaining, work } => {
                let done = elapsed.min(*remaining);
                *remaining -= done;
                if *work {
                    task.used.compute_ns += done;
                } else {
                    task.used.overhead_ns += done;
                }
                task.used.spin_ns += elapsed - done;
            }
            _ => task.used.spin_ns += elapsed,
        }
        if !task.effective.is_boost() {
            task.vruntime += elapsed * 1024 / weight_of(task.effective);
        }
    }

    /// Accounts every CPU of `node`.
    pub(super) fn account_node(&mut self, node: u32) {
        for cpu in 0..self.nodes[node as usize].cpus.len() as u32 {
            self.account(node, cpu);
        }
    }

    /// Where the running task's slice ends: never for a real-time task or
    /// while no task waits for a CPU of the node, else a quantum after the
    /// slice began (now at the earliest).
    fn wanted_slice_end(&self, node: u32, cpu: u32, best_waiting: Option<Class>) -> Ns {
        let c = &self.nodes[node as usize].cpus[cpu as usize];
        let Some(t) = c.running else { return Ns::MAX };
        let class = class_of(self.tasks[t as usize].effective);
        // Only a task of the same class can take the CPU when the slice
        // ends (a higher one preempts at once, a lower one never).
        let contested = best_waiting == Some(class);
        match class {
            Class::RealTime(_) => Ns::MAX,
            Class::Fair | Class::Idle if contested => self.tick_at_or_after(
                node,
                c.slice_start
                    .saturating_add(self.config.cluster.quantum_ns)
                    .max(self.now),
            ),
            Class::Fair | Class::Idle => Ns::MAX,
        }
    }

    /// The first scheduler tick of `node` at or after `t` (`t` itself
    /// without a tick).
    pub(super) fn tick_at_or_after(&self, node: u32, t: Ns) -> Ns {
        let tick = self.config.cluster.tick_ns;
        if tick == 0 || t == Ns::MAX {
            return t;
        }
        let phase = self.nodes[node as usize].tick_phase;
        if t <= phase {
            return phase;
        }
        let k = (t - phase).div_ceil(tick);
        phase.saturating_add(k.saturating_mul(tick))
    }

    /// Sets every CPU's slice end of `node` for the tasks waiting now.
    pub(super) fn arm_slices(&mut self, node: u32, cal: &mut super::Calendar<super::SimEvent>) {
        let best_waiting = self.nodes[node as usize]
            .tasks
            .iter()
            .map(|&t| &self.tasks[t as usize])
            .filter(|t| t.waiting_for_cpu())
            .map(|t| class_of(t.effective))
            .max();
        for cpu in 0..self.nodes[node as usize].cpus.len() as u32 {
            let end = self.wanted_slice_end(node, cpu, best_waiting);
            let c = &mut self.nodes[node as usize].cpus[cpu as usize];
            if c.running.is_some() && c.slice_end != end {
                c.slice_end = end;
                self.rearm(node, cpu, cal);
            }
        }
    }

    /// Re-schedules the CPU's next due instant (completion of the running
    /// burst or end of its slice), cancelling the previous one.
    pub(super) fn rearm(
        &mut self,
        node: u32,
        cpu: u32,
        cal: &mut super::Calendar<super::SimEvent>,
    ) {
        let now = self.now;
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        c.token += 1;
        let Some(t) = c.running else { return };
        let due = match self.tasks[t as usize].activity {
            Activity::Cpu { remaining, .. } => now.saturating_add(remaining).min(c.slice_end),
            Activity::Spin | Activity::Woken => c.slice_end,
            Activity::Sleeping(_) | Activity::Done => now,
        };
        if due != Ns::MAX {
            cal.at(
                due,
                super::SimEvent::CpuDue {
                    node,
                    cpu,
                    token: c.token,
                },
            );
        }
    }
}
