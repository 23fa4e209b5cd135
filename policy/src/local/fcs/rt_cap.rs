//! The node's real-time cap for FCS's slot-owner boosts.
//!
//! FCS runs a CS (or unyielded F) slot owner at top real-time priority for
//! its whole slot, and slots follow each other: without a cap one owner or
//! another holds real-time priority all the time. The kernel then throttles
//! every real-time task of the CPU for 50 ms of each second (it allows 95 %),
//! the agent included, which froze slot switches for tens of ms (measured:
//! docs/benchmarks.md). Like the local policies' node-wide boost cap
//! ([`FairnessParams::max_node_boosted_percent`](crate::local::FairnessParams)),
//! owners' boosts together may use at most `cap_ns` of each window; past it
//! the owner runs at its ordinary priority, the other processes still below
//! it, until the next window.

use crate::local::ids::TaskId;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct RtCap {
    window_ns: u64,
    cap_ns: u64,
    window: u64,
    /// Boosted time of boosts that ended in the current window.
    used_ns: u64,
    /// Boosts running now, since when (clipped to the window start).
    running: BTreeMap<TaskId, u64>,
}

impl RtCap {
    pub fn new(window_ns: u64, cap_ns: u64) -> Self {
        Self {
            window_ns: window_ns.max(1),
            cap_ns,
            window: 0,
            used_ns: 0,
            running: BTreeMap::new(),
        }
    }

    fn roll(&mut self, now: u64) {
        let window = now / self.window_ns;
        if window != self.window {
            let start = window * self.window_ns;
            self.window = window;
            self.used_ns = 0;
            for since in self.running.values_mut() {
                *since = (*since).max(start);
            }
        }
    }

    /// Boosted time used in the window of `now`, up to `now`.
    pub fn used(&self, now: u64) -> u64 {
        let window = now / self.window_ns;
        let start = window * self.window_ns;
        let ended = if window == self.window {
            self.used_ns
        } else {
            0
        };
        ended
            + self
                .running
                .values()
                .map(|&since| now.saturating_sub(since.max(start)))
                .sum::<u64>()
    }

    /// Whether a boost may run (go on, or start) at `now`.
    pub fn allows(&self, now: u64) -> bool {
        self.used(now) < self.cap_ns
    }

    /// `task` is boosted from `now` (no-op if it already is).
    pub fn start(&mut self, task: TaskId, now: u64) {
        self.roll(now);
        self.running.entry(task).or_insert(now);
    }

    /// `task`'s boost (if any) ends at `now`.
    pub fn stop(&mut self, task: TaskId, now: u64) {
        self.roll(now);
        if let Some(since) = self.running.remove(&task) {
            self.used_ns += now.saturating_sub(since);
        }
    }

    pub fn clear(&mut self) {
        self.running.clear();
        self.used_ns = 0;
    }

    /// When the running boosts reach the cap (or the window turns), if any
    /// boost runs.
    pub fn next_deadline(&self, now: u64) -> Option<u64> {
        if self.running.is_empty() {
            return None;
        }
        let next_window = (now / self.window_ns + 1) * self.window_ns;
        let used = self.used(now);
        let n = self.running.len() as u64;
        let reach = now.saturating_add(self.cap_ns.saturating_sub(used).div_ceil(n));
        Some(reach.min(next_window))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn boosts_stop_at_the_cap_and_resume_in_the_next_window() {
        let mut cap = RtCap::new(100 * MS, 80 * MS);
        cap.start(TaskId(1), 0);
        assert!(cap.allows(79 * MS));
        assert_eq!(cap.next_deadline(10 * MS), Some(80 * MS));
        assert!(!cap.allows(80 * MS));
        cap.stop(TaskId(1), 80 * MS);
        assert!(!cap.allows(99 * MS));
        assert!(cap.allows(100 * MS), "a new window");
    }

    #[test]
    fn running_boosts_are_charged_from_the_window_start_after_it_turns() {
        let mut cap = RtCap::new(100 * MS, 80 * MS);
        cap.start(TaskId(1), 90 * MS);
        cap.start(TaskId(2), 95 * MS);
        assert_eq!(cap.used(110 * MS), 20 * MS, "10 ms each since 100 ms");
        assert_eq!(
            cap.next_deadline(110 * MS),
            Some(140 * MS),
            "two boosts share 60 ms"
        );
        cap.stop(TaskId(1), 120 * MS);
        assert_eq!(cap.used(120 * MS), 40 * MS);
    }
}
