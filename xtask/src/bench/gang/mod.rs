//! `cargo xtask bench gang`: global (coordinator) policies against local
//! ones on the one-machine cluster, after ClusterSchedSim's Fig. 8b/8c (gang
//! scheduling wins on communication-intensive jobs, dynamic coscheduling on
//! I/O-intensive ones) and Paired Gang Scheduling's job mixes (paired gang against strict
//! gang, progress in barriers per second).
//!
//! Columns: plain Linux, the best local policy, and the coordinator's
//! `gang`, `paired-gang` and `fcs` at each slice length. Dedicated baselines
//! (each job type alone, plain Linux) are measured in the same run; every
//! number is a median over `reps` runs. Rows carry the local bench's keys
//! plus `slice_ms`, `switch_skew_p99_us` (the coordinator's skew histogram,
//! difference over the cell's runs) and `total_progress_per_s`.
//!
//! Modules: `workloads` (what runs), `modes` (the columns), `coord_run`
//! (one run through the coordinator), `cells` (the loop), `skew`
//! (the histogram), `rows` (JSON and table), `targets` (issue 4's targets).
pub mod cells;
pub mod coord_run;
pub mod modes;
pub mod rows;
pub mod skew;
pub mod targets;
pub mod timeline;
pub mod workloads;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context as _, bail};

use self::{
    cells::{Measured, Plan},
    modes::{IDLE_COORDINATOR_POLICY, Mode},
    rows::{GangRow, chart_rows, table},
    targets::{Target, evaluate},
    workloads::GangWorkload,
};
use super::{
    common::{BenchBinaries, with_own_cluster, write_outputs},
    local::{policies, svg::titled_slowdown_chart},
};
use crate::{
    cluster::{
        AgentCommand, CoordinatorOptions, DEFAULT_METRICS_PORT, UpOptions,
        coordinator::{CLI_BINARY, COORDINATOR_BINARY},
    },
    progress::say,
    workspace::Workspace,
};

/// Slice lengths measured by default: the target's 10 ms, and 50 ms to see
/// what the switches cost.
pub const DEFAULT_SLICES_MS: [u64; 2] = [10, 50];
/// The SVG's title.
const CHART_TITLE: &str = "Slowdown (dedicated ÷ shared iter/s, lower is better)";
/// The coordinator's shortest slice (its config refuses less).
pub const MIN_SLICE_MS: u64 = 10;
/// The best local policy of `bench local` (fine-grain spinning, MPL 2).
pub const DEFAULT_BEST_LOCAL: &str = "dcs";

#[derive(Clone, Debug)]
pub struct GangOptions {
    pub reps: usize,
    pub duration_s: f64,
    pub slices_ms: Vec<u64>,
    pub best_local: String,
    pub workloads: Vec<GangWorkload>,
    pub modes: Vec<Mode>,
    /// Outside its slice a job is stopped (SIGSTOP, Paired Gang Scheduling's strict gang)
    /// rather than demoted to SCHED_IDLE.
    pub stop_inactive: bool,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub build: bool,
    /// Record a timeline of every column's run (None: none).
    pub timeline: Option<timeline::Capture>,
}

impl Default for GangOptions {
    fn default() -> Self {
        Self {
            reps: 3,
            duration_s: 3.0,
            slices_ms: DEFAULT_SLICES_MS.to_vec(),
            best_local: DEFAULT_BEST_LOCAL.into(),
            workloads: GangWorkload::DEFAULT.to_vec(),
            modes: Mode::ALL.to_vec(),
            stop_inactive: true,
            json: None,
            svg: None,
            build: true,
            timeline: None,
        }
    }
}

