//! `cargo xtask bench mpi`: real MPI programs (OpenMPI and MPICH, each
//! launched by its own launcher, see [`crate::mpi`]) on the one-machine
//! cluster, one rank per node on two single-CPU nodes, MPL copies of a job
//! at once. Columns in the same run: the dedicated time (one job alone,
//! plain Linux), plain Linux, the library's yield mode, every local policy
//! and the coordinator's gang and paired gang (jobs launched under `cosched
//! attach`; the cluster then has a coordinator, idle in `fcfs` during the
//! other columns, as in `bench gang`). Slowdown =
//! time at MPL k ÷ dedicated time, medians over repetitions, interleaved
//! order (`matrix`); runs disturbed by outside load are repeated as in
//! `bench local`. Writes a table, JSON, an SVG and issue 12's targets.
//!
//! Modules: `workloads` (the programs and their settings), `columns`,
//! `coordinator_config` (the coordinator's config a column needs),
//! `run` (one run: launch, hand-off to the agents, timing), `matrix` (the
//! loop), `rows` (medians, table, chart rows), `targets`, `pool` (several
//! reports judged as one: `bench mpi-pool`).
pub mod columns;
pub mod coordinator_config;
pub mod matrix;
pub mod pool;
pub mod rows;
pub mod run;
pub mod targets;
pub mod workloads;

use std::{path::PathBuf, time::Duration};

use anyhow::bail;

use self::{columns::Column, matrix::Plan, rows::MpiRow, targets::Target, workloads::MpiWorkload};
use super::{
    common::{BenchBinaries, with_own_cluster, write_outputs},
    gang::MIN_SLICE_MS,
    local::{policies, svg::titled_slowdown_chart},
};
use crate::{
    bench::coordinator::IDLE_COORDINATOR_POLICY,
    cluster::{
        AgentCommand, CoordinatorOptions, DEFAULT_METRICS_PORT, UpOptions,
        coordinator::{CLI_BINARY, COORDINATOR_BINARY},
    },
    mpi::{Library, programs},
    progress::say,
    workspace::Workspace,
};

/// The coordinator columns' slice (issue 12's 10 ms).
pub const DEFAULT_SLICE_MS: u64 = 10;
const CHART_TITLE: &str = "MPI slowdown (time at MPL k ÷ dedicated time, lower is better)";

#[derive(Clone, Debug)]
pub struct MpiOptions {
    pub libs: Vec<Library>,
    pub workloads: Vec<MpiWorkload>,
    pub mpls: Vec<u32>,
    /// Column names: `local`, `yield`, local policies (variants), `gang`,
    /// `paired-gang`.
    pub columns: Vec<String>,
    pub slice_ms: u64,
    pub reps: usize,
    /// Timed seconds of each run of our benchmarks (HPCC runs its fixed
    /// problem).
    pub seconds: f64,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub build: bool,
}

impl Default for MpiOptions {
    fn default() -> Self {
        Self {
            libs: Library::ALL.to_vec(),
            workloads: MpiWorkload::ALL.to_vec(),
            mpls: vec![2, 3],
            columns: Column::all(DEFAULT_SLICE_MS)
                .iter()
                .map(Column::name)
                .collect(),
            slice_ms: DEFAULT_SLICE_MS,
            reps: 3,
            seconds: 0.75,
            json: None,
            svg: None,
            build: true,
        }
    }
}

impl MpiOptions {
    /// Smoke run: one repetition of 0.5 s at MPL 2.
    pub fn quick(self) -> Self {
        Self {
            reps: 1,
            mpls: vec![2],
            seconds: 0.5,
            ..self
        }
    }

