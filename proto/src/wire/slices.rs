//! Gang scheduling: slice switches and the utilisation reports that paired
//! gang scheduling predicts from.

use serde::{Deserialize, Serialize};

use super::jobs::JobId;
use super::kind::MessageKind;
use super::payload::Payload;

/// Coordinator → agent: switch to these matrix rows at `apply_at_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSlice {
    /// Changes when the matrix is rebuilt; slices of an older epoch are stale.
    pub epoch: u64,
    /// Slice counter within the epoch.
    pub slice: u64,
    /// Ousterhout-matrix rows that run in this slice (two for paired gang).
    pub rows: Vec<u32>,
    /// The jobs of those rows that have ranks on this node.
    pub active_jobs: Vec<JobId>,
    /// When to switch, in the agent's clock (the coordinator converts with
    /// its heartbeat offset estimate), nanoseconds.
    pub apply_at_ns: u64,
    /// Gang switches are strict: applied even if late (reported late in
    /// [`SliceSwitched`]). A non-strict switch is a hint a late agent may skip.
    pub strict: bool,
}

impl Payload for SwitchSlice {
    const KIND: MessageKind = MessageKind::SwitchSlice;
}

/// One slice of a [`SliceSchedule`]: what runs on the receiving node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduledSlice {
    /// Matrix rows of the slice (as in [`SwitchSlice::rows`]).
    pub rows: Vec<u32>,
    /// The jobs of those rows with ranks on this node.
    pub active_jobs: Vec<JobId>,
}

/// The minor version from which an agent takes [`SliceSchedule`]s.
pub const SCHEDULE_SINCE_MINOR: u8 = 5;

/// Longest schedule accepted (slices listed), far above any matrix's rows.
pub const MAX_SCHEDULED_SLICES: usize = 4096;

/// Coordinator → agent (protocol 1.5): the slices from `first_slice` on,
/// announced once and switched by the agent's own timer, so steady-state
/// gang scheduling needs no message per slice. Slice `first_slice + k`
/// starts at `first_apply_at_ns + k × slice_ns` (the agent's clock) and runs
/// `slices[k]` while `k` is inside the list, then the list repeats from
/// `repeat_from` (the rotation's cycle). A later schedule or `SwitchSlice`
/// replaces it from its own slice on. The agent reports
/// [`SliceSwitched`] only for slices whose number is a multiple of
/// `report_every`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceSchedule {
    pub epoch: u64,
    pub first_slice: u64,
    pub first_apply_at_ns: u64,
    pub slice_ns: u64,
    pub slices: Vec<ScheduledSlice>,
    pub repeat_from: u32,
    pub report_every: u64,
    /// As [`SwitchSlice::strict`].
    pub strict: bool,
}

impl SliceSchedule {
    /// The entry that runs in slice `number` (`None` before `first_slice`).
    pub fn entry(&self, number: u64) -> Option<&ScheduledSlice> {
        let k = number.checked_sub(self.first_slice)?;
        let len = self.slices.len() as u64;
        let index = if k < len {
            k
        } else {
            let from = u64::from(self.repeat_from);
            from + (k - from) % (len - from)
        };
        self.slices.get(index as usize)
    }

    /// When slice `number` starts, in the agent's clock.
    pub fn apply_at_ns(&self, number: u64) -> Option<u64> {
        let k = number.checked_sub(self.first_slice)?;
        k.checked_mul(self.slice_ns)?
            .checked_add(self.first_apply_at_ns)
    }

    /// Slice `number` as the `SwitchSlice` that would have announced it.
    pub fn switch(&self, number: u64) -> Option<SwitchSlice> {
        let entry = self.entry(number)?;
        Some(SwitchSlice {
            epoch: self.epoch,
            slice: number,
            rows: entry.rows.clone(),
            active_jobs: entry.active_jobs.clone(),
            apply_at_ns: self.apply_at_ns(number)?,
            strict: self.strict,
        })
    }

    /// The first slice starting at or after `now_ns` (agent clock).
    pub fn next_from(&self, now_ns: u64) -> u64 {
        match now_ns.checked_sub(self.first_apply_at_ns) {
            None | Some(0) => self.first_slice,
            Some(past) => self.first_slice + past.div_ceil(self.slice_ns),
        }
    }

    /// Whether the agent reports switching to slice `number`.
    pub fn reports(&self, number: u64) -> bool {
        number.is_multiple_of(self.report_every)
    }
}

