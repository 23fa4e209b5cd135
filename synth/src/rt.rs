//! Real-time mode arithmetic (pure): frames per window and the work per
//! frame, as each process counts them for itself.
//!
//! A real-time job declares a period d, b frames per window and work τ per
//! frame ([`cosched_proto::class::RtParams`]). A process meets its deadlines
//! when it finishes b frames in every window Γ = b·d; a window with n < b
//! misses b − n frames, and the miss rate is Σ(b − n) / (b · windows).
//!
//! Windows are the process's own, from the start of its first frame: a
//! stage further down the pipeline gets its first frame later, and the
//! pipeline's fill time is not a miss. No clock is shared between
//! processes, which may be on different machines. A frame done exactly at a
//! window's end meets that window's deadline.

use serde::{Deserialize, Serialize};

/// Empty windows in a row listed one by one in the per-window misses (a
/// stalled process's list stays short).
const MAX_EMPTY_LISTED: u64 = 1000;

/// Counts one process's frames into windows of `window_ns`.
#[derive(Clone, Debug)]
pub struct FrameWindows {
    window_ns: u64,
    frames_per_window: u64,
    origin_ns: Option<u64>,
    /// Window the latest frame fell in, and the frames in it so far.
    current: u64,
    in_current: u64,
    /// Totals of the windows closed so far.
    closed: WindowTotals,
    /// b − n of each closed window, in order (0 for a window met).
    missed_by_window: Vec<u64>,
}

/// Frames and misses over the complete windows of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowTotals {
    /// Windows that ended before the run did (the last, partial one is not
    /// judged).
    pub windows: u64,
    /// Frames done in those windows.
    pub frames: u64,
    /// Σ (b − n) over windows with n < b.
    pub missed_frames: u64,
    /// Windows with n < b: a deadline missed.
    pub missed_windows: u64,
}

impl WindowTotals {
    /// Σ(b − n) / (b · windows); 0 with no complete window.
    pub fn miss_rate(&self, frames_per_window: u32) -> f64 {
        let due = self.windows as f64 * f64::from(frames_per_window);
        if due > 0.0 {
            self.missed_frames as f64 / due
        } else {
            0.0
        }
    }
}

impl FrameWindows {
    /// Windows of `window_ns` (Γ = b·d, positive) that each want
    /// `frames_per_window` (b) frames.
    pub fn new(window_ns: u64, frames_per_window: u32) -> Self {
        assert!(window_ns > 0, "a window has a length");
        FrameWindows {
            window_ns,
            frames_per_window: u64::from(frames_per_window),
            origin_ns: None,
            current: 0,
            in_current: 0,
            closed: WindowTotals::default(),
            missed_by_window: Vec::new(),
        }
    }

    /// The first frame started at `at_ns`: window 0 begins. Later calls
    /// change nothing.
    pub fn start(&mut self, at_ns: u64) {
        self.origin_ns.get_or_insert(at_ns);
    }

    /// A frame was done at `at_ns` (starting the windows there if
    /// [`start`](Self::start) was not called).
    pub fn frame_done(&mut self, at_ns: u64) {
        let window = self.window_of(at_ns);
        if window > self.current {
            self.close_until(window);
        }
        // A clock read out of order cannot reopen a closed window.
        self.in_current += 1;
    }

    /// Totals of the windows complete at `end_ns`, the end of the run.
    pub fn finish(self, end_ns: u64) -> WindowTotals {
        self.finish_by_window(end_ns).0
    }

    /// [`finish`](Self::finish), and b − n of each complete window in order
    /// (where in a run the misses fell: start-up, or all along).
    pub fn finish_by_window(mut self, end_ns: u64) -> (WindowTotals, Vec<u64>) {
        let Some(origin) = self.origin_ns else {
            return (WindowTotals::default(), Vec::new());
        };
        let complete = end_ns.saturating_sub(origin) / self.window_ns;
        if complete > self.current {
            self.close_until(complete);
        }
        (self.closed, self.missed_by_window)
    }

    /// The window a frame done at `at_ns` counts in: (start, end] intervals.
    fn window_of(&mut self, at_ns: u64) -> u64 {
        let origin = *self.origin_ns.get_or_insert(at_ns);
        at_ns.saturating_sub(origin).saturating_sub(1) / self.window_ns
    }

    /// Closes the current window and every empty one before `window`.
    fn close_until(&mut self, window: u64) {
        let b = self.frames_per_window;
        let empty = window - self.current - 1;
        let closed = &mut self.closed;
        closed.windows += 1 + empty;
        closed.frames += self.in_current;
        let missed = b.saturating_sub(self.in_current);
        if missed > 0 {
            closed.missed_frames += missed;
            closed.missed_windows += 1;
        }
        self.missed_by_window.push(missed);
        self.missed_by_window
            .extend(std::iter::repeat_n(b, empty.min(MAX_EMPTY_LISTED) as usize));
        closed.missed_frames += empty * b;
        closed.missed_windows += empty;
        self.current = window;
        self.in_current = 0;
    }
}

