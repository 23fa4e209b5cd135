//! 1GS's real-time rows on a node. A row of the one-level gang matrix that
//! holds an admitted RT job is that job's guarantee: its frames were
//! admitted against the row's time. Inside it, two things still take CPU
//! from the job's processes if nothing is done: whatever else runs on the
//! node's CPU (CFS shares it with them at SCHED_OTHER) and the agent's own
//! periodic work (at its real-time priority). So:
//!
//! - [`rt_row_level`]: inside its own row an RT process within its budget
//!   runs at a real-time priority (below the agent, whose switch ends the
//!   row); outside its row the gang overlay stops or demotes it as before,
//!   so the priority is bounded by the row. A process over its budget in
//!   its window gets no priority (the throttle the frame accounting
//!   already decides).
//! - [`QuietRows`]: while such a row runs, the agent's periodic work that can
//!   wait (ticks, polls, reports) waits for the row's end, at most a bound at
//!   a stretch.
//!
//! The agent asks both; nothing here touches the kernel.

use super::{action::Level, gang_overlay::SliceMembership};

/// A task as a 1GS row sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowTask {
    /// Not a process of an RT job (a BE job's task, a launcher daemon).
    NotRt,
    /// A process of an RT job, within its CPU budget in its window.
    Rt,
    /// A process of an RT job that used more than its budget in its
    /// window: throttled until the window ends.
    RtOverBudget,
}

/// The level a 1GS row gives a task when it overrules the local policy:
/// `Boost { prio }` for an RT process within its budget inside its own
/// row; `None` otherwise (outside gang mode, outside its row — where
/// [`super::gang_overlay`] decides —, not RT, over budget).
pub fn rt_row_level(membership: Option<SliceMembership>, task: RowTask, prio: u8) -> Option<Level> {
    match (membership, task) {
        (Some(SliceMembership { in_slice: true, .. }), RowTask::Rt) => Some(Level::Boost { prio }),
        _ => None,
    }
}

/// How long periodic work waits for an RT row's end at most, by default.
pub const DEFAULT_QUIET_BOUND_NS: u64 = 50_000_000;

/// Holds the agent's periodic work out of RT rows: while they run back to
/// back it waits until the first of them started plus `bound_ns`, then runs
/// once and a new stretch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietRows {
    bound_ns: u64,
    since_ns: Option<u64>,
}

impl QuietRows {
    pub fn new(bound_ns: u64) -> Self {
        Self {
            bound_ns,
            since_ns: None,
        }
    }

    /// Called once per pass of the agent's loop: `Some(t)` while periodic
    /// work must wait until `t` (an RT row runs and the stretch is within
    /// its bound); `None` when it may run now (no RT row, or the bound
    /// passed: the stretch then ends, the next call starts a new one).
    pub fn hold_until(&mut self, now_ns: u64, in_rt_row: bool) -> Option<u64> {
        if !in_rt_row {
            self.since_ns = None;
            return None;
        }
        let since = *self.since_ns.get_or_insert(now_ns);
        let until = since.saturating_add(self.bound_ns);
        if now_ns < until {
            Some(until)
        } else {
            self.since_ns = None;
            None
        }
    }
}

impl Default for QuietRows {
    fn default() -> Self {
        Self::new(DEFAULT_QUIET_BOUND_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIO: u8 = 39;

    fn row(in_slice: bool) -> Option<SliceMembership> {
        Some(SliceMembership {
            in_slice,
            strict: true,
        })
    }

    #[test]
    fn an_rt_process_in_its_own_row_runs_at_a_real_time_priority() {
        assert_eq!(
            rt_row_level(row(true), RowTask::Rt, PRIO),
            Some(Level::Boost { prio: PRIO })
        );
    }

    #[test]
    fn outside_its_row_the_gang_overlay_decides_so_the_priority_ends_with_the_row() {
        assert_eq!(rt_row_level(row(false), RowTask::Rt, PRIO), None);
        assert_eq!(
            super::super::gang_overlay(row(false)),
            Some(Level::Stop),
            "the row's end stops it"
        );
    }

    #[test]
    fn an_rt_process_over_its_budget_gets_no_priority_in_its_row() {
        assert_eq!(rt_row_level(row(true), RowTask::RtOverBudget, PRIO), None);
    }

    #[test]
    fn a_be_task_in_its_row_and_any_task_outside_gang_mode_keep_their_policys_level() {
        assert_eq!(rt_row_level(row(true), RowTask::NotRt, PRIO), None);
        assert_eq!(rt_row_level(None, RowTask::Rt, PRIO), None);
    }

    #[test]
    fn periodic_work_waits_for_the_end_of_back_to_back_rt_rows() {
        let mut quiet = QuietRows::new(50);
        assert_eq!(quiet.hold_until(100, true), Some(150));
        // The next RT row (same stretch): still until 150.
        assert_eq!(quiet.hold_until(120, true), Some(150));
        // A BE row: it runs at once.
        assert_eq!(quiet.hold_until(130, false), None);
        // A later RT row starts a stretch of its own.
        assert_eq!(quiet.hold_until(140, true), Some(190));
    }

    #[test]
    fn rt_rows_longer_than_the_bound_let_periodic_work_run_once_per_bound() {
        let mut quiet = QuietRows::new(50);
        assert_eq!(quiet.hold_until(0, true), Some(50));
        assert_eq!(quiet.hold_until(49, true), Some(50));
        assert_eq!(
            quiet.hold_until(50, true),
            None,
            "the bound passed: it runs"
        );
        assert_eq!(quiet.hold_until(51, true), Some(101), "then waits again");
    }

    #[test]
    fn without_rt_rows_nothing_waits() {
        let mut quiet = QuietRows::default();
        assert_eq!(quiet.hold_until(0, false), None);
        assert_eq!(quiet.hold_until(1_000_000_000, false), None);
    }
}