impl Payload for SliceSchedule {
    const KIND: MessageKind = MessageKind::SliceSchedule;

    fn check(&self) -> Result<(), String> {
        if self.slices.is_empty() || self.slices.len() > MAX_SCHEDULED_SLICES {
            return Err(format!(
                "{} slices listed (1..={MAX_SCHEDULED_SLICES})",
                self.slices.len()
            ));
        }
        if self.repeat_from as usize >= self.slices.len() {
            return Err(format!(
                "repeat_from {} is outside the {} slices",
                self.repeat_from,
                self.slices.len()
            ));
        }
        if self.slice_ns == 0 || self.report_every == 0 {
            return Err("slice_ns and report_every must be positive".into());
        }
        if self.slices.iter().any(|slice| slice.rows.is_empty()) {
            return Err("a scheduled slice without rows (idle is a SwitchSlice)".into());
        }
        Ok(())
    }
}

/// Agent → coordinator: the switch happened, at `switched_at_ns` in the
/// agent's clock (for slice-switch skew).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceSwitched {
    pub epoch: u64,
    pub slice: u64,
    pub switched_at_ns: u64,
}

impl Payload for SliceSwitched {
    const KIND: MessageKind = MessageKind::SliceSwitched;
}

/// One job's CPU use during one quantum on the reporting node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobUtilisation {
    pub job_id: JobId,
    /// Index of the quantum (slice) measured.
    pub quantum: u64,
    /// On-CPU time from eBPF divided by quantum length, in `0.0..=1.0`.
    pub cpu_utilisation: f64,
}

/// Agent → coordinator: per-job utilisation of finished quanta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UtilReport {
    pub jobs: Vec<JobUtilisation>,
}

impl Payload for UtilReport {
    const KIND: MessageKind = MessageKind::UtilReport;

    fn check(&self) -> Result<(), String> {
        match self
            .jobs
            .iter()
            .find(|job| !(0.0..=1.0).contains(&job.cpu_utilisation))
        {
            Some(job) => Err(format!(
                "job {} utilisation {} is outside 0..=1",
                job.job_id, job.cpu_utilisation
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(rows: &[&[u32]], repeat_from: u32) -> SliceSchedule {
        SliceSchedule {
            epoch: 2,
            first_slice: 10,
            first_apply_at_ns: 1_000,
            slice_ns: 100,
            slices: rows
                .iter()
                .map(|rows| ScheduledSlice {
                    rows: rows.to_vec(),
                    active_jobs: rows.iter().map(|row| row + 100).collect(),
                })
                .collect(),
            repeat_from,
            report_every: 4,
            strict: true,
        }
    }

    #[test]
    fn a_partial_round_then_the_cycle_repeats_from_repeat_from() {
        // Slices 10, 11 finish the current round (rows 2, 3), then rows
        // 0..=3 cycle.
        let s = schedule(&[&[2], &[3], &[0], &[1], &[2], &[3]], 2);
        let rows: Vec<u32> = (10..20).map(|n| s.entry(n).unwrap().rows[0]).collect();
        assert_eq!(rows, [2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(s.entry(9), None);
        assert_eq!(s.apply_at_ns(13), Some(1_300));
        let switch = s.switch(14).unwrap();
        assert_eq!(
            (
                switch.slice,
                switch.rows,
                switch.active_jobs,
                switch.apply_at_ns
            ),
            (14, vec![2], vec![102], 1_400)
        );
    }

    #[test]
    fn the_next_slice_from_an_instant_rounds_up_to_a_boundary() {
        let s = schedule(&[&[0]], 0);
        assert_eq!(s.next_from(0), 10);
        assert_eq!(s.next_from(1_000), 10);
        assert_eq!(s.next_from(1_001), 11);
        assert_eq!(s.next_from(1_200), 12);
        assert!(s.reports(12) && !s.reports(13));
    }

    #[test]
    fn empty_schedules_and_a_cycle_outside_the_list_are_refused() {
        assert!(schedule(&[], 0).check().is_err());
        assert!(schedule(&[&[0]], 1).check().is_err());
        assert!(schedule(&[&[]], 0).check().is_err());
        let mut zero = schedule(&[&[0]], 0);
        zero.report_every = 0;
        assert!(zero.check().is_err());
        assert!(schedule(&[&[0], &[1]], 1).check().is_ok());
    }
}