    pub fn validate(&self) -> anyhow::Result<Vec<Column>> {
        if self.reps == 0 {
            bail!("--reps must be at least 1");
        }
        if self.mpls.is_empty() || self.mpls.iter().any(|&m| m < 2) {
            bail!("--mpl needs levels of at least 2 (MPL 1 is the dedicated run)");
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            bail!("--seconds must be positive");
        }
        if self.libs.is_empty() || self.workloads.is_empty() || self.columns.is_empty() {
            bail!("nothing to run: no libraries, workloads or columns");
        }
        let columns: Vec<Column> = self
            .columns
            .iter()
            .map(|c| Column::parse(c, self.slice_ms))
            .collect::<anyhow::Result<_>>()?;
        let sliced = columns
            .iter()
            .any(|c| matches!(c, Column::Coordinator { .. }));
        if sliced && self.slice_ms < MIN_SLICE_MS {
            bail!(
                "--slice-ms {}: the coordinator's slices are at least {MIN_SLICE_MS} ms",
                self.slice_ms
            );
        }
        Ok(columns)
    }

    fn plan(&self, columns: Vec<Column>) -> Plan {
        Plan {
            libs: self.libs.clone(),
            workloads: self.workloads.clone(),
            mpls: self.mpls.clone(),
            columns,
            reps: self.reps,
        }
    }
}

/// A dedicated HPCC run, s (measured 1.54), and its slowdown per job
/// sharing the nodes (measured 2.56 at MPL 2, 4.85 at MPL 3, plain
/// Linux): for the estimate only.
const HPCC_DEDICATED_S: f64 = 1.6;
const HPCC_SLOWDOWN_PER_MPL: f64 = 1.45;
/// Launch, hand-off, teardown and the policy switch of a run besides its
/// lead and timed part, s (measured: 108 ping-pong runs took 5.1 min).
const RUN_OVERHEAD_S: f64 = 0.95;

/// Runs in the plan and their expected total length: our benchmarks run
/// `seconds`; HPCC is assumed slowed down by MPL x 1.45.
pub fn estimate(plan: &Plan, seconds: f64) -> (usize, Duration) {
    let mut runs = 0;
    let mut s = 0.0;
    for (lib, w) in plan.pairs() {
        let timed = |mpl: u32| {
            if w.synchronised_start() {
                seconds
            } else {
                HPCC_DEDICATED_S
                    * if mpl == 1 {
                        1.0
                    } else {
                        HPCC_SLOWDOWN_PER_MPL * mpl as f64
                    }
            }
        };
        let cols = plan.runnable(lib);
        for (mpl, _) in matrix::cells_of_rep(0, &cols, &plan.mpls) {
            runs += 1;
            s += run::lead_s(mpl) + timed(mpl) + RUN_OVERHEAD_S;
        }
    }
    (
        runs * plan.reps,
        Duration::from_secs_f64(s * plan.reps as f64),
    )
}

/// What the bench measured.
#[derive(Debug)]
pub struct MpiReport {
    pub rows: Vec<MpiRow>,
    pub targets: Vec<Target>,
    pub interrupted: bool,
}

impl MpiReport {
    pub fn failed_rows(&self) -> usize {
        self.rows.iter().filter(|r| r.status == "error").count()
    }
}

