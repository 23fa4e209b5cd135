//! `cargo xtask bench rt`: best-effort and real-time jobs together on the
//! one-machine cluster, after the BE/RT coscheduling paper's §5 (Figures 5
//! and 6), scaled down: Poisson arrivals of RT and BE jobs in proportions
//! 2:1, 9:1 and 1:9 at a few arrival rates, without admission control, and
//! for 9:1 with it (deterministic, and statistical where a rule exists);
//! columns 1GS, 2DCS-TDM, 2DCS-PS (the coordinator's policies with
//! classes), plain Linux with RT ranks at SCHED_FIFO, and plain Linux with
//! RT ranks at SCHED_DEADLINE. Every column replays the same arrival stream
//! (a fixed seed). Rows: BE mean response time and throughput, RT miss rate
//! (b − n)/b and rejection ratio; a table, JSON, an SVG laid out like the
//! paper's figures, and issue 13's targets. See docs/bench-rt.md.
//!
//! Modules: `stream` (the arrivals), `columns`, `cell` (one cell replayed
//! on the cluster), `deadline` (SCHED_DEADLINE), `rows` (numbers, table,
//! targets), `svg`.
pub mod cell;
pub mod columns;
pub mod deadline;
pub mod recording;
pub mod rows;
pub mod stream;
pub mod svg;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context as _, bail};
use serde::Serialize;

use self::{
    cell::{CellSpec, Runner, Workload},
    columns::{Admission, Column},
    rows::{Key, RtRow, Target},
    stream::Mix,
};
use super::{
    common::{BenchBinaries, with_own_cluster},
    coordinator::{CoordAdmin, IDLE_COORDINATOR_POLICY},
    local::{interrupt::interrupted, policies},
    outside_load::{Retry, undisturbed},
};
use crate::{
    cluster::{
        AgentCommand, Cluster, CoordinatorOptions, DEFAULT_METRICS_PORT, UpOptions,
        coordinator::{self, CLI_BINARY, COORDINATOR_BINARY},
    },
    progress::say,
    workspace::Workspace,
};

/// The fairness ratio x:y of every column (the paper's appendix: 2:1).
pub const RATIO: (u32, u32) = (2, 1);
/// The coordinator's slice: a 1GS row's time quantum Q.
pub const SLICE_MS: u64 = 10;
/// M of 1GS (the paper's appendix: 6).
pub const ONE_GS_ROWS: u32 = 6;
/// w of 1GS: the paper's 15 s for 3-minute RT jobs, scaled to ours.
pub const RT_MAX_WAIT_MS: u64 = 125;
/// Frames a measurement must cover before statistical admission uses it:
/// 1⅔ windows of the workload's b = 30.
pub const STATISTICAL_MIN_FRAMES: u64 = 50;
/// The default seed of the arrival stream.
pub const DEFAULT_SEED: u64 = 13;
const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(30);
const IDLE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Clone, Debug)]
pub struct RtOptions {
    /// Mixes measured without admission control (Fig. 5).
    pub mixes: Vec<Mix>,
    /// Mixes measured with admission control (Fig. 6: 9:1).
    pub admission_mixes: Vec<Mix>,
    /// Arrival rates, jobs per second (RT + BE).
    pub rates: Vec<f64>,
    pub columns: Vec<Column>,
    /// Admission settings; `none` runs `mixes`, the others
    /// `admission_mixes`.
    pub admissions: Vec<Admission>,
    /// Seconds of arrivals per cell.
    pub window_s: f64,
    pub seed: u64,
    /// Statistical admission's utilization bound, percent of the RT share
    /// (the coordinator's `statistical_bound_percent`; above 100 overbooks).
    pub statistical_bound_percent: u64,
    /// Record the agents' timelines of each coordinator cell here.
    pub timeline_dir: Option<PathBuf>,
    /// Keep every RT rank's frame times in the rows (else only those of
    /// jobs that missed).
    pub frame_times: bool,
    /// An earlier report whose rows this run's join (a sweep split over
    /// several invocations): see [`rows::merge`].
    pub merge: Option<PathBuf>,
    pub workload: Workload,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub build: bool,
    /// Run the cluster with exclusive cpusets (`cluster up
    /// --exclusive-cpusets`): each node's CPU a root domain of its own, so
    /// SCHED_DEADLINE is accepted for the pinned ranks (`2dcs-tdm-deadline`;
    /// the `deadline` column then runs partitioned EDF per node instead of
    /// global EDF over widened affinities).
    pub exclusive_cpusets: bool,
}

