//! One run of `bench mpi`: MPL copies of one MPI job launched together by
//! the library's launcher, their ranks handed to the node agents, all
//! timed from one common instant; what each job took and what the agents
//! saw of it; the outside load and the agents' CPU meanwhile.
//!
//! The ranks reach the agents one of two ways ([`Handoff`]): adopted by pid
//! (local policies, plain Linux), or, for the coordinator's columns, the
//! launcher runs under `cosched attach` and each node's daemon joins the
//! coordinator's job itself; the run then starts and ends on an empty
//! matrix, and a failed one cancels what it left at the coordinator.
use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use cosched_proto::control::{JobStats, Reply, Request};

use super::workloads::MpiWorkload;
use crate::{
    bench::{
        coordinator::{CoordAdmin, job_id_named},
        gang::skew::{self, Histogram},
        jobs::{call, unix_ns},
        local::{agent_cpu, metrics::agent_cpu_percent},
        outside_load::{Ours, outside_percent},
    },
    cluster::Cluster,
    mpi::{
        Library, handoff,
        job::MpiJob,
        launch::{Attach, JobLaunch, Nodes},
        output, programs,
    },
};

/// How long one job may run before the run counts as hung (MPICH 4.0.2
/// over UCX TCP hung in MPI_Finalize in ~1 of 80 jobs before our programs
/// met in a PMI barrier first, see `xtask/mpi/mpibench.h`).
const JOB_TIMEOUT: Duration = Duration::from_secs(45);
/// How long `cosched attach` may take to register a job, and the
/// coordinator to retire jobs after their launchers exit.
const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(15);

/// How a run's ranks reach the agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// Found in the job's cgroups and adopted by pid (`handoff::adopt_ranks`).
    Adopt,
    /// Launched under `cosched attach`, joined by the node daemons
    /// (`handoff::await_joined`): the coordinator's job.
    Attach,
}

/// What the runs share.
pub struct Ctx<'a> {
    /// Mutable: a column may restart the coordinator (`coordinator_config`).
    pub cluster: &'a mut Cluster,
    pub nodes: Nodes,
    pub launch_agent: PathBuf,
    /// Scratch space: one working directory per job.
    pub scratch: PathBuf,
    /// The program to launch per library and workload.
    pub programs: Vec<((Library, MpiWorkload), String)>,
    /// Timed seconds of each run of our benchmarks.
    pub seconds: f64,
    /// How to launch through the coordinator, if the cluster has one.
    pub attach: Option<Attach>,
    next_job_id: u32,
    runs: u32,
}

impl<'a> Ctx<'a> {
    pub fn new(
        cluster: &'a mut Cluster,
        scratch: PathBuf,
        programs: Vec<((Library, MpiWorkload), String)>,
        seconds: f64,
    ) -> Result<Self> {
        let nodes = Nodes::of_cluster(cluster);
        let launch_agent = scratch.join("launch-agent.sh");
        nodes.write_launch_agent(&launch_agent)?;
        let attach = cluster.coordinator.as_ref().map(|c| Attach {
            cli: c.bin_dir.join(crate::cluster::coordinator::CLI_BINARY),
            admin_socket: c.admin_socket.clone(),
        });
        Ok(Self {
            attach,
            cluster,
            nodes,
            launch_agent,
            scratch,
            programs,
            seconds,
            next_job_id: 5000,
            runs: 0,
        })
    }

    fn program(&self, lib: Library, w: MpiWorkload) -> Result<&str> {
        self.programs
            .iter()
            .find(|(k, _)| *k == (lib, w))
            .map(|(_, p)| p.as_str())
            .with_context(|| format!("{} was not built for {}", w.as_str(), lib.as_str()))
    }
}

/// One job of a run.
#[derive(Clone, Debug, Default)]
pub struct JobRun {
    /// The job's time per unit of work: our benchmarks' time per iteration
    /// (slowest rank), HPCC's whole run (launch to exit).
    pub per_iteration_s: f64,
    /// How late the job reached the common start (0 for HPCC).
    pub late_start_s: f64,
    /// What the agents saw, summed over the nodes.
    pub stats: JobStats,
}

