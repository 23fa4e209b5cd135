//! The agent's event → policy → action flow, simulated: every observation a
//! node's agent would make is fed to that node's `policy` crate local policy
//! as it happens; the levels it returns take effect after the agent's
//! reaction delay, under the gang overlay; ticks come when the policy asks.

use cosched_policy::local::{
    Action, CpuSnapshot, Event, Level, NodeSnapshot, SliceMembership, SwitchOut, TaskId,
    TaskSnapshot, gang_overlay,
};

use super::task::{Activity, Class, TaskIdx, class_of, weight_of};
use super::{Calendar, Cluster, SimEvent};

impl Cluster {
    /// Feeds one event to `node`'s policy and schedules what it decided.
    pub(super) fn feed(&mut self, node: u32, event: &Event<'_>, cal: &mut Calendar<SimEvent>) {
        self.counters.policy_events += 1;
        let mut actions = std::mem::take(&mut self.action_buf);
        self.nodes[node as usize]
            .policy
            .on_event(event, &mut actions);
        self.take_actions(node, &mut actions, cal);
        self.action_buf = actions;
    }

    fn take_actions(&mut self, node: u32, actions: &mut Vec<Action>, cal: &mut Calendar<SimEvent>) {
        let delay = self.config.cluster.agent_delay_ns;
        for action in actions.drain(..) {
            let Action::SetLevel { task, level, .. } = action;
            cal.after(
                delay,
                SimEvent::ApplyLevel {
                    task: task.0,
                    level,
                },
            );
        }
        self.rearm_tick(node, cal);
    }

    /// Keeps one tick pending at the policy's `next_wakeup`.
    fn rearm_tick(&mut self, node: u32, cal: &mut Calendar<SimEvent>) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        let mut next = n.policy.next_wakeup();
        // A policy that asks for a tick now again after its tick at this
        // very instant gets it a nanosecond later (no zero-time loop).
        if let (Some(at), Some(last)) = (next, n.last_tick)
            && at <= last
        {
            next = Some(last + 1);
        }
        let next = next.map(|at| at.max(now));
        if next == n.tick_at {
            return;
        }
        n.tick_at = next;
        n.tick_token += 1;
        if let Some(at) = next {
            cal.at(
                at,
                SimEvent::Tick {
                    node,
                    token: n.tick_token,
                },
            );
        }
    }

    pub(super) fn tick(&mut self, node: u32, token: u64, cal: &mut Calendar<SimEvent>) {
        let n = &mut self.nodes[node as usize];
        if n.tick_token != token {
            return;
        }
        n.tick_at = None;
        n.last_tick = Some(self.now);
        self.account_node(node);
        let snapshot = self.nodes[node as usize]
            .policy
            .uses_snapshots()
            .then(|| self.snapshot(node));
        let at = self.now;
        self.feed(
            node,
            &Event::Tick {
                at,
                snapshot: snapshot.as_ref(),
            },
            cal,
        );
    }

    /// The node as the agent reads it from the eBPF maps (exact here).
    fn snapshot(&self, node: u32) -> NodeSnapshot {
        let n = &self.nodes[node as usize];
        let tasks = n
            .tasks
            .iter()
            .map(|&t| {
                let task = &self.tasks[t as usize];
                TaskSnapshot {
                    task: TaskId(t),
                    on_cpu: task.on_cpu.is_some(),
                    spinning_since: task.spin_since,
                    pending_message: !task.inbox.is_empty(),
                    preempted: task.on_cpu.is_none()
                        && task.runnable()
                        && task.activity != Activity::Woken,
                    last_arrival_ns: task.last_arrival,
                    oncpu_ns: task.used.total(),
                    arrivals: task.arrivals,
                }
            })
            .collect();
        let cpus = n
            .cpus
            .iter()
            .enumerate()
            .map(|(cpu, c)| CpuSnapshot {
                cpu: cpu as u32,
                running: c.running.map(TaskId),
            })
            .collect();
        NodeSnapshot { tasks, cpus }
    }

    /// The agent applies a level the policy chose.
    pub(super) fn apply_level(&mut self, t: TaskIdx, level: Level, cal: &mut Calendar<SimEvent>) {
        let Some(task) = self.tasks.get_mut(t as usize) else {
            return;
        };
        if task.activity == Activity::Done {
            return;
        }
        task.wanted = level;
        self.counters.level_changes += 1;
        self.refresh_level(t, cal);
    }

    /// Recomputes the level in force (gang overlay over the policy's) and
    /// lets the scheduler act on a change.
    pub(super) fn refresh_level(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let strict = self.config.sched.stop_inactive;
        let task = &self.tasks[t as usize];
        let membership = task
            .in_slice
            .map(|in_slice| SliceMembership { in_slice, strict });
        let effective = gang_overlay(membership).unwrap_or(task.wanted);
        if effective == task.effective {
            return;
        }
        let (node, on_cpu) = (task.node, task.on_cpu);
        let was_stopped = task.effective == Level::Stop;
        let old_class = class_of(task.effective);
        if let Some(cpu) = on_cpu {
            self.account(node, cpu);
        }
        let floor = self.nodes[node as usize].min_vruntime;
        let task = &mut self.tasks[t as usize];
        let (old_w, new_w) = (weight_of(task.effective), weight_of(effective));
        if old_w != new_w && !was_stopped && effective != Level::Stop {
            // EEVDF's reweight keeps the task's lag (weight x virtual
            // distance from the queue's average) rather than its vruntime.
            let ahead = task.vruntime.saturating_sub(floor) as u128 * old_w as u128 / new_w as u128;
            let behind =
                floor.saturating_sub(task.vruntime) as u128 * old_w as u128 / new_w as u128;
            task.vruntime = (floor as u128 + ahead).saturating_sub(behind) as u64;
        }
        task.effective = effective;
        if let Class::RealTime(_) = class_of(effective)
            && old_class != class_of(effective)
        {
            self.rt_seq += 1;
            task.rt_seq = self.rt_seq;
        }
        if was_stopped {
            self.place_woken(t);
        }
        match on_cpu {
            Some(_) if effective == Level::Stop => {
                self.switch_out(t, SwitchOut::Voluntary, cal);
            }
            Some(_) => {} // `arm_slices` at the dispatch sets its slice.
            // SCHED_OTHER <-> SCHED_IDLE keeps the task in the fair class
            // at the same priority: `sched_setattr` does not check for
            // preemption (EEVDF), the change counts at the next tick.
            None if fair_reweight(old_class, class_of(effective)) && !was_stopped => {}
            None => self.nodes[node as usize].woken = true,
        }
        self.mark_dirty(node);
    }
}

/// A level change that only reweights a task inside Linux's fair class
/// (SCHED_OTHER and SCHED_IDLE), which is no preemption point.
fn fair_reweight(old: Class, new: Class) -> bool {
    matches!(
        (old, new),
        (Class::Fair | Class::Idle, Class::Fair | Class::Idle)
    ) && old != new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_idle_to_fair_changes_are_reweights_without_preemption() {
        assert!(fair_reweight(Class::Idle, Class::Fair));
        assert!(fair_reweight(Class::Fair, Class::Idle));
        assert!(!fair_reweight(Class::Fair, Class::Fair));
        assert!(!fair_reweight(Class::Idle, Class::RealTime(10)));
        assert!(!fair_reweight(Class::RealTime(10), Class::Fair));
    }
}
