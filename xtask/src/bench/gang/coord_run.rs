//! One run through the coordinator: the jobs are submitted with `cosched
//! submit` (the coordinator places them in the matrix and the agents launch
//! the ranks through their gate), all measuring from the same instant; the
//! bench waits until every rank is known to its agent, then until every rank
//! has ended, reads what each did from the agents, and checks that the
//! coordinator holds no job any more, so the next run starts on an empty
//! matrix. On any failure the jobs are cancelled (coordinator and agents)
//! before the error is returned. Every wait has a deadline.
use std::{
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow, bail};
use cosched_proto::control::{Reply, Request};
use serde_json::Value;

use super::skew::{self, Histogram};
use crate::{
    bench::{
        coordinator::CoordAdmin,
        jobs::{self, JobOutcome, JobPlan, unix_ns},
        local::{agent_cpu, metrics::agent_cpu_percent, workloads::JobSlot},
        outside_load::{Ours, outside_percent},
    },
    cluster::Cluster,
    progress::say,
};

/// Time from the first submission to the common start instant: the
/// coordinator launches ranks at once, but under gang slices a job only
/// runs (and handshakes) in its own slots.
const START_LEAD_NS: u64 = 1_500_000_000;
const START_LEAD_PER_JOB_NS: u64 = 300_000_000;
/// How long the agents may take to show a submitted job's ranks.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);
/// Slack after the measured window for the ranks to end.
const END_SLACK_MS: u64 = 30_000;
/// How long the coordinator may take to retire ended or cancelled jobs.
const IDLE_TIMEOUT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(50);

/// The cluster's coordinator and how to reach it.
pub struct Coord<'a> {
    pub cluster: &'a Cluster,
    /// The benchmark binary (absolute path: the agents exec it).
    pub synth: &'a str,
}

/// What one run gave.
#[derive(Debug)]
pub struct CoordRun {
    /// One outcome per slot, in order.
    pub jobs: Vec<JobOutcome>,
    pub agent_cpu_percent: f64,
    /// The skew histogram of the slices of this run (`None`: unreadable).
    pub skew: Option<Histogram>,
    /// How much later than the common start instant the latest job began
    /// its measured window, ms (a job stopped outside its slot starts in
    /// its next one).
    pub latest_start_ms: f64,
    /// CPU used outside the bench meanwhile, % of one CPU (NaN: unknown).
    pub outside_cpu_percent: f64,
}

impl Coord<'_> {
    /// The coordinator's CLI and policy switch (shared with `bench mpi`).
    pub fn admin(&self) -> CoordAdmin<'_> {
        CoordAdmin::of(self.cluster)
    }

    /// Runs `slots` together once through the coordinator.
    pub fn run_once(&self, slots: &[JobSlot], duration_s: f64) -> anyhow::Result<CoordRun> {
        self.admin()
            .wait_idle(IDLE_TIMEOUT)
            .context("jobs of an earlier run are still active")?;
        let metrics = self.admin().node()?.metrics_addr;
        let skew_before = skew::read(metrics);
        let ours = Ours::of(self.cluster);
        let load_before = ours.sample();
        let cpu_before = agent_cpu::read_all(self.cluster);
        let started = Instant::now();
        let start_at = unix_ns() + START_LEAD_NS + START_LEAD_PER_JOB_NS * slots.len() as u64;
        let mut plans = Vec::new();
        let outcome = self.submit_and_collect(slots, duration_s, start_at, &mut plans);
        let wall_s = started.elapsed().as_secs_f64();
        let outside_cpu_percent = outside_percent(load_before, ours.sample());
        let outcome = outcome.and_then(|jobs| {
            self.admin()
                .wait_idle(IDLE_TIMEOUT)
                .context("after the run")
                .map(|()| jobs)
        });
        let jobs = match outcome {
            Ok(jobs) => jobs,
            Err(e) => {
                self.discard(&plans);
                return Err(e);
            }
        };
        let skew = skew::read(metrics)
            .zip(skew_before)
            .map(|(after, before)| after.since(&before));
        Ok(CoordRun {
            latest_start_ms: latest_start_ms(&jobs, start_at),
            jobs,
            agent_cpu_percent: agent_cpu_percent(
                &cpu_before,
                &agent_cpu::read_all(self.cluster),
                wall_s,
            ),
            skew,
            outside_cpu_percent,
        })
    }

    fn submit_and_collect(
        &self,
        slots: &[JobSlot],
        duration_s: f64,
        start_at: u64,
        plans: &mut Vec<JobPlan>,
    ) -> anyhow::Result<Vec<JobOutcome>> {
        for slot in slots {
            let plan = self
                .submit(slot, duration_s, start_at)
                .with_context(|| format!("submitting {}", slot.label))?;
            plans.push(plan);
        }
        self.wait_launched(plans)?;
        let until_start_ms = start_at.saturating_sub(unix_ns()) / 1_000_000;
        let wait_ms = until_start_ms + (duration_s * 1000.0) as u64 + END_SLACK_MS;
        jobs::collect(self.cluster, plans, wait_ms)
    }

    /// `cosched submit` of one job; its plan (id, rank placement, port).
    fn submit(&self, slot: &JobSlot, duration_s: f64, start_at: u64) -> anyhow::Result<JobPlan> {
        let mut args = slot.kind.synth_args(duration_s);
        args.extend(["--start-at-unix-ns".into(), start_at.to_string()]);
        let nodes = self.cluster.nodes.len().to_string();
        let mut cli = vec!["submit", "--name", &slot.label, "--nodes", &nodes, "--"];
        cli.push(self.synth);
        cli.extend(args.iter().map(String::as_str));
        let reply = self.admin().cli(&cli)?;
        let mut plan = plan_of(self.cluster, &reply["submitted"]["job"])?;
        plan.args = args;
        Ok(plan)
    }

    /// Waits until every rank's agent knows its job (the coordinator's
    /// `launched` only means the launch was sent).
    fn wait_launched(&self, plans: &[JobPlan]) -> anyhow::Result<()> {
        let deadline = Instant::now() + LAUNCH_TIMEOUT;
        for plan in plans {
            for (rank, &node) in plan.nodes.iter().enumerate() {
                loop {
                    let known = match jobs::call(self.cluster, node, Request::Jobs)? {
                        Reply::Jobs { jobs } => jobs.iter().any(|j| j.job_id == plan.job_id),
                        other => bail!("unexpected reply to jobs: {other:?}"),
                    };
                    if known {
                        break;
                    }
                    if Instant::now() >= deadline {
                        let view = self.admin().cli(&["job", &plan.job_id.to_string()]).ok();
                        bail!(
                            "{} (job {}) rank {rank} did not reach the agent of {} within {} s; coordinator: {}",
                            plan.name,
                            plan.job_id,
                            self.cluster.nodes[node].name,
                            LAUNCH_TIMEOUT.as_secs(),
                            view.map_or("unreachable".into(), |v| v["job"]["job"].to_string())
                        );
                    }
                    thread::sleep(POLL);
                }
            }
        }
        Ok(())
    }

    /// Best-effort cleanup after a failed run: cancel at the coordinator,
    /// kill and forget at the agents, wait for an empty matrix.
    fn discard(&self, plans: &[JobPlan]) {
        for id in self.admin().active_jobs().unwrap_or_default() {
            let _ = self.admin().cli(&["cancel", &id.to_string()]);
        }
        jobs::discard(self.cluster, plans);
        if let Err(e) = self.admin().wait_idle(IDLE_TIMEOUT) {
            say("bench", format!("cleanup after a failed run: {e:#}"));
        }
    }
}

