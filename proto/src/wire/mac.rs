//! HMAC-SHA256: key derivation with labelled inputs, frame tags, and
//! constant-time comparisons.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::header::TAG_LEN;

type HmacSha256 = Hmac<Sha256>;

/// Output of HMAC-SHA256.
pub(crate) type Digest = [u8; 32];

/// HMAC-SHA256 of `parts` under `key`, each part prefixed by its length so
/// that no two different lists of parts hash the same bytes.
pub(crate) fn hmac_parts(key: &[u8], parts: &[&[u8]]) -> Digest {
    // HMAC accepts keys of any length; this cannot fail.
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Constant-time equality, for proofs and anything else secret-derived.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// A key that tags frames in one direction (or the handshake key).
#[derive(Clone)]
pub(crate) struct TagKey(Digest);

impl TagKey {
    pub(crate) fn new(key: Digest) -> Self {
        TagKey(key)
    }

    /// The tag over a frame's header and payload.
    pub(crate) fn tag(&self, header: &[u8], payload: &[u8]) -> [u8; TAG_LEN] {
        self.mac(header, payload).finalize().into_bytes().into()
    }

    /// Checks a received tag in constant time.
    pub(crate) fn verify(&self, header: &[u8], payload: &[u8], tag: &[u8; TAG_LEN]) -> bool {
        self.mac(header, payload).verify_slice(tag).is_ok()
    }

    fn mac(&self, header: &[u8], payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(header);
        mac.update(payload);
        mac
    }
}

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TagKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_length_prefixed() {
        let joined = hmac_parts(b"k", &[b"ab", b"c"]);
        let split = hmac_parts(b"k", &[b"a", b"bc"]);
        assert_ne!(joined, split);
    }

    #[test]
    fn tag_verifies_only_the_same_bytes() {
        let key = TagKey::new([7; 32]);
        let tag = key.tag(b"head", b"body");
        assert!(key.verify(b"head", b"body", &tag));
        assert!(!key.verify(b"head", b"bodY", &tag));
        assert!(!TagKey::new([8; 32]).verify(b"head", b"body", &tag));
    }
}
