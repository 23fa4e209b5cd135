//! Cross-node slice-switch skew: every agent reports when it switched (in its
//! clock), and a slice's skew is the spread of those instants on the
//! coordinator's clock. A report is converted with the offset estimate the
//! switch was ANNOUNCED with (the instant told to that node), not the
//! current one: the estimate moves between announcement and report (by
//! milliseconds under load, see docs/scale.md), and that movement is not a
//! skew the agents made.

use std::collections::{BTreeMap, VecDeque};

use cosched_policy::global::NodeIndex;

use crate::admin::protocol::SkewSummary;

/// Slices waiting for reports; older ones are closed with what arrived.
const OPEN_SLICES: usize = 16;
/// Skews kept for the status summary.
const RECENT: usize = 2048;

/// What a switch report taught.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SwitchObservation {
    /// One node switched this late (negative: early) against the target, s.
    Lateness { node: NodeIndex, seconds: f64 },
    /// Spread of the switch instants of one slice across its nodes, s.
    Skew { seconds: f64, nodes: usize },
}

#[derive(Debug, Clone)]
struct OpenSlice {
    epoch: u64,
    slice: u64,
    target_ns: u64,
    /// Each node expected to report, with the instant it was told (its
    /// clock).
    expected: BTreeMap<NodeIndex, u64>,
    /// Each report's instant on the coordinator's clock.
    switched: BTreeMap<NodeIndex, i128>,
}