/// One run.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    pub jobs: Vec<JobRun>,
    /// The coordinator's slice-switch skew over this run (coordinator
    /// columns; `None` otherwise or when unreadable).
    pub skew: Option<Histogram>,
    pub agent_cpu_percent: f64,
    pub outside_cpu_percent: f64,
}

/// Time between launching and the common start: enough for `mpl` jobs to
/// start, find and adopt their ranks.
pub fn lead_s(mpl: u32) -> f64 {
    0.5 + 0.3 * mpl as f64
}

/// Runs `mpl` copies of `w` with `lib` together once.
pub fn run_once(
    ctx: &mut Ctx<'_>,
    lib: Library,
    w: MpiWorkload,
    yield_when_idle: bool,
    handoff: Handoff,
    mpl: u32,
) -> Result<RunResult> {
    let admin = match handoff {
        Handoff::Adopt => None,
        Handoff::Attach => {
            let admin = CoordAdmin::of(ctx.cluster);
            admin
                .wait_idle(COORDINATOR_TIMEOUT)
                .context("jobs of an earlier run are still at the coordinator")?;
            Some(admin)
        }
    };
    let metrics = match &admin {
        Some(admin) => Some(admin.node()?.metrics_addr),
        None => None,
    };
    let skew_before = metrics.and_then(skew::read);
    let program = ctx.program(lib, w)?.to_string();
    ctx.runs += 1;
    let run_dir = ctx.scratch.join(format!("run{}", ctx.runs));
    let ours = Ours::of(ctx.cluster);
    let load_before = ours.sample();
    let cpu_before = agent_cpu::read_all(ctx.cluster);
    let started = Instant::now();
    let start_at = unix_ns() as f64 / 1e9 + lead_s(mpl);
    let sockets: Vec<PathBuf> = ctx
        .cluster
        .nodes
        .iter()
        .map(|n| n.control_socket.clone())
        .collect();
    let mut jobs: Vec<(u32, MpiJob)> = Vec::new();
    let result = (|| -> Result<Vec<JobRun>> {
        for k in 0..mpl {
            let dir = run_dir.join(format!("job{k}"));
            std::fs::create_dir_all(&dir)?;
            programs::prepare_workdir(&program, ctx.nodes.nodes.len(), &dir)?;
            let mut args = w.args(ctx.seconds);
            if w.synchronised_start() {
                args.extend(["--start-at".into(), format!("{start_at:.6}")]);
            }
            let name = format!("b{}j{k}", ctx.runs);
            let launch =
                JobLaunch {
                    lib,
                    nodes: &ctx.nodes,
                    launch_agent: &ctx.launch_agent,
                    ranks_per_node: 1,
                    job: &name,
                    yield_when_idle,
                    program: &program,
                    args: &args,
                    workdir: &dir,
                    attach: match handoff {
                        Handoff::Adopt => None,
                        Handoff::Attach => Some(ctx.attach.as_ref().context(
                            "the bench cluster has no coordinator for the gang columns",
                        )?),
                    },
                };
            let job = MpiJob::start(&launch)?;
            let id = match &admin {
                None => {
                    ctx.next_job_id += 1;
                    ctx.next_job_id - 1
                }
                Some(admin) => attached_id(admin, &name)?,
            };
            jobs.push((id, job));
        }
        for (id, job) in &mut jobs {
            match handoff {
                Handoff::Adopt => {
                    let name = job.job.clone();
                    handoff::adopt_ranks(job, &sockets, *id, &name)?;
                }
                Handoff::Attach => {
                    handoff::await_joined(job, &sockets, *id)?;
                }
            }
        }
        let mut out = Vec::new();
        for (id, job) in &mut jobs {
            let finished = job.wait(JOB_TIMEOUT)?;
            let (per_iteration_s, late_start_s) = if w.synchronised_start() {
                let r = output::bench_result(&finished.stdout)
                    .with_context(|| format!("job {}", job.job))?;
                (r.us_per_iter / 1e6, r.late_start_s)
            } else {
                (finished.wall_s, 0.0)
            };
            out.push(JobRun {
                per_iteration_s,
                late_start_s,
                stats: agent_stats(ctx.cluster, *id)?,
            });
        }
        Ok(out)
    })();
    let ids: Vec<u32> = jobs.iter().map(|(id, _)| *id).collect();
    drop(jobs);
    let result = match &admin {
        None => result,
        // Launchers that exited detached their jobs; a failed run's are
        // cancelled, so the next run starts on an empty matrix.
        Some(admin) => result.and_then(|jobs| {
            admin
                .wait_idle(COORDINATOR_TIMEOUT)
                .context("after the run")
                .map(|()| jobs)
        }),
    };
    if let (Err(_), Some(admin)) = (&result, &admin) {
        let _ = admin.cancel_all(COORDINATOR_TIMEOUT);
    }
    forget(ctx.cluster, &ids);
    let _ = std::fs::remove_dir_all(&run_dir);
    let jobs = result?;
    let wall_s = started.elapsed().as_secs_f64();
    let skew = metrics
        .and_then(skew::read)
        .zip(skew_before)
        .map(|(after, before)| after.since(&before));
    Ok(RunResult {
        jobs,
        skew,
        agent_cpu_percent: agent_cpu_percent(
            &cpu_before,
            &agent_cpu::read_all(ctx.cluster),
            wall_s,
        ),
        outside_cpu_percent: outside_percent(load_before, ours.sample()),
    })
}

