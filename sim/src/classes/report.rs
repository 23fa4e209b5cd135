//! What a class-level run reports: `bench rt`'s rows and the CPU split.

use serde::{Deserialize, Serialize};

/// One run's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    pub scheme: String,
    pub admission: String,
    pub arrival_rate_per_s: f64,
    pub rt_share: f64,
    pub be_jobs: u64,
    /// Mean of finish − arrival over the BE jobs, s.
    pub be_mean_response_s: f64,
    /// BE jobs finished per second of the BE jobs' span (first arrival to
    /// last finish).
    pub be_throughput_per_s: f64,
    pub rt_jobs: u64,
    pub rt_rejected: u64,
    /// Rejected ÷ submitted RT jobs.
    pub rt_rejection_ratio: f64,
    /// Frames due over the closed windows of admitted RT jobs.
    pub rt_frames_expected: u64,
    pub rt_frames_missed: u64,
    /// Missed ÷ expected.
    pub rt_miss_rate: f64,
    /// CPU time each class used, summed over nodes, and how much of it was
    /// lent (the other class's division).
    pub rt_cpu_ns: u64,
    pub be_cpu_ns: u64,
    pub rt_lent_ns: u64,
    pub be_lent_ns: u64,
    pub idle_ns: u64,
    /// Simulated time to the last job's end.
    pub makespan_s: f64,
}