impl OpenSlice {
    fn skew(&self) -> Option<SwitchObservation> {
        if self.switched.len() < 2 {
            return None;
        }
        let min = self.switched.values().min()?;
        let max = self.switched.values().max()?;
        Some(SwitchObservation::Skew {
            seconds: (max - min) as f64 / 1e9,
            nodes: self.switched.len(),
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct SkewTracker {
    open: VecDeque<OpenSlice>,
    recent: VecDeque<f64>,
}

impl SkewTracker {
    /// A switch to (`epoch`, `slice`) at `target_ns` (coordinator clock) was
    /// sent to `told`: each node with the instant it was told, on its own
    /// clock.
    pub fn expect(
        &mut self,
        epoch: u64,
        slice: u64,
        target_ns: u64,
        told: BTreeMap<NodeIndex, u64>,
    ) -> Vec<SwitchObservation> {
        let mut closed = Vec::new();
        while self.open.len() >= OPEN_SLICES {
            let old = self.open.pop_front().expect("non-empty");
            closed.extend(self.close(&old));
        }
        if !told.is_empty() {
            self.open.push_back(OpenSlice {
                epoch,
                slice,
                target_ns,
                expected: told,
                switched: BTreeMap::new(),
            });
        }
        closed
    }

    /// `node` switched to (`epoch`, `slice`) at `at_agent_ns` (its own
    /// clock). Unknown or repeated reports teach nothing.
    pub fn switched(
        &mut self,
        epoch: u64,
        slice: u64,
        node: NodeIndex,
        at_agent_ns: u64,
    ) -> Vec<SwitchObservation> {
        let Some(position) = self
            .open
            .iter()
            .position(|open| open.epoch == epoch && open.slice == slice)
        else {
            return Vec::new();
        };
        let open = &mut self.open[position];
        let Some(&told) = open.expected.get(&node) else {
            return Vec::new();
        };
        if open.switched.contains_key(&node) {
            return Vec::new();
        }
        let late_ns = at_agent_ns as i128 - told as i128;
        open.switched.insert(node, open.target_ns as i128 + late_ns);
        let mut observations = vec![SwitchObservation::Lateness {
            node,
            seconds: late_ns as f64 / 1e9,
        }];
        if open.switched.len() == open.expected.len() {
            let done = self.open.remove(position).expect("found above");
            observations.extend(self.close(&done));
        }
        observations
    }

    /// A node left: it will not report; close what only waited for it.
    pub fn node_gone(&mut self, node: NodeIndex) -> Vec<SwitchObservation> {
        let mut observations = Vec::new();
        let mut index = 0;
        while index < self.open.len() {
            let open = &mut self.open[index];
            open.expected.remove(&node);
            if open.switched.len() >= open.expected.len() {
                let done = self.open.remove(index).expect("in range");
                observations.extend(self.close(&done));
            } else {
                index += 1;
            }
        }
        observations
    }

    fn close(&mut self, slice: &OpenSlice) -> Option<SwitchObservation> {
        let skew = slice.skew()?;
        if let SwitchObservation::Skew { seconds, .. } = skew {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(seconds);
        }
        Some(skew)
    }

    /// Percentiles over the recent slices.
    pub fn summary(&self) -> SkewSummary {
        let mut sorted: Vec<f64> = self.recent.iter().copied().collect();
        if sorted.is_empty() {
            return SkewSummary::default();
        }
        sorted.sort_by(f64::total_cmp);
        let at = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
        SkewSummary {
            samples: sorted.len(),
            p50_s: at(0.50),
            p99_s: at(0.99),
            max_s: *sorted.last().expect("non-empty"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `list` told `target` on clocks equal to the coordinator's.
    fn told(list: &[NodeIndex], target: u64) -> BTreeMap<NodeIndex, u64> {
        list.iter().map(|&node| (node, target)).collect()
    }

    #[test]
    fn skew_is_the_spread_once_every_node_reported() {
        let mut tracker = SkewTracker::default();
        tracker.expect(1, 7, 1_000_000, told(&[0, 1], 1_000_000));
        let first = tracker.switched(1, 7, 0, 1_000_050);
        assert_eq!(
            first,
            vec![SwitchObservation::Lateness {
                node: 0,
                seconds: 50e-9
            }]
        );
        let second = tracker.switched(1, 7, 1, 1_000_020);
        assert_eq!(
            second[1],
            SwitchObservation::Skew {
                seconds: 30e-9,
                nodes: 2
            }
        );
        assert_eq!(tracker.summary().samples, 1);
    }

    #[test]
    fn an_offset_estimate_that_moved_after_the_announcement_is_not_skew() {
        let mut tracker = SkewTracker::default();
        // Node 1's clock was thought 5 µs ahead when the switch was told;
        // both switch 20–50 ns after what they were told.
        let told = BTreeMap::from([(0, 1_000_000), (1, 1_005_000)]);
        tracker.expect(1, 7, 1_000_000, told);
        tracker.switched(1, 7, 0, 1_000_050);
        let observed = tracker.switched(1, 7, 1, 1_005_020);
        assert_eq!(
            observed,
            vec![
                SwitchObservation::Lateness {
                    node: 1,
                    seconds: 20e-9
                },
                SwitchObservation::Skew {
                    seconds: 30e-9,
                    nodes: 2
                }
            ]
        );
    }

    #[test]
    fn early_switches_have_negative_lateness() {
        let mut tracker = SkewTracker::default();
        tracker.expect(1, 1, 1_000, told(&[0, 1], 1_000));
        let observed = tracker.switched(1, 1, 1, 900);
        assert_eq!(
            observed,
            vec![SwitchObservation::Lateness {
                node: 1,
                seconds: -100e-9
            }]
        );
    }

    #[test]
    fn reports_for_unknown_slices_or_nodes_are_ignored() {
        let mut tracker = SkewTracker::default();
        tracker.expect(1, 1, 0, told(&[0, 1], 0));
        assert!(tracker.switched(2, 1, 0, 5).is_empty());
        assert!(tracker.switched(1, 1, 3, 5).is_empty());
        assert_eq!(tracker.switched(1, 1, 0, 5).len(), 1);
        assert!(tracker.switched(1, 1, 0, 6).is_empty(), "repeat ignored");
    }

    #[test]
    fn a_departed_node_closes_slices_waiting_for_it() {
        let mut tracker = SkewTracker::default();
        tracker.expect(1, 1, 0, told(&[0, 1, 2], 0));
        tracker.switched(1, 1, 0, 10);
        tracker.switched(1, 1, 1, 40);
        let closed = tracker.node_gone(2);
        assert_eq!(
            closed,
            vec![SwitchObservation::Skew {
                seconds: 30e-9,
                nodes: 2
            }]
        );
    }

    #[test]
    fn old_open_slices_are_closed_with_partial_reports() {
        let mut tracker = SkewTracker::default();
        tracker.expect(1, 0, 0, told(&[0, 1, 2], 0));
        tracker.switched(1, 0, 0, 0);
        tracker.switched(1, 0, 1, 1000);
        let mut closed = Vec::new();
        for slice in 1..=OPEN_SLICES as u64 {
            closed.extend(tracker.expect(1, slice, 0, told(&[0, 1, 2], 0)));
        }
        assert_eq!(
            closed,
            vec![SwitchObservation::Skew {
                seconds: 1e-6,
                nodes: 2
            }]
        );
    }

    #[test]
    fn summary_reports_percentiles() {
        let mut tracker = SkewTracker::default();
        for slice in 0..100u64 {
            tracker.expect(1, slice, 0, told(&[0, 1], 0));
            tracker.switched(1, slice, 0, 0);
            tracker.switched(1, slice, 1, (slice + 1) * 1000);
        }
        let summary = tracker.summary();
        assert_eq!(summary.samples, 100);
        assert!((summary.max_s - 100e-6).abs() < 1e-12);
        assert!((summary.p99_s - 99e-6).abs() < 1e-12, "{summary:?}");
    }
}