impl Default for RtOptions {
    fn default() -> Self {
        Self {
            mixes: Mix::DEFAULT.to_vec(),
            admission_mixes: vec![Mix { rt: 9, be: 1 }],
            rates: vec![1.0, 2.5, 4.0],
            columns: Column::ALL.to_vec(),
            admissions: vec![
                Admission::None,
                Admission::Deterministic,
                Admission::Statistical,
            ],
            window_s: 6.0,
            seed: DEFAULT_SEED,
            statistical_bound_percent: 100,
            timeline_dir: None,
            frame_times: false,
            merge: None,
            workload: Workload::DEFAULT,
            json: None,
            svg: None,
            build: true,
            exclusive_cpusets: false,
        }
    }
}

/// One cell of the plan.
#[derive(Clone, Copy, Debug)]
pub struct PlannedCell {
    pub key: Key,
}

impl RtOptions {
    /// Smoke run: the 2:1 mix at one rate, 3 s of arrivals, every column
    /// and admission setting.
    pub fn quick(self) -> Self {
        Self {
            mixes: vec![Mix { rt: 2, be: 1 }],
            admission_mixes: vec![Mix { rt: 2, be: 1 }],
            rates: vec![2.0],
            window_s: 3.0,
            ..self
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.rates.is_empty() || self.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
            bail!("--rates must be positive numbers of jobs per second");
        }
        if !(self.window_s.is_finite() && self.window_s > 0.0) {
            bail!("--window must be a positive number of seconds");
        }
        if self.columns.is_empty() || self.admissions.is_empty() {
            bail!("nothing to run: no columns or no admission settings");
        }
        if self.plan().is_empty() {
            bail!("nothing to run: no mix for the admission settings asked for");
        }
        Ok(())
    }

    /// Every cell, grouped by (column, admission) so each setting is
    /// configured once.
    pub fn plan(&self) -> Vec<PlannedCell> {
        let mut out = Vec::new();
        for &column in &self.columns {
            for &admission in &self.admissions {
                if !column.supports(admission) {
                    continue;
                }
                let mixes = if admission == Admission::None {
                    &self.mixes
                } else {
                    &self.admission_mixes
                };
                for &mix in mixes {
                    for &rate_per_s in &self.rates {
                        out.push(PlannedCell {
                            key: Key {
                                mix,
                                rate_per_s,
                                column,
                                admission,
                            },
                        });
                    }
                }
            }
        }
        out
    }

    /// Expected length of a quiet run: each cell its arrival window, its
    /// last jobs' run time and ~1.5 s of set-up and collection; each
    /// coordinator setting ~4 s of restart.
    pub fn estimate(&self) -> Duration {
        let plan = self.plan();
        let per_cell = self.window_s + self.workload.rt_duration_s + 2.0;
        let settings = plan
            .iter()
            .map(|c| (c.key.column, c.key.admission))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        Duration::from_secs_f64(plan.len() as f64 * per_cell + settings as f64 * 4.0)
    }
}

/// The `[classes]` table of the coordinator for `admission`, with
/// statistical admission's bound at `bound_percent`.
pub fn classes_table(admission: Admission, bound_percent: u64) -> String {
    format!(
        "ratio = \"{}:{}\"\nadmission = \"{}\"\none_gs_rows = {ONE_GS_ROWS}\nrt_max_wait_ms = {RT_MAX_WAIT_MS}\nstatistical_min_frames = {STATISTICAL_MIN_FRAMES}\nstatistical_bound_percent = {bound_percent}\n",
        RATIO.0,
        RATIO.1,
        admission.label()
    )
}

/// What the bench measured.
#[derive(Debug, Serialize)]
pub struct RtReport {
    pub seed: u64,
    pub window_s: f64,
    /// Statistical admission's bound, percent (see [`RtOptions`]).
    pub statistical_bound_percent: u64,
    pub ratio: String,
    pub workload: Workload,
    pub rows: Vec<RtRow>,
    pub targets: Vec<Target>,
    #[serde(skip)]
    pub interrupted: bool,
}

