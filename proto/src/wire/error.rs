//! Why a frame, message or session was rejected.
//!
//! The daemons log every rejection and count it by [`WireError::reason`], so the
//! reasons are a small closed set ([`RejectReason::ALL`]) that is safe to use as
//! a Prometheus label; the detail (which byte, which sequence number) is only in
//! the error's `Display` text.

use std::fmt;

use super::header::PROTOCOL_MAJOR;
use super::kind::MessageKind;

/// The bounded label of a [`WireError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    BadMagic,
    UnsupportedVersion,
    BadHeader,
    Oversized,
    Truncated,
    BadTag,
    Replay,
    WrongSession,
    UnknownKind,
    PayloadDecode,
    PayloadEncode,
    NotEstablished,
    UnexpectedMessage,
    Handshake,
    AlreadyFailed,
    SequenceExhausted,
    Rng,
}

impl RejectReason {
    /// Every reason, so a metrics registry can create all label values up front.
    pub const ALL: [RejectReason; 17] = [
        RejectReason::BadMagic,
        RejectReason::UnsupportedVersion,
        RejectReason::BadHeader,
        RejectReason::Oversized,
        RejectReason::Truncated,
        RejectReason::BadTag,
        RejectReason::Replay,
        RejectReason::WrongSession,
        RejectReason::UnknownKind,
        RejectReason::PayloadDecode,
        RejectReason::PayloadEncode,
        RejectReason::NotEstablished,
        RejectReason::UnexpectedMessage,
        RejectReason::Handshake,
        RejectReason::AlreadyFailed,
        RejectReason::SequenceExhausted,
        RejectReason::Rng,
    ];

