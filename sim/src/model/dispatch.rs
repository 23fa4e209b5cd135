//! The local CPU scheduler of a node (ClusterSchedSim's `DoScheduler`, with
//! Linux's classes since the policies act through them): real-time tasks
//! (boosts) by priority then FIFO, then time-sharing tasks by least virtual
//! runtime with a time slice, then SCHED_IDLE tasks; a context switch costs
//! CPU time whenever a CPU changes tasks.

use cosched_policy::local::SwitchOut;

use super::task::{Activity, Class, TaskIdx, class_of};
use super::{Calendar, Cluster, SimEvent};
use crate::executive::Ns;

impl Cluster {
    /// C activity: lets `node`'s CPUs pick what they run now.
    pub(super) fn dispatch(&mut self, node: u32, cal: &mut Calendar<SimEvent>) {
        self.account_node(node);
        self.update_min_vruntime(node);
        let woken = std::mem::take(&mut self.nodes[node as usize].woken);
        for cpu in 0..self.nodes[node as usize].cpus.len() as u32 {
            let c = &self.nodes[node as usize].cpus[cpu as usize];
            if c.incoming.is_some() || c.noise {
                continue;
            }
            let (current, resched) = (c.running, c.need_resched);
            let best = self.best_waiting(node);
            match (current, best) {
                (None, Some(b)) => self.start_switch(node, cpu, b, cal),
                (Some(cur), Some(b)) if self.beats(b, cur, resched, woken) => {
                    self.switch_out(cur, SwitchOut::Preempted);
                    self.start_switch(node, cpu, b, cal);
                }
                (Some(_), _) if resched => {
                    // Nobody better: a new slice for the same task.
                    let now = self.now;
                    let c = &mut self.nodes[node as usize].cpus[cpu as usize];
                    c.need_resched = false;
                    c.slice_start = now;
                    c.slice_end = Ns::MAX;
                }
                _ => {}
            }
        }
        self.arm_slices(node, cal);
    }

    fn update_min_vruntime(&mut self, node: u32) {
        let n = &self.nodes[node as usize];
        let least = n
            .tasks
            .iter()
            .map(|&t| &self.tasks[t as usize])
            .filter(|t| t.runnable() && class_of(t.effective) == Class::Fair)
            .map(|t| t.vruntime)
            .min();
        if let Some(least) = least {
            let n = &mut self.nodes[node as usize];
            n.min_vruntime = n.min_vruntime.max(least);
        }
    }

    /// The runnable task not on a CPU that the scheduler would pick.
    fn best_waiting(&self, node: u32) -> Option<TaskIdx> {
        self.nodes[node as usize]
            .tasks
            .iter()
            .copied()
            .filter(|&t| self.tasks[t as usize].waiting_for_cpu())
            .max_by(|&a, &b| self.order(a, b).then(b.cmp(&a)))
    }

    /// Scheduler preference: Greater = `a` runs first.
    fn order(&self, a: TaskIdx, b: TaskIdx) -> std::cmp::Ordering {
        let (ta, tb) = (&self.tasks[a as usize], &self.tasks[b as usize]);
        let (ca, cb) = (class_of(ta.effective), class_of(tb.effective));
        ca.cmp(&cb).then_with(|| match ca {
            Class::RealTime(_) => tb.rt_seq.cmp(&ta.rt_seq),
            Class::Fair | Class::Idle => tb.vruntime.cmp(&ta.vruntime),
        })
    }

    /// Does waiting `b` take the CPU from running `cur`?
    fn beats(&self, b: TaskIdx, cur: TaskIdx, resched: bool, woken: bool) -> bool {
        let (tb, tc) = (&self.tasks[b as usize], &self.tasks[cur as usize]);
        let (cb, cc) = (class_of(tb.effective), class_of(tc.effective));
        if cb != cc {
            return cb > cc;
        }
        match cb {
            Class::RealTime(_) => false,
            Class::Fair | Class::Idle => {
                if resched {
                    // The running task goes back behind equal ones.
                    tb.vruntime <= tc.vruntime
                } else {
                    woken && tb.vruntime + self.config.cluster.wakeup_granularity_ns < tc.vruntime
                }
            }
        }
    }

    fn start_switch(&mut self, node: u32, cpu: u32, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let cost = {
            let c = &self.nodes[node as usize].cpus[cpu as usize];
            let params = &self.config.cluster;
            let switch = if c.last == Some(t) {
                0
            } else {
                params.context_switch_ns
            };
            switch + self.tasks[t as usize].wake_cost
        };
        self.tasks[t as usize].wake_cost = 0;
        self.tasks[t as usize].incoming = true;
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        c.incoming = Some(t);
        c.token += 1;
        let token = c.token;
        if cost == 0 {
            self.switch_done(node, cpu, token, cal);
        } else {
            self.counters.context_switches += 1;
            self.counters.switch_ns += cost;
            cal.after(cost, SimEvent::SwitchDone { node, cpu, token });
        }
    }

    pub(super) fn switch_done(
        &mut self,
        node: u32,
        cpu: u32,
        token: u64,
        cal: &mut Calendar<SimEvent>,
    ) {
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        if c.token != token {
            return;
        }
        let Some(t) = c.incoming.take() else { return };
        self.tasks[t as usize].incoming = false;
        if !self.tasks[t as usize].runnable() {
            self.mark_dirty(node);
            return;
        }
        let now = self.now;
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        c.running = Some(t);
        c.last = Some(t);
        c.since = now;
        c.slice_start = now;
        // Set by `arm_slices` at the dispatch this switch triggers.
        c.slice_end = Ns::MAX;
        c.need_resched = false;
        self.tasks[t as usize].on_cpu = Some(cpu);
        self.hook_switch_in(t, cpu, cal);
        let task = &self.tasks[t as usize];
        let iteration = task.iteration;
        let ready = match task.activity {
            Activity::Woken => true,
            Activity::Spin => task.has_message(iteration),
            _ => false,
        };
        if ready {
            self.advance(t, cal);
            self.task_changed(t, cal);
        } else {
            self.rearm(node, cpu, cal);
        }
        // Another CPU may still be free for a second waiting task.
        self.mark_dirty(node);
    }
}
