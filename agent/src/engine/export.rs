//! What the engine shows: Prometheus series and the agent's status.
use cosched_policy::{classes::Class, local::fcs::classify::FcsClass};
use cosched_proto::control::AgentStatus;

use super::Engine;
use crate::{
    classes::RtLevel,
    kernel::{Kernel, SchedPolicy},
};

impl<K: Kernel> Engine<K> {
    pub(super) fn export_metrics(&mut self, agent_cpu_seconds: f64) {
        for j in self.reg.jobs() {
            self.metrics.update_job(j.id, &j.name, &j.totals);
            if let Some(rt) = &j.rt {
                let t = rt.totals();
                let counts = crate::metrics::RtCounts {
                    frames: rt.reported(),
                    expected: t.expected,
                    missed: t.missed,
                    overruns: t.overruns,
                };
                self.metrics.update_rt_job(j.id, &j.name, counts);
            }
        }
        self.export_class_metrics();
        self.metrics
            .running_jobs
            .set(self.reg.running_jobs() as i64);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
        let mut classes = FcsClass::ALL.map(|c| (c.as_str(), 0));
        for (tid, _) in self.reg.tasks() {
            if let Some(class) = self.driver.task_class(tid)
                && let Some(slot) = classes.iter_mut().find(|(c, _)| *c == class)
            {
                slot.1 += 1;
            }
        }
        for (class, n) in classes {
            self.metrics.fcs_classes.with_label_values(&[class]).set(n);
        }
        if let Ok(d) = self.k.drops() {
            self.metrics.update_drops(&d);
        }
        if let Ok(c) = self.k.program_costs() {
            self.metrics.update_programs(&c);
        }
        self.metrics.update_agent_cpu(agent_cpu_seconds);
    }

    /// The class running, and how many RT tasks are at each realisation.
    fn export_class_metrics(&self) {
        let running = self.classes.running();
        for (label, class) in [("rt", Class::RealTime), ("be", Class::BestEffort)] {
            self.metrics
                .class_running
                .with_label_values(&[label])
                .set(i64::from(running == Some(class)));
        }
        let mut counts = [("fifo", 0), ("deadline", 0), ("held", 0), ("none", 0)];
        for (_, s) in self.reg.tasks() {
            if !self.is_rt_process(s.job, s.tgid) {
                continue;
            }
            let sched = match (self.classes.rt_level(s.tgid), s.realised.attr.policy) {
                (None, _) => "none",
                (Some(RtLevel::Hold), _) => "held",
                (Some(RtLevel::Run { .. }), SchedPolicy::Deadline) => "deadline",
                (Some(RtLevel::Run { .. }), _) => "fifo",
            };
            if let Some(slot) = counts.iter_mut().find(|(l, _)| *l == sched) {
                slot.1 += 1;
            }
        }
        for (label, n) in counts {
            self.metrics.rt_tasks.with_label_values(&[label]).set(n);
        }
        self.export_edf_mechanism();
    }

    pub fn status(&self) -> AgentStatus {
        AgentStatus {
            node: self.cfg.node.clone(),
            policy: self.running_policy().to_string(),
            cpus: self.node_cpus(),
            jobs: self.reg.jobs().count() as u32,
            managed_tasks: self.reg.task_count() as u32,
            config_path: self.config_path.clone(),
            last_reload: self.last_reload.clone(),
            wait_detectors: self
                .wait_detectors
                .iter()
                .filter(|d| d.problem.is_none())
                .map(|d| d.name.to_string())
                .collect(),
            wait_detectors_inactive: self
                .wait_detectors
                .iter()
                .filter_map(|d| Some(format!("{}: {}", d.name, d.problem.as_ref()?)))
                .collect(),
            classes: self.class_status(),
        }
    }
}
