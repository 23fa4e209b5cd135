//! Initial allocation (§4.1): a job of class C needing s columns takes the
//! lowest row of C's set with s free cells, never a row of the other set;
//! otherwise it waits in C's arrival queue. Under admission control an RT job
//! needs r such rows with the same s columns free in each (no migration).
//!
//! Rows: the lexicographically first set of `r` rows of the class's set
//! (lowest rows first) whose common free columns number at least s; the
//! search is exact, so a job is never turned away while such rows exist.
//! Columns: among those common free columns, the s least loaded over the
//! whole matrix (fewest occupied cells), ties to the lowest node. Spreading
//! jobs over columns leaves whole free column sets in other rows, which is
//! what replication needs; it is also what Figure 2 shows (BE job B of one
//! node goes to the node RT job A does not use, so A can be copied beside it).

use super::state::{Allocation, Cell, CellKind, OneLevelGang, WaitingJob};
use crate::classes::Class;
use crate::global::{JobId, NodeIndex, QueuePolicy, RowIndex};

impl OneLevelGang {
    /// The rows and columns a job of `class` needing `nodes` columns in
    /// `rows_needed` rows would get now, or `None` when its set has no room.
    /// Replicas count as occupied: events cleanse them before allocating.
    pub fn find_room(
        &self,
        class: Class,
        nodes: usize,
        rows_needed: u64,
    ) -> Option<(Vec<RowIndex>, Vec<NodeIndex>)> {
        let candidates: Vec<RowIndex> = self.split.rows_of(class).collect();
        let wanted = usize::try_from(rows_needed).ok()?;
        if nodes == 0 || nodes > self.nodes() || wanted == 0 || wanted > candidates.len() {
            return None;
        }
        let mut chosen = Vec::with_capacity(wanted);
        let common = self.search_rows(
            &candidates,
            vec![true; self.nodes()],
            wanted,
            nodes,
            &mut chosen,
        )?;
        let load = self.column_load();
        let mut columns: Vec<NodeIndex> = (0..self.nodes()).filter(|&node| common[node]).collect();
        columns.sort_by_key(|&node| (load[node], node));
        columns.truncate(nodes);
        columns.sort_unstable();
        Some((chosen, columns))
    }

    /// Depth-first over the rows of `candidates` in ascending order: extends
    /// `chosen` to `wanted` rows whose free masks, intersected with `common`,
    /// still leave `nodes` columns. Returns the final common mask.
    fn search_rows(
        &self,
        candidates: &[RowIndex],
        common: Vec<bool>,
        wanted: usize,
        nodes: usize,
        chosen: &mut Vec<RowIndex>,
    ) -> Option<Vec<bool>> {
        if chosen.len() == wanted {
            return Some(common);
        }
        for (index, &row) in candidates.iter().enumerate() {
            if candidates.len() - index < wanted - chosen.len() {
                break;
            }
            let narrowed: Vec<bool> = common
                .iter()
                .zip(&self.cells[row])
                .map(|(&free, cell)| free && cell.is_none())
                .collect();
            if narrowed.iter().filter(|&&free| free).count() < nodes {
                continue;
            }
            chosen.push(row);
            if let Some(found) =
                self.search_rows(&candidates[index + 1..], narrowed, wanted, nodes, chosen)
            {
                return Some(found);
            }
            chosen.pop();
        }
        None
    }

    /// Retries every waiting job, RT queue then BE queue, each in arrival
    /// order (under `StrictFcfs` a queue stops at its first job that does not
    /// fit). Returns the jobs allocated, in that order. Call after `cleanse`:
    /// replicas still in the matrix would take room from originals.
    pub fn allocate_waiting(&mut self) -> Vec<JobId> {
        let mut started = Vec::new();
        for class in [Class::RealTime, Class::BestEffort] {
            let mut index = 0;
            while index < self.queue(class).len() {
                let waiting = self.queue(class)[index];
                let rows_needed = waiting.job.rows_to_hold(&self.config);
                match self.find_room(class, waiting.job.nodes, rows_needed) {
                    Some((rows, columns)) => {
                        self.queue_mut(class).remove(index);
                        self.occupy(waiting, rows, columns);
                        started.push(waiting.job.id);
                    }
                    None if self.config.queue == QueuePolicy::StrictFcfs => break,
                    None => index += 1,
                }
            }
        }
        if !started.is_empty() {
            self.generation += 1;
        }
        started
    }

    fn occupy(&mut self, waiting: WaitingJob, rows: Vec<RowIndex>, columns: Vec<NodeIndex>) {
        let cell = Cell {
            job: waiting.job.id,
            kind: CellKind::Original,
        };
        for &row in &rows {
            self.fill(row, &columns, cell);
        }
        self.allocated.insert(
            waiting.job.id,
            Allocation {
                job: waiting.job,
                rows,
                columns,
                arrived_ns: waiting.arrived_ns,
                order: waiting.order,
            },
        );
    }
}
