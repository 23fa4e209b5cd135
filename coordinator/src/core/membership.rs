//! Nodes joining and leaving: registration, reconciliation of the state with
//! what an agent actually runs, departures, clock samples.

use std::{collections::BTreeSet, net::IpAddr};

use cosched_policy::global::{ClockError, HeartbeatTimestamps, NodeIndex, OffsetEstimate};
use cosched_proto::wire::{CancelJob, HeartbeatReply, MessageKind, ProtocolVersion, Register};

use super::{Core, Link, RankState, SwitchObservation};
use crate::admin::protocol::JobStateView;

impl Core {
    /// An agent speaking `protocol` registered on connection `conn`. Its
    /// jobs are reconciled when its inventory arrives ([`Core::inventory`]).
    pub fn register(
        &mut self,
        register: &Register,
        peer_ip: IpAddr,
        conn: u64,
        protocol: ProtocolVersion,
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
        if self.policy.has_classes() && !MessageKind::ClassSettings.known_to(protocol) {
            return Err(format!(
                "this coordinator runs {}, which needs agents of protocol 1.3 or later (class settings, divisions, frame reports); this agent speaks {}.{}: upgrade it, or switch the coordinator to a policy without classes",
                self.policy, protocol.major, protocol.minor
            ));
        }
        let advertised = register.agent_addr.ip();
        let address = if advertised.is_unspecified() {
            peer_ip
        } else {
            advertised
        };
        if self.nodes[node].is_up() {
            // Checks sent on the replaced connection are not answered on
            // this one.
            self.checks_lost_node(node);
        }
        let state = &mut self.nodes[node];
        let changed = state.record.address != Some(address) || state.record.cpus != register.cpus;
        state.record.address = Some(address);
        state.record.cpus = register.cpus.clone();
        state.link = Link::Up {
            conn,
            reconciled: false,
        };
        state.clock = Default::default();
        state.protocol = protocol;
        state.schedule = None;
        if changed {
            self.persist();
        }
        self.announce_policy(node);
        tracing::info!(node = %register.node_name, %address, conn, protocol = %format_args!("{}.{}", protocol.major, protocol.minor), "node registered");
        Ok(node)
    }

    /// The agent's list of coordinator jobs it runs. Ranks the state says
    /// run there and the agent confirms are kept; ranks it does not know are
    /// given up (the job fails, and whatever is left of them on the node is
    /// reaped: the agent may have restarted without them); jobs it runs that
    /// are not active here are cancelled on it; ranks given up earlier are
    /// reaped. Then pending launches go out.
    pub fn inventory(&mut self, node: NodeIndex, running: &BTreeSet<u32>) {
        let node_name = self.node_name(node);
        let mut cancel: BTreeSet<u32> = running.clone();
        let mut lost = Vec::new();
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
                    job.reason.get_or_insert_with(|| {
                        format!("rank {index} on {node_name}: lost (agent restarted?)")
                    });
                    lost.push((job.id, index));
                }
                RankState::Pending | RankState::Exited(_) | RankState::Lost { .. } => {}
            }
        }
        for &(job, index) in &lost {
            let reason = format!("the agent on {node_name} does not run it");
            self.give_up_rank(job, index, &reason);
        }
        for job_id in cancel {
            tracing::warn!(node = %node_name, job = job_id, "agent runs a job that is not active here: cancelling it");
            self.send(node, CancelJob { job_id });
        }
        if let Link::Up { reconciled, .. } = &mut self.nodes[node].link {
            *reconciled = true;
        }
        self.send_current_division(node);
        self.resend_reaps(node);
        for (job, _) in lost {
            // Same as a failed rank: the rest of the job cannot progress.
            self.stop_ranks(job, "the job lost a rank");
            self.finish_if_ended(job);
        }
        self.launch_pending();
        self.persist();
    }

    /// The node whose link is connection `conn`, if any.
    pub fn node_of_conn(&self, conn: u64) -> Option<NodeIndex> {
        self.nodes.iter().position(|node| node.conn() == Some(conn))
    }

    /// Connection `conn` of `node` ended. Its jobs stay: the agent keeps
    /// running them and reports them when it registers again.
    pub fn disconnected(&mut self, node: NodeIndex, conn: u64) -> Vec<SwitchObservation> {
        if self.nodes[node].conn() != Some(conn) {
            return Vec::new();
        }
        self.nodes[node].link = Link::Down;
        self.nodes[node].schedule = None;
        tracing::warn!(node = %self.node_name(node), conn, "node disconnected");
        self.checks_lost_node(node);
        for observation in self.division_skew.node_gone(node) {
            self.observe(super::Observed::DivisionSkew(observation));
        }
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
