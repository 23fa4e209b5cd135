//! The bench's loop. First, with the coordinator idle (`fcfs`, which
//! enforces nothing): the dedicated baseline of every job type (alone,
//! plain Linux) and the local modes, whose jobs the bench launches through
//! the agents like `bench local`. Then, for each slice length (a coordinator
//! started afresh with it): every workload under every coordinator mode,
//! jobs submitted to the coordinator. A cell is `reps` runs; its rows hold
//! medians. A failing cell becomes error rows and the loop goes on; Ctrl-C
//! stops it between runs.
use anyhow::{Context as _, anyhow};

use super::{
    coord_run::Coord,
    modes::{IDLE_COORDINATOR_POLICY, Mode},
    rows::{GangRow, with_total_progress},
    skew::Histogram,
    workloads::GangWorkload,
};
use crate::{
    bench::{
        jobs::JobOutcome,
        local::{
            interrupt::interrupted,
            matrix::{Baselines, dedicated_of, ensure_baseline},
            metrics::{RunMetrics, median_finite},
            policies::{self, BASELINE},
            rows::{Row, RowKey, one_line},
            runner::{Allocator, run_once},
            workloads::JobSlot,
        },
        outside_load::{Retry, undisturbed},
    },
    cluster::{Cluster, CoordinatorOptions, coordinator},
    progress::say,
};

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    pub workloads: Vec<GangWorkload>,
    pub modes: Vec<Mode>,
    pub slices: Vec<u64>,
    pub reps: usize,
    pub duration_s: f64,
    /// The best local policy (`Mode::BestLocal`).
    pub best_local: String,
    /// Timelines of the runs (None: none recorded).
    pub timeline: Option<super::timeline::Capture>,
}

/// The rows, the skew of every slice of every coordinator run, and whether
/// Ctrl-C cut the bench short.
#[derive(Debug, Default)]
pub struct Measured {
    pub rows: Vec<GangRow>,
    pub skew: Histogram,
    pub interrupted: bool,
}

/// One repetition of a cell, however its jobs were run.
struct Rep {
    jobs: Vec<JobOutcome>,
    agent_cpu_percent: f64,
    skew: Option<Histogram>,
    outside_cpu_percent: f64,
}

