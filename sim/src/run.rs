//! One simulation: build the cluster, run the executive to the last job's
//! end, compute dedicated times and the report.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::SimConfig;
use crate::dedicated::{dedicated_config, dedicated_ns};
use crate::executive::{Calendar, Executive, Ns};
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

/// A job's progress over a fixed window (how `bench local` and `bench gang`
/// measure: every job runs the whole window, slowdown = dedicated rate ÷
/// shared rate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobProgress {
    pub id: u64,
    pub kind: String,
    /// Iterations per second, averaged over the job's tasks.
    pub iterations_per_s: f64,
    /// The same, the job alone on the cluster.
    pub dedicated_iterations_per_s: f64,
    pub slowdown: f64,
    /// Boosts the agents applied per second, and level changes of any
    /// kind (the benches' `boosts` and `actions`), summed over its tasks.
    pub boosts_per_s: f64,
    pub actions_per_s: f64,
    /// Share of the window its tasks spent spinning on a CPU (averaged
    /// over its tasks: the benches' `spin_fraction`), and switches onto a
    /// CPU per second summed over its tasks (`context_switches` ÷ window).
    #[serde(default)]
    pub spin_fraction: f64,
    #[serde(default)]
    pub switches_in_per_s: f64,
}

/// Runs `jobs` together for `window` of simulated time and each alone for
/// the same window, and reports every job's iteration rates.
pub fn progress_over(
    config: &SimConfig,
    jobs: &[JobSpec],
    window: Ns,
) -> Result<Vec<JobProgress>, SetupError> {
    let shared = rates(config, jobs.to_vec(), window)?;
    let mut out = Vec::with_capacity(jobs.len());
    for (spec, shared) in jobs.iter().zip(shared) {
        let alone = JobSpec {
            arrival: 0,
            ..spec.clone()
        };
        let dedicated = rates(
            &dedicated_config(spec, &config.cluster),
            vec![alone],
            window,
        )?[0]
            .iterations_per_s;
        out.push(JobProgress {
            id: spec.id,
            kind: spec.kind.clone(),
            iterations_per_s: shared.iterations_per_s,
            dedicated_iterations_per_s: dedicated,
            slowdown: if shared.iterations_per_s > 0.0 {
                dedicated / shared.iterations_per_s
            } else {
                f64::INFINITY
            },
            boosts_per_s: shared.boosts_per_s,
            actions_per_s: shared.actions_per_s,
            spin_fraction: shared.spin_fraction,
            switches_in_per_s: shared.switches_in_per_s,
        });
    }
    Ok(out)
}

/// What [`rates`] measures of one job.
#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    iterations_per_s: f64,
    boosts_per_s: f64,
    actions_per_s: f64,
    spin_fraction: f64,
    switches_in_per_s: f64,
}

/// Iterations, boosts, actions, spin and switches of each job over
/// `[arrival, window)`.
fn rates(config: &SimConfig, jobs: Vec<JobSpec>, window: Ns) -> Result<Vec<Rates>, SetupError> {
    let mut calendar = Calendar::default();
    let model = Cluster::new(config.clone(), jobs, &mut calendar)?;
    let mut ex = Executive::from_parts(model, calendar);
    ex.run_while(|model, _| model.now() < window && !model.all_done());
    let m = &ex.model;
    Ok(m.jobs
        .iter()
        .map(|run| {
            let Some(start) = run.start else {
                return Rates::default();
            };
            let span = window.min(run.end.unwrap_or(window)).saturating_sub(start);
            if run.tasks.is_empty() || span == 0 {
                return Rates::default();
            }
            let per_s = |n: u64| n as f64 / (span as f64 / 1e9);
            let tasks = run.tasks.iter().map(|&t| &m.tasks[t as usize]);
            let done: u64 = tasks.clone().map(|t| u64::from(t.iteration)).sum();
            let n = run.tasks.len() as f64;
            let spin: u64 = tasks.clone().map(|t| t.used.spin_ns).sum();
            Rates {
                iterations_per_s: per_s(done) / n,
                boosts_per_s: per_s(tasks.clone().map(|t| t.boosts).sum()),
                actions_per_s: per_s(tasks.clone().map(|t| t.actions).sum()),
                spin_fraction: spin as f64 / span as f64 / n,
                switches_in_per_s: per_s(tasks.map(|t| t.stats.switches_in).sum()),
            }
        })
        .collect())
}
