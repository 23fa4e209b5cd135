//! Nodes joining and leaving: registration, reconciliation of the state with
//! what an agent actually runs, departures, clock samples.

use std::{collections::BTreeSet, net::IpAddr};

use cosched_policy::global::{ClockError, HeartbeatTimestamps, NodeIndex, OffsetEstimate};
use cosched_proto::wire::{CancelJob, HeartbeatReply, Register, SetPolicy};

use super::{Core, Link, RankState, SwitchObservation};
use crate::admin::protocol::JobStateView;

impl Core {
    /// An agent registered on connection `conn`. Its jobs are reconciled
    /// when its inventory arrives ([`Core::inventory`]).
    pub fn register(
        &mut self,
        register: &Register,
        peer_ip: IpAddr,
        conn: u64,
    ) -> Result<NodeIndex, String> {
        let node = self
            .nodes
            .iter()
            .position(|node| node.record.name == register.node_name)
            .ok_or_else(|| {
                format!(
                    "unknown node {:?}; this cluster's nodes are {:?}",
                    register.node_name, self.config.nodes
                )
            })?;
        let advertised = register.agent_addr.ip();
        let address = if advertised.is_unspecified() {
            peer_ip
        } else {
            advertised
        };
        let state = &mut self.nodes[node];
        let changed = state.record.address != Some(address) || state.record.cpus != register.cpus;
        state.record.address = Some(address);
        state.record.cpus = register.cpus.clone();
        state.link = Link::Up {
            conn,
            reconciled: false,
        };
        state.clock = Default::default();
        if changed {
            self.persist();
        }
        self.send(
            node,
            SetPolicy {
                policy: self.policy.as_str().into(),
            },
        );
        tracing::info!(node = %register.node_name, %address, conn, "node registered");
        Ok(node)
    }

    /// The agent's list of coordinator jobs it runs. Ranks the state says
    /// run there and the agent confirms are kept; ranks it does not know are
    /// lost (the job fails); jobs it runs that are not active here are
    /// cancelled on it. Then pending launches go out.
    pub fn inventory(&mut self, node: NodeIndex, running: &BTreeSet<u32>) {
        let node_name = self.node_name(node);
        let mut cancel: BTreeSet<u32> = running.clone();
        let mut failed = Vec::new();
        for job in self.jobs.values_mut() {
            if job.state != JobStateView::Running {
                continue;
            }
            let Some(index) = job.rank_on(node) else {
                continue;
            };
            let rank = &mut job.ranks[index];
            let confirmed = running.contains(&job.id);
            match &rank.state {
                RankState::Launched | RankState::Running if confirmed => {
                    rank.state = RankState::Running;
                    cancel.remove(&job.id);
                }
                RankState::Launched | RankState::Running => {
                    rank.state = RankState::Lost {
                        reason: format!("the agent on {node_name} does not run it"),
                    };
                    job.reason.get_or_insert_with(|| {
                        format!("rank {index} on {node_name}: lost (agent restarted?)")
                    });
                    failed.push(job.id);
                }
                RankState::Pending | RankState::Exited(_) | RankState::Lost { .. } => {}
            }
        }
        for job_id in cancel {
            tracing::warn!(node = %node_name, job = job_id, "agent runs a job that is not active here: cancelling it");
            self.send(node, CancelJob { job_id });
        }
        if let Link::Up { reconciled, .. } = &mut self.nodes[node].link {
            *reconciled = true;
        }
        for job in failed {
            self.stop_ranks_after_loss(job);
        }
        self.launch_pending();
        self.persist();
    }

    fn stop_ranks_after_loss(&mut self, job: u32) {
        // Same as a failed rank: the rest of the job cannot progress.
        let exited_elsewhere = "the job lost a rank";
        if let Some(record) = self.jobs.get(&job) {
            let live: Vec<(usize, NodeIndex)> = record
                .ranks
                .iter()
                .enumerate()
                .filter(|(_, rank)| !rank.state.is_ended())
                .map(|(index, rank)| (index, rank.node))
                .collect();
            for (index, node) in live {
                let reachable =
                    self.nodes[node].is_up() && self.jobs[&job].ranks[index].state.may_run();
                if reachable {
                    self.send(node, CancelJob { job_id: job });
                } else {
                    self.jobs.get_mut(&job).expect("present").ranks[index].state =
                        RankState::Lost {
                            reason: exited_elsewhere.into(),
                        };
                }
            }
        }
        self.finish_if_ended(job);
    }

    /// Connection `conn` of `node` ended. Its jobs stay: the agent keeps
    /// running them and reports them when it registers again.
    pub fn disconnected(&mut self, node: NodeIndex, conn: u64) -> Vec<SwitchObservation> {
        if self.nodes[node].conn() != Some(conn) {
            return Vec::new();
        }
        self.nodes[node].link = Link::Down;
        tracing::warn!(node = %self.node_name(node), conn, "node disconnected");
        self.skew.node_gone(node)
    }

    /// A reply to one of the coordinator's heartbeats, received at `t4_ns`.
    pub fn heartbeat_reply(
        &mut self,
        node: NodeIndex,
        reply: &HeartbeatReply,
        t4_ns: u64,
    ) -> Result<OffsetEstimate, ClockError> {
        self.nodes[node].clock.record(HeartbeatTimestamps {
            coordinator_send_ns: reply.t1_ns,
            agent_receive_ns: reply.t2_ns,
            agent_send_ns: reply.t3_ns,
            coordinator_receive_ns: t4_ns,
        })
    }
}