impl RtReport {
    pub fn failed_rows(&self) -> usize {
        self.rows.iter().filter(|r| !r.is_ok()).count()
    }
}

pub fn run(workspace: &Workspace, opts: &RtOptions) -> anyhow::Result<RtReport> {
    opts.validate()?;
    let bin = BenchBinaries::snapshot(
        workspace,
        opts.build,
        &[
            "cosched-synth",
            "cosched-agent",
            COORDINATOR_BINARY,
            CLI_BINARY,
        ],
    )?;
    let synth = bin.path("cosched-synth").display().to_string();
    let cli = bin.path(CLI_BINARY);
    if let Some(dir) = &opts.timeline_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let plan = opts.plan();
    say(
        "bench",
        format!(
            "rt: {} cells ({} columns; mixes {:?} without admission, {:?} with; rates {:?}/s; {} s of arrivals each, seed {}): about {:.0} min on a quiet machine",
            plan.len(),
            opts.columns.len(),
            opts.mixes.iter().map(|m| m.label()).collect::<Vec<_>>(),
            opts.admission_mixes
                .iter()
                .map(|m| m.label())
                .collect::<Vec<_>>(),
            opts.rates,
            opts.window_s,
            opts.seed,
            opts.estimate().as_secs_f64() / 60.0
        ),
    );
    let up = UpOptions {
        nodes: 2,
        policy: policies::BASELINE.into(),
        metrics_port: DEFAULT_METRICS_PORT,
        agent: Some(AgentCommand::Binary(bin.path("cosched-agent"))),
        rebuild: false,
        startup_timeout: Duration::from_secs(30),
        coordinator: Some(CoordinatorOptions {
            policy: IDLE_COORDINATOR_POLICY.into(),
            slice_ms: SLICE_MS,
            stop_inactive: true,
            bin_dir: Some(bin.dir().to_path_buf()),
            classes: Some(classes_table(
                Admission::None,
                opts.statistical_bound_percent,
            )),
            paired_schedule_ahead: false,
        }),
        exclusive_cpusets: opts.exclusive_cpusets,
        ..UpOptions::default()
    };
    let started = std::time::Instant::now();
    let (rows, interrupted) =
        with_own_cluster(workspace, &up, |c| measure(c, &synth, &cli, opts, &plan))??;
    say(
        "bench",
        format!(
            "measured in {:.1} min",
            started.elapsed().as_secs_f64() / 60.0
        ),
    );
    let rows = match &opts.merge {
        Some(path) => {
            let earlier = read_rows(path)?;
            say(
                "bench",
                format!(
                    "merging {} rows of {} with {} new",
                    earlier.len(),
                    path.display(),
                    rows.len()
                ),
            );
            rows::merge(earlier, rows)
        }
        None => rows,
    };
    let be_share = f64::from(RATIO.1) / f64::from(RATIO.0 + RATIO.1);
    let targets = rows::evaluate(&rows, be_share);
    print!("{}", rows::table(&rows));
    for t in &targets {
        println!("{}", t.line());
    }
    let report = RtReport {
        seed: opts.seed,
        window_s: opts.window_s,
        statistical_bound_percent: opts.statistical_bound_percent,
        ratio: format!("{}:{}", RATIO.0, RATIO.1),
        workload: opts.workload,
        rows,
        targets,
        interrupted,
    };
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        say("bench", format!("wrote {}", path.display()));
    }
    if let Some(path) = &opts.svg {
        std::fs::write(path, svg::chart(&report.rows))
            .with_context(|| format!("writing {}", path.display()))?;
        say("bench", format!("wrote {}", path.display()));
    }
    Ok(report)
}

