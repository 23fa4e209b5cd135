//! Running benchmark jobs (`cosched-synth`) on the local cluster through the
//! agents' control sockets, and collecting what each job did: the benchmark's
//! own numbers and the agents' eBPF view of it.
use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, bail};
use cosched_proto::{
    control::{Client, JobInfo, JobState, Reply, Request},
    job::JobSpec,
};
use serde::Serialize;

use crate::cluster::Cluster;

/// One job to run: which nodes (one rank each) and the benchmark's arguments.
#[derive(Clone, Debug)]
pub struct JobPlan {
    pub job_id: u32,
    pub name: String,
    /// Node index of each rank.
    pub nodes: Vec<usize>,
    /// UDP/TCP port every rank of this job listens on (on its node's address).
    pub port: u16,
    /// Arguments of `cosched-synth` (pattern, mode, compute, duration, ...).
    pub args: Vec<String>,
}

/// What one job did, summed over its ranks.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobOutcome {
    pub job: String,
    pub job_id: u32,
    pub ranks: usize,
    /// Mean over ranks of the benchmark's iterations per second.
    pub iterations_per_s: f64,
    pub iterations: f64,
    pub elapsed_s: f64,
    /// Messages sent / received by the benchmark itself, all ranks.
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Message arrivals the agents observed with eBPF, all ranks.
    pub messages_observed: u64,
    /// Time inside receives (benchmark) and spinning (agents' eBPF), all ranks.
    pub wait_seconds: f64,
    pub spin_seconds: f64,
    /// On-CPU time from eBPF, all ranks.
    pub cpu_seconds: f64,
    pub context_switches: u64,
    pub empty_receives: u64,
    /// The benchmark's own process CPU time over its measured window, all
    /// ranks (the eBPF `cpu_seconds` also covers start-up and handshake).
    pub bench_cpu_seconds: f64,
    /// Times a policy boosted the job's tasks, all ranks.
    pub boosts: u64,
    /// Policy actions (any level change) applied to the job's tasks, all ranks.
    pub actions: u64,
    /// Reaction latency percentiles (message arrival -> action applied), the
    /// worst rank's, microseconds; 0 when no rank had a reaction. The agents
    /// report percentiles, not histograms, so they cannot be merged exactly;
    /// the job-wide percentile lies between the smallest and the largest
    /// rank's, and a coscheduled job moves at the pace of its slowest rank,
    /// so the largest is the bound that matters.
    pub reaction_latency_p50_us: f64,
    pub reaction_latency_p99_us: f64,
    /// Latency samples behind the percentiles, all ranks.
    pub reactions: u64,
    /// Real-time jobs: frames the agents counted as missed and as due in
    /// closed windows, all ranks (0 for best-effort jobs).
    pub rt_missed: u64,
    pub rt_expected: u64,
    /// The raw per-rank benchmark results.
    #[serde(skip)]
    pub rank_results: Vec<serde_json::Value>,
}

/// One request to the agent of node `node` (index), with its error naming
/// the node.
pub fn call(cluster: &Cluster, node: usize, req: Request) -> anyhow::Result<Reply> {
    let n = &cluster.nodes[node];
    let mut c = Client::connect(&n.control_socket).with_context(|| {
        format!(
            "agent of node {} not reachable (is the cluster up?)",
            n.name
        )
    })?;
    c.call(&req, Duration::from_secs(600))
        .with_context(|| format!("agent of node {}", n.name))
}

/// Wall-clock time, ns since the Unix epoch (what `--start-at-unix-ns` takes).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// How long [`run_together`] waits for a rank to end.
const RUN_TOGETHER_WAIT_MS: u64 = 300_000;

/// Runs `plans` concurrently (all start at the same instant), waits for all,
/// and returns one outcome per job. `synth` is the benchmark binary.
pub fn run_together(
    cluster: &Cluster,
    synth: &str,
    plans: &[JobPlan],
) -> anyhow::Result<Vec<JobOutcome>> {
    launch_all(cluster, synth, plans)?;
    collect(cluster, plans, RUN_TOGETHER_WAIT_MS)
}

/// Launches every rank of `plans` through the agents, all measuring from
/// the same instant.
fn launch_all(cluster: &Cluster, synth: &str, plans: &[JobPlan]) -> anyhow::Result<()> {
    // Leave time for every rank of every job to start and handshake.
    let start_at = unix_ns() + 600_000_000 + 150_000_000 * plans.len() as u64;
    for plan in plans {
        let mut plan = plan.clone();
        plan.args
            .extend(["--start-at-unix-ns".into(), start_at.to_string()]);
        launch(
            cluster,
            synth,
            &plan,
            cosched_proto::wire::JobClass::BestEffort,
            None,
        )?;
    }
    Ok(())
}