/// How long a coordinator may take to start and be joined by the agents.
const COORDINATOR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs everything in `plan`; never fails as a whole (failures are rows).
pub fn run(cluster: &mut Cluster, synth: &str, plan: &Plan) -> Measured {
    let mut m = Measured::default();
    let mut ids = Allocator::default();
    let mut baselines = Baselines::new();
    for w in &plan.workloads {
        for slot in w.slots() {
            if interrupted() {
                m.interrupted = true;
                return m;
            }
            ensure_baseline(
                &mut baselines,
                cluster,
                synth,
                slot.kind,
                plan.reps,
                plan.duration_s,
                &mut ids,
            );
        }
    }
    let local_modes: Vec<Mode> = plan.modes.iter().copied().filter(|m| !m.sliced()).collect();
    for &w in &plan.workloads {
        for &mode in &local_modes {
            let cell = Cell::new(w, mode, None, plan);
            let policy = mode.agent_config_policy(&plan.best_local);
            let rows = match policies::switch_all(cluster, policy) {
                Ok(()) => cell.run(plan, &baselines, &mut m, |slots| {
                    let r = super::timeline::during(
                        cluster,
                        plan.timeline.as_ref(),
                        &cell.label,
                        &cell.title(),
                        || run_once(cluster, synth, slots, plan.duration_s, &mut ids),
                    )?;
                    Ok(Rep {
                        jobs: r.jobs,
                        agent_cpu_percent: r.agent_cpu_percent,
                        skew: None,
                        outside_cpu_percent: r.outside_cpu_percent,
                    })
                }),
                Err(e) => cell.error_rows(&e, 0),
            };
            m.rows.extend(rows);
            if m.interrupted {
                return m;
            }
        }
    }
    let sliced: Vec<Mode> = plan.modes.iter().copied().filter(|m| m.sliced()).collect();
    if sliced.is_empty() {
        return m;
    }
    for &slice in &plan.slices {
        if interrupted() {
            m.interrupted = true;
            return m;
        }
        let ready = fresh_coordinator(cluster, slice)
            .with_context(|| format!("starting the coordinator with {slice} ms slices"));
        let coord = Coord {
            cluster: &*cluster,
            synth,
        };
        for &w in &plan.workloads {
            for &mode in &sliced {
                let cell = Cell::new(w, mode, Some(slice), plan);
                let policy = mode.coordinator_policy().unwrap_or(IDLE_COORDINATOR_POLICY);
                let agents = mode.agent_running_policy(&plan.best_local);
                let switched = match &ready {
                    Ok(()) => coord.admin().set_policy(policy, agents),
                    Err(e) => Err(anyhow!("{e:#}")),
                };
                let rows = match switched {
                    Ok(()) => cell.run(plan, &baselines, &mut m, |slots| {
                        let r = super::timeline::during(
                            cluster,
                            plan.timeline.as_ref(),
                            &format!("{} {slice}ms", cell.label),
                            &cell.title(),
                            || coord.run_once(slots, plan.duration_s),
                        )?;
                        if r.latest_start_ms > 50.0 {
                            say(
                                "bench",
                                format!(
                                    "note: a job began measuring {:.0} ms after the common start",
                                    r.latest_start_ms
                                ),
                            );
                        }
                        Ok(Rep {
                            jobs: r.jobs,
                            agent_cpu_percent: r.agent_cpu_percent,
                            skew: r.skew,
                            outside_cpu_percent: r.outside_cpu_percent,
                        })
                    }),
                    Err(e) => cell.error_rows(&e, 0),
                };
                m.rows.extend(rows);
                if m.interrupted {
                    return m;
                }
            }
        }
    }
    m
}

/// A coordinator with `slice_ms` slices, idle (`fcfs`), every agent joined
/// and back on plain Linux; restarted unless it already runs that slice.
fn fresh_coordinator(cluster: &mut Cluster, slice_ms: u64) -> anyhow::Result<()> {
    let current = cluster
        .coordinator
        .clone()
        .context("the bench cluster has no coordinator")?;
    if current.slice_ms != slice_ms || !current.alive() {
        say(
            "bench",
            format!("restarting the coordinator with {slice_ms} ms slices"),
        );
        let options = CoordinatorOptions {
            policy: IDLE_COORDINATOR_POLICY.into(),
            slice_ms,
            stop_inactive: current.stop_inactive,
            bin_dir: None,
            classes: None,
        };
        coordinator::restart(cluster, &options, COORDINATOR_TIMEOUT)?;
    } else {
        let coord = cluster.coordinator.as_ref().expect("checked above");
        coordinator::cli(coord, &["policy", "set", IDLE_COORDINATOR_POLICY])?;
    }
    policies::switch_all(cluster, BASELINE)
}

/// One (workload, mode, slice).
struct Cell {
    workload: GangWorkload,
    label: String,
    slice_ms: Option<u64>,
    slots: Vec<JobSlot>,
}

impl Cell {
    fn new(workload: GangWorkload, mode: Mode, slice_ms: Option<u64>, plan: &Plan) -> Self {
        Self {
            workload,
            label: mode.label(&plan.best_local),
            slice_ms,
            slots: workload.slots(),
        }
    }

    fn name(&self) -> String {
        match self.slice_ms {
            Some(ms) => format!("{} {} {ms} ms", self.workload.as_str(), self.label),
            None => format!("{} {}", self.workload.as_str(), self.label),
        }
    }