    /// The snake_case label.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::BadMagic => "bad_magic",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::BadHeader => "bad_header",
            RejectReason::Oversized => "oversized",
            RejectReason::Truncated => "truncated",
            RejectReason::BadTag => "bad_tag",
            RejectReason::Replay => "replay",
            RejectReason::WrongSession => "wrong_session",
            RejectReason::UnknownKind => "unknown_kind",
            RejectReason::PayloadDecode => "payload_decode",
            RejectReason::PayloadEncode => "payload_encode",
            RejectReason::NotEstablished => "not_established",
            RejectReason::UnexpectedMessage => "unexpected_message",
            RejectReason::Handshake => "handshake",
            RejectReason::AlreadyFailed => "already_failed",
            RejectReason::SequenceExhausted => "sequence_exhausted",
            RejectReason::Rng => "rng",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rejected frame, message or session step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("bad magic {found:02x?}: not a cosched wire frame")]
    BadMagic { found: [u8; 4] },

    #[error("unsupported protocol version {major}.{minor} (this build speaks {PROTOCOL_MAJOR}.x)")]
    UnsupportedVersion { major: u8, minor: u8 },

    #[error("bad frame header: {detail}")]
    BadHeader { detail: &'static str },

    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    Oversized { len: u64, max: usize },

    #[error("input ended inside a frame ({buffered} of at least {needed} bytes)")]
    Truncated { buffered: usize, needed: usize },

    #[error("authentication tag mismatch on a kind-{kind} frame with sequence {sequence}")]
    BadTag { kind: u16, sequence: u64 },

    #[error("replayed or reordered frame: sequence {sequence} is not above {last}")]
    Replay { sequence: u64, last: u64 },

    #[error("frame is for session {found:#018x}, this connection is session {expected:#018x}")]
    WrongSession { found: u64, expected: u64 },

    #[error("unknown message kind {kind} from a peer speaking {major}.{minor}")]
    UnknownKind { kind: u16, major: u8, minor: u8 },

    #[error("cannot decode {kind} payload: {detail}")]
    PayloadDecode { kind: MessageKind, detail: String },

    #[error("cannot send {kind}: {detail}")]
    PayloadEncode { kind: MessageKind, detail: String },

    #[error("{kind} before the handshake finished")]
    NotEstablished { kind: MessageKind },

    #[error("unexpected {kind} while {state}")]
    UnexpectedMessage {
        kind: MessageKind,
        state: &'static str,
    },

    #[error("handshake failed: {detail}")]
    Handshake { detail: &'static str },

    #[error("connection already failed ({earlier}); open a new one")]
    AlreadyFailed { earlier: RejectReason },

    #[error("send sequence numbers exhausted; open a new connection")]
    SequenceExhausted,

    #[error("system random number generator failed: {detail}")]
    Rng { detail: String },
}

/// Longest detail text kept from a peer-controlled decode error, so a hostile
/// payload cannot make log lines arbitrarily long.
const MAX_DETAIL_LEN: usize = 200;

impl WireError {
    /// The bounded label for logs and metrics.
    pub fn reason(&self) -> &'static str {
        self.reject_reason().as_str()
    }

    /// The bounded label as an enum.
    pub fn reject_reason(&self) -> RejectReason {
        match self {
            WireError::BadMagic { .. } => RejectReason::BadMagic,
            WireError::UnsupportedVersion { .. } => RejectReason::UnsupportedVersion,
            WireError::BadHeader { .. } => RejectReason::BadHeader,
            WireError::Oversized { .. } => RejectReason::Oversized,
            WireError::Truncated { .. } => RejectReason::Truncated,
            WireError::BadTag { .. } => RejectReason::BadTag,
            WireError::Replay { .. } => RejectReason::Replay,
            WireError::WrongSession { .. } => RejectReason::WrongSession,
            WireError::UnknownKind { .. } => RejectReason::UnknownKind,
            WireError::PayloadDecode { .. } => RejectReason::PayloadDecode,
            WireError::PayloadEncode { .. } => RejectReason::PayloadEncode,
            WireError::NotEstablished { .. } => RejectReason::NotEstablished,
            WireError::UnexpectedMessage { .. } => RejectReason::UnexpectedMessage,
            WireError::Handshake { .. } => RejectReason::Handshake,
            WireError::AlreadyFailed { .. } => RejectReason::AlreadyFailed,
            WireError::SequenceExhausted => RejectReason::SequenceExhausted,
            WireError::Rng { .. } => RejectReason::Rng,
        }
    }

    /// Whether the connection is unusable after this error.
    ///
    /// Framing errors leave the byte stream without a known frame boundary,
    /// and a failed handshake leaves no keys, so the connection must be closed.
    /// The other errors reject one well-delimited frame (or one local send) and
    /// the connection can go on; the daemons still count them, since repeated
    /// bad tags mean someone is tampering with the link. During the handshake
    /// every error is final: the [`super::Session`] fails whatever the reason.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self.reject_reason(),
            RejectReason::BadMagic
                | RejectReason::UnsupportedVersion
                | RejectReason::BadHeader
                | RejectReason::Oversized
                | RejectReason::Truncated
                | RejectReason::Handshake
                | RejectReason::AlreadyFailed
                | RejectReason::SequenceExhausted
                | RejectReason::Rng
        )
    }

    pub(crate) fn payload_decode(kind: MessageKind, detail: impl fmt::Display) -> Self {
        WireError::PayloadDecode {
            kind,
            detail: bounded_detail(detail),
        }
    }

    pub(crate) fn payload_encode(kind: MessageKind, detail: impl fmt::Display) -> Self {
        WireError::PayloadEncode {
            kind,
            detail: bounded_detail(detail),
        }
    }
}

fn bounded_detail(detail: impl fmt::Display) -> String {
    let mut text = detail.to_string();
    if text.len() > MAX_DETAIL_LEN {
        let mut cut = MAX_DETAIL_LEN;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_unique_snake_case_labels() {
        let mut seen = std::collections::HashSet::new();
        for reason in RejectReason::ALL {
            let label = reason.as_str();
            assert!(seen.insert(label), "duplicate label {label}");
            assert!(label.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }

    #[test]
    fn peer_controlled_detail_is_bounded() {
        let error = WireError::payload_decode(MessageKind::Register, "é".repeat(1000));
        let WireError::PayloadDecode { detail, .. } = error else {
            unreachable!()
        };
        assert!(detail.len() <= MAX_DETAIL_LEN + '…'.len_utf8());
    }
}
