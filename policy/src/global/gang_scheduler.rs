//! Gang scheduling's rotation: one row per slice, round robin over the
//! non-empty rows (ClusterSchedSim §4.1: "at the end of each time slice, every node
//! ... switches to the next slice simultaneously"), with alternate
//! scheduling filling each row's idle nodes.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::alternate_scheduling::gang_alternates;
use super::ids::RowIndex;
use super::matrix::Matrix;
use super::slice::{ActiveRows, Slice};

/// The row active in slice number `slice` if the rotation never changed:
/// the non-empty rows in ascending order, repeated.
pub fn gang_row_for_slice(matrix: &Matrix, slice: u64) -> Option<RowIndex> {
    let rotation = matrix.non_empty_rows();
    if rotation.is_empty() {
        return None;
    }
    Some(rotation[(slice % rotation.len() as u64) as usize])
}

/// The rotation as it actually runs while jobs come and go: a round is the
/// non-empty rows at the round's start, in ascending order. Rows that empty
/// during the round are skipped; rows that fill up join at the next round, so
/// every job present at a round's start runs at least once in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangScheduler {
    next_number: u64,
    rounds_started: u64,
    remaining: VecDeque<RowIndex>,
}

impl GangScheduler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows still to run in the current round.
    pub fn remaining_in_round(&self) -> Vec<RowIndex> {
        self.remaining.iter().copied().collect()
    }

    /// The next slice, or `None` when no job is placed.
    pub fn next_slice(&mut self, matrix: &Matrix) -> Option<Slice> {
        loop {
            if self.remaining.is_empty() {
                let rotation = matrix.non_empty_rows();
                if rotation.is_empty() {
                    return None;
                }
                self.remaining = rotation.into();
                self.rounds_started += 1;
            }
            let row = self.remaining.pop_front().expect("refilled above");
            if matrix.is_row_empty(row) {
                continue;
            }
            let slice = Slice::new(
                matrix,
                self.next_number,
                self.rounds_started - 1,
                ActiveRows::Single(row),
                gang_alternates(matrix, row),
            );
            self.next_number += 1;
            return Some(slice);
        }
    }
}
