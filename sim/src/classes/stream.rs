//! A stream of BE and RT jobs from a seed (Poisson arrivals, a share of RT
//! jobs, sizes uniform up to `max_size`).

use cosched_policy::classes::RtSpec;
use serde::{Deserialize, Serialize};

use super::params::ClassSimParams;
use crate::rng::{Rng, unit_from_key};

/// What a job of the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClassJobKind {
    /// Each process computes `work_ns`; the job ends when all have.
    BestEffort { work_ns: u64 },
    /// Each process produces `spec.frames` frames of `spec.work_ns` per
    /// window for `windows` windows.
    RealTime { spec: RtSpec, windows: u64 },
}

/// One job of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassJob {
    pub id: u64,
    pub arrival_ns: u64,
    pub processes: usize,
    pub kind: ClassJobKind,
}

/// The stream `params` describe; the same seed gives the same jobs.
pub fn class_stream(params: &ClassSimParams) -> Vec<ClassJob> {
    let mut rng = Rng::new(params.seed);
    let mean_gap_ns = 1e9 / params.arrival_rate_per_s.max(1e-9);
    let max_size = params.max_size.clamp(1, params.nodes.max(1));
    let mut now = 0u64;
    (0..params.jobs as u64)
        .map(|id| {
            now += rng.exponential(mean_gap_ns).round() as u64;
            let processes = 1 + (rng.unit() * max_size as f64) as usize;
            let kind = if rng.unit() < params.rt_share {
                let max_ns = params.rt_work_max_ns.max(params.rt_work_min_ns);
                let work_ns = rng.uniform(params.rt_work_min_ns as f64, max_ns as f64) as u64;
                ClassJobKind::RealTime {
                    spec: RtSpec {
                        period_ns: params.rt_period_ns,
                        frames: params.rt_frames,
                        work_ns: work_ns.clamp(1, params.rt_period_ns),
                    },
                    windows: params.rt_windows,
                }
            } else {
                let work_ns = rng.exponential(params.be_work_mean_ns as f64).round() as u64;
                ClassJobKind::BestEffort {
                    work_ns: work_ns.max(1),
                }
            };
            ClassJob {
                id,
                arrival_ns: now,
                processes: processes.min(max_size),
                kind,
            }
        })
        .collect()
}

/// The CPU a process of RT job `id` really takes per frame: its declared
/// τ scaled by a share uniform in [`rt_use_min`, 1], fixed per job by the
/// seed and the id (so the stream itself does not change with it).
///
/// [`rt_use_min`]: ClassSimParams::rt_use_min
pub fn rt_used_ns(params: &ClassSimParams, id: u64, spec: &RtSpec) -> u64 {
    let low = params.rt_use_min.clamp(0.0, 1.0);
    if low >= 1.0 {
        return spec.work_ns;
    }
    let share = low + (1.0 - low) * unit_from_key(&[params.seed, id, 0x5254_5553]);
    ((spec.work_ns as f64 * share).round() as u64).clamp(1, spec.work_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rt_share_of_a_long_stream_is_the_requested_one() {
        let params = ClassSimParams {
            jobs: 4000,
            rt_share: 0.9,
            ..ClassSimParams::default()
        };
        let jobs = class_stream(&params);
        let rt = jobs
            .iter()
            .filter(|j| matches!(j.kind, ClassJobKind::RealTime { .. }))
            .count();
        let share = rt as f64 / jobs.len() as f64;
        assert!((share - 0.9).abs() < 0.02, "{share}");
        assert!(jobs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
        assert!(jobs.iter().all(|j| (1..=4).contains(&j.processes)));
    }
}
