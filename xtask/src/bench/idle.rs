//! `bench idle`: what an agent with nothing to react to costs, per policy:
//! the CPU share and the wake-ups of its threads with no job and with
//! sleeping jobs (`sleep` processes adopted as one job each), as the kernel
//! counts them (/proc/<pid>/task/*/status and schedstat).
use std::{
    collections::BTreeMap,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde::Serialize;

use super::solo_agent::SoloAgent;

#[derive(Clone, Debug)]
pub struct IdleOptions {
    pub policies: Vec<String>,
    /// Numbers of sleeping jobs to measure with, ascending.
    pub sleeping_jobs: Vec<u32>,
    /// Time the agent gets after a change before it is measured.
    pub settle: Duration,
    pub window: Duration,
}

impl Default for IdleOptions {
    fn default() -> Self {
        Self {
            policies: vec!["local".into(), "dcs".into()],
            sleeping_jobs: vec![0, 60],
            settle: Duration::from_secs(1),
            window: Duration::from_secs(5),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct IdleRow {
    pub policy: String,
    pub sleeping_jobs: u32,
    /// Context switches of the agent's threads per second: voluntary ones
    /// are wake-ups, involuntary ones preemptions while awake.
    pub switches_per_s: f64,
    pub involuntary_per_s: f64,
    /// CPU time of the agent's threads, percent of one CPU.
    pub cpu_percent: f64,
    pub threads: usize,
}

/// Sleeping processes, killed on drop.
struct Sleepers(Vec<Child>);

impl Drop for Sleepers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// (voluntary + involuntary switches, involuntary, on-CPU ns) per thread.
fn thread_counts(pid: u32) -> BTreeMap<u32, (u64, u64, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return BTreeMap::new();
    };
    dir.filter_map(|entry| {
        let tid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let task = format!("/proc/{pid}/task/{tid}");
        let status = std::fs::read_to_string(format!("{task}/status")).ok()?;
        let count = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let involuntary = count("nonvoluntary_ctxt_switches:");
        let switches = count("voluntary_ctxt_switches:") + involuntary;
        let cpu_ns = std::fs::read_to_string(format!("{task}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        Some((tid, (switches, involuntary, cpu_ns)))
    })
    .collect()
}

fn measure(agent: &SoloAgent, policy: &str, sleeping_jobs: u32, window: Duration) -> IdleRow {
    let before = thread_counts(agent.pid());
    let started = Instant::now();
    std::thread::sleep(window);
    let after = thread_counts(agent.pid());
    let seconds = started.elapsed().as_secs_f64();
    let (mut switches, mut involuntary, mut cpu_ns) = (0, 0, 0);
    for (tid, (s, i, c)) in &after {
        let (s0, i0, c0) = before.get(tid).copied().unwrap_or_default();
        switches += s.saturating_sub(s0);
        involuntary += i.saturating_sub(i0);
        cpu_ns += c.saturating_sub(c0);
    }
    IdleRow {
        policy: policy.to_string(),
        sleeping_jobs,
        switches_per_s: switches as f64 / seconds,
        involuntary_per_s: involuntary as f64 / seconds,
        cpu_percent: cpu_ns as f64 / 1e9 / seconds * 100.0,
        threads: after.len(),
    }
}

/// One agent per policy, measured with each number of sleeping jobs.
pub fn run(agent_bin: &Path, options: &IdleOptions) -> anyhow::Result<Vec<IdleRow>> {
    let dir = std::env::temp_dir().join(format!("cosched-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    for policy in &options.policies {
        let agent = SoloAgent::start(agent_bin, &dir, policy)?;
        let mut sleepers = Sleepers(Vec::new());
        let result = (|| -> anyhow::Result<()> {
            for &jobs in &options.sleeping_jobs {
                while sleepers.0.len() < jobs as usize {
                    let child = Command::new("sleep")
                        .arg("100000")
                        .stdin(Stdio::null())
                        .spawn()
                        .context("starting sleep")?;
                    let job_id = sleepers.0.len() as u32 + 1;
                    let pid = child.id();
                    sleepers.0.push(child);
                    agent.adopt(job_id, &format!("sleeper{job_id}"), vec![pid])?;
                }
                std::thread::sleep(options.settle);
                let row = measure(&agent, policy, jobs, options.window);
                eprintln!(
                    "  {policy}, {jobs} sleeping jobs: {:.1} context switches/s ({:.1} preempted), {:.2} % CPU",
                    row.switches_per_s, row.involuntary_per_s, row.cpu_percent
                );
                rows.push(row);
            }
            Ok(())
        })();
        agent.stop();
        drop(sleepers);
        result?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rows)
}
