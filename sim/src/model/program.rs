//! Tasks running their programs: compute, I/O, send, receive (spinning or
//! blocking), and the events that move them on (ClusterSchedSim §3.2,
//! `DoCompute`, `DoIO`, `DoSend`, `DoReceive`).

use cosched_policy::local::SwitchOut;

use super::task::{Activity, Class, Phase, Sleep, TaskIdx, class_of};
use super::{Calendar, Cluster, SimEvent};
use crate::workload::RecvMode;

impl Cluster {
    /// Moves `t` through its program from its current phase until it needs
    /// CPU time, sleeps, waits for a message or is done.
    pub(super) fn advance(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let params = self.config.cluster.clone();
        loop {
            let task = &self.tasks[t as usize];
            let job = &self.jobs[task.job as usize];
            let spec = &job.spec;
            let (rank, iteration) = (task.rank, task.iteration);
            match task.phase {
                Phase::Compute => {
                    let compute = spec.compute_of(rank, iteration);
                    let task = &mut self.tasks[t as usize];
                    task.phase = Phase::Io;
                    if compute > 0 {
                        task.activity = Activity::Cpu {
                            remaining: compute,
                            work: true,
                        };
                        return;
                    }
                }
                Phase::Io => {
                    let io = spec.io_ns;
                    let receives_first = spec.pattern.receives_first(rank);
                    let task = &mut self.tasks[t as usize];
                    task.phase = if receives_first {
                        Phase::Recv(0)
                    } else {
                        Phase::Send(0)
                    };
                    if io > 0 {
                        // The sleeper is runnable a wakeup latency after
                        // its I/O completes, like a woken receiver; its
                        // timer fires the slack late unless it runs at
                        // real-time level.
                        let slack = match class_of(task.effective) {
                            Class::RealTime(_) => 0,
                            Class::Fair | Class::Idle => params.timer_slack_ns,
                        };
                        task.activity = Activity::Sleeping(Sleep::Io);
                        cal.after(io + slack + params.wakeup_latency_ns, SimEvent::IoDone(t));
                        return;
                    }
                }
                Phase::Send(k) => {
                    let count = job.dests[rank as usize].len() as u32;
                    if k >= count {
                        if spec.pattern.receives_first(rank) {
                            self.end_iteration(t);
                        } else {
                            self.tasks[t as usize].phase = Phase::Recv(0);
                        }
                        continue;
                    }
                    let task = &mut self.tasks[t as usize];
                    task.phase = Phase::Sent(k);
                    if params.send_overhead_ns > 0 {
                        task.activity = Activity::Cpu {
                            remaining: params.send_overhead_ns,
                            work: false,
                        };
                        return;
                    }
                }
                Phase::Sent(k) => {
                    let dest_rank = job.dests[rank as usize][k as usize];
                    let dest = job.tasks[dest_rank as usize];
                    let bytes = spec.message_bytes;
                    self.tasks[t as usize].phase = Phase::Send(k + 1);
                    self.send(dest, iteration, bytes, cal);
                    self.hook_send(t);
                }
                Phase::Recv(k) => {
                    let expected = job.dests[rank as usize].len() as u32;
                    let recv = spec.recv;
                    if k >= expected {
                        if spec.pattern.receives_first(rank) {
                            self.tasks[t as usize].phase = Phase::Send(0);
                        } else {
                            self.end_iteration(t);
                        }
                        continue;
                    }
                    let task = &mut self.tasks[t as usize];
                    if task.take_message(iteration) {
                        task.phase = Phase::Recv(k + 1);
                        task.spin_since = None;
                        self.hook_recv_ok(t);
                        if params.recv_overhead_ns > 0 {
                            self.tasks[t as usize].activity = Activity::Cpu {
                                remaining: params.recv_overhead_ns,
                                work: false,
                            };
                            return;
                        }
                        continue;
                    }
                    let was_spinning = task.activity == Activity::Spin;
                    match recv {
                        RecvMode::Spin => {
                            task.activity = Activity::Spin;
                            if !was_spinning {
                                task.spin_since = Some(self.now);
                                self.hook_empty_wait(t, cal);
                            }
                        }
                        RecvMode::Block => task.activity = Activity::Sleeping(Sleep::Message),
                    }
                    return;
                }
                Phase::Done => {
                    self.tasks[t as usize].activity = Activity::Done;
                    return;
                }
            }
        }
    }

    /// `t` sent and received everything of its iteration.
    fn end_iteration(&mut self, t: TaskIdx) {
        let iterations = self.jobs[self.tasks[t as usize].job as usize]
            .spec
            .iterations;
        let task = &mut self.tasks[t as usize];
        task.iteration += 1;
        task.phase = if task.iteration >= iterations {
            Phase::Done
        } else {
            Phase::Compute
        };
    }

    /// Hands a message to the network (ClusterSchedSim's interconnect: latency,
    /// then the receiving NIC's DMA, one message at a time).
    fn send(&mut self, dest: TaskIdx, iteration: u32, bytes: u64, cal: &mut Calendar<SimEvent>) {
        let params = &self.config.cluster;
        let transfer = params.transfer_ns(bytes);
        let ready = self.now + params.net_latency_ns;
        let node = &mut self.nodes[self.tasks[dest as usize].node as usize];
        let delivered = ready.max(node.nic_free_at) + transfer;
        node.nic_free_at = delivered;
        self.counters.messages += 1;
        cal.at(
            delivered,
            SimEvent::Delivered {
                task: dest,
                iteration,
            },
        );
    }

