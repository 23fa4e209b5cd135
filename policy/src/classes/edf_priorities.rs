//! EDF as SCHED_FIFO priorities: earliest deadline = highest priority, within
//! a band the agent reserves for the RT class (the BE/RT coscheduling paper
//! §4.2 runs RT processes by EDF; a FIFO priority order is how a stock kernel
//! without SCHED_DEADLINE expresses it).
//!
//! Priorities are given to every task that may run, blocked or not, so a task
//! that wakes with an earlier deadline preempts at once (§4.2: "pre-emption
//! of the current RT process is possible when some other RT process with an
//! earlier deadline on that node becomes ready") without waiting for the
//! agent. Throttled tasks get none: the agent holds them.
//!
//! Stability: each `sched_setattr` costs a system call and may reschedule, so
//! the mapping keeps as many tasks at their previous priority as the new
//! order allows (the longest run of previous priorities that is still in
//! order) and places only the others, in the room between their kept
//! neighbours. When a task finishes a frame its deadline moves back, and
//! usually only its own priority changes. Only when there is no room left
//! does every task get a fresh, evenly spaced priority.
//!
//! Folding: tasks with the same deadline share a priority (either order meets
//! that deadline). When there are more distinct deadlines than priorities in
//! the band, the earliest deadlines get one priority each, from the top, and
//! all later deadlines share the band's lowest priority: the order that
//! decides the next misses stays exact, only far-off deadlines are lumped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::edf::RtTask;
use crate::local::TaskId;

/// SCHED_FIFO priorities `lo..=hi` reserved for the RT class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityBand {
    lo: u8,
    hi: u8,
}

/// Why a band is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BandError {
    #[error("priority band {lo}..={hi}: SCHED_FIFO priorities run from 1 to 99, lo <= hi")]
    OutOfRange { lo: u8, hi: u8 },
}

impl PriorityBand {
    pub fn new(lo: u8, hi: u8) -> Result<Self, BandError> {
        if lo == 0 || hi > 99 || lo > hi {
            return Err(BandError::OutOfRange { lo, hi });
        }
        Ok(Self { lo, hi })
    }

    pub fn lo(&self) -> u8 {
        self.lo
    }

    pub fn hi(&self) -> u8 {
        self.hi
    }

    /// Number of priorities in the band.
    pub fn levels(&self) -> usize {
        usize::from(self.hi - self.lo) + 1
    }
}

/// What changed in one assignment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityChanges {
    /// Tasks whose priority is new or different, with the priority to set.
    pub set: Vec<(TaskId, u8)>,
    /// Tasks that no longer have an RT priority (throttled or gone).
    pub released: Vec<TaskId>,
}

/// The current FIFO priority of each RT task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdfPriorities {
    band: PriorityBand,
    current: BTreeMap<TaskId, u8>,
}

impl EdfPriorities {
    pub fn new(band: PriorityBand) -> Self {
        Self {
            band,
            current: BTreeMap::new(),
        }
    }

    pub fn band(&self) -> PriorityBand {
        self.band
    }

    pub fn priority(&self, task: TaskId) -> Option<u8> {
        self.current.get(&task).copied()
    }

    pub fn priorities(&self) -> &BTreeMap<TaskId, u8> {
        &self.current
    }

    /// Recomputes the priorities of `tasks` (the node's whole RT set) and
    /// returns the changes. Tasks not in `tasks`, and throttled ones, are
    /// released.
    pub fn assign(&mut self, tasks: &[RtTask]) -> PriorityChanges {
        let groups = deadline_groups(tasks);
        let values = if groups.len() > self.band.levels() {
            self.folded(groups.len())
        } else {
            self.kept_and_filled(&groups)
                .unwrap_or_else(|| self.spread(groups.len()))
        };
        let mut next = BTreeMap::new();
        for (group, value) in groups.iter().zip(values) {
            for &task in group {
                next.insert(task, value);
            }
        }
        let changes = PriorityChanges {
            set: next
                .iter()
                .filter(|&(task, prio)| self.current.get(task) != Some(prio))
                .map(|(&task, &prio)| (task, prio))
                .collect(),
            released: self
                .current
                .keys()
                .filter(|task| !next.contains_key(task))
                .copied()
                .collect(),
        };
        self.current = next;
        changes
    }

    /// More deadlines than priorities: one priority each from the top, the
    /// rest share the lowest.
    fn folded(&self, groups: usize) -> Vec<u8> {
        let last = self.band.levels() - 1;
        (0..groups)
            .map(|g| self.band.hi - g.min(last) as u8)
            .collect()
    }

