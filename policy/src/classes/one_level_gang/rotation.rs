//! Execution (§4.1): every slot, all nodes run the processes of one row,
//! then switch together to the next. The coordinator broadcasts a 1GS slot
//! as a gang [`Slice`] (one row, no alternates: replication already filled
//! the idle cells), so agents enforce it exactly like a gang slice.
//!
//! The rotation is the rows holding at least one job, ascending. An empty row
//! leaves it rather than idling the cluster for a quantum. This gives its time
//! to no class in particular: the cycle gets shorter for every remaining row.
//! An empty RT row can be handed to BE jobs only by step 4 of the
//! replication, which fills an empty RT row whenever any BE job is allocated,
//! so a row still empty after the optimisation means no job could use it.
//!
//! Except while an RT job is allocated under admission control: then every
//! row keeps its slot, empty or not, so the cycle stays Ψ = M · slot and an
//! RT job's windows (a multiple of Ψ, checked at arrival) end at the same
//! phase of it every time ([`super::phase`]). An empty row is an idle slot
//! then; a shorter cycle would drift against the windows and leave some
//! short of b frames.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::state::OneLevelGang;
use crate::global::{ActiveRows, JobId, RowIndex, Slice};

impl OneLevelGang {
    /// The rows in the rotation, ascending.
    pub fn rotation(&self) -> Vec<RowIndex> {
        if self.keeps_full_cycle() {
            return (0..self.rows()).collect();
        }
        (0..self.rows())
            .filter(|&row| !self.is_row_empty(row))
            .collect()
    }

    /// True while the rotation keeps every row (empty ones as idle slots):
    /// an RT job is allocated under admission control.
    pub fn keeps_full_cycle(&self) -> bool {
        self.config.admission_control
            && self
                .allocated
                .values()
                .any(|held| held.job.rt_spec().is_some())
    }

    /// For each node, the job (if any) that runs there while `row` is
    /// active; at most one job per node, as in `Slice::active_by_node`.
    pub fn active_by_node(&self, row: RowIndex) -> Vec<BTreeSet<JobId>> {
        self.cells[row]
            .iter()
            .map(|cell| cell.map(|held| held.job).into_iter().collect())
            .collect()
    }

    /// The gang slice that runs `row`.
    pub fn slice(&self, number: u64, round: u64, row: RowIndex) -> Slice {
        Slice {
            number,
            round,
            rows: ActiveRows::Single(row),
            alternates: Vec::new(),
            active_by_node: self.active_by_node(row),
        }
    }

    /// The row of slice `number` if the rotation never changed.
    pub fn row_for_slice(&self, number: u64) -> Option<RowIndex> {
        let rotation = self.rotation();
        if rotation.is_empty() {
            return None;
        }
        Some(rotation[(number % rotation.len() as u64) as usize])
    }
}

/// The rotation as it runs while jobs come and go, like
/// `GangScheduler`: a round is the rotation at the round's start; rows that
/// empty during it are skipped, rows that fill join at the next round, so
/// every job allocated at a round's start runs in each of its rows once in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneLevelGangRotor {
    next_number: u64,
    rounds_started: u64,
    remaining: VecDeque<RowIndex>,
    /// Allocated jobs this rotor has seen.
    #[serde(default)]
    seen: BTreeSet<JobId>,
    /// RT jobs that sit out their rows until this one comes up
    /// ([`OneLevelGang::start_row_of`]): their first window then ends where
    /// their rows have drained what the gaps left.
    #[serde(default)]
    starting: BTreeMap<JobId, RowIndex>,
    /// RT jobs past their start row whose processes are not all ready for
    /// their first frame yet ([`counters_ready`](Self::counters_ready)):
    /// they run in their start row only, so whatever start-up still runs
    /// (exec, connecting to each other) ends inside that row and the first
    /// frame starts there, not after a gap.
    #[serde(default)]
    warming: BTreeMap<JobId, Warming>,
    /// Jobs whose processes were reported ready (kept while they are
    /// allocated, so a report that comes before the start row counts).
    #[serde(default)]
    ready: BTreeSet<JobId>,
    /// RT jobs with a start row whose first-frame instant is not given yet
    /// ([`FirstFrame`]).
    #[serde(default)]
    to_gate: BTreeSet<JobId>,
    /// The first-frame instants the last slice gave.
    #[serde(skip)]
    first_frames: Vec<FirstFrame>,
}

/// When an RT job's first frame starts: `offset_ns` after the start of the
/// slice that gave it (a slice of the job's start row, the first one after
/// its processes were all ready), so that every window of the job ends at
/// the same, roomy phase of its rows ([`super::first_frame_offset`]).
/// Agents publish the instant next to the job's frame counters; the
/// processes' `cosched_rt_init()` waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstFrame {
    pub job: JobId,
    pub offset_ns: u64,
}

/// A job warming up in its start row ([`OneLevelGangRotor::warming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warming {
    /// Its start row: the only one it runs in meanwhile.
    pub row: RowIndex,
    /// Runs of the start row left before the hold lapses (a process that
    /// never reports still gets all its rows back).
    pub runs_left: u64,
}

/// How long a warm-up may last, in windows of the job: a process that
/// never says it is ready gets all its rows back after this many windows'
/// worth of cycles in its start row alone.
pub const WARM_UP_WINDOWS: u64 = 2;

impl OneLevelGangRotor {
    pub fn new() -> Self {
        Self::default()
    }