impl GangOptions {
    /// The smoke-run settings: 1 repetition of 1.5 s, the first slice only.
    pub fn quick(self) -> Self {
        Self {
            reps: 1,
            duration_s: 1.5,
            slices_ms: self.slices_ms.into_iter().take(1).collect(),
            ..self
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.reps == 0 {
            bail!("--reps must be at least 1");
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            bail!("--duration must be a positive number of seconds");
        }
        if self.workloads.is_empty() || self.modes.is_empty() {
            bail!("nothing to run: no workloads or no modes");
        }
        if self.modes.iter().any(|m| m.sliced()) && self.slices_ms.is_empty() {
            bail!("--slice-ms needs at least one slice length for the coordinator modes");
        }
        if let Some(s) = self.slices_ms.iter().find(|s| **s < MIN_SLICE_MS) {
            bail!("--slice-ms {s}: the coordinator's slices are at least {MIN_SLICE_MS} ms");
        }
        policies::validate(std::slice::from_ref(&self.best_local)).context("--local-policy")
    }

    fn plan(&self) -> Plan {
        Plan {
            workloads: self.workloads.clone(),
            modes: self.modes.clone(),
            slices: self.slices_ms.clone(),
            reps: self.reps,
            duration_s: self.duration_s,
            best_local: self.best_local.clone(),
            timeline: self.timeline.clone(),
        }
    }
}

/// What the bench measured.
#[derive(Debug)]
pub struct GangReport {
    pub rows: Vec<GangRow>,
    pub targets: Vec<Target>,
    pub interrupted: bool,
}

impl GangReport {
    pub fn failed_rows(&self) -> usize {
        self.rows.iter().filter(|r| !r.is_ok()).count()
    }
}

/// Builds, brings up a 2-node cluster with a coordinator, measures, tears
/// it down (also after errors and Ctrl-C), then prints the table and the
/// targets and writes the requested files.
pub fn run(workspace: &Workspace, opts: &GangOptions) -> anyhow::Result<GangReport> {
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
    let plan = opts.plan();
    say(
        "bench",
        format!(
            "gang: {} workload(s) x {} mode(s), slices {:?} ms, {} rep(s) of {} s, inactive jobs {}",
            plan.workloads.len(),
            plan.modes.len(),
            plan.slices,
            plan.reps,
            plan.duration_s,
            if opts.stop_inactive {
                "stopped"
            } else {
                "demoted"
            }
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
            slice_ms: plan.slices.first().copied().unwrap_or(100),
            stop_inactive: opts.stop_inactive,
            bin_dir: Some(bin.dir().to_path_buf()),
            classes: None,
            // Each mode's own (`cells::fresh_coordinator`).
            paired_schedule_ahead: false,
        }),
        slurm: false,
        prometheus: false,
        exclusive_cpusets: false,
    };
    let Measured {
        rows,
        skew,
        interrupted,
    } = with_own_cluster(workspace, &up, |c| cells::run(c, &synth, &plan))?;
    let targets = evaluate(&rows, &skew);
    print!("{}", table(&rows));
    for t in &targets {
        println!("{}", t.line());
    }
    write_outputs(opts.json.as_deref(), opts.svg.as_deref(), &rows, || {
        titled_slowdown_chart(&chart_rows(&rows), CHART_TITLE)
    })?;
    Ok(GangReport {
        rows,
        targets,
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_cover_the_requirement_and_quick_is_a_smoke_run() {
        let d = GangOptions::default();
        assert_eq!((d.reps, d.duration_s), (3, 3.0));
        assert_eq!(d.slices_ms, [10, 50]);
        assert_eq!(d.best_local, "dcs");
        assert_eq!(d.modes.len(), 5);
        assert!(d.stop_inactive);
        d.validate().unwrap();
        let q = d.quick();
        assert_eq!(
            (q.reps, q.duration_s, q.slices_ms.clone()),
            (1, 1.5, vec![10])
        );
    }

    #[test]
    fn validation_names_the_bad_flag() {
        let bad = |o: GangOptions| o.validate().unwrap_err().to_string();
        let d = GangOptions::default;
        assert!(bad(GangOptions { reps: 0, ..d() }).contains("--reps"));
        assert!(
            bad(GangOptions {
                slices_ms: vec![5],
                ..d()
            })
            .contains("--slice-ms 5")
        );
        assert!(
            bad(GangOptions {
                slices_ms: vec![],
                ..d()
            })
            .contains("--slice-ms")
        );
        assert!(
            bad(GangOptions {
                best_local: "gang".into(),
                ..d()
            })
            .contains("--local-policy")
        );
        // Local modes alone need no slices.
        GangOptions {
            slices_ms: vec![],
            modes: vec![Mode::Local, Mode::BestLocal],
            ..d()
        }
        .validate()
        .unwrap();
    }
}
