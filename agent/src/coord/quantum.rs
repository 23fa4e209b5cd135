//! Per-quantum CPU utilisation of coordinator jobs, from eBPF on-CPU time
//! deltas between slice switches (Paired Gang Scheduling §2.2: what the predictor needs),
//! and the split of each job's CPU time into time in its own slots and time
//! outside them (how well gang slices are enforced).

use std::collections::{BTreeMap, BTreeSet};

use cosched_proto::{job::JobId, wire::JobUtilisation};

#[derive(Debug, Clone)]
struct Open {
    quantum: u64,
    started_ns: u64,
    active: BTreeSet<JobId>,
    cpu: BTreeMap<JobId, f64>,
}

/// What one ended quantum measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QuantumEnd {
    /// Utilisation of the jobs that were active in the quantum.
    pub reports: Vec<JobUtilisation>,
    /// (job, CPU seconds inside its slot, CPU seconds outside it).
    pub attribution: Vec<(JobId, f64, f64)>,
}

/// Ended quanta's utilisation waiting to be sent. Under a slice schedule
/// an agent reports one switch in ~100 ms; sending each quantum's
/// utilisation at its own switch would still cost a message (and a
/// coordinator wake-up, on a node's CPU in a one-machine cluster) every
/// slice, so the quanta are sent together with the switch reports. Entries
/// carry their quantum, so a batch needs no new message.
#[derive(Debug, Clone, Default)]
pub struct UtilBatch {
    entries: Vec<JobUtilisation>,
}

/// Entries held at most before a batch goes out whatever the switch (a
/// schedule whose report slices are far apart, many jobs): bounds the
/// message and the memory.
pub const MAX_BATCHED_ENTRIES: usize = 64;

impl UtilBatch {
    /// Adds an ended quantum's reports; returns the batch to send when this
    /// switch is reported (`reported`) or the batch is full.
    pub fn add(
        &mut self,
        reports: Vec<JobUtilisation>,
        reported: bool,
    ) -> Option<Vec<JobUtilisation>> {
        self.entries.extend(reports);
        let due = reported || self.entries.len() >= MAX_BATCHED_ENTRIES;
        (due && !self.entries.is_empty()).then(|| std::mem::take(&mut self.entries))
    }

    /// The link went down: what was held is for a connection that is gone.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[derive(Debug, Clone, Default)]
pub struct QuantumTracker {
    open: Option<Open>,
}

impl QuantumTracker {
    /// A switch to `quantum` with `active` jobs happened at `now_ns`, when the
    /// jobs had used `cpu` seconds in total. Ends the previous quantum.
    /// `node_cpus` normalises utilisation to the node's capacity.
    pub fn switch(
        &mut self,
        now_ns: u64,
        quantum: u64,
        active: BTreeSet<JobId>,
        cpu: BTreeMap<JobId, f64>,
        node_cpus: usize,
    ) -> QuantumEnd {
        let end = match &self.open {
            Some(open) if now_ns > open.started_ns => measure(open, now_ns, &cpu, node_cpus),
            _ => QuantumEnd::default(),
        };
        self.open = Some(Open {
            quantum,
            started_ns: now_ns,
            active,
            cpu,
        });
        end
    }

