//! The front end (ClusterSchedSim §4.2.1, seed 003's scheduler entity): jobs
//! are submitted to the coordinator's Ousterhout matrix and leave it when they
//! finish; under gang and paired gang the `policy` crate's rotation picks
//! every slice and the nodes enforce it.

use cosched_policy::global::{JobId, JobRequest, PlacedJob, QuantumTiming, SubmitOutcome};

use super::task::Task;
use super::{Calendar, Cluster, Rotation, SimEvent};

impl Cluster {
    /// C activity: one front-end action (a removal first, then a submission).
    pub(super) fn frontend(&mut self, cal: &mut Calendar<SimEvent>) -> bool {
        if let Some(job) = self.finished.pop_front() {
            self.jobs_done += 1;
            if let Rotation::Paired(_, predictor) = &mut self.rotation {
                predictor.forget(JobId(u64::from(job)));
            }
            let outcome = self
                .matrix
                .remove(JobId(u64::from(job)))
                .expect("a finished job is placed");
            for placed in outcome.started {
                self.start_job(&placed, cal);
            }
            return true;
        }
        if let Some(job) = self.arrived.pop_front() {
            let nodes = self.jobs[job as usize].spec.nodes as usize;
            let request = JobRequest::new(JobId(u64::from(job)), nodes);
            match self.matrix.submit(request).expect("width checked at setup") {
                SubmitOutcome::Placed(placed) => self.start_job(&placed, cal),
                SubmitOutcome::Queued { .. } => {}
            }
            return true;
        }
        false
    }

    /// Starts the tasks of a placed job, one per column.
    fn start_job(&mut self, placed: &PlacedJob, cal: &mut Calendar<SimEvent>) {
        let job = placed.id().0 as u32;
        let spec = &self.jobs[job as usize].spec;
        let ranks = spec.nodes;
        let dests = (0..ranks)
            .map(|rank| spec.pattern.destinations(rank, ranks))
            .collect();
        let first = self.tasks.len() as u32;
        let run = &mut self.jobs[job as usize];
        run.dests = dests;
        run.start = Some(self.now);
        run.tasks = (first..first + ranks).collect();
        for (rank, &column) in placed.columns.iter().enumerate() {
            let node = column as u32;
            let vruntime = self.nodes[column].min_vruntime;
            let mut task = Task::new(job, rank as u32, node, vruntime);
            task.in_slice = self
                .slice
                .as_ref()
                .map(|s| s.active_on(column).contains(&JobId(u64::from(job))));
            self.tasks.push(task);
            let t = first + rank as u32;
            self.nodes[column].tasks.push(t);
            self.agent_task_added(t, cal);
            self.refresh_level(t);
            self.advance(t, cal);
            self.task_changed(t, cal);
        }
        if !matches!(self.rotation, Rotation::None) && !self.slicing {
            self.slicing = true;
            self.slice_token += 1;
            cal.at(
                self.now,
                SimEvent::SliceSwitch {
                    token: self.slice_token,
                },
            );
        }
    }

    /// B event: the coordinator's next slice starts on every node at once.
    ///
    /// The coordinator plans a slice `switch_lead` before it starts, while
    /// the slice before it still runs: the agents report a quantum when it
    /// ends, so the plan sees the utilisation of every slice but the one
    /// still running. Here: plan first, then learn the slice that ends.
    pub(super) fn slice_switch(&mut self, cal: &mut Calendar<SimEvent>) {
        let next = match &mut self.rotation {
            Rotation::None => None,
            Rotation::Gang(scheduler) => scheduler.next_slice(&self.matrix),
            Rotation::Paired(scheduler, predictor) => scheduler
                .next_slice(&mut self.matrix, predictor)
                .map(|paired| paired.slice),
        };
        let first_unplanned = next.as_ref().map(|s| s.number + 1);
        self.close_slice(first_unplanned);
        let Some(slice) = next else {
            self.slicing = false;
            self.slice = None;
            return;
        };
        self.counters.slices += 1;
        if slice.rows.rows().len() > 1 {
            self.counters.paired_slices += 1;
        }
        for node in 0..self.nodes.len() {
            self.agent_switch_work(node as u32, cal);
            let active = slice.active_on(node);
            for i in 0..self.nodes[node].tasks.len() {
                let t = self.nodes[node].tasks[i];
                let task = &mut self.tasks[t as usize];
                task.slice_mark = task.used.total();
                let in_slice = Some(active.contains(&JobId(u64::from(task.job))));
                if task.in_slice != in_slice {
                    task.in_slice = in_slice;
                    self.refresh_level(t);
                }
            }
        }
        if self.fcs_slots {
            let until = self.now + self.config.sched.slice_ns;
            for node in 0..self.nodes.len() {
                let owner = slice.active_on(node).first().map(|j| j.0 as u32);
                self.agent_slot_started(node as u32, owner, until, cal);
            }
        }
        self.slice = Some(slice);
        self.slice_started = self.now;
        self.slice_token += 1;
        cal.after(
            self.config.sched.slice_ns,
            SimEvent::SliceSwitch {
                token: self.slice_token,
            },
        );
    }

    /// Paired gang: reports each job's CPU utilisation in the slice that
    /// ends (per process, as the agents measure it) to the predictor, as the
    /// coordinator does (`observe_timed_quantum`): the report comes after
    /// the next slice was planned, so after a sharp change the next slice's
    /// report is not the calibration. `first_unplanned` is the number after
    /// the slice already planned (`None` when none was).
    fn close_slice(&mut self, first_unplanned: Option<u64>) {
        let Rotation::Paired(..) = self.rotation else {
            return;
        };
        let Some(slice) = self.slice.take() else {
            return;
        };
        let length = self.now.saturating_sub(self.slice_started).max(1) as f64;
        let timing = quantum_timing(slice.number, first_unplanned);
        for job in slice.active_jobs() {
            let index = job.0 as usize;
            let Some(run) = self.jobs.get(index) else {
                continue;
            };
            if run.end.is_some() {
                continue;
            }
            let tasks = run.tasks.clone();
            let mut percents = Vec::with_capacity(tasks.len());
            for t in tasks {
                let task = &self.tasks[t as usize];
                if let Some(cpu) = task.on_cpu {
                    self.account(task.node, cpu);
                }
                let task = &self.tasks[t as usize];
                let used = task.used.total().saturating_sub(task.slice_mark);
                percents.push(used as f64 / length * 100.0);
            }
            if let Rotation::Paired(_, predictor) = &mut self.rotation {
                let _ = predictor.observe_timed_quantum(job, timing, &percents);
            }
        }
    }
}

/// Where the report of slice `ending` stands against the planning, as the
/// coordinator's `learn_quantum` computes it: slices before
/// `first_unplanned` were planned before the report was learnt (the one
/// after `ending`, planned first, at least).
fn quantum_timing(ending: u64, first_unplanned: Option<u64>) -> QuantumTiming {
    QuantumTiming {
        quantum: ending,
        first_unplanned: first_unplanned.unwrap_or(ending + 1).max(ending + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_of_a_slice_is_learnt_after_the_next_slice_was_planned() {
        // Slice 7 ends, slice 8 was planned before its report: only slices
        // from 9 on are planned knowing it (the coordinator's slice_counter).
        assert_eq!(
            quantum_timing(7, Some(9)),
            QuantumTiming {
                quantum: 7,
                first_unplanned: 9
            }
        );
        // The rotation stopped (no next slice): the next one is unplanned.
        assert_eq!(quantum_timing(7, None).first_unplanned, 8);
    }
}
