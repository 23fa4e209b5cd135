//! `cargo xtask demo`: the foundation end to end on a fresh machine — build,
//! a 2-node cluster, one fine-grain spinning job alone (dedicated), then two
//! such jobs together (MPL 2), a table of what each job did and of what the
//! agents observed of it, and the cluster torn down again.
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use super::jobs::{JobOutcome, JobPlan, run_together};
use crate::{
    cargo_build::{self, Profile},
    cluster::{self, Cluster, DEFAULT_METRICS_PORT, UpOptions},
    progress::say,
    setup,
    workspace::Workspace,
};

/// One row of the demo table / JSON.
#[derive(Clone, Debug, Serialize)]
pub struct DemoRow {
    pub job: String,
    /// "dedicated" or "shared".
    pub mode: String,
    pub mpl: u32,
    pub iterations_per_s: f64,
    /// Dedicated iterations/s over this row's (1.0 for the dedicated run).
    pub slowdown: f64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub messages_observed: u64,
    pub spin_seconds: f64,
    pub wait_seconds: f64,
    pub cpu_seconds: f64,
    pub context_switches: u64,
}

pub struct DemoOptions {
    /// Local policy of the agents (the demo's default is `local`, plain Linux).
    pub policy: String,
    pub duration_s: f64,
    pub compute_us: u64,
    pub json: Option<std::path::PathBuf>,
}

/// Fine-grain spinning ring over UDP: the papers' worst case for plain Linux.
pub fn fine_grain_args(duration_s: f64, compute_us: u64) -> Vec<String> {
    [
        "--proto",
        "udp",
        "--pattern",
        "ring",
        "--recv",
        "spin",
        "--compute-us",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        compute_us.to_string(),
        "--duration".into(),
        duration_s.to_string(),
    ])
    .collect()
}

fn row(o: &JobOutcome, mode: &str, mpl: u32, dedicated_ips: f64) -> DemoRow {
    DemoRow {
        job: o.job.clone(),
        mode: mode.into(),
        mpl,
        iterations_per_s: o.iterations_per_s,
        slowdown: dedicated_ips / o.iterations_per_s,
        messages_sent: o.messages_sent,
        messages_received: o.messages_received,
        messages_observed: o.messages_observed,
        spin_seconds: o.spin_seconds,
        wait_seconds: o.wait_seconds,
        cpu_seconds: o.cpu_seconds,
        context_switches: o.context_switches,
    }
}

pub fn print_table(rows: &[DemoRow]) {
    println!(
        "{:<8} {:<9} {:>4} {:>11} {:>8} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "job",
        "mode",
        "mpl",
        "iter/s",
        "slowdown",
        "msgs sent",
        "msgs recv",
        "observed",
        "spin s",
        "cpu s"
    );
    for r in rows {
        println!(
            "{:<8} {:<9} {:>4} {:>11.0} {:>8.2} {:>10} {:>10} {:>10} {:>8.2} {:>8.2}",
            r.job,
            r.mode,
            r.mpl,
            r.iterations_per_s,
            r.slowdown,
            r.messages_sent,
            r.messages_received,
            r.messages_observed,
            r.spin_seconds,
            r.cpu_seconds
        );
    }
}

/// Runs the demo; the cluster is always torn down, also on error.
pub fn run(workspace: &Workspace, opts: &DemoOptions) -> anyhow::Result<Vec<DemoRow>> {
    let tools = setup::all(workspace)?;
    cargo_build::build_binaries(workspace, &tools, Profile::Release)?;
    let synth = workspace.profile_dir("release")?.join("cosched-synth");
    let report = cluster::down()?;
    if !report.nothing_done() {
        say("demo", "removed leftovers of an earlier cluster");
    }
    cluster::up(
        workspace,
        &UpOptions {
            nodes: 2,
            policy: opts.policy.clone(),
            metrics_port: DEFAULT_METRICS_PORT,
            agent: None,
            rebuild: false,
            startup_timeout: std::time::Duration::from_secs(30),
            coordinator: None,
        },
    )?;
    let result = run_on_cluster(&synth, opts);
    let down = cluster::down();
    let rows = result?;
    down.context("tearing the demo cluster down")?;
    print_table(&rows);
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
        say("demo", format!("wrote {}", path.display()));
    }
    Ok(rows)
}

fn run_on_cluster(synth: &Path, opts: &DemoOptions) -> anyhow::Result<Vec<DemoRow>> {
    let cluster = Cluster::load()?;
    let synth = synth.display().to_string();
    let args = fine_grain_args(opts.duration_s, opts.compute_us);
    let plan = |id: u32, name: &str, port: u16| JobPlan {
        job_id: id,
        name: name.into(),
        nodes: vec![0, 1],
        port,
        args: args.clone(),
    };
    say(
        "demo",
        format!("dedicated: job A alone for {} s", opts.duration_s),
    );
    let dedicated = run_together(&cluster, &synth, &[plan(1, "A", 7101)])?;
    let ded_ips = dedicated[0].iterations_per_s;
    say(
        "demo",
        format!(
            "shared: jobs A and B together (MPL 2) for {} s",
            opts.duration_s
        ),
    );
    let shared = run_together(&cluster, &synth, &[plan(2, "A", 7102), plan(3, "B", 7103)])?;
    let mut rows = vec![row(&dedicated[0], "dedicated", 1, ded_ips)];
    rows.extend(shared.iter().map(|o| row(o, "shared", 2, ded_ips)));
    Ok(rows)
}