/// The coordinator's id of the job `cosched attach` registers as `name`.
fn attached_id(admin: &CoordAdmin<'_>, name: &str) -> Result<u32> {
    let deadline = Instant::now() + COORDINATOR_TIMEOUT;
    loop {
        if let Some(id) = job_id_named(&admin.cli(&["jobs"])?, name) {
            return Ok(id);
        }
        if Instant::now() >= deadline {
            bail!(
                "`cosched attach` did not register {name} with the coordinator within {} s",
                COORDINATOR_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The agents' counters of an ended job, summed over the nodes.
fn agent_stats(cluster: &Cluster, job_id: u32) -> Result<JobStats> {
    let mut sum = JobStats::default();
    for node in 0..cluster.nodes.len() {
        let reply = call(
            cluster,
            node,
            Request::Wait {
                job_id,
                timeout_ms: 10_000,
            },
        )?;
        let Reply::Job { job } = reply else {
            bail!("unexpected reply {reply:?}");
        };
        let s = job.stats;
        sum.cpu_seconds += s.cpu_seconds;
        sum.spin_seconds += s.spin_seconds;
        sum.messages_observed += s.messages_observed;
        sum.receives += s.receives;
        sum.empty_receives += s.empty_receives;
        sum.sends += s.sends;
        sum.switches_in += s.switches_in;
        sum.switches_voluntary += s.switches_voluntary;
        sum.switches_preempted += s.switches_preempted;
        sum.boosts += s.boosts;
        sum.actions += s.actions;
        sum.reactions += s.reactions;
        sum.reaction_latency_p50_us = sum.reaction_latency_p50_us.max(s.reaction_latency_p50_us);
        sum.reaction_latency_p99_us = sum.reaction_latency_p99_us.max(s.reaction_latency_p99_us);
    }
    Ok(sum)
}

/// Makes the agents drop the jobs' records (errors ignored: a job a failed
/// run never adopted is unknown to them).
fn forget(cluster: &Cluster, ids: &[u32]) {
    for &job_id in ids {
        for node in 0..cluster.nodes.len() {
            let _ = call(cluster, node, Request::Forget { job_id });
        }
    }
}
