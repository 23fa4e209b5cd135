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
    /// The running task's time slice ends here (`Ns::MAX`: no slice).
    pub slice_end: Ns,
    pub token: u64,
    pub need_resched: bool,
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

    /// The slice a task gets when it starts running at its level.
    pub(super) fn slice_end_for(&self, task: TaskIdx) -> Ns {
        match class_of(self.tasks[task as usize].effective) {
            Class::RealTime(_) => Ns::MAX,
            Class::Fair | Class::Idle => self.now.saturating_add(self.config.cluster.quantum_ns),
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
