//! How a job's ranks get to the node agents: the one place every MPI
//! harness (`cluster mpirun --adopt`, `bench mpi`, the integration tests)
//! goes through. Today: the ranks are found in the job's cgroup on every
//! node and adopted, by pid, through each node agent's control socket.
//! Once the agents adopt a cgroup themselves (`cosched node adopt
//! --cgroup`) or the coordinator attaches running jobs (`cosched attach`),
//! this is what changes.
use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use cosched_proto::control::{Client, Reply, Request};

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
    if agent_sockets.len() != job.nodes.nodes.len() {
        bail!(
            "{} agents for {} nodes",
            agent_sockets.len(),
            job.nodes.nodes.len()
        );
    }
    let ranks = job.ranks(RANKS_TIMEOUT)?;
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