    /// Slicing stopped (idle, or the coordinator is gone).
    pub fn reset(&mut self) {
        self.open = None;
    }
}

fn measure(open: &Open, now_ns: u64, cpu: &BTreeMap<JobId, f64>, node_cpus: usize) -> QuantumEnd {
    let elapsed_s = (now_ns - open.started_ns) as f64 / 1e9;
    let capacity = elapsed_s * node_cpus.max(1) as f64;
    let mut end = QuantumEnd::default();
    for (&job, &total) in cpu {
        let used = (total - open.cpu.get(&job).copied().unwrap_or(0.0)).max(0.0);
        if open.active.contains(&job) {
            end.reports.push(JobUtilisation {
                job_id: job,
                quantum: open.quantum,
                cpu_utilisation: (used / capacity).clamp(0.0, 1.0),
            });
            end.attribution.push((job, used, 0.0));
        } else {
            end.attribution.push((job, 0.0, used));
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(entries: &[(JobId, f64)]) -> BTreeMap<JobId, f64> {
        entries.iter().copied().collect()
    }

    fn utilisation(job_id: JobId, quantum: u64) -> JobUtilisation {
        JobUtilisation {
            job_id,
            quantum,
            cpu_utilisation: 0.5,
        }
    }

    #[test]
    fn quanta_between_report_slices_go_out_together_at_the_next_report() {
        let mut batch = UtilBatch::default();
        assert_eq!(batch.add(vec![utilisation(7, 1)], false), None);
        assert_eq!(batch.add(vec![utilisation(8, 2)], false), None);
        let sent = batch
            .add(vec![utilisation(7, 3)], true)
            .expect("a report slice");
        let quanta: Vec<u64> = sent.iter().map(|u| u.quantum).collect();
        assert_eq!(quanta, [1, 2, 3]);
        // Nothing is sent twice, and a report slice with nothing held sends nothing.
        assert_eq!(batch.add(Vec::new(), true), None);
    }

    #[test]
    fn a_full_batch_goes_out_without_waiting_for_a_report_slice() {
        let mut batch = UtilBatch::default();
        for quantum in 0..MAX_BATCHED_ENTRIES as u64 - 1 {
            assert_eq!(batch.add(vec![utilisation(7, quantum)], false), None);
        }
        let sent = batch.add(vec![utilisation(7, 99)], false).expect("full");
        assert_eq!(sent.len(), MAX_BATCHED_ENTRIES);
    }

    #[test]
    fn a_cleared_batch_sends_nothing_of_the_old_connection() {
        let mut batch = UtilBatch::default();
        batch.add(vec![utilisation(7, 1)], false);
        batch.clear();
        let sent = batch.add(vec![utilisation(7, 2)], true).unwrap();
        assert_eq!(sent, [utilisation(7, 2)]);
    }

    #[test]
    fn active_jobs_report_their_share_of_the_quantum() {
        let mut tracker = QuantumTracker::default();
        let first = tracker.switch(0, 7, BTreeSet::from([1]), cpu(&[(1, 1.0), (2, 3.0)]), 1);
        assert_eq!(first, QuantumEnd::default());
        let end = tracker.switch(
            100_000_000,
            8,
            BTreeSet::from([2]),
            cpu(&[(1, 1.08), (2, 3.001)]),
            1,
        );
        assert_eq!(end.reports.len(), 1);
        assert_eq!(end.reports[0].job_id, 1);
        assert_eq!(end.reports[0].quantum, 7);
        assert!((end.reports[0].cpu_utilisation - 0.8).abs() < 1e-9);
        let outside = end.attribution.iter().find(|(job, ..)| *job == 2).unwrap();
        assert!(
            (outside.2 - 0.001).abs() < 1e-9,
            "job 2 ran outside its slot"
        );
    }

    #[test]
    fn utilisation_is_relative_to_the_nodes_cpus_and_bounded() {
        let mut tracker = QuantumTracker::default();
        tracker.switch(0, 1, BTreeSet::from([1]), cpu(&[(1, 0.0)]), 2);
        let end = tracker.switch(1_000_000_000, 2, BTreeSet::new(), cpu(&[(1, 1.0)]), 2);
        assert!((end.reports[0].cpu_utilisation - 0.5).abs() < 1e-9);
        tracker.reset();
        tracker.switch(0, 1, BTreeSet::from([1]), cpu(&[(1, 0.0)]), 1);
        let end = tracker.switch(1_000, 2, BTreeSet::new(), cpu(&[(1, 5.0)]), 1);
        assert_eq!(end.reports[0].cpu_utilisation, 1.0);
    }

    #[test]
    fn a_job_launched_during_the_quantum_counts_from_zero() {
        let mut tracker = QuantumTracker::default();
        tracker.switch(0, 1, BTreeSet::from([5]), BTreeMap::new(), 1);
        let end = tracker.switch(1_000_000_000, 2, BTreeSet::new(), cpu(&[(5, 0.25)]), 1);
        assert!((end.reports[0].cpu_utilisation - 0.25).abs() < 1e-9);
    }
}