    /// After `t`'s activity changed: keeps its CPU's timer right, gives the
    /// CPU up when it cannot run any more, and lets the node reschedule.
    pub(super) fn task_changed(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let task = &self.tasks[t as usize];
        let node = task.node;
        if task.activity == Activity::Done {
            self.finish_task(t, cal);
            return;
        }
        match task.on_cpu {
            Some(cpu) if task.runnable() => self.rearm(node, cpu, cal),
            Some(cpu) => {
                self.account(node, cpu);
                self.switch_out(t, SwitchOut::Voluntary);
                self.mark_dirty(node);
            }
            None => {
                if task.runnable() {
                    self.nodes[node as usize].woken = true;
                }
                self.mark_dirty(node);
            }
        }
    }

    /// Takes `t` off its CPU and tells the policy.
    pub(super) fn switch_out(&mut self, t: TaskIdx, how: SwitchOut) {
        if self.tasks[t as usize].on_cpu.is_some() {
            self.hook_switch_out(t, how);
        }
        let task = &mut self.tasks[t as usize];
        let Some(cpu) = task.on_cpu.take() else {
            return;
        };
        let node = task.node;
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        c.running = None;
        c.need_resched = false;
        c.token += 1;
        c.idle_since = self.now;
    }

    /// A sleeper woke: if a CPU of its node has nothing to do, that CPU
    /// was halted and must be woken first (`idle_wakeup_ns`, and more after
    /// a long halt: `ClusterParams::idle_wakeup_after`); else the wakeup interrupts a busy
    /// CPU (`busy_wakeup_ns`).
    fn note_wake(&mut self, t: TaskIdx) {
        let node = self.tasks[t as usize].node;
        // The CPU that halted last (the shortest halt), if any.
        let halted_since = self.nodes[node as usize]
            .cpus
            .iter()
            .filter(|c| c.running.is_none() && c.incoming.is_none() && !c.noise)
            .map(|c| c.idle_since)
            .max();
        let params = &self.config.cluster;
        self.tasks[t as usize].wake_cost = match halted_since {
            Some(since) => params.idle_wakeup_after(self.now.saturating_sub(since)),
            None => params.busy_wakeup_ns,
        };
    }

    /// A task became runnable after sleeping: CFS places it near the node's
    /// least-run task (sleeper credit).
    pub(super) fn place_woken(&mut self, t: TaskIdx) {
        let credit = self.config.cluster.sleeper_credit_ns;
        let task = &self.tasks[t as usize];
        let floor = self.nodes[task.node as usize]
            .min_vruntime
            .saturating_sub(credit);
        let task = &mut self.tasks[t as usize];
        task.vruntime = task.vruntime.max(floor);
    }

    pub(super) fn cpu_due(
        &mut self,
        node: u32,
        cpu: u32,
        token: u64,
        cal: &mut Calendar<SimEvent>,
    ) {
        let c = &self.nodes[node as usize].cpus[cpu as usize];
        if c.token != token {
            return;
        }
        let Some(t) = c.running else { return };
        self.account(node, cpu);
        if matches!(
            self.tasks[t as usize].activity,
            Activity::Cpu { remaining: 0, .. }
        ) {
            self.advance(t, cal);
            // The task may have left the CPU (a policy event's level change
            // is applied later, so it is still here).
            self.task_changed(t, cal);
        }
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        if c.running == Some(t) && self.now >= c.slice_end {
            c.need_resched = true;
            self.mark_dirty(node);
        }
    }

    pub(super) fn io_done(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        if self.tasks[t as usize].activity != Activity::Sleeping(Sleep::Io) {
            return;
        }
        self.place_woken(t);
        self.note_wake(t);
        self.advance(t, cal);
        self.task_changed(t, cal);
    }

    pub(super) fn delivered(&mut self, t: TaskIdx, iteration: u32, cal: &mut Calendar<SimEvent>) {
        let task = &mut self.tasks[t as usize];
        task.add_message(iteration);
        task.last_arrival = self.now;
        task.arrivals += 1;
        let (node, on_cpu) = (task.node, task.on_cpu);
        let waits_for_it = matches!(task.phase, Phase::Recv(_)) && task.iteration == iteration;
        self.hook_arrival(t, cal);
        if !waits_for_it {
            return;
        }
        let task = &mut self.tasks[t as usize];
        match (task.activity, on_cpu) {
            (Activity::Spin, Some(cpu)) => {
                self.account(node, cpu);
                self.advance(t, cal);
                self.task_changed(t, cal);
            }
            (Activity::Sleeping(Sleep::Message), _) if !task.wake_pending => {
                task.wake_pending = true;
                cal.after(self.config.cluster.wakeup_latency_ns, SimEvent::Wakeup(t));
            }
            _ => {}
        }
    }

    pub(super) fn wakeup(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let task = &mut self.tasks[t as usize];
        task.wake_pending = false;
        if task.activity != Activity::Sleeping(Sleep::Message) {
            return;
        }
        task.activity = Activity::Woken;
        self.place_woken(t);
        self.note_wake(t);
        self.task_changed(t, cal);
    }

    /// The task ran its last iteration.
    fn finish_task(&mut self, t: TaskIdx, cal: &mut Calendar<SimEvent>) {
        let task = &self.tasks[t as usize];
        let (node, job) = (task.node, task.job);
        if let Some(cpu) = task.on_cpu {
            self.account(node, cpu);
            self.switch_out(t, SwitchOut::Voluntary);
        }
        self.agent_task_exited(t, cal);
        let n = &mut self.nodes[node as usize];
        n.tasks.retain(|&x| x != t);
        self.mark_dirty(node);
        let run = &mut self.jobs[job as usize];
        run.done_tasks += 1;
        if run.done_tasks as usize == run.tasks.len() {
            run.end = Some(self.now);
            self.finished.push_back(job);
        }
    }
}