pub fn run(workspace: &Workspace, opts: &MpiOptions) -> anyhow::Result<MpiReport> {
    let columns = opts.validate()?;
    let plan = opts.plan(columns);
    let sliced = plan
        .columns
        .iter()
        .any(|c| matches!(c, Column::Coordinator { .. }));
    let binaries: &[&str] = if sliced {
        &["cosched-agent", COORDINATOR_BINARY, CLI_BINARY]
    } else {
        &["cosched-agent"]
    };
    let bin = BenchBinaries::snapshot(workspace, opts.build, binaries)?;
    let mut built = Vec::new();
    for (lib, w) in plan.pairs() {
        built.push(((lib, w), programs::resolve(workspace, lib, w.program())?));
    }
    let (runs, expected) = estimate(&plan, opts.seconds);
    say(
        "bench",
        format!(
            "mpi: {} library/workload pairs x MPL {:?} x {} columns x {} rep(s): {runs} runs, \
             about {:.0} min on a quiet machine",
            plan.pairs().len(),
            plan.mpls,
            plan.columns.len(),
            plan.reps,
            expected.as_secs_f64() / 60.0
        ),
    );
    let up = UpOptions {
        nodes: 2,
        policy: policies::BASELINE.into(),
        metrics_port: DEFAULT_METRICS_PORT,
        agent: Some(AgentCommand::Binary(bin.path("cosched-agent"))),
        rebuild: false,
        startup_timeout: Duration::from_secs(30),
        // Started with its slice (fixed by its config), idle until a
        // coordinator column switches its policy.
        coordinator: sliced.then(|| CoordinatorOptions {
            policy: IDLE_COORDINATOR_POLICY.into(),
            slice_ms: opts.slice_ms,
            stop_inactive: true,
            bin_dir: Some(bin.dir().to_path_buf()),
            classes: None,
            // Each column's own (`coordinator_config::ensure`).
            paired_schedule_ahead: false,
        }),
        slurm: false,
        prometheus: false,
        exclusive_cpusets: false,
    };
    let scratch = std::env::temp_dir().join(format!("cosched-bench-mpi-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let started = std::time::Instant::now();
    let samples = with_own_cluster(workspace, &up, |c| {
        run::Ctx::new(c, scratch.clone(), built, opts.seconds)
            .map(|mut ctx| matrix::run(&mut ctx, &plan))
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let samples = samples??;
    say(
        "bench",
        format!(
            "measured in {:.1} min",
            started.elapsed().as_secs_f64() / 60.0
        ),
    );
    let rows = rows::rows(&plan, &samples);
    let targets = targets::evaluate(&rows);
    print!("{}", rows::table(&rows));
    for t in &targets {
        println!("{}", t.line());
    }
    write_outputs(opts.json.as_deref(), opts.svg.as_deref(), &rows, || {
        titled_slowdown_chart(&rows::chart_rows(&rows), CHART_TITLE)
    })?;
    Ok(MpiReport {
        rows,
        targets,
        interrupted: samples.interrupted,
    })
}

/// `bench mpi-pool`: the reports in `paths` pooled, printed and judged,
/// written like a run's.
pub fn pool_reports(
    paths: &[PathBuf],
    json: Option<&std::path::Path>,
    svg: Option<&std::path::Path>,
) -> anyhow::Result<MpiReport> {
    let (rows, targets) = pool::pool_files(paths)?;
    print!("{}", rows::table(&rows));
    for t in &targets {
        println!("{}", t.line());
    }
    write_outputs(json, svg, &rows, || {
        titled_slowdown_chart(&rows::chart_rows(&rows), CHART_TITLE)
    })?;
    Ok(MpiReport {
        rows,
        targets,
        interrupted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_cover_the_issue_and_quick_is_a_smoke_run() {
        let d = MpiOptions::default();
        let columns = d.validate().unwrap();
        assert_eq!(columns.len(), 11);
        assert_eq!(d.mpls, [2, 3]);
        let plan = d.plan(columns);
        // HPCC only with OpenMPI.
        assert_eq!(plan.pairs().len(), 9);
        let (runs, time) = estimate(&plan, d.seconds);
        println!(
            "full bench mpi: {runs} runs, {:.1} min",
            time.as_secs_f64() / 60.0
        );
        // OpenMPI: 11 runnable columns, MPICH 10 (no yield mode); three
        // dedicated runs bracket the two MPL blocks.
        assert_eq!(runs, 3 * (5 * (3 + 2 * 11) + 4 * (3 + 2 * 10)));
        // Two coordinator columns more than the 9 local ones (11/9 of the
        // 30 min the local columns were held to) and 18 short dedicated
        // runs more.
        assert!(time < Duration::from_secs(38 * 60), "{time:?}");
        let q = d.quick();
        assert_eq!((q.reps, q.mpls.clone(), q.seconds), (1, vec![2], 0.5));
    }

    #[test]
    fn validation_names_the_bad_flag() {
        let bad = |o: MpiOptions| o.validate().unwrap_err().to_string();
        let d = MpiOptions::default;
        assert!(bad(MpiOptions { reps: 0, ..d() }).contains("--reps"));
        assert!(
            bad(MpiOptions {
                mpls: vec![1],
                ..d()
            })
            .contains("--mpl")
        );
        assert!(
            bad(MpiOptions {
                columns: vec!["nope".into()],
                ..d()
            })
            .contains("unknown policy")
        );
        assert!(bad(MpiOptions { slice_ms: 5, ..d() }).contains("--slice-ms 5"));
    }
}
