//! `cargo xtask bench local`: every local policy against plain Linux on the
//! one-machine cluster, for several workloads and multiprogramming levels.
//! Each cell (workload, MPL, policy) runs its jobs together on all nodes
//! `reps` times; each job's row holds medians, its slowdown against its own
//! dedicated run, ClusterSchedSim's metrics as far as they can be measured here, and
//! what the policy did (boosts, reaction latency) and cost (agent CPU).
//!
//! Modules: `workloads` (what runs), `policies` (switching the agents),
//! `runner` (one run), `matrix` (the loop and its failures), `metrics`
//! (formulas), `rows` (JSON and table), `summary` (best policy per
//! workload), `svg` (chart), `agent_cpu` (Prometheus), `interrupt` (Ctrl-C).
pub mod agent_cpu;
pub mod interrupt;
pub mod matrix;
pub mod metrics;
pub mod policies;
pub mod rows;
pub mod runner;
pub mod summary;
pub mod svg;
pub mod workloads;

use std::{path::PathBuf, time::Duration};

use anyhow::bail;

pub use self::runner::SpinWait;
use self::{matrix::Matrix, rows::Row, summary::summarise, workloads::Workload};
use super::common::{BenchBinaries, with_own_cluster, write_outputs};
use crate::{
    cluster::{AgentCommand, DEFAULT_METRICS_PORT, UpOptions},
    progress::say,
    workspace::Workspace,
};

#[derive(Clone, Debug)]
pub struct LocalOptions {
    pub nodes: usize,
    pub mpls: Vec<u32>,
    pub reps: usize,
    pub duration_s: f64,
    pub policies: Vec<String>,
    pub workloads: Vec<Workload>,
    /// How the spinning jobs wait (`cosched-synth --wait`): None keeps
    /// the synth's default (non-blocking receives).
    pub wait: Option<SpinWait>,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    /// Build the workspace (release) first; off to reuse the binaries in
    /// target/release, e.g. while others are mid-edit.
    pub build: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            nodes: 2,
            mpls: vec![2, 3],
            reps: 3,
            duration_s: 2.0,
            policies: policies::ALL.iter().map(|p| p.to_string()).collect(),
            workloads: Workload::ALL.to_vec(),
            wait: None,
            json: None,
            svg: None,
            build: true,
        }
    }
}

impl LocalOptions {
    /// The smoke-run settings: 1 repetition of 1 s, MPL 2 only.
    pub fn quick(self) -> Self {
        Self {
            reps: 1,
            duration_s: 1.0,
            mpls: vec![2],
            ..self
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.nodes < 2 {
            bail!("--nodes must be at least 2 (jobs communicate between nodes)");
        }
        if self.reps == 0 {
            bail!("--reps must be at least 1");
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            bail!("--duration must be a positive number of seconds");
        }
        if self.mpls.is_empty() || self.mpls.contains(&0) {
            bail!("--mpl needs levels of at least 1");
        }
        if self.policies.is_empty() || self.workloads.is_empty() {
            bail!("nothing to run: no policies or no workloads");
        }
        policies::validate(&self.policies)
    }

    fn matrix(&self) -> Matrix {
        Matrix {
            workloads: self.workloads.clone(),
            mpls: self.mpls.clone(),
            policies: self.policies.clone(),
            reps: self.reps,
            duration_s: self.duration_s,
            wait: self.wait,
        }
    }
}

/// What the bench measured.
#[derive(Debug)]
pub struct LocalReport {
    pub rows: Vec<Row>,
    pub interrupted: bool,
}

impl LocalReport {
    pub fn failed_rows(&self) -> usize {
        self.rows.iter().filter(|r| !r.is_ok()).count()
    }
}

/// Builds, brings a cluster up, runs every cell, tears the cluster down (also
/// after errors and Ctrl-C), then prints the table and summary and writes the
/// requested files.
pub fn run(workspace: &Workspace, opts: &LocalOptions) -> anyhow::Result<LocalReport> {
    opts.validate()?;
    let bin = BenchBinaries::snapshot(workspace, opts.build, &["cosched-agent", "cosched-synth"])?;
    let synth = bin.path("cosched-synth");
    let m = opts.matrix();
    say(
        "bench",
        format!(
            "local policies: {} workload(s) x MPL {:?} x {} policies x {} rep(s) of {} s on {} nodes, spinning jobs wait by {}",
            m.workloads.len(),
            m.mpls,
            m.policies.len(),
            m.reps,
            m.duration_s,
            opts.nodes,
            m.wait.map_or("recv", SpinWait::as_str)
        ),
    );
    let up = UpOptions {
        nodes: opts.nodes,
        policy: policies::BASELINE.into(),
        metrics_port: DEFAULT_METRICS_PORT,
        agent: Some(AgentCommand::Binary(bin.path("cosched-agent"))),
        rebuild: false,
        startup_timeout: Duration::from_secs(30),
        coordinator: None,
        slurm: false,
        prometheus: false,
        exclusive_cpusets: false,
    };
    let measured = with_own_cluster(workspace, &up, |c| {
        matrix::run(c, &synth.display().to_string(), &m)
    })?;
    let report = LocalReport {
        rows: measured.rows,
        interrupted: measured.interrupted,
    };
    print!("{}", rows::table(&report.rows));
    for s in summarise(&report.rows) {
        println!("{}", s.line());
    }
    write_outputs(
        opts.json.as_deref(),
        opts.svg.as_deref(),
        &report.rows,
        || svg::slowdown_chart(&report.rows),
    )?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_cover_everything_and_quick_is_a_smoke_run() {
        let d = LocalOptions::default();
        assert_eq!((d.nodes, d.reps, d.duration_s), (2, 3, 2.0));
        assert_eq!(d.mpls, [2, 3]);
        assert_eq!(d.policies.len(), 8);
        assert_eq!(d.workloads.len(), 5);
        d.validate().unwrap();
        let q = d.quick();
        assert_eq!((q.reps, q.duration_s, q.mpls.clone()), (1, 1.0, vec![2]));
    }

    #[test]
    fn validation_names_the_bad_flag() {
        let bad = |o: LocalOptions| o.validate().unwrap_err().to_string();
        assert!(
            bad(LocalOptions {
                nodes: 1,
                ..LocalOptions::default()
            })
            .contains("--nodes")
        );
        assert!(
            bad(LocalOptions {
                reps: 0,
                ..LocalOptions::default()
            })
            .contains("--reps")
        );
        assert!(
            bad(LocalOptions {
                mpls: vec![0],
                ..LocalOptions::default()
            })
            .contains("--mpl")
        );
        assert!(
            bad(LocalOptions {
                policies: vec!["nope".into()],
                ..LocalOptions::default()
            })
            .contains("unknown policy")
        );
    }
}
