//! Frame accounting per RT process: windows, misses, the EDF deadline, and
//! the CPU budget (the BE/RT coscheduling paper §3.1: b frames are due in
//! every window Γ = b·d and a window with n < b frames misses b − n; §4.2: a
//! process that has produced its b frames "may not help" being scheduled
//! further in its current period).
//!
//! The agent reads two monotonic counters of each RT process — frames
//! completed and CPU time consumed — whenever it likes, and calls
//! [`ProcessFrames::tick`] at [`ProcessFrames::next_wakeup_ns`] so windows
//! close on time even when the counters never move. Windows are aligned to
//! the job's start: window k is `[start + k·Γ, start + (k+1)·Γ)`.

mod job;
mod process;

use std::iter::Sum;
use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

use super::spec::RtSpec;

pub use job::JobFrames;
pub use process::ProcessFrames;

/// One reading of a process's cumulative counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameReading {
    /// Frames completed since the process started counting.
    pub frames: u64,
    /// CPU time consumed, ns.
    pub cpu_ns: u64,
}

/// How much CPU a process may use per window before it is throttled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetParams {
    /// The budget is b·τ plus this percentage (0: exactly the declared work).
    pub slack_percent: u32,
}

impl BudgetParams {
    /// CPU a process of `spec` may use per window.
    pub fn budget_ns(&self, spec: &RtSpec) -> u64 {
        let base = u128::from(spec.work_per_window_ns());
        let with_slack = base * (100 + u128::from(self.slack_percent)) / 100;
        u64::try_from(with_slack).unwrap_or(u64::MAX)
    }
}

/// What the agent should do with a process now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameState {
    /// Frames are still due in this window; the next one by `deadline_ns`
    /// (the EDF key).
    Due { deadline_ns: u64 },
    /// All b frames of this window are done: running it further does not
    /// help until `until_ns`, when its next window opens; its next frame is
    /// due at `next_deadline_ns`.
    Satisfied {
        until_ns: u64,
        next_deadline_ns: u64,
    },
    /// It used more CPU than its budget in this window: it must not run
    /// until `until_ns`, when its next window opens.
    Throttled { until_ns: u64 },
}

impl FrameState {
    /// The EDF key: the deadline of the process's next frame (for a
    /// throttled process, the end of its window, before which it cannot run).
    pub fn deadline_ns(&self) -> u64 {
        match *self {
            Self::Due { deadline_ns } => deadline_ns,
            Self::Satisfied {
                next_deadline_ns, ..
            } => next_deadline_ns,
            Self::Throttled { until_ns } => until_ns,
        }
    }
}

/// One closed window, or a run of consecutive windows in which nothing was
/// credited (merged so a process that is never read for a long time does not
/// produce one report per window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowReport {
    /// Index of the (first) window since the job's start.
    pub window: u64,
    /// Number of windows this report covers (1 unless merged).
    pub windows: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Frames credited (n; may exceed b when the process worked ahead).
    pub frames_done: u64,
    /// Frames that count toward the target: min(n, b) per window.
    pub met: u64,
    /// max(0, b − n) per window, summed.
    pub missed: u64,
    /// CPU credited to the window.
    pub cpu_ns: u64,
    /// The process used more than its budget in this window.
    pub overran: bool,
}

impl WindowReport {
    /// (b − n)/b, in parts per million.
    pub fn miss_rate_ppm(&self) -> u64 {
        ratio_ppm(self.missed, self.met + self.missed)
    }
}

/// Frames expected, met and missed over closed windows; summed over the
/// processes of a job (and over nodes) with `+=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameTotals {
    pub windows: u64,
    /// b per closed window.
    pub expected: u64,
    /// min(n, b) per closed window.
    pub met: u64,
    pub missed: u64,
    /// Windows in which the budget was exceeded.
    pub overruns: u64,
}

impl FrameTotals {
    /// missed / expected, in parts per million (0 before any window closed).
    pub fn miss_rate_ppm(&self) -> u64 {
        ratio_ppm(self.missed, self.expected)
    }

    pub(crate) fn record(&mut self, report: &WindowReport) {
        self.windows += report.windows;
        self.expected += report.met + report.missed;
        self.met += report.met;
        self.missed += report.missed;
        self.overruns += u64::from(report.overran);
    }
}

impl AddAssign for FrameTotals {
    fn add_assign(&mut self, other: Self) {
        self.windows += other.windows;
        self.expected += other.expected;
        self.met += other.met;
        self.missed += other.missed;
        self.overruns += other.overruns;
    }
}

impl Sum for FrameTotals {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |mut acc, t| {
            acc += t;
            acc
        })
    }
}

fn ratio_ppm(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    (u128::from(part) * 1_000_000 / u128::from(whole)) as u64
}
