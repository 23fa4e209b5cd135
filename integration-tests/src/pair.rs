//! Two one-CPU nodes with an agent each, and the ways tests look at them:
//! probing task states as fast as possible, asking the agents now and then.
use std::time::{Duration, Instant};

use cosched_proto::control::{JobInfo, Reply, Request};

use crate::{
    agent::{AgentOpts, TestAgent},
    netns::NodePair,
    synth::RunningJob,
};

/// Two nodes, `n0` on CPU 0 and `n1` on CPU 1, one agent each with its own
/// extra config. Fields drop in order: agents, then the namespaces.
pub struct Cluster {
    pub agents: [TestAgent; 2],
    pub nodes: NodePair,
}

impl Cluster {
    pub fn start(subnet: u8, configs: [&str; 2]) -> Self {
        let nodes = NodePair::new(subnet);
        let agent = |i: usize| {
            TestAgent::start(AgentOpts {
                node: ["n0", "n1"][i],
                cpus: vec![i as u32],
                netns: Some((&nodes, i)),
                extra: configs[i],
            })
        };
        Self {
            agents: [agent(0), agent(1)],
            nodes,
        }
    }

    /// A 2-rank `cosched-synth` job, rank r on node r.
    pub fn launch(&self, job_id: u32, args: &[&str]) -> RunningJob {
        let addrs = [self.nodes.addr[0].as_str(), self.nodes.addr[1].as_str()];
        RunningJob::launch(
            &[&self.agents[0], &self.agents[1]],
            &addrs,
            job_id,
            7100 + job_id as u16,
            args,
        )
    }

    pub fn logs(&self) -> String {
        format!(
            "agent n0:\n{}\nagent n1:\n{}",
            self.agents[0].log(),
            self.agents[1].log()
        )
    }
}

/// Calls `probe` as often as it can until it returns `Some`; `None` when
/// `timeout` passes first. No pause between calls: the task states the tests
/// look for (a boost that ends as soon as the task waits again) can be short.
pub fn watch<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if let Some(found) = probe() {
            return Some(found);
        }
    }
    None
}

/// Asks `check` every 20 ms until it holds; false when `timeout` passes
/// first. For questions to the agents, which need not be hammered.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// `probe` holds on every call for `window` (called as often as it can).
pub fn holds_throughout(window: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < window {
        if !probe() {
            return false;
        }
    }
    true
}

/// The agent's view of one of its jobs.
pub fn job_info(agent: &TestAgent, job_id: u32) -> JobInfo {
    match agent.call(Request::Jobs) {
        Ok(Reply::Jobs { jobs }) => jobs
            .into_iter()
            .find(|j| j.job_id == job_id)
            .unwrap_or_else(|| panic!("agent does not know job {job_id}\n{}", agent.log())),
        other => panic!("jobs: {other:?}\n{}", agent.log()),
    }
}
