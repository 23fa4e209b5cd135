//! What a real-time job declares: its period, frames and work per frame.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The real-time parameters of one RT job, the same for each of its
/// processes (the paper's d, b and τ).
///
/// A process meets its deadlines when it completes `frames` frames in every
/// window of `frames · period_ns` (Γ = b·d, the slack a pipeline with `b`
/// buffers tolerates); each frame needs `work_ns` of CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtSpec {
    /// d: one frame is due every `period_ns`.
    pub period_ns: u64,
    /// b: frames per window (the pipeline's buffers).
    pub frames: u32,
    /// τ: CPU time one frame needs, per process.
    pub work_ns: u64,
}

/// Why an [`RtSpec`] cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RtSpecError {
    #[error("the period must be positive")]
    ZeroPeriod,
    #[error("frames must be at least 1")]
    ZeroFrames,
    #[error("the work per frame must be positive")]
    ZeroWork,
    #[error(
        "work per frame ({work_ns} ns) exceeds the period ({period_ns} ns): no CPU can meet it"
    )]
    WorkExceedsPeriod { work_ns: u64, period_ns: u64 },
    #[error("frames × period overflows 64-bit nanoseconds")]
    WindowOverflow,
}

impl RtSpec {
    /// A spec, checked.
    pub fn new(period_ns: u64, frames: u32, work_ns: u64) -> Result<Self, RtSpecError> {
        let spec = Self {
            period_ns,
            frames,
            work_ns,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Refuses what no schedule can meet or what would make the arithmetic
    /// meaningless, so bad input is named at submission, not as misses later.
    pub fn validate(&self) -> Result<(), RtSpecError> {
        if self.period_ns == 0 {
            return Err(RtSpecError::ZeroPeriod);
        }
        if self.frames == 0 {
            return Err(RtSpecError::ZeroFrames);
        }
        if self.work_ns == 0 {
            return Err(RtSpecError::ZeroWork);
        }
        if self.work_ns > self.period_ns {
            return Err(RtSpecError::WorkExceedsPeriod {
                work_ns: self.work_ns,
                period_ns: self.period_ns,
            });
        }
        self.period_ns
            .checked_mul(u64::from(self.frames))
            .ok_or(RtSpecError::WindowOverflow)?;
        Ok(())
    }

    /// Γ = b·d: the window in which `frames` frames are due. Saturates (a
    /// validated spec never does).
    pub fn window_ns(&self) -> u64 {
        self.period_ns.saturating_mul(u64::from(self.frames))
    }

    /// CPU time one process needs per window: b·τ.
    pub fn work_per_window_ns(&self) -> u64 {
        self.work_ns.saturating_mul(u64::from(self.frames))
    }

    /// τ/d: the share of one CPU a process of this job needs, in parts per
    /// million (integer, so admission sums are exact and order-independent).
    pub fn utilization_ppm(&self) -> u64 {
        if self.period_ns == 0 {
            return u64::MAX;
        }
        ((u128::from(self.work_ns) * 1_000_000).div_ceil(u128::from(self.period_ns))) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_that_fits_its_period_is_accepted_and_its_window_is_frames_times_period() {
        let spec = RtSpec::new(10_000_000, 4, 2_000_000).unwrap();
        assert_eq!(spec.window_ns(), 40_000_000);
        assert_eq!(spec.work_per_window_ns(), 8_000_000);
        assert_eq!(spec.utilization_ppm(), 200_000);
    }

    #[test]
    fn work_equal_to_the_period_is_the_limit_and_one_more_nanosecond_is_refused() {
        assert!(RtSpec::new(1_000, 1, 1_000).is_ok());
        assert_eq!(
            RtSpec::new(1_000, 1, 1_001),
            Err(RtSpecError::WorkExceedsPeriod {
                work_ns: 1_001,
                period_ns: 1_000
            })
        );
    }

    #[test]
    fn zero_period_frames_or_work_are_each_named() {
        assert_eq!(RtSpec::new(0, 1, 1), Err(RtSpecError::ZeroPeriod));
        assert_eq!(RtSpec::new(1, 0, 1), Err(RtSpecError::ZeroFrames));
        assert_eq!(RtSpec::new(1, 1, 0), Err(RtSpecError::ZeroWork));
    }

    #[test]
    fn a_window_past_u64_nanoseconds_is_refused() {
        assert_eq!(
            RtSpec::new(u64::MAX / 2, 3, 1),
            Err(RtSpecError::WindowOverflow)
        );
    }

    #[test]
    fn utilization_rounds_up_so_admission_never_undercounts() {
        let spec = RtSpec::new(3, 1, 1).unwrap();
        assert_eq!(spec.utilization_ppm(), 333_334);
    }
}
