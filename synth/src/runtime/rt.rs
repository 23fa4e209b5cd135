//! One rank's real-time mode at run time: releasing frames (rank 0),
//! timing each frame, reporting it through cosched-rt and counting it into
//! windows ([`crate::rt`] does the arithmetic).

use std::path::PathBuf;
use std::time::Duration;

use crate::clock::process_start_ns;
use crate::clock::{monotonic_ns, sleep_until_monotonic_ns, thread_cpu_time};
use crate::config::RtMode;
use crate::report::{MAX_FRAME_TIMES, RtReport, RtTimeline};
use crate::rt::{FrameWindows, Percentiles};

pub struct RtRun {
    mode: RtMode,
    windows: FrameWindows,
    /// When the next frame is released (rank 0), from the first release.
    next_release_ns: Option<u64>,
    /// CPU time of this thread when the current frame's compute began.
    frame_cpu_start: Option<Duration>,
    /// CPU time of each frame, ns.
    work_ns: Vec<u64>,
    frames: u64,
    /// The counter file, or why there is none.
    counter: Result<PathBuf, String>,
    timeline: RtTimeline,
}

impl RtRun {
    /// Creates the cosched-rt counter file now, before the first frame, so
    /// the agent can see the process (and the reason is known if it cannot).
    pub fn begin(mode: RtMode) -> Self {
        let counter = match cosched_rt::init() {
            Ok(()) => cosched_rt::counter_path().ok_or_else(|| "no counter file".to_owned()),
            Err(err) => Err(err.to_string()),
        };
        let timeline = RtTimeline {
            process_start_ns: process_start_ns().unwrap_or(0),
            began_ns: monotonic_ns(),
            gate_ns: cosched_rt::first_frame_gate_ns().unwrap_or(0),
            ..RtTimeline::default()
        };
        RtRun {
            timeline,
            mode,
            windows: FrameWindows::new(mode.window_ns, mode.frames),
            next_release_ns: None,
            frame_cpu_start: None,
            work_ns: Vec::new(),
            frames: 0,
            counter,
        }
    }

    /// Rank 0: waits until the next frame is due. The first is due now,
    /// each next one a period after the previous one's due time: a source
    /// that fell behind releases at once until it caught up (frames are
    /// late, never skipped).
    pub fn release(&mut self) {
        let due = *self.next_release_ns.get_or_insert_with(monotonic_ns);
        sleep_until_monotonic_ns(due);
        self.next_release_ns = Some(due.saturating_add(self.mode.period_ns));
    }

    /// The frame's compute begins (its input is here): its work is measured
    /// from now, and the first frame starts this process's windows.
    pub fn frame_started(&mut self) {
        let now = monotonic_ns();
        if self.timeline.first_frame_ns == 0 {
            self.timeline.first_frame_ns = now;
        }
        self.windows.start(now);
        self.frame_cpu_start = Some(thread_cpu_time());
    }

    /// The frame is done: report it, as an RT program would, and count it.
    pub fn frame_done(&mut self) {
        if let Err(err) = cosched_rt::frame_done() {
            self.counter = Err(err.to_string());
        }
        let now = monotonic_ns();
        if self.timeline.first_done_ns.len() < 2 * self.mode.frames as usize {
            self.timeline.first_done_ns.push(now);
        }
        if self.timeline.done_us.len() < MAX_FRAME_TIMES {
            let since_first = now.saturating_sub(self.timeline.first_frame_ns) / 1_000;
            self.timeline
                .done_us
                .push(u32::try_from(since_first).unwrap_or(u32::MAX));
        }
        self.windows.frame_done(now);
        if let Some(began) = self.frame_cpu_start.take() {
            let work = thread_cpu_time().saturating_sub(began);
            self.work_ns.push(work.as_nanos() as u64);
        }
        self.frames += 1;
    }

    /// The results at the end of the run.
    pub fn report(mut self) -> RtReport {
        let (totals, missed_by_window) = self.windows.clone().finish_by_window(monotonic_ns());
        let (counter_file, counter_error) = match self.counter {
            Ok(path) => (Some(path.display().to_string()), None),
            Err(err) => (None, Some(err)),
        };
        RtReport {
            period_ns: self.mode.period_ns,
            frames_per_window: self.mode.frames,
            work_ns: self.mode.work_ns,
            window_ns: self.mode.window_ns,
            frames: self.frames,
            windows: totals.windows,
            frames_in_windows: totals.frames,
            missed_frames: totals.missed_frames,
            missed_windows: totals.missed_windows,
            missed_by_window,
            miss_rate: totals.miss_rate(self.mode.frames),
            frame_work_us: Percentiles::of_ns(&mut self.work_ns),
            counter_file,
            counter_error,
            counter_frames: cosched_rt::frames(),
            timeline: self.timeline,
        }
    }
}
