//! Slice-switch skew from the coordinator's Prometheus histogram
//! `cosched_slice_switch_skew_seconds` (per slice, the spread of the
//! instants the nodes switched at): scraped before and after a run, the
//! difference is the run's own histogram, whose percentiles are estimated
//! the way Prometheus' `histogram_quantile` does (linear within a bucket).
use std::net::SocketAddr;

use crate::bench::local::agent_cpu::scrape;

/// The coordinator's skew histogram.
pub const SKEW_METRIC: &str = "cosched_slice_switch_skew_seconds";

/// Cumulative buckets: (upper bound in seconds, samples at or below it),
/// ascending, the last one `+Inf`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
}

impl Histogram {
    /// The histogram `name` in Prometheus text; `None` without buckets.
    pub fn parse(text: &str, name: &str) -> Option<Self> {
        let prefix = format!("{name}_bucket{{");
        let mut buckets: Vec<(f64, f64)> = text
            .lines()
            .filter_map(|line| {
                let labels_and_value = line.strip_prefix(&prefix)?;
                let (labels, value) = labels_and_value.split_once('}')?;
                let le = labels
                    .split(',')
                    .find_map(|l| l.trim().strip_prefix("le="))?
                    .trim_matches('"');
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                let count = value.split_whitespace().next()?.parse().ok()?;
                Some((bound, count))
            })
            .collect();
        if buckets.is_empty() {
            return None;
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(Self { buckets })
    }

    /// Samples in the histogram.
    pub fn count(&self) -> f64 {
        self.buckets.last().map_or(0.0, |b| b.1)
    }

    /// What was added since `before` (a counter reset, i.e. fewer samples
    /// than before, gives the whole of `self`).
    pub fn since(&self, before: &Histogram) -> Histogram {
        if before.count() > self.count() {
            return self.clone();
        }
        let at = |bound: f64| {
            before
                .buckets
                .iter()
                .find(|b| b.0 == bound)
                .map_or(0.0, |b| b.1)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|&(bound, count)| (bound, (count - at(bound)).max(0.0)))
                .collect(),
        }
    }

    /// Adds `other`'s samples (same buckets; an empty side takes the other's).
    pub fn add(&mut self, other: &Histogram) {
        if self.buckets.is_empty() {
            self.buckets = other.buckets.clone();
            return;
        }
        for (bucket, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            debug_assert_eq!(bucket.0, theirs.0, "same bucket layout");
            bucket.1 += theirs.1;
        }
    }

    /// The q-quantile (0 < q < 1), interpolated linearly within its bucket
    /// (from 0 for the first); in the `+Inf` bucket, the largest finite
    /// bound. NaN without samples.
    pub fn quantile(&self, q: f64) -> f64 {
        let total = self.count();
        if total <= 0.0 || !(0.0..=1.0).contains(&q) {
            return f64::NAN;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(bound, count) in &self.buckets {
            if count >= rank {
                if bound.is_infinite() {
                    return lower.0;
                }
                let in_bucket = count - lower.1;
                if in_bucket <= 0.0 {
                    return bound;
                }
                return lower.0 + (bound - lower.0) * (rank - lower.1) / in_bucket;
            }
            lower = (bound, count);
        }
        lower.0
    }
}

/// The coordinator's skew histogram now; `None` when it cannot be read (the
/// run's skew is then unknown, not the run failed).
pub fn read(metrics: SocketAddr) -> Option<Histogram> {
    scrape(metrics)
        .ok()
        .and_then(|text| Histogram::parse(&text, SKEW_METRIC))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE cosched_slice_switch_skew_seconds histogram\n\
        cosched_slice_switch_skew_seconds_bucket{le=\"0.000001\"} 10\n\
        cosched_slice_switch_skew_seconds_bucket{le=\"0.000002\"} 50\n\
        cosched_slice_switch_skew_seconds_bucket{le=\"0.000004\"} 90\n\
        cosched_slice_switch_skew_seconds_bucket{le=\"0.001024\"} 99\n\
        cosched_slice_switch_skew_seconds_bucket{le=\"+Inf\"} 100\n\
        cosched_slice_switch_skew_seconds_sum 0.01\n\
        cosched_slice_switch_skew_seconds_count 100\n\
        cosched_slice_switch_lateness_seconds_bucket{le=\"+Inf\"} 7\n";

    fn parsed() -> Histogram {
        Histogram::parse(TEXT, SKEW_METRIC).unwrap()
    }

    #[test]
    fn parses_only_the_named_histogram() {
        let h = parsed();
        assert_eq!(h.buckets.len(), 5);
        assert_eq!(h.buckets[0], (1e-6, 10.0));
        assert_eq!(h.buckets[4], (f64::INFINITY, 100.0));
        assert_eq!(h.count(), 100.0);
        assert!(Histogram::parse("x 1\n", SKEW_METRIC).is_none());
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket() {
        let h = parsed();
        // 50th sample is the top of the 2 µs bucket.
        assert!((h.quantile(0.5) - 2e-6).abs() < 1e-12);
        // 30th: halfway through the 1-2 µs bucket (samples 11..50).
        assert!((h.quantile(0.3) - 1.5e-6).abs() < 1e-12);
        // 5th: half of the first bucket, from 0.
        assert!((h.quantile(0.05) - 0.5e-6).abs() < 1e-12);
        // 99th: the top of the 1.024 ms bucket.
        assert!((h.quantile(0.99) - 0.001024).abs() < 1e-12);
        // Beyond the last finite bound: that bound.
        assert_eq!(h.quantile(1.0), 0.001024);
        assert!(Histogram::default().quantile(0.99).is_nan());
    }

    #[test]
    fn a_run_is_the_difference_and_runs_add_up() {
        let before = Histogram {
            buckets: vec![(1e-6, 5.0), (2e-6, 5.0), (f64::INFINITY, 6.0)],
        };
        let after = Histogram {
            buckets: vec![(1e-6, 5.0), (2e-6, 25.0), (f64::INFINITY, 26.0)],
        };
        let run = after.since(&before);
        assert_eq!(
            run.buckets,
            [(1e-6, 0.0), (2e-6, 20.0), (f64::INFINITY, 20.0)]
        );
        // All 20 samples lie in (1 µs, 2 µs]: the median is halfway.
        assert!((run.quantile(0.5) - 1.5e-6).abs() < 1e-12);
        let mut total = Histogram::default();
        total.add(&run);
        total.add(&run);
        assert_eq!(total.count(), 40.0);
        // A restarted coordinator (fewer samples than before) counts whole.
        assert_eq!(before.since(&after), before);
    }
}
