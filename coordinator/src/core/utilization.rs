//! Gathering agents' per-quantum utilisation reports into one sample set per
//! job and quantum for the predictor (Paired Gang Scheduling §2.2: the prediction is over
//! the mean of the job's processes).

use std::collections::BTreeMap;

use cosched_policy::global::NodeIndex;

/// Quanta kept open for late reports; older incomplete ones are flushed
/// with the samples that arrived.
pub const OPEN_QUANTA: u64 = 4;

#[derive(Debug, Default, Clone)]
pub struct UtilAggregator {
    /// (job, quantum) → (expected ranks, samples by node in percent).
    open: BTreeMap<(u32, u64), (usize, BTreeMap<NodeIndex, f64>)>,
}

/// A job's complete (or flushed) quantum.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantumSamples {
    pub job: u32,
    pub quantum: u64,
    pub percents: Vec<f64>,
}

impl UtilAggregator {
    /// Adds one rank's sample; returns the quantum once every expected rank
    /// reported. A repeated report from the same node replaces the earlier.
    pub fn add(
        &mut self,
        job: u32,
        quantum: u64,
        node: NodeIndex,
        percent: f64,
        expected: usize,
    ) -> Option<QuantumSamples> {
        let entry = self
            .open
            .entry((job, quantum))
            .or_insert_with(|| (expected.max(1), BTreeMap::new()));
        entry.1.insert(node, percent);
        if entry.1.len() < entry.0 {
            return None;
        }
        let (_, samples) = self.open.remove(&(job, quantum)).expect("present");
        Some(QuantumSamples {
            job,
            quantum,
            percents: samples.into_values().collect(),
        })
    }

    /// Flushes quanta more than [`OPEN_QUANTA`] before `current`, with
    /// whatever samples arrived.
    pub fn flush_before(&mut self, current: u64) -> Vec<QuantumSamples> {
        let limit = current.saturating_sub(OPEN_QUANTA);
        let old: Vec<(u32, u64)> = self
            .open
            .keys()
            .filter(|(_, quantum)| *quantum < limit)
            .copied()
            .collect();
        old.into_iter()
            .filter_map(|key| {
                let (_, samples) = self.open.remove(&key)?;
                (!samples.is_empty()).then(|| QuantumSamples {
                    job: key.0,
                    quantum: key.1,
                    percents: samples.into_values().collect(),
                })
            })
            .collect()
    }

    pub fn forget(&mut self, job: u32) {
        self.open.retain(|(open_job, _), _| *open_job != job);
    }

    /// Drops everything (a new epoch numbers quanta from scratch).
    pub fn clear(&mut self) {
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantum_completes_when_every_rank_reported() {
        let mut aggregator = UtilAggregator::default();
        assert_eq!(aggregator.add(1, 5, 0, 80.0, 2), None);
        let done = aggregator.add(1, 5, 1, 60.0, 2).unwrap();
        assert_eq!(done.percents, vec![80.0, 60.0]);
        assert_eq!(done.quantum, 5);
    }

    #[test]
    fn repeated_report_of_a_node_replaces_its_sample() {
        let mut aggregator = UtilAggregator::default();
        assert_eq!(aggregator.add(1, 5, 0, 80.0, 2), None);
        assert_eq!(aggregator.add(1, 5, 0, 90.0, 2), None);
        assert_eq!(
            aggregator.add(1, 5, 1, 10.0, 2).unwrap().percents,
            vec![90.0, 10.0]
        );
    }

    #[test]
    fn incomplete_old_quanta_are_flushed_with_what_arrived() {
        let mut aggregator = UtilAggregator::default();
        aggregator.add(1, 2, 0, 50.0, 2);
        aggregator.add(1, 9, 0, 50.0, 2);
        let flushed = aggregator.flush_before(9);
        assert_eq!(flushed.len(), 1);
        assert_eq!(flushed[0].quantum, 2);
        assert_eq!(aggregator.flush_before(9), vec![]);
    }

    #[test]
    fn forgotten_jobs_leave_no_open_quanta() {
        let mut aggregator = UtilAggregator::default();
        aggregator.add(1, 2, 0, 50.0, 2);
        aggregator.forget(1);
        assert!(aggregator.flush_before(100).is_empty());
    }
}
