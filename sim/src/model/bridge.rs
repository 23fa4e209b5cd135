//! The agent, simulated with its own code: the eBPF side's per-task
//! counters are kept at the same hooks and by the same rules
//! (`cosched_agent_common::episode`), an arrival or a spin start becomes a
//! ring-buffer report only when the eBPF side would report it
//! (`arrival_reported`, the `WATCH` flags of `TaskWatch`), and the agent's
//! own driver (`cosched_policy::driver::PolicyDriver`) turns reports and
//! counters into the policy's events: reports at once, everything else
//! (switches, receives, sends, spin starts of unwatched tasks) at its tick,
//! as the agent does (agent/src/engine/events.rs, driving.rs). The levels
//! the policy returns take effect after the agent's reaction delay, under
//! the gang overlay.

use cosched_agent_common::{TaskStats, arrival_reported, episode};
use cosched_policy::driver::wakeup;
use cosched_policy::local::{Level, Reason, SliceMembership, SwitchOut, TaskWatch, gang_overlay};

use super::task::{Activity, Class, TaskIdx, class_of, weight_of};
use super::{Calendar, Cluster, SimEvent};

impl Cluster {
    /// Schedules what the node's policy decided; returns when the agent is
    /// done making those level changes (None: the look changed nothing).
    fn take_actions(&mut self, node: u32, cal: &mut Calendar<SimEvent>) -> Option<u64> {
        let mut actions = self.nodes[node as usize].driver.take_actions();
        // A refusal changes no level: nothing to apply, no reaction.
        actions.retain(|a| matches!(a, cosched_policy::local::Action::SetLevel { .. }));
        if !actions.is_empty() {
            // One reaction for the decisions of one look, applied in the
            // order the agent took them.
            let c = &self.config.cluster;
            let (delay, tail) = (c.agent_delay_ns, c.agent_delay_tail_ns);
            let delay = if tail > 0 {
                delay + self.rng.exponential(tail as f64).round() as u64
            } else {
                delay
            };
            let n = &mut self.nodes[node as usize];
            n.agent_applied_at = (self.now + delay).max(n.agent_applied_at);
        }
        let at = self.nodes[node as usize].agent_applied_at;
        let done = (!actions.is_empty()).then_some(at);
        for action in actions {
            let cosched_policy::local::Action::SetLevel {
                task,
                level,
                reason,
            } = action
            else {
                continue;
            };
            cal.at(
                at,
                SimEvent::ApplyLevel {
                    task: task.0,
                    level,
                    reason,
                },
            );
        }
        self.rearm_tick(node, cal);
        done
    }

