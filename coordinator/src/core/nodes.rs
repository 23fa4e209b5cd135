//! The cluster's nodes (matrix columns) and what the coordinator knows of
//! each: its address, its link, its clock.

use std::{collections::BTreeSet, net::IpAddr};

use cosched_policy::global::{ClockOffsetEstimator, OffsetEstimate};
use cosched_proto::wire::{MessageKind, ProtocolVersion, RankRef, SliceSchedule};
use serde::{Deserialize, Serialize};

/// The persisted part of a node: where its ranks are reached, and what must
/// be cleaned up there when its agent is back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub name: String,
    pub address: Option<IpAddr>,
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// Ranks the coordinator gave up while their processes may still run
    /// here: sent as `ReapRanks` whenever the node is ready, until its agent
    /// acknowledges them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unreaped: BTreeSet<RankRef>,
}

/// The link to a node's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Down,
    /// Registered on connection `conn`; `reconciled` once the agent's list of
    /// running jobs arrived (until then nothing is launched there).
    Up {
        conn: u64,
        reconciled: bool,
    },
}

#[derive(Debug, Clone)]
pub struct NodeState {
    pub record: NodeRecord,
    pub link: Link,
    pub clock: ClockOffsetEstimator,
    /// The protocol version the node's agent announced in its handshake
    /// (meaningful while the link is up).
    pub protocol: ProtocolVersion,
    /// The slice schedule this node's agent follows (protocol 1.5), until
    /// a slice it predicts differs from the plan; cleared with the link.
    pub schedule: Option<SliceSchedule>,
}

impl NodeState {
    pub fn new(record: NodeRecord) -> Self {
        Self {
            record,
            link: Link::Down,
            clock: ClockOffsetEstimator::default(),
            protocol: ProtocolVersion { major: 1, minor: 0 },
            schedule: None,
        }
    }

    /// Whether the node's agent understands `kind` (an agent of an older
    /// protocol minor refuses it unanswered).
    pub fn knows(&self, kind: MessageKind) -> bool {
        kind.known_to(self.protocol)
    }

    pub fn is_up(&self) -> bool {
        matches!(self.link, Link::Up { .. })
    }

    /// Up and reconciled: commands may be sent.
    pub fn is_ready(&self) -> bool {
        matches!(
            self.link,
            Link::Up {
                reconciled: true,
                ..
            }
        )
    }

    pub fn conn(&self) -> Option<u64> {
        match self.link {
            Link::Up { conn, .. } => Some(conn),
            Link::Down => None,
        }
    }

    pub fn estimate(&self) -> Option<OffsetEstimate> {
        self.clock.estimate()
    }

    /// A coordinator-clock instant in this node's clock (0 offset before any
    /// estimate: on one machine the clocks are the same).
    pub fn to_agent_clock(&self, coordinator_ns: u64) -> u64 {
        self.estimate().map_or(coordinator_ns, |estimate| {
            estimate.to_agent_clock(coordinator_ns)
        })
    }

    pub fn to_coordinator_clock(&self, agent_ns: u64) -> u64 {
        self.estimate()
            .map_or(agent_ns, |estimate| estimate.to_coordinator_clock(agent_ns))
    }
}
