//! What the engine shows: Prometheus series and the agent's status.
use cosched_policy::local::fcs::classify::FcsClass;
use cosched_proto::control::AgentStatus;

use super::Engine;
use crate::kernel::Kernel;

impl<K: Kernel> Engine<K> {
    pub(super) fn export_metrics(&mut self, agent_cpu_seconds: f64) {
        for j in self.reg.jobs() {
            self.metrics.update_job(j.id, &j.name, &j.totals);
        }
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
        }
    }
}
