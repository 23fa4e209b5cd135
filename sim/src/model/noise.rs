//! Other work on the nodes (kernel threads, daemons, interrupts): at random
//! instants it takes a CPU for a while. A time-sharing task running there is
//! switched out and the scheduler picks again when the CPU is free, by
//! virtual runtime: this is what lets two uncoordinated nodes' rotations of
//! spinning tasks drift out of (and into) step, as they do on real machines.

use cosched_policy::local::SwitchOut;

use super::task::{Class, class_of};
use super::{Calendar, Cluster, SimEvent, cal_noise, noise_gap};

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
        // Whatever runs next pays a context switch.
        c.last = None;
        let cost = self.config.cluster.noise_ns;
        self.counters.noise += 1;
        self.counters.noise_ns += cost;
        cal.after(cost, SimEvent::NoiseEnd { node, cpu });
        self.mark_dirty(node);
    }

    pub(super) fn noise_end(&mut self, node: u32, cpu: u32) {
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        c.noise = false;
        self.mark_dirty(node);
    }
}
