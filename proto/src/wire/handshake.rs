//! Handshake payloads: `Hello`, `HelloAck`, `HelloConfirm`.
//!
//! They are public so that captures can be decoded and tests can forge them,
//! but only [`super::Session`] sends and consumes them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::WireError;
use super::header::ProtocolVersion;
use super::hex;
use super::kind::MessageKind;
use super::payload::Payload;

/// Bytes in a handshake nonce.
pub const NONCE_LEN: usize = 32;
/// Most bytes in a node name.
pub const MAX_NODE_NAME_LEN: usize = 255;
/// Most capabilities one side may announce.
pub const MAX_CAPABILITIES: usize = 64;
/// Most bytes in one capability name.
pub const MAX_CAPABILITY_LEN: usize = 64;

/// Which daemon is at this end of the connection. The two ends must differ,
/// and each direction's key is derived from the sender's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Coordinator,
    Agent,
}

impl Role {
    /// The role the peer must have.
    pub const fn peer(self) -> Role {
        match self {
            Role::Coordinator => Role::Agent,
            Role::Agent => Role::Coordinator,
        }
    }

    pub(crate) const fn label(self) -> &'static [u8] {
        match self {
            Role::Coordinator => b"coordinator",
            Role::Agent => b"agent",
        }
    }
}

/// A fresh random value each side contributes to a connection.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Nonce(#[serde(with = "hex::fixed")] pub [u8; NONCE_LEN]);

impl Nonce {
    /// A nonce from the system's random generator.
    pub fn random() -> Result<Self, WireError> {
        let mut bytes = [0u8; NONCE_LEN];
        getrandom::fill(&mut bytes).map_err(|error| WireError::Rng {
            detail: error.to_string(),
        })?;
        Ok(Nonce(bytes))
    }
}

impl fmt::Debug for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nonce({})", hex::encode(&self.0))
    }
}

/// An HMAC showing the sender holds the secret and saw both nonces.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Proof(#[serde(with = "hex::fixed")] pub [u8; 32]);

impl fmt::Debug for Proof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Proof({})", hex::encode(&self.0))
    }
}

/// Initiator → responder: who I am and my nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub role: Role,
    pub node_name: String,
    pub protocol: ProtocolVersion,
    pub nonce: Nonce,
    pub capabilities: Vec<String>,
}

/// Responder → initiator: who I am, your nonce back, my nonce, and proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloAck {
    pub role: Role,
    pub node_name: String,
    pub protocol: ProtocolVersion,
    pub initiator_nonce: Nonce,
    pub responder_nonce: Nonce,
    pub capabilities: Vec<String>,
    pub proof: Proof,
}

/// Initiator → responder: proof that the initiator is live, not a replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloConfirm {
    pub proof: Proof,
}

impl Payload for Hello {
    const KIND: MessageKind = MessageKind::Hello;
}

impl Payload for HelloAck {
    const KIND: MessageKind = MessageKind::HelloAck;
}

impl Payload for HelloConfirm {
    const KIND: MessageKind = MessageKind::HelloConfirm;
}

/// What the handshake established about the other end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    pub role: Role,
    pub node_name: String,
    pub protocol: ProtocolVersion,
    pub capabilities: Vec<String>,
    /// The id both ends put in every frame of this connection.
    pub session_id: u64,
}

/// Checks the name and capabilities a `Hello` or `HelloAck` carries.
pub(crate) fn check_identity(node_name: &str, capabilities: &[String]) -> Result<(), WireError> {
    if node_name.is_empty() || node_name.len() > MAX_NODE_NAME_LEN {
        return Err(WireError::Handshake {
            detail: "node name is empty or longer than 255 bytes",
        });
    }
    if capabilities.len() > MAX_CAPABILITIES
        || capabilities
            .iter()
            .any(|capability| capability.is_empty() || capability.len() > MAX_CAPABILITY_LEN)
    {
        return Err(WireError::Handshake {
            detail: "capabilities are too many or malformed",
        });
    }
    Ok(())
}