/// Each agent's EDF mechanism in force and how many RT tasks the kernel
/// refused SCHED_DEADLINE to, from its metrics: `n0 deadline, 0 refused; …`.
fn edf_in_force(cluster: &Cluster) -> String {
    use crate::bench::local::agent_cpu::{metric_sum, scrape};
    cluster
        .nodes
        .iter()
        .map(|node| match scrape(node.metrics_addr) {
            Ok(text) => {
                let on = |m: &str| {
                    metric_sum(
                        &text,
                        &format!("cosched_rt_edf_mechanism{{mechanism=\"{m}\"}}"),
                    )
                    .unwrap_or(0.0)
                        > 0.0
                };
                let mechanism = match (on("deadline"), on("fifo")) {
                    (true, _) => "deadline",
                    (_, true) => "fifo",
                    _ => "?",
                };
                let refused =
                    metric_sum(&text, "cosched_rt_deadline_refused_total").unwrap_or(f64::NAN);
                format!("{} {mechanism}, {refused} refused", node.name)
            }
            Err(e) => format!("{} ?: {e:#}", node.name),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The rows of an earlier `bench rt --json` report.
pub fn read_rows(path: &std::path::Path) -> anyhow::Result<Vec<RtRow>> {
    #[derive(serde::Deserialize)]
    struct Rows {
        rows: Vec<RtRow>,
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let parsed: Rows =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(parsed.rows)
}

/// Puts the cluster under a (column, admission) setting: the agents' local
/// policy, and the coordinator restarted with its policy and `[classes]`
/// (idle in `fcfs` for the plain-Linux columns).
fn configure(
    cluster: &mut Cluster,
    column: Column,
    admission: Admission,
    bound_percent: u64,
) -> anyhow::Result<()> {
    let current = cluster
        .coordinator
        .clone()
        .context("the bench cluster has no coordinator")?;
    CoordAdmin::of(cluster).cancel_all(IDLE_TIMEOUT)?;
    policies::switch_all(cluster, column.agent_policy())?;
    let policy = column
        .coordinator_policy()
        .unwrap_or(IDLE_COORDINATOR_POLICY);
    let options = CoordinatorOptions {
        policy: policy.into(),
        slice_ms: SLICE_MS,
        stop_inactive: current.stop_inactive,
        bin_dir: None,
        classes: Some(classes_table(admission, bound_percent)),
        paired_schedule_ahead: false,
    };
    coordinator::restart(cluster, &options, COORDINATOR_TIMEOUT)
        .with_context(|| format!("restarting the coordinator under {policy}"))?;
    let admin = CoordAdmin::of(cluster);
    let status = admin.cli(&["status"])?;
    let now = status["status"]["status"]["policy"].as_str().unwrap_or("?");
    if now != policy {
        bail!("the coordinator runs {now}, not {policy}");
    }
    Ok(())
}

fn measure(
    cluster: &mut Cluster,
    synth: &str,
    cli: &std::path::Path,
    opts: &RtOptions,
    plan: &[PlannedCell],
) -> anyhow::Result<(Vec<RtRow>, bool)> {
    let mut rows = Vec::new();
    let mut configured: Option<(Column, Admission)> = None;
    let mut setting_error: Option<String> = None;
    let retry = Retry {
        attempts: 3,
        ..Retry::DEFAULT
    };
    for (i, cell) in plan.iter().enumerate() {
        if interrupted() {
            return Ok((rows, true));
        }
        let key = cell.key;
        let setting = (key.column, key.admission);
        if configured != Some(setting) {
            setting_error = configure(
                cluster,
                key.column,
                key.admission,
                opts.statistical_bound_percent,
            )
            .err()
            .map(|e| format!("{e:#}"));
            configured = Some(setting);
        }
        let what = format!(
            "[{}/{}] {} {} {} at {}/s",
            i + 1,
            plan.len(),
            key.column.label(),
            key.admission.label(),
            key.mix.label(),
            key.rate_per_s
        );
        if let Some(e) = &setting_error {
            rows.push(RtRow::error(key, &anyhow::anyhow!("{e}")));
            say("bench", format!("{what}: error: {e}"));
            continue;
        }
        let arrivals = stream::arrivals(
            opts.seed,
            key.mix,
            key.rate_per_s,
            opts.window_s,
            opts.workload.work(),
        );
        let spec = CellSpec {
            column: key.column,
            admission: key.admission,
            window_s: opts.window_s,
        };
        let mut runner = Runner::new(cluster, synth, opts.workload);
        let measured = undisturbed(
            retry,
            &what,
            || {
                let recording = match &opts.timeline_dir {
                    Some(dir) if key.column.coordinator_policy().is_some() => {
                        let name = recording::file_name(
                            key.column.label(),
                            key.admission.label(),
                            &key.mix.label(),
                            key.rate_per_s,
                        );
                        let seconds = opts.window_s + opts.workload.rt_duration_s + 3.0;
                        Some(recording::start(cluster, cli, &dir.join(name), seconds)?)
                    }
                    _ => None,
                };
                let r = runner.run(spec, &arrivals);
                if key.column.coordinator_policy().is_some() {
                    CoordAdmin::of(cluster).wait_idle(IDLE_TIMEOUT)?;
                }
                if let Some(recording) = recording {
                    match recording.finish() {
                        Ok(path) => say("bench", format!("timeline: {}", path.display())),
                        Err(e) => say("bench", format!("timeline: {e:#}")),
                    }
                }
                r
            },
            |r| r.outside_cpu_percent,
        );
        let mut row = match measured {
            Ok(run) => RtRow::of(key, &run, cluster.nodes.len(), opts.window_s),
            Err(e) => RtRow::error(key, &e),
        };
        if !opts.frame_times {
            row.keep_frame_times_of_missing_jobs_only();
        }
        if matches!(key.column, Column::Tdm | Column::TdmDeadline | Column::Ps) {
            row.edf = Some(edf_in_force(cluster));
        }
        say(
            "bench",
            format!(
                "{what}: {}",
                rows::table(std::slice::from_ref(&row))
                    .lines()
                    .nth(1)
                    .unwrap_or("")
            ),
        );
        rows.push(row);
    }
    Ok((rows, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sweep_is_the_papers_figures_and_fits_in_15_minutes() {
        let d = RtOptions::default();
        d.validate().unwrap();
        let plan = d.plan();
        // Fig. 5: 3 mixes x 3 rates x 5 columns; Fig. 6: 9:1 x 3 rates x
        // (5 deterministic + 2 statistical).
        assert_eq!(plan.len(), 45 + 21);
        let est = d.estimate();
        println!(
            "bench rt default: {} cells, about {:.1} min",
            plan.len(),
            est.as_secs_f64() / 60.0
        );
        assert!(est <= Duration::from_secs(15 * 60), "{est:?}");
        let q = d.quick();
        assert_eq!(q.plan().len(), 5 + 7);
        assert!(
            q.estimate() <= Duration::from_secs(3 * 60),
            "{:?}",
            q.estimate()
        );
    }

    #[test]
    fn cells_of_one_setting_are_consecutive() {
        let plan = RtOptions::default().plan();
        let settings: Vec<(Column, Admission)> = plan
            .iter()
            .map(|c| (c.key.column, c.key.admission))
            .collect();
        let mut changes = settings.windows(2).filter(|w| w[0] != w[1]).count();
        changes += 1;
        assert_eq!(changes, 5 + 5 + 2, "one configuration per setting");
    }

    #[test]
    fn the_classes_table_names_the_rule() {
        let t = classes_table(Admission::Statistical, 150);
        assert!(t.contains("statistical_bound_percent = 150"), "{t}");
        let parsed: toml::Table = toml::from_str(&t).unwrap();
        assert_eq!(parsed["admission"].as_str(), Some("statistical"));
        assert_eq!(parsed["ratio"].as_str(), Some("2:1"));
        assert_eq!(parsed["one_gs_rows"].as_integer(), Some(6));
    }

    #[test]
    fn validation_names_the_bad_flag() {
        let bad = |o: RtOptions| o.validate().unwrap_err().to_string();
        let d = RtOptions::default;
        assert!(
            bad(RtOptions {
                rates: vec![0.0],
                ..d()
            })
            .contains("--rates")
        );
        assert!(
            bad(RtOptions {
                window_s: 0.0,
                ..d()
            })
            .contains("--window")
        );
        assert!(
            bad(RtOptions {
                columns: vec![],
                ..d()
            })
            .contains("nothing")
        );
        assert!(
            bad(RtOptions {
                admissions: vec![Admission::Statistical],
                columns: vec![Column::Fifo],
                ..d()
            })
            .contains("nothing")
        );
    }
}
