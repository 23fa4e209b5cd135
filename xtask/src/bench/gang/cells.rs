//! The bench's loop. First, with the coordinator idle (`fcfs`, which
//! enforces nothing): the dedicated baseline of every job type (alone,
//! plain Linux) and the local modes, whose jobs the bench launches through
//! the agents like `bench local`. Then, for each slice length (a coordinator
//! started afresh with it): every workload under every coordinator mode,
//! jobs submitted to the coordinator (restarted again whenever the next
//! mode needs the other `paired_schedule_ahead`). A cell is `reps` runs; its rows hold
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
    cluster::{Cluster, CoordinatorNode, CoordinatorOptions, coordinator},
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
        // The key the running coordinator was started with, and whether
        // that start worked.
        let mut ready: Option<(bool, anyhow::Result<()>)> = None;
        for &w in &plan.workloads {
            for &mode in &sliced {
                let ahead = mode.paired_schedule_ahead();
                if ready.as_ref().is_none_or(|(started, _)| *started != ahead) {
                    let started = fresh_coordinator(cluster, slice, ahead).with_context(|| {
                        format!("starting the coordinator with {slice} ms slices")
                    });
                    ready = Some((ahead, started));
                }
                let ready = &ready.as_ref().expect("set above").1;
                let coord = Coord {
                    cluster: &*cluster,
                    synth,
                };
                let cell = Cell::new(w, mode, Some(slice), plan);
                let policy = mode.coordinator_policy().unwrap_or(IDLE_COORDINATOR_POLICY);
                let agents = mode.agent_running_policy(&plan.best_local);
                let switched = match ready {
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

/// A coordinator with `slice_ms` slices and `paired_schedule_ahead` as
/// asked, idle (`fcfs`), every agent joined and back on plain Linux;
/// restarted unless it already runs that config.
fn fresh_coordinator(
    cluster: &mut Cluster,
    slice_ms: u64,
    paired_schedule_ahead: bool,
) -> anyhow::Result<()> {
    let current = cluster
        .coordinator
        .clone()
        .context("the bench cluster has no coordinator")?;
    if let Some(options) =
        restart_options(&current, current.alive(), slice_ms, paired_schedule_ahead)
    {
        say(
            "bench",
            format!(
                "restarting the coordinator with {slice_ms} ms slices{}",
                if paired_schedule_ahead {
                    ", paired_schedule_ahead"
                } else {
                    ""
                }
            ),
        );
        coordinator::restart(cluster, &options, COORDINATOR_TIMEOUT)?;
    } else {
        let coord = cluster.coordinator.as_ref().expect("checked above");
        coordinator::cli(coord, &["policy", "set", IDLE_COORDINATOR_POLICY])?;
    }
    policies::switch_all(cluster, BASELINE)
}

/// The options to restart `current` with for `slice_ms` slices and
/// `paired_schedule_ahead` (written only when true), if it does not run
/// that config (or is not running); `None`: keep it.
fn restart_options(
    current: &CoordinatorNode,
    running: bool,
    slice_ms: u64,
    paired_schedule_ahead: bool,
) -> Option<CoordinatorOptions> {
    let same =
        current.slice_ms == slice_ms && current.paired_schedule_ahead == paired_schedule_ahead;
    (!same || !running).then(|| CoordinatorOptions {
        policy: IDLE_COORDINATOR_POLICY.into(),
        slice_ms,
        stop_inactive: current.stop_inactive,
        bin_dir: None,
        classes: None,
        paired_schedule_ahead,
    })
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::cluster::coordinator::config_toml;

    /// The config the coordinator runs with during `mode` at 10 ms slices,
    /// starting from one with `from` (what `fresh_coordinator` writes).
    fn config_during(from: bool, mode: Mode) -> String {
        let mut cluster = Cluster::plan(2, &[0, 1], "local", 9464).unwrap();
        let start = CoordinatorOptions {
            policy: IDLE_COORDINATOR_POLICY.into(),
            slice_ms: 10,
            paired_schedule_ahead: from,
            ..CoordinatorOptions::default()
        };
        let current = CoordinatorNode::plan(&cluster, &start, Path::new("/r")).unwrap();
        cluster.coordinator = Some(current.clone());
        match restart_options(&current, true, 10, mode.paired_schedule_ahead()) {
            Some(options) => {
                let next = CoordinatorNode::plan(&cluster, &options, Path::new("/r")).unwrap();
                config_toml(&cluster, &next)
            }
            None => config_toml(&cluster, &current),
        }
    }

    #[test]
    fn only_paired_gang_ahead_runs_with_the_key_whatever_ran_before() {
        for from in [false, true] {
            let config = config_during(from, Mode::PairedGangAhead);
            let parsed: toml::Table = toml::from_str(&config).unwrap();
            assert_eq!(
                parsed
                    .get("paired_schedule_ahead")
                    .and_then(|v| v.as_bool()),
                Some(true),
                "from {from}:\n{config}"
            );
            for mode in [Mode::Gang, Mode::PairedGang, Mode::Fcs] {
                let config = config_during(from, mode);
                assert!(
                    !config.contains("paired_schedule_ahead"),
                    "{mode:?} from {from}:\n{config}"
                );
            }
        }
    }

    #[test]
    fn the_coordinator_is_kept_when_it_runs_the_config_and_restarted_otherwise() {
        let cluster = Cluster::plan(2, &[0, 1], "local", 9464).unwrap();
        let start = CoordinatorOptions {
            slice_ms: 10,
            ..CoordinatorOptions::default()
        };
        let current = CoordinatorNode::plan(&cluster, &start, Path::new("/r")).unwrap();
        assert!(restart_options(&current, true, 10, false).is_none());
        assert!(restart_options(&current, false, 10, false).is_some());
        assert_eq!(
            restart_options(&current, true, 50, false).map(|o| o.slice_ms),
            Some(50)
        );
        assert!(restart_options(&current, true, 10, true).is_some_and(|o| o.paired_schedule_ahead));
    }
}
