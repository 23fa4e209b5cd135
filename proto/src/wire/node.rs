//! Node membership and liveness: `Register`, heartbeats both ways, policy
//! changes, and error reports.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::kind::MessageKind;
use super::payload::Payload;

/// Agent → coordinator, first message after the handshake: what this node offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    pub node_name: String,
    /// CPUs the agent runs job processes on.
    pub cpus: Vec<u32>,
    /// Where the agent listens for the coordinator.
    pub agent_addr: SocketAddr,
    /// Where the agent serves Prometheus metrics, if it does.
    pub metrics_addr: Option<SocketAddr>,
}

impl Payload for Register {
    const KIND: MessageKind = MessageKind::Register;

    fn check(&self) -> Result<(), String> {
        if self.node_name.is_empty() {
            return Err("empty node name".into());
        }
        Ok(())
    }
}

/// Either side → the other: "I am alive; this is my clock" (`t1_ns`, the
/// sender's clock at sending, in nanoseconds). Each side sends them so each
/// can detect the other's death.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub seq: u64,
    pub t1_ns: u64,
}

impl Payload for Heartbeat {
    const KIND: MessageKind = MessageKind::Heartbeat;
}

/// Answer to a [`Heartbeat`]: echoes `seq` and `t1_ns` and adds the replier's
/// clock at receipt (`t2_ns`) and at sending the reply (`t3_ns`), so the
/// original sender can estimate the clock offset ([`super::ClockSample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatReply {
    pub seq: u64,
    pub t1_ns: u64,
    pub t2_ns: u64,
    pub t3_ns: u64,
}

impl HeartbeatReply {
    /// The reply to `heartbeat`, received at `t2_ns` and answered at `t3_ns`.
    pub fn answering(heartbeat: &Heartbeat, t2_ns: u64, t3_ns: u64) -> Self {
        HeartbeatReply {
            seq: heartbeat.seq,
            t1_ns: heartbeat.t1_ns,
            t2_ns,
            t3_ns,
        }
    }
}

impl Payload for HeartbeatReply {
    const KIND: MessageKind = MessageKind::HeartbeatReply;
}

/// Coordinator → agent: switch the local policy (by its config name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPolicy {
    pub policy: String,
}

impl Payload for SetPolicy {
    const KIND: MessageKind = MessageKind::SetPolicy;

    fn check(&self) -> Result<(), String> {
        if self.policy.is_empty() {
            return Err("empty policy name".into());
        }
        Ok(())
    }
}

/// Either side: a request could not be carried out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReport {
    pub reason: String,
}

impl Payload for ErrorReport {
    const KIND: MessageKind = MessageKind::Error;
}
