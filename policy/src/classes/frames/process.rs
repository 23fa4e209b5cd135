//! One RT process's windows, frames and CPU budget.

use super::{BudgetParams, FrameReading, FrameState, FrameTotals, WindowReport};
use crate::classes::spec::RtSpec;

/// The frame and budget state of one RT process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessFrames {
    spec: RtSpec,
    start_ns: u64,
    budget_ns: u64,
    /// Index of the open window.
    window: u64,
    /// Frames and CPU credited to the open window.
    done: u64,
    cpu: u64,
    last: FrameReading,
    last_ns: u64,
    totals: FrameTotals,
}

impl ProcessFrames {
    /// A process of `spec` whose job started at `start_ns`, with its counters
    /// at `origin` then.
    pub fn new(spec: RtSpec, start_ns: u64, origin: FrameReading, budget: BudgetParams) -> Self {
        Self {
            spec,
            start_ns,
            budget_ns: budget.budget_ns(&spec),
            window: 0,
            done: 0,
            cpu: 0,
            last: origin,
            last_ns: start_ns,
            totals: FrameTotals::default(),
        }
    }

    pub fn spec(&self) -> &RtSpec {
        &self.spec
    }

    pub fn budget_ns(&self) -> u64 {
        self.budget_ns
    }

    /// Index of the open window.
    pub fn window(&self) -> u64 {
        self.window
    }

    pub fn window_start_ns(&self) -> u64 {
        self.window_start(self.window)
    }

    pub fn window_end_ns(&self) -> u64 {
        self.window_start(self.window.saturating_add(1))
    }

    /// Frames credited to the open window so far (n).
    pub fn frames_in_window(&self) -> u64 {
        self.done
    }

    /// CPU credited to the open window so far.
    pub fn cpu_in_window_ns(&self) -> u64 {
        self.cpu
    }

    /// Totals over the closed windows.
    pub fn totals(&self) -> FrameTotals {
        self.totals
    }

    /// When the agent must call [`Self::tick`] at the latest: the end of the
    /// open window.
    pub fn next_wakeup_ns(&self) -> u64 {
        self.window_end_ns()
    }

    /// The process's state in its open window. Throttling wins over
    /// satisfaction: a throttled process may not even use lent time.
    pub fn state(&self) -> FrameState {
        let until_ns = self.window_end_ns();
        if self.cpu > self.budget_ns {
            return FrameState::Throttled { until_ns };
        }
        let frames = u64::from(self.spec.frames);
        if self.done >= frames {
            return FrameState::Satisfied {
                until_ns,
                next_deadline_ns: until_ns.saturating_add(self.spec.period_ns),
            };
        }
        // Frame k of the window starting at w is due at w + (k+1)·d.
        let deadline_ns = self
            .window_start_ns()
            .saturating_add((self.done + 1).saturating_mul(self.spec.period_ns));
        FrameState::Due { deadline_ns }
    }

    /// A new reading at `now_ns`: closes the windows that ended, credits the
    /// progress, and returns the closed windows.
    ///
    /// A reading cannot tell when between the previous reading and this one
    /// its frames were done. When that span crosses window ends, the frames
    /// are credited to the oldest windows first, at most b each (and the CPU
    /// at most the budget each), the rest to the open window: a reading that
    /// comes late therefore never invents a miss or an overrun for a process
    /// that kept up, and a window is never credited more than it can use.
    /// Within one window every frame counts, so n may exceed b when the
    /// process works ahead.
    ///
    /// A counter that goes back (the process restarted counting) is taken as
    /// a new origin: that reading credits nothing.
    pub fn observe(&mut self, now_ns: u64, reading: FrameReading) -> Vec<WindowReport> {
        let frames = reading.frames.saturating_sub(self.last.frames);
        let cpu = reading.cpu_ns.saturating_sub(self.last.cpu_ns);
        self.last = reading;
        self.advance(now_ns, frames, cpu)
    }

    /// The same as [`Self::observe`] for a caller that already turned its
    /// readings into increments (frames and CPU time since its previous
    /// reading, e.g. after a counter restart it handled itself). The
    /// counters [`Self::observe`] compares against are not touched.
    pub fn credit(&mut self, now_ns: u64, frames: u64, cpu_ns: u64) -> Vec<WindowReport> {
        self.advance(now_ns, frames, cpu_ns)
    }

    /// Closes the windows that ended by `now_ns` with what they have.
    pub fn tick(&mut self, now_ns: u64) -> Vec<WindowReport> {
        self.advance(now_ns, 0, 0)
    }

    fn window_start(&self, window: u64) -> u64 {
        self.start_ns
            .saturating_add(window.saturating_mul(self.spec.window_ns()))
    }

    fn window_at(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.start_ns) / self.spec.window_ns().max(1)
    }

    fn advance(&mut self, now_ns: u64, mut frames: u64, mut cpu: u64) -> Vec<WindowReport> {
        // Time never goes back: a stale reading counts as taken now.
        let now_ns = now_ns.max(self.last_ns);
        self.last_ns = now_ns;
        let target = self.window_at(now_ns);
        let b = u64::from(self.spec.frames);
        let mut reports: Vec<WindowReport> = Vec::new();
        while self.window < target {
            let credit = frames.min(b.saturating_sub(self.done));
            self.done += credit;
            frames -= credit;
            let credit = cpu.min(self.budget_ns.saturating_sub(self.cpu));
            self.cpu += credit;
            cpu -= credit;
            if self.done == 0 && self.cpu == 0 && frames == 0 && cpu == 0 {
                // Nothing left to credit: every window up to `target` closes
                // empty, in one report.
                let report = self.report(target - self.window);
                self.totals.record(&report);
                reports.push(report);
                self.window = target;
                break;
            }
            let report = self.report(1);
            self.totals.record(&report);
            reports.push(report);
            self.window += 1;
            self.done = 0;
            self.cpu = 0;
        }
        self.done = self.done.saturating_add(frames);
        self.cpu = self.cpu.saturating_add(cpu);
        reports
    }

    fn report(&self, windows: u64) -> WindowReport {
        let b = u64::from(self.spec.frames);
        let met = self.done.min(b);
        WindowReport {
            window: self.window,
            windows,
            start_ns: self.window_start(self.window),
            end_ns: self.window_start(self.window.saturating_add(windows)),
            frames_done: self.done,
            met,
            missed: (b - met).saturating_mul(windows),
            cpu_ns: self.cpu,
            overran: self.cpu > self.budget_ns,
        }
    }
}