    /// Keeps one tick pending at the driver's `next_wakeup`.
    pub(super) fn rearm_tick(&mut self, node: u32, cal: &mut Calendar<SimEvent>) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        let mut next = n.driver.next_wakeup();
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
        if self.nodes[node as usize].tick_token != token {
            return;
        }
        self.nodes[node as usize].tick_at = None;
        self.agent_tick(node, cal);
    }

    /// The agent's policy tick: every managed task's counters and who holds
    /// the CPUs, through the driver.
    fn agent_tick(&mut self, node: u32, cal: &mut Calendar<SimEvent>) {
        self.counters.policy_events += 1;
        self.nodes[node as usize].last_tick = Some(self.now);
        self.account_node(node);
        let now = self.now;
        let tasks = self.nodes[node as usize].tasks.clone();
        let live: Vec<(u32, TaskStats)> = tasks.iter().map(|&t| (t, self.read_stats(t))).collect();
        let holders = self.holders(node);
        self.nodes[node as usize].driver.tick(now, &live, &holders);
        let done = self.take_actions(node, cal);
        self.agent_look_work(node, done, cal);
    }

    /// (CPU, managed task holding it) on `node`.
    fn holders(&self, node: u32) -> Vec<(u32, u32)> {
        self.nodes[node as usize]
            .cpus
            .iter()
            .enumerate()
            .filter_map(|(cpu, c)| c.running.map(|t| (cpu as u32, t)))
            .collect()
    }

    /// The task's counters as the agent reads them now: an on-CPU spinner
    /// polls all the time, so its latest empty wait is now.
    fn read_stats(&mut self, t: TaskIdx) -> TaskStats {
        self.poll_now(t);
        self.tasks[t as usize].stats
    }

    /// An on-CPU spinner's empty waits up to now.
    fn poll_now(&mut self, t: TaskIdx) {
        let gap = self.config.cluster.spin_gap_ns;
        let now = self.now;
        let task = &mut self.tasks[t as usize];
        if task.on_cpu.is_some() && task.activity == Activity::Spin && task.stats.on_cpu != 0 {
            // It polled at every instant since its last recorded empty
            // wait: every stretch between two polls was within the gap, so
            // the episode goes on and the whole time is spin. One empty
            // wait now would see a stretch longer than the gap (events are
            // sparser than polls) and start a new episode.
            let s = &mut task.stats;
            if s.spin_episode_start_ns != 0 && s.spin_last_ns != 0 {
                s.spin_ns += now.saturating_sub(s.spin_last_ns);
                s.spin_last_ns = now;
            }
            episode::empty_wait(&mut task.stats, now, gap);
        }
    }

    /// The policy's view of one task brought up to date (the agent's
    /// `observe_task`).
    fn observe(&mut self, node: u32, t: TaskIdx, on_cpu: bool) {
        let mut s = self.read_stats(t);
        if on_cpu {
            s.on_cpu = 1;
        }
        let now = self.now;
        self.nodes[node as usize].driver.observe(t, &s, now);
    }

    // ---- the eBPF hooks -------------------------------------------------

    /// sched_switch, `t` coming in on `cpu`.
    pub(super) fn hook_switch_in(&mut self, t: TaskIdx, cpu: u32, cal: &mut Calendar<SimEvent>) {
        let now = self.now;
        let s = &mut self.tasks[t as usize].stats;
        s.run_start_ns = now;
        s.last_run_start_ns = now;
        s.switches_in += 1;
        s.cpu = cpu;
        s.on_cpu = 1;
        let task = &self.tasks[t as usize];
        if task.activity == Activity::Spin && !task.has_message(task.iteration) {
            // It polls at once (a message waiting for it is received instead).
            self.hook_empty_wait(t, cal);
        }
    }

    /// sched_switch, `t` going out.
    pub(super) fn hook_switch_out(&mut self, t: TaskIdx, how: SwitchOut) {
        let (now, gap) = (self.now, self.config.cluster.spin_gap_ns);
        self.poll_now(t);
        let s = &mut self.tasks[t as usize].stats;
        match how {
            SwitchOut::Preempted => {
                s.switches_out_preempted += 1;
                s.last_out_preempted = 1;
                episode::preempted(s, now, gap);
            }
            SwitchOut::Voluntary => {
                s.switches_out_voluntary += 1;
                s.last_out_preempted = 0;
                episode::end(s, now, gap);
            }
        }
        if s.run_start_ns != 0 {
            s.oncpu_ns += now.saturating_sub(s.run_start_ns);
        }
        s.run_start_ns = 0;
        s.on_cpu = 0;
        s.last_switch_out_ns = now;
    }

    /// A receive that returned data.
    pub(super) fn hook_recv_ok(&mut self, t: TaskIdx) {
        let (now, gap) = (self.now, self.config.cluster.spin_gap_ns);
        self.poll_now(t);
        let s = &mut self.tasks[t as usize].stats;
        s.recv_ok += 1;
        s.last_recv_ok_ns = now;
        episode::end(s, now, gap);
    }

    /// A send.
    pub(super) fn hook_send(&mut self, t: TaskIdx) {
        let (now, gap) = (self.now, self.config.cluster.spin_gap_ns);
        self.poll_now(t);
        let s = &mut self.tasks[t as usize].stats;
        s.sends += 1;
        episode::end(s, now, gap);
    }

    /// An empty receive: a spin episode may start, reported when the agent
    /// watches the task's spin starts; a spin the policy wants to hear of
    /// is checked for when it would pass.
    pub(super) fn hook_empty_wait(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let (now, gap) = (self.now, self.config.cluster.spin_gap_ns);
        let node = self.tasks[t as usize].node;
        let report_ns = self.nodes[node as usize].settings.spin_report_ns;
        let task = &mut self.tasks[t as usize];
        task.stats.recv_empty += 1;
        let starts = episode::empty_wait(&mut task.stats, now, gap);
        if report_ns > 0 && task.stats.spin_reported == 0 && task.stats.on_cpu != 0 {
            let left = report_ns.saturating_sub(episode::episode_spin_ns(&task.stats));
            cal.after(left.max(1), SimEvent::SpinCheck(t));
        }
        if starts && task.watch & cosched_agent_common::watch_flags::SPIN_START != 0 {
            self.ring_spin_start(node, t, now, cal);
        }
    }

    /// A spinner may have passed the reported spin time.
    pub(super) fn spin_check(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let Some(task) = self.tasks.get(t as usize) else {
            return;
        };
        if task.on_cpu.is_none() || task.activity != Activity::Spin {
            return;
        }
        let node = task.node;
        self.poll_now(t);
        let report_ns = self.nodes[node as usize].settings.spin_report_ns;
        if episode::passed_report(&mut self.tasks[t as usize].stats, report_ns) {
            // SPIN_LONG: the agent ticks at once.
            self.counters.ring_reports += 1;
            self.agent_tick(node, cal);
        } else if self.tasks[t as usize].stats.spin_reported == 0 {
            let left =
                report_ns.saturating_sub(episode::episode_spin_ns(&self.tasks[t as usize].stats));
            cal.after(left.max(1), SimEvent::SpinCheck(t));
        }
    }

    /// sk_data_ready: a message for `t` arrived. Counted; reported (and
    /// handled by the agent at once) only when the eBPF side would.
    pub(super) fn hook_arrival(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let (now, gap) = (self.now, self.config.cluster.spin_gap_ns);
        self.poll_now(t);
        let task = &mut self.tasks[t as usize];
        task.stats.arrivals += 1;
        task.stats.last_arrival_ns = now;
        let node = task.node;
        let on_cpu = task.stats.on_cpu != 0;
        let waiting = cosched_agent_common::in_spin_episode(&task.stats, now, gap);
        let reported = arrival_reported(
            &self.nodes[node as usize].settings,
            task.watch,
            on_cpu,
            waiting,
            task.stats.last_out_preempted != 0,
        );
        if !reported || !self.nodes[node as usize].driver.active() {
            return;
        }
        self.counters.policy_events += 1;
        self.counters.ring_reports += 1;
        // As agent/src/engine/events.rs: who holds the CPUs, then the
        // receiver's sends, come before the decision.
        if !on_cpu && self.nodes[node as usize].driver.kind().boosts_on_arrival() {
            for (_, h) in self.holders(node) {
                self.observe(node, h, true);
            }
        }
        if self.nodes[node as usize].interest.sends_before_decisions {
            self.observe(node, t, false);
        }
        self.nodes[node as usize]
            .driver
            .arrival(t, now, on_cpu, waiting);
        let done = self.take_actions(node, cal);
        self.agent_look_work(node, done, cal);
    }

    fn ring_spin_start(&mut self, node: u32, t: TaskIdx, at: u64, cal: &mut Calendar<SimEvent>) {
        if !self.nodes[node as usize].driver.active() {
            return;
        }
        self.counters.policy_events += 1;
        self.counters.ring_reports += 1;
        if self.nodes[node as usize].interest.sends_before_decisions {
            self.observe(node, t, false);
        }
        self.nodes[node as usize].driver.spin_started(t, at);
        let done = self.take_actions(node, cal);
        self.agent_look_work(node, done, cal);
    }

    /// The agent starts managing `t` (its fork).
    pub(super) fn agent_task_added(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let task = &self.tasks[t as usize];
        let (node, job) = (task.node, task.job);
        let now = self.now;
        self.nodes[node as usize].driver.task_added(t, job, now);
        self.take_actions(node, cal);
    }

    /// `t` exited.
    pub(super) fn agent_task_exited(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let node = self.tasks[t as usize].node;
        let now = self.now;
        self.tasks[t as usize].stats.exited_ns = now;
        self.nodes[node as usize].driver.task_exited(t, now);
        self.take_actions(node, cal);
    }

    /// FCS: a gang slot started on `node` (the agent's `Enforcement::Slot`):
    /// `owner` is the first job the slice runs there.
    pub(super) fn agent_slot_started(
        &mut self,
        node: u32,
        owner: Option<u32>,
        until: u64,
        cal: &mut Calendar<SimEvent>,
    ) {
        let now = self.now;
        self.nodes[node as usize]
            .driver
            .slot_started(now, owner, until);
        self.take_actions(node, cal);
    }

    /// The agent applies a level the policy chose.
    pub(super) fn apply_level(&mut self, t: TaskIdx, level: Level, reason: Reason) {
        let Some(task) = self.tasks.get_mut(t as usize) else {
            return;
        };
        if task.activity == Activity::Done {
            return;
        }
        task.wanted = level;
        task.why = (level != Level::Normal).then_some((level, reason));
        task.actions += 1;
        if level.is_boost() {
            task.boosts += 1;
        }
        self.counters.level_changes += 1;
        self.refresh_level(t);
    }

    /// Recomputes the level in force (gang overlay over the policy's) and
    /// lets the scheduler act on a change.
    pub(super) fn refresh_level(&mut self, t: TaskIdx) {
        let strict = self.config.sched.stop_inactive;
        let task = &self.tasks[t as usize];
        let membership = task
            .in_slice
            .filter(|_| !self.fcs_slots)
            .map(|in_slice| SliceMembership { in_slice, strict });
        let effective = gang_overlay(membership).unwrap_or(task.wanted);
        let node = task.node;
        let watch = wakeup::watch_flags(TaskWatch::of(
            &self.nodes[node as usize].interest,
            effective,
            task.why,
        ));
        self.tasks[t as usize].watch = watch;
        let task = &self.tasks[t as usize];
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
                self.switch_out(t, SwitchOut::Voluntary);
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