/// Launches every rank of `plan` through the agents, as `class` with the
/// static scheduling request `sched`; the pid of each rank's process.
pub fn launch(
    cluster: &Cluster,
    synth: &str,
    plan: &JobPlan,
    class: cosched_proto::wire::JobClass,
    sched: Option<cosched_proto::job::SchedRequest>,
) -> anyhow::Result<Vec<u32>> {
    let peers: Vec<String> = plan
        .nodes
        .iter()
        .map(|&n| format!("{}:{}", cluster.nodes[n].address, plan.port))
        .collect();
    let mut pids = Vec::new();
    for (rank, &node) in plan.nodes.iter().enumerate() {
        let spec = JobSpec {
            job_id: plan.job_id,
            name: plan.name.clone(),
            rank: rank as u32,
            size: plan.nodes.len() as u32,
            command: synth.to_string(),
            args: plan.args.clone(),
            env: BTreeMap::new(),
            peers: peers.clone(),
            cpus: vec![],
            sched,
            class: class.clone(),
        };
        match call(cluster, node, Request::Launch { spec })
            .with_context(|| format!("launching {} rank {rank}", plan.name))?
        {
            Reply::Launched { pid, .. } => pids.push(pid),
            other => bail!(
                "launching {} rank {rank}: unexpected reply {other:?}",
                plan.name
            ),
        }
    }
    Ok(pids)
}

/// Waits until every rank of `plans` has ended (at most `wait_ms` per rank),
/// reads what each did (its JSON result, the agent's counters), and makes
/// the agents forget the jobs. One outcome per plan; an error names the rank
/// that failed and quotes its stderr. The ranks may have been launched by
/// anyone (the bench, a coordinator): only the agents' records are used.
pub fn collect(
    cluster: &Cluster,
    plans: &[JobPlan],
    wait_ms: u64,
) -> anyhow::Result<Vec<JobOutcome>> {
    let mut out = Vec::new();
    for plan in plans {
        let mut o = JobOutcome {
            job: plan.name.clone(),
            job_id: plan.job_id,
            ranks: plan.nodes.len(),
            ..JobOutcome::default()
        };
        for (rank, &node) in plan.nodes.iter().enumerate() {
            let info = match call(
                cluster,
                node,
                Request::Wait {
                    job_id: plan.job_id,
                    timeout_ms: wait_ms,
                },
            )
            .with_context(|| format!("waiting for {} rank {rank}", plan.name))?
            {
                Reply::Job { job } => job,
                r => bail!("unexpected reply {r:?}"),
            };
            let result =
                rank_result(&info).with_context(|| format!("{} rank {rank}", plan.name))?;
            add_rank(&mut o, &info, &result);
            o.rank_results.push(result);
            let _ = call(
                cluster,
                node,
                Request::Forget {
                    job_id: plan.job_id,
                },
            );
        }
        let n = o.ranks as f64;
        o.iterations_per_s /= n;
        o.iterations /= n;
        o.elapsed_s /= n;
        out.push(o);
    }
    Ok(out)
}

