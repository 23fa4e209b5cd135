//! Other work on the nodes (kernel threads, daemons, interrupts): at random
//! instants it takes a CPU for a while. A time-sharing task running there is
//! switched out and the scheduler picks again when the CPU is free, by
//! virtual runtime: this is what lets two uncoordinated nodes' rotations of
//! spinning tasks drift out of (and into) step, as they do on real machines.
//!
//! The agent's own work at a gang slice switch takes the CPU the same way,
//! at real-time priority (above every task it manages).

use cosched_policy::local::SwitchOut;

use super::task::{Class, class_of};
use super::{Calendar, Cluster, SimEvent, cal_noise, noise_gap};
use crate::executive::Ns;

impl Cluster {
    pub(super) fn noise(&mut self, node: u32, cpu: u32, cal: &mut Calendar<SimEvent>) {
        if self.config.cluster.noise_per_s > 0.0 {
            let gap = noise_gap(&self.config.cluster, &mut self.rng);
            cal_noise(cal, self.now.saturating_add(gap), node, cpu);
        }
        let c = &self.nodes[node as usize].cpus[cpu as usize];
        if c.noise {
            return;
        }
        // Normal-priority work does not interrupt a real-time task.
        let holder = c.running.or(c.incoming);
        if let Some(t) = holder
            && matches!(
                class_of(self.tasks[t as usize].effective),
                Class::RealTime(_)
            )
        {
            self.counters.noise_held_off += 1;
            return;
        }
        let c = &self.config.cluster;
        // Drawn only with long interruptions configured, so runs without
        // them keep their random sequence.
        let cost = if c.noise_long_share > 0.0 && self.rng.chance(c.noise_long_share) {
            c.noise_long_ns
        } else {
            c.noise_ns
        };
        self.counters.noise += 1;
        self.counters.noise_ns += cost;
        self.interrupt(node, cpu, cost, cal);
    }

    /// The agent's work at a slice switch: it takes `node`'s first CPU for
    /// `slice_switch_cpu_ns`, whatever runs there (the agent's real-time
    /// priority is above its tasks'), after other work already holding it.
    pub(super) fn agent_switch_work(&mut self, node: u32, cal: &mut Calendar<SimEvent>) {
        let cost = self.config.cluster.slice_switch_cpu_ns;
        self.agent_work(node, cost, cal);
    }

    /// The agent's work at one look of an acting policy (`agent_look_cpu_ns`).
    /// A look that changes levels holds the CPU until its last change is
    /// done (`done_at`: the agent is woken, reads, decides and calls
    /// `sched_setattr` on that CPU), so the changes are made while the
    /// ranks are off it and the kernel picks afresh when the agent leaves:
    /// a task it returned from SCHED_IDLE competes at once, not only at the
    /// next tick. A look that changes nothing takes the CPU at once.
    pub(super) fn agent_look_work(
        &mut self,
        node: u32,
        done_at: Option<Ns>,
        cal: &mut Calendar<SimEvent>,
    ) {
        if !self.nodes[node as usize].driver.acting() {
            return;
        }
        let cost = self.config.cluster.agent_look_cpu_ns;
        match done_at {
            // Scheduled after the look's `ApplyLevel`s, so at `done_at` the
            // levels change before the CPU is free again.
            Some(at) if cost > 0 && at > self.now.saturating_add(cost) => {
                cal.at(at - cost, SimEvent::AgentLook { node });
            }
            _ => self.agent_work(node, cost, cal),
        }
    }

    /// The burst of a look that changes levels (see `agent_look_work`).
    pub(super) fn agent_look_burst(&mut self, node: u32, cal: &mut Calendar<SimEvent>) {
        let cost = self.config.cluster.agent_look_cpu_ns;
        self.agent_work(node, cost, cal);
    }

    /// The agent takes `node`'s first CPU for `cost`.
    fn agent_work(&mut self, node: u32, cost: Ns, cal: &mut Calendar<SimEvent>) {
        if cost == 0 {
            return;
        }
        self.counters.agent_switch_ns += cost;
        let c = &mut self.nodes[node as usize].cpus[0];
        if c.noise {
            c.noise_until += cost;
            let until = c.noise_until;
            cal.at(until, SimEvent::NoiseEnd { node, cpu: 0 });
            return;
        }
        self.interrupt(node, 0, cost, cal);
    }

    /// Other work takes `cpu` for `cost` from now.
    fn interrupt(&mut self, node: u32, cpu: u32, cost: Ns, cal: &mut Calendar<SimEvent>) {
        self.account(node, cpu);
        let c = &self.nodes[node as usize].cpus[cpu as usize];
        let (running, incoming) = (c.running, c.incoming);
        if let Some(t) = running {
            self.switch_out(t, SwitchOut::Preempted);
        }
        if let Some(t) = incoming {
            self.tasks[t as usize].incoming = false;
        }
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        c.incoming = None;
        c.token += 1;
        c.noise = true;
        c.noise_until = self.now + cost;
        // Whatever runs next pays a context switch.
        c.last = None;
        cal.after(cost, SimEvent::NoiseEnd { node, cpu });
        self.mark_dirty(node);
    }

    pub(super) fn noise_end(&mut self, node: u32, cpu: u32) {
        let now = self.now;
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        if !c.noise || now < c.noise_until {
            // Extended: a later end comes.
            return;
        }
        c.noise = false;
        c.idle_since = now;
        self.mark_dirty(node);
    }
}
