//! The shape of a 1GS matrix: nodes, rows, how the rows split between the
//! classes, the quantum, and whether RT jobs pass deterministic admission.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::error::OneLevelGangError;
use crate::classes::{Class, FairnessRatio};
use crate::global::{QueuePolicy, RowIndex};

/// Most rows a 1GS matrix may have. Admission searches the RT set for `r`
/// rows sharing free columns (a depth-first search over row subsets, pruned
/// when too few columns stay free); a small bound keeps its worst case small.
/// Gang scheduling keeps the multiprogramming level low anyway.
pub const MAX_ONE_GS_ROWS: usize = 16;

/// Configuration of the one-level gang scheduler (1GS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneLevelGangConfig {
    /// p: nodes (columns).
    pub nodes: usize,
    /// M: rows (time slots of the rotation), split between RT and BE.
    pub rows: usize,
    /// x:y, RT rows : BE rows.
    #[serde(default)]
    pub ratio: FairnessRatio,
    /// Q: how long a row's jobs run in their slot (useful CPU time).
    pub quantum_ns: u64,
    /// The cost of switching to the next row (synchronisation and context
    /// switch). A slot lasts `quantum_ns + switch_cost_ns`, of which only the
    /// quantum runs jobs; the paper counts it in Ψ (§4.4, "Ψ also includes
    /// the context switch time").
    #[serde(default)]
    pub switch_cost_ns: u64,
    /// Deterministic admission (§4.4): an RT job gets `r` rows so it is
    /// guaranteed its frames, or waits. Off, every job holds one row, as in
    /// the plain 1GS of §4.1.
    #[serde(default = "admission_default")]
    pub admission_control: bool,
    /// Order in which waiting jobs are retried. `Backfill` (the default)
    /// tries every waiting job in arrival order and a job that does not fit
    /// does not hold back later ones, as §4.1 reads (an arriving job is
    /// placed at once when a row has room, waiting jobs are retried "in FCFS
    /// order"). `StrictFcfs` stops at the first waiting job that does not fit.
    #[serde(default = "queue_default")]
    pub queue: QueuePolicy,
}

fn admission_default() -> bool {
    true
}

fn queue_default() -> QueuePolicy {
    QueuePolicy::Backfill
}

impl OneLevelGangConfig {
    /// A configuration with no switch cost, admission on and the backfilling
    /// queue order.
    pub fn new(nodes: usize, rows: usize, ratio: FairnessRatio, quantum_ns: u64) -> Self {
        Self {
            nodes,
            rows,
            ratio,
            quantum_ns,
            switch_cost_ns: 0,
            admission_control: true,
            queue: QueuePolicy::Backfill,
        }
    }

    /// Refuses shapes no 1GS can run: no node, fewer than two rows (one
    /// class would get no row and starve), too many rows, a zero quantum (no
    /// job would ever run), a cycle past 64-bit nanoseconds.
    pub fn validate(&self) -> Result<(), OneLevelGangError> {
        let invalid = |why: &'static str| Err(OneLevelGangError::InvalidConfig(why));
        if self.nodes == 0 {
            return invalid("the cluster needs at least one node");
        }
        if self.rows < 2 {
            return invalid("1GS needs at least two rows: one for each class");
        }
        // The message spells the bound out; keep the two together.
        const _: () = assert!(MAX_ONE_GS_ROWS == 16);
        if self.rows > MAX_ONE_GS_ROWS {
            return invalid("1GS allows at most 16 rows");
        }
        if self.quantum_ns == 0 {
            return invalid("the quantum must be positive");
        }
        self.ratio
            .validate()
            .map_err(|_| OneLevelGangError::InvalidConfig("both ratio parts must be at least 1"))?;
        let cycle = self
            .quantum_ns
            .checked_add(self.switch_cost_ns)
            .and_then(|slot| slot.checked_mul(self.rows as u64));
        if cycle.is_none() {
            return invalid("rows × (quantum + switch cost) overflows 64-bit nanoseconds");
        }
        Ok(())
    }

    /// The rows of each class.
    pub fn split(&self) -> RowSplit {
        RowSplit::new(self.rows, self.ratio)
    }

    /// One slot of the rotation: the quantum plus the switch into it.
    pub fn slot_ns(&self) -> u64 {
        self.quantum_ns.saturating_add(self.switch_cost_ns)
    }

    /// Ψ = M · (Q + switch cost): one pass over every row. Rows that are
    /// empty leave the rotation, so a real pass is never longer.
    pub fn cycle_ns(&self) -> u64 {
        self.slot_ns().saturating_mul(self.rows as u64)
    }
}

/// How M rows split between the classes: RT owns rows `0..rt_rows` (the top
/// of the matrix, as in Figure 2), BE the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowSplit {
    pub rt_rows: usize,
    pub be_rows: usize,
}

impl RowSplit {
    /// RT gets `M · x / (x + y)` rows rounded to the nearest integer, a half
    /// going to RT (the class with guarantees to keep), then clamped to
    /// `1..=M-1` so neither class is left without a row; BE gets the rest.
    /// With M < 2 there is nothing to split: everything goes to RT (such a
    /// configuration is refused by [`OneLevelGangConfig::validate`]).
    pub fn new(rows: usize, ratio: FairnessRatio) -> Self {
        let total = u128::from(ratio.total().max(1));
        let rt_part = u128::from(ratio.rt);
        // round(M·x/(x+y)) with halves up: ⌊(2·M·x + (x+y)) / (2·(x+y))⌋.
        let nearest = (2 * rows as u128 * rt_part + total) / (2 * total);
        let rt_rows = if rows < 2 {
            rows
        } else {
            (nearest as usize).clamp(1, rows - 1)
        };
        Self {
            rt_rows,
            be_rows: rows - rt_rows,
        }
    }

    /// M.
    pub fn rows(&self) -> usize {
        self.rt_rows + self.be_rows
    }

    /// The rows of `class`'s set, ascending.
    pub fn rows_of(&self, class: Class) -> Range<RowIndex> {
        match class {
            Class::RealTime => 0..self.rt_rows,
            Class::BestEffort => self.rt_rows..self.rows(),
        }
    }

    /// The number of rows of `class`.
    pub fn count(&self, class: Class) -> usize {
        self.rows_of(class).len()
    }

    /// The set `row` belongs to, or `None` past the matrix.
    pub fn class_of(&self, row: RowIndex) -> Option<Class> {
        if row < self.rt_rows {
            Some(Class::RealTime)
        } else if row < self.rows() {
            Some(Class::BestEffort)
        } else {
            None
        }
    }
}