    /// The title of the cell's timeline.
    fn title(&self) -> String {
        let jobs: Vec<&str> = self.slots.iter().map(|s| s.label.as_str()).collect();
        format!("{} under {}", jobs.join(" and "), self.name())
    }

    fn row(&self, row: Row) -> GangRow {
        GangRow {
            row,
            slice_ms: self.slice_ms,
            switch_skew_p99_us: f64::NAN,
            switch_skew_samples: f64::NAN,
            total_progress_per_s: f64::NAN,
            outside_cpu_percent: f64::NAN,
        }
    }

    fn key(&self, slot: &JobSlot) -> RowKey {
        RowKey {
            workload: self.workload.as_str().into(),
            policy: self.label.clone(),
            mpl: self.workload.mpl(),
            job: slot.label.clone(),
        }
    }

    fn error_rows(&self, e: &anyhow::Error, reps: usize) -> Vec<GangRow> {
        say(
            "bench",
            format!("{}: error: {}", self.name(), one_line(&format!("{e:#}"))),
        );
        self.slots
            .iter()
            .map(|s| self.row(Row::error(self.key(s), e, reps)))
            .collect()
    }

    /// `reps` runs of the cell's jobs by `run_jobs` (a run disturbed by
    /// outside load is repeated), as rows; the skew of its slices is added
    /// to `m.skew`.
    fn run(
        &self,
        plan: &Plan,
        baselines: &Baselines,
        m: &mut Measured,
        mut run_jobs: impl FnMut(&[JobSlot]) -> anyhow::Result<Rep>,
    ) -> Vec<GangRow> {
        let dedicated = match dedicated_of(baselines, &self.slots) {
            Ok(d) => d,
            Err(e) => return self.error_rows(&e, 0),
        };
        let mut runs: Vec<Vec<RunMetrics>> = vec![Vec::new(); self.slots.len()];
        let mut skew = Histogram::default();
        let mut outside = Vec::new();
        for rep in 1..=plan.reps {
            if interrupted() {
                m.interrupted = true;
                return self.error_rows(&anyhow!("interrupted"), rep - 1);
            }
            let what = format!("{} rep {rep}/{}", self.name(), plan.reps);
            say("bench", &what);
            let run = undisturbed(
                Retry::DEFAULT,
                &what,
                || run_jobs(&self.slots),
                |r| r.outside_cpu_percent,
            );
            match run {
                Ok(r) => {
                    outside.push(r.outside_cpu_percent);
                    for (per_job, job) in runs.iter_mut().zip(&r.jobs) {
                        per_job.push(RunMetrics::of(job, r.agent_cpu_percent));
                    }
                    if let Some(s) = &r.skew {
                        skew.add(s);
                    }
                }
                Err(e) => return self.error_rows(&e.context(what), rep - 1),
            }
        }
        m.skew.add(&skew);
        let rows = self
            .slots
            .iter()
            .zip(&runs)
            .zip(&dedicated)
            .map(|((slot, per_job), d)| {
                let mut row = self.row(Row::ok(self.key(slot), per_job, d));
                if self.slice_ms.is_some() {
                    row.switch_skew_p99_us = skew.quantile(0.99) * 1e6;
                    row.switch_skew_samples = skew.count();
                }
                row.outside_cpu_percent = median_finite(outside.iter().copied());
                row
            })
            .collect();
        let rows = with_total_progress(rows);
        say("bench", self.describe(&rows));
        rows
    }

    /// A progress line: the cell's slowdowns and total progress.
    fn describe(&self, rows: &[GangRow]) -> String {
        let s: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {:.2}", r.row.job, r.row.slowdown))
            .collect();
        let total = rows.first().map_or(f64::NAN, |r| r.total_progress_per_s);
        let skew = rows.first().map_or(f64::NAN, |r| r.switch_skew_p99_us);
        format!(
            "{}: slowdown {}; total {total:.0} it/s; skew p99 {skew:.0} us",
            self.name(),
            s.join(", ")
        )
    }
}
