//! Measured per-frame work: what the agent reports so admission can use what
//! RT processes really need instead of their declared worst case.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// A quantile of a process's recent per-frame CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredWork {
    /// How many frames the quantile is over.
    pub frames: u64,
    /// The quantile (e.g. the p95 or p99), ns per frame.
    pub work_ns: u64,
}

/// The last `capacity` per-frame work samples of a process, for the agent to
/// compute [`MeasuredWork`] from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkSamples {
    capacity: usize,
    samples: VecDeque<u64>,
}

impl WorkSamples {
    /// Keeps at most `capacity` samples (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            samples: VecDeque::with_capacity(capacity),
        }
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// One frame took `work_ns` of CPU.
    pub fn record(&mut self, work_ns: u64) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(work_ns);
    }

    /// `frames` frames took `cpu_ns` together (a reading that covers several
    /// frames cannot tell them apart): each counts as the average.
    pub fn record_frames(&mut self, frames: u64, cpu_ns: u64) {
        if frames == 0 {
            return;
        }
        let average = cpu_ns.div_ceil(frames);
        let count = usize::try_from(frames).unwrap_or(usize::MAX);
        for _ in 0..count.min(self.capacity) {
            self.record(average);
        }
    }

    /// The `quantile_ppm` quantile (nearest rank: the smallest sample with at
    /// least that fraction of samples at or below it); `None` when empty.
    pub fn quantile(&self, quantile_ppm: u32) -> Option<u64> {
        if self.samples.is_empty() {
            return None;
        }
        let mut sorted: Vec<u64> = self.samples.iter().copied().collect();
        sorted.sort_unstable();
        let n = sorted.len() as u64;
        let rank = (u64::from(quantile_ppm.min(1_000_000)) * n).div_ceil(1_000_000);
        let index = rank.saturating_sub(1).min(n - 1) as usize;
        Some(sorted[index])
    }

    /// The measurement to report: the quantile over the samples held.
    pub fn measured(&self, quantile_ppm: u32) -> Option<MeasuredWork> {
        Some(MeasuredWork {
            frames: self.samples.len() as u64,
            work_ns: self.quantile(quantile_ppm)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p95_of_a_hundred_samples_is_the_ninety_fifth_smallest() {
        let mut samples = WorkSamples::new(100);
        for work in (1..=100).rev() {
            samples.record(work);
        }
        assert_eq!(samples.quantile(950_000), Some(95));
        assert_eq!(samples.quantile(1_000_000), Some(100));
        assert_eq!(samples.quantile(0), Some(1));
        assert_eq!(
            samples.measured(990_000),
            Some(MeasuredWork {
                frames: 100,
                work_ns: 99
            })
        );
    }

    #[test]
    fn old_samples_leave_and_a_multi_frame_reading_counts_its_average() {
        let mut samples = WorkSamples::new(3);
        samples.record(1_000);
        samples.record_frames(4, 10);
        assert_eq!(samples.len(), 3);
        assert_eq!(samples.quantile(1_000_000), Some(3));
        assert_eq!(WorkSamples::new(5).quantile(500_000), None);
    }
}
