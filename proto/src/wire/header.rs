//! The fixed 32-byte frame header and the limits that are checked against it.
//!
//! The header is validated as soon as its 32 bytes are in, before the payload
//! is read, so a bogus length never reserves memory.

use serde::{Deserialize, Serialize};

use super::error::WireError;

/// First bytes of every frame ("cosched wire").
pub const MAGIC: [u8; 4] = *b"CSCW";
/// Frames of another major version are rejected.
pub const PROTOCOL_MAJOR: u8 = 1;
/// Newer minor versions may add message kinds; they are rejected one by one
/// as [`WireError::UnknownKind`], not by version, and a sender checks a kind's
/// [`super::MessageKind::since_minor`] against the peer's minor before using
/// it. 1.0: the first release; 1.1: `CheckProgram`/`ProgramChecked` (submit
/// checks the program on the job's nodes) and `ReapRanks`/`RanksReaped`
/// (ranks the coordinator gave up are killed on their node); 1.2:
/// `ExpectJob` (a job launched by something else, attached to the
/// coordinator, whose processes join it on each node); 1.3:
/// `ClassSettings`, `SwitchDivision`/`DivisionSwitched` and `FrameReport`
/// (best-effort and real-time jobs together: 1GS, 2DCS-TDM, 2DCS-PS);
/// 1.4: `ExpectJob.owner` (see [`super::jobs::EXPECT_OWNER_SINCE_MINOR`]);
/// 1.5: `SliceSchedule` (gang slices announced ahead, switched by the
/// agent's timer); 1.6: `JobFrames.ready` (see
/// [`super::frame_reports::READY_SINCE_MINOR`]: an RT rank's processes are
/// ready for their first frame); 1.7: `LaunchJob.first_frame_wait_ns` and
/// `FirstFrameAt` (see [`super::frame_reports::FIRST_FRAME_SINCE_MINOR`]:
/// the instant an RT job's first frame starts, under 1GS); 1.8:
/// `JobFrames.work_mean_ns`/`work_sd_ns` (see
/// [`super::frame_reports::MOMENTS_SINCE_MINOR`]: what probabilistic
/// admission counts).
pub const PROTOCOL_MINOR: u8 = 8;
/// Bytes in the fixed header.
pub const HEADER_LEN: usize = 32;
/// Bytes in the HMAC-SHA256 tag that ends each frame.
pub const TAG_LEN: usize = 32;
/// Largest frame (header, payload and tag) that is accepted or sent.
pub const MAX_FRAME_LEN: usize = 1 << 20;
/// Largest payload that fits in [`MAX_FRAME_LEN`].
pub const MAX_PAYLOAD_LEN: usize = MAX_FRAME_LEN - HEADER_LEN - TAG_LEN;

/// Flag bits a receiver must understand: a frame with an unknown one is
/// rejected, because it could change what the frame means.
const CRITICAL_FLAGS: u16 = 0x00ff;
/// Critical flags this version defines (none yet).
const KNOWN_CRITICAL_FLAGS: u16 = 0;

/// A protocol version: major must match, minor may differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolVersion {
    pub major: u8,
    pub minor: u8,
}

impl ProtocolVersion {
    /// The version this build speaks.
    pub const CURRENT: ProtocolVersion = ProtocolVersion {
        major: PROTOCOL_MAJOR,
        minor: PROTOCOL_MINOR,
    };
}

/// The decoded fixed header of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub version: ProtocolVersion,
    /// Raw kind code; mapped to [`super::MessageKind`] only after the tag
    /// checks out, so unauthenticated junk is reported as a bad tag.
    pub kind: u16,
    pub flags: u16,
    pub session_id: u64,
    pub sequence: u64,
    pub payload_len: u32,
}

impl FrameHeader {
    /// The header's wire bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0u8; HEADER_LEN];
        bytes[0..4].copy_from_slice(&MAGIC);
        bytes[4] = self.version.major;
        bytes[5] = self.version.minor;
        bytes[6..8].copy_from_slice(&self.kind.to_be_bytes());
        bytes[8..10].copy_from_slice(&self.flags.to_be_bytes());
        // bytes 10..12 are reserved and stay zero.
        bytes[12..20].copy_from_slice(&self.session_id.to_be_bytes());
        bytes[20..28].copy_from_slice(&self.sequence.to_be_bytes());
        bytes[28..32].copy_from_slice(&self.payload_len.to_be_bytes());
        bytes
    }

    /// Validates and decodes a header; `max_frame_len` bounds the whole frame.
    pub fn parse(bytes: &[u8; HEADER_LEN], max_frame_len: usize) -> Result<Self, WireError> {
        let found: [u8; 4] = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if found != MAGIC {
            return Err(WireError::BadMagic { found });
        }
        let version = ProtocolVersion {
            major: bytes[4],
            minor: bytes[5],
        };
        if version.major != PROTOCOL_MAJOR {
            return Err(WireError::UnsupportedVersion {
                major: version.major,
                minor: version.minor,
            });
        }
        let flags = u16::from_be_bytes([bytes[8], bytes[9]]);
        if flags & CRITICAL_FLAGS & !KNOWN_CRITICAL_FLAGS != 0 {
            return Err(WireError::BadHeader {
                detail: "unknown must-understand flag",
            });
        }
        if bytes[10] != 0 || bytes[11] != 0 {
            return Err(WireError::BadHeader {
                detail: "reserved bytes are not zero",
            });
        }
        let header = FrameHeader {
            version,
            kind: u16::from_be_bytes([bytes[6], bytes[7]]),
            flags,
            session_id: u64::from_be_bytes(array_at(bytes, 12)),
            sequence: u64::from_be_bytes(array_at(bytes, 20)),
            payload_len: u32::from_be_bytes(array_at(bytes, 28)),
        };
        let len = header.frame_len();
        if len > max_frame_len as u64 {
            return Err(WireError::Oversized {
                len,
                max: max_frame_len,
            });
        }
        Ok(header)
    }

    /// Bytes of the whole frame this header announces (computed in u64, so a
    /// hostile length cannot overflow on 32-bit targets).
    pub fn frame_len(&self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.payload_len) + TAG_LEN as u64
    }
}

fn array_at<const N: usize>(bytes: &[u8; HEADER_LEN], start: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[start..start + N]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FrameHeader {
        FrameHeader {
            version: ProtocolVersion::CURRENT,
            kind: 16,
            flags: 0x0100,
            session_id: 0x0102_0304_0506_0708,
            sequence: 42,
            payload_len: 7,
        }
    }

    #[test]
    fn header_round_trips() {
        let header = sample();
        assert_eq!(
            FrameHeader::parse(&header.to_bytes(), MAX_FRAME_LEN),
            Ok(header)
        );
    }

    #[test]
    fn ignorable_flags_pass_and_critical_flags_fail() {
        let mut header = sample();
        header.flags = 0xff00;
        assert!(FrameHeader::parse(&header.to_bytes(), MAX_FRAME_LEN).is_ok());
        header.flags = 0x0001;
        let error = FrameHeader::parse(&header.to_bytes(), MAX_FRAME_LEN).unwrap_err();
        assert_eq!(error.reason(), "bad_header");
    }

    #[test]
    fn length_is_checked_against_the_limit() {
        let mut header = sample();
        header.payload_len = u32::MAX;
        let error = FrameHeader::parse(&header.to_bytes(), MAX_FRAME_LEN).unwrap_err();
        assert_eq!(error.reason(), "oversized");
        header.payload_len = MAX_PAYLOAD_LEN as u32;
        assert!(FrameHeader::parse(&header.to_bytes(), MAX_FRAME_LEN).is_ok());
    }
}
