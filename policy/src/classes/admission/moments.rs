//! The mean and standard deviation of a process's per-frame work, and the
//! normal quantile that turns a target overload probability into a margin
//! (for [`super::probabilistic`]).

use serde::{Deserialize, Serialize};

/// Mean and standard deviation of a process's recent per-frame CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkMoments {
    /// How many frames they are over.
    pub frames: u64,
    pub mean_ns: u64,
    /// Population standard deviation, ns.
    pub sd_ns: u64,
}

impl WorkMoments {
    /// The moments of `samples` (each one frame's work, ns), counted as
    /// `frames` frames; `None` when there is no sample.
    pub fn of(samples: impl IntoIterator<Item = u64>, frames: u64) -> Option<Self> {
        let (mut n, mut sum, mut sum_sq) = (0u64, 0f64, 0f64);
        for sample in samples {
            let x = sample as f64;
            n += 1;
            sum += x;
            sum_sq += x * x;
        }
        if n == 0 {
            return None;
        }
        let mean = sum / n as f64;
        // Clamped: rounding can make E[x²] − mean² slightly negative.
        let variance = (sum_sq / n as f64 - mean * mean).max(0.0);
        Some(Self {
            frames,
            mean_ns: mean.round() as u64,
            sd_ns: variance.sqrt().round() as u64,
        })
    }
}

/// z such that a standard normal exceeds it with probability `p_ppm`
/// (parts per million, clamped to [1, 500 000]): 10 000 (1 %) → 2.326,
/// 1 000 → 3.090, 500 000 → 0. Acklam's rational approximation of the
/// inverse normal distribution (relative error below 1.2e-9), so it needs
/// no table and no library.
pub fn upper_normal_quantile(p_ppm: u32) -> f64 {
    let p = f64::from(p_ppm.clamp(1, 500_000)) / 1e6;
    // The lower-tail quantile of p, negated: P(Z > z) = p.
    -lower_normal_quantile(p)
}

fn lower_normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.024_25;
    if p < LOW {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else {
        // Here p ≤ 0.5: the central region.
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantiles_of_the_usual_targets_match_the_normal_table() {
        for (p_ppm, z) in [
            (10_000, 2.326_348),
            (1_000, 3.090_232),
            (50_000, 1.644_854),
            (158_655, 1.0),
            (500_000, 0.0),
        ] {
            let got = upper_normal_quantile(p_ppm);
            assert!((got - z).abs() < 1e-4, "{p_ppm}: {got} vs {z}");
        }
        // Out of range: clamped, never NaN or negative.
        assert_eq!(upper_normal_quantile(900_000), 0.0);
        assert!(upper_normal_quantile(0) > 4.7);
    }

    #[test]
    fn moments_of_frames_are_their_mean_and_population_deviation() {
        assert_eq!(
            WorkMoments::of([2, 4, 4, 4, 5, 5, 7, 9], 8),
            Some(WorkMoments {
                frames: 8,
                mean_ns: 5,
                sd_ns: 2
            })
        );
        let same = WorkMoments::of([1_500_000; 100], 100).unwrap();
        assert_eq!((same.mean_ns, same.sd_ns), (1_500_000, 0));
        assert_eq!(WorkMoments::of([], 0), None);
    }
}
