//! One simulation: build the cluster, run the executive to the last job's
//! end, compute dedicated times and the report.

use std::time::Instant;

use crate::config::SimConfig;
use crate::dedicated::dedicated_ns;
use crate::executive::{Calendar, Executive};
use crate::metrics::{Performance, Report, peak_rss_kib, report};
use crate::model::{Cluster, SetupError};
use crate::progress::Progress;
use crate::workload::JobSpec;

/// How to run (not what is simulated).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub label: String,
    /// Show a progress line on stderr.
    pub progress: bool,
    /// Keep every job's record in the report.
    pub job_records: bool,
    /// Measure wall time, events/s and peak memory (makes the report
    /// non-deterministic).
    pub performance: bool,
}

/// Simulates `jobs` on the configured cluster.
pub fn simulate(
    config: &SimConfig,
    jobs: Vec<JobSpec>,
    options: &RunOptions,
) -> Result<Report, SetupError> {
    let started = Instant::now();
    let dedicated = dedicated_times(&jobs, config)?;
    let mut calendar = Calendar::default();
    let model = Cluster::new(config.clone(), jobs, &mut calendar)?;
    let mut ex = Executive::from_parts(model, calendar);
    let mut progress = Progress::new(options.progress);
    let mut steps = 0u64;
    ex.run_while(|model, stats| {
        steps += 1;
        if steps.is_multiple_of(4096) {
            progress.update(
                model.now(),
                model.jobs_done,
                model.jobs.len(),
                stats.bound_events + stats.conditional_fired,
            );
        }
        !model.all_done()
    });
    progress.finish();
    let end = ex.calendar.now();
    let mut report = report(&options.label, &ex.model, &ex.stats, &dedicated, end);
    if options.performance {
        let wall = started.elapsed().as_secs_f64();
        let events = ex.stats.bound_events + ex.stats.conditional_fired;
        report.performance = Some(Performance {
            wall_s: wall,
            events_per_s: events as f64 / wall.max(1e-9),
            peak_rss_kib: peak_rss_kib(),
        });
    }
    if !options.job_records {
        report.job_records.clear();
    }
    Ok(report)
}

/// Every job's dedicated time, on all the machine's CPUs (each job alone is
/// its own simulation, so the result does not depend on the split).
fn dedicated_times(jobs: &[JobSpec], config: &SimConfig) -> Result<Vec<u64>, SetupError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = jobs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|spec| dedicated_ns(spec, &config.cluster))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        let mut all = Vec::with_capacity(jobs.len());
        for handle in handles {
            all.extend(handle.join().expect("a dedicated run panicked")?);
        }
        Ok(all)
    })
}