    /// `groups` priorities evenly spaced in the band, leaving room at both
    /// ends and between them for later moves.
    fn spread(&self, groups: usize) -> Vec<u8> {
        let n = self.band.levels();
        (0..groups)
            .map(|g| {
                let position = (g + 1) * (n + 1) / (groups + 1) - 1;
                self.band.hi - position as u8
            })
            .collect()
    }

    /// Keeps the longest in-order run of previous priorities and places the
    /// other groups between their kept neighbours; `None` when some gap has
    /// no room.
    fn kept_and_filled(&self, groups: &[Vec<TaskId>]) -> Option<Vec<u8>> {
        let previous: Vec<Option<u8>> = groups.iter().map(|g| self.previous_of(g)).collect();
        let kept = longest_decreasing(&previous);
        let mut values: Vec<Option<u8>> = vec![None; groups.len()];
        for &g in &kept {
            values[g] = previous[g];
        }
        // Fill each run of unplaced groups between two kept ones (or the
        // band's ends). `upper`/`lower` are exclusive bounds.
        let mut g = 0;
        while g < groups.len() {
            if values[g].is_some() {
                g += 1;
                continue;
            }
            let run_start = g;
            while g < groups.len() && values[g].is_none() {
                g += 1;
            }
            let count = (g - run_start) as i32;
            let above = run_start.checked_sub(1).and_then(|a| values[a]);
            let below = values.get(g).copied().flatten();
            let upper = above.map_or(i32::from(self.band.hi) + 1, i32::from);
            let lower = below.map_or(i32::from(self.band.lo) - 1, i32::from);
            if upper - lower - 1 < count {
                return None;
            }
            for i in 0..count {
                let value = match (above, below) {
                    // Appended after the last kept: right below it, leaving
                    // the rest of the band for the next task to move back.
                    (Some(_), None) => upper - 1 - i,
                    // Before the first kept: right above it.
                    (None, Some(_)) => lower + count - i,
                    // Between two kept, or nothing kept: evenly spaced.
                    _ => upper - (i + 1) * (upper - lower) / (count + 1),
                };
                values[run_start + i as usize] = Some(value as u8);
            }
        }
        values.into_iter().collect()
    }

    /// The previous priority of a group: the one most of its tasks had (ties
    /// to the higher), if inside the band.
    fn previous_of(&self, group: &[TaskId]) -> Option<u8> {
        let mut counts: BTreeMap<u8, usize> = BTreeMap::new();
        for task in group {
            if let Some(&prio) = self.current.get(task)
                && (self.band.lo..=self.band.hi).contains(&prio)
            {
                *counts.entry(prio).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .max_by_key(|&(prio, count)| (count, prio))
            .map(|(prio, _)| prio)
    }
}

/// Tasks that may run, grouped by EDF key without the id (due before
/// satisfied, then deadline), in EDF order.
fn deadline_groups(tasks: &[RtTask]) -> Vec<Vec<TaskId>> {
    let mut runnable: Vec<&RtTask> = tasks.iter().filter(|t| t.may_run()).collect();
    runnable.sort_by_key(|t| t.edf_key());
    let mut groups: Vec<Vec<TaskId>> = Vec::new();
    let mut last_key = None;
    for task in runnable {
        let (late, deadline, _) = task.edf_key();
        if last_key == Some((late, deadline)) {
            if let Some(group) = groups.last_mut() {
                group.push(task.id);
            }
        } else {
            groups.push(vec![task.id]);
            last_key = Some((late, deadline));
        }
    }
    groups
}

/// Indices of a longest strictly decreasing subsequence of the known values
/// (earliest index wins ties, so the result is deterministic).
fn longest_decreasing(values: &[Option<u8>]) -> Vec<usize> {
    let mut length = vec![0usize; values.len()];
    let mut before: Vec<Option<usize>> = vec![None; values.len()];
    for g in 0..values.len() {
        let Some(value) = values[g] else { continue };
        length[g] = 1;
        for h in 0..g {
            if let Some(earlier) = values[h]
                && earlier > value
                && length[h] + 1 > length[g]
            {
                length[g] = length[h] + 1;
                before[g] = Some(h);
            }
        }
    }
    let mut best: Option<usize> = None;
    for g in 0..values.len() {
        if length[g] > 0 && best.is_none_or(|b| length[g] > length[b]) {
            best = Some(g);
        }
    }
    let mut kept = Vec::new();
    let mut at = best;
    while let Some(g) = at {
        kept.push(g);
        at = before[g];
    }
    kept.reverse();
    kept
}