/// A submitted job (the `job` of a `cosched --json submit` answer) as a
/// plan: its id, the node index of each rank, its port. A job that did not
/// get cells (queued) is an error: every job of a run must run at once.
pub fn plan_of(cluster: &Cluster, job: &Value) -> anyhow::Result<JobPlan> {
    let id = job["id"]
        .as_u64()
        .ok_or_else(|| anyhow!("no job id in the answer {job}"))?;
    if job["state"] != "running" {
        bail!(
            "job {id} is {} (queue position {}), not running: the matrix has no room for it (max_rows)",
            job["state"],
            job["queue_position"]
        );
    }
    let ranks = job["ranks"]
        .as_array()
        .ok_or_else(|| anyhow!("job {id} has no ranks: {job}"))?;
    let nodes = ranks
        .iter()
        .map(|rank| {
            let name = rank["node"].as_str().unwrap_or_default();
            cluster.node(name).map(|n| n.index)
        })
        .collect::<anyhow::Result<Vec<usize>>>()?;
    Ok(JobPlan {
        job_id: id as u32,
        name: job["name"].as_str().unwrap_or_default().to_string(),
        nodes,
        port: job["port"].as_u64().unwrap_or(0) as u16,
        args: Vec::new(),
    })
}

/// The latest start of a measured window after `start_at`, ms, over every
/// rank's result (`started_unix_ns`); 0 when none started late.
pub fn latest_start_ms(jobs: &[JobOutcome], start_at: u64) -> f64 {
    jobs.iter()
        .flat_map(|j| &j.rank_results)
        .filter_map(|r| r["started_unix_ns"].as_u64())
        .map(|t| t.saturating_sub(start_at) as f64 / 1e6)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster() -> Cluster {
        Cluster::plan(2, &[0, 1], "local", 9464).unwrap()
    }

    #[test]
    fn a_running_job_becomes_a_plan_with_its_rank_placement() {
        let job = json!({
            "id": 7, "name": "cpu-bound-1", "state": "running", "port": 20007,
            "ranks": [{"rank": 0, "node": "n1"}, {"rank": 1, "node": "n0"}]
        });
        let plan = plan_of(&cluster(), &job).unwrap();
        assert_eq!(plan.job_id, 7);
        assert_eq!(plan.nodes, [1, 0]);
        assert_eq!(plan.port, 20007);
        assert_eq!(plan.name, "cpu-bound-1");
    }

    #[test]
    fn a_queued_job_or_an_unknown_node_is_an_error() {
        let queued = json!({"id": 3, "state": "queued", "queue_position": 1, "ranks": []});
        let e = plan_of(&cluster(), &queued).unwrap_err().to_string();
        assert!(e.contains("max_rows"), "{e}");
        let elsewhere = json!({"id": 3, "state": "running", "ranks": [{"node": "n9"}]});
        assert!(plan_of(&cluster(), &elsewhere).is_err());
    }

    #[test]
    fn late_starts() {
        let job = |starts: &[u64]| JobOutcome {
            rank_results: starts
                .iter()
                .map(|s| json!({"started_unix_ns": s}))
                .collect(),
            ..JobOutcome::default()
        };
        let jobs = [job(&[1_000_000, 3_500_000]), job(&[900_000])];
        assert_eq!(latest_start_ms(&jobs, 1_000_000), 2.5);
        assert_eq!(latest_start_ms(&[], 5), 0.0);
    }
}
