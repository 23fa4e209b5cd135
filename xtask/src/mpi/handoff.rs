//! How a job's ranks get to the node agents: the one place every MPI
//! harness (`cluster mpirun --adopt`, `bench mpi`, the integration tests)
//! goes through. One function per way:
//! - [`adopt_ranks`]: a plainly launched job's ranks are found in the job's
//!   cgroup on every node and adopted, by pid, through each node agent's
//!   control socket;
//! - [`await_joined`]: a job launched under `cosched attach` hands itself
//!   over (each node's daemon runs under `cosched join --daemon`, its ranks
//!   are its children); this only waits until every node's agent holds the
//!   ranks, so that nothing is timed before the job is scheduled.
use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use cosched_proto::control::{Client, JobInfo, Reply, Request};

use super::job::MpiJob;

/// How long the ranks of a starting job may take to appear.
pub const RANKS_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a refused adoption is retried. hwloc's x86 discovery (in
/// MPI_Init) binds a rank to each CPU in turn to read its CPUID, so for a
/// moment a rank pinned to its node's CPU may run on another one, and the
/// agent refuses it (it only manages tasks on its own CPUs).
const ADOPT_RETRY: Duration = Duration::from_secs(3);

/// Finds the ranks of `job` on every node and makes them job `job_id`
/// (named `name`) of that node's agent (`agent_sockets[i]`: node i's control
/// socket). Returns the ranks adopted on every node.
pub fn adopt_ranks(
    job: &mut MpiJob,
    agent_sockets: &[PathBuf],
    job_id: u32,
    name: &str,
) -> Result<Vec<Vec<u32>>> {
    let ranks = ranks_per_node(job, agent_sockets)?;
    for ((socket, pids), node) in agent_sockets.iter().zip(&ranks).zip(&job.nodes.nodes) {
        let what = || format!("adopting the ranks {pids:?} of {name} on {}", node.name);
        let deadline = Instant::now() + ADOPT_RETRY;
        loop {
            let reply = Client::connect(socket)
                .with_context(|| format!("agent of {} not reachable", node.name))?
                .call(
                    &Request::Adopt {
                        job_id,
                        name: name.to_string(),
                        pids: pids.clone(),
                        sched: None,
                        move_to_node: false,
                        class: cosched_proto::wire::JobClass::BestEffort,
                    },
                    Duration::from_secs(10),
                )
                .with_context(what);
            match reply {
                Ok(Reply::Adopted { .. }) => break,
                Ok(other) => bail!("{}: unexpected reply {other:?}", what()),
                Err(e)
                    if Instant::now() < deadline
                        && format!("{e:#}").contains("outside this node's CPUs") =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(ranks)
}

/// How long the ranks of an attached job may take to show up in their
/// agents once they run (a join is synchronous: the daemon joined before it
/// forked them, so this is only the agent catching the fork events).
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits until the ranks of `job`, launched under `cosched attach` as the
/// coordinator's job `job_id`, run on every node and that node's agent
/// (`agent_sockets[i]`) holds them in the job: its tasks are at least the
/// daemon's main thread and every thread of the ranks. Returns the ranks.
pub fn await_joined(
    job: &mut MpiJob,
    agent_sockets: &[PathBuf],
    job_id: u32,
) -> Result<Vec<Vec<u32>>> {
    let ranks = ranks_per_node(job, agent_sockets)?;
    for ((socket, pids), node) in agent_sockets.iter().zip(&ranks).zip(&job.nodes.nodes) {
        let deadline = Instant::now() + JOIN_TIMEOUT;
        loop {
            let needed = 1 + pids.iter().map(|&p| threads(p)).sum::<u32>();
            let held =
                attached_job(socket, job_id).with_context(|| format!("agent of {}", node.name))?;
            let tasks = held.as_ref().map_or(0, |j| j.live_tasks);
            if tasks >= needed {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "the agent of {} holds {tasks} task(s) of attached job {job_id} ({}), \
                     not the daemon and the {needed} thread(s) of the ranks {pids:?}: \
                     did the node daemon start under `cosched join --daemon`?",
                    node.name,
                    held.map_or("unknown to it".into(), |j| format!("pids {:?}", j.pids))
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(ranks)
}

/// Job `job_id` as the agent at `socket` lists it, if it does.
fn attached_job(socket: &PathBuf, job_id: u32) -> Result<Option<JobInfo>> {
    let reply = Client::connect(socket)?.call(&Request::Jobs, Duration::from_secs(10))?;
    let Reply::Jobs { jobs } = reply else {
        bail!("unexpected reply {reply:?}");
    };
    Ok(jobs.into_iter().find(|j| j.job_id == job_id))
}

/// The threads of process `pid` now (0 once it is gone).
fn threads(pid: u32) -> u32 {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count() as u32)
}

/// The job's ranks, per node, once every node's ranks exist; one agent
/// socket per node.
fn ranks_per_node(job: &mut MpiJob, agent_sockets: &[PathBuf]) -> Result<Vec<Vec<u32>>> {
    if agent_sockets.len() != job.nodes.nodes.len() {
        bail!(
            "{} agents for {} nodes",
            agent_sockets.len(),
            job.nodes.nodes.len()
        );
    }
    job.ranks(RANKS_TIMEOUT)
}
