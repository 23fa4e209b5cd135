//! What the benches that run the cluster's coordinator share (`bench gang`,
//! `bench mpi`): its CLI, its active jobs, waiting for an empty matrix, and
//! switching its policy (waiting until every agent runs the local policy
//! that goes with it). How jobs get to it differs per bench and stays there.
use std::{
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use cosched_proto::control::{Reply, Request};
use serde_json::Value;

use crate::{
    bench::jobs,
    cluster::{Cluster, CoordinatorNode, coordinator},
};

/// The coordinator policy while none of its columns runs (dedicated
/// baselines, local policies): space sharing, which enforces nothing.
pub const IDLE_COORDINATOR_POLICY: &str = "fcfs";
/// How long agents may take to apply a policy the coordinator sent.
const POLICY_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

/// The cluster's coordinator, through its admin socket.
#[derive(Clone, Copy)]
pub struct CoordAdmin<'a> {
    pub cluster: &'a Cluster,
}

impl<'a> CoordAdmin<'a> {
    pub fn of(cluster: &'a Cluster) -> Self {
        Self { cluster }
    }

    pub fn node(&self) -> anyhow::Result<&'a CoordinatorNode> {
        self.cluster
            .coordinator
            .as_ref()
            .context("the bench cluster has no coordinator")
    }

    /// `cosched --json ARGS`.
    pub fn cli(&self, args: &[&str]) -> anyhow::Result<Value> {
        coordinator::cli(self.node()?, args)
    }

    /// Ids of the coordinator's active (queued or running) jobs.
    pub fn active_jobs(&self) -> anyhow::Result<Vec<u32>> {
        Ok(job_ids(&self.cli(&["jobs"])?))
    }

    /// Waits until the coordinator holds no job.
    pub fn wait_idle(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let active = self.active_jobs()?;
            if active.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "the coordinator still holds jobs {active:?} after {} s",
                    timeout.as_secs()
                );
            }
            thread::sleep(POLL);
        }
    }

    /// Cancels every active job (best effort, after a failed run) and waits
    /// for an empty matrix.
    pub fn cancel_all(&self, timeout: Duration) -> anyhow::Result<()> {
        for id in self.active_jobs().unwrap_or_default() {
            let _ = self.cli(&["cancel", &id.to_string()]);
        }
        self.wait_idle(timeout)
    }

    /// Switches the coordinator's policy (and checks it took), whatever the
    /// agents run: for `fcfs`, which leaves them at their own policy.
    pub fn set_global(&self, policy: &str) -> anyhow::Result<()> {
        self.cli(&["policy", "set", policy])
            .with_context(|| format!("switching the coordinator to {policy}"))?;
        let status = self.cli(&["status"])?;
        let now = status["status"]["status"]["policy"].as_str().unwrap_or("?");
        if now != policy {
            bail!("the coordinator runs {now} after `policy set {policy}`");
        }
        Ok(())
    }

    /// Switches the coordinator's policy and waits until every agent runs
    /// the local policy that goes with it (`agent_policy`).
    pub fn set_policy(&self, policy: &str, agent_policy: &str) -> anyhow::Result<()> {
        self.set_global(policy)?;
        for node in &self.cluster.nodes {
            let deadline = Instant::now() + POLICY_TIMEOUT;
            loop {
                let running = match jobs::call(self.cluster, node.index, Request::Status)? {
                    Reply::Status { status } => status.policy,
                    other => bail!("unexpected reply to status: {other:?}"),
                };
                if running == agent_policy {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!(
                        "the agent of {} runs {running} {} s after the coordinator switched to {policy} (expected {agent_policy})",
                        node.name,
                        POLICY_TIMEOUT.as_secs()
                    );
                }
                thread::sleep(POLL);
            }
        }
        Ok(())
    }
}

/// The ids in a `cosched --json jobs` answer.
pub fn job_ids(reply: &Value) -> Vec<u32> {
    reply["jobs"]["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .filter_map(|j| j["id"].as_u64())
                .map(|id| id as u32)
                .collect()
        })
        .unwrap_or_default()
}

/// The id of the active job named `name` in a `cosched --json jobs` answer.
pub fn job_id_named(reply: &Value, name: &str) -> Option<u32> {
    reply["jobs"]["jobs"]
        .as_array()?
        .iter()
        .find(|j| j["name"] == name)
        .and_then(|j| j["id"].as_u64())
        .map(|id| id as u32)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn job_ids_and_names_from_a_jobs_answer() {
        let reply = json!({"jobs": {"jobs": [{"id": 4, "name": "a"}, {"id": 9, "name": "b"}]}});
        assert_eq!(job_ids(&reply), [4, 9]);
        assert!(job_ids(&json!({})).is_empty());
        assert_eq!(job_id_named(&reply, "b"), Some(9));
        assert_eq!(job_id_named(&reply, "c"), None);
        assert_eq!(job_id_named(&json!({}), "a"), None);
    }
}
