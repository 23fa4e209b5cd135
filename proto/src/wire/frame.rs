//! One complete frame as bytes: building a tagged frame, and the received
//! form that is checked against a key.

use super::error::WireError;
use super::header::{FrameHeader, HEADER_LEN, MAX_PAYLOAD_LEN, ProtocolVersion, TAG_LEN};
use super::mac::TagKey;

/// A frame whose header passed validation but whose tag is not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    pub header: FrameHeader,
    pub payload: Vec<u8>,
    pub tag: [u8; TAG_LEN],
}

impl RawFrame {
    /// The frame's wire bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_LEN + self.payload.len() + TAG_LEN);
        bytes.extend_from_slice(&self.header.to_bytes());
        bytes.extend_from_slice(&self.payload);
        bytes.extend_from_slice(&self.tag);
        bytes
    }

    /// Whether `key` produced this frame's tag (constant-time).
    pub(crate) fn is_tagged_by(&self, key: &TagKey) -> bool {
        key.verify(&self.header.to_bytes(), &self.payload, &self.tag)
    }

    pub(crate) fn bad_tag(&self) -> WireError {
        WireError::BadTag {
            kind: self.header.kind,
            sequence: self.header.sequence,
        }
    }
}

/// Builds the wire bytes of a frame tagged with `key`.
pub(crate) fn seal_frame(
    key: &TagKey,
    kind_code: u16,
    session_id: u64,
    sequence: u64,
    payload: &[u8],
) -> Result<Vec<u8>, WireError> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(WireError::Oversized {
            len: (HEADER_LEN + payload.len() + TAG_LEN) as u64,
            max: super::header::MAX_FRAME_LEN,
        });
    }
    let header = FrameHeader {
        version: ProtocolVersion::CURRENT,
        kind: kind_code,
        flags: 0,
        session_id,
        sequence,
        payload_len: payload.len() as u32,
    }
    .to_bytes();
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len() + TAG_LEN);
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(payload);
    bytes.extend_from_slice(&key.tag(&header, payload));
    Ok(bytes)
}