fn rank_result(info: &JobInfo) -> anyhow::Result<serde_json::Value> {
    let stderr = || {
        info.stderr
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    if info.state
        != (JobState::Exited {
            code: Some(0),
            signal: None,
        })
    {
        bail!("benchmark rank failed ({:?}): {}", info.state, stderr());
    }
    let path = info.stdout.as_ref().context("job has no stdout file")?;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    serde_json::from_str(text.trim())
        .with_context(|| format!("no JSON result in {path}; stderr: {}", stderr()))
}

fn add_rank(o: &mut JobOutcome, info: &JobInfo, r: &serde_json::Value) {
    let f = |k: &str| r.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    o.iterations_per_s += f("iterations_per_s");
    o.iterations += f("iterations");
    o.elapsed_s += f("elapsed_s");
    o.messages_sent += f("messages_sent") as u64;
    o.messages_received += f("messages_received") as u64;
    o.wait_seconds += f("wait_s");
    o.messages_observed += info.stats.messages_observed;
    o.spin_seconds += info.stats.spin_seconds;
    o.cpu_seconds += info.stats.cpu_seconds;
    o.context_switches += info.stats.switches_voluntary + info.stats.switches_preempted;
    o.empty_receives += info.stats.empty_receives;
    o.bench_cpu_seconds += f("cpu_s");
    o.boosts += info.stats.boosts;
    o.actions += info.stats.actions;
    o.reactions += info.stats.reactions;
    if let Some(rt) = &info.rt {
        o.rt_missed += rt.missed;
        o.rt_expected += rt.expected;
    }
    o.reaction_latency_p50_us = o
        .reaction_latency_p50_us
        .max(info.stats.reaction_latency_p50_us);
    o.reaction_latency_p99_us = o
        .reaction_latency_p99_us
        .max(info.stats.reaction_latency_p99_us);
}

/// One job out of several outcomes: for a job whose ranks were launched as
/// separate size-1 jobs (compute-only ranks never talk to each other, so each
/// is its own job for the agents). Counters add up, per-rank means are
/// weighted by ranks, latency percentiles take the worst part's.
pub fn combine(job: &str, parts: &[JobOutcome]) -> JobOutcome {
    let mut o = JobOutcome {
        job: job.to_string(),
        job_id: parts.first().map_or(0, |p| p.job_id),
        ..JobOutcome::default()
    };
    for p in parts {
        let w = p.ranks as f64;
        o.ranks += p.ranks;
        o.iterations_per_s += p.iterations_per_s * w;
        o.iterations += p.iterations * w;
        o.elapsed_s += p.elapsed_s * w;
        o.messages_sent += p.messages_sent;
        o.messages_received += p.messages_received;
        o.messages_observed += p.messages_observed;
        o.wait_seconds += p.wait_seconds;
        o.spin_seconds += p.spin_seconds;
        o.cpu_seconds += p.cpu_seconds;
        o.context_switches += p.context_switches;
        o.empty_receives += p.empty_receives;
        o.bench_cpu_seconds += p.bench_cpu_seconds;
        o.boosts += p.boosts;
        o.actions += p.actions;
        o.reactions += p.reactions;
        o.rt_missed += p.rt_missed;
        o.rt_expected += p.rt_expected;
        o.reaction_latency_p50_us = o.reaction_latency_p50_us.max(p.reaction_latency_p50_us);
        o.reaction_latency_p99_us = o.reaction_latency_p99_us.max(p.reaction_latency_p99_us);
        o.rank_results.extend(p.rank_results.iter().cloned());
    }
    if o.ranks > 0 {
        let n = o.ranks as f64;
        o.iterations_per_s /= n;
        o.iterations /= n;
        o.elapsed_s /= n;
    }
    o
}

/// Best-effort cleanup after a failed run: kills whatever ranks of `plans`
/// may still run (e.g. waiting for a peer whose launch failed) and drops the
/// agents' records, so the next run starts on idle nodes. Errors are ignored:
/// most of these jobs have already exited or were never launched.
pub fn discard(cluster: &Cluster, plans: &[JobPlan]) {
    for plan in plans {
        for &node in &plan.nodes {
            let job_id = plan.job_id;
            let _ = call(cluster, node, Request::Cancel { job_id });
            let _ = call(
                cluster,
                node,
                Request::Wait {
                    job_id,
                    timeout_ms: 5_000,
                },
            );
            let _ = call(cluster, node, Request::Forget { job_id });
        }
    }
}

/// Median of a non-empty list.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use cosched_proto::control::JobStats;

    fn info(stats: JobStats) -> JobInfo {
        JobInfo {
            job_id: 1,
            name: "a".into(),
            rank: 0,
            state: JobState::Exited {
                code: Some(0),
                signal: None,
            },
            pids: vec![],
            live_tasks: 0,
            stats,
            stdout: None,
            stderr: None,
            class: "be".into(),
            rt: None,
        }
    }

    #[test]
    fn add_rank_sums_policy_counters_and_keeps_the_worst_latency() {
        let mut o = JobOutcome::default();
        let result = serde_json::json!({"iterations_per_s": 10.0, "cpu_s": 0.5});
        for (boosts, p50, p99) in [(3, 12.0, 80.0), (4, 20.0, 40.0)] {
            let stats = JobStats {
                boosts,
                actions: boosts * 2,
                reactions: 5,
                reaction_latency_p50_us: p50,
                reaction_latency_p99_us: p99,
                ..JobStats::default()
            };
            add_rank(&mut o, &info(stats), &result);
        }
        assert_eq!((o.boosts, o.actions, o.reactions), (7, 14, 10));
        assert_eq!(o.reaction_latency_p50_us, 20.0);
        assert_eq!(o.reaction_latency_p99_us, 80.0);
        assert_eq!(o.bench_cpu_seconds, 1.0);
    }

    #[test]
    fn combine_weights_per_rank_means_and_sums_counters() {
        let part = |ranks, ips, boosts, p99| JobOutcome {
            job_id: 7,
            ranks,
            iterations_per_s: ips,
            elapsed_s: 2.0,
            cpu_seconds: 1.0,
            boosts,
            reaction_latency_p99_us: p99,
            ..JobOutcome::default()
        };
        let o = combine("c", &[part(1, 100.0, 1, 5.0), part(3, 200.0, 2, 9.0)]);
        assert_eq!(o.job, "c");
        assert_eq!(o.job_id, 7);
        assert_eq!(o.ranks, 4);
        assert_eq!(o.iterations_per_s, 175.0);
        assert_eq!(o.elapsed_s, 2.0);
        assert_eq!(o.cpu_seconds, 2.0);
        assert_eq!(o.boosts, 3);
        assert_eq!(o.reaction_latency_p99_us, 9.0);
        assert_eq!(combine("none", &[]).ranks, 0);
    }

    #[test]
    fn median_of_odd_and_even_lists() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
