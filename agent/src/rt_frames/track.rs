//! From successive readings of one process's counter to frames done (pure).

use super::FrameReading;

/// What a reading adds to what was known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The first reading: a baseline, `frames` reported before it.
    First { frames: u64 },
    /// Frames reported since the previous reading; the process's CPU time
    /// between the two readings' CPU samples (when both have one; a sample
    /// is taken at a frame, not at the reading), and per frame between
    /// those samples (when frames were reported between them).
    /// Increments, as `cosched_policy::classes::frames::ProcessFrames::credit`
    /// takes them.
    Advanced {
        new_frames: u64,
        new_cpu_ns: Option<u64>,
        work_per_frame_ns: Option<u64>,
    },
    /// Another counter than before (a new file or incarnation: the process
    /// exec'd, or its pid was reused), or a count below the last one (its
    /// writer reset it): a new baseline of `frames`. Frames between the two
    /// counts are unknown, not negative.
    Restarted { frames: u64 },
}

/// The last reading of one process's counter.
#[derive(Clone, Debug, Default)]
pub struct FrameTracker {
    last: Option<FrameReading>,
}

impl FrameTracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn last(&self) -> Option<&FrameReading> {
        self.last.as_ref()
    }

    /// Takes the next reading.
    pub fn observe(&mut self, reading: FrameReading) -> Progress {
        let progress = match self.last {
            None => Progress::First {
                frames: reading.frames,
            },
            Some(last) if last.identity != reading.identity || reading.frames < last.frames => {
                Progress::Restarted {
                    frames: reading.frames,
                }
            }
            Some(last) => Progress::Advanced {
                new_frames: reading.frames - last.frames,
                new_cpu_ns: cpu_between(&last, &reading),
                work_per_frame_ns: work_per_frame(&last, &reading),
            },
        };
        self.last = Some(reading);
        progress
    }
}

/// Δcpu between two CPU samples of the same counter.
fn cpu_between(earlier: &FrameReading, later: &FrameReading) -> Option<u64> {
    later.cpu?.cpu_ns.checked_sub(earlier.cpu?.cpu_ns)
}

/// Δcpu / Δframes between two CPU samples of the same counter.
fn work_per_frame(earlier: &FrameReading, later: &FrameReading) -> Option<u64> {
    let (from, to) = (earlier.cpu?, later.cpu?);
    let frames = to.frames.checked_sub(from.frames).filter(|&n| n > 0)?;
    Some(cpu_between(earlier, later)? / frames)
}