    /// RT jobs waiting for their start row, and the row.
    pub fn starting(&self) -> &BTreeMap<JobId, RowIndex> {
        &self.starting
    }

    /// RT jobs warming up in their start row, and how.
    pub fn warming(&self) -> &BTreeMap<JobId, Warming> {
        &self.warming
    }

    /// Whether `job` sits out slices of `row`: it waits for its start row,
    /// or warms up in a start row that is not this one.
    pub fn holds(&self, job: JobId, row: RowIndex) -> bool {
        self.starting.contains_key(&job) || self.warming.get(&job).is_some_and(|w| w.row != row)
    }

    /// `job`'s processes are all ready for their first frame (each has
    /// published its frame counter on every node of the job): it runs in
    /// all its rows from the next slice on. A report before its start row
    /// is kept: it then skips the warm-up.
    pub fn counters_ready(&mut self, job: JobId) {
        self.warming.remove(&job);
        self.ready.insert(job);
    }

    /// Jobs allocated since the last slice: an RT job with a start row
    /// waits for it; jobs that left are forgotten.
    fn note_new_jobs(&mut self, state: &OneLevelGang) {
        self.seen.retain(|&job| state.allocation(job).is_some());
        self.starting
            .retain(|&job, _| state.allocation(job).is_some());
        self.warming
            .retain(|&job, _| state.allocation(job).is_some());
        self.ready.retain(|&job| state.allocation(job).is_some());
        self.to_gate.retain(|&job| state.allocation(job).is_some());
        for held in state.allocations() {
            if self.seen.insert(held.job.id)
                && let Some(row) = state.start_row_of(held.job.id)
            {
                self.starting.insert(held.job.id, row);
                self.to_gate.insert(held.job.id);
            }
        }
    }

    /// The first-frame instants `slice` of `row` gives: to the jobs that
    /// run in it, are ready, have not had theirs, and start in this row.
    fn gate_first_frames(&mut self, state: &OneLevelGang, row: RowIndex, slice: &Slice) {
        self.first_frames.clear();
        let running = slice.active_jobs();
        let due: Vec<JobId> = self
            .to_gate
            .iter()
            .copied()
            .filter(|job| self.ready.contains(job) && running.contains(job))
            .collect();
        for job in due {
            if let Some((start, offset_ns)) = state.first_frame_of(job)
                && start == row
            {
                self.to_gate.remove(&job);
                self.first_frames.push(FirstFrame { job, offset_ns });
            }
        }
    }

    /// The first-frame instants given by the slice [`Self::next_slice`]
    /// returned last (each job's once).
    pub fn first_frames(&self) -> &[FirstFrame] {
        &self.first_frames
    }

    /// RT jobs still to be given their first-frame instant.
    pub fn awaiting_first_frame(&self) -> &BTreeSet<JobId> {
        &self.to_gate
    }

    /// Takes the jobs still waiting for their start row, or warming up in
    /// another row, out of `slice` of `row`. A job whose start row this is
    /// runs from now on: in all its rows if its processes are ready, else in
    /// this row only until they are (or its warm-up lapses).
    fn hold_starting_jobs(&mut self, state: &OneLevelGang, row: RowIndex, slice: &mut Slice) {
        let started: Vec<JobId> = self
            .starting
            .iter()
            .filter(|&(_, &start)| start == row)
            .map(|(&job, _)| job)
            .collect();
        for job in started {
            self.starting.remove(&job);
            if !self.ready.contains(&job) {
                self.warming.insert(
                    job,
                    Warming {
                        row,
                        runs_left: warm_up_runs(state, job),
                    },
                );
            }
        }
        self.warming.retain(|_, warming| {
            if warming.row != row {
                return true;
            }
            warming.runs_left = warming.runs_left.saturating_sub(1);
            warming.runs_left > 0
        });
        for active in &mut slice.active_by_node {
            active.retain(|&job| !self.holds(job, row));
        }
    }

    /// Rows still to run in the current round.
    pub fn remaining_in_round(&self) -> Vec<RowIndex> {
        self.remaining.iter().copied().collect()
    }

    /// The next slice, or `None` when the matrix is empty.
    pub fn next_slice(&mut self, state: &OneLevelGang) -> Option<Slice> {
        self.first_frames.clear();
        loop {
            if self.remaining.is_empty() {
                let rotation = state.rotation();
                if rotation.is_empty() {
                    return None;
                }
                self.remaining = rotation.into();
                self.rounds_started += 1;
            }
            let row = self.remaining.pop_front().expect("refilled above");
            if row >= state.rows() || (state.is_row_empty(row) && !state.keeps_full_cycle()) {
                continue;
            }
            self.note_new_jobs(state);
            let mut slice = state.slice(self.next_number, self.rounds_started - 1, row);
            self.hold_starting_jobs(state, row, &mut slice);
            self.gate_first_frames(state, row, &slice);
            self.next_number += 1;
            return Some(slice);
        }
    }
}

/// Runs of its start row a job may warm up for: [`WARM_UP_WINDOWS`] of its
/// windows in cycles of the full matrix (at least one run, which is the
/// start row's own).
fn warm_up_runs(state: &OneLevelGang, job: JobId) -> u64 {
    let cycle = state.config().cycle_ns().max(1);
    state
        .allocation(job)
        .and_then(|held| held.job.rt_spec())
        .map_or(1, |spec| {
            (WARM_UP_WINDOWS * spec.window_ns()).div_ceil(cycle).max(1) + 1
        })
}
