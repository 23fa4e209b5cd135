//! Keys derived from the shared secret.
//!
//! Every derivation is HMAC-SHA256 keyed by the secret over a protocol label,
//! a purpose label and (for per-connection values) both nonces, so the
//! handshake key, the two proofs, the session id and the two direction keys
//! are independent of each other, and all per-connection values change with
//! either side's nonce.

use super::handshake::{Nonce, Proof, Role};
use super::mac::{TagKey, hmac_parts};
use super::secret::SharedSecret;

const DOMAIN: &[u8] = b"cosched-wire/1";

/// Tags `Hello` and `HelloAck`: proves the sender holds the secret, though not
/// that it is live (the nonces and proofs do that).
pub(crate) fn handshake_key(secret: &SharedSecret) -> TagKey {
    TagKey::new(hmac_parts(secret.as_bytes(), &[DOMAIN, b"handshake-key"]))
}

/// Everything one connection's handshake derives.
#[derive(Debug, Clone)]
pub(crate) struct SessionKeys {
    pub(crate) session_id: u64,
    pub(crate) send: TagKey,
    pub(crate) recv: TagKey,
    pub(crate) initiator_proof: Proof,
    pub(crate) responder_proof: Proof,
}

impl SessionKeys {
    pub(crate) fn derive(
        secret: &SharedSecret,
        own_role: Role,
        initiator_nonce: &Nonce,
        responder_nonce: &Nonce,
    ) -> Self {
        let secret = secret.as_bytes();
        let nonces = [&initiator_nonce.0[..], &responder_nonce.0[..]];
        let derive = |purpose: &[u8], role: &[u8]| {
            hmac_parts(secret, &[DOMAIN, purpose, role, nonces[0], nonces[1]])
        };
        let id = derive(b"session-id", b"");
        let mut id_bytes = [0u8; 8];
        id_bytes.copy_from_slice(&id[..8]);
        SessionKeys {
            session_id: u64::from_be_bytes(id_bytes),
            send: TagKey::new(derive(b"frame-key", own_role.label())),
            recv: TagKey::new(derive(b"frame-key", own_role.peer().label())),
            initiator_proof: Proof(derive(b"initiator-proof", b"")),
            responder_proof: Proof(derive(b"responder-proof", b"")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ends_agree_and_directions_differ() {
        let secret = SharedSecret::from_bytes(vec![1; 32]).unwrap();
        let (ni, nr) = (Nonce([2; 32]), Nonce([3; 32]));
        let agent = SessionKeys::derive(&secret, Role::Agent, &ni, &nr);
        let coordinator = SessionKeys::derive(&secret, Role::Coordinator, &ni, &nr);
        assert_eq!(agent.session_id, coordinator.session_id);
        assert_eq!(agent.initiator_proof, coordinator.initiator_proof);
        assert_ne!(agent.initiator_proof, agent.responder_proof);
        let tag = agent.send.tag(b"h", b"p");
        assert!(coordinator.recv.verify(b"h", b"p", &tag));
        assert!(!agent.recv.verify(b"h", b"p", &tag));
        let other = SessionKeys::derive(&secret, Role::Agent, &ni, &Nonce([4; 32]));
        assert_ne!(other.session_id, agent.session_id);
        assert!(!other.send.verify(b"h", b"p", &tag));
    }
}