/// Median and tail of a sample, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of nanosecond samples (sorted here), in µs;
    /// all 0 for no samples.
    pub fn of_ns(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        let at = |q: f64| {
            if samples.is_empty() {
                return 0.0;
            }
            let rank = (q * samples.len() as f64).ceil() as usize;
            samples[rank.clamp(1, samples.len()) - 1] as f64 / 1e3
        };
        Percentiles {
            p50: at(0.50),
            p95: at(0.95),
            p99: at(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: u64 = 1_000;

    /// Windows of b = 4 frames of period D.
    fn windows() -> FrameWindows {
        FrameWindows::new(4 * D, 4)
    }

    #[test]
    fn per_window_misses_say_where_a_run_missed() {
        // b = 2, Γ = 10: window 0 gets 1 frame, window 1 two, windows 2 and
        // 3 none (a stall), window 4 two.
        let mut w = FrameWindows::new(10, 2);
        w.start(0);
        w.frame_done(5);
        w.frame_done(12);
        w.frame_done(18);
        w.frame_done(43);
        w.frame_done(47);
        let (totals, by_window) = w.finish_by_window(50);
        assert_eq!(by_window, vec![1, 0, 2, 2, 0]);
        assert_eq!(totals.missed_frames, by_window.iter().sum::<u64>());
    }

    #[test]
    fn one_frame_per_period_meets_every_window() {
        let mut w = windows();
        w.start(0);
        for k in 1..=40 {
            w.frame_done(k * D);
        }
        let totals = w.finish(40 * D);
        assert_eq!(
            totals,
            WindowTotals {
                windows: 10,
                frames: 40,
                missed_frames: 0,
                missed_windows: 0
            }
        );
        assert_eq!(totals.miss_rate(4), 0.0);
    }

    #[test]
    fn a_frame_done_at_the_deadline_meets_it_and_one_later_does_not() {
        let mut on_time = windows();
        on_time.start(0);
        for k in 1..=4 {
            on_time.frame_done(k * D);
        }
        assert_eq!(on_time.finish(4 * D).missed_frames, 0);

        let mut late = windows();
        late.start(0);
        for k in 1..=4 {
            late.frame_done(k * D + 1);
        }
        let totals = late.finish(8 * D);
        assert_eq!((totals.windows, totals.frames), (2, 4));
        // Window 0 got 3 frames, window 1 the late one.
        assert_eq!((totals.missed_frames, totals.missed_windows), (1 + 3, 2));
    }

    #[test]
    fn a_slow_process_misses_b_minus_n_per_window_and_empty_windows_miss_all() {
        let mut w = windows();
        w.start(0);
        // Two frames in window 0, none in windows 1 and 2, four in window 3.
        w.frame_done(D);
        w.frame_done(2 * D);
        for k in 0..4 {
            w.frame_done(12 * D + 1 + k);
        }
        let totals = w.finish(16 * D);
        assert_eq!(
            totals,
            WindowTotals {
                windows: 4,
                frames: 6,
                missed_frames: 2 + 4 + 4,
                missed_windows: 3
            }
        );
        assert_eq!(totals.miss_rate(4), 10.0 / 16.0);
    }

    #[test]
    fn catching_up_does_not_repay_an_earlier_window() {
        let mut w = windows();
        w.start(0);
        w.frame_done(D);
        for k in 0..7 {
            w.frame_done(5 * D + k);
        }
        let totals = w.finish(8 * D);
        assert_eq!((totals.missed_frames, totals.missed_windows), (3, 1));
    }

    #[test]
    fn the_partial_last_window_is_not_judged() {
        let mut w = windows();
        w.start(0);
        for k in 1..=6 {
            w.frame_done(k * D);
        }
        let totals = w.finish(6 * D);
        assert_eq!(
            (totals.windows, totals.frames, totals.missed_frames),
            (1, 4, 0)
        );
        assert_eq!(
            windows().finish(100 * D),
            WindowTotals::default(),
            "never started"
        );
    }

    #[test]
    fn windows_start_at_the_first_frame_of_this_process() {
        let mut w = windows();
        w.start(1_000_000);
        w.start(2_000_000);
        for k in 1..=8 {
            w.frame_done(1_000_000 + k * D);
        }
        assert_eq!(w.finish(1_000_000 + 8 * D).missed_frames, 0);
    }

    #[test]
    fn percentiles_are_nearest_rank_in_microseconds() {
        let mut samples: Vec<u64> = (1..=100).rev().map(|us| us * 1_000).collect();
        let p = Percentiles::of_ns(&mut samples);
        assert_eq!((p.p50, p.p95, p.p99), (50.0, 95.0, 99.0));
        let one = Percentiles::of_ns(&mut [2_500]);
        assert_eq!((one.p50, one.p99), (2.5, 2.5));
        assert_eq!(Percentiles::of_ns(&mut []), Percentiles::default());
    }
}
